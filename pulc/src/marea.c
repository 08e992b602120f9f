/*
 * marea.c — ports, message descriptors and fragments of the message area; the area lock
 * and its repair.
 */
#include "marea.h"

#include "lring.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

size_t pulc_area_tables_bytes(const struct pulc_area_cfg *cfg)
{
    size_t off = align_up(sizeof(struct pulc_area), 64);
    off += align_up((size_t)cfg->ports * sizeof(struct pulc_port), 64);
    off += align_up((size_t)cfg->messages * sizeof(struct pulc_msg), 64);
    off += align_up((size_t)cfg->fragments * sizeof(struct pulc_frag), 4096);
    off += align_up((size_t)cfg->rings * sizeof(struct pulc_ring), 4096);
    off += align_up((size_t)cfg->rings * cfg->ring_bytes, 4096);
    return off;
}

size_t pulc_area_bytes(const struct pulc_area_cfg *cfg)
{
    return align_up(pulc_area_tables_bytes(cfg) + (size_t)cfg->fragments * cfg->frag_size, 4096);
}

void pulc_area_format_tables(struct pulc_area *a, const struct pulc_area_cfg *cfg)
{
    a->cfg = *cfg;
    size_t off = align_up(sizeof(struct pulc_area), 64);
    a->off_ports = off;
    off += align_up((size_t)cfg->ports * sizeof(struct pulc_port), 64);
    a->off_msgs = off;
    off += align_up((size_t)cfg->messages * sizeof(struct pulc_msg), 64);
    a->off_frags = off;
    off += align_up((size_t)cfg->fragments * sizeof(struct pulc_frag), 4096);
    a->off_rings = off;
    off += align_up((size_t)cfg->rings * sizeof(struct pulc_ring), 4096);
    a->off_ring_data = off;
    off += align_up((size_t)cfg->rings * cfg->ring_bytes, 4096);
    a->off_frag_data = off;
    for (uint32_t i = 0; i < cfg->ports; i++) {
        struct pulc_port *p = pulc_port_at(a, i);
        p->qhead = p->qtail = p->last_open = p->rings = PULC_NONE;
    }
    for (uint32_t i = 0; i < cfg->fragments; i++)
        pulc_frag_at(a, i)->msg = PULC_NONE;
    a->next_port = 1;
    a->psid_ctx = -1;
    pulc_area_repair(a); /* builds the free lists from the (all free) states */
    a->area_repairs = 0;
}

/* A hint to the core that we spin (x86: pause). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

int pulc_area_lock(struct pulc_area *a)
{
    /* Hold times are short: spin a little before sleeping in the kernel (a robust mutex
     * does not spin by itself, and a futex sleep and wake-up cost microseconds here). */
    int rc = EBUSY;
    for (int spin = 0; spin < 256 && rc == EBUSY; spin++) {
        /* Test before test-and-set: a failed trylock writes the lock's cache line, which
         * then bounces between the waiting core and the holder's, slowing the holder. */
        if (spin && __atomic_load_n(&a->area_lock.__data.__lock, __ATOMIC_RELAXED)) {
            cpu_relax();
            continue;
        }
        rc = pthread_mutex_trylock(&a->area_lock);
        if (rc == EBUSY)
            cpu_relax();
    }
    if (rc == EBUSY)
        rc = pthread_mutex_lock(&a->area_lock);
    if (rc == EOWNERDEAD) {
        unsigned moved = pulc_area_repair(a);
        uint64_t n = __atomic_add_fetch(&a->area_repairs, 1, __ATOMIC_RELAXED);
        PSP_WARN("the message area's lock holder died: area rebuilt (%u objects moved, repair "
                 "%llu)",
                 moved, (unsigned long long)n);
        rc = pthread_mutex_consistent(&a->area_lock);
    }
    return -rc;
}

void pulc_area_unlock(struct pulc_area *a)
{
    pthread_mutex_unlock(&a->area_lock);
}

/* ---- repair ---- */

static struct pulc_area *sort_area; /* qsort has no context argument; repair is rare */

static int by_port_seq(const void *x, const void *y)
{
    const struct pulc_msg *m = pulc_msg_at(sort_area, *(const uint32_t *)x);
    const struct pulc_msg *n = pulc_msg_at(sort_area, *(const uint32_t *)y);
    if (m->port != n->port)
        return m->port < n->port ? -1 : 1;
    return m->seq < n->seq ? -1 : m->seq > n->seq;
}

static int by_msg_off(const void *x, const void *y)
{
    const struct pulc_frag *f = pulc_frag_at(sort_area, *(const uint32_t *)x);
    const struct pulc_frag *g = pulc_frag_at(sort_area, *(const uint32_t *)y);
    if (f->msg != g->msg)
        return f->msg < g->msg ? -1 : 1;
    return f->off < g->off ? -1 : f->off > g->off;
}

static int msg_queued_ok(struct pulc_area *a, const struct pulc_msg *m)
{
    if (m->state != PULC_MSG_QUEUED || m->port >= a->cfg.ports)
        return 0;
    const struct pulc_port *p = pulc_port_at(a, m->port);
    return p->state == PULC_PORT_OPEN && p->generation == m->port_gen;
}

unsigned pulc_area_repair(struct pulc_area *a)
{
    uint32_t nm = a->cfg.messages, nf = a->cfg.fragments;
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(nm > nf ? nm : nf));
    unsigned moved = 0;
    if (!idx) {
        PSP_ERROR("area repair: out of memory");
        return 0;
    }
    sort_area = a;

    /* Messages: queued ones in arrival order per port; direct ones handed back stay with
     * their senders; the rest is free. */
    uint32_t n = 0, free_head = PULC_NONE, free_count = 0;
    for (uint32_t i = nm; i-- > 0;) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        if (m->state == PULC_MSG_QUEUED && !msg_queued_ok(a, m)) {
            m->state = PULC_MSG_FREE;
            moved++;
        }
        if (m->state == PULC_MSG_QUEUED) {
            if (m->rx_tag == a->rx_count)
                a->rx_head_applied = 1;
            idx[n++] = i;
        } else if (m->state == PULC_MSG_FREE) {
            m->next = free_head;
            free_head = i;
            free_count++;
        }
    }
    a->msg_free = free_head;
    a->msgs_free = free_count;
    for (uint32_t p = 0; p < a->cfg.ports; p++) {
        struct pulc_port *pt = pulc_port_at(a, p);
        pt->qhead = pt->qtail = pt->last_open = PULC_NONE;
        pt->qlen = 0;
    }
    qsort(idx, n, sizeof *idx, by_port_seq);
    for (uint32_t k = 0; k < n; k++) {
        struct pulc_msg *m = pulc_msg_at(a, idx[k]);
        struct pulc_port *pt = pulc_port_at(a, m->port);
        m->next = PULC_NONE;
        m->prev = pt->qtail;
        if (pt->qtail == PULC_NONE)
            pt->qhead = idx[k];
        else
            pulc_msg_at(a, pt->qtail)->next = idx[k];
        pt->qtail = idx[k];
        pt->qlen++;
        m->frag_head = m->frag_tail = PULC_NONE;
        if (!(m->flags & (PULC_MSG_DIRECT | PULC_MSG_INLINE)))
            m->received = m->taken; /* recomputed from the fragments below */
    }

    /* Fragments: those of a queued message in offset order, from where the reader stands,
     * without gaps; the rest is free. */
    n = 0;
    free_head = PULC_NONE;
    free_count = 0;
    for (uint32_t i = nf; i-- > 0;) {
        struct pulc_frag *f = pulc_frag_at(a, i);
        if (f->msg != PULC_NONE &&
            (f->msg >= nm || !msg_queued_ok(a, pulc_msg_at(a, f->msg)) ||
             (pulc_msg_at(a, f->msg)->flags & (PULC_MSG_DIRECT | PULC_MSG_INLINE)) ||
             f->off + f->len <= pulc_msg_at(a, f->msg)->taken || f->len == 0)) {
            f->msg = PULC_NONE;
            moved++;
        }
        if (f->msg != PULC_NONE) {
            idx[n++] = i;
        } else {
            f->next = free_head;
            free_head = i;
            free_count++;
        }
    }
    qsort(idx, n, sizeof *idx, by_msg_off);
    for (uint32_t k = 0; k < n; k++) {
        struct pulc_frag *f = pulc_frag_at(a, idx[k]);
        struct pulc_msg *m = pulc_msg_at(a, f->msg);
        if (f->off > m->received || f->off + f->len <= m->received) {
            /* a gap or an overlap: this fragment was never committed; drop it */
            f->msg = PULC_NONE;
            f->next = free_head;
            free_head = idx[k];
            free_count++;
            moved++;
            continue;
        }
        f->next = PULC_NONE;
        if (m->frag_tail == PULC_NONE)
            m->frag_head = idx[k];
        else
            pulc_frag_at(a, m->frag_tail)->next = idx[k];
        m->frag_tail = idx[k];
        m->received = f->off + f->len;
        if (f->rx_tag == a->rx_count)
            a->rx_head_applied = 1;
    }
    a->frag_free = free_head;
    a->frags_free = free_count;
    moved += pulc_ring_repair(a);
    free(idx);
    return moved;
}

/* ---- messages and fragments ---- */

uint32_t pulc_msg_alloc(struct pulc_area *a)
{
    uint32_t i = a->msg_free;
    if (i == PULC_NONE)
        return PULC_NONE;
    struct pulc_msg *m = pulc_msg_at(a, i);
    a->msg_free = m->next;
    a->msgs_free--;
    memset(m, 0, offsetof(struct pulc_msg, xhdr));
    m->next = m->prev = m->frag_head = m->frag_tail = PULC_NONE;
    m->rx_tag = UINT64_MAX;
    return i;
}

static void frag_free(struct pulc_area *a, uint32_t i)
{
    struct pulc_frag *f = pulc_frag_at(a, i);
    f->msg = PULC_NONE;
    f->next = a->frag_free;
    a->frag_free = i;
    a->frags_free++;
}

void pulc_msg_free(struct pulc_area *a, uint32_t i)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    pulc_ring_unpend(a, m);
    m->state = PULC_MSG_FREE; /* first: a repair from here on frees the fragments too */
    for (uint32_t f = m->frag_head; f != PULC_NONE;) {
        uint32_t next = pulc_frag_at(a, f)->next;
        frag_free(a, f);
        f = next;
    }
    m->frag_head = m->frag_tail = PULC_NONE;
    m->next = a->msg_free;
    a->msg_free = i;
    a->msgs_free++;
}

void pulc_msg_enqueue(struct pulc_area *a, uint32_t p, uint32_t i)
{
    struct pulc_port *pt = pulc_port_at(a, p);
    struct pulc_msg *m = pulc_msg_at(a, i);
    m->port = p;
    m->port_gen = pt->generation;
    m->seq = ++a->seq;
    m->next = PULC_NONE;
    m->prev = pt->qtail;
    if (pt->qtail == PULC_NONE)
        pt->qhead = i;
    else
        pulc_msg_at(a, pt->qtail)->next = i;
    pt->qtail = i;
    pt->qlen++;
    pt->msgs_in++;
    __atomic_store_n(&m->state, PULC_MSG_QUEUED, __ATOMIC_RELEASE);
}

void pulc_msg_unlink(struct pulc_area *a, uint32_t i)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    struct pulc_port *pt = pulc_port_at(a, m->port);
    if (m->prev == PULC_NONE)
        pt->qhead = m->next;
    else
        pulc_msg_at(a, m->prev)->next = m->next;
    if (m->next == PULC_NONE)
        pt->qtail = m->prev;
    else
        pulc_msg_at(a, m->next)->prev = m->prev;
    if (pt->last_open == i)
        pt->last_open = PULC_NONE;
    pt->qlen--;
    m->next = m->prev = PULC_NONE;
}

int pulc_msg_append(struct pulc_area *a, uint32_t i, const void *data, uint32_t len,
                    uint64_t rx_tag)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    uint32_t fs = a->cfg.frag_size;
    if (len == 0)
        return 0;
    if (m->received == 0 && len == m->total && len <= PULC_INLINE_MAX) {
        memcpy(m->inl, data, len);
        m->flags |= PULC_MSG_INLINE;
        m->received = len;
        return 0;
    }
    if ((uint64_t)a->frags_free * fs < len)
        return -ENOBUFS;
    const uint8_t *src = data;
    while (len) {
        uint32_t n = len < fs ? len : fs;
        uint32_t fi = a->frag_free;
        struct pulc_frag *f = pulc_frag_at(a, fi);
        a->frag_free = f->next;
        a->frags_free--;
        memcpy(pulc_frag_data(a, fi), src, n);
        f->off = m->received;
        f->len = n;
        f->next = PULC_NONE;
        f->rx_tag = rx_tag;
        __atomic_store_n(&f->msg, i, __ATOMIC_RELEASE); /* commit: the fragment is the message's */
        if (m->frag_tail == PULC_NONE)
            m->frag_head = fi;
        else
            pulc_frag_at(a, m->frag_tail)->next = fi;
        m->frag_tail = fi;
        __atomic_store_n(&m->received, m->received + n, __ATOMIC_RELEASE);
        src += n;
        len -= n;
    }
    return 0;
}

uint32_t pulc_msg_read(struct pulc_area *a, uint32_t i, void *dst, uint32_t max)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    uint32_t got = 0;
    if (m->flags & PULC_MSG_INLINE) {
        got = m->received - m->taken < max ? m->received - m->taken : max;
        if (dst)
            memcpy(dst, m->inl + m->taken, got);
        __atomic_store_n(&m->taken, m->taken + got, __ATOMIC_RELEASE);
        return got;
    }
    while (got < max && m->frag_head != PULC_NONE) {
        uint32_t fi = m->frag_head;
        struct pulc_frag *f = pulc_frag_at(a, fi);
        uint32_t start = m->taken - f->off, n = f->len - start;
        if (n > max - got)
            n = max - got;
        if (dst)
            memcpy((uint8_t *)dst + got, pulc_frag_data(a, fi) + start, n);
        __atomic_store_n(&m->taken, m->taken + n, __ATOMIC_RELEASE);
        got += n;
        if (m->taken == f->off + f->len) {
            m->frag_head = f->next;
            if (m->frag_head == PULC_NONE)
                m->frag_tail = PULC_NONE;
            frag_free(a, fi);
        }
    }
    return got;
}

/* ---- ports ---- */

static void (*area_waker)(struct pulc_area *a);

void pulc_area_set_waker(void (*fn)(struct pulc_area *a))
{
    area_waker = fn;
}

void pulc_port_wake(struct pulc_area *a, uint32_t p)
{
    struct pulc_port *pt = pulc_port_at(a, p);
    __atomic_add_fetch(&pt->event, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pt->sleepers, __ATOMIC_SEQ_CST)) {
        if (area_waker)
            area_waker(a);
        else
            syscall(SYS_futex, &pt->event, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

static void direct_hand_back(struct pulc_area *a, uint32_t i, int err)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    m->direct_err = err;
    m->state = PULC_MSG_DIRECT_DONE;
    __atomic_store_n(&m->done, err ? 2u : 1u, __ATOMIC_RELEASE);
    syscall(SYS_futex, &m->done, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void pulc_port_close_locked(struct pulc_area *a, uint32_t p)
{
    struct pulc_port *pt = pulc_port_at(a, p);
    while (pt->qhead != PULC_NONE) {
        uint32_t i = pt->qhead;
        struct pulc_msg *m = pulc_msg_at(a, i);
        pulc_msg_unlink(a, i);
        if (m->flags & PULC_MSG_DIRECT)
            direct_hand_back(a, i, -ECONNRESET);
        else
            pulc_msg_free(a, i);
    }
    pulc_ring_port_closed_locked(a, p);
    pt->state = PULC_PORT_FREE;
    pt->generation++;
    pt->owner_pid = 0;
    pt->error = 0;
    pt->tx_open = 0;
    pt->abort_src = 0;
    pt->last_open = PULC_NONE;
    pulc_port_wake(a, p);
}

unsigned pulc_area_reclaim(struct pulc_area *a, int32_t pid, struct pulc_abort *aborts,
                           unsigned max, unsigned *naborts)
{
    *naborts = 0;
    if (pulc_area_lock(a))
        return 0;
    unsigned closed = 0;
    for (uint32_t p = 0; p < a->cfg.ports; p++) {
        struct pulc_port *pt = pulc_port_at(a, p);
        if (pt->state == PULC_PORT_OPEN && pt->owner_pid == pid) {
            if (pt->tx_open && *naborts < max) {
                aborts[*naborts].dest = pt->tx_open_dest;
                aborts[*naborts].src_port = (uint16_t)p;
                aborts[*naborts].msg_id = pt->tx_open_msg_id;
                (*naborts)++;
            }
            pulc_port_close_locked(a, p);
            closed++;
        }
    }
    for (uint32_t i = 0; i < a->cfg.messages; i++) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        if (!(m->flags & PULC_MSG_DIRECT) || m->direct_pid != pid)
            continue;
        if (m->state == PULC_MSG_DIRECT_DONE) {
            pulc_msg_free(a, i);
        } else if (m->state == PULC_MSG_QUEUED) {
            if (m->flags & PULC_MSG_CLAIMED) {
                m->flags |= PULC_MSG_ABORTED; /* the reader frees it when its copy fails */
            } else {
                pulc_msg_unlink(a, i);
                pulc_msg_free(a, i);
            }
        }
    }
    a->reclaimed_ports += closed;
    pulc_area_unlock(a);
    return closed;
}

struct pulc_msg *pulc_raw_reg(struct pulc_area *a, uint32_t port, uint32_t index, uint32_t nonce)
{
    if (port == 0 || port >= a->cfg.ports || index >= a->cfg.messages)
        return NULL;
    struct pulc_msg *m = pulc_msg_at(a, index);
    if (m->state != PULC_MSG_QUEUED || !(m->flags & PULC_MSG_RAW) || m->port != port ||
        m->msg_id != nonce)
        return NULL;
    return m;
}

void pulc_area_usage(struct pulc_area *a, uint32_t *msgs_used, uint32_t *frags_used)
{
    uint32_t m = 0, f = 0;
    for (uint32_t i = 0; i < a->cfg.messages; i++)
        m += pulc_msg_at(a, i)->state != PULC_MSG_FREE;
    for (uint32_t i = 0; i < a->cfg.fragments; i++)
        f += pulc_frag_at(a, i)->msg != PULC_NONE;
    *msgs_used = m;
    *frags_used = f;
}
