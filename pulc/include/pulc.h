/*
 * pulc.h — ParaStation User-Level Communication, the public API (PSP_*).
 *
 * Attach the process to the node's NIC through psid, open ports, send and receive messages.
 * Functions return 0 or a negative errno; PSP_StrError() says what went wrong and what to do.
 *
 * Threads: libpulc is for one thread per process (or calls serialised by the caller); only
 * PSP_SleepPort and PSP_WakePort may run while another thread is inside the library.
 * Ownership: a buffer handed to PSP_ISend/PSP_IReceive belongs to the library until the
 * request completes; the request structure too.
 */
#ifndef PSPORT_PULC_H
#define PSPORT_PULC_H

#include <signal.h> /* sig_atomic_t */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Attach this process to the NIC: connect to psid (PSP_PSID_SOCKET), check its ABI, take a
 * NIC context, map the NIC image and the message area and open the link.  Returns 0 (also
 * when already attached) or a negative errno: -ENOENT / -ECONNREFUSED psid is not running,
 * -EACCES user not allowed, -EPROTO ABI mismatch, -EUSERS / -EBUSY no room, others.
 */
int PSP_Init(void);

/* Detach from the NIC (sends still posted go out) and release everything PSP_Init() took. */
void PSP_Finalize(void);

/* This node's id, or -1 before PSP_Init(). */
int PSP_GetNodeID(void);

/*
 * Text for an error code returned by this library: for the last failure of PSP_Init() the
 * full message (psid's own text for a refusal), else strerror().  Static storage, valid until
 * the next call into the library.
 */
const char *PSP_StrError(int err);

/* ---- ports ---- */

#define PSP_PORT_D  1 /* datagrams: reliable, ordered per sender, message boundaries kept */
#define PSP_PORT_S  2 /* one byte stream per port (the first peer that writes or is written) */
#define PSP_PORT_M  3 /* byte streams, one per sender, read with the sender's id */
#define PSP_ANYPORT 0 /* PSP_OpenPort: pick a free port number */

/* A port's cluster-wide id: node << 16 | port number. */
typedef uint32_t PSP_PortId;
#define PSP_PORTID(node, number) ((PSP_PortId)(node) << 16 | (uint16_t)(number))
#define PSP_PORTID_NODE(id)      ((uint16_t)((id) >> 16))
#define PSP_PORTID_NUMBER(id)    ((uint16_t)(id))

typedef struct PSP_Port PSP_Port;

/*
 * Open port number (or PSP_ANYPORT) of kind (PSP_PORT_D/S/M) on this node; PSP_Init() first
 * if not attached.  *port is the library's until PSP_ClosePort().  Errors: -EADDRINUSE,
 * -EINVAL (number or kind), -ENOSPC (all ports taken), those of PSP_Init().
 */
int PSP_OpenPort(int number, int kind, PSP_Port **port);

/* Close a port: pending requests complete with -ECANCELED, queued messages are dropped. */
int PSP_ClosePort(PSP_Port *port);

/* The port's id (what senders address). */
PSP_PortId PSP_GetPortId(const PSP_Port *port);

/*
 * The asynchronous error of the port, and clear it: 0, or a negative errno reported by a
 * receiver after the send completed (-ECONNREFUSED: no such port there; -EPROTOTYPE: a port
 * of another kind) or by the NIC (-ETIMEDOUT: the node stopped answering).  *about gets the
 * port id that reported it (may be NULL).
 */
int PSP_GetPortError(PSP_Port *port, PSP_PortId *about);

/* ---- port-D messages ---- */

/* What an accept callback sees of a queued message. */
typedef struct PSP_MsgInfo {
    PSP_PortId src;      /* the sender's port */
    uint32_t len;        /* payload bytes as sent */
    uint16_t xlen;       /* extra header bytes */
    const void *xheader; /* the extra header, valid during the callback */
    const void *data;    /* place callbacks: the whole payload in place (a local ring's message),
                          * valid during the callback; NULL when it is not at hand */
} PSP_MsgInfo;

/* Accept callback of PSP_IReceive: nonzero takes the message.  It must not call PSP_*. */
typedef int (*PSP_AcceptFn)(const PSP_MsgInfo *msg, void *arg);

/*
 * Place callback of PSP_IReceiveEach: a request of the caller's (not posted) that is to take
 * this message into *buf (*len bytes at most), or NULL to leave the message queued, or, only
 * when msg->data is set, PSP_PLACE_TAKEN: the callback used the message where it lies (its
 * extra header and msg->data), and it is gone, with no request.  It must not call PSP_*.
 */
struct PSP_Request;
typedef struct PSP_Request *(*PSP_PlaceFn)(const PSP_MsgInfo *msg, void *arg, void **buf,
                                           uint32_t *len);
#define PSP_PLACE_TAKEN ((struct PSP_Request *)1)

/* A request: allocated by the caller, filled by the library; results valid once complete. */
typedef struct PSP_Request {
    int error;       /* 0, or a negative errno: -EMSGSIZE truncated, -ECANCELED, -ECONNRESET .. */
    PSP_PortId src;  /* receive: the sender */
    uint32_t len;    /* receive: payload bytes as sent; send: bytes */
    uint32_t copied; /* receive: payload bytes stored (min(len, buffer)) */
    uint16_t xlen;   /* receive: extra header bytes as sent (stored up to the buffer size) */
    uint16_t p_kind; /* private to the library from here on */
    int p_state;
    struct PSP_Request *p_next, *p_prev;
    PSP_Port *p_port;
    const void *p_sbuf;
    void *p_rbuf;
    const void *p_xhdr;
    void *p_xbuf;
    uint32_t p_buflen, p_xmax, p_off, p_msg_id, p_msg;
    PSP_PortId p_dest;
    PSP_AcceptFn p_accept;
    PSP_PlaceFn p_place;
    void *p_arg;
} PSP_Request;

/*
 * Send len bytes of buf with an extra header (xlen <= 256 bytes, may be 0) to port dest.
 * Completes when the data is handed to the NIC or to the receiver (local): buf may be
 * reused then.  Errors found at once are returned (-EHOSTUNREACH no such node,
 * -ECONNREFUSED / -EPROTOTYPE for a local port); later ones through PSP_GetPortError().
 */
int PSP_ISend(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen, const void *buf,
              uint32_t len, PSP_Request *req);

/*
 * Send a small message to a port on this node at once, through the pair's ring, when that can
 * be done without waiting: returns 1 sent (complete, as a PSP_ISend whose request is done:
 * xheader and buf reusable), 0 not sent (the destination is on another node or has no ring,
 * the ring is full, earlier sends wait, or the message is longer than a ring entry takes):
 * then send it with PSP_ISend, which also reports errors.  Saves a request's bookkeeping on
 * the path a stream of small local messages takes.
 */
int PSP_SendNow(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen,
                const void *buf, uint32_t len);

/* A local message of at least this many bytes that goes direct (longer than PSP_LOCAL_DIRECT)
 * is copied by receiver and sender together, each taking chunks while it makes progress. */
#define PSP_SHARED_COPY_MIN (256u << 10)

/*
 * Post a receive: the first queued (or later arriving) message accept() takes — in arrival
 * order, skipping those it refuses; accept NULL takes any — is copied to buf (len bytes at
 * most; longer messages complete with -EMSGSIZE and copied = len) and its extra header to
 * xbuf (xmax bytes at most).  Receives are matched in the order they were posted.
 */
int PSP_IReceive(PSP_Port *port, void *xbuf, uint16_t xmax, void *buf, uint32_t len,
                 PSP_AcceptFn accept, void *arg, PSP_Request *req);

/*
 * Post a standing receive: every queued (or later arriving) message, in arrival order, is
 * offered to place(); a message it gives a request for leaves the queue into that request's
 * buffer — the request then completes like a PSP_IReceive's, often within the same progress
 * pass — and the others stay queued for receives posted later.  req itself completes only
 * when cancelled.  One message is matched once: a caller that sees each message through its
 * own callback needs no second receive to take it (an MPI channel's small messages).
 */
int PSP_IReceiveEach(PSP_Port *port, PSP_PlaceFn place, void *arg, PSP_Request *req);

/* Make progress once; 1 if req is complete, else 0. */
int PSP_Test(PSP_Request *req);

/* 1 if req is complete, else 0, without making progress (for a caller that just did). */
int PSP_IsComplete(const PSP_Request *req);

/*
 * Wait for req at most timeout_ms (-1: no limit), spinning, yielding, then sleeping
 * (PSP_SPIN_US, PSP_YIELD_US).  Returns req->error, or -ETIMEDOUT (req still pending).
 */
int PSP_Wait(PSP_Request *req, int timeout_ms);

/*
 * Wait at most timeout_ms (-1: no limit) until something new happens on port — a message or
 * a fragment of one arrives, a local direct send is handed back — running progress meanwhile
 * and spinning, yielding, then sleeping like PSP_Wait.  For a caller that watches its posted
 * receives with accept callbacks of its own (an MPI channel).  Returns 0, -ETIMEDOUT, or an
 * error of the progress engine.
 */
int PSP_WaitPort(PSP_Port *port, int timeout_ms);

/*
 * PSP_WaitPort's sleep in two halves, for a threaded caller that must not hold its lock
 * while asleep (an MPI channel with MPI_THREAD_MULTIPLE).  PSP_PortIdle (called like every
 * other function, serialised): 1 when the port has nothing to do (no event unexamined, no
 * send of this process queued, no local message ready) and a sleep may begin, its ticket in
 * *ticket; 0 when a pass is due, or when the NIC is the kernel module's (no sleep without
 * the device wait there: keep polling).  PSP_SleepPort may run while other threads call the
 * library: it sleeps until the port's event moves past ticket, PSP_WakePort is called, or
 * timeout_ms passes, with psid's NIC thread running the firmware meanwhile; returns 0, or
 * -ENOTCONN before PSP_Init.
 * PSP_WakePort (any thread, any time) ends the port's sleeps, e.g. when another thread has
 * queued work that needs a pass.
 */
int PSP_PortIdle(PSP_Port *port, uint32_t *ticket);
int PSP_SleepPort(PSP_Port *port, uint32_t ticket, int timeout_ms);
void PSP_WakePort(PSP_Port *port);

/*
 * PSP_TakeLocal: a spinning waiter's look between progress passes.  Offers what the port's
 * local rings hold to its first posted receive, as a pass does, and does nothing else.
 * Returns 1 when it took something (a pass may be due as well), 0 when the rings are empty
 * and a pass would find nothing more, -1 when a pass is due instead: an event on the port (a
 * queued message, an error), a ring message the first receive does not take, a send of this
 * process queued, rawdata registered, traffic with other nodes lately (a pass runs the NIC
 * then), the kernel module's NIC, or no PSP_Init.  Why: a pass looks at everything, and a
 * message that arrives during one waits for the next; a look costs a few loads.
 */
int PSP_TakeLocal(PSP_Port *port);

/*
 * PSP_Yield: what a polling waiter calls instead of sched_yield() (PULC's own waits do).  It
 * yields and returns PSP_YieldShared().  When the yields keep handing the CPU to another task
 * (another rank polling on the same CPU), it moves the calling thread to the next CPU of its
 * affinity mask, keeping the mask, at most every 20 ms and less often while that does not
 * help (PSP_YIELD_MOVE=0: never).  Needs no PSP_Init.
 * PSP_YieldShared: 1 after one of the calling thread's yields handed the CPU to another task,
 * until eight yields in a row did not: spinning then only keeps that task (perhaps the peer
 * we wait for) off the CPU, so a waiter yields at once.  Cheap enough for every pass.
 * PSP_YieldMoves: how many such moves the process made (all threads).
 */
int PSP_Yield(void);
int PSP_YieldShared(void);
unsigned PSP_YieldMoves(void);

/* Cancel a posted receive not yet matched: 0 (req->error = -ECANCELED), else -EBUSY. */
int PSP_Cancel(PSP_Request *req);

/* Blocking forms of PSP_ISend and PSP_IReceive (+ PSP_Wait without limit). */
int PSP_Send(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen, const void *buf,
             uint32_t len);
int PSP_Receive(PSP_Port *port, void *xbuf, uint16_t xmax, void *buf, uint32_t len,
                PSP_AcceptFn accept, void *arg, PSP_Request *req);

/*
 * Look for a queued message accept() takes without taking it: 1 and *info filled (xheader
 * NULL), or 0.  Makes progress once.
 */
int PSP_IProbe(PSP_Port *port, PSP_AcceptFn accept, void *arg, PSP_MsgInfo *info);

/*
 * Run the library's progress once (NIC, host queue, pending sends and receives): 1 when this
 * process's traffic moved (its sends were posted, frames or messages arrived at its ports,
 * rawdata was copied into its buffers), 0 when nothing of it moved, or a negative errno.  A
 * caller that waits keeps polling while it returns 1: traffic that moves is not idle time.
 */
int PSP_Progress(void);

/*
 * 1 while frames this process sent to dest's node still wait in the NIC to go out (behind the
 * peer's send window, or not yet transmitted; a send completes when its data is posted, before
 * that), else 0 (also for this node).  A caller that is about to stop calling the library for a
 * while (an MPI rank leaving a blocking send to compute) keeps running PSP_Progress until this
 * is 0: its own passes send the rest as ACKs come back, faster than psid's NIC thread.
 */
int PSP_SendWaiting(PSP_PortId dest);

/*
 * Acknowledge to peer's node now what arrived from there, instead of when reverse traffic
 * carries it or PSP_ACK_DELAY_US passes, and send it: for a receiver that is done and about to
 * stop calling the library, so the sender's window does not stay full until somebody else runs
 * the NIC.  0, or an error of the progress engine.
 */
int PSP_AckNow(PSP_PortId peer);

/* ---- port-S and port-M streams (stream.c) ---- */

/*
 * Byte streams over ports of kind PSP_PORT_S (one stream per port) and PSP_PORT_M (one
 * stream per sender).  A write is one message; a read returns bytes of one stream in write
 * order, across write boundaries (the bytes of consecutive writes join), each byte exactly
 * once.  Reads take the data out of the message area; a partly read write keeps its rest
 * for the next read.  Writes to a port of another kind fail with -EPROTOTYPE (local: at
 * once; remote: later, through PSP_GetPortError of the writing port).
 *
 * A write returns once its data is handed over: to the NIC (remote), into the message area
 * (local), or — a local write above PSP_LOCAL_DIRECT bytes — once the reader has copied all
 * of it from the writer's buffer (like a full pipe: two processes that write such blocks to
 * each other before reading wait for each other forever).
 *
 * A reader that finds part of a stream lost (the writer died or restarted in the middle of a
 * write) returns the bytes before the gap, then -ECONNRESET once, then later data.
 */

/*
 * Port-S: write len bytes of buf (the caller's; reusable on return) to port dest, as one
 * message.  The port's first successful write fixes its stream peer (unless a peer's data
 * came first, see PSP_SRead); a write to any other port is refused with -EISCONN.  Returns 0
 * or a negative errno: -EPROTOTYPE (port is not PSP_PORT_S, or dest is a local port of
 * another kind), -ECONNREFUSED (no such local port, or a large local write refused because
 * the destination port-S has another peer), -EHOSTUNREACH, -EISCONN, -EINVAL.  A 0-byte
 * write sends nothing and does not fix the peer.  Refusals by a remote port, or of small
 * local writes, arrive later through PSP_GetPortError (-ECONNREFUSED, -EPROTOTYPE).
 */
int PSP_SWrite(PSP_Port *port, PSP_PortId dest, const void *buf, uint32_t len);

/*
 * Port-S: read up to len (>= 1) bytes of the port's stream into buf (the caller's).  Waits
 * at most timeout_ms (-1: no limit; 0: only look) until at least one byte is there, then
 * returns as many as are there without waiting more: the byte count (> 0, never 0),
 * -ETIMEDOUT, or a negative errno (-EPROTOTYPE not a port-S, -ECONNRESET see above, -EINVAL).
 *
 * The stream peer is the port the port wrote to first, or the sender of the first message
 * found queued (arrival order) when the owner first reads or writes, whichever comes first.
 * Data from any other sender is refused when the owner next reads (or writes to its peer):
 * dropped, and that writer gets -ECONNREFUSED (its port error, or the result of a large
 * local write).  A port that never reads refuses nothing.
 */
int PSP_SRead(PSP_Port *port, void *buf, uint32_t len, int timeout_ms);

/* Port-S: 1 and *peer (may be NULL) when the port's stream peer is fixed, 0 when not yet. */
int PSP_SGetPeer(const PSP_Port *port, PSP_PortId *peer);

/*
 * Port-M: write len bytes of buf (the caller's; reusable on return) to port dest as one
 * message of the stream "port → dest".  port must be a PSP_PORT_M port (its id names the
 * stream at the reader).  Returns 0 or a negative errno as PSP_SWrite (no -EISCONN: a port-M
 * writes to anyone).  A 0-byte write sends nothing.
 */
int PSP_MWrite(PSP_Port *port, PSP_PortId dest, const void *buf, uint32_t len);

/*
 * Port-M: read up to len (>= 1) bytes of one sender's stream into buf: the stream whose
 * queued data arrived first.  *src gets the sender's port id.  Waits and returns like
 * PSP_SRead: bytes read (> 0, all from *src's stream, in its write order), -ETIMEDOUT, or a
 * negative errno (-ECONNRESET with *src set: that stream lost data).
 */
int PSP_MRead(PSP_Port *port, PSP_PortId *src, void *buf, uint32_t len, int timeout_ms);

/*
 * Port-M: read up to len bytes of sender src's stream only, like PSP_MRead; other senders'
 * data stays queued in its order.  -ETIMEDOUT when src sent nothing (more) in time.
 */
int PSP_MReadFrom(PSP_Port *port, PSP_PortId src, void *buf, uint32_t len, int timeout_ms);

/* ---- rawdata (rawdata.c) ---- */

/*
 * A registered receive buffer, named cluster-wide: the receiver registers it on one of its
 * ports and passes the handle to the sender (e.g. in a port-D message), who writes into it
 * with PSP_RawSend.  Data lands in the buffer with no copy beyond the NIC's when the owner
 * polls, one copy otherwise; on one node the sender writes it once (process_vm_writev).
 * Writes must come in offset order from one sender at a time (a rendezvous).
 */
typedef struct PSP_RawHandle {
    PSP_PortId port; /* the owner's port */
    uint32_t index;  /* the registration in the owner's message area */
    uint32_t nonce;  /* tells this registration from earlier ones at the same index */
} PSP_RawHandle;

/* Register len bytes at buf for rawdata on port; buf is the library's until unregistered. */
int PSP_RawRegister(PSP_Port *port, void *buf, uint32_t len, PSP_RawHandle *handle);

/* Bytes written into the registration so far (from offset 0, in order), or a negative errno. */
int64_t PSP_RawReceived(PSP_Port *port, const PSP_RawHandle *handle);

/* Wait until at least bytes have arrived in the registration: 0, -ETIMEDOUT or an error. */
int PSP_RawWait(PSP_Port *port, const PSP_RawHandle *handle, uint32_t bytes, int timeout_ms);

/* Unregister: later writes are dropped; data not yet copied is discarded. */
int PSP_RawUnregister(PSP_Port *port, const PSP_RawHandle *handle);

/*
 * Write len bytes of buf at offset of the registration dest (from port, which must be open).
 * Completes like PSP_ISend (buf reusable); a write past the registration's end is -EMSGSIZE,
 * an unknown registration -ENOENT (local at once; remote: dropped and counted there).
 */
int PSP_RawSend(PSP_Port *port, const PSP_RawHandle *dest, uint32_t offset, const void *buf,
                uint32_t len, PSP_Request *req);

/* ---- Tasks: spawning processes anywhere in the cluster (seed 000 §4.2) ----
 *
 * A spawner is a connection to this node's psid.  Tasks it starts run as the calling user
 * with the environment, directory and arguments given; their output comes back to the
 * spawner as events, line-whole per task, followed by the exit status.  When the spawner
 * closes (or dies) its tasks are killed unless spawned detached.  Spawns are restricted to
 * the partition taken from PSP_PARTITION, PSP_HOSTFILE, SLURM_JOB_NODELIST or PBS_NODEFILE
 * (the first that is set; none: every node).  These calls need no PSP_Init().
 */

/* A global task id: (node << 32) | pid. */
typedef uint64_t PSP_TaskId_t;
#define PSP_TASK_NODE(tid) ((int)((tid) >> 32))
#define PSP_TASK_PID(tid)  ((int)(uint32_t)(tid))

/* PSP_SpawnReq.node when not a node id. */
#define PSP_SPAWN_NEXT         (-1) /* the next live node of the partition, round-robin */
#define PSP_SPAWN_LEAST_LOADED (-2) /* the live node with the fewest tasks, then lowest load */

/* PSP_SpawnReq.flags */
#define PSP_SPAWN_DETACHED 0x1u /* survives its spawner */
#define PSP_SPAWN_STDIN    0x2u /* stdin fed by PSP_SpawnerStdin() (else /dev/null) */

typedef struct PSP_SpawnReq {
    int node;                /* node id, PSP_SPAWN_NEXT or PSP_SPAWN_LEAST_LOADED */
    const char *const *argv; /* program (searched in the task's PATH) and arguments */
    const char *const *env;  /* the task's whole environment; NULL: the caller's */
    const char *cwd;         /* working directory; NULL: the caller's */
    unsigned flags;          /* PSP_SPAWN_* */
} PSP_SpawnReq_t;

typedef struct PSP_Spawner PSP_Spawner_t;

/*
 * Connect to psid as a spawner, with the partition from the environment.  Returns the
 * handle (the caller closes it) or NULL with the reason in err (psid not running, a host of
 * the partition that is not a node, ...).
 */
PSP_Spawner_t *PSP_SpawnerOpen(char *err, size_t errlen);

/* Close the connection: the spawner's tasks not spawned detached are killed. */
void PSP_SpawnerClose(PSP_Spawner_t *sp);

/* The descriptor to poll for events (then call PSP_SpawnerEvent with timeout 0). */
int PSP_SpawnerFd(const PSP_Spawner_t *sp);

/* Whether events are already queued in the library (poll would not show them). */
int PSP_SpawnerPending(const PSP_Spawner_t *sp);

/*
 * Start one task; *tid gets its id.  Returns 0 or a negative errno with the reason in err:
 * the exec/chdir errno of the task (-ENOENT: no such program), -ENXIO node not in the nodes
 * file or outside the partition, -EHOSTDOWN node (or every node) down, -EINVAL.
 */
int PSP_Spawn(PSP_Spawner_t *sp, const PSP_SpawnReq_t *req, PSP_TaskId_t *tid, char *err,
              size_t errlen);

/*
 * Start n tasks at once (all requests go out before the first reply is awaited).  tids[i]
 * and errors[i] get each one's id or negative errno; err the first failure's reason.
 * Returns the number started.
 */
int PSP_SpawnMany(PSP_Spawner_t *sp, const PSP_SpawnReq_t *reqs, unsigned n, PSP_TaskId_t *tids,
                  int *errors, char *err, size_t errlen);

enum { PSP_EVENT_OUTPUT = 1, PSP_EVENT_EXIT = 2 };
#define PSP_EXIT_LOST   0x1u /* the task's node died: its status is unknown */
#define PSP_EXIT_NOTIFY 0x2u /* a death asked for with PSP_SpawnerNotify() */

typedef struct PSP_Event {
    int kind;         /* PSP_EVENT_* */
    PSP_TaskId_t tid; /* the task */
    int stream;       /* OUTPUT: 1 stdout, 2 stderr */
    const char *data; /* OUTPUT: one or more whole lines (the last may lack its newline at */
    size_t len;       /*   the end of the stream); valid until the next PSP_SpawnerEvent */
    int status;       /* EXIT: wait status (WIFEXITED, WEXITSTATUS, ...) */
    unsigned flags;   /* EXIT: PSP_EXIT_* */
} PSP_Event_t;

/*
 * The next event: 1 and *ev filled, 0 when none came within timeout_ms (-1: wait forever),
 * or a negative errno (-EPIPE: psid closed the connection).  Output of a task always comes
 * before its exit.
 */
int PSP_SpawnerEvent(PSP_Spawner_t *sp, PSP_Event_t *ev, int timeout_ms);

/*
 * The exit code a shell would give for an EXIT event: the task's exit status, 128 + N for
 * signal N, 255 when the task was lost with its node.
 */
int PSP_EventExitCode(const PSP_Event_t *ev);

/*
 * Write an OUTPUT event's bytes to fd as they are; when rank >= 0, each line prefixed
 * "[rank] " and a last line without newline (end of stream, or a piece of a very long line)
 * given one.  0 or a negative errno of write(): -EINTR when a signal the caller catches
 * came while fd was not taking the bytes (the rest of the event is then not written).
 */
int PSP_EventWrite(const PSP_Event_t *ev, int fd, int rank);

/*
 * A flag the caller's signal handler sets when a signal means to stop writing output (mpirun:
 * Ctrl-C, SIGTERM): PSP_EventWrite then also ends a write the signal cut short after some of
 * its bytes went, with -EINTR, instead of writing the rest (which blocks while the reader is
 * stopped).  NULL (the default): the rest is written.
 */
void PSP_EventWriteStopOn(volatile sig_atomic_t *flag);

/*
 * Feed len bytes to the stdin of task tid (spawned with PSP_SPAWN_STDIN); eof closes it.  The
 * bytes wait on the task's node until its pipe takes them: a feeder keeps
 * PSP_SpawnerStdinQueued() below PSP_SPAWNER_STDIN_WINDOW, so that a task that does not read
 * holds its feeder back instead of making psid's memory grow.
 */
int PSP_SpawnerStdin(PSP_Spawner_t *sp, PSP_TaskId_t tid, const void *data, size_t len, int eof);

/* Stdin bytes a feeder keeps in flight at most (flow control of PSP_SpawnerStdin). */
#define PSP_SPAWNER_STDIN_WINDOW (1u << 20)

/*
 * Bytes given to PSP_SpawnerStdin that the tasks' nodes have not yet written into the tasks'
 * stdin (or dropped, as a task closed it).  It falls as PSP_SpawnerEvent reads psid's word on
 * them; bytes sent to a task that has ended stay counted.  Always 0 when the node's psid is
 * older than these reports (no flow control then, as before them).
 */
uint64_t PSP_SpawnerStdinQueued(const PSP_Spawner_t *sp);

/*
 * Send signal sig to task tid as kill() would: 0, -ESRCH (no such task), -EPERM (another
 * user's task), -EINVAL (bad signal), -EHOSTDOWN (its node is down).
 */
int PSP_SpawnerSignal(PSP_Spawner_t *sp, PSP_TaskId_t tid, int sig);

/*
 * Send signal sig to task tid without waiting for the outcome: 0 once psid has the request, or
 * a negative errno (psid gone).  Why: the answer about a task on a node that stopped
 * responding comes only when that node is declared dead, and a launcher killing a job must
 * go on forwarding the other tasks' output and exits meanwhile.  The task's death shows as
 * its EXIT event; the answer itself is dropped.
 */
int PSP_SpawnerSignalPost(PSP_Spawner_t *sp, PSP_TaskId_t tid, int sig);

/* Ask for an EXIT event (flag PSP_EXIT_NOTIFY) when task tid dies: 0 or -ESRCH etc. */
int PSP_SpawnerNotify(PSP_Spawner_t *sp, PSP_TaskId_t tid);

/* A node as this node's psid sees it. */
typedef struct PSP_NodeInfo {
    int id;
    int up;              /* alive (this node always) */
    int master;          /* the lowest live node */
    uint32_t ip;         /* IPv4 address, network order */
    unsigned tasks;      /* tasks psid runs there */
    unsigned load_milli; /* 1-minute load average x 1000 */
} PSP_NodeInfo_t;

/*
 * The cluster's nodes (up to max into nodes; nodes may be NULL with max 0) and this node's id
 * (*self, if self != NULL).  Returns the number of nodes in the cluster or a negative errno
 * with the reason in err (-ENOENT / -ECONNREFUSED: psid is not running).
 */
int PSP_GetNodes(PSP_NodeInfo_t *nodes, int max, int *self, char *err, size_t errlen);

/*
 * The batch partition's hosts from PSP_PARTITION, PSP_HOSTFILE, SLURM_JOB_NODELIST or
 * PBS_NODEFILE (the first set): 1 with *hosts a malloc'd newline-separated list (the caller
 * frees it), 0 when none is set, or a negative errno with the reason in err.
 */
int PSP_PartitionHosts(char **hosts, char *err, size_t errlen);

/* Parse "node:pid" into a task id: 0 or -EINVAL. */
int PSP_TaskIdParse(const char *text, PSP_TaskId_t *tid);

#ifdef __cplusplus
}
#endif

#endif
