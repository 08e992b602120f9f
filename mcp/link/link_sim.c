/*
 * link_sim.c — the simulated network (see link_sim.h).
 *
 * Every frame lives in a buffer from the net's pool (free list; the pool grows when empty,
 * which is acceptable for a test network, and everything returns to it, so a long run does not
 * allocate once it has warmed up).  A frame moves:
 *
 *   tx():    copied into a buffer, queued on the sending link (at most SIM_TXQ frames)
 *   flush(): decided by the fault generator -> dropped, or enqueued at the destination with
 *            due = now + delay (twice if duplicated; a corrupted frame has one byte flipped),
 *            or held back (reordering) until hold_frames later frames went onto the net, or
 *            until the clock has moved SIM_HOLD_MAX_NS past the moment it was held
 *   rx():    frames at the head of the node's queue whose due time has come, in queue order
 *
 * A mutex makes the net usable from several threads (one per node); tests are single-threaded.
 */
#include "link_sim.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_TXQ         256        /* frames a link queues before tx() says -EAGAIN */
#define SIM_HOLD_MAX_NS 10000ull   /* a held frame goes out at the latest after 10 µs */
#define SIM_INJECT_MAX  (1u << 20) /* largest injected frame */

struct sim_frame {
    struct sim_frame *next;
    uint64_t due;       /* net time from which it is receivable */
    uint64_t held_at;   /* net time when it was held back */
    uint32_t hold_left; /* frames still to pass it before it is released */
    uint32_t len;
    uint32_t cap; /* size of data[]; pooled when cap == net->max_frame */
    uint16_t dst;
    uint8_t data[];
};

/* A singly linked FIFO. */
struct sim_fifo {
    struct sim_frame *head, *tail;
    uint64_t count;
};

struct sim_link {
    struct lanai_link l;
    struct mcp_sim_net *net;
    struct sim_fifo txq; /* frames queued by tx(), not yet flushed */
};

struct mcp_sim_net {
    pthread_mutex_t lock;
    uint16_t nodes;
    uint32_t max_frame;
    uint64_t now;
    struct mcp_fault fault;
    struct sim_link **links; /* per node, NULL when no link is open */
    struct sim_fifo *rxq;    /* per node: frames on their way to it */
    struct sim_fifo held;    /* frames held back for reordering */
    struct sim_frame *pool;  /* free buffers of max_frame bytes */
    uint64_t pending;        /* frames in rxq[] and held */
    struct mcp_sim_stats st;
};

static void fifo_push(struct sim_fifo *q, struct sim_frame *f)
{
    f->next = NULL;
    if (q->tail)
        q->tail->next = f;
    else
        q->head = f;
    q->tail = f;
    q->count++;
}

static struct sim_frame *fifo_pop(struct sim_fifo *q)
{
    struct sim_frame *f = q->head;
    if (f) {
        q->head = f->next;
        if (!q->head)
            q->tail = NULL;
        q->count--;
        f->next = NULL;
    }
    return f;
}

/* A buffer for len bytes (from the pool when it fits a pooled buffer). NULL when out of memory. */
static struct sim_frame *frame_get(struct mcp_sim_net *net, uint32_t len)
{
    struct sim_frame *f;
    if (len <= net->max_frame && net->pool) {
        f = net->pool;
        net->pool = f->next;
    } else {
        uint32_t cap = len <= net->max_frame ? net->max_frame : len;
        f = malloc(sizeof *f + cap);
        if (!f)
            return NULL;
        f->cap = cap;
    }
    f->next = NULL;
    f->len = len;
    f->due = 0;
    f->held_at = 0;
    f->hold_left = 0;
    f->dst = 0;
    return f;
}

static void frame_put(struct mcp_sim_net *net, struct sim_frame *f)
{
    if (f->cap == net->max_frame) {
        f->next = net->pool;
        net->pool = f;
    } else {
        free(f);
    }
}

static void fifo_free(struct mcp_sim_net *net, struct sim_fifo *q)
{
    struct sim_frame *f;
    while ((f = fifo_pop(q)))
        frame_put(net, f);
}

/* Put f into its destination's queue, receivable at now + delay; lost if nobody listens. */
static void deliver(struct mcp_sim_net *net, struct sim_frame *f)
{
    if (f->dst >= net->nodes || !net->links[f->dst]) {
        net->st.dropped++;
        frame_put(net, f);
        return;
    }
    f->due = net->now + net->fault.cfg.delay_ns;
    fifo_push(&net->rxq[f->dst], f);
    net->pending++;
    if (net->pending > net->st.queued_max)
        net->st.queued_max = net->pending;
}

/* Release held frames whose count ran out, or every one held since before `older_than`. */
static void release_held(struct mcp_sim_net *net, int count_one, uint64_t older_than)
{
    struct sim_frame **pp = &net->held.head, *prev = NULL;
    while (*pp) {
        struct sim_frame *f = *pp;
        if (count_one && f->hold_left > 0)
            f->hold_left--;
        if (f->hold_left == 0 || f->held_at < older_than) {
            *pp = f->next;
            if (net->held.tail == f)
                net->held.tail = prev;
            net->held.count--;
            net->pending--; /* deliver() counts it again */
            deliver(net, f);
        } else {
            prev = f;
            pp = &f->next;
        }
    }
}

/* One frame goes onto the net: apply the fault verdict. */
static void net_send(struct mcp_sim_net *net, struct sim_frame *f)
{
    struct mcp_fault_verdict v;
    uint8_t type = f->len > 3 ? f->data[3] : 0;

    net->st.sent++;
    mcp_fault_decide(&net->fault, type, f->len, &v);
    if (v.drop) {
        net->st.dropped++;
        frame_put(net, f);
        release_held(net, 1, 0);
        return;
    }

    struct sim_frame *copy = NULL;
    if (v.dup) {
        copy = frame_get(net, f->len);
        if (copy) {
            memcpy(copy->data, f->data, f->len);
            copy->dst = f->dst;
            net->st.duplicated++;
        }
    }
    if (v.corrupt) {
        f->data[v.corrupt_at] ^= v.corrupt_mask;
        net->st.corrupted++;
    }

    if (v.hold) {
        /* the frames held before count this one; it does not count itself */
        release_held(net, 1, 0);
        f->hold_left = v.hold_frames;
        f->held_at = net->now;
        fifo_push(&net->held, f);
        net->pending++;
        if (net->pending > net->st.queued_max)
            net->st.queued_max = net->pending;
        net->st.reordered++;
        if (copy)
            deliver(net, copy);
    } else {
        /* this frame overtakes the held ones whose count it completes */
        deliver(net, f);
        if (copy)
            deliver(net, copy);
        release_held(net, 1, 0);
    }
}

static int sim_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
    struct sim_link *sl = (struct sim_link *)l;
    struct mcp_sim_net *net = sl->net;

    if (len == 0 || !frame || dst >= net->nodes)
        return -EINVAL;
    if (len > net->max_frame)
        return -EMSGSIZE;
    pthread_mutex_lock(&net->lock);
    if (sl->txq.count >= SIM_TXQ) {
        pthread_mutex_unlock(&net->lock);
        return -EAGAIN;
    }
    struct sim_frame *f = frame_get(net, len);
    if (!f) {
        pthread_mutex_unlock(&net->lock);
        return -EAGAIN;
    }
    memcpy(f->data, frame, len);
    f->dst = dst;
    fifo_push(&sl->txq, f);
    pthread_mutex_unlock(&net->lock);
    return 0;
}

static int sim_flush(struct lanai_link *l)
{
    struct sim_link *sl = (struct sim_link *)l;
    struct mcp_sim_net *net = sl->net;
    int n = 0;

    pthread_mutex_lock(&net->lock);
    struct sim_frame *f;
    while ((f = fifo_pop(&sl->txq))) {
        net_send(net, f);
        n++;
    }
    pthread_mutex_unlock(&net->lock);
    return n;
}

static int sim_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct sim_link *sl = (struct sim_link *)l;
    struct mcp_sim_net *net = sl->net;
    int got = 0;

    pthread_mutex_lock(&net->lock);
    struct sim_fifo *q = &net->rxq[l->node];
    while (got < n && q->head && q->head->due <= net->now) {
        struct sim_frame *f = fifo_pop(q);
        net->pending--;
        uint32_t c = f->len <= cap ? f->len : cap;
        memcpy(bufs[got], f->data, c);
        lens[got] = f->len <= cap ? f->len : cap + 1;
        net->st.delivered++;
        frame_put(net, f);
        got++;
    }
    pthread_mutex_unlock(&net->lock);
    return got;
}

static void sim_close(struct lanai_link *l)
{
    struct sim_link *sl = (struct sim_link *)l;
    struct mcp_sim_net *net = sl->net;

    pthread_mutex_lock(&net->lock);
    fifo_free(net, &sl->txq);
    /* frames still on their way to this node are lost with it */
    net->pending -= net->rxq[l->node].count;
    fifo_free(net, &net->rxq[l->node]);
    net->links[l->node] = NULL;
    pthread_mutex_unlock(&net->lock);
    free(sl);
}

static const struct lanai_link_ops sim_ops = {
    .tx = sim_tx,
    .flush = sim_flush,
    .rx = sim_rx,
    .close = sim_close,
};

struct mcp_sim_net *mcp_sim_net_create(uint16_t nodes, uint32_t max_frame,
                                       const struct mcp_fault_cfg *f)
{
    if (nodes == 0 || nodes > 1024 || max_frame == 0 || max_frame > SIM_INJECT_MAX)
        return NULL;
    struct mcp_sim_net *net = calloc(1, sizeof *net);
    if (!net)
        return NULL;
    net->links = calloc(nodes, sizeof *net->links);
    net->rxq = calloc(nodes, sizeof *net->rxq);
    if (!net->links || !net->rxq) {
        free(net->links);
        free(net->rxq);
        free(net);
        return NULL;
    }
    pthread_mutex_init(&net->lock, NULL);
    net->nodes = nodes;
    net->max_frame = max_frame;
    mcp_fault_init(&net->fault, f);
    return net;
}

void mcp_sim_net_destroy(struct mcp_sim_net *net)
{
    if (!net)
        return;
    for (uint16_t i = 0; i < net->nodes; i++) {
        if (net->links[i])
            sim_close(&net->links[i]->l); /* a forgotten link: close it rather than leak */
    }
    fifo_free(net, &net->held);
    for (uint16_t i = 0; i < net->nodes; i++)
        fifo_free(net, &net->rxq[i]);
    while (net->pool) {
        struct sim_frame *f = net->pool;
        net->pool = f->next;
        free(f);
    }
    pthread_mutex_destroy(&net->lock);
    free(net->links);
    free(net->rxq);
    free(net);
}

void mcp_sim_net_set_fault(struct mcp_sim_net *net, const struct mcp_fault_cfg *f)
{
    pthread_mutex_lock(&net->lock);
    mcp_fault_init(&net->fault, f);
    pthread_mutex_unlock(&net->lock);
}

void mcp_sim_net_set_time(struct mcp_sim_net *net, uint64_t now_ns)
{
    pthread_mutex_lock(&net->lock);
    if (now_ns > net->now)
        net->now = now_ns;
    /* nothing stays held forever: a sender that went quiet still gets its frames through */
    if (net->held.head && net->now >= SIM_HOLD_MAX_NS)
        release_held(net, 0, net->now - SIM_HOLD_MAX_NS + 1);
    pthread_mutex_unlock(&net->lock);
}

struct lanai_link *mcp_sim_link_open(struct mcp_sim_net *net, uint16_t node)
{
    if (!net || node >= net->nodes)
        return NULL;
    struct sim_link *sl = calloc(1, sizeof *sl);
    if (!sl)
        return NULL;
    pthread_mutex_lock(&net->lock);
    if (net->links[node]) {
        pthread_mutex_unlock(&net->lock);
        free(sl);
        return NULL;
    }
    sl->l.ops = &sim_ops;
    sl->l.kind = "sim";
    sl->l.max_frame = net->max_frame;
    sl->l.node = node;
    sl->l.max_nodes = net->nodes;
    sl->net = net;
    net->links[node] = sl;
    pthread_mutex_unlock(&net->lock);
    return &sl->l;
}

int mcp_sim_inject(struct mcp_sim_net *net, uint16_t dst, const void *frame, uint32_t len)
{
    if (!net || dst >= net->nodes || (len > 0 && !frame) || len > SIM_INJECT_MAX)
        return -EINVAL;
    pthread_mutex_lock(&net->lock);
    if (!net->links[dst]) {
        pthread_mutex_unlock(&net->lock);
        return -ENOTCONN;
    }
    struct sim_frame *f = frame_get(net, len);
    if (!f) {
        pthread_mutex_unlock(&net->lock);
        return -ENOMEM;
    }
    if (len)
        memcpy(f->data, frame, len);
    f->dst = dst;
    f->due = net->now;
    fifo_push(&net->rxq[dst], f);
    net->pending++;
    if (net->pending > net->st.queued_max)
        net->st.queued_max = net->pending;
    pthread_mutex_unlock(&net->lock);
    return 0;
}

uint64_t mcp_sim_net_pending(const struct mcp_sim_net *net)
{
    struct mcp_sim_net *n = (struct mcp_sim_net *)net; /* the lock is not part of the state */
    pthread_mutex_lock(&n->lock);
    uint64_t p = n->pending;
    pthread_mutex_unlock(&n->lock);
    return p;
}

void mcp_sim_net_stats(const struct mcp_sim_net *net, struct mcp_sim_stats *s)
{
    struct mcp_sim_net *n = (struct mcp_sim_net *)net;
    pthread_mutex_lock(&n->lock);
    *s = n->st;
    pthread_mutex_unlock(&n->lock);
}
