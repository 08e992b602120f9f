/*
 * mpirun / mpiexec — start an MPI job on psport: ranks placed on the nodes (hosts, hostfile,
 * the batch partition, or this node), started with PULC spawn through psid, served the PMI-1
 * wire protocol over TCP (PMI_PORT + PMI_ID), their output forwarded (optionally labelled),
 * stdin to rank 0, the job's exit status returned.  The whole job is killed when a rank fails
 * or aborts, on a timeout, and on Ctrl-C.  With no cluster configured and no psid running it
 * starts one for the job.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pmi_server.h"
#include "pulc.h"
#include "settings.h"
#include "tool.h"

static const char *prog = "mpirun";
extern char **environ;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [options] PROGRAM [ARG...]\n"
            "Start an MPI program on psport (ranks started through psid, PMI-1 served here).\n"
            "  -n, -np N            number of ranks (default 1)\n"
            "  -f, -hostfile FILE   hosts (one per line, optional ':N' or 'slots=N' ranks each)\n"
            "  -hosts H1,H2,...     hosts (names, IPv4 addresses or node ids; ':N' slots)\n"
            "  -ppn N               ranks per host, consecutive (overrides slots)\n"
            "  -genv NAME VALUE     set NAME=VALUE for all ranks (-env: the same)\n"
            "  -l, -prepend-rank    prefix output lines with '[rank] '\n"
            "  -wdir DIR            working directory of the ranks (default: the current one)\n"
            "  -bind-to core        bind each rank to one core of its node, cores as hwloc finds\n"
            "                       them, in order (or: none)\n"
            "  -timeout S           kill the job after S seconds (also MPIEXEC_TIMEOUT)\n"
            "  -v, -verbose         report where each rank runs and how it ended\n"
            "  -h, -help            this text\n"
            "Without -hosts/-hostfile the ranks go to the batch partition (SLURM_JOB_NODELIST,\n"
            "PBS_NODEFILE, PSP_PARTITION, PSP_HOSTFILE) if there is one, else to this node.\n"
            "Exit status: 0 when all ranks exited 0, else the first failure's code (128+N for\n"
            "signal N; 1 for a rank that exited after MPI_Init without MPI_Finalize); 124 on\n"
            "timeout.  Settings: psinfo -c.\n",
            prog);
}

struct host {
    char *name;
    int slots;
    int node; /* resolved node id */
};

struct job {
    int np, ppn, label, verbose, bind;
    unsigned timeout_s;
    const char *wdir;
    struct host *hosts;
    int nhosts;
    char **genv;
    int ngenv;
    char **argv;
    /* run state */
    int *node_of;
    PSP_TaskId_t *tids;
    char *done;
    int *code;
    PSP_Spawner_t *sp;
    struct pmi_server *pmi;
    int listen_fd;
    int *cfd; /* PMI connection fds, indexed by pmi connection handle */
    int ncfd;
    pid_t own_psid;
    char own_dir[PATH_MAX];
};

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- hosts ---- */

static void add_host(struct job *j, const char *text)
{
    char *name = strdup(text);
    int slots = 1;
    char *p = strstr(name, "slots=");
    if (p) {
        slots = atoi(p + 6);
        while (p > name && (p[-1] == ' ' || p[-1] == '\t'))
            p--;
        *p = 0;
    } else if ((p = strrchr(name, ':')) && p[1]) {
        slots = atoi(p + 1);
        *p = 0;
    }
    name[strcspn(name, " \t")] = 0;
    if (!*name)
        psp_usage_error("empty host name in '%s'", text);
    if (slots < 1)
        psp_usage_error("host '%s': slots must be at least 1", text);
    j->hosts = realloc(j->hosts, (size_t)(j->nhosts + 1) * sizeof *j->hosts);
    j->hosts[j->nhosts++] = (struct host){name, slots, -1};
}

static void read_hostfile(struct job *j, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        psp_fail_exit("hostfile %s: %s", path, strerror(errno));
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\r\n")] = 0;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s)
            add_host(j, s);
    }
    fclose(f);
    if (!j->nhosts)
        psp_fail_exit("hostfile %s names no host", path);
}

/* psid's view of the nodes, for resolving host names; returns this node's id. */
static int local_node(PSP_NodeInfo_t **nodes, int *count)
{
    static PSP_NodeInfo_t v[4096];
    char err[512];
    int me = -1, n = PSP_GetNodes(v, 4096, &me, err, sizeof err);
    if (n < 0)
        psp_fail_exit("psid: %s", err);
    *count = n < 4096 ? n : 4096;
    *nodes = v;
    return me;
}

/* Node id of a host: a node id, an IPv4 address, or a name resolved to one. -1 if none. */
static int resolve(const char *name, const PSP_NodeInfo_t *nodes, int count)
{
    char *end;
    long id = strtol(name, &end, 10);
    if (!*end && end != name) {
        for (int i = 0; i < count; i++)
            if (nodes[i].id == id)
                return (int)id;
        return -1;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    if (getaddrinfo(name, NULL, &hints, &res) != 0)
        return -1;
    int found = -1;
    for (struct addrinfo *a = res; a && found < 0; a = a->ai_next) {
        uint32_t ip = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr;
        for (int i = 0; i < count && found < 0; i++)
            if (nodes[i].ip == ip)
                found = nodes[i].id;
    }
    freeaddrinfo(res);
    return found;
}

/* Where each rank goes. */
static void place(struct job *j, int me, const PSP_NodeInfo_t *nodes, int count)
{
    j->node_of = calloc((size_t)j->np, sizeof *j->node_of);
    if (!j->nhosts) {
        for (int r = 0; r < j->np; r++)
            j->node_of[r] = me;
        return;
    }
    for (int h = 0; h < j->nhosts; h++) {
        j->hosts[h].node = resolve(j->hosts[h].name, nodes, count);
        if (j->hosts[h].node < 0)
            psp_fail_exit("host '%s' is not a node of this psport cluster (see psiadmin)",
                          j->hosts[h].name);
    }
    int r = 0;
    while (r < j->np)
        for (int h = 0; h < j->nhosts && r < j->np; h++)
            for (int k = 0; k < (j->ppn ? j->ppn : j->hosts[h].slots) && r < j->np; k++)
                j->node_of[r++] = j->hosts[h].node;
}

/* Hosts from the batch partition (Slurm, PBS, PSP_PARTITION, PSP_HOSTFILE), if any. */
static void partition_hosts(struct job *j)
{
    char *list = NULL, err[512];
    int rc = PSP_PartitionHosts(&list, err, sizeof err);
    if (rc < 0)
        psp_fail_exit("%s", err);
    if (rc == 0)
        return;
    char *save = NULL;
    for (char *h = strtok_r(list, "\n", &save); h; h = strtok_r(NULL, "\n", &save))
        add_host(j, h);
    free(list);
}

/* ---- a psid of our own ---- */

static int psid_reachable(void)
{
    char err[256];
    return PSP_GetNodes(NULL, 0, NULL, err, sizeof err) >= 0;
}

/* Whether UDP port p on loopback can be bound now. */
static int udp_port_free(int p)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A UDP port P with P and P + 1 free on loopback: PSP_UDP_PORT's default (the settings
 * table) when it is, else one from the ephemeral range the kernel hands out. */
static int free_udp_pair(void)
{
    int dflt = atoi(psp_setting_str("PSP_UDP_PORT"));
    if (udp_port_free(dflt) && udp_port_free(dflt + 1))
        return dflt;
    for (int tries = 0; tries < 64; tries++) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int p = 0;
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0)
            p = ntohs(a.sin_port);
        close(fd);
        if (p > 0 && p < 65535 && udp_port_free(p) && udp_port_free(p + 1))
            return p;
    }
    return dflt; /* psid then says what is in the way */
}

static struct job *own_psid_job; /* for stop_own_psid_at_exit */
static void stop_own_psid(struct job *j);

/* Every way out of mpirun (an error after psid started, too) stops the psid it started. */
static void stop_own_psid_at_exit(void)
{
    if (own_psid_job)
        stop_own_psid(own_psid_job);
}

static void start_own_psid(struct job *j)
{
    const char *nodes_file = psp_setting_str("PSP_NODES_FILE");
    if (*nodes_file)
        psp_fail_exit("psid is not running at %s (the cluster in %s needs one per node: start "
                      "psid there)",
                      psp_setting_str("PSP_PSID_SOCKET"), nodes_file);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 6);
    if (n <= 0)
        psp_fail_exit("cannot find my own path to start psid: %s", strerror(errno));
    self[n] = 0;
    char *slash = strrchr(self, '/');
    strcpy(slash + 1, "psid");
    /* A fresh name each time: a directory left by a job that was killed (and whose pid came
     * round again) must not stop this one. */
    snprintf(j->own_dir, sizeof j->own_dir, "%s/psport-mpirun-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(j->own_dir))
        psp_fail_exit("cannot create %s: %s", j->own_dir, strerror(errno));
    char sock[PATH_MAX + 16], pid[PATH_MAX + 16], log[PATH_MAX + 16];
    snprintf(sock, sizeof sock, "%s/psid.sock", j->own_dir);
    snprintf(pid, sizeof pid, "%s/psid.pid", j->own_dir);
    snprintf(log, sizeof log, "%s/psid.log", j->own_dir);
    setenv("PSP_PSID_SOCKET", sock, 1);
    /* Its NIC (port P) and daemon link (P + 1) on loopback: a free pair unless the user chose
     * PSP_UDP_PORT, so that two jobs on one machine each get their own psid. */
    if (!getenv("PSP_UDP_PORT")) {
        char port[16];
        snprintf(port, sizeof port, "%d", free_udp_pair());
        setenv("PSP_UDP_PORT", port, 1);
    }
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0)
        psp_fail_exit("fork: %s", strerror(errno));
    if (p == 0) {
        /* Ends (SIGTERM: it kills its tasks and removes its socket) if mpirun is killed. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        setsid();
        execl(self, "psid", "--foreground", "--socket", sock, "--pidfile", pid, (char *)NULL);
        _exit(127);
    }
    j->own_psid = p;
    own_psid_job = j;
    atexit(stop_own_psid_at_exit);
    /* A loaded machine can take seconds to start it: wait up to 10 s, and never leave it
     * behind holding the NIC's UDP port when it did not come up. */
    for (int i = 0; i < 1000; i++) {
        if (psid_reachable())
            return;
        int st;
        if (waitpid(p, &st, WNOHANG) == p) {
            j->own_psid = 0; /* reaped; and its log stays for the user */
            psp_fail_exit("the psid I started (%s) exited; its log: %s", self, log);
        }
        usleep(10000);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    j->own_psid = 0;
    psp_fail_exit("the psid I started did not come up within 10 s (stopped it); its log: %s", log);
}

static void stop_own_psid(struct job *j)
{
    if (j->own_psid <= 0)
        return;
    kill(j->own_psid, SIGTERM);
    waitpid(j->own_psid, NULL, 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/psid.log", j->own_dir);
    unlink(path);
    rmdir(j->own_dir);
    j->own_psid = 0;
}

/* ---- PMI over TCP ---- */

static int pmi_listen(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        psp_fail_exit("socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1024) != 0)
        psp_fail_exit("cannot listen for PMI connections: %s", strerror(errno));
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    *port = ntohs(a.sin_port);
    return fd;
}

static void pmi_accept(struct job *j)
{
    for (;;) {
        int fd = accept4(j->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int c = pmi_server_connect(j->pmi);
        if (c < 0) {
            close(fd);
            continue;
        }
        if (c >= j->ncfd) {
            j->cfd = realloc(j->cfd, (size_t)(c + 1) * sizeof *j->cfd);
            for (int i = j->ncfd; i <= c; i++)
                j->cfd[i] = -1;
            j->ncfd = c + 1;
        }
        j->cfd[c] = fd;
    }
}

static void pmi_flush(struct job *j, int c)
{
    size_t len;
    const char *out;
    while ((out = pmi_server_output(j->pmi, c, &len))) {
        ssize_t w = send(j->cfd[c], out, len, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        pmi_server_consumed(j->pmi, c, (size_t)w);
    }
}

static void pmi_close(struct job *j, int c)
{
    close(j->cfd[c]);
    j->cfd[c] = -1;
    pmi_server_disconnect(j->pmi, c);
}

/* ---- the job ---- */

/* Signal every rank still running, without waiting for the answers: a rank on a node that
 * stopped responding held mpirun (and the other ranks' last output) until that node was
 * declared dead.  The ranks' exits come as events. */
static void kill_job(struct job *j, int sig)
{
    for (int r = 0; r < j->np; r++)
        if (j->tids[r] && !j->done[r])
            PSP_SpawnerSignalPost(j->sp, j->tids[r], sig);
}

static char **rank_env(struct job *j, int r, const char *pmi_port, const char *kvs)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + (size_t)j->ngenv + 16, sizeof *env);
    size_t k = 0;
    static const char *ours[] = {
        "PMI_PORT=",        "PMI_ID=",          "PMI_RANK=",     "PMI_SIZE=",   "PMI_FD=",
        "MPI_LOCALRANKID=", "MPI_LOCALNRANKS=", "PSP_BIND_CPU=", "PMI_KVSNAME="};
    for (size_t i = 0; i < n; i++) {
        int skip = 0;
        for (unsigned o = 0; o < sizeof ours / sizeof ours[0]; o++)
            skip |= !strncmp(environ[i], ours[o], strlen(ours[o]));
        for (int g = 0; g < j->ngenv && !skip; g++) {
            size_t nl = (size_t)(strchr(j->genv[g], '=') - j->genv[g]) + 1;
            skip |= !strncmp(environ[i], j->genv[g], nl);
        }
        if (!skip)
            env[k++] = environ[i];
    }
    for (int g = 0; g < j->ngenv; g++)
        env[k++] = j->genv[g];
    int local = 0, nlocal = 0;
    for (int q = 0; q < j->np; q++)
        if (j->node_of[q] == j->node_of[r]) {
            if (q < r)
                local++;
            nlocal++;
        }
    char b[8][128];
    snprintf(b[0], sizeof b[0], "PMI_PORT=%s", pmi_port);
    snprintf(b[1], sizeof b[1], "PMI_ID=%d", r);
    snprintf(b[2], sizeof b[2], "PMI_RANK=%d", r);
    snprintf(b[3], sizeof b[3], "PMI_SIZE=%d", j->np);
    snprintf(b[4], sizeof b[4], "MPI_LOCALRANKID=%d", local);
    snprintf(b[5], sizeof b[5], "MPI_LOCALNRANKS=%d", nlocal);
    snprintf(b[6], sizeof b[6], "PMI_KVSNAME=%s", kvs);
    snprintf(b[7], sizeof b[7], "PSP_BIND_CPU=%d", j->bind ? local : -1);
    for (int i = 0; i < 8; i++)
        if (i != 7 || j->bind)
            env[k++] = strdup(b[i]);
    return env;
}

static int run(struct job *j)
{
    PSP_NodeInfo_t *nodes;
    int count;
    if (!psid_reachable())
        start_own_psid(j);
    int me = local_node(&nodes, &count);
    place(j, me, nodes, count);
    char myip[INET_ADDRSTRLEN] = "127.0.0.1";
    for (int i = 0; i < count; i++)
        if (nodes[i].id == me) {
            struct in_addr a = {nodes[i].ip};
            inet_ntop(AF_INET, &a, myip, sizeof myip);
        }
    char mapping[8192], kvs[64], pmi_port[96];
    if (pmi_process_mapping(j->node_of, j->np, mapping, sizeof mapping))
        snprintf(mapping, sizeof mapping, "(vector)");
    snprintf(kvs, sizeof kvs, "kvs_%ld_%d", (long)getpid(), me);
    j->pmi = pmi_server_new(j->np, kvs, mapping);
    int port;
    j->listen_fd = pmi_listen(&port);
    snprintf(pmi_port, sizeof pmi_port, "%s:%d", myip, port);

    char err[512];
    j->sp = PSP_SpawnerOpen(err, sizeof err);
    if (!j->sp)
        psp_fail_exit("%s", err);
    j->tids = calloc((size_t)j->np, sizeof *j->tids);
    j->done = calloc((size_t)j->np, 1);
    j->code = calloc((size_t)j->np, sizeof *j->code);
    PSP_SpawnReq_t *reqs = calloc((size_t)j->np, sizeof *reqs);
    int *errs = calloc((size_t)j->np, sizeof *errs);
    char ***envs = calloc((size_t)j->np, sizeof *envs);
    for (int r = 0; r < j->np; r++) {
        envs[r] = rank_env(j, r, pmi_port, kvs);
        reqs[r] =
            (PSP_SpawnReq_t){j->node_of[r], (const char *const *)j->argv,
                             (const char *const *)envs[r], j->wdir, r == 0 ? PSP_SPAWN_STDIN : 0};
    }
    int started = PSP_SpawnMany(j->sp, reqs, (unsigned)j->np, j->tids, errs, err, sizeof err);
    int result = 0;
    if (started < j->np) {
        int bad = 0;
        while (bad < j->np && !errs[bad])
            bad++;
        const char *host = NULL;
        for (int h = 0; h < j->nhosts; h++)
            if (j->hosts[h].node == j->node_of[bad])
                host = j->hosts[h].name;
        fprintf(stderr, "%s: rank %d%s%s: %s\n", prog, bad, host ? " on host " : "",
                host ? host : "", err);
        result = errs[bad] == -EHOSTDOWN || errs[bad] == -ENXIO ? 255 : 127;
        kill_job(j, SIGKILL);
        for (int r = 0; r < j->np; r++)
            j->done[r] |= !j->tids[r];
    }
    if (j->verbose)
        for (int r = 0; r < j->np; r++)
            if (j->tids[r])
                fprintf(stderr, "%s: rank %d is task %d:%d\n", prog, r, PSP_TASK_NODE(j->tids[r]),
                        PSP_TASK_PID(j->tids[r]));
    int left = 0;
    for (int r = 0; r < j->np; r++)
        left += !j->done[r];
    int stdin_open = started == j->np;
    double deadline = j->timeout_s ? now_s() + j->timeout_s : 0;
    int killing = result != 0;
    double kill_at = 0;
    struct pollfd *pf = NULL; /* grows with the PMI connections: one per rank */
    size_t pf_cap = 0;
    while (left) {
        if (pf_cap < 3 + (size_t)j->ncfd) {
            pf_cap = 3 + (size_t)j->ncfd + 64;
            struct pollfd *np = realloc(pf, pf_cap * sizeof *pf);
            if (!np)
                psp_fail_exit("out of memory for %d PMI connections", j->ncfd);
            pf = np;
        }
        int n = 0;
        pf[n++] = (struct pollfd){PSP_SpawnerFd(j->sp), POLLIN, 0};
        pf[n++] = (struct pollfd){j->listen_fd, POLLIN, 0};
        int stdin_slot = -1;
        /* stdin is read only while little of it waits for rank 0: a rank 0 that does not
         * read holds mpirun back, instead of its psid's memory growing */
        if (stdin_open && PSP_SpawnerStdinQueued(j->sp) < PSP_SPAWNER_STDIN_WINDOW) {
            stdin_slot = n;
            pf[n++] = (struct pollfd){0, POLLIN, 0};
        }
        int first_conn = n;
        for (int c = 0; c < j->ncfd; c++)
            pf[n++] = (struct pollfd){j->cfd[c], j->cfd[c] >= 0 ? POLLIN : 0, 0};
        int wait = PSP_SpawnerPending(j->sp) ? 0 : 200;
        poll(pf, (nfds_t)n, wait);
        if (got_signal && !killing) {
            fprintf(stderr, "%s: signal %d: killing the job\n", prog, (int)got_signal);
            kill_job(j, SIGTERM);
            result = 128 + got_signal;
            killing = 1;
            kill_at = now_s() + 1.0;
        }
        if (deadline && now_s() >= deadline && !killing) {
            fprintf(stderr, "%s: timeout after %u s: killing the job\n", prog, j->timeout_s);
            kill_job(j, SIGKILL);
            result = 124;
            killing = 1;
        }
        if (kill_at && now_s() >= kill_at) {
            kill_job(j, SIGKILL);
            kill_at = 0;
        }
        if (pf[1].revents)
            pmi_accept(j);
        for (int c = 0; c < n - first_conn; c++) {
            if (!pf[first_conn + c].revents || j->cfd[c] < 0)
                continue;
            char buf[65536];
            ssize_t got = recv(j->cfd[c], buf, sizeof buf, 0);
            if (got <= 0) {
                pmi_close(j, c);
                continue;
            }
            int code = 0;
            const char *msg = NULL;
            int ev = pmi_server_input(j->pmi, c, buf, (size_t)got, &code, &msg);
            for (int k = 0; k < j->ncfd; k++)
                if (j->cfd[k] >= 0)
                    pmi_flush(j, k);
            if (ev == PMI_EV_ABORT && !killing) {
                fprintf(stderr,
                        "%s: rank %d called MPI_Abort (exit code %d)%s%s: killing the job\n", prog,
                        pmi_server_rank(j->pmi, c), code, msg && *msg ? ": " : "", msg ? msg : "");
                result = code & 0xff ? code & 0xff : 1; /* what exit() keeps, never 0 */
                killing = 1;
                kill_job(j, SIGKILL);
            } else if (ev == PMI_EV_ERROR) {
                pmi_close(j, c);
            }
        }
        if (stdin_slot >= 0 && pf[stdin_slot].revents) {
            char buf[65536];
            ssize_t got = read(0, buf, sizeof buf);
            if (got > 0 && j->tids[0])
                PSP_SpawnerStdin(j->sp, j->tids[0], buf, (size_t)got, 0);
            if (got <= 0) {
                if (j->tids[0])
                    PSP_SpawnerStdin(j->sp, j->tids[0], NULL, 0, 1);
                stdin_open = 0;
            }
        }
        /* A bounded number of events a round: ranks that print without pause must not keep
         * signals, the timeout and PMI waiting (the next poll does not wait while more are
         * pending). */
        PSP_Event_t ev;
        int got = 0;
        for (int k = 0; k < 256 && (got = PSP_SpawnerEvent(j->sp, &ev, 0)) > 0; k++) {
            int r = 0;
            while (r < j->np && j->tids[r] != ev.tid)
                r++;
            if (r == j->np)
                continue;
            if (ev.kind == PSP_EVENT_OUTPUT) {
                /* Stopped by the user (Ctrl-C, SIGTERM, SIGHUP): what is still queued is
                 * dropped, not waited for (a reader that stopped, or a flood of it). */
                if (got_signal)
                    continue;
                int w = PSP_EventWrite(&ev, ev.stream == 2 ? 2 : 1, j->label ? r : -1);
                if (w == -EPIPE && ev.stream != 2 && !killing) {
                    /* mpirun | head: the reader is gone; end the job as a pipeline would. */
                    fprintf(stderr, "%s: standard output closed: killing the job\n", prog);
                    kill_job(j, SIGTERM);
                    result = 128 + SIGPIPE;
                    killing = 1;
                    kill_at = now_s() + 1.0;
                }
                continue;
            }
            if (j->done[r])
                continue;
            j->done[r] = 1;
            left--;
            if (r == 0 && stdin_open) { /* stdin's reader is gone: whoever feeds us gets EPIPE */
                stdin_open = 0;
                psp_stdin_to_null(); /* what went to rank 0 now would wait forever */
            }
            int code = PSP_EventExitCode(&ev);
            /* Exit status 0 after MPI_Init without MPI_Finalize: the job failed (the others
             * would wait for it forever, or fail talking to it, naming the wrong cause). */
            int unfinished = !code && !(ev.flags & PSP_EXIT_LOST) && !WIFSIGNALED(ev.status) &&
                             pmi_server_unfinished(j->pmi, r);
            if (unfinished)
                code = 1;
            j->code[r] = code;
            if (j->verbose || (code && !killing)) {
                char how[64];
                if (ev.flags & PSP_EXIT_LOST)
                    snprintf(how, sizeof how, "was lost: its node died");
                else if (WIFSIGNALED(ev.status))
                    snprintf(how, sizeof how, "%s", strsignal(WTERMSIG(ev.status)));
                else if (unfinished)
                    snprintf(how, sizeof how, "exited without calling MPI_Finalize");
                else if (code)
                    snprintf(how, sizeof how, "exited with status %d", code);
                else
                    snprintf(how, sizeof how, "exited normally");
                fprintf(stderr, "%s: rank %d (task %d:%d) %s%s\n", prog, r, PSP_TASK_NODE(ev.tid),
                        PSP_TASK_PID(ev.tid), how,
                        code && !killing && left ? ": killing the job" : "");
            }
            if (code && !killing) {
                result = code;
                killing = 1;
                kill_job(j, SIGKILL);
            }
        }
        if (got < 0) {
            fprintf(stderr, "%s: lost the connection to psid: %s\n", prog, strerror(-got));
            result = result ? result : 255;
            break;
        }
    }
    free(pf);
    PSP_SpawnerClose(j->sp);
    for (int c = 0; c < j->ncfd; c++)
        if (j->cfd[c] >= 0)
            close(j->cfd[c]);
    close(j->listen_fd);
    pmi_server_free(j->pmi);
    return result;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    prog = base ? base + 1 : argv[0];
    psp_tool_init(prog, usage);
    struct job j;
    memset(&j, 0, sizeof j);
    j.np = 1;
    const char *t = getenv("MPIEXEC_TIMEOUT");
    if (t && *t)
        j.timeout_s = (unsigned)psp_opt_u64("MPIEXEC_TIMEOUT", t, 1, 1u << 30);
    int i = 1;
    /* MPICH-style single-dash long options; stop at the program. */
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--")) {
            i++;
            break;
        }
        if (o[1] == '-')
            o++; /* --np == -np */
#define NEED(k)                                                                                    \
    do {                                                                                           \
        if (i + (k) >= argc)                                                                       \
            psp_usage_error("%s needs %d argument%s", argv[i], (k), (k) > 1 ? "s" : "");           \
    } while (0)
        if (!strcmp(o, "-n") || !strcmp(o, "-np")) {
            NEED(1);
            j.np = (int)psp_opt_u64("np", argv[++i], 1, 1u << 20);
        } else if (!strcmp(o, "-f") || !strcmp(o, "-hostfile") || !strcmp(o, "-machinefile")) {
            NEED(1);
            read_hostfile(&j, argv[++i]);
        } else if (!strcmp(o, "-hosts") || !strcmp(o, "-host")) {
            NEED(1);
            char *list = strdup(argv[++i]), *save = NULL;
            for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save))
                add_host(&j, h);
            free(list);
        } else if (!strcmp(o, "-ppn")) {
            NEED(1);
            j.ppn = (int)psp_opt_u64("ppn", argv[++i], 1, 1u << 16);
        } else if (!strcmp(o, "-genv") || !strcmp(o, "-env")) {
            NEED(2);
            size_t l = strlen(argv[i + 1]) + strlen(argv[i + 2]) + 2;
            char *kv = malloc(l);
            snprintf(kv, l, "%s=%s", argv[i + 1], argv[i + 2]);
            j.genv = realloc(j.genv, (size_t)(j.ngenv + 1) * sizeof *j.genv);
            j.genv[j.ngenv++] = kv;
            i += 2;
        } else if (!strcmp(o, "-l") || !strcmp(o, "-prepend-rank")) {
            j.label = 1;
        } else if (!strcmp(o, "-wdir")) {
            NEED(1);
            j.wdir = argv[++i];
        } else if (!strcmp(o, "-bind-to")) {
            NEED(1);
            i++;
            if (!strcmp(argv[i], "core"))
                j.bind = 1;
            else if (strcmp(argv[i], "none"))
                psp_usage_error("-bind-to wants core or none, not '%s'", argv[i]);
        } else if (!strcmp(o, "-timeout")) {
            NEED(1);
            j.timeout_s = (unsigned)psp_opt_u64("timeout", argv[++i], 1, 1u << 30);
        } else if (!strcmp(o, "-v") || !strcmp(o, "-verbose")) {
            j.verbose = 1;
        } else if (!strcmp(o, "-h") || !strcmp(o, "-help")) {
            usage(stdout);
            return 0;
        } else {
            psp_usage_error("unknown option '%s'", argv[i]);
        }
    }
    if (i >= argc)
        psp_usage_error("no program given");
    j.argv = argv + i;
    if (j.ppn && !j.nhosts)
        psp_usage_error("-ppn needs hosts (-hosts or -hostfile)");
    if (!j.nhosts)
        partition_hosts(&j);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* the terminal or the ssh session went away */
    sigaction(SIGQUIT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    PSP_EventWriteStopOn(&got_signal); /* after Ctrl-C no write waits for a stopped reader */
    int rc = run(&j);
    stop_own_psid(&j);
    own_psid_job = NULL; /* j is main's: exit() runs the handler after main returned */
    return rc;
}
