/*
 * psid_int.h — what psid's modules share: the client connections and the cluster services.
 *
 *   psid.c      start-up, the NIC provider (device ABI), the event loop
 *   cluster.c   the node table (alive/load, master, dead nodes), daemon message dispatch,
 *               and the cluster operations of clients (spawn, signal, notify, stdin, status)
 *   tasks.c     the tasks this node runs for spawners anywhere: fork/exec as the user,
 *               output pipes, stdin, exit status, signals, killing orphans
 *
 * Everything runs in psid's single event-loop thread (the NIC thread touches none of it).
 */
#ifndef PSPORT_PSID_INT_H
#define PSPORT_PSID_INT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlink.h"
#include "fault.h"
#include "nodes.h"
#include "spawn_proto.h"

/* A task a client spawned or asked to be notified about, until its exit event. */
struct psid_watch {
    uint64_t tid;
    uint64_t req;     /* pending request id (spawn/signal/notify), or 0 */
    uint8_t kind;     /* PSID_W_* */
    uint8_t detached; /* spawned with PSPC_SPAWN_DETACHED */
    uint8_t op;       /* PSID_W_REQ: the request's PSPC_OP_* */
};
enum { PSID_W_TASK = 1, PSID_W_NOTIFY = 2, PSID_W_REQ = 3 };

/* One connection on psid's UNIX socket. */
struct client {
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    int ctx; /* attached NIC context or -1 */
    uint32_t generation;
    /* cluster operations */
    uint32_t key;     /* unique on this node while psid runs (0: none yet) */
    uint8_t spawner;  /* sent PSPC_OP_SPAWNER: events are queued to it */
    uint8_t *part;    /* partition: part[node] != 0 (NULL: every node) */
    uint16_t rr_next; /* next node for PSPC_NODE_NEXT */
    struct psid_watch *watch;
    size_t nwatch, capwatch;
    char *out; /* bytes queued for the client (non-blocking writes) */
    size_t out_len, out_off, out_cap;
    char *in; /* bytes of requests read so far (non-blocking reads) */
    size_t in_len, in_cap;
    uint8_t output_held;   /* its tasks' output is held, here and on the other nodes */
    uint64_t hold_sent_ns; /* when they were told last */
};

/* Stop reading a task's output while this much waits for its spawner (on the daemon link to
 * its node, or on its connection): twice the daemon link's window of frames, enough to keep
 * it busy; more only delays the end of a killed job, whose exits come after all output
 * queued before them. */
#define PSID_OUT_BACKLOG_MAX (1u << 20)

/* psid's state the modules share (defined in psid.c). */
struct psid_shared {
    uint16_t node;
    const struct psp_nodes *nodes;
    struct psid_dlink *dlink;
    uint64_t boot_id;
    const char *sock_path; /* psid's socket: set in the environment of its tasks */
};
extern struct psid_shared psid_g;

/* The number of connections and the i-th of them (0 <= i < count). */
unsigned psid_client_count(void);
struct client *psid_client_at(unsigned i);

/* The client with this key, or NULL (it closed). */
struct client *psid_client_by_key(uint32_t key);

/*
 * Whether uid may use psport on this node (attach, spawn, have tasks started here): root
 * always, else PSP_PSID_USERS empty or naming it.  If not, and msg is given, the refusal
 * for the user in msg (size n).
 */
int psid_user_allowed(uid_t uid, char *msg, size_t n);

/*
 * Queue a message to client c (psk_msg framing): op, status, then a and b (either may be
 * empty).  Written without blocking as the socket takes it.  0 or -ENOMEM.
 */
int psid_client_queue(struct client *c, uint32_t op, int32_t status, const void *a, uint32_t alen,
                      const void *b, uint32_t blen);

/* Node restarted (its psid came back with a new boot id): the NIC this psid hosts drops its
 * connection to it (mcp_peer_restarted), so that the first frames to the new incarnation
 * open a new one rather than fail on the old. */
void psid_nic_peer_restarted(uint16_t node);

/* ---- cluster.c ---- */

/* Read the cluster settings and open the daemon link. Exits with a message on failure. */
void psid_cluster_start(const struct mcp_fault_cfg *fault);

/* Run the daemon link and timers; returns the poll timeout (ms) the loop may sleep. */
int psid_cluster_run(void);

/* Serve a cluster operation (PSPC_OP_*) of client c. Returns -1 to close the connection. */
int psid_cluster_request(struct client *c, uint32_t op, const void *payload, uint32_t len);

/* Client c's connection closed: kill its tasks (unless detached), forget its requests. */
void psid_cluster_client_gone(struct client *c);

/*
 * Output of task tid for the spawner connection `key` of node `node` (ours: queued to the
 * client; another: sent on the bulk channel, behind earlier output).
 */
void psid_deliver_output(uint16_t node, uint32_t key, uint64_t tid, uint32_t stream,
                         const void *data, uint32_t len);

/* The id of task pid on node, as spawners see it (node:pid). */
static inline uint64_t psid_task_id(uint16_t node, int32_t pid)
{
    return ((uint64_t)node << 32) | (uint32_t)pid;
}

/* Exit of task tid for connection `key` of node `node`, behind the task's output. */
void psid_deliver_exit(uint16_t node, uint32_t key, uint64_t tid, int32_t status, uint32_t flags);

/* `bytes` of the stdin that connection `key` of node `node` sent to task tid are done with
 * (written into its pipe, or dropped): the spawner may send that much more. */
void psid_deliver_stdin_taken(uint16_t node, uint32_t key, uint64_t tid, uint64_t bytes);

/* Whether op is one of the cluster operations. */
int psid_cluster_is_op(uint32_t op);

/* Counters of the daemon side (psiadmin counters). */
struct psid_cluster_stats {
    uint64_t malformed;        /* daemon messages dropped as malformed */
    uint64_t nodes_died;       /* nodes declared dead */
    uint64_t was_dead_crossed; /* PSID_M_WAS_DEAD words that crossed ours (not run again) */
    uint64_t nodes_up;         /* nodes that (re)joined */
    uint64_t spawned;          /* tasks started here */
    uint64_t spawn_fail;       /* spawns here that failed (exec errno returned) */
    uint64_t exits;            /* tasks of this node that ended */
    uint64_t lines_out;        /* output messages sent */
    uint64_t signals;          /* signals delivered here */
    uint64_t orphans_killed;
};
extern struct psid_cluster_stats psid_cstats;

/* ---- tasks.c ---- */

/* What a spawn request asks for (strings point into the request). */
struct psid_spawn_req {
    uint16_t from_node; /* the spawner's node */
    uint32_t key;       /* the spawner's connection there */
    int32_t spawner_pid;
    uint32_t uid, gid;
    uint32_t flags;
    const char *cwd;
    const char *const *argv; /* NULL-terminated */
    const char *const *envp; /* NULL-terminated */
};

/* Start a task. Returns its pid, or a negative errno (exec/chdir/user failure). */
int psid_task_spawn(const struct psid_spawn_req *r);

/* Tasks running here (for alive messages and status). */
unsigned psid_task_count(void);

/*
 * Signal task pid and its process group on behalf of uid: 0, -ESRCH (not a task of ours,
 * or ended with nothing of its group left), -EPERM (uid neither 0 nor the task's; group
 * members are not checked one by one), -EINVAL (bad signal).  After a signal that ends
 * tasks, what is left of the group is killed when the task is forgotten.
 */
int psid_task_signal(pid_t pid, int sig, uint32_t uid);

/* Register (node, key) to get an EXIT when task pid ends. 0 or -ESRCH. */
int psid_task_notify(pid_t pid, uint16_t node, uint32_t key);

/* Data for task pid's stdin (eof: close it afterwards). Ignored for unknown tasks. */
void psid_task_stdin(pid_t pid, const void *data, uint32_t len, int eof);

/* Kill the non-detached tasks of spawner (node, key): SIGTERM, SIGKILL after a grace. */
void psid_task_orphans(uint16_t node, uint32_t key);

/* The spawner (node, key) asks to hold (1) or read again (0) its tasks' output here. */
void psid_task_hold(uint16_t node, uint32_t key, int hold);

/* Node died: kill orphans of its spawners, forget notifications for it. */
void psid_task_node_died(uint16_t node);

/* Poll descriptors the tasks need (output pipes, stdin pipes): up to max, returns count. */
unsigned psid_task_pollfds(struct pollfd *pf, unsigned max);

/* The most descriptors psid_task_pollfds() can give now (three a task). */
unsigned psid_task_pollfds_max(void);

/* Tasks start with descriptor limit lim (psid's before it raised its own), not psid's. */
struct rlimit;
void psid_task_nofile(const struct rlimit *lim);

/* Handle what poll reported on the descriptors psid_task_pollfds() gave. */
void psid_task_handle(const struct pollfd *pf, unsigned n);

/* Reap ended children (SIGCHLD) and run timers (kill escalation, exit flush). */
void psid_task_reap(void);

/* Milliseconds until the tasks' next timer, or -1. */
int psid_task_timeout(void);

/* Fill up to max entries of the task list; returns the count. */
unsigned psid_task_list(struct pspc_task *t, unsigned max);

/* Signal every task (psid shutting down): SIGKILL to each process group. */
void psid_task_kill_all(void);

#endif
