/*
 * dmsg.h — the messages psids send each other over the daemon link (dlink.h).
 *
 * Each message is one fixed struct, possibly followed by data.  A receiver checks the length
 * of the struct (and the strings or data after it) before it reads a field: a message that
 * does not fit its type is dropped and counted (psid_dmsg_check), never acted on.
 */
#ifndef PSPORT_PSID_DMSG_H
#define PSPORT_PSID_DMSG_H

#include <stdint.h>

#include "spawn_proto.h"

enum psid_dmsg_type {
    PSID_M_ALIVE = 1,        /* struct psid_m_alive, every alive interval to every node */
    PSID_M_SPAWN = 2,        /* struct psid_m_spawn + strings: start a task here */
    PSID_M_REPLY = 3,        /* struct psid_m_reply: answer to SPAWN, SIGNAL, NOTIFY */
    PSID_M_OUTPUT = 4,       /* struct psid_m_task + whole lines, to the spawner's node (bulk) */
    PSID_M_EXIT = 5,         /* struct psid_m_exit, to the spawner's node and those notified */
    PSID_M_STDIN = 6,        /* struct psid_m_stdin + data, to the task's node (bulk) */
    PSID_M_SIGNAL = 7,       /* struct psid_m_signal */
    PSID_M_NOTIFY = 8,       /* struct psid_m_signal (sig 0): tell me when this task dies */
    PSID_M_ORPHANS = 9,      /* struct psid_m_orphans: the spawner is gone, kill its tasks */
    PSID_M_HOLD = 10,        /* struct psid_m_hold: stop / go on reading its tasks' output */
    PSID_M_STDIN_TAKEN = 11, /* struct psid_m_stdin_taken, to the spawner's node (bulk) */
    PSID_M_WAS_DEAD = 12,    /* struct psid_m_was_dead: I had declared you dead */
    PSID_M_TYPES
};

struct psid_m_alive {
    uint64_t boot_id;    /* random per psid start: a change means the node restarted */
    uint32_t load_milli; /* 1-minute load average x 1000 */
    uint32_t tasks;      /* tasks psid runs here */
    uint32_t cpus;
    uint32_t pad;
};

struct psid_m_spawn {
    uint64_t req;
    uint32_t key; /* the spawner's connection on the sending node */
    int32_t spawner_pid;
    uint32_t uid, gid; /* the spawner's credentials (SO_PEERCRED on its node) */
    struct pspc_spawn_body b;
};

struct psid_m_reply {
    uint64_t req;
    uint32_t key;
    int32_t error;    /* 0 or a negative errno */
    int32_t pid;      /* SPAWN: the task's pid */
    uint32_t answers; /* the type answered: PSID_M_SPAWN, _SIGNAL or _NOTIFY */
};

/* Output of a task: to the connection `key` of the receiving node. */
struct psid_m_task {
    uint32_t key;
    int32_t pid;
    uint32_t stream; /* PSPC_STDOUT / PSPC_STDERR */
    uint32_t pad;
};

struct psid_m_exit {
    uint32_t key;
    int32_t pid;
    int32_t status;
    uint32_t flags; /* PSPC_EXIT_* */
};

struct psid_m_stdin {
    int32_t pid;
    uint32_t eof;
};

/* Bytes of a task's stdin its node is done with (written into the task's pipe, or dropped
 * because the task closed it): to the connection `key` of the receiving node, which may
 * send that much more (flow control of stdin, PSPC_OP_EV_STDIN). */
struct psid_m_stdin_taken {
    uint32_t key;
    int32_t pid;
    uint64_t bytes;
};

/* The sender had declared the receiver dead (not heard for the dead timeout) though it never
 * restarted: the tasks between them are lost to both, as after a death on the receiver's
 * side too.  boot_id: the receiver's, as the sender knew it (a stale one is ignored);
 * dead_ms: the sender's dead timeout (the receiver tells a word about the same outage that
 * crossed its own from one about a new outage by it). */
struct psid_m_was_dead {
    uint64_t boot_id;
    uint32_t dead_ms;
    uint32_t pad;
};

struct psid_m_signal {
    uint64_t req;
    uint32_t key;
    int32_t pid;
    int32_t sig;
    uint32_t uid; /* the requester's uid: kill()'s permission rule */
};

struct psid_m_orphans {
    uint32_t key;
    uint32_t pad;
};

/* The spawner `key` of the sending node has much output waiting (it does not read): hold
 * (1) or read again (0) the output of its tasks on the receiving node. */
struct psid_m_hold {
    uint32_t key;
    uint32_t hold;
};

/*
 * Check that a message of `type` with len bytes is well formed: known type, the struct
 * fits, strings or data after it as the type requires.  Returns 0 or -1.
 */
int psid_dmsg_check(uint16_t type, const void *data, uint32_t len);

#endif
