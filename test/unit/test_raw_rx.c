/*
 * test_raw_rx — rawdata's receive handler (pulc/src/raw_rx.c) on a message area in this
 * process's memory: the owner of a registration writes arriving data straight into its
 * buffer; another drainer (psid's NIC thread, another process of the node) queues fragments
 * that the owner copies later; and when the owner drains a frame of a registration that holds
 * such fragments, it copies them into the buffer first and writes its frame straight in behind
 * them, in order, leaving no fragment (before, it queued its frame behind them: two more
 * copies).  Duplicates, orphans and frames past the end are counted and dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "area.h"
#include "harness.h"
#include "marea.h"
#include "proto.h"

#define FRAG    4096u
#define FRAGS   64u
#define OWNER   2222
#define DRAINER 1111
#define PORT    1u

/* A set-up step that cannot go on when it fails (in helpers that return a value). */
#define SETUP(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "set-up failed: " __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static struct pulc_area *area;
static size_t area_size;
static uint8_t data[64 * 1024];

static void make_area(void)
{
    struct pulc_area_cfg cfg = {.ports = 4, .messages = 16, .fragments = FRAGS, .frag_size = FRAG};
    static struct psp_nodes nodes; /* no nodes: nothing here sends */
    char err[256];
    area_size = pulc_area_bytes(&cfg);
    void *mem = mmap(NULL, area_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(mem != MAP_FAILED, "mmap %zu bytes", area_size);
    REQUIRE(pulc_area_format(mem, area_size, &cfg, &nodes, "udp", err, sizeof err) == 0, "%s", err);
    area = mem;
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 11);
}

static void drop_area(void)
{
    munmap(area, area_size);
}

/* A registration of len bytes into buf owned by OWNER, as PSP_RawRegister makes it. */
static uint32_t reg(void *buf, uint32_t len, uint32_t nonce)
{
    uint32_t i = pulc_msg_alloc(area);
    SETUP(i != PULC_NONE, "no message descriptor");
    struct pulc_msg *m = pulc_msg_at(area, i);
    m->flags = PULC_MSG_RAW | PULC_MSG_CLAIMED;
    m->proto = PULC_PROTO_RAW;
    m->total = len;
    m->direct_pid = OWNER;
    m->direct_addr = (uint64_t)(uintptr_t)buf;
    m->msg_id = nonce;
    pulc_msg_enqueue(area, PORT, i);
    return i;
}

/* Frame [off, off + len) of data for registration i, drained by process pid: the handler's
 * return value (1 taken, 0 dropped, negative: stalled). */
static int frame(int32_t pid, uint32_t i, uint32_t nonce, uint32_t off, uint32_t len)
{
    struct pulc_node n = {.area = area, .ctx = -1, .node_id = 0, .pid = pid};
    struct pulc_hdr h = {
        .proto = PULC_PROTO_RAW, .dst_port = PORT, .msg_id = i, .offset = off, .total = nonce};
    SETUP(pulc_area_lock(area) == 0, "area lock");
    int rc = pulc_raw_rx(&n, 1, &h, data + off, len, 0);
    pulc_area_unlock(area);
    return rc;
}

static uint8_t buf[40000];

/* A fresh area with a registration of the first len bytes of buf (zeroed), nonce nonce. */
static struct pulc_msg *start(uint32_t len, uint32_t nonce, uint32_t *i)
{
    make_area();
    memset(buf, 0, sizeof buf);
    *i = reg(buf, len, nonce);
    return pulc_msg_at(area, *i);
}

/* The first n bytes arrived, all of them in the buffer in order, no fragment left. */
static void check_all_in_buffer(const struct pulc_msg *m, uint32_t n)
{
    CHECK_EQ_U64(m->received, n);
    CHECK_EQ_U64(m->taken, n);
    CHECK_EQ_U64(m->frag_head, PULC_NONE);
    CHECK_EQ_U64(area->frags_free, FRAGS);
    CHECK(memcmp(buf, data, n) == 0, "the buffer holds the first %u bytes sent, in order", n);
}

TEST(the_owner_writes_straight_into_its_buffer)
{
    uint32_t i;
    struct pulc_msg *m = start(20000, 77, &i);
    CHECK_EQ_I64(frame(OWNER, i, 77, 0, 12000), 1);
    CHECK_EQ_I64(frame(OWNER, i, 77, 12000, 8000), 1);
    check_all_in_buffer(m, 20000);
    drop_area();
}

TEST(another_drainer_queues_fragments_the_owner_has_not_taken)
{
    uint32_t i;
    struct pulc_msg *m = start(20000, 78, &i);
    CHECK_EQ_I64(frame(DRAINER, i, 78, 0, 10000), 1);
    CHECK_EQ_U64(m->received, 10000);
    CHECK_EQ_U64(m->taken, 0);
    CHECK(m->frag_head != PULC_NONE, "fragments queued");
    CHECK_EQ_U64(area->frags_free, FRAGS - 3); /* 10000 bytes in 4096-byte fragments */
    static const uint8_t zero[10000];
    CHECK(memcmp(buf, zero, sizeof zero) == 0, "nothing in the buffer yet");
    drop_area();
}

TEST(the_owner_takes_queued_fragments_first_then_writes_its_frame_straight_in)
{
    uint32_t i;
    struct pulc_msg *m = start(40000, 79, &i);
    CHECK_EQ_I64(frame(DRAINER, i, 79, 0, 10000), 1);
    CHECK_EQ_I64(frame(DRAINER, i, 79, 10000, 5000), 1);
    CHECK_EQ_U64(area->frags_free, FRAGS - 5);
    /* the owner drains the next frame: the 15000 queued bytes, then its 7000, in order */
    CHECK_EQ_I64(frame(OWNER, i, 79, 15000, 7000), 1);
    check_all_in_buffer(m, 22000);
    /* the other drainer again, then the owner, to the end */
    CHECK_EQ_I64(frame(DRAINER, i, 79, 22000, 9000), 1);
    CHECK_EQ_U64(m->taken, 22000);
    CHECK_EQ_I64(frame(OWNER, i, 79, 31000, 9000), 1);
    check_all_in_buffer(m, 40000);
    drop_area();
}

TEST(duplicates_orphans_and_frames_past_the_end_are_dropped)
{
    uint32_t i;
    struct pulc_msg *m = start(8000, 80, &i);
    CHECK_EQ_I64(frame(DRAINER, i, 80, 0, 3000), 1);
    CHECK_EQ_I64(frame(OWNER, i, 80, 0, 3000), 0); /* a duplicate */
    CHECK_EQ_U64(area->rx_duplicate, 1);
    CHECK_EQ_I64(frame(OWNER, i, 80, 5000, 1000), 0); /* beyond what arrived: an orphan */
    CHECK_EQ_U64(area->rx_orphan, 1);
    CHECK_EQ_I64(frame(OWNER, i, 81, 3000, 1000), 0); /* a wrong nonce: not this one's */
    CHECK_EQ_U64(area->rx_orphan, 2);
    CHECK_EQ_I64(frame(OWNER, i, 80, 3000, 6000), 0); /* past the end of the registration */
    CHECK_EQ_U64(area->rx_malformed, 1);
    CHECK_EQ_U64(m->received, 3000);
    /* a frame overlapping what arrived: only its new part is taken */
    CHECK_EQ_I64(frame(OWNER, i, 80, 2000, 6000), 1);
    check_all_in_buffer(m, 8000);
    drop_area();
}

TEST_MAIN()
