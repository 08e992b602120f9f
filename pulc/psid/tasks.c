/*
 * tasks.c — the tasks this node runs for spawners anywhere in the cluster.
 *
 * A task is vforked by psid and executed as the spawner's user with the spawner's
 * environment, directory and arguments.  The child reports a failed chdir or exec through a
 * close-on-exec pipe, so the spawner gets the errno.  The task's stdout and stderr are pipes
 * psid reads; complete lines go to the spawner's node (partial lines wait for their newline,
 * or for the end of the stream), and the exit status follows the last line.
 */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cores.h"
#include "log.h"
#include "mcp_env.h"
#include "psid_int.h"
#include "spawn_proto.h"

#define LINE_MAX_BYTES 16384u        /* a longer line is forwarded in pieces */
#define EXIT_GRACE_NS  1000000000ull /* wait this long for output after the exit */
#define KILL_GRACE_NS  1000000000ull /* SIGTERM, then SIGKILL after this */

struct notice {
    uint16_t node;
    uint32_t key;
};

struct task {
    pid_t pid;
    uint16_t from_node;
    uint32_t key;
    int32_t spawner_pid;
    uint32_t uid;
    uint32_t flags;
    int out_fd[2]; /* stdout, stderr read ends; -1 at end of stream */
    char *line[2]; /* partial line per stream */
    size_t line_len[2];
    int in_fd; /* stdin write end, or -1 */
    char *in_buf;
    size_t in_len, in_off;
    int in_eof;
    int exited, status;
    int killed; /* a signal that ends tasks went to its group: SIGKILL what is left at the end */
    int held;   /* its spawner's psid asked to hold its output (output_flow, PSID_M_HOLD) */
    uint64_t start_ns, exit_ns, kill_at_ns;
    struct notice *notes;
    size_t nnotes;
};

static struct task **T;
static size_t nT, capT;

unsigned psid_task_count(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < nT; i++)
        n += !T[i]->exited;
    return n;
}

static struct task *find(pid_t pid)
{
    for (size_t i = 0; i < nT; i++)
        if (T[i]->pid == pid)
            return T[i];
    return NULL;
}

/* ---- the child side: async-signal-safe only (psid has a second thread) ---- */

static void child_fail(int fd, int e)
{
    ssize_t w = write(fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* Find the program on PATH as execvpe would, but with the task's PATH. */
static void child_exec(const char *const *argv, const char *const *envp, const char *path,
                       int errfd)
{
    const char *prog = argv[0];
    if (strchr(prog, '/')) {
        execve(prog, (char *const *)argv, (char *const *)envp);
        child_fail(errfd, errno);
    }
    int err = ENOENT;
    size_t plen = strlen(prog);
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        char buf[4096];
        if (dlen + plen + 2 <= sizeof buf) {
            if (dlen) {
                memcpy(buf, p, dlen);
                buf[dlen] = '/';
                memcpy(buf + dlen + 1, prog, plen + 1);
            } else {
                memcpy(buf, prog, plen + 1);
            }
            execve(buf, (char *const *)argv, (char *const *)envp);
            if (errno == EACCES)
                err = EACCES;
            else if (errno != ENOENT && errno != ENOTDIR)
                child_fail(errfd, errno);
        }
        if (!colon)
            break;
        p = colon + 1;
    }
    child_fail(errfd, err);
}

/* The descriptor limit tasks start with: psid's own before it raised it (psid_task_nofile). */
static struct rlimit task_nofile;
static int task_nofile_set;

void psid_task_nofile(const struct rlimit *lim)
{
    task_nofile = *lim;
    task_nofile_set = 1;
}

static void child(const struct psid_spawn_req *r, const gid_t *groups, int ngroups, int in_fd,
                  int out_fd, int err_fd, int errpipe, const char *path, pid_t psid_pid,
                  int bind_cpu)
{
    /* Signals as a fresh process gets them: psid blocks some and ignores SIGPIPE. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < 32; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    setsid();
    /* the limit psid was started with, not the one it raised for itself: programs that close
     * or select() over every possible descriptor expect the usual soft limit */
    if (task_nofile_set)
        setrlimit(RLIMIT_NOFILE, &task_nofile);
    if (dup2(errpipe, 3) < 0 || dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        child_fail(errpipe, errno);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    close_range(4, ~0u, 0);
    if (getuid() == 0) {
        if (setgroups((size_t)ngroups, groups) != 0 || setgid(r->gid) != 0 || setuid(r->uid) != 0)
            child_fail(3, errno);
    } else if (getuid() != r->uid) {
        child_fail(3, EPERM);
    }
    /* A task psid can no longer forward or signal dies with it, unless detached.  Set after
     * the change of user: the kernel clears the parent-death signal when credentials change. */
    if (!(r->flags & PSPC_SPAWN_DETACHED) &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != psid_pid))
        child_fail(3, ESRCH);
    if (bind_cpu >= 0) {
        cpu_set_t set;
        psid_core_cpuset(bind_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            child_fail(3, errno);
    }
    if (r->cwd[0] && chdir(r->cwd) != 0)
        child_fail(3, errno);
    child_exec(r->argv, r->envp, path, 3);
}

/* ---- the parent side ---- */

int psid_task_spawn(const struct psid_spawn_req *r)
{
    gid_t groups[256];
    int ngroups = 1;
    groups[0] = r->gid;
    struct passwd *pw = getpwuid(r->uid);
    if (pw) {
        ngroups = 256;
        if (getgrouplist(pw->pw_name, r->gid, groups, &ngroups) < 0)
            ngroups = 256;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    int bind_cpu = -1;
    for (const char *const *e = r->envp; *e; e++) {
        if (!strncmp(*e, "PATH=", 5))
            path = *e + 5;
        /* mpirun -bind-to core: the rank's index on this node, bound to that core (hwloc's
         * cores in order, wrapping around: cores.c). */
        if (!strncmp(*e, "PSP_BIND_CPU=", 13) && atoi(*e + 13) >= 0)
            bind_cpu = atoi(*e + 13);
    }

    /* The task talks to this node's psid, wherever its spawner's environment pointed. */
    size_t ne = 0;
    while (r->envp[ne])
        ne++;
    const char **envp = calloc(ne + 3, sizeof *envp);
    char sock_env[4200], node_env[32];
    snprintf(sock_env, sizeof sock_env, "PSP_PSID_SOCKET=%s", psid_g.sock_path);
    snprintf(node_env, sizeof node_env, "PSP_NODE_ID=%u", psid_g.node);
    if (!envp)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(r->envp[i], "PSP_PSID_SOCKET=", 16) && strncmp(r->envp[i], "PSP_NODE_ID=", 12))
            envp[k++] = r->envp[i];
    envp[k++] = sock_env;
    envp[k++] = node_env;
    struct psid_spawn_req rr = *r;
    rr.envp = envp;
    r = &rr;

    int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, ep[2] = {-1, -1};
    int rc = 0;
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(ep, O_CLOEXEC))
        rc = -errno;
    if (!rc && (r->flags & PSPC_SPAWN_STDIN) && pipe2(in, O_CLOEXEC))
        rc = -errno;
    if (!rc && !(r->flags & PSPC_SPAWN_STDIN) &&
        (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        rc = -errno;
    struct task *t = rc ? NULL : calloc(1, sizeof *t);
    if (!rc && !t)
        rc = -ENOMEM;
    if (!rc && nT == capT) {
        size_t cap = capT ? capT * 2 : 64;
        struct task **nt = realloc(T, cap * sizeof *nt);
        if (!nt)
            rc = -ENOMEM;
        else
            T = nt, capT = cap;
    }
    pid_t pid = -1, self = getpid();
    if (!rc) {
        /* vfork: no copy of psid's page tables (the area and images are large); the child
         * only makes system calls until it execs or exits, and psid waits meanwhile. */
        pid = vfork();
        if (pid < 0)
            rc = -errno;
        else if (pid == 0)
            child(r, groups, ngroups, in[0], out[1], err[1], ep[1], path, self, bind_cpu);
    }
    int fds[] = {out[1], err[1], in[0], ep[1]};
    for (unsigned i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (!rc) {
        int e = 0;
        ssize_t n;
        do
            n = read(ep[0], &e, sizeof e);
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof e) {
            rc = -e;
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
    }
    if (ep[0] >= 0)
        close(ep[0]);
    free(envp);
    if (rc) {
        int keep[] = {out[0], err[0], in[1]};
        for (unsigned i = 0; i < 3; i++)
            if (keep[i] >= 0)
                close(keep[i]);
        free(t);
        psid_cstats.spawn_fail++;
        return rc;
    }
    t->pid = pid;
    t->from_node = r->from_node;
    t->key = r->key;
    t->spawner_pid = r->spawner_pid;
    t->uid = r->uid;
    t->flags = r->flags;
    t->out_fd[0] = out[0];
    t->out_fd[1] = err[0];
    t->in_fd = in[1];
    t->start_ns = mcp_now_ns();
    for (unsigned i = 0; i < 2; i++)
        fcntl(t->out_fd[i], F_SETFL, O_NONBLOCK);
    if (t->in_fd >= 0)
        fcntl(t->in_fd, F_SETFL, O_NONBLOCK);
    T[nT++] = t;
    psid_cstats.spawned++;
    PSP_INFO("task %d (uid %u) started for node %u pid %d: %s", pid, r->uid, r->from_node,
             r->spawner_pid, r->argv[0]);
    return pid;
}

/* Send len bytes of stream s of task t to its spawner. */
static void forward(struct task *t, unsigned s, const char *data, size_t len)
{
    if (!len)
        return;
    psid_deliver_output(t->from_node, t->key, psid_task_id(psid_g.node, t->pid), s + 1, data,
                        (uint32_t)len);
    psid_cstats.lines_out++;
}

/* Forward the complete lines in stream s's buffer (all of it at the end of the stream). */
static void flush_lines(struct task *t, unsigned s, int all)
{
    char *b = t->line[s];
    size_t n = t->line_len[s];
    if (!n)
        return;
    size_t upto = n;
    if (!all) {
        while (upto && b[upto - 1] != '\n')
            upto--;
        if (!upto && n >= LINE_MAX_BYTES)
            upto = n; /* an endless line: forward it in pieces */
    }
    forward(t, s, b, upto);
    memmove(b, b + upto, n - upto);
    t->line_len[s] = n - upto;
}

static void read_output(struct task *t, unsigned s)
{
    if (!t->line[s] && !(t->line[s] = malloc(LINE_MAX_BYTES))) {
        PSP_ERROR("out of memory for the output of task %d", t->pid);
        return;
    }
    for (int rounds = 0; rounds < 16; rounds++) {
        ssize_t r =
            read(t->out_fd[s], t->line[s] + t->line_len[s], LINE_MAX_BYTES - t->line_len[s]);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            break;
        if (r <= 0) { /* end of stream (or an error, the same for us) */
            flush_lines(t, s, 1);
            close(t->out_fd[s]);
            t->out_fd[s] = -1;
            return;
        }
        t->line_len[s] += (size_t)r;
        flush_lines(t, s, 0);
    }
}

/* Tell the spawner that `bytes` of its stdin data are done with: it sends more only then
 * (PSPC_OP_EV_STDIN), so what waits here for a task that does not read stays bounded. */
static void stdin_taken(const struct task *t, uint64_t bytes)
{
    if (bytes)
        psid_deliver_stdin_taken(t->from_node, t->key, psid_task_id(psid_g.node, t->pid), bytes);
}

/* Write what waits into the task's stdin as far as its pipe takes it; once the task has
 * closed its stdin, what waits is dropped. */
static void write_stdin(struct task *t)
{
    uint64_t done = 0;
    while (t->in_fd >= 0 && t->in_off < t->in_len) {
        ssize_t w = write(t->in_fd, t->in_buf + t->in_off, t->in_len - t->in_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w < 0) { /* the task closed its stdin: drop the rest */
            close(t->in_fd);
            t->in_fd = -1;
            break;
        }
        t->in_off += (size_t)w;
        done += (uint64_t)w;
    }
    if (t->in_fd < 0) {
        done += t->in_len - t->in_off;
        t->in_off = t->in_len;
    }
    stdin_taken(t, done);
    if (t->in_off == t->in_len) {
        t->in_off = t->in_len = 0;
        if (t->in_eof && t->in_fd >= 0) {
            close(t->in_fd);
            t->in_fd = -1;
        }
    }
}

void psid_task_stdin(pid_t pid, const void *data, uint32_t len, int eof)
{
    struct task *t = find(pid);
    if (!t)
        return; /* it ended: its spawner sees the exit and stops feeding it */
    if (t->in_fd < 0) {
        stdin_taken(t, len); /* closed by the task: dropped */
        return;
    }
    if (len) {
        if (t->in_off) {
            memmove(t->in_buf, t->in_buf + t->in_off, t->in_len - t->in_off);
            t->in_len -= t->in_off;
            t->in_off = 0;
        }
        char *nb = realloc(t->in_buf, t->in_len + len);
        if (!nb) {
            PSP_ERROR("out of memory for the stdin of task %d: %u bytes dropped", pid, len);
            stdin_taken(t, len);
            return;
        }
        t->in_buf = nb;
        memcpy(t->in_buf + t->in_len, data, len);
        t->in_len += len;
    }
    if (eof)
        t->in_eof = 1;
    write_stdin(t);
}

/* Whether sig ends a process by default: such a signal to a task is meant for all of it. */
static int ends_task(int sig)
{
    return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

int psid_task_signal(pid_t pid, int sig, uint32_t uid)
{
    struct task *t = pid > 0 ? find(pid) : NULL;
    if (!t || (t->exited && sig == 0))
        return -ESRCH;
    if (sig < 0 || sig > SIGRTMAX)
        return -EINVAL;
    if (uid != 0 && uid != t->uid)
        return -EPERM;
    /* To the task's process group (it is the leader, setsid in child()): a rank started
     * through a shell or a wrapper is its child, and must get the signal too.  A leader that
     * exited while its group lives on (its output still open) is reached the same way. */
    if (kill(-pid, sig) != 0) {
        if (t->exited)
            return -ESRCH;
        if (kill(pid, sig) != 0)
            return -errno;
    }
    if (ends_task(sig))
        t->killed = 1;
    psid_cstats.signals++;
    return 0;
}

int psid_task_notify(pid_t pid, uint16_t node, uint32_t key)
{
    struct task *t = pid > 0 ? find(pid) : NULL;
    if (!t || t->exited)
        return -ESRCH;
    struct notice *nn = realloc(t->notes, (t->nnotes + 1) * sizeof *nn);
    if (!nn)
        return -ENOMEM;
    t->notes = nn;
    t->notes[t->nnotes++] = (struct notice){node, key};
    return 0;
}

static void kill_task(struct task *t, uint64_t now)
{
    if (t->exited || t->kill_at_ns)
        return;
    if (kill(-t->pid, SIGTERM) != 0)
        kill(t->pid, SIGTERM);
    t->killed = 1;
    t->kill_at_ns = now + KILL_GRACE_NS;
    psid_cstats.orphans_killed++;
    if (t->in_fd >= 0) {
        close(t->in_fd);
        t->in_fd = -1;
    }
}

void psid_task_hold(uint16_t node, uint32_t key, int hold)
{
    for (size_t i = 0; i < nT; i++)
        if (T[i]->from_node == node && T[i]->key == key)
            T[i]->held = hold;
}

void psid_task_orphans(uint16_t node, uint32_t key)
{
    uint64_t now = mcp_now_ns();
    for (size_t i = 0; i < nT; i++)
        if (T[i]->from_node == node && T[i]->key == key && !(T[i]->flags & PSPC_SPAWN_DETACHED)) {
            PSP_INFO("task %d: its spawner (node %u pid %d) is gone: killing it", T[i]->pid, node,
                     T[i]->spawner_pid);
            kill_task(T[i], now);
        }
}

void psid_task_node_died(uint16_t node)
{
    uint64_t now = mcp_now_ns();
    for (size_t i = 0; i < nT; i++) {
        struct task *t = T[i];
        if (t->from_node == node && !(t->flags & PSPC_SPAWN_DETACHED)) {
            PSP_INFO("task %d: the node of its spawner (%u) died: killing it", t->pid, node);
            kill_task(t, now);
        }
        size_t k = 0;
        for (size_t j = 0; j < t->nnotes; j++)
            if (t->notes[j].node != node)
                t->notes[k++] = t->notes[j];
        t->nnotes = k;
    }
}

unsigned psid_task_pollfds_max(void)
{
    return (unsigned)(3 * nT);
}

/* The task (index into T) of each descriptor psid_task_pollfds() gave, for psid_task_handle:
 * one look, where a search of every task for every ready descriptor grew with their square. */
static uint32_t *pf_task;
static size_t pf_task_cap;

unsigned psid_task_pollfds(struct pollfd *pf, unsigned max)
{
    if (pf_task_cap < max) {
        uint32_t *grown = realloc(pf_task, (size_t)max * sizeof *pf_task);
        if (!grown)
            max = (unsigned)pf_task_cap; /* poll fewer now; the next round tries again */
        else {
            pf_task = grown;
            pf_task_cap = max;
        }
    }
    unsigned n = 0;
    for (size_t i = 0; i < nT; i++) {
        struct task *t = T[i];
        /* Back-pressure: while a lot is queued for the spawner (on the daemon link to its
         * node, or on its connection: then the spawner's psid says so, PSID_M_HOLD), leave the
         * pipes full so the task blocks instead of psid's memory growing. */
        int hold = t->held || (t->from_node != psid_g.node &&
                               psid_dlink_queued(psid_g.dlink, t->from_node, PSID_CHAN_BULK) >
                                   PSID_OUT_BACKLOG_MAX);
        for (unsigned s = 0; s < 2 && !hold; s++)
            if (t->out_fd[s] >= 0 && n < max) {
                pf_task[n] = (uint32_t)i;
                pf[n++] = (struct pollfd){t->out_fd[s], POLLIN, 0};
            }
        if (t->in_fd >= 0 && t->in_len > t->in_off && n < max) {
            pf_task[n] = (uint32_t)i;
            pf[n++] = (struct pollfd){t->in_fd, POLLOUT, 0};
        }
    }
    return n;
}

void psid_task_handle(const struct pollfd *pf, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        if (!pf[k].revents || k >= pf_task_cap || pf_task[k] >= nT)
            continue;
        struct task *t = T[pf_task[k]];
        for (unsigned s = 0; s < 2; s++)
            if (t->out_fd[s] == pf[k].fd)
                read_output(t, s);
        if (t->in_fd == pf[k].fd) {
            if (pf[k].revents & (POLLERR | POLLHUP)) { /* closed by the task */
                close(t->in_fd);
                t->in_fd = -1;
            }
            write_stdin(t); /* (after a close: what waits is dropped, and said so) */
        }
    }
}

/* The task ended and its output is forwarded: send the exit to everyone who waits. */
static void finish(size_t i)
{
    struct task *t = T[i];
    for (unsigned s = 0; s < 2; s++) {
        if (t->out_fd[s] >= 0) {
            read_output(t, s);
            if (t->out_fd[s] >= 0) {
                flush_lines(t, s, 1);
                close(t->out_fd[s]);
            }
        }
        free(t->line[s]);
    }
    if (t->in_fd >= 0)
        close(t->in_fd);
    /* A killed task's group members that outlived its leader (a rank under a shell that
     * ignores SIGTERM) go now.  The kernel keeps the id while the group has members; an empty
     * group's id could only come round to a new group leader within the 1 s grace after a
     * whole wrap of the pid numbers. */
    if (t->killed)
        kill(-t->pid, SIGKILL);
    psid_deliver_exit(t->from_node, t->key, psid_task_id(psid_g.node, t->pid), t->status, 0);
    for (size_t j = 0; j < t->nnotes; j++)
        psid_deliver_exit(t->notes[j].node, t->notes[j].key, psid_task_id(psid_g.node, t->pid),
                          t->status, PSPC_EXIT_NOTIFY);
    psid_cstats.exits++;
    PSP_INFO("task %d ended: status 0x%x", t->pid, t->status);
    free(t->notes);
    free(t->in_buf);
    free(t);
    T[i] = T[--nT];
}

void psid_task_reap(void)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0)
            break;
        struct task *t = find(p);
        if (!t)
            continue;
        t->exited = 1;
        t->status = st;
        t->exit_ns = mcp_now_ns();
    }
    uint64_t now = mcp_now_ns();
    for (size_t i = nT; i-- > 0;) {
        struct task *t = T[i];
        if (t->kill_at_ns && now >= t->kill_at_ns) { /* the group too if the leader is gone */
            if (kill(-t->pid, SIGKILL) != 0 && !t->exited)
                kill(t->pid, SIGKILL);
            t->kill_at_ns = 0;
        }
        if (t->exited &&
            ((t->out_fd[0] < 0 && t->out_fd[1] < 0) || now - t->exit_ns >= EXIT_GRACE_NS))
            finish(i);
    }
}

int psid_task_timeout(void)
{
    uint64_t now = mcp_now_ns(), next = UINT64_MAX;
    for (size_t i = 0; i < nT; i++) {
        struct task *t = T[i];
        if (t->kill_at_ns && t->kill_at_ns < next)
            next = t->kill_at_ns;
        if (t->exited) {
            uint64_t d = t->exit_ns + EXIT_GRACE_NS;
            if (t->out_fd[0] < 0 && t->out_fd[1] < 0)
                d = now;
            if (d < next)
                next = d;
        }
    }
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : (int)((next - now) / 1000000 + 1);
}

unsigned psid_task_list(struct pspc_task *out, unsigned max)
{
    uint64_t now = mcp_now_ns();
    unsigned n = 0;
    for (size_t i = 0; i < nT && n < max; i++) {
        struct task *t = T[i];
        out[n++] = (struct pspc_task){psid_task_id(psid_g.node, t->pid),
                                      ((uint64_t)t->from_node << 32) | (uint32_t)t->spawner_pid,
                                      t->uid, t->flags, (now - t->start_ns) / 1000000};
    }
    return n;
}

void psid_task_kill_all(void)
{
    for (size_t i = 0; i < nT; i++)
        if (!(T[i]->flags & PSPC_SPAWN_DETACHED) && kill(-T[i]->pid, SIGKILL) && !T[i]->exited)
            kill(T[i]->pid, SIGKILL);
}
