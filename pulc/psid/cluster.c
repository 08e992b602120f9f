/*
 * cluster.c — psid's cluster side: the node table, daemon messages, and the cluster
 * operations of its clients (seed 000 §4.2: a single system view).
 *
 * Every psid sends an alive message with its load to every live node each alive interval;
 * a node not heard for the dead timeout is declared dead: what was queued for it is dropped,
 * requests waiting on it fail with EHOSTDOWN, spawners get a "lost" exit for their tasks
 * there, and tasks here whose spawner lived there are killed.  Nodes believed down are probed
 * rarely; a node that starts (or restarts: a new boot id) announces itself to everyone and
 * rejoins on its first alive.  The master is the lowest live node.
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "dmsg.h"
#include "log.h"
#include "mcp.h"
#include "mcp_env.h"
#include "partition.h"
#include "psid_int.h"
#include "psport_abi.h"
#include "settings.h"

struct nodestate {
    uint8_t up;
    uint64_t boot_id;
    uint64_t heard_ns;
    uint64_t probe_ns;
    uint32_t load_milli, tasks, cpus;
    /* Spawns this psid sent there that its last alive cannot have counted: sent and not yet
     * answered (an alive sent before the spawn ran may arrive after it was sent), and started
     * since that alive (the answer came first: alives and answers travel in order). */
    uint32_t spawns_unanswered, started_since_alive;
    /* down at its word (PSID_M_WAS_DEAD), so its rejoin must not tell it the same back */
    uint8_t down_by_word;
    /* When this psid last told it PSID_M_WAS_DEAD (0: not since): its own word that crosses
     * ours is about the same outage, whose death both sides have run. */
    uint64_t was_dead_sent_ns;
};

struct psid_cluster_stats psid_cstats;

static struct {
    struct nodestate *n;
    uint64_t alive_ns, dead_ns;
    uint64_t last_alive_ns;
    uint32_t load_milli, cpus;
} C;

static uint16_t count(void)
{
    return psid_g.nodes->count;
}

static int present(uint32_t node)
{
    return node < count() && psid_g.nodes->node[node].present;
}

static uint64_t now_ns(void)
{
    return mcp_now_ns();
}

static void read_load(void)
{
    double l[1];
    C.load_milli = getloadavg(l, 1) == 1 ? (uint32_t)(l[0] * 1000.0) : 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    C.cpus = n > 0 ? (uint32_t)n : 1;
}

void psid_cluster_start(const struct mcp_fault_cfg *fault)
{
    char err[512];
    uint64_t alive_ms, dead_ms;
    if (psp_setting_u64("PSP_PSID_ALIVE_MS", 10, 60000, &alive_ms, err, sizeof err) ||
        psp_setting_u64("PSP_PSID_DEAD_MS", 50, 600000, &dead_ms, err, sizeof err))
        psp_die("%s", err);
    if (dead_ms < 2 * alive_ms)
        psp_die("PSP_PSID_DEAD_MS (%llu) must be at least twice PSP_PSID_ALIVE_MS (%llu)",
                (unsigned long long)dead_ms, (unsigned long long)alive_ms);
    C.alive_ns = alive_ms * 1000000ull;
    C.dead_ns = dead_ms * 1000000ull;
    C.n = calloc(count(), sizeof *C.n);
    if (!C.n)
        psp_die("out of memory");
    if (getrandom(&psid_g.boot_id, sizeof psid_g.boot_id, 0) != (ssize_t)sizeof psid_g.boot_id)
        psid_g.boot_id = now_ns() ^ ((uint64_t)getpid() << 32);
    /* The firmware gives up on a peer a little after we declare it dead, so frames are
     * dropped by our decision, not lost under a live node. */
    psid_g.dlink =
        psid_dlink_open(psid_g.node, psid_g.nodes, fault, (uint32_t)dead_ms + 500, err, sizeof err);
    if (!psid_g.dlink)
        psp_die("%s", err);
    struct nodestate *me = &C.n[psid_g.node];
    me->up = 1;
    me->boot_id = psid_g.boot_id;
    read_load();
}

/* ---- delivering to clients ---- */

static struct psid_watch *watch_find(struct client *c, uint64_t tid, int kind, uint64_t req)
{
    for (size_t i = 0; i < c->nwatch; i++)
        if (c->watch[i].kind == kind && (req ? c->watch[i].req == req : c->watch[i].tid == tid))
            return &c->watch[i];
    return NULL;
}

static void watch_del(struct client *c, struct psid_watch *w)
{
    *w = c->watch[--c->nwatch];
}

static int watch_add(struct client *c, struct psid_watch w)
{
    if (c->nwatch == c->capwatch) {
        size_t cap = c->capwatch ? c->capwatch * 2 : 16;
        struct psid_watch *nw = realloc(c->watch, cap * sizeof *nw);
        if (!nw)
            return -ENOMEM;
        c->watch = nw;
        c->capwatch = cap;
    }
    c->watch[c->nwatch++] = w;
    return 0;
}

static void client_output(struct client *c, uint64_t tid, uint32_t stream, const void *data,
                          uint32_t len)
{
    struct pspc_output o = {tid, stream, 0};
    psid_client_queue(c, PSPC_OP_EV_OUTPUT, 0, &o, sizeof o, data, len);
}

static void client_exit(struct client *c, uint64_t tid, int32_t status, uint32_t flags)
{
    struct psid_watch *w =
        watch_find(c, tid, (flags & PSPC_EXIT_NOTIFY) ? PSID_W_NOTIFY : PSID_W_TASK, 0);
    if (w)
        watch_del(c, w);
    struct pspc_exit e = {tid, status, flags};
    psid_client_queue(c, PSPC_OP_EV_EXIT, 0, &e, sizeof e, NULL, 0);
}

static void client_stdin_taken(struct client *c, uint64_t tid, uint64_t bytes)
{
    struct pspc_stdin_taken s = {tid, bytes};
    psid_client_queue(c, PSPC_OP_EV_STDIN, 0, &s, sizeof s, NULL, 0);
}

void psid_deliver_stdin_taken(uint16_t node, uint32_t key, uint64_t tid, uint64_t bytes)
{
    if (node == psid_g.node) {
        struct client *c = psid_client_by_key(key);
        if (c)
            client_stdin_taken(c, tid, bytes);
        return;
    }
    struct psid_m_stdin_taken m = {key, (int32_t)(uint32_t)tid, bytes};
    if (C.n[node].up)
        psid_dlink_send(psid_g.dlink, node, PSID_CHAN_BULK, PSID_M_STDIN_TAKEN, &m, sizeof m, NULL,
                        0);
}

void psid_deliver_output(uint16_t node, uint32_t key, uint64_t tid, uint32_t stream,
                         const void *data, uint32_t len)
{
    if (node == psid_g.node) {
        struct client *c = psid_client_by_key(key);
        if (c)
            client_output(c, tid, stream, data, len);
        return;
    }
    struct psid_m_task m = {key, (int32_t)(uint32_t)tid, stream, 0};
    if (C.n[node].up)
        psid_dlink_send(psid_g.dlink, node, PSID_CHAN_BULK, PSID_M_OUTPUT, &m, sizeof m, data, len);
}

void psid_deliver_exit(uint16_t node, uint32_t key, uint64_t tid, int32_t status, uint32_t flags)
{
    if (node == psid_g.node) {
        struct client *c = psid_client_by_key(key);
        if (c)
            client_exit(c, tid, status, flags);
        return;
    }
    struct psid_m_exit m = {key, (int32_t)(uint32_t)tid, status, flags};
    if (C.n[node].up)
        psid_dlink_send(psid_g.dlink, node, PSID_CHAN_BULK, PSID_M_EXIT, &m, sizeof m, NULL, 0);
}

static void reply_spawned(struct client *c, uint64_t req, uint64_t tid, int err, const char *text)
{
    struct pspc_spawned s = {req, tid, err, 0};
    psid_client_queue(c, PSPC_OP_SPAWNED, 0, &s, sizeof s, text,
                      text ? (uint32_t)strlen(text) + 1 : 0);
}

static void reply_done(struct client *c, uint64_t req, int err, const char *text)
{
    struct pspc_done d = {req, err, 0};
    psid_client_queue(c, PSPC_OP_DONE, 0, &d, sizeof d, text,
                      text ? (uint32_t)strlen(text) + 1 : 0);
}

/* ---- nodes up and down ---- */

static void node_up(uint16_t n, const struct psid_m_alive *a)
{
    struct nodestate *s = &C.n[n];
    s->up = 1;
    s->boot_id = a->boot_id;
    s->down_by_word = 0;
    psid_cstats.nodes_up++;
    PSP_INFO("node %u is up (%u cpus, load %.2f)", n, a->cpus, a->load_milli / 1000.0);
}

static void send_alive_to(uint16_t n)
{
    struct psid_m_alive a = {psid_g.boot_id, C.load_milli, psid_task_count(), C.cpus, 0};
    psid_dlink_send(psid_g.dlink, n, PSID_CHAN_URGENT, PSID_M_ALIVE, &a, sizeof a, NULL, 0);
}

static void node_dead(uint16_t n, const char *why)
{
    struct nodestate *s = &C.n[n];
    if (!s->up || n == psid_g.node)
        return;
    s->up = 0;
    s->was_dead_sent_ns = 0;
    s->spawns_unanswered = 0;
    s->started_since_alive = 0;
    s->probe_ns = now_ns();
    psid_cstats.nodes_died++;
    PSP_WARN("node %u is dead: %s", n, why);
    psid_dlink_forget(psid_g.dlink, n);
    psid_task_node_died(n);
    /* Spawners waiting on it learn now, not never. */
    for (unsigned i = 0; i < psid_client_count(); i++) {
        struct client *c = psid_client_at(i);
        for (size_t k = c->nwatch; k-- > 0;) {
            struct psid_watch w = c->watch[k];
            if ((uint16_t)(w.tid >> 32) != n)
                continue;
            watch_del(c, &c->watch[k]);
            char text[128];
            snprintf(text, sizeof text, "node %u died before it answered", n);
            if (w.kind == PSID_W_REQ && w.op == PSPC_OP_SPAWN)
                reply_spawned(c, w.req, 0, -EHOSTDOWN, text);
            else if (w.kind == PSID_W_REQ)
                reply_done(c, w.req, -EHOSTDOWN, text);
            else
                client_exit(c, w.tid, 0,
                            PSPC_EXIT_LOST | (w.kind == PSID_W_NOTIFY ? PSPC_EXIT_NOTIFY : 0));
        }
    }
}

/* ---- daemon messages ---- */

static void on_alive(uint16_t src, const struct psid_m_alive *a)
{
    struct nodestate *s = &C.n[src];
    if (s->boot_id && s->boot_id != a->boot_id)
        psid_nic_peer_restarted(src); /* up or down since: frames to it must not fail */
    if (s->up && s->boot_id != a->boot_id)
        node_dead(src, "it restarted (new boot id)");
    if (!s->up) {
        /* Back with the boot id we knew: it never restarted, we only did not hear it (it was
         * stopped, or our way from it lost everything).  We told our spawners its tasks were
         * lost and killed the tasks it spawned here (their exits went nowhere): it must do the
         * same on its side, or tasks we called lost run on and its spawners wait forever.
         * Before our alive: it acts on this before it sees us up again. */
        if (s->boot_id && s->boot_id == a->boot_id && !s->down_by_word) {
            struct psid_m_was_dead m = {a->boot_id, (uint32_t)(C.dead_ns / 1000000u), 0};
            PSP_WARN("node %u is back without a restart: telling it that we had declared it "
                     "dead",
                     src);
            psid_dlink_send(psid_g.dlink, src, PSID_CHAN_URGENT, PSID_M_WAS_DEAD, &m, sizeof m,
                            NULL, 0);
            s->was_dead_sent_ns = now_ns();
        }
        node_up(src, a);
        send_alive_to(src); /* it learns about us without waiting a whole interval */
    }
    s->load_milli = a->load_milli;
    s->tasks = a->tasks;
    s->cpus = a->cpus;
    s->started_since_alive = 0;
}

/* Start the task a spawn request (m, its packed strings) asks for: its pid or -errno. */
static int spawn_here(uint16_t from, const struct psid_m_spawn *m, const char *strings)
{
    char refused[512];
    if (!psid_user_allowed(m->uid, refused, sizeof refused)) { /* this node's own list */
        PSP_INFO("spawn from node %u refused: %s", from, refused);
        return -EPERM;
    }
    const char **argv = calloc(m->b.argc + 1, sizeof *argv);
    const char **envp = calloc(m->b.envc + 1, sizeof *envp);
    int pid = -ENOMEM;
    if (argv && envp) {
        const char *p = strings;
        const char *cwd = p;
        p += strlen(p) + 1;
        for (uint32_t i = 0; i < m->b.argc; i++, p += strlen(p) + 1)
            argv[i] = p;
        for (uint32_t i = 0; i < m->b.envc; i++, p += strlen(p) + 1)
            envp[i] = p;
        struct psid_spawn_req r = {from,       m->key, m->spawner_pid, m->uid, m->gid,
                                   m->b.flags, cwd,    argv,           envp};
        pid = psid_task_spawn(&r);
    }
    free(argv);
    free(envp);
    return pid;
}

static void on_spawn(uint16_t src, const struct psid_m_spawn *m, const char *strings)
{
    /* Not from a node we hold dead: it learns so at its next alive (PSID_M_WAS_DEAD) and tells
     * its spawners their tasks here are lost, while a task started now would run on. */
    int pid = C.n[src].up ? spawn_here(src, m, strings) : -EHOSTDOWN;
    struct psid_m_reply rep = {m->req, m->key, pid < 0 ? pid : 0, pid < 0 ? 0 : pid, PSID_M_SPAWN};
    psid_dlink_send(psid_g.dlink, src, PSID_CHAN_URGENT, PSID_M_REPLY, &rep, sizeof rep, NULL, 0);
}

/* A spawn sent to src is answered: it leaves the unanswered, a task started joins the count. */
static void count_spawn_answer(uint16_t src, const struct psid_m_reply *m)
{
    struct nodestate *s = &C.n[src];
    if (m->answers != PSID_M_SPAWN || !s->spawns_unanswered)
        return;
    s->spawns_unanswered--;
    if (!m->error && m->pid > 0)
        s->started_since_alive++;
}

static void on_reply(uint16_t src, const struct psid_m_reply *m)
{
    count_spawn_answer(src, m);
    struct client *c = psid_client_by_key(m->key);
    struct psid_watch *w = c ? watch_find(c, 0, PSID_W_REQ, m->req) : NULL;
    if (!w || (uint16_t)(w->tid >> 32) != src) {
        /* The spawner went away meanwhile: its new task is an orphan. */
        if (m->pid > 0 && !m->error) {
            struct psid_m_orphans o = {m->key, 0};
            psid_dlink_send(psid_g.dlink, src, PSID_CHAN_URGENT, PSID_M_ORPHANS, &o, sizeof o, NULL,
                            0);
        }
        return;
    }
    struct psid_watch was = *w;
    watch_del(c, w);
    uint64_t tid = psid_task_id(src, m->pid);
    if (was.op == PSPC_OP_SPAWN) {
        if (!m->error)
            watch_add(c, (struct psid_watch){tid, 0, PSID_W_TASK, was.detached, 0});
        char text[160];
        snprintf(text, sizeof text, "on node %u: %s", src, strerror(-m->error));
        reply_spawned(c, was.req, m->error ? 0 : tid, m->error, m->error ? text : NULL);
    } else {
        if (!m->error && was.op == PSPC_OP_NOTIFY)
            watch_add(c, (struct psid_watch){was.tid, 0, PSID_W_NOTIFY, 0, 0});
        reply_done(c, was.req, m->error, NULL);
    }
}

static void on_message(void *arg, uint16_t src, uint16_t type, const void *data, uint32_t len)
{
    (void)arg;
    if (!present(src) || src == psid_g.node || psid_dmsg_check(type, data, len)) {
        psid_cstats.malformed++;
        PSP_DEBUG_LOG("dropped a malformed daemon message from node %u (type %u, %u bytes)", src,
                      type, len);
        return;
    }
    C.n[src].heard_ns = now_ns();
    switch (type) {
    case PSID_M_ALIVE: {
        struct psid_m_alive a;
        memcpy(&a, data, sizeof a);
        on_alive(src, &a);
        break;
    }
    case PSID_M_SPAWN: {
        struct psid_m_spawn m;
        memcpy(&m, data, sizeof m);
        on_spawn(src, &m, (const char *)data + sizeof m);
        break;
    }
    case PSID_M_REPLY: {
        struct psid_m_reply m;
        memcpy(&m, data, sizeof m);
        on_reply(src, &m);
        break;
    }
    case PSID_M_OUTPUT: {
        struct psid_m_task m;
        memcpy(&m, data, sizeof m);
        struct client *c = psid_client_by_key(m.key);
        if (c)
            client_output(c, psid_task_id(src, m.pid), m.stream, (const char *)data + sizeof m,
                          len - (uint32_t)sizeof m);
        break;
    }
    case PSID_M_EXIT: {
        struct psid_m_exit m;
        memcpy(&m, data, sizeof m);
        struct client *c = psid_client_by_key(m.key);
        if (c)
            client_exit(c, psid_task_id(src, m.pid), m.status, m.flags);
        break;
    }
    case PSID_M_STDIN: {
        struct psid_m_stdin m;
        memcpy(&m, data, sizeof m);
        psid_task_stdin(m.pid, (const char *)data + sizeof m, len - (uint32_t)sizeof m, (int)m.eof);
        break;
    }
    case PSID_M_SIGNAL:
    case PSID_M_NOTIFY: {
        struct psid_m_signal m;
        memcpy(&m, data, sizeof m);
        int err = type == PSID_M_SIGNAL ? psid_task_signal(m.pid, m.sig, m.uid)
                                        : psid_task_notify(m.pid, src, m.key);
        struct psid_m_reply rep = {m.req, m.key, err, 0, type};
        psid_dlink_send(psid_g.dlink, src, PSID_CHAN_URGENT, PSID_M_REPLY, &rep, sizeof rep, NULL,
                        0);
        break;
    }
    case PSID_M_ORPHANS: {
        struct psid_m_orphans m;
        memcpy(&m, data, sizeof m);
        psid_task_orphans(src, m.key);
        break;
    }
    case PSID_M_HOLD: {
        struct psid_m_hold m;
        memcpy(&m, data, sizeof m);
        psid_task_hold(src, m.key, (int)m.hold);
        break;
    }
    case PSID_M_WAS_DEAD: {
        struct psid_m_was_dead m;
        memcpy(&m, data, sizeof m);
        if (m.boot_id != psid_g.boot_id)
            break;
        struct nodestate *s = &C.n[src];
        /* Both sides declared each other dead and told each other so as they heard each other
         * again, the two words crossing: we had run this death already (that is why we told
         * it), so running it again would only hit what was spawned in the round trip between.
         * The crossing word comes within a round trip of ours.  A word about a new outage
         * comes later than the sender's dead timeout after ours: it heard us right after our
         * word and must then miss us that long (its timeout, as nodes may differ). */
        if (s->up && s->was_dead_sent_ns &&
            now_ns() - s->was_dead_sent_ns < (uint64_t)m.dead_ms * 1000000u / 2) {
            s->was_dead_sent_ns = 0;
            psid_cstats.was_dead_crossed++;
            PSP_INFO("node %u had declared this node dead too: both sides have run that death",
                     src);
            break;
        }
        /* (held dead here too, both sides have done it: its rejoin must not start it again) */
        s->down_by_word = 1;
        if (s->up)
            node_dead(src, "it had declared this node dead (not heard for its dead timeout): "
                           "the tasks between us are lost");
        break;
    }
    case PSID_M_STDIN_TAKEN: {
        struct psid_m_stdin_taken m;
        memcpy(&m, data, sizeof m);
        struct client *c = psid_client_by_key(m.key);
        if (c)
            client_stdin_taken(c, psid_task_id(src, m.pid), m.bytes);
        break;
    }
    default:
        break;
    }
}

/* ---- timers ---- */

static void alive_round(uint64_t now)
{
    read_load();
    for (uint16_t n = 0; n < count(); n++) {
        if (n == psid_g.node || !present(n))
            continue;
        struct nodestate *s = &C.n[n];
        /* A node believed down is probed rarely: every frame to it holds a send slot until
         * the firmware gives up, and it announces itself when it comes back anyway. */
        if (!s->up && s->probe_ns && now - s->probe_ns < C.dead_ns)
            continue;
        if (!s->up)
            s->probe_ns = now;
        send_alive_to(n);
    }
    C.last_alive_ns = now;
}

#define HOLD_RESEND_NS 200000000ull /* while held: again now and then, for tasks started since */

/*
 * Flow control of output to a spawner that does not read (mpirun | less, stopped): once
 * PSID_OUT_BACKLOG_MAX waits on its connection, its tasks' output is held here and on the
 * other nodes (their pipes fill and the tasks block), until half of it is written.
 */
static void output_flow(uint64_t now)
{
    for (unsigned i = 0; i < psid_client_count(); i++) {
        struct client *c = psid_client_at(i);
        if (!c->spawner)
            continue;
        size_t q = c->out_len - c->out_off;
        int hold = c->output_held ? q > PSID_OUT_BACKLOG_MAX / 2 : q > PSID_OUT_BACKLOG_MAX;
        if (hold == c->output_held && !(hold && now - c->hold_sent_ns >= HOLD_RESEND_NS))
            continue;
        psid_task_hold(psid_g.node, c->key, hold);
        struct psid_m_hold m = {c->key, (uint32_t)hold};
        for (uint16_t n = 0; n < count(); n++)
            if (C.n[n].up && n != psid_g.node)
                psid_dlink_send(psid_g.dlink, n, PSID_CHAN_URGENT, PSID_M_HOLD, &m, sizeof m, NULL,
                                0);
        c->output_held = (uint8_t)hold;
        c->hold_sent_ns = now;
    }
}

int psid_cluster_run(void)
{
    uint64_t now = now_ns();
    output_flow(now);
    if (!C.last_alive_ns || now - C.last_alive_ns >= C.alive_ns)
        alive_round(now);
    for (uint16_t n = 0; n < count(); n++)
        if (C.n[n].up && n != psid_g.node && now - C.n[n].heard_ns > C.dead_ns) {
            char why[96];
            snprintf(why, sizeof why, "silent for %llu ms",
                     (unsigned long long)((now - C.n[n].heard_ns) / 1000000));
            node_dead(n, why);
        }
    psid_dlink_run(psid_g.dlink, now, on_message, NULL);
    if (psid_dlink_busy(psid_g.dlink))
        return 1;
    uint64_t next = C.last_alive_ns + C.alive_ns;
    now = now_ns();
    int ms = next <= now ? 0 : (int)((next - now) / 1000000 + 1);
    int t = psid_task_timeout();
    return t >= 0 && t < ms ? t : ms;
}

/* ---- client operations ---- */

int psid_cluster_is_op(uint32_t op)
{
    return op >= PSPC_OP_SPAWNER && op <= PSPC_OP_TASKS;
}

static int do_spawner(struct client *c, const char *payload, uint32_t len)
{
    const char *list = "", *source = NULL;
    if (len) {
        const char *z = memchr(payload, 0, len);
        if (!z)
            return -1;
        list = payload;
        if ((uint32_t)(z - payload) + 1 < len) {
            source = z + 1;
            if (!memchr(source, 0, len - (uint32_t)(z - payload) - 1))
                return -1;
        }
    }
    char refused[512];
    if (!psid_user_allowed(c->uid, refused, sizeof refused))
        return psid_client_queue(c, PSPC_OP_SPAWNER, -EACCES, refused,
                                 (uint32_t)strlen(refused) + 1, NULL, 0);
    if (*list) {
        uint8_t *part = calloc(count(), 1);
        char err[512] = "psid is out of memory";
        int n = part ? pulc_partition_resolve(list, source, psid_g.nodes, part, count(), err,
                                              sizeof err)
                     : -ENOMEM;
        if (n < 0) {
            free(part);
            return psid_client_queue(c, PSPC_OP_SPAWNER, n, err, (uint32_t)strlen(err) + 1, NULL,
                                     0);
        }
        free(c->part);
        c->part = part;
    }
    c->spawner = 1;
    struct pspc_spawner_ok ok = {PSPC_FEATURE_STDIN_TAKEN, 0};
    return psid_client_queue(c, PSPC_OP_SPAWNER, 0, &ok, sizeof ok, NULL, 0);
}

static int in_part(const struct client *c, uint16_t n)
{
    return present(n) && (!c->part || c->part[n]);
}

/* The node a spawn goes to, or a negative errno with the reason in text. */
static int pick_node(struct client *c, int32_t want, char *text, size_t tn)
{
    if (want >= 0) {
        if (!present((uint32_t)want)) {
            snprintf(text, tn, "node %d is not in the nodes file (node ids are 0..%u)", want,
                     count() - 1u);
            return -ENXIO;
        }
        if (!in_part(c, (uint16_t)want)) {
            snprintf(text, tn, "node %d is outside this job's partition", want);
            return -ENXIO;
        }
        if (!C.n[want].up) {
            snprintf(text, tn, "node %d is down", want);
            return -EHOSTDOWN;
        }
        return want;
    }
    int best = -1;
    uint64_t best_load = UINT64_MAX;
    for (unsigned k = 0; k < count(); k++) {
        uint16_t n = (uint16_t)((c->rr_next + k) % count());
        if (!in_part(c, n) || !C.n[n].up)
            continue;
        if (want == PSPC_NODE_NEXT) {
            best = n;
            break;
        }
        /* Least loaded: fewest tasks (counting the spawns sent there its last alive did not
         * count), then the lowest load average; ties go round the nodes. */
        const struct nodestate *s = &C.n[n];
        uint32_t tasks = n == psid_g.node
                             ? psid_task_count()
                             : s->tasks + s->spawns_unanswered + s->started_since_alive;
        uint32_t load = n == psid_g.node ? C.load_milli : s->load_milli;
        uint64_t v = ((uint64_t)tasks << 32) | load;
        if (v < best_load)
            best_load = v, best = n;
    }
    if (best < 0) {
        snprintf(text, tn, "no node of the partition is up");
        return -EHOSTDOWN;
    }
    c->rr_next = (uint16_t)((best + 1) % count());
    return best;
}

static int do_spawn(struct client *c, const char *payload, uint32_t len)
{
    struct pspc_spawn s;
    if (len < sizeof s)
        return -1;
    memcpy(&s, payload, sizeof s);
    const char *strings = payload + sizeof s;
    if (!c->spawner) {
        reply_spawned(c, s.req, 0, -EINVAL, "send PSPC_OP_SPAWNER first");
        return 0;
    }
    if (s.b.argc < 1 || s.b.argc > 65536 || s.b.envc > 65536 || (s.b.flags & ~PSPC_SPAWN_FLAGS) ||
        s.b.strings_len != len - sizeof s ||
        pspc_strings_check(strings, s.b.strings_len, 1 + s.b.argc + s.b.envc)) {
        reply_spawned(c, s.req, 0, -EINVAL, "malformed spawn request");
        return 0;
    }
    char text[160];
    int node = pick_node(c, s.node, text, sizeof text);
    if (node < 0) {
        reply_spawned(c, s.req, 0, node, text);
        return 0;
    }
    if (node == psid_g.node) {
        struct psid_m_spawn m = {s.req, c->key, c->pid, c->uid, c->gid, s.b};
        int pid = spawn_here(psid_g.node, &m, strings);
        uint64_t tid = psid_task_id(psid_g.node, pid > 0 ? pid : 0);
        if (pid > 0)
            watch_add(c, (struct psid_watch){tid, 0, PSID_W_TASK,
                                             (s.b.flags & PSPC_SPAWN_DETACHED) != 0, 0});
        snprintf(text, sizeof text, "on node %u: %s", psid_g.node, strerror(pid < 0 ? -pid : EIO));
        reply_spawned(c, s.req, pid > 0 ? tid : 0, pid > 0 ? 0 : pid, pid > 0 ? NULL : text);
        return 0;
    }
    struct psid_m_spawn m = {s.req, c->key, c->pid, c->uid, c->gid, s.b};
    if (psid_dlink_send(psid_g.dlink, (uint16_t)node, PSID_CHAN_URGENT, PSID_M_SPAWN, &m, sizeof m,
                        strings, s.b.strings_len) ||
        watch_add(c, (struct psid_watch){(uint64_t)node << 32, s.req, PSID_W_REQ,
                                         (s.b.flags & PSPC_SPAWN_DETACHED) != 0, PSPC_OP_SPAWN})) {
        reply_spawned(c, s.req, 0, -ENOMEM, "psid is out of memory");
        return 0;
    }
    C.n[node].spawns_unanswered++;
    return 0;
}

/* SIGNAL and NOTIFY: here, or forwarded to the task's node. */
static int do_task_req(struct client *c, uint32_t op, const char *payload, uint32_t len)
{
    struct pspc_task_req r;
    if (len != sizeof r)
        return -1;
    memcpy(&r, payload, sizeof r);
    uint32_t node = (uint32_t)(r.tid >> 32);
    int32_t pid = (int32_t)(uint32_t)r.tid;
    char text[128];
    if (!present(node) || pid <= 0) {
        snprintf(text, sizeof text, "task id 0x%llx names no task (node %u, pid %d)",
                 (unsigned long long)r.tid, node, pid);
        reply_done(c, r.req, -ESRCH, text);
        return 0;
    }
    if (op == PSPC_OP_SIGNAL && (r.sig < 0 || r.sig > SIGRTMAX)) {
        reply_done(c, r.req, -EINVAL, "no such signal");
        return 0;
    }
    if (node == psid_g.node) {
        int err = op == PSPC_OP_SIGNAL ? psid_task_signal(pid, r.sig, c->uid)
                                       : psid_task_notify(pid, psid_g.node, c->key);
        if (!err && op == PSPC_OP_NOTIFY)
            watch_add(c, (struct psid_watch){r.tid, 0, PSID_W_NOTIFY, 0, 0});
        reply_done(c, r.req, err, NULL);
        return 0;
    }
    if (!C.n[node].up) {
        snprintf(text, sizeof text, "node %u (of task %u:%d) is down", node, node, pid);
        reply_done(c, r.req, -EHOSTDOWN, text);
        return 0;
    }
    struct psid_m_signal m = {r.req, c->key, pid, op == PSPC_OP_SIGNAL ? r.sig : 0, c->uid};
    if (psid_dlink_send(psid_g.dlink, (uint16_t)node, PSID_CHAN_URGENT,
                        op == PSPC_OP_SIGNAL ? PSID_M_SIGNAL : PSID_M_NOTIFY, &m, sizeof m, NULL,
                        0) ||
        watch_add(c, (struct psid_watch){r.tid, r.req, PSID_W_REQ, 0, (uint8_t)op}))
        reply_done(c, r.req, -ENOMEM, "psid is out of memory");
    return 0;
}

static int do_stdin(struct client *c, const char *payload, uint32_t len)
{
    struct pspc_stdin s;
    if (len < sizeof s)
        return -1;
    memcpy(&s, payload, sizeof s);
    if (!watch_find(c, s.tid, PSID_W_TASK, 0)) {
        PSP_DEBUG_LOG("pid %ld: stdin for task 0x%llx, not its task: dropped", (long)c->pid,
                      (unsigned long long)s.tid);
        return 0;
    }
    uint16_t node = (uint16_t)(s.tid >> 32);
    int32_t pid = (int32_t)(uint32_t)s.tid;
    uint32_t n = len - (uint32_t)sizeof s;
    if (node == psid_g.node) {
        psid_task_stdin(pid, payload + sizeof s, n, s.eof != 0);
        return 0;
    }
    struct psid_m_stdin m = {pid, s.eof != 0};
    if (C.n[node].up)
        psid_dlink_send(psid_g.dlink, node, PSID_CHAN_BULK, PSID_M_STDIN, &m, sizeof m,
                        payload + sizeof s, n);
    return 0;
}

static int do_nodes(struct client *c)
{
    struct pspc_node *v = calloc(count(), sizeof *v);
    if (!v)
        return -1;
    uint64_t now = now_ns();
    int master = -1;
    unsigned k = 0;
    for (uint16_t n = 0; n < count(); n++) {
        if (!present(n))
            continue;
        const struct nodestate *s = &C.n[n];
        if (s->up && master < 0)
            master = n;
        int me = n == psid_g.node;
        v[k++] = (struct pspc_node){n,
                                    s->up,
                                    0,
                                    me ? C.load_milli : s->load_milli,
                                    me ? psid_task_count() : s->tasks,
                                    me ? C.cpus : s->cpus,
                                    me || !s->heard_ns ? 0 : (now - s->heard_ns) / 1000000,
                                    psid_g.nodes->node[n].ip.s_addr,
                                    0};
    }
    for (unsigned i = 0; i < k; i++)
        v[i].master = v[i].id == master;
    int rc = psid_client_queue(c, PSPC_OP_NODES, 0, v, k * (uint32_t)sizeof *v, NULL, 0);
    free(v);
    return rc;
}

static int do_counters(struct client *c)
{
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    if (!f)
        return -1;
    const struct psid_dlink_stats *d = psid_dlink_stats(psid_g.dlink);
#define ROW(name, v, help) fprintf(f, "%s %llu %s\n", name, (unsigned long long)(v), help)
    ROW("msgs_tx", d->msgs_tx, "daemon messages sent");
    ROW("msgs_rx", d->msgs_rx, "daemon messages received");
    ROW("bytes_tx", d->bytes_tx, "daemon message bytes sent");
    ROW("bytes_rx", d->bytes_rx, "daemon message bytes received");
    ROW("frames_malformed", d->malformed, "daemon frames dropped as malformed");
    ROW("msgs_malformed", psid_cstats.malformed, "daemon messages dropped as malformed");
    ROW("send_failed", d->send_failed, "frames the firmware failed back (peer dead)");
    ROW("dropped_queued", d->dropped_queued, "messages dropped unsent: their node died");
    ROW("nodes_died", psid_cstats.nodes_died, "nodes declared dead");
    ROW("was_dead_crossed", psid_cstats.was_dead_crossed,
        "deaths both sides had run (their PSID_M_WAS_DEAD crossed)");
    ROW("nodes_up", psid_cstats.nodes_up, "nodes that joined or rejoined");
    ROW("spawned", psid_cstats.spawned, "tasks started on this node");
    ROW("spawn_failed", psid_cstats.spawn_fail, "spawns here that failed (errno returned)");
    ROW("exits", psid_cstats.exits, "tasks of this node that ended");
    ROW("output_msgs", psid_cstats.lines_out, "output messages forwarded");
    ROW("signals", psid_cstats.signals, "signals delivered here");
    ROW("orphans_killed", psid_cstats.orphans_killed, "tasks killed: their spawner was gone");
    const struct mcp_image *img = psid_dlink_image(psid_g.dlink);
    for (unsigned i = 0; i < mcp_counter_count(); i++) {
        char name[64];
        snprintf(name, sizeof name, "rdp_%s", mcp_counter_name(i));
        ROW(name, mcp_counter_value(img, i), mcp_counter_help(i));
    }
#undef ROW
    fclose(f);
    int rc = psid_client_queue(c, PSPC_OP_COUNTERS, 0, text, (uint32_t)tlen + 1, NULL, 0);
    free(text);
    return rc;
}

static int do_tasks(struct client *c)
{
    unsigned n = psid_task_count() + 64;
    struct pspc_task *t = calloc(n, sizeof *t);
    if (!t)
        return -1;
    n = psid_task_list(t, n);
    int rc = psid_client_queue(c, PSPC_OP_TASKS, 0, t, n * (uint32_t)sizeof *t, NULL, 0);
    free(t);
    return rc;
}

int psid_cluster_request(struct client *c, uint32_t op, const void *payload, uint32_t len)
{
    switch (op) {
    case PSPC_OP_SPAWNER:
        return do_spawner(c, payload, len);
    case PSPC_OP_SPAWN:
        return do_spawn(c, payload, len);
    case PSPC_OP_SIGNAL:
    case PSPC_OP_NOTIFY:
        return do_task_req(c, op, payload, len);
    case PSPC_OP_STDIN:
        return do_stdin(c, payload, len);
    case PSPC_OP_NODES:
        return do_nodes(c);
    case PSPC_OP_COUNTERS:
        return do_counters(c);
    case PSPC_OP_TASKS:
        return do_tasks(c);
    default:
        return -1;
    }
}

void psid_cluster_client_gone(struct client *c)
{
    /* Its tasks die with it unless detached: here directly, elsewhere by message, once per
     * node. */
    uint8_t *told = calloc(count(), 1);
    for (size_t i = 0; i < c->nwatch; i++) {
        const struct psid_watch *w = &c->watch[i];
        if (w->detached ||
            (w->kind != PSID_W_TASK && !(w->kind == PSID_W_REQ && w->op == PSPC_OP_SPAWN)))
            continue;
        uint16_t n = (uint16_t)(w->tid >> 32);
        if (told && told[n])
            continue;
        if (told)
            told[n] = 1;
        if (n == psid_g.node) {
            psid_task_orphans(n, c->key);
        } else if (C.n[n].up) {
            struct psid_m_orphans o = {c->key, 0};
            psid_dlink_send(psid_g.dlink, n, PSID_CHAN_BULK, PSID_M_ORPHANS, &o, sizeof o, NULL, 0);
        }
    }
    free(told);
    free(c->watch);
    free(c->part);
    c->watch = NULL;
    c->part = NULL;
    c->nwatch = c->capwatch = 0;
}
