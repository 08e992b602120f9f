/*
 * spawn_proto.h — the cluster operations between a client (libpulc's spawn API, psiadmin)
 * and its node's psid, on psid's UNIX socket next to the device ABI's operations.
 *
 * Framing is the device ABI's struct psk_msg (kmod/psport_abi.h) with the op numbers below.
 * A connection that sent PSPC_OP_SPAWNER is a spawner: psid sends it events (output of its
 * tasks, their exit, deaths it asked to be notified of) at any time, and replies to its
 * requests asynchronously, matched by the request id.  Other connections get one reply per
 * request, in order.  All integers are host order (every node of a cluster runs the same
 * build); strings are NUL-terminated and packed.
 */
#ifndef PSPORT_PULC_SPAWN_PROTO_H
#define PSPORT_PULC_SPAWN_PROTO_H

#include <stdint.h>
#include <string.h>

enum pspc_op {
    PSPC_OP_SPAWNER = 32,   /* req: partition (newline-separated hosts, may be empty) + "\0" +
                               source name; reply: status, text on error, struct
                               pspc_spawner_ok on success (none from an older psid) */
    PSPC_OP_SPAWN = 33,     /* req: struct pspc_spawn + strings; reply PSPC_OP_SPAWNED */
    PSPC_OP_SIGNAL = 34,    /* req: struct pspc_task_req (sig); reply PSPC_OP_DONE */
    PSPC_OP_NOTIFY = 35,    /* req: struct pspc_task_req; reply PSPC_OP_DONE */
    PSPC_OP_STDIN = 36,     /* req: struct pspc_stdin + data; no reply */
    PSPC_OP_NODES = 37,     /* req: none; reply: struct pspc_node[] */
    PSPC_OP_COUNTERS = 38,  /* req: none; reply: text, "name value help\n" per counter */
    PSPC_OP_TASKS = 39,     /* req: none; reply: struct pspc_task[] of this node */
    PSPC_OP_SPAWNED = 40,   /* reply: struct pspc_spawned + error text */
    PSPC_OP_DONE = 41,      /* reply: struct pspc_done + error text */
    PSPC_OP_EV_OUTPUT = 48, /* event: struct pspc_output + whole lines */
    PSPC_OP_EV_EXIT = 49,   /* event: struct pspc_exit */
    PSPC_OP_EV_STDIN = 50,  /* event: struct pspc_stdin_taken (flow control of PSPC_OP_STDIN) */
};

/* Where a spawn goes (pspc_spawn.node when not a node id). */
#define PSPC_NODE_NEXT  (-1)
#define PSPC_NODE_LEAST (-2)

/* Spawn flags (public names in pulc.h). */
#define PSPC_SPAWN_DETACHED 0x1u /* not killed when the spawner dies */
#define PSPC_SPAWN_STDIN    0x2u /* stdin comes from the spawner (else /dev/null) */
#define PSPC_SPAWN_FLAGS    0x3u

/* What to start: followed by strings_len bytes: cwd, argv[argc], env[envc]. */
struct pspc_spawn_body {
    uint32_t flags;
    uint32_t argc;
    uint32_t envc;
    uint32_t strings_len;
};

struct pspc_spawn {
    uint64_t req;
    int32_t node; /* node id, PSPC_NODE_NEXT or PSPC_NODE_LEAST */
    uint32_t pad;
    struct pspc_spawn_body b;
};

struct pspc_spawned {
    uint64_t req;
    uint64_t tid;  /* (node << 32) | pid on success */
    int32_t error; /* 0 or a negative errno (exec failure, unknown node, node down, ...) */
    uint32_t pad;
};

struct pspc_task_req {
    uint64_t req;
    uint64_t tid;
    int32_t sig; /* PSPC_OP_SIGNAL */
    uint32_t pad;
};

struct pspc_done {
    uint64_t req;
    int32_t error;
    uint32_t pad;
};

struct pspc_stdin {
    uint64_t tid;
    uint32_t eof; /* 1: close the task's stdin after the data */
    uint32_t pad;
};

/* Output stream numbers. */
#define PSPC_STDOUT 1u
#define PSPC_STDERR 2u

struct pspc_output {
    uint64_t tid;
    uint32_t stream;
    uint32_t pad;
};

/* Exit event flags. */
#define PSPC_EXIT_LOST   0x1u /* the task's node died: status unknown */
#define PSPC_EXIT_NOTIFY 0x2u /* a death this spawner asked to be notified of (not its task) */

/* Bytes of PSPC_OP_STDIN data for task tid that its node is done with: written into the
 * task's stdin, or dropped because the task closed it. */
struct pspc_stdin_taken {
    uint64_t tid;
    uint64_t bytes;
};

/* What psid does for a spawner, in PSPC_OP_SPAWNER's reply; an older psid's empty reply
 * means none of it. */
#define PSPC_FEATURE_STDIN_TAKEN 0x1u /* reports stdin bytes taken (PSPC_OP_EV_STDIN) */

struct pspc_spawner_ok {
    uint32_t features; /* PSPC_FEATURE_* */
    uint32_t pad;
};

struct pspc_exit {
    uint64_t tid;
    int32_t status; /* wait status (WIFEXITED ...); 0 when lost */
    uint32_t flags;
};

struct pspc_node {
    uint16_t id;
    uint8_t up;
    uint8_t master;
    uint32_t load_milli; /* 1-minute load average x 1000 */
    uint32_t tasks;      /* tasks psid runs there */
    uint32_t cpus;
    uint64_t heard_ms; /* ms since the last message from it (0 for ourselves) */
    uint32_t ip;       /* IPv4, network order */
    uint32_t pad;
};

struct pspc_task {
    uint64_t tid;
    uint64_t spawner; /* (node << 32) | spawner's pid */
    uint32_t uid;
    uint32_t flags;
    uint64_t age_ms;
};

/*
 * Check that buf (len bytes) holds exactly count NUL-terminated strings.  Returns 0 or -1.
 * Every receiver of packed strings calls it before reading them.
 */
static inline int pspc_strings_check(const char *buf, uint32_t len, uint32_t count)
{
    uint32_t off = 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *z = memchr(buf + off, 0, len - off);
        if (!z)
            return -1;
        off = (uint32_t)(z - buf) + 1;
    }
    return off == len ? 0 : -1;
}

#endif
