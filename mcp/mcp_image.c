/* mcp_image.c — configuration, layout and formatting of the NIC memory image. */
#include "mcp.h"
#include "mcp_compat.h"

#define ROUND64(x) (((x) + 63u) & ~(uint64_t)63u)

#define MCP_MAX_NODES_LIMIT 4096u
#define MCP_MAX_SLOTS_LIMIT 65536u

void mcp_config_default(struct mcp_config *c, uint16_t node)
{
    memset(c, 0, sizeof(*c));
    c->node_id = node;
    c->max_nodes = 256;
    c->contexts = 64;
    c->send_slots = 32;
    c->recv_slots = 128;
    c->hostq_slots = 32;
    c->window = 8;
    c->rx_batch = 32;
    c->slot_size = 4096;
    c->rto_us = 2000;
    c->rto_max_us = 100000;
    c->ack_delay_us = 20;
    c->nack_interval_us = 200;
    c->nobuf_backoff_us = 50;
    c->peer_timeout_ms = 5000;
    c->seed = 0x9e3779b97f4a7c15ull ^ node;
}

/* The least power of two >= n (n <= 2^31). */
static uint32_t pow2_at_least(uint32_t n)
{
    uint32_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

void mcp_config_autosize(struct mcp_config *c, unsigned which)
{
    uint32_t slot = c->slot_size ? c->slot_size : 1;
    uint32_t window = (MCP_AUTO_WINDOW_BYTES + slot - 1) / slot;

    if (window < 8)
        window = 8;
    if (window > MCP_MAX_WINDOW)
        window = MCP_MAX_WINDOW;
    if (which & MCP_AUTO_WINDOW)
        c->window = (uint16_t)window;
    /* From the window in force, chosen or given: a sender refills slots while a window is out,
     * and a receiver keeps a free slot for each of a few peers' windows.  Powers of two, as
     * mcp_config_check() wants.  A window out of range sizes nothing: its slot counts would
     * overflow, and mcp_config_check() is to name the window, not a slot count. */
    if (c->window < 1 || c->window > MCP_MAX_WINDOW)
        return;
    if (which & MCP_AUTO_SEND_SLOTS)
        c->send_slots = (uint16_t)pow2_at_least(2u * c->window > 32u ? 2u * c->window : 32u);
    if (which & MCP_AUTO_RECV_SLOTS)
        c->recv_slots = (uint16_t)pow2_at_least(4u * c->window > 128u ? 4u * c->window : 128u);
}

/* Whether n is a power of two (1 included). */
static int is_pow2(uint32_t n)
{
    return n && (n & (n - 1)) == 0;
}

int mcp_config_check(const struct mcp_config *c, const char **why)
{
    const char *w = NULL;

    if (c->max_nodes < 2 || c->max_nodes > MCP_MAX_NODES_LIMIT)
        w = "max_nodes must be 2..4096";
    else if (c->node_id >= c->max_nodes)
        w = "node id must be below max_nodes";
    else if (c->contexts < 1 || c->contexts > MCP_MAX_CONTEXTS)
        w = "contexts must be 1..64";
    else if (c->send_slots < 1 || c->send_slots > 4096)
        w = "send_slots must be 1..4096";
    else if (c->recv_slots < 2 || c->recv_slots > 4096)
        w = "recv_slots must be 2..4096";
    else if (c->hostq_slots < 1)
        w = "hostq_slots must be at least 1";
    /* Ring positions are free-running 32-bit counters taken modulo the count: only a power of
     * two keeps the mapping whole when a counter wraps (after 2^32 frames). */
    else if (!is_pow2(c->send_slots) || !is_pow2(c->recv_slots) || !is_pow2(c->hostq_slots))
        w = "send, receive and host queue slots must be powers of two";
    else if (c->window < 1 || c->window > MCP_MAX_WINDOW)
        w = "window must be 1..64";
    else if (c->rx_batch < 1 || c->rx_batch > 64)
        w = "rx_batch must be 1..64";
    else if (c->slot_size < 64 || c->slot_size > 65535u - MCP_WIRE_HDR)
        w = "slot_size must be 64..65503";
    else if (c->rto_us < 1 || c->rto_max_us < c->rto_us)
        w = "rto_us must be >= 1 and rto_max_us >= rto_us";
    else if (c->peer_timeout_ms < 1)
        w = "peer_timeout_ms must be >= 1";
    if (why)
        *why = w;
    return w ? -EINVAL : 0;
}

/* Offsets of every section for configuration c; returns the total size (0 if too big). */
static uint64_t layout(const struct mcp_config *c, struct mcp_image *l)
{
    uint64_t nsend = (uint64_t)c->contexts * c->send_slots;
    uint64_t stride = ROUND64(MCP_WIRE_HDR + c->slot_size);
    uint64_t off = ROUND64(sizeof(struct mcp_image));

#define SECTION(field, bytes)                                                                      \
    do {                                                                                           \
        l->field = (uint32_t)off;                                                                  \
        off = ROUND64(off + (bytes));                                                              \
        if (off > 0xffffffffull)                                                                   \
            return 0;                                                                              \
    } while (0)
    SECTION(off_ctx, c->contexts * sizeof(struct mcp_context));
    SECTION(off_send, nsend * sizeof(struct mcp_send_slot));
    SECTION(off_errq, nsend * sizeof(struct mcp_send_error));
    SECTION(off_recv, c->recv_slots * sizeof(struct mcp_recv_slot));
    SECTION(off_rx_free, c->recv_slots * sizeof(uint32_t));
    SECTION(off_rx_ready, c->recv_slots * sizeof(uint32_t));
    SECTION(off_hostq, c->hostq_slots * sizeof(struct mcp_hostq_entry));
    SECTION(off_conn, c->max_nodes * sizeof(struct mcp_conn));
    SECTION(off_active, ((c->max_nodes + 63u) / 64u) * sizeof(uint64_t));
    SECTION(off_send_frames, nsend * stride);
    SECTION(off_recv_frames, c->recv_slots * stride);
    SECTION(off_hostq_data, c->hostq_slots * stride);
#undef SECTION
    l->frame_stride = (uint32_t)stride;
    return off;
}

size_t mcp_image_size(const struct mcp_config *c)
{
    struct mcp_image l;

    if (mcp_config_check(c, NULL))
        return 0;
    return (size_t)layout(c, &l);
}

int mcp_image_format(void *mem, size_t size, const struct mcp_config *c)
{
    struct mcp_image *img = mem;
    uint64_t need;

    if (mcp_config_check(c, NULL))
        return -EINVAL;
    memset(img, 0, sizeof(*img));
    need = layout(c, img);
    if (!need)
        return -EINVAL;
    if (size < need)
        return -ENOSPC;
    /* Sections before the frame buffers hold state and must start zeroed; the frame
     * buffers' contents do not matter. */
    memset((uint8_t *)mem + sizeof(*img), 0, img->off_send_frames - sizeof(*img));
    img->magic = MCP_IMAGE_MAGIC;
    img->abi_version = MCP_ABI_VERSION;
    img->size = need;
    img->cfg = *c;
    img->rng = c->seed ? c->seed : 0x2545f4914f6cdd1dull;
    img->journal.fail_slot = MCP_NIL;

    uint32_t nsend = (uint32_t)c->contexts * c->send_slots;
    for (uint32_t i = 0; i < nsend; i++) {
        struct mcp_send_slot *s = mcp_sslot(img, i);
        s->ctx = (uint16_t)(i / c->send_slots);
        s->next = MCP_NIL;
    }
    uint32_t *free_stack = MCP_AT(img, img->off_rx_free);
    for (uint32_t i = 0; i < c->recv_slots; i++) {
        free_stack[i] = c->recv_slots - 1 - i;
        mcp_rslot(img, i)->buf = i;
    }
    for (uint32_t i = 0; i < c->hostq_slots; i++)
        mcp_hostq(img, i)->buf = c->recv_slots + i;
    img->rx_free_top = c->recv_slots;
    for (uint32_t n = 0; n < c->max_nodes; n++) {
        struct mcp_conn *cn = mcp_conn(img, (uint16_t)n);
        cn->q_head = cn->q_tail = MCP_NIL;
    }
    return 0;
}

int mcp_image_check(const void *mem, size_t size, uint32_t *found_version)
{
    const struct mcp_image *img = mem;

    if (size < sizeof(*img))
        return -EINVAL;
    if (found_version)
        *found_version = img->abi_version;
    if (img->magic != MCP_IMAGE_MAGIC || img->abi_version != MCP_ABI_VERSION)
        return -EPROTO;
    if (img->size > size || mcp_config_check(&img->cfg, NULL))
        return -EINVAL;
    return 0;
}

void mcp_nic_init(struct mcp_nic *nic, struct mcp_image *img, struct lanai_link *link)
{
    nic->img = img;
    nic->link = link;
    nic->ctrl_used = 0;
    /* The slot size is what a frame on this link can carry (every executor of one NIC uses
     * the same kind of link, so the image may hold the limit). */
    if (link && link->max_frame > MCP_WIRE_HDR &&
        link->max_frame - MCP_WIRE_HDR < img->cfg.slot_size)
        img->cfg.slot_size = link->max_frame - MCP_WIRE_HDR;
}

uint32_t mcp_max_payload(const struct mcp_image *img)
{
    return img->cfg.slot_size;
}

static const char *const counter_names[] = {
#define MCP_COUNTER_NAME(name, help) #name,
    MCP_COUNTERS(MCP_COUNTER_NAME)
#undef MCP_COUNTER_NAME
};

static const char *const counter_helps[] = {
#define MCP_COUNTER_HELP(name, help) help,
    MCP_COUNTERS(MCP_COUNTER_HELP)
#undef MCP_COUNTER_HELP
};

unsigned mcp_counter_count(void)
{
    return sizeof(counter_names) / sizeof(counter_names[0]);
}

const char *mcp_counter_name(unsigned i)
{
    return i < mcp_counter_count() ? counter_names[i] : NULL;
}

const char *mcp_counter_help(unsigned i)
{
    return i < mcp_counter_count() ? counter_helps[i] : NULL;
}

uint64_t mcp_counter_value(const struct mcp_image *img, unsigned i)
{
    const uint64_t *v = (const uint64_t *)&img->counters;
    return i < mcp_counter_count() ? __atomic_load_n(&v[i], __ATOMIC_RELAXED) : 0;
}

const char *mcp_slot_state_name(uint32_t state)
{
    static const char *const names[] = {"IDLE", "READY", "INTRANSIT", "RETRANSMIT"};
    return state < 4 ? names[state] : "?";
}
