/*
 * psiadmin — the cluster as this node's psid sees it: nodes up or down, the master, load and
 * tasks per node; the tasks of this node; the daemon link's counters; signals to tasks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "psk_client.h"
#include "psport_abi.h"
#include "pulc.h"
#include "settings.h"
#include "spawn_proto.h"
#include "tool.h"

#define PROG "psiadmin"

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [COMMAND]\n"
               "Show and control the psport cluster through this node's psid.\n"
               "  status              nodes: up or down, master, load, tasks (the default)\n"
               "  tasks               tasks psid runs on this node\n"
               "  counters            daemon link counters (messages, malformed, RDP)\n"
               "  kill [-SIG] N:PID   send SIG (default TERM; name or number) to task N:PID\n"
               "  wait N:PID...       wait until the tasks end (death notification); print how\n"
               "                      each ended\n"
               "  -h, --help          this text\n"
               "psid's socket: PSP_PSID_SOCKET (see psinfo -c).\n");
}

/* psid's reply to op, NUL-terminated, in a buffer as large as it needs (the task list of a
 * node with thousands of tasks is larger than 64 KiB); *len its length. */
static char *call(uint32_t op, uint32_t *len)
{
    char err[512];
    static char *buf;
    static size_t cap;
    uint32_t got = 0;
    for (size_t want = 65536;;) {
        if (cap < want) {
            char *grown = realloc(buf, want);
            if (!grown)
                psp_fail_exit("out of memory for a reply of %zu bytes", want);
            buf = grown;
            cap = want;
        }
        int fd = pulc_psk_connect(psp_setting_str("PSP_PSID_SOCKET"), err, sizeof err);
        if (fd < 0)
            psp_fail_exit("%s", err);
        int rc = pulc_psk_call(fd, op, PSK_ABI_VERSION, NULL, 0, buf, (uint32_t)cap - 1, &got, NULL,
                               0, err, sizeof err);
        close(fd);
        if (rc)
            psp_fail_exit("%s", err);
        if (got <= cap - 1)
            break;
        want = (size_t)got + 4096; /* it grew meanwhile, or did not fit: ask again */
    }
    buf[got] = 0;
    *len = got;
    return buf;
}

static int status(void)
{
    uint32_t len;
    const char *buf = call(PSPC_OP_NODES, &len);
    unsigned n = len / sizeof(struct pspc_node), up = 0;
    printf("%-5s %-15s %-5s %-6s %6s %6s %5s %10s\n", "node", "address", "state", "master", "load",
           "tasks", "cpus", "heard [ms]");
    for (unsigned i = 0; i < n; i++) {
        struct pspc_node v;
        memcpy(&v, buf + i * sizeof v, sizeof v);
        char ip[INET_ADDRSTRLEN];
        struct in_addr a = {v.ip};
        inet_ntop(AF_INET, &a, ip, sizeof ip);
        up += v.up;
        if (v.up)
            printf("%-5u %-15s %-5s %-6s %6.2f %6u %5u %10llu\n", v.id, ip, "up",
                   v.master ? "yes" : "", v.load_milli / 1000.0, v.tasks, v.cpus,
                   (unsigned long long)v.heard_ms);
        else
            printf("%-5u %-15s %-5s %-6s %6s %6s %5s %10s\n", v.id, ip, "down", "", "-", "-", "-",
                   v.heard_ms ? "" : "never");
    }
    printf("%u of %u nodes up\n", up, n);
    return 0;
}

static int tasks(void)
{
    uint32_t len;
    const char *buf = call(PSPC_OP_TASKS, &len);
    unsigned n = len / sizeof(struct pspc_task);
    printf("%-14s %-14s %6s %-9s %10s\n", "task", "spawner", "uid", "flags", "age [ms]");
    for (unsigned i = 0; i < n; i++) {
        struct pspc_task t;
        memcpy(&t, buf + i * sizeof t, sizeof t);
        char a[32], b[32];
        snprintf(a, sizeof a, "%d:%d", PSP_TASK_NODE(t.tid), PSP_TASK_PID(t.tid));
        snprintf(b, sizeof b, "%d:%d", PSP_TASK_NODE(t.spawner), PSP_TASK_PID(t.spawner));
        printf("%-14s %-14s %6u %-9s %10llu\n", a, b, t.uid,
               (t.flags & PSPC_SPAWN_DETACHED) ? "detached" : "-", (unsigned long long)t.age_ms);
    }
    printf("%u task(s)\n", n);
    return 0;
}

static int counters(void)
{
    uint32_t len;
    char *buf = call(PSPC_OP_COUNTERS, &len);
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char name[64];
        unsigned long long v;
        int off = 0;
        if (sscanf(l, "%63s %llu %n", name, &v, &off) >= 2)
            printf("%-22s %14llu  %s\n", name, v, l + off);
    }
    return 0;
}

static int signal_number(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
                 {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
                 {"STOP", SIGSTOP}, {"ALRM", SIGALRM}};
    if (!strncmp(s, "SIG", 3))
        s += 3;
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name))
            return names[i].sig;
    return (int)psp_opt_u64("signal", s, 0, 64);
}

static int do_kill(int argc, char **argv)
{
    int sig = SIGTERM, i = 0;
    if (i < argc && argv[i][0] == '-')
        sig = signal_number(argv[i++] + 1);
    if (i + 1 != argc)
        psp_usage_error("kill wants [-SIG] NODE:PID");
    PSP_TaskId_t tid;
    if (PSP_TaskIdParse(argv[i], &tid))
        psp_usage_error("'%s' is not a task id (NODE:PID)", argv[i]);
    char err[512];
    PSP_Spawner_t *sp = PSP_SpawnerOpen(err, sizeof err);
    if (!sp)
        psp_fail_exit("%s", err);
    int rc = PSP_SpawnerSignal(sp, tid, sig);
    PSP_SpawnerClose(sp);
    if (rc) {
        fprintf(stderr, PROG ": kill %s: %s\n", argv[i], strerror(-rc));
        return PSP_EXIT_FAIL;
    }
    return 0;
}

static int do_wait(int argc, char **argv)
{
    if (argc < 1)
        psp_usage_error("wait wants task ids NODE:PID");
    PSP_TaskId_t *tids = calloc((size_t)argc, sizeof *tids);
    char err[512];
    PSP_Spawner_t *sp = PSP_SpawnerOpen(err, sizeof err);
    if (!sp || !tids)
        psp_fail_exit("%s", sp ? "out of memory" : err);
    int left = argc, rc = 0;
    for (int i = 0; i < argc; i++) {
        if (PSP_TaskIdParse(argv[i], &tids[i]))
            psp_usage_error("'%s' is not a task id (NODE:PID)", argv[i]);
        int e = PSP_SpawnerNotify(sp, tids[i]);
        if (e) {
            fprintf(stderr, PROG ": wait %s: %s\n", argv[i], strerror(-e));
            tids[i] = 0;
            left--;
            rc = PSP_EXIT_FAIL;
        }
    }
    while (left > 0) {
        PSP_Event_t ev;
        int got = PSP_SpawnerEvent(sp, &ev, -1);
        if (got < 0)
            psp_fail_exit("lost the connection to psid: %s", strerror(-got));
        if (ev.kind != PSP_EVENT_EXIT)
            continue;
        for (int i = 0; i < argc; i++) {
            if (tids[i] != ev.tid)
                continue;
            if (ev.flags & PSP_EXIT_LOST)
                printf("task %s: lost (its node died)\n", argv[i]);
            else if (WIFSIGNALED(ev.status))
                printf("task %s: killed by signal %d\n", argv[i], WTERMSIG(ev.status));
            else
                printf("task %s: exited with %d\n", argv[i], WEXITSTATUS(ev.status));
            fflush(stdout);
            tids[i] = 0;
            left--;
        }
    }
    PSP_SpawnerClose(sp);
    free(tids);
    return rc;
}

int main(int argc, char **argv)
{
    psp_tool_init(PROG, usage);
    if (argc < 2 || !strcmp(argv[1], "status"))
        return status();
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "tasks"))
        return tasks();
    if (!strcmp(argv[1], "counters"))
        return counters();
    if (!strcmp(argv[1], "wait"))
        return do_wait(argc - 2, argv + 2);
    if (!strcmp(argv[1], "kill"))
        return do_kill(argc - 2, argv + 2);
    psp_usage_error("unknown command '%s'", argv[1]);
}
