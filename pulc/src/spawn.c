/*
 * spawn.c — the spawn API (pulc.h, "Tasks"): a spawner's connection to its node's psid.
 *
 * Requests carry an id; replies come back matched by it, and events (output, exits) may
 * arrive before a reply: they wait in a queue until PSP_SpawnerEvent() takes them.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "partition.h"
#include "psk_client.h"
#include "psport_abi.h"
#include "pulc.h"
#include "settings.h"
#include "spawn_proto.h"

extern char **environ;

/* A message from psid: header and payload in one allocation. */
struct smsg {
    struct smsg *next;
    struct psk_msg h;
    char data[];
};

struct PSP_Spawner {
    int fd;
    uint64_t next_req;
    struct smsg *qhead, *qtail; /* events that arrived while waiting for a reply */
    struct smsg *replies;       /* replies that arrived while waiting for another one */
    struct smsg *cur;           /* the event last returned (its data is the caller's view) */
    uint64_t stdin_sent;        /* bytes given to PSP_SpawnerStdin */
    uint64_t stdin_taken;       /* of those, done with by their tasks' nodes (EV_STDIN) */
    int stdin_reports;          /* psid reports stdin taken (else no flow control) */
};

static int read_full(int fd, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = recv(fd, (char *)buf + done, n - done, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EPIPE;
        done += (size_t)r;
    }
    return 0;
}

static int send_msg(int fd, uint32_t op, const void *a, size_t alen, const void *b, size_t blen)
{
    struct psk_msg m = {PSK_MSG_MAGIC, PSK_ABI_VERSION, op, 0, (uint32_t)(alen + blen), 0};
    struct iovec iov[3] = {{&m, sizeof m}, {(void *)a, alen}, {(void *)b, blen}};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = 3;
    size_t left = sizeof m + alen + blen;
    while (left) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        left -= (size_t)w;
        /* Advance the iovecs past what went out. */
        size_t k = (size_t)w;
        while (k && mh.msg_iovlen) {
            if (k >= mh.msg_iov[0].iov_len) {
                k -= mh.msg_iov[0].iov_len;
                mh.msg_iov++;
                mh.msg_iovlen--;
            } else {
                mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + k;
                mh.msg_iov[0].iov_len -= k;
                k = 0;
            }
        }
    }
    return 0;
}

/* Read one message (blocking). NULL with *rc set on failure. */
static struct smsg *read_msg(int fd, int *rc)
{
    struct psk_msg h;
    *rc = read_full(fd, &h, sizeof h);
    if (*rc)
        return NULL;
    if (h.magic != PSK_MSG_MAGIC || h.len > (64u << 20)) {
        *rc = -EPROTO;
        return NULL;
    }
    struct smsg *m = malloc(sizeof *m + h.len + 1);
    if (!m) {
        *rc = -ENOMEM;
        return NULL;
    }
    m->next = NULL;
    m->h = h;
    *rc = h.len ? read_full(fd, m->data, h.len) : 0;
    if (*rc) {
        free(m);
        return NULL;
    }
    m->data[h.len] = 0;
    return m;
}

static int is_event(uint32_t op)
{
    return op == PSPC_OP_EV_OUTPUT || op == PSPC_OP_EV_EXIT || op == PSPC_OP_EV_STDIN;
}

static void enqueue(PSP_Spawner_t *sp, struct smsg *m)
{
    if (sp->qtail)
        sp->qtail->next = m;
    else
        sp->qhead = m;
    sp->qtail = m;
}

/* The request id a reply answers (its first 8 bytes), 0 when it carries none. */
static uint64_t reply_req(const struct smsg *m)
{
    uint64_t r = 0;
    if (m->h.len >= sizeof r)
        memcpy(&r, m->data, sizeof r);
    return r;
}

static int is_reply(const struct smsg *m, uint32_t op, uint64_t req)
{
    return m->h.op == op && reply_req(m) == req;
}

/* Set in the id of a request nobody waits for (PSP_SpawnerSignalPost): its reply is dropped. */
#define REQ_POSTED (1ull << 63)

/*
 * Wait for the reply `op` to request req.  Replies come in the order psid gets them from the
 * nodes, not in the order of the requests: others are kept for their own wait, and events
 * meanwhile are queued.
 */
static struct smsg *wait_reply(PSP_Spawner_t *sp, uint32_t op, uint64_t req, int *rc)
{
    for (struct smsg **p = &sp->replies; *p; p = &(*p)->next)
        if (is_reply(*p, op, req)) {
            struct smsg *m = *p;
            *p = m->next;
            return m;
        }
    for (;;) {
        struct smsg *m = read_msg(sp->fd, rc);
        if (!m)
            return NULL;
        if (is_event(m->h.op)) {
            enqueue(sp, m);
            continue;
        }
        if (is_reply(m, op, req))
            return m;
        if (reply_req(m) & REQ_POSTED) { /* nobody will ask for it */
            free(m);
            continue;
        }
        m->next = sp->replies;
        sp->replies = m;
    }
}

PSP_Spawner_t *PSP_SpawnerOpen(char *err, size_t errlen)
{
    PSP_Spawner_t *sp = calloc(1, sizeof *sp);
    if (!sp) {
        psp_set_err(err, errlen, "out of memory");
        return NULL;
    }
    sp->next_req = 1;
    char *list = NULL;
    const char *source = NULL;
    int rc = pulc_partition_from_env(&list, &source, err, errlen);
    if (rc < 0) {
        free(sp);
        return NULL;
    }
    sp->fd = pulc_psk_connect(psp_setting_str("PSP_PSID_SOCKET"), err, errlen);
    if (sp->fd < 0) {
        free(list);
        free(sp);
        return NULL;
    }
    const char *l = list ? list : "";
    const char *s = source ? source : "";
    size_t ll = strlen(l) + 1, sl = strlen(s) + 1;
    rc = send_msg(sp->fd, PSPC_OP_SPAWNER, l, ll, s, sl);
    free(list);
    struct smsg *m = rc ? NULL : read_msg(sp->fd, &rc);
    if (!m || m->h.op != PSPC_OP_SPAWNER || m->h.status < 0) {
        if (m && m->h.status < 0)
            psp_set_err(err, errlen, "%s", m->h.len ? m->data : strerror(-m->h.status));
        else if (m)
            psp_set_err(err, errlen, "psid answered operation %u: is it an older psid?", m->h.op);
        else
            psp_set_err(err, errlen, "psid closed the connection: %s", strerror(-rc));
        free(m);
        close(sp->fd);
        free(sp);
        return NULL;
    }
    /* An older psid replies without features: it never reports stdin taken, and a feeder
     * waiting for its reports would stop after PSP_SPAWNER_STDIN_WINDOW bytes. */
    struct pspc_spawner_ok ok = {0, 0};
    if (m->h.len >= sizeof ok)
        memcpy(&ok, m->data, sizeof ok);
    sp->stdin_reports = (ok.features & PSPC_FEATURE_STDIN_TAKEN) != 0;
    free(m);
    return sp;
}

void PSP_SpawnerClose(PSP_Spawner_t *sp)
{
    if (!sp)
        return;
    close(sp->fd);
    while (sp->qhead) {
        struct smsg *m = sp->qhead;
        sp->qhead = m->next;
        free(m);
    }
    while (sp->replies) {
        struct smsg *m = sp->replies;
        sp->replies = m->next;
        free(m);
    }
    free(sp->cur);
    free(sp);
}

int PSP_SpawnerFd(const PSP_Spawner_t *sp)
{
    return sp->fd;
}

int PSP_SpawnerPending(const PSP_Spawner_t *sp)
{
    return sp->qhead != NULL;
}

uint64_t PSP_SpawnerStdinQueued(const PSP_Spawner_t *sp)
{
    return sp->stdin_reports ? sp->stdin_sent - sp->stdin_taken : 0;
}

/* Pack cwd, argv and env into one buffer. */
static char *pack(const PSP_SpawnReq_t *r, struct pspc_spawn_body *b, char *err, size_t errlen)
{
    const char *const *env = r->env ? r->env : (const char *const *)environ;
    char cwdbuf[4096];
    const char *cwd = r->cwd;
    if (!cwd)
        cwd = getcwd(cwdbuf, sizeof cwdbuf) ? cwdbuf : "/";
    size_t len = strlen(cwd) + 1;
    b->argc = b->envc = 0;
    for (; r->argv[b->argc]; b->argc++)
        len += strlen(r->argv[b->argc]) + 1;
    for (; env[b->envc]; b->envc++)
        len += strlen(env[b->envc]) + 1;
    if (len > (3u << 20)) {
        psp_set_err(err, errlen, "arguments and environment are %zu bytes: at most 3 MiB", len);
        return NULL;
    }
    char *buf = malloc(len), *p = buf;
    if (!buf) {
        psp_set_err(err, errlen, "out of memory");
        return NULL;
    }
    p = stpcpy(p, cwd) + 1;
    for (uint32_t i = 0; i < b->argc; i++)
        p = stpcpy(p, r->argv[i]) + 1;
    for (uint32_t i = 0; i < b->envc; i++)
        p = stpcpy(p, env[i]) + 1;
    b->strings_len = (uint32_t)len;
    return buf;
}

/* The message for a failed spawn: psid's text says where ("on node N: ...") or why. */
static void spawn_error(const PSP_SpawnReq_t *r, int e, const char *text, char *err, size_t errlen)
{
    if (text && !strncmp(text, "on node ", 8))
        psp_set_err(err, errlen, "cannot start '%s' %s", r->argv[0], text);
    else
        psp_set_err(err, errlen, "cannot start '%s': %s", r->argv[0],
                    text && *text ? text : strerror(-e));
}

int PSP_SpawnMany(PSP_Spawner_t *sp, const PSP_SpawnReq_t *reqs, unsigned n, PSP_TaskId_t *tids,
                  int *errors, char *err, size_t errlen)
{
    uint64_t first = sp->next_req;
    int spawned = 0, rc = 0;
    if (err && errlen)
        err[0] = 0;
    for (unsigned i = 0; i < n; i++) {
        const PSP_SpawnReq_t *r = &reqs[i];
        tids[i] = 0;
        errors[i] = 0;
        if (!r->argv || !r->argv[0] || (r->flags & ~(unsigned)PSPC_SPAWN_FLAGS)) {
            errors[i] = -EINVAL;
            psp_set_err(err, errlen, "spawn request %u: no program or unknown flags", i);
            continue;
        }
        struct pspc_spawn s = {sp->next_req + i, r->node, 0, {r->flags, 0, 0, 0}};
        char *strings = pack(r, &s.b, err, errlen);
        if (!strings) {
            errors[i] = -E2BIG;
            continue;
        }
        rc = send_msg(sp->fd, PSPC_OP_SPAWN, &s, sizeof s, strings, s.b.strings_len);
        free(strings);
        if (rc) {
            psp_set_err(err, errlen, "lost the connection to psid: %s", strerror(-rc));
            for (unsigned k = i; k < n; k++)
                errors[k] = rc;
            n = i;
            break;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (errors[i])
            continue;
        struct smsg *m = wait_reply(sp, PSPC_OP_SPAWNED, first + i, &rc);
        if (!m) {
            psp_set_err(err, errlen, "lost the connection to psid: %s", strerror(-rc));
            for (unsigned k = i; k < n; k++)
                if (!errors[k])
                    errors[k] = rc;
            break;
        }
        struct pspc_spawned a;
        memset(&a, 0, sizeof a);
        memcpy(&a, m->data, m->h.len < sizeof a ? m->h.len : sizeof a);
        const char *text = m->h.len > sizeof a ? m->data + sizeof a : NULL;
        if (a.error) {
            errors[i] = a.error;
            if (!err || !err[0]) {
                char tmp[512];
                spawn_error(&reqs[i], a.error, text, tmp, sizeof tmp);
                psp_set_err(err, errlen, "%s", tmp);
            }
        } else {
            tids[i] = a.tid;
            spawned++;
        }
        free(m);
    }
    sp->next_req += n ? n : 1;
    return spawned;
}

int PSP_Spawn(PSP_Spawner_t *sp, const PSP_SpawnReq_t *req, PSP_TaskId_t *tid, char *err,
              size_t errlen)
{
    int e = 0;
    PSP_TaskId_t t = 0;
    PSP_SpawnMany(sp, req, 1, &t, &e, err, errlen);
    if (tid)
        *tid = t;
    return e;
}

/* Send a SIGNAL or NOTIFY request (flags: 0 or REQ_POSTED): its id, or a negative errno. */
static int64_t send_task_req(PSP_Spawner_t *sp, uint32_t op, PSP_TaskId_t tid, int sig,
                             uint64_t flags)
{
    struct pspc_task_req r = {sp->next_req++ | flags, tid, sig, 0};
    int rc = send_msg(sp->fd, op, &r, sizeof r, NULL, 0);
    return rc ? rc : (int64_t)(r.req & ~REQ_POSTED);
}

/* SIGNAL or NOTIFY: one request, its reply. */
static int task_req(PSP_Spawner_t *sp, uint32_t op, PSP_TaskId_t tid, int sig)
{
    int64_t req = send_task_req(sp, op, tid, sig, 0);
    if (req < 0)
        return (int)req;
    int rc;
    struct smsg *m = wait_reply(sp, PSPC_OP_DONE, (uint64_t)req, &rc);
    if (!m)
        return rc;
    struct pspc_done d;
    memset(&d, 0, sizeof d);
    memcpy(&d, m->data, m->h.len < sizeof d ? m->h.len : sizeof d);
    free(m);
    return d.error;
}

int PSP_SpawnerSignal(PSP_Spawner_t *sp, PSP_TaskId_t tid, int sig)
{
    return task_req(sp, PSPC_OP_SIGNAL, tid, sig);
}

int PSP_SpawnerSignalPost(PSP_Spawner_t *sp, PSP_TaskId_t tid, int sig)
{
    /* the reply comes some time later: PSP_SpawnerEvent and wait_reply drop it */
    int64_t req = send_task_req(sp, PSPC_OP_SIGNAL, tid, sig, REQ_POSTED);
    return req < 0 ? (int)req : 0;
}

int PSP_SpawnerNotify(PSP_Spawner_t *sp, PSP_TaskId_t tid)
{
    return task_req(sp, PSPC_OP_NOTIFY, tid, 0);
}

int PSP_SpawnerStdin(PSP_Spawner_t *sp, PSP_TaskId_t tid, const void *data, size_t len, int eof)
{
    const char *p = data;
    do {
        size_t n = len > (1u << 20) ? (1u << 20) : len;
        struct pspc_stdin s = {tid, eof && n == len, 0};
        int rc = send_msg(sp->fd, PSPC_OP_STDIN, &s, sizeof s, p, n);
        if (rc)
            return rc;
        sp->stdin_sent += n;
        p += n;
        len -= n;
    } while (len);
    return 0;
}

/* The next event message from psid within timeout_ms of *t0 (-1: no limit): 1 and *out, 0
 * when none came, or a negative errno.  Stray replies are dropped. */
static int next_msg(PSP_Spawner_t *sp, int timeout_ms, const struct timespec *t0, struct smsg **out)
{
    for (;;) {
        int wait = timeout_ms;
        if (timeout_ms > 0) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            long el = (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
            wait = el >= timeout_ms ? 0 : timeout_ms - (int)el;
        }
        struct pollfd pf = {sp->fd, POLLIN, 0};
        int r = poll(&pf, 1, wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return 0;
        int rc;
        struct smsg *m = read_msg(sp->fd, &rc);
        if (!m)
            return rc;
        if (is_event(m->h.op)) {
            *out = m;
            return 1;
        }
        free(m);
    }
}

int PSP_SpawnerEvent(PSP_Spawner_t *sp, PSP_Event_t *ev, int timeout_ms)
{
    free(sp->cur);
    sp->cur = NULL;
    struct smsg *m = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!m) {
        if (sp->qhead) {
            m = sp->qhead;
            sp->qhead = m->next;
            if (!sp->qhead)
                sp->qtail = NULL;
        } else {
            int rc = next_msg(sp, timeout_ms, &t0, &m);
            if (rc <= 0)
                return rc;
        }
        if (m->h.op == PSPC_OP_EV_STDIN) { /* flow control, not the caller's business */
            struct pspc_stdin_taken s;
            if (m->h.len >= sizeof s) {
                memcpy(&s, m->data, sizeof s);
                sp->stdin_taken += s.bytes;
            }
            free(m);
            m = NULL;
        }
    }
    memset(ev, 0, sizeof *ev);
    if (m->h.op == PSPC_OP_EV_OUTPUT && m->h.len >= sizeof(struct pspc_output)) {
        struct pspc_output o;
        memcpy(&o, m->data, sizeof o);
        ev->kind = PSP_EVENT_OUTPUT;
        ev->tid = o.tid;
        ev->stream = (int)o.stream;
        ev->data = m->data + sizeof o;
        ev->len = m->h.len - sizeof o;
    } else if (m->h.op == PSPC_OP_EV_EXIT && m->h.len >= sizeof(struct pspc_exit)) {
        struct pspc_exit e;
        memcpy(&e, m->data, sizeof e);
        ev->kind = PSP_EVENT_EXIT;
        ev->tid = e.tid;
        ev->status = e.status;
        ev->flags = e.flags;
    } else {
        free(m);
        return -EPROTO;
    }
    sp->cur = m;
    return 1;
}

int PSP_TaskIdParse(const char *text, PSP_TaskId_t *tid)
{
    char *end;
    errno = 0;
    unsigned long node = strtoul(text, &end, 10);
    if (end == text || *end != ':' || errno || node > 65535)
        return -EINVAL;
    const char *p = end + 1;
    long pid = strtol(p, &end, 10);
    if (end == p || *end || errno || pid <= 0 || pid > 0x7fffffff)
        return -EINVAL;
    *tid = ((uint64_t)node << 32) | (uint32_t)pid;
    return 0;
}

int PSP_EventExitCode(const PSP_Event_t *ev)
{
    if (ev->flags & PSP_EXIT_LOST)
        return 255;
    if (WIFEXITED(ev->status))
        return WEXITSTATUS(ev->status);
    if (WIFSIGNALED(ev->status))
        return 128 + WTERMSIG(ev->status);
    return 255;
}

static volatile sig_atomic_t *write_stop; /* PSP_EventWriteStopOn */

void PSP_EventWriteStopOn(volatile sig_atomic_t *flag)
{
    write_stop = flag;
}

/* Write n bytes.  A short write means a signal came after some of them went (a blocking
 * descriptor writes all or blocks): the rest goes too, unless the caller's stop flag says
 * that signal ends its writing (else a reader that stopped would keep it blocked after
 * Ctrl-C); a stop and continue (Ctrl-Z) loses nothing. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0)
            return -errno;
        buf += w;
        n -= (size_t)w;
        if (n && write_stop && *write_stop)
            return -EINTR;
    }
    return 0;
}

int PSP_EventWrite(const PSP_Event_t *ev, int fd, int rank)
{
    /* One write per event where possible: lines of concurrent writers stay whole. */
    size_t lines = 1;
    for (size_t i = 0; i < ev->len; i++)
        lines += ev->data[i] == '\n';
    size_t cap = ev->len + 2 + (rank >= 0 ? lines * 16 : 0);
    char *out = malloc(cap), *o = out;
    if (!out)
        return -ENOMEM;
    const char *d = ev->data;
    size_t left = ev->len;
    while (left) {
        const char *nl = memchr(d, '\n', left);
        size_t n = nl ? (size_t)(nl - d) + 1 : left;
        if (rank >= 0)
            o += sprintf(o, "[%d] ", rank);
        memcpy(o, d, n);
        o += n;
        if (!nl && rank >= 0)
            *o++ = '\n'; /* labelled: the next label starts a line of its own */
        d += n;
        left -= n;
    }
    int rc = write_all(fd, out, (size_t)(o - out));
    free(out);
    return rc;
}

int PSP_GetNodes(PSP_NodeInfo_t *nodes, int max, int *self, char *err, size_t errlen)
{
    int fd = pulc_psk_connect(psp_setting_str("PSP_PSID_SOCKET"), err, errlen);
    if (fd < 0)
        return fd;
    struct psk_info in;
    uint32_t got = 0;
    int rc = pulc_psk_call(fd, PSK_OP_INFO, PSK_ABI_VERSION, NULL, 0, &in, sizeof in, &got, NULL, 0,
                           err, errlen);
    static char buf[65536];
    if (!rc)
        rc = pulc_psk_call(fd, PSPC_OP_NODES, PSK_ABI_VERSION, NULL, 0, buf, sizeof buf, &got, NULL,
                           0, err, errlen);
    close(fd);
    if (rc)
        return rc;
    int count = (int)(got / sizeof(struct pspc_node));
    for (int i = 0; i < count && i < max; i++) {
        struct pspc_node v;
        memcpy(&v, buf + (size_t)i * sizeof v, sizeof v);
        nodes[i] = (PSP_NodeInfo_t){v.id, v.up, v.master, v.ip, v.tasks, v.load_milli};
    }
    if (self)
        *self = in.node_id;
    return count;
}

int PSP_PartitionHosts(char **hosts, char *err, size_t errlen)
{
    const char *source = NULL;
    return pulc_partition_from_env(hosts, &source, err, errlen);
}
