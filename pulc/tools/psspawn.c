/*
 * psspawn — start tasks anywhere in the cluster through psid and act as their logger.
 *
 * Output of every task arrives line-whole (optionally labelled with the task's rank),
 * stdin can go to the first task, and psspawn exits with the tasks' worst exit status.
 * With --repeat it is the spawn benchmark: spawn, collect the exits, print the time per run
 * and the median.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pulc.h"
#include "tool.h"

#define PROG "psspawn"

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [options] [--] PROGRAM [ARG...]\n"
               "Start PROGRAM as tasks on the cluster's nodes (through psid) and print their "
               "output.\n"
               "  -n, --np N         number of tasks (default 1)\n"
               "  -w, --where W      where they go: 'next' (round-robin, default), 'least' (least\n"
               "                     loaded), or node ids 'A,B,...' used in turn\n"
               "  -l, --label        prefix each output line with '[rank] '\n"
               "  -i, --stdin        forward standard input to the first task\n"
               "  -d, --detached     tasks survive psspawn (not killed when it ends)\n"
               "  -C, --chdir DIR    working directory of the tasks (default: the current one)\n"
               "  -e, --env NAME=VAL set a variable for the tasks (repeatable)\n"
               "  -t, --timeout S    kill the tasks after S seconds (exit status 124)\n"
               "  -v, --verbose      report each task's id, node and exit\n"
               "  -R, --repeat K     benchmark: spawn and collect K times, print times and median\n"
               "  -h, --help         this text\n"
               "The partition comes from PSP_PARTITION, PSP_HOSTFILE, SLURM_JOB_NODELIST or\n"
               "PBS_NODEFILE (see psinfo -c).  Exit status: 0 when every task exited 0, else the\n"
               "first failing task's exit code (128+N for signal N), 127 when a spawn failed.\n");
}

struct opts {
    unsigned np;
    int where; /* PSP_SPAWN_NEXT / _LEAST_LOADED, or 0 with a node list */
    int *nodes;
    unsigned nnodes;
    int label, fwd_stdin, detached, verbose;
    const char *cwd;
    char **env;
    unsigned timeout_s, repeat;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned rank_of(const PSP_TaskId_t *tids, unsigned n, PSP_TaskId_t tid)
{
    for (unsigned i = 0; i < n; i++)
        if (tids[i] == tid)
            return i;
    return n;
}

/* One run: spawn, forward, collect. Returns the exit status psspawn should give. */
static int run(const struct opts *o, char **argv, double *spawn_s, double *total_s)
{
    char err[512];
    double t0 = now_s();
    PSP_Spawner_t *sp = PSP_SpawnerOpen(err, sizeof err);
    if (!sp)
        psp_fail_exit("%s", err);
    PSP_SpawnReq_t *reqs = calloc(o->np, sizeof *reqs);
    PSP_TaskId_t *tids = calloc(o->np, sizeof *tids);
    int *errs = calloc(o->np, sizeof *errs);
    char *done = calloc(o->np, 1);
    if (!reqs || !tids || !errs || !done)
        psp_fail_exit("out of memory");
    for (unsigned i = 0; i < o->np; i++) {
        reqs[i].node = o->nnodes ? o->nodes[i % o->nnodes] : o->where;
        reqs[i].argv = (const char *const *)argv;
        reqs[i].env = (const char *const *)o->env;
        reqs[i].cwd = o->cwd;
        reqs[i].flags =
            (o->detached ? PSP_SPAWN_DETACHED : 0) | (o->fwd_stdin && i == 0 ? PSP_SPAWN_STDIN : 0);
    }
    int started = PSP_SpawnMany(sp, reqs, o->np, tids, errs, err, sizeof err);
    *spawn_s = now_s() - t0;
    int result = 0;
    if (started < (int)o->np) {
        fprintf(stderr, PROG ": %s\n", err);
        result = 127;
    }
    unsigned left = 0;
    for (unsigned i = 0; i < o->np; i++) {
        if (errs[i])
            done[i] = 1;
        else
            left++;
        if (!errs[i] && o->verbose)
            fprintf(stderr, PROG ": rank %u is task %d:%d\n", i, PSP_TASK_NODE(tids[i]),
                    PSP_TASK_PID(tids[i]));
    }
    int stdin_open = o->fwd_stdin && !errs[0];
    double deadline = o->timeout_s ? now_s() + o->timeout_s : 0;
    int timed_out = 0;
    while (left) {
        struct pollfd pf[2] = {{PSP_SpawnerFd(sp), POLLIN, 0}, {0, POLLIN, 0}};
        int wait = -1;
        if (deadline) {
            double d = deadline - now_s();
            wait = d <= 0 ? 0 : (int)(d * 1000) + 1;
        }
        if (PSP_SpawnerPending(sp))
            wait = 0;
        /* stdin is read only while little of it waits for rank 0 (flow control) */
        int feed = stdin_open && PSP_SpawnerStdinQueued(sp) < PSP_SPAWNER_STDIN_WINDOW;
        int r = poll(pf, feed ? 2 : 1, wait);
        if (r < 0 && errno != EINTR)
            psp_fail_exit("poll: %s", strerror(errno));
        if (deadline && now_s() >= deadline && !timed_out) {
            fprintf(stderr, PROG ": timeout after %u s: killing the tasks\n", o->timeout_s);
            for (unsigned i = 0; i < o->np; i++)
                if (!done[i])
                    PSP_SpawnerSignalPost(sp, tids[i], SIGKILL); /* exits come as events */
            timed_out = 1;
            deadline = 0;
        }
        if (feed && r > 0 && pf[1].revents) {
            char buf[65536];
            ssize_t n = read(0, buf, sizeof buf);
            if (n > 0)
                PSP_SpawnerStdin(sp, tids[0], buf, (size_t)n, 0);
            if (n <= 0) {
                PSP_SpawnerStdin(sp, tids[0], NULL, 0, 1);
                stdin_open = 0;
            }
        }
        PSP_Event_t ev;
        int got;
        while ((got = PSP_SpawnerEvent(sp, &ev, 0)) > 0) {
            unsigned rank = rank_of(tids, o->np, ev.tid);
            if (ev.kind == PSP_EVENT_OUTPUT) {
                PSP_EventWrite(&ev, ev.stream == 2 ? 2 : 1, o->label ? (int)rank : -1);
                continue;
            }
            if (rank >= o->np || done[rank])
                continue;
            done[rank] = 1;
            left--;
            if (rank == 0 && stdin_open) { /* its reader is gone: our feeder gets EPIPE */
                stdin_open = 0;
                psp_stdin_to_null();
            }
            int code = PSP_EventExitCode(&ev);
            if (ev.flags & PSP_EXIT_LOST)
                fprintf(stderr, PROG ": rank %u (task %d:%d): its node died\n", rank,
                        PSP_TASK_NODE(ev.tid), PSP_TASK_PID(ev.tid));
            else if (o->verbose || (WIFSIGNALED(ev.status) && !timed_out))
                fprintf(stderr, PROG ": rank %u (task %d:%d) %s %d\n", rank, PSP_TASK_NODE(ev.tid),
                        PSP_TASK_PID(ev.tid),
                        WIFSIGNALED(ev.status) ? "killed by signal" : "exited with",
                        WIFSIGNALED(ev.status) ? WTERMSIG(ev.status) : WEXITSTATUS(ev.status));
            if (code && !result)
                result = code;
        }
        if (got < 0)
            psp_fail_exit("lost the connection to psid: %s", strerror(-got));
    }
    *total_s = now_s() - t0;
    PSP_SpawnerClose(sp);
    free(reqs);
    free(tids);
    free(errs);
    free(done);
    return timed_out ? 124 : result;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The environment of the tasks: ours with the -e settings replaced or added. */
static char **make_env(char **extra, unsigned nextra)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + nextra + 1, sizeof *env);
    if (!env)
        psp_fail_exit("out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (unsigned j = 0; j < nextra; j++) {
            size_t nl = (size_t)(strchr(extra[j], '=') - extra[j]);
            if (!strncmp(environ[i], extra[j], nl + 1))
                replaced = 1;
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (unsigned j = 0; j < nextra; j++)
        env[k++] = extra[j];
    return env;
}

int main(int argc, char **argv)
{
    psp_tool_init(PROG, usage);
    static const struct option lo[] = {
        {"np", required_argument, NULL, 'n'},  {"where", required_argument, NULL, 'w'},
        {"label", no_argument, NULL, 'l'},     {"stdin", no_argument, NULL, 'i'},
        {"detached", no_argument, NULL, 'd'},  {"chdir", required_argument, NULL, 'C'},
        {"env", required_argument, NULL, 'e'}, {"timeout", required_argument, NULL, 't'},
        {"verbose", no_argument, NULL, 'v'},   {"repeat", required_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
    struct opts o = {.np = 1, .where = PSP_SPAWN_NEXT};
    char **extra = calloc((size_t)argc, sizeof *extra);
    unsigned nextra = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+n:w:lidC:e:t:vR:h", lo, NULL)) != -1) {
        switch (c) {
        case 'n':
            o.np = (unsigned)psp_opt_u64("np", optarg, 1, 1u << 20);
            break;
        case 'w':
            if (!strcmp(optarg, "next")) {
                o.where = PSP_SPAWN_NEXT;
            } else if (!strcmp(optarg, "least")) {
                o.where = PSP_SPAWN_LEAST_LOADED;
            } else {
                char *save = NULL, *list = strdup(optarg);
                for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                    o.nodes = realloc(o.nodes, (o.nnodes + 1) * sizeof *o.nodes);
                    o.nodes[o.nnodes++] = (int)psp_opt_u64("where", t, 0, 65534);
                }
                free(list);
                if (!o.nnodes)
                    psp_usage_error("--where wants next, least or node ids, not '%s'", optarg);
            }
            break;
        case 'l':
            o.label = 1;
            break;
        case 'i':
            o.fwd_stdin = 1;
            break;
        case 'd':
            o.detached = 1;
            break;
        case 'C':
            o.cwd = optarg;
            break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=')
                psp_usage_error("--env wants NAME=VALUE, not '%s'", optarg);
            extra[nextra++] = optarg;
            break;
        case 't':
            o.timeout_s = (unsigned)psp_opt_u64("timeout", optarg, 1, 1u << 30);
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'R':
            o.repeat = (unsigned)psp_opt_u64("repeat", optarg, 1, 100000);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            psp_usage_error("unknown option");
        }
    }
    if (optind >= argc)
        psp_usage_error("no program to start");
    o.env = make_env(extra, nextra);
    if (!o.repeat) {
        double s, t;
        return run(&o, argv + optind, &s, &t);
    }
    double *spawn = calloc(o.repeat, sizeof *spawn), *total = calloc(o.repeat, sizeof *total);
    int worst = 0;
    printf("# psspawn benchmark: %u task(s) per run, %u runs\n", o.np, o.repeat);
    printf("# %-6s %14s %14s\n", "run", "spawn [ms]", "spawn+exit [ms]");
    for (unsigned r = 0; r < o.repeat; r++) {
        int rc = run(&o, argv + optind, &spawn[r], &total[r]);
        if (rc && !worst)
            worst = rc;
        printf("  %-6u %14.3f %14.3f\n", r, spawn[r] * 1e3, total[r] * 1e3);
    }
    qsort(spawn, o.repeat, sizeof *spawn, cmp_double);
    qsort(total, o.repeat, sizeof *total, cmp_double);
    printf("median: spawn %.3f ms, spawn and collect exit status %.3f ms (min %.3f, max %.3f)\n",
           spawn[o.repeat / 2] * 1e3, total[o.repeat / 2] * 1e3, total[0] * 1e3,
           total[o.repeat - 1] * 1e3);
    return worst;
}
