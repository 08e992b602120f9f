/*
 * test_mcp_repair.c — an executor killed at any store of a firmware pass, and
 * mcp_image_repair() (mcp/PROTOCOL.md, "Surviving a dead executor").
 *
 * The firmware is compiled into this test with MCP_TEST_HOOKS: every MCP_STORE() of a pass
 * (and of the repair) is a point at which a forked child running it dies by SIGKILL once its
 * store budget is spent.  The image is in MAP_SHARED memory, so the parent sees exactly what the
 * child stored.  The child's link is a "box" in shared memory: the frames its rx() may take are
 * put there before the pass, and the frames it sends are put on the sim net afterwards — only
 * those flushed before it died, the others die with its queue.
 *
 *  - directed passes that fail sends (an invalid destination, a link that refuses DATA, a
 *    connection reset with sends in flight and queued), killed at every store K; the host may
 *    pop errors and post into freed slots before the repair; afterwards every send is reported
 *    exactly once, with the right error, and no slot is lost;
 *  - host processes that die between two of their stores, and a pass that frees a context;
 *  - sweeps: a cluster streaming self-checking messages (the soak's exactly-once, in-order
 *    check); at chosen passes of node 0 the whole test forks once per K, node 0's pass is
 *    abandoned at its K-th store, the next pass repairs, and the fork posts a few more
 *    messages, runs the traffic to its end and checks it.  Inside such a fork the pass is left
 *    with siglongjmp rather than killed in yet another child: the image then holds exactly
 *    what a SIGKILL at that store leaves (the hook runs before the store), and a second fork
 *    per K would double the run time (a fork costs about a millisecond here);
 *  - a rolling run in which node 0's executor is SIGKILLed in one pass of three and one
 *    repair of two is SIGKILLed too, to the end of the traffic;
 *  - a consistent image is left as it is; a foreign or self-contradicting one is refused.
 * After every repair the image is checked: every receive slot READY in the FIFO or IDLE on the
 * free stack, every taken send slot in exactly one list (in flight or queued), every other slot
 * IDLE or posted and not yet taken, counters that follow cursors equal to them.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "mcp_fw.h"
#include "rdp_fixture.h"

#ifndef MCP_TEST_HOOKS
#error "test_mcp_repair needs the firmware built with MCP_TEST_HOOKS"
#endif

#define V         0                           /* the node whose executor dies */
#define FRAME_MAX (MCP_WIRE_HDR + 256u + 32u) /* the traffic's frames, and then some */
#define BOX_IN    64
#define BOX_OUT   160
#define KMAX      20000 /* more stores than any pass makes */

static const char *const op_names[] = {"none",  "ACCEPT", "DELIVER", "TAKE", "SEND",
                                       "QFAIL", "ACK",    "RESET",   "OPEN", "LEARN"};
#define NOPS (sizeof(op_names) / sizeof(op_names[0]))

static void *shm_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- killing a child at its K-th store -------------------------------------------------- */

static void die(void)
{
    raise(SIGKILL);
}

/* Run fn(arg) in a child that dies at its budget-th store.  1: it died there; 0: it returned
 * first; -1: it died some other way. */
static int run_killed(void (*fn)(void *), void *arg, long budget)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        mcp_test_store_budget = budget;
        mcp_test_store_hit = die;
        fn(arg);
        _exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        return 1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

struct pass_arg {
    struct mcp_nic *nic;
    uint64_t now;
};

static void pass_fn(void *a)
{
    struct pass_arg *pa = a;
    mcp_poll(pa->nic, pa->now);
}

static void repair_fn(void *a)
{
    mcp_image_repair(a);
}

/* Leaving a pass at its K-th store without a second fork (see sweep_pass). */
static sigjmp_buf jmp_at_store;

static void jump_out(void)
{
    siglongjmp(jmp_at_store, 1);
}

/* One pass in this process, abandoned at its budget-th store: 1 if it was, 0 if it ran. */
static int run_pass_abandoned(struct mcp_nic *nic, uint64_t now, long budget)
{
    if (sigsetjmp(jmp_at_store, 0)) {
        mcp_test_store_budget = 0;
        return 1;
    }
    mcp_test_store_hit = jump_out;
    mcp_test_store_budget = budget;
    mcp_poll(nic, now);
    mcp_test_store_budget = 0;
    return 0;
}

/* One pass: in-process (budget 0) or killed at its budget-th store (see run_killed). */
static int run_pass(struct mcp_nic *nic, uint64_t now, long budget)
{
    struct pass_arg pa = {nic, now};
    if (budget <= 0) {
        mcp_poll(nic, now);
        return 0;
    }
    return run_killed(pass_fn, &pa, budget);
}

/* ---- the box link --------------------------------------------------------------------------- */

struct box {
    uint32_t in_head, in_n;      /* frames rx() may still take: in[in_head .. in_n) */
    uint32_t out_n, out_flushed; /* frames tx() took; those before out_flushed were flushed */
    uint32_t in_len[BOX_IN];
    uint16_t out_dst[BOX_OUT];
    uint32_t out_len[BOX_OUT];
    uint8_t in[BOX_IN][FRAME_MAX];
    uint8_t out[BOX_OUT][FRAME_MAX];
};

struct boxlink {
    struct lanai_link l;
    struct box *box;
    int refuse_data_to; /* tx() of DATA to this node fails for good (-EHOSTUNREACH); -1: none */
};

static int box_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
    struct boxlink *bl = (struct boxlink *)l;
    struct box *b = bl->box;
    struct mcp_wire_hdr h;

    if (dst >= l->max_nodes)
        return -EINVAL;
    if (len > l->max_frame)
        return -EMSGSIZE;
    mcp_wire_get(frame, &h);
    if (bl->refuse_data_to == (int)dst && h.type == MCP_FT_DATA)
        return -EHOSTUNREACH;
    if (b->out_n >= BOX_OUT)
        return -EAGAIN;
    memcpy(b->out[b->out_n], frame, len);
    b->out_dst[b->out_n] = dst;
    b->out_len[b->out_n] = len;
    b->out_n++;
    return 0;
}

static int box_flush(struct lanai_link *l)
{
    struct box *b = ((struct boxlink *)l)->box;
    b->out_flushed = b->out_n;
    return 0;
}

static int box_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct box *b = ((struct boxlink *)l)->box;
    int got = 0;
    while (got < n && b->in_head < b->in_n) {
        uint32_t len = b->in_len[b->in_head];
        memcpy(bufs[got], b->in[b->in_head], len <= cap ? len : cap);
        lens[got] = len <= cap ? len : cap + 1;
        b->in_head++;
        got++;
    }
    return got;
}

static void box_close(struct lanai_link *l)
{
    (void)l;
}

static const struct lanai_link_ops box_ops = {
    .tx = box_tx, .flush = box_flush, .rx = box_rx, .close = box_close};

static void boxlink_init(struct boxlink *bl, struct box *b, uint16_t node, uint16_t max_nodes)
{
    memset(bl, 0, sizeof(*bl));
    bl->l.ops = &box_ops;
    bl->l.kind = "sim";
    bl->l.max_frame = FRAME_MAX;
    bl->l.node = node;
    bl->l.max_nodes = max_nodes;
    bl->box = b;
    bl->refuse_data_to = -1;
}

static void box_put(struct box *b, const uint8_t *frame, uint32_t len)
{
    if (b->in_n < BOX_IN) {
        memcpy(b->in[b->in_n], frame, len);
        b->in_len[b->in_n++] = len;
    }
}

/* Top the box up from the sim link (frames left from an earlier pass stay first). */
static void box_fill(struct box *b, struct lanai_link *inner)
{
    uint32_t left = b->in_n - b->in_head;
    if (b->in_head) {
        memmove(b->in, b->in + b->in_head, (size_t)left * sizeof(b->in[0]));
        memmove(b->in_len, b->in_len + b->in_head, (size_t)left * sizeof(b->in_len[0]));
        b->in_head = 0;
        b->in_n = left;
    }
    void *bufs[BOX_IN];
    uint32_t lens[BOX_IN];
    for (uint32_t k = left; k < BOX_IN; k++)
        bufs[k - left] = b->in[k];
    int got = lanai_rx(inner, bufs, FRAME_MAX, lens, (int)(BOX_IN - left));
    for (int k = 0; k < got; k++)
        b->in_len[left + (uint32_t)k] = lens[k];
    b->in_n = left + (uint32_t)(got > 0 ? got : 0);
}

/* Put the flushed frames on the sim link (inner NULL: drop them); the box is empty again. */
static void box_forward(struct box *b, struct lanai_link *inner)
{
    for (uint32_t k = 0; inner && k < b->out_flushed; k++) {
        if (lanai_tx(inner, b->out_dst[k], b->out[k], b->out_len[k]) == -EAGAIN) {
            lanai_flush(inner);
            lanai_tx(inner, b->out_dst[k], b->out[k], b->out_len[k]);
        }
    }
    if (inner)
        lanai_flush(inner);
    b->out_n = b->out_flushed = 0;
}

/* ---- the image checker ---------------------------------------------------------------------- */

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(why, wn, __VA_ARGS__);                                                            \
        free(mark);                                                                                \
        return 0;                                                                                  \
    } while (0)

/* 1 if img is consistent (see the top of this file); else 0 and why. Counters that follow
 * cursors are checked against them (the image must have been formatted for this test). */
static int image_consistent(struct mcp_image *img, char *why, size_t wn)
{
    const struct mcp_config *cfg = &img->cfg;
    uint32_t S = cfg->send_slots, nsend = cfg->contexts * S, nr = cfg->recv_slots;
    uint8_t *mark = calloc(nr + nsend, 1), *in = mark + nr;
    uint32_t *ready = MCP_AT(img, img->off_rx_ready), *fs = MCP_AT(img, img->off_rx_free);
    uint64_t *act = MCP_AT(img, img->off_active);

    if (!mark)
        return 0;
    if (img->journal.op)
        BAD("journal still open (op %u)", img->journal.op);
    /* receive side */
    uint32_t head = img->rx_ready_head, tail = img->rx_ready_tail;
    if (tail - head > nr)
        BAD("ready FIFO holds %u of %u", tail - head, nr);
    for (uint32_t k = head; k != tail; k++) {
        uint32_t r = ready[k % nr];
        if (r >= nr || mark[r]++ || mcp_rslot(img, r)->state != MCP_SLOT_READY)
            BAD("ready FIFO entry %u: receive slot %u (%s)", k, r,
                r < nr ? mcp_slot_state_name(mcp_rslot(img, r)->state) : "?");
    }
    for (uint32_t i = 0; i < img->rx_free_top && i < nr; i++) {
        uint32_t r = fs[i];
        if (r >= nr || mark[r]++ || mcp_rslot(img, r)->state != MCP_SLOT_IDLE)
            BAD("free stack entry %u: receive slot %u", i, r);
    }
    if (img->rx_free_top + (tail - head) != nr)
        BAD("receive slots: %u free + %u ready of %u", img->rx_free_top, tail - head, nr);
    if (img->counters.rx_data != tail || img->counters.delivered != head || img->hostq_head != head)
        BAD("rx_data %llu / FIFO tail %u, delivered %llu / FIFO head %u / host queue head %u",
            (unsigned long long)img->counters.rx_data, tail,
            (unsigned long long)img->counters.delivered, head, img->hostq_head);
    /* send side: every taken slot in exactly one list */
    for (uint16_t n = 0; n < cfg->max_nodes; n++) {
        struct mcp_conn *c = mcp_conn(img, n);
        uint8_t cnt = (uint8_t)(c->snd_nxt - c->snd_una);
        int tx = mcp_seq_diff(c->snd_tx, c->snd_una);
        if (cnt > cfg->window || tx < 0 || tx > cnt)
            BAD("node %u: una %u tx %u nxt %u", n, c->snd_una, c->snd_tx, c->snd_nxt);
        for (uint8_t q = c->snd_una; q != c->snd_nxt; q++) {
            uint32_t id = c->inflight[q % MCP_MAX_WINDOW];
            if (id >= nsend || in[id]++)
                BAD("node %u: seq %u is send slot %u, twice or out of range", n, q, id);
            struct mcp_send_slot *s = mcp_sslot(img, id);
            uint32_t want =
                mcp_seq_diff(q, c->snd_tx) < 0 ? MCP_SLOT_INTRANSIT : MCP_SLOT_RETRANSMIT;
            if (s->state != want || !s->taken || s->seq != q)
                BAD("node %u: seq %u, send slot %u %s (want %s) taken %u seq %u", n, q, id,
                    mcp_slot_state_name(s->state), mcp_slot_state_name(want), s->taken, s->seq);
        }
        uint32_t last = MCP_NIL, k = 0;
        for (uint32_t id = c->q_head; id != MCP_NIL; id = mcp_sslot(img, id)->next) {
            if (id >= nsend || in[id]++ || ++k > nsend)
                BAD("node %u: queue holds send slot %u twice or out of range", n, id);
            struct mcp_send_slot *s = mcp_sslot(img, id);
            if (s->state != MCP_SLOT_READY || !s->taken)
                BAD("node %u: queued send slot %u is %s, taken %u", n, id,
                    mcp_slot_state_name(s->state), s->taken);
            last = id;
        }
        if (last != c->q_tail)
            BAD("node %u: queue tail %u, last %u", n, c->q_tail, last);
        if ((c->q_head != MCP_NIL || cnt || c->ack_pending) && !(act[n / 64] & 1ull << (n % 64)))
            BAD("node %u has work but is not active", n);
    }
    for (uint32_t ci = 0; ci < cfg->contexts; ci++) {
        struct mcp_context *cx = mcp_ctx(img, ci);
        uint32_t posted = cx->head - cx->accept;
        if (posted > S)
            BAD("context %u: accept %u head %u", ci, cx->accept, cx->head);
        if (cx->state != MCP_CTX_FREE && !(img->ctx_mask & 1ull << ci))
            BAD("context %u is not FREE but not in ctx_mask", ci);
        for (uint32_t i = 0; i < S; i++) {
            uint32_t id = ci * S + i;
            struct mcp_send_slot *s = mcp_sslot(img, id);
            int is_posted = (i - cx->accept % S + S) % S < posted;
            if (s->taken ? in[id] != 1 : in[id] != 0)
                BAD("send slot %u: taken %u, in %u lists", id, s->taken, in[id]);
            if (!s->taken && s->state != MCP_SLOT_IDLE &&
                !(s->state == MCP_SLOT_READY && is_posted))
                BAD("send slot %u is %s, not taken and not posted", id,
                    mcp_slot_state_name(s->state));
            if (is_posted && (s->state != MCP_SLOT_READY || s->taken))
                BAD("send slot %u is posted but %s, taken %u", id, mcp_slot_state_name(s->state),
                    s->taken);
        }
        struct mcp_send_error *q = mcp_errq(img, ci);
        for (uint32_t i = 0; i < S; i++) {
            int waiting = (i - cx->errq_tail % S + S) % S < cx->errq_head - cx->errq_tail;
            if (!q[i].full != !waiting)
                BAD("context %u: error entry %u full %u (tail %u head %u)", ci, i, q[i].full,
                    cx->errq_tail, cx->errq_head);
        }
    }
    for (uint32_t i = 0; i < cfg->hostq_slots; i++) {
        uint32_t nq = cfg->hostq_slots;
        int waiting = (i - img->hostq_tail % nq + nq) % nq < img->hostq_head - img->hostq_tail;
        if (!mcp_hostq(img, i)->full != !waiting)
            BAD("host queue entry %u full %u (tail %u head %u)", i, mcp_hostq(img, i)->full,
                img->hostq_tail, img->hostq_head);
    }
    /* frame buffers: each receive slot and host queue entry holds one, none two (delivery
     * swaps them) */
    uint32_t nbuf = nr + cfg->hostq_slots;
    uint8_t *owned = calloc(nbuf, 1);
    if (!owned) {
        free(mark);
        return 0;
    }
    for (uint32_t i = 0; i < nbuf; i++) {
        uint32_t b = i < nr ? mcp_rslot(img, i)->buf : mcp_hostq(img, i - nr)->buf;
        if (b >= nbuf || owned[b]++) {
            free(owned);
            BAD("%s %u holds frame buffer %u, out of range or another's too",
                i < nr ? "receive slot" : "host queue entry", i < nr ? i : i - nr, b);
        }
    }
    free(owned);
    free(mark);
    return 1;
}

#define CONSISTENT(img)                                                                            \
    do {                                                                                           \
        char why_[256] = "";                                                                       \
        CHECK(image_consistent((img), why_, sizeof why_), "image: %s", why_);                      \
    } while (0)

/* ---- directed passes on one node --------------------------------------------------------------
 */

/* Node DUT alone: its image and link box in shared memory, the peer played by the test. */
struct solo {
    struct mcp_image *img, *snap;
    size_t size;
    struct box *box;
    struct boxlink bl;
    struct mcp_nic nic;
    unsigned ctx;
    uint64_t t;
    uint32_t lcid; /* the DUT's connection id towards PEER */
};

static int solo_init(struct solo *s)
{
    struct mcp_config c;
    memset(s, 0, sizeof(*s));
    cfg_traffic(&c, NODES);
    c.contexts = 2;
    c.send_slots = 16;
    s->size = (mcp_image_size(&c) + MCP_CACHELINE - 1) & ~(size_t)(MCP_CACHELINE - 1);
    s->img = shm_alloc(s->size);
    s->snap = malloc(s->size);
    s->box = shm_alloc(sizeof(*s->box));
    if (!CHECK(s->img && s->snap && s->box, "memory") ||
        !CHECK(mcp_image_format(s->img, s->size, &c) == 0, "format"))
        return 0;
    boxlink_init(&s->bl, s->box, DUT, NODES);
    mcp_nic_init(&s->nic, s->img, &s->bl.l);
    int ctx = mcp_ctx_attach(s->img, 42);
    s->ctx = (unsigned)ctx;
    s->t = T0;
    return CHECK(ctx >= 0, "attach");
}

static void solo_fini(struct solo *s)
{
    if (s->img)
        munmap(s->img, s->size);
    if (s->box)
        munmap(s->box, sizeof(*s->box));
    free(s->snap);
}

/* One pass, 10 us after the last; frames sent are dropped. 1 if killed. */
static int solo_pass(struct solo *s, long budget)
{
    s->t += 10 * US;
    int k = run_pass(&s->nic, s->t, budget);
    CHECK(k >= 0, "the pass died of something else than its kill");
    box_forward(s->box, NULL);
    return k == 1;
}

static void solo_put(struct solo *s, uint8_t type, uint32_t dcid, uint8_t seq)
{
    uint8_t f[MCP_WIRE_HDR];
    box_put(s->box, f, build(f, type, PCID, dcid, seq, 0, 0, 0, 0));
}

static int solo_send(struct solo *s, uint16_t dst, uint32_t cookie)
{
    uint8_t msg[40];
    memset(msg, (int)cookie, sizeof msg);
    return mcp_send(s->img, s->ctx, dst, msg, sizeof msg, cookie);
}

/* The DUT opens a connection to PEER with send `cookie` (DATA refused by the link when
 * refuse): SYN out, SYNACK in. */
static int solo_open(struct solo *s, uint32_t cookie, int refuse)
{
    s->bl.refuse_data_to = refuse ? PEER : -1;
    if (!CHECK(solo_send(s, PEER, cookie) == 0, "send"))
        return 0;
    solo_pass(s, 0);
    s->lcid = mcp_conn(s->img, PEER)->local_cid;
    solo_put(s, MCP_FT_SYNACK, s->lcid, PISS);
    solo_pass(s, 0);
    return CHECK(mcp_conn(s->img, PEER)->confirmed, "connection not confirmed");
}

/* Errors popped so far, per cookie (cookies < 64). */
struct errs {
    unsigned n[64];
    int err[64];
    unsigned other;
};

static void pop_errors(struct solo *s, struct errs *e)
{
    struct mcp_send_error x;
    while (mcp_errq_pop(s->img, s->ctx, &x)) {
        if (x.cookie < 64) {
            e->n[x.cookie]++;
            e->err[x.cookie] = x.error;
        } else {
            e->other++;
        }
    }
}

/* Post up to n sends (cookies first..) to PEER into whatever slots are free; how many. */
static unsigned repost(struct solo *s, uint32_t first, unsigned n)
{
    unsigned k = 0;
    while (k < n && solo_send(s, PEER, first + k) == 0)
        k++;
    return k;
}

struct kill_stats {
    unsigned kills, stores, ops[NOPS];
};

static void note_kill(struct kill_stats *ks, const struct mcp_image *img)
{
    ks->kills++;
    ks->ops[img->journal.op < NOPS ? img->journal.op : 0]++;
}

static void print_kills(const char *what, const struct kill_stats *ks)
{
    printf("# %s: %u kills;", what, ks->kills);
    for (unsigned i = 0; i < NOPS; i++)
        if (ks->ops[i])
            printf(" %s %u", op_names[i], ks->ops[i]);
    printf("\n");
}

/* A pass that fails five sends: three refused by the link for good (QFAIL), one to itself and
 * one to a node that cannot exist (TAKE, -EINVAL).  Killed at every store. */
TEST(fail_paths_killed_at_every_store)
{
    struct solo s;
    struct kill_stats ks = {0};
    if (!solo_init(&s) || !solo_open(&s, 60, 1))
        goto out;
    struct errs e0 = {0};
    pop_errors(&s, &e0); /* the first send was refused too */
    CHECK(e0.n[60] == 1 && e0.err[60] == -EHOSTUNREACH, "send 60: %u errors, %d", e0.n[60],
          e0.err[60]);
    for (uint32_t k = 1; k <= 3; k++)
        CHECK_OK(solo_send(&s, PEER, k));
    CHECK_OK(solo_send(&s, DUT, 4));
    CHECK_OK(solo_send(&s, 77, 5));
    memcpy(s.snap, s.img, s.size);
    uint64_t errors0 = s.img->counters.send_errors;
    uint64_t t0 = s.t;

    long k;
    for (k = 1; k < KMAX; k++) {
        memcpy(s.img, s.snap, s.size);
        s.t = t0;
        if (!solo_pass(&s, k))
            break; /* the pass made fewer than k stores */
        note_kill(&ks, s.img);
        struct errs e = {0};
        unsigned reposted = 0;
        if (k & 1) { /* the host goes on before the repair: takes errors, reuses slots */
            pop_errors(&s, &e);
            reposted = repost(&s, 10, 20);
        }
        CHECK_OK(mcp_image_repair(s.img));
        CONSISTENT(s.img);
        solo_pass(&s, 0);
        solo_pass(&s, 0);
        pop_errors(&s, &e);
        for (uint32_t c = 1; c <= 5; c++)
            CHECK(e.n[c] == 1 && e.err[c] == (c <= 3 ? -EHOSTUNREACH : -EINVAL),
                  "K=%ld: send %u reported %u times, error %d", k, c, e.n[c], e.err[c]);
        for (uint32_t c = 10; c < 10 + reposted; c++)
            CHECK(e.n[c] == 1 && e.err[c] == -EHOSTUNREACH,
                  "K=%ld: reposted send %u reported %u times", k, c, e.n[c]);
        CHECK(e.other == 0, "K=%ld: %u unknown errors", k, e.other);
        CHECK_EQ_U64(mcp_send_busy(s.img, s.ctx), 0);
        CHECK_EQ_U64(s.img->counters.send_errors, errors0 + 5 + reposted);
        CHECK_EQ_U64(s.img->counters.errq_overflow, 0);
        CONSISTENT(s.img);
        if (th_state.failures)
            break;
    }
    print_kills("fail paths", &ks);
    CHECK(k > 20 && k < KMAX, "the pass made %ld stores", k - 1);
    CHECK(ks.ops[MCP_J_TAKE] > 0 && ks.ops[MCP_J_QFAIL] > 0, "no kill inside TAKE or QFAIL");
out:
    solo_fini(&s);
}

/* A reset (RST from the peer) with a full window in flight and sends queued behind it. */
TEST(reset_killed_at_every_store)
{
    struct solo s;
    struct kill_stats ks = {0};
    if (!solo_init(&s) || !solo_open(&s, 60, 0))
        goto out;
    for (uint32_t k = 1; k <= 10; k++)
        CHECK_OK(solo_send(&s, PEER, k));
    solo_pass(&s, 0);
    struct mcp_conn *c = mcp_conn(s.img, PEER);
    CHECK_EQ_U64((uint8_t)(c->snd_nxt - c->snd_una), s.img->cfg.window);
    CHECK(c->q_head != MCP_NIL, "nothing queued");
    memcpy(s.snap, s.img, s.size);
    uint64_t t0 = s.t;

    long k;
    for (k = 1; k < KMAX; k++) {
        memcpy(s.img, s.snap, s.size);
        s.t = t0;
        s.box->in_head = s.box->in_n = 0;
        solo_put(&s, MCP_FT_RST, s.lcid, 0);
        if (!solo_pass(&s, k))
            break;
        note_kill(&ks, s.img);
        struct errs e = {0};
        unsigned reposted = 0;
        if (k & 1) {
            pop_errors(&s, &e);
            reposted = repost(&s, 20, 20);
        }
        CHECK_OK(mcp_image_repair(s.img));
        CONSISTENT(s.img);
        solo_pass(&s, 0);
        if (mcp_conn(s.img, PEER)->local_cid == s.lcid) { /* the RST died with the pass */
            solo_put(&s, MCP_FT_RST, s.lcid, 0);
            solo_pass(&s, 0);
        }
        pop_errors(&s, &e);
        CHECK(e.n[60] == 1 && e.err[60] == -ECONNRESET, "K=%ld: send 60: %u errors", k, e.n[60]);
        for (uint32_t i = 1; i <= 10; i++)
            CHECK(e.n[i] == 1 && e.err[i] == -ECONNRESET,
                  "K=%ld: send %u reported %u times, error %d", k, i, e.n[i], e.err[i]);
        /* What the host posted meanwhile waits for the new connection, or, when the RST died
         * with the pass (and came again), was queued on the old one and reset with it. */
        unsigned reset_too = 0;
        for (uint32_t i = 20; i < 20 + reposted; i++) {
            CHECK(e.n[i] <= 1 && (!e.n[i] || e.err[i] == -ECONNRESET),
                  "K=%ld: reposted send %u reported %u times", k, i, e.n[i]);
            reset_too += e.n[i];
        }
        CHECK(e.other == 0, "K=%ld: %u unknown errors", k, e.other);
        CHECK_EQ_U64(mcp_send_busy(s.img, s.ctx), reposted - reset_too);
        CHECK_EQ_U64(s.img->counters.send_errors, 11 + reset_too);
        CONSISTENT(s.img);
        if (th_state.failures)
            break;
    }
    print_kills("reset", &ks);
    CHECK(k > 20 && k < KMAX, "the pass made %ld stores", k - 1);
    CHECK(ks.ops[MCP_J_RESET] > 20, "only %u kills inside RESET", ks.ops[MCP_J_RESET]);
out:
    solo_fini(&s);
}

/* Hosts that die between two stores of theirs, and a pass that frees a context, killed at
 * every store. */
TEST(host_deaths_and_a_context_freed_at_every_store)
{
    struct solo s;
    struct kill_stats ks = {0};
    if (!solo_init(&s) || !solo_open(&s, 60, 0))
        goto out;
    /* a context detached with nothing pending is freed by the next pass: its ctx_mask bit is
     * cleared, then its state becomes FREE */
    int c2 = mcp_ctx_attach(s.img, 43);
    REQUIRE(c2 == 1, "second context: %d", c2);
    mcp_ctx_detach(s.img, 1);
    memcpy(s.snap, s.img, s.size);
    uint64_t t0 = s.t;
    long k;
    for (k = 1; k < KMAX; k++) {
        memcpy(s.img, s.snap, s.size);
        s.t = t0;
        if (!solo_pass(&s, k))
            break;
        note_kill(&ks, s.img);
        CHECK_OK(mcp_image_repair(s.img));
        CONSISTENT(s.img);
        solo_pass(&s, 0);
        CHECK(mcp_ctx(s.img, 1)->state == MCP_CTX_FREE && !(s.img->ctx_mask & 2),
              "K=%ld: context 1 state %u, ctx_mask %llx", k, mcp_ctx(s.img, 1)->state,
              (unsigned long long)s.img->ctx_mask);
        if (th_state.failures)
            break;
    }
    print_kills("context freed", &ks);
    CHECK(k > 5 && k < KMAX, "the pass made %ld stores", k - 1);

    /* a process that died inside mcp_ctx_attach(), after taking the context, before its bit */
    uint32_t expect = MCP_CTX_FREE;
    CHECK(__atomic_compare_exchange_n(&mcp_ctx(s.img, 1)->state, &expect, MCP_CTX_ATTACHED, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE),
          "context 1 not FREE");
    CHECK_OK(mcp_image_repair(s.img));
    CONSISTENT(s.img);
    CHECK(s.img->ctx_mask & 2, "context 1 attached, not in ctx_mask");
    mcp_ctx_detach(s.img, 1); /* whoever reclaims the dead owner */
    solo_pass(&s, 0);
    CHECK_EQ_U64(mcp_ctx(s.img, 1)->state, MCP_CTX_FREE);

    /* a reader that died inside mcp_recv_done(), after its tail, before clearing `full` */
    uint8_t f[MCP_WIRE_HDR + 40];
    box_put(s.box, f, build(f, MCP_FT_DATA, PCID, s.lcid, PISS, 0, 0, 40, 7));
    solo_pass(&s, 0);
    struct mcp_rx_desc d;
    REQUIRE(mcp_recv_peek(s.img, &d) && d.len == 40, "the DATA frame was not delivered");
    uint32_t q = s.img->hostq_tail % s.img->cfg.hostq_slots;
    s.img->hostq_tail++;
    CHECK_OK(mcp_image_repair(s.img));
    CONSISTENT(s.img);
    CHECK_EQ_U64(mcp_hostq(s.img, q)->full, 0);

    /* a sender that died inside mcp_errq_pop(), likewise */
    CHECK_OK(solo_send(&s, 77, 8));
    solo_pass(&s, 0);
    struct mcp_context *cx = mcp_ctx(s.img, s.ctx);
    uint32_t i = cx->errq_tail % s.img->cfg.send_slots;
    REQUIRE(mcp_errq(s.img, s.ctx)[i].full, "no error queued");
    cx->errq_tail++;
    CHECK_OK(mcp_image_repair(s.img));
    CONSISTENT(s.img);
    CHECK_EQ_U64(mcp_errq(s.img, s.ctx)[i].full, 0);
out:
    solo_fini(&s);
}

/* ---- the traffic cluster with node V dying ------------------------------------------------- */

struct report {
    char why[512];
    struct kill_stats ks;
    unsigned repair_kills;
};

struct rig {
    struct cluster cl;
    struct mcp_image *img;   /* node V's image (in shared memory if shared) */
    struct mcp_image *orig;  /* if shared: the fixture's copy (cluster_fini frees it) */
    struct mcp_image *decoy; /* what cluster_round() polls for node V */
    struct box *box;
    struct boxlink bl;
    struct lanai_link null;
    struct mcp_nic nic; /* node V's executor: its image over the box */
    uint64_t total;
    int dead;    /* node V's executor died: the next one repairs first */
    int abandon; /* passes with a budget are abandoned in-process, not killed in a child */
    int shared;  /* image and box in shared memory (children are killed) */
    struct report *rep;
};

static int null_tx(struct lanai_link *l, uint16_t dst, const void *f, uint32_t len)
{
    (void)l;
    (void)dst;
    (void)f;
    (void)len;
    return 0;
}

static int null_flush(struct lanai_link *l)
{
    (void)l;
    return 0;
}

static int null_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    (void)l;
    (void)bufs;
    (void)cap;
    (void)lens;
    (void)n;
    return 0;
}

static const struct lanai_link_ops null_ops = {
    .tx = null_tx, .flush = null_flush, .rx = null_rx, .close = box_close};

/*
 * n nodes streaming per_pair messages each way through the fixture's cluster (strict: exactly
 * once, in order).  Node V's image moves to shared memory and its firmware is run by the test
 * (rig_turn); cluster_round() still posts, drains and checks for node V's host, and polls a
 * decoy image in its place.
 */
static int rig_init(struct rig *r, unsigned n, const struct mcp_config *c,
                    const struct mcp_fault_cfg *f, uint32_t per_pair, int shared)
{
    memset(r, 0, sizeof(*r));
    if (!cluster_init(&r->cl, n, c, f, 1000, 200))
        return 0;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++)
            if (i != j) {
                cluster_target(&r->cl, i, j, per_pair);
                r->total += per_pair;
            }
    struct cl_node *v = &r->cl.node[V];
    r->shared = shared;
    r->img = shared ? shm_alloc(v->img->size) : v->img;
    r->box = shared ? shm_alloc(sizeof(*r->box)) : calloc(1, sizeof(*r->box));
    r->rep = shm_alloc(sizeof(*r->rep));
    struct mcp_config dc = r->cl.cfg;
    dc.node_id = V;
    r->decoy = image_new(&dc);
    if (!CHECK(r->img && r->box && r->rep && r->decoy, "memory"))
        return 0;
    if (shared) {
        memcpy(r->img, v->img, v->img->size);
        r->orig = v->img;
        v->img = r->img;
    }
    boxlink_init(&r->bl, r->box, V, v->link->max_nodes);
    mcp_nic_init(&r->nic, r->img, &r->bl.l);
    r->null.ops = &null_ops;
    r->null.kind = "null";
    r->null.max_frame = FRAME_MAX;
    r->null.max_nodes = v->link->max_nodes;
    mcp_nic_init(&v->nic, r->decoy, &r->null);
    return 1;
}

static void rig_fini(struct rig *r)
{
    if (r->orig) {
        r->cl.node[V].img = r->orig;
        munmap(r->img, r->orig->size);
    }
    cluster_fini(&r->cl);
    free(r->decoy);
    if (r->box && r->shared)
        munmap(r->box, sizeof(*r->box));
    else
        free(r->box);
    if (r->rep)
        munmap(r->rep, sizeof(*r->rep));
}

static void rig_fail(struct rig *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rig_fail(struct rig *r, const char *fmt, ...)
{
    if (r->rep->why[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->rep->why, sizeof r->rep->why, fmt, ap);
    va_end(ap);
}

/*
 * Node V's turn in the round cluster_round() just ran: the repair first if its last executor
 * died (itself killed at its repair_budget-th store first, if > 0), then one pass (killed at
 * its budget-th store, if > 0).  1: the pass was killed; 0: it ran; -1: failure (rep->why).
 */
static int rig_turn(struct rig *r, long budget, long repair_budget)
{
    if (r->dead) {
        if (repair_budget > 0) {
            int k = run_killed(repair_fn, r->img, repair_budget);
            if (k < 0) {
                rig_fail(r, "a repair died of something else than its kill");
                return -1;
            }
            r->rep->repair_kills += (unsigned)k;
        }
        int rc = mcp_image_repair(r->img);
        char why[256] = "";
        if (rc) {
            rig_fail(r, "round %llu: mcp_image_repair: %d", (unsigned long long)r->cl.rounds, rc);
            return -1;
        }
        if (!image_consistent(r->img, why, sizeof why)) {
            rig_fail(r, "round %llu, after the repair: %s", (unsigned long long)r->cl.rounds, why);
            return -1;
        }
        r->dead = 0;
    }
    box_fill(r->box, r->cl.node[V].link);
    int k = r->abandon && budget > 0 ? run_pass_abandoned(&r->nic, r->cl.t, budget)
                                     : run_pass(&r->nic, r->cl.t, budget);
    box_forward(r->box, r->cl.node[V].link);
    if (k < 0) {
        rig_fail(r, "round %llu: the pass died of something else than its kill",
                 (unsigned long long)r->cl.rounds);
        return -1;
    }
    if (k == 1) {
        r->dead = 1;
        note_kill(&r->rep->ks, r->img);
    }
    return k;
}

/* What must hold at the end of a run (rep->why on failure). */
static int rig_final(struct rig *r)
{
    struct cluster *cl = &r->cl;
    char why[256] = "";
    if (!cluster_done(cl))
        rig_fail(r, "not done after %llu rounds: %llu of %llu delivered",
                 (unsigned long long)cl->rounds, (unsigned long long)cl->delivered,
                 (unsigned long long)r->total);
    else if (cl->bad)
        rig_fail(r, "%llu verification failures, first: %s", (unsigned long long)cl->bad, cl->why);
    else if (cl->delivered != r->total)
        rig_fail(r, "%llu of %llu delivered", (unsigned long long)cl->delivered,
                 (unsigned long long)r->total);
    else if (cl->errq[0] + cl->errq[1] + cl->errq[2] + cl->errq[3])
        rig_fail(r, "sends failed");
    else if (cluster_counter(cl, "rx_data") != r->total ||
             cluster_counter(cl, "delivered") != r->total ||
             cluster_counter(cl, "tx_data") != r->total || cluster_counter(cl, "send_errors") != 0)
        rig_fail(r, "counters: rx_data %llu delivered %llu tx_data %llu send_errors %llu of %llu",
                 (unsigned long long)cluster_counter(cl, "rx_data"),
                 (unsigned long long)cluster_counter(cl, "delivered"),
                 (unsigned long long)cluster_counter(cl, "tx_data"),
                 (unsigned long long)cluster_counter(cl, "send_errors"),
                 (unsigned long long)r->total);
    else if (!image_consistent(r->img, why, sizeof why))
        rig_fail(r, "at the end: %s", why);
    else if (r->img->rx_free_top != r->img->cfg.recv_slots)
        rig_fail(r, "at the end %u of %u receive slots free", r->img->rx_free_top,
                 r->img->cfg.recv_slots);
    return r->rep->why[0] == 0;
}

/* Run rounds to the end; node V dies in a pass with probability 1/kill_every (0: never). */
static int rig_run(struct rig *r, uint64_t max_rounds, unsigned kill_every, uint64_t *rng)
{
    while (r->cl.rounds < max_rounds) {
        long budget = 0, repair_budget = 0;
        if (kill_every) {
            uint64_t x = *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
            if ((x >> 33) % kill_every == 0)
                budget = 1 + (long)((x >> 40) % 150);
            if (r->dead && (x >> 20) % 2)
                repair_budget = 1 + (long)((x >> 24) % 16);
        }
        cluster_round(&r->cl);
        if (rig_turn(r, budget, repair_budget) < 0)
            return 0;
        if (!r->dead && cluster_done(&r->cl))
            break;
    }
    return rig_final(r);
}

#define SWEEP_MORE 8 /* messages per pair a fork posts after its kill */

enum { WORLD_OK = 0, WORLD_FAIL = 1, WORLD_BEYOND = 3 };

/*
 * Node V's pass of this round, once per K in a fork of the whole test: killed at store K,
 * repaired in the next round, run to the end and checked there.  Returns the number of stores
 * the pass makes; *failed counts the forks that failed.
 */
static long sweep_pass(struct rig *r, unsigned *failed)
{
    for (long k = 1; k < KMAX; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            int first = !r->rep->why[0];
            uint64_t round = r->cl.rounds;
            r->abandon = 1;
            int rc = rig_turn(r, k, 0);

            if (rc == 0)
                _exit(WORLD_BEYOND);
            /* after the kill, the hosts post a few more messages each, then the run ends */
            r->total = 0;
            for (unsigned i = 0; i < r->cl.n; i++)
                for (unsigned j = 0; j < r->cl.n; j++) {
                    uint32_t *t = &r->cl.target[i][j];
                    if (*t > r->cl.posted[i][j] + SWEEP_MORE)
                        *t = r->cl.posted[i][j] + SWEEP_MORE;
                    r->total += *t;
                }
            if (rc < 0 || !rig_run(r, r->cl.rounds + 20000, 0, NULL)) {
                char tmp[400];
                snprintf(tmp, sizeof tmp, "%.399s", r->rep->why);
                if (first)
                    snprintf(r->rep->why, sizeof r->rep->why, "round %llu, killed at store %ld: %s",
                             (unsigned long long)round, k, tmp);
                _exit(WORLD_FAIL);
            }
            _exit(WORLD_OK);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
            if (errno != EINTR)
                return -1;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : WORLD_FAIL;
        if (code == WORLD_BEYOND)
            return k - 1;
        if (code != WORLD_OK) {
            if (!r->rep->why[0])
                snprintf(r->rep->why, sizeof r->rep->why, "round %llu, K=%ld: the fork died",
                         (unsigned long long)r->cl.rounds, k);
            ++*failed;
        }
    }
    return KMAX;
}

/* Sweep node V's passes at rounds in points[] (ascending, 0-terminated), then finish the run. */
static void sweep(const char *name, const struct mcp_config *c, const struct mcp_fault_cfg *f,
                  unsigned nodes, uint32_t per_pair, unsigned drain_every, const uint64_t *points)
{
    struct rig r;
    unsigned failed = 0, passes = 0;
    long stores = 0;
    double t0 = now_s();
    if (!rig_init(&r, nodes, c, f, per_pair, 0))
        goto out;
    r.cl.drain_every = drain_every;
    while (r.cl.rounds < 200000) {
        cluster_round(&r.cl);
        if (*points && r.cl.rounds == *points) {
            long n = sweep_pass(&r, &failed);
            CHECK(n > 0 && n < KMAX, "round %llu: %ld stores", (unsigned long long)*points, n);
            stores += n;
            passes++;
            points++;
        }
        if (rig_turn(&r, 0, 0) < 0 || cluster_done(&r.cl))
            break;
    }
    CHECK(*points == 0, "the run ended before round %llu", (unsigned long long)*points);
    CHECK(failed == 0, "%u of %ld killed runs failed; first: %s", failed, stores, r.rep->why);
    if (!failed)
        CHECK(rig_final(&r), "the run without kills: %s", r.rep->why);
    print_kills(name, &r.rep->ks);
    printf("# %s: %u passes swept, %ld stores, %llu rounds, %.1f s\n", name, passes, stores,
           (unsigned long long)r.cl.rounds, now_s() - t0);
    CHECK_EQ_U64(r.rep->ks.kills, stores);
    static const unsigned want[] = {MCP_J_ACCEPT, MCP_J_DELIVER, MCP_J_TAKE, MCP_J_SEND,
                                    MCP_J_ACK,    MCP_J_OPEN,    MCP_J_LEARN};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(r.rep->ks.ops[want[i]] > 0, "no kill inside %s", op_names[want[i]]);
out:
    rig_fini(&r);
}

/* The traffic configuration with small rings: fewer stores per pass, smaller images to fork. */
static void cfg_rig(struct mcp_config *c)
{
    cfg_traffic(c, 3);
    c->send_slots = 16;
    c->recv_slots = 16;
    c->hostq_slots = 16;
    c->rto_us = 60; /* a pass that dies loses frames: recover quickly in virtual time */
    c->rto_max_us = 960;
}

TEST(sweep_lossy_net)
{
    struct mcp_config c;
    cfg_rig(&c);
    struct mcp_fault_cfg f = {.loss = 0.03, .dup = 0.03, .reorder = 0.03, .reorder_max = 3};
    f.seed = th_seed(2001);
    c.seed = f.seed * 7919u + 1;
    /* the first passes open connections and fill the rings; later ones run in a steady state */
    static const uint64_t points[] = {1, 2, 3, 20, 30, 0};
    sweep("sweep, lossy net", &c, &f, 3, 60, 1, points);
}

TEST(sweep_slow_hosts_small_rings)
{
    /* a host that drains every 3rd round into 4 entries, 8 receive slots: host queue full,
     * NOBUF NACKs, the last receive slot (round 7 swept too: with 8 slots rather than 6, the
     * kills of rounds 1-5 and 11 hit no ACK step) */
    struct mcp_config c;
    cfg_rig(&c);
    c.recv_slots = 8;
    c.hostq_slots = 4;
    struct mcp_fault_cfg f = {.loss = 0.02, .reorder = 0.02, .reorder_max = 3};
    f.seed = th_seed(2002);
    c.seed = f.seed * 7919u + 1;
    static const uint64_t points[] = {1, 2, 3, 5, 7, 11, 0};
    sweep("sweep, slow hosts", &c, &f, 3, 60, 3, points);
}

TEST(rolling_kills_of_passes_and_repairs)
{
    struct rig r;
    struct mcp_config c;
    cfg_rig(&c);
    struct mcp_fault_cfg f = {.loss = 0.02, .dup = 0.02, .reorder = 0.02, .reorder_max = 3};
    f.seed = th_seed(2003);
    c.seed = f.seed * 7919u + 1;
    uint64_t rng = f.seed;
    double t0 = now_s();
    if (!rig_init(&r, 3, &c, &f, 1000, 1))
        goto out;
    int ok = rig_run(&r, 400000, 3, &rng);
    CHECK(ok, "%s", r.rep->why);
    print_kills("rolling", &r.rep->ks);
    printf("# rolling: %llu rounds, %u repairs killed, repairs %llu undone %llu redone %llu, "
           "%.1f s\n",
           (unsigned long long)r.cl.rounds, r.rep->repair_kills,
           (unsigned long long)r.img->counters.repairs,
           (unsigned long long)r.img->counters.repair_undone,
           (unsigned long long)r.img->counters.repair_redone, now_s() - t0);
    CHECK_GT_U64(r.rep->ks.kills, 500);
    CHECK_GT_U64(r.rep->repair_kills, 100);
    CHECK_GT_U64(r.img->counters.repair_undone, 0);
    CHECK_GT_U64(r.img->counters.repair_redone, 0);
out:
    rig_fini(&r);
}

/* ---- the repair itself ------------------------------------------------------------------------
 */

TEST(repair_of_a_consistent_image_changes_nothing)
{
    struct rig r;
    struct mcp_config c;
    cfg_rig(&c);
    struct mcp_fault_cfg f = {.loss = 0.05};
    f.seed = th_seed(2004);
    if (!rig_init(&r, 3, &c, &f, 400, 0))
        goto out;
    for (int i = 0; i < 40; i++) {
        cluster_round(&r.cl);
        rig_turn(&r, 0, 0);
    }
    size_t size = r.img->size;
    uint8_t *before = malloc(size);
    REQUIRE(before, "memory");
    memcpy(before, r.img, size);
    CHECK_OK(mcp_image_repair(r.img));
    CHECK_EQ_U64(r.img->counters.repairs, 1);
    CHECK_EQ_U64(r.img->counters.repair_undone + r.img->counters.repair_redone, 0);
    CHECK_EQ_U64(r.img->rx_event, ((struct mcp_image *)before)->rx_event + 1);
    r.img->counters.repairs = 0;
    r.img->rx_event--;
    CHECK(memcmp(before, r.img, size) == 0, "the repair changed a consistent image");
    free(before);
    CONSISTENT(r.img);
    CHECK(rig_run(&r, 200000, 0, NULL), "%s", r.rep->why);
out:
    rig_fini(&r);
}

TEST(repair_refuses_foreign_and_contradictory_images)
{
    struct solo s;
    if (!solo_init(&s) || !solo_open(&s, 60, 0))
        goto out;
    memcpy(s.snap, s.img, s.size);
    s.img->magic ^= 1;
    CHECK_RC(mcp_image_repair(s.img), -EPROTO);
    memcpy(s.img, s.snap, s.size);
    s.img->abi_version = 1; /* the layout without the journal */
    CHECK_RC(mcp_image_repair(s.img), -EPROTO);
    /* a receive slot twice in the ready FIFO */
    memcpy(s.img, s.snap, s.size);
    uint32_t *ready = MCP_AT(s.img, s.img->off_rx_ready);
    ready[0] = ready[1] = 3;
    s.img->rx_ready_head = 0;
    s.img->rx_ready_tail = 2;
    CHECK_RC(mcp_image_repair(s.img), -EUCLEAN);
    /* a peer queue that runs in a circle */
    memcpy(s.img, s.snap, s.size);
    CHECK_OK(solo_send(&s, 2, 1));
    CHECK_OK(solo_send(&s, 2, 2));
    solo_pass(&s, 0); /* both queued behind the SYN to node 2 */
    struct mcp_conn *c = mcp_conn(s.img, 2);
    REQUIRE(c->q_head != MCP_NIL && c->q_head != c->q_tail, "two queued sends");
    mcp_sslot(s.img, c->q_tail)->next = c->q_head;
    CHECK_RC(mcp_image_repair(s.img), -EUCLEAN);
    /* an open step naming a slot that does not exist */
    memcpy(s.img, s.snap, s.size);
    s.img->journal.op = MCP_J_SEND;
    s.img->journal.slot = 100000;
    CHECK_RC(mcp_image_repair(s.img), -EUCLEAN);
out:
    solo_fini(&s);
}

TEST_MAIN()
