/*
 * psid — the node's NIC provider (kmod/psport_abi.h, pulc/README.md).
 *
 * At start: format the NIC image in a memfd, open the link, create the message area.  Then a
 * single-threaded poll loop serves the UNIX socket (INFO, ATTACH with SCM_RIGHTS, DETACH,
 * MAP) and reclaims the context of every client whose connection closes; the NIC thread runs
 * the firmware when no client does (nic_thread: PSP_NIC_IDLE_US, PSP_NIC_QUIET_US).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/futex.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "area.h"
#include "cores.h"
#include "marea.h"
#include "proto.h"
#include "link.h"
#include "log.h"
#include "mcp.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "psid_int.h"
#include "psport_abi.h"
#include "settings.h"
#include "spawn_proto.h"

#define PROG        "psid"
#define MAX_CONNS   1024
#define NIC_TICK_NS 200000ull

static struct psid {
    const char *sock_path;
    const char *pidfile;
    uint16_t node;
    struct psp_nodes nodes;
    const char *link_kind;
    struct lanai_link *link;
    struct mcp_image *img;
    size_t img_size;
    int img_fd;
    struct pulc_area *area;
    int area_fd;
    struct mcp_nic nic;
    struct pulc_node node_view; /* what the NIC thread's drain needs */
    uint64_t idle_ns;           /* PSP_NIC_IDLE_US: unpolled this long with frames to send -> run */
    uint64_t quiet_ns;          /* PSP_NIC_QUIET_US: unpolled this long otherwise -> run */
    uint64_t max_clients;
    const char *users;
    int listen_fd;
    int pid_fd;
    int own_pidfile, own_socket; /* created by this process: removed at exit */
    struct mcp_fault_cfg fault;  /* of the NIC link; the daemon link injects the same */
    struct client conn[MAX_CONNS];
    unsigned nconn;
    size_t in_total; /* request buffers of all clients (serve()) */
    uint32_t next_key;
    volatile int stop_nic;
} S;

struct psid_shared psid_g;

unsigned psid_client_count(void)
{
    return S.nconn;
}

struct client *psid_client_at(unsigned i)
{
    return &S.conn[i];
}

struct client *psid_client_by_key(uint32_t key)
{
    for (unsigned i = 0; i < S.nconn; i++)
        if (S.conn[i].key == key)
            return &S.conn[i];
    return NULL;
}

/* Write what is queued for c without blocking. -1 when the connection is broken. */
static int client_flush(struct client *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

int psid_client_queue(struct client *c, uint32_t op, int32_t status, const void *a, uint32_t alen,
                      const void *b, uint32_t blen)
{
    struct psk_msg m = {PSK_MSG_MAGIC, PSK_ABI_VERSION, op, status, alen + blen, 0};
    size_t need = sizeof m + alen + blen;
    if (c->out_off && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + need > c->out_cap) {
        if (c->out_off) { /* reuse the space already written */
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + need > c->out_cap) {
            size_t cap = c->out_cap ? c->out_cap : 4096;
            while (cap < c->out_len + need)
                cap *= 2;
            char *nb = realloc(c->out, cap);
            if (!nb)
                return -ENOMEM;
            c->out = nb;
            c->out_cap = cap;
        }
    }
    memcpy(c->out + c->out_len, &m, sizeof m);
    if (alen)
        memcpy(c->out + c->out_len + sizeof m, a, alen);
    if (blen)
        memcpy(c->out + c->out_len + sizeof m + alen, b, blen);
    c->out_len += need;
    /* A broken connection shows up as a hang-up in the loop, which drops the client. */
    (void)client_flush(c);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: " PROG " [OPTIONS]\n"
            "The psport NIC provider of this node: formats the NIC image, opens the link and\n"
            "hands both to local PULC processes over a UNIX socket.\n\n"
            "  -f, --foreground     do not daemonize (log to stderr)\n"
            "  -P, --pidfile PATH   pid file (default /run/psport/psid.pid); a live psid\n"
            "                       holding it makes this one refuse to start\n"
            "  -n, --node ID        this node's id (default PSP_NODE_ID = %s)\n"
            "  -N, --nodes FILE     nodes file (default PSP_NODES_FILE; none: a single-node\n"
            "                       cluster on 127.0.0.1)\n"
            "  -s, --socket PATH    socket clients connect to (default PSP_PSID_SOCKET = %s)\n"
            "  -h, --help           show this help\n"
            "Settings: psinfo -c lists every PSP_* variable (link, firmware, psid).\n",
            psp_setting_str("PSP_NODE_ID"), psp_setting_str("PSP_PSID_SOCKET"));
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG " --help'.\n");
    exit(2);
}

/* mkdir -p of path's directory (best effort; bind/open report what fails). */
static void make_parent(const char *path)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d)
        return;
    *slash = '\0';
    for (char *p = d + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        (void)mkdir(d, 0755);
        *p = '/';
    }
    (void)mkdir(d, 0755);
}

/* Take the pid file (flock); exits when another live psid holds it. */
static void take_pidfile(void)
{
    make_parent(S.pidfile);
    int fd = open(S.pidfile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        psp_die("cannot open the pid file %s: %s (choose another with --pidfile)", S.pidfile,
                strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        long pid = strtol(buf, NULL, 10);
        psp_die("another psid (pid %ld) is running with pid file %s: stop it first (kill %ld) "
                "or give this one another --pidfile and --socket",
                pid, S.pidfile, pid);
    }
    S.pid_fd = fd;
    S.own_pidfile = 1;
}

/* On any exit of this process: remove what it created (not the daemon's parent: _exit). */
static void remove_files(void)
{
    if (S.own_socket)
        unlink(S.sock_path);
    if (S.own_pidfile)
        unlink(S.pidfile);
}

static void write_pidfile(void)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(S.pid_fd, 0) != 0 || pwrite(S.pid_fd, buf, (size_t)n, 0) != n)
        psp_die("cannot write the pid file %s: %s", S.pidfile, strerror(errno));
}

static void open_socket(void)
{
    struct sockaddr_un sa;
    if (strlen(S.sock_path) >= sizeof sa.sun_path)
        psp_die("socket path %s is too long (at most %zu bytes): choose a shorter --socket",
                S.sock_path, sizeof sa.sun_path - 1);
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, S.sock_path);
    make_parent(S.sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        psp_die("cannot create a UNIX socket: %s", strerror(errno));
    /* A socket file nobody listens on is a leftover of a psid that died: replace it. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0)
        psp_die("another psid already serves %s: stop it first or choose another --socket",
                S.sock_path);
    if (probe >= 0)
        close(probe);
    (void)unlink(S.sock_path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        psp_die("cannot bind %s: %s", S.sock_path, strerror(errno));
    /* Anybody may connect; ATTACH checks the user (PSP_PSID_USERS). */
    (void)chmod(S.sock_path, 0666);
    if (listen(fd, 64) != 0)
        psp_die("cannot listen on %s: %s", S.sock_path, strerror(errno));
    S.listen_fd = fd;
    S.own_socket = 1;
}

static uint64_t setting_u64(const char *name, uint64_t min, uint64_t max)
{
    char err[256];
    uint64_t v;
    if (psp_setting_u64(name, min, max, &v, err, sizeof err))
        psp_die("%s", err);
    return v;
}

/* Format the image in a memfd, open the link, create the area. Exits on failure. */
static void setup_nic(const char *nodes_file)
{
    char err[512] = "";
    uint16_t port = (uint16_t)setting_u64("PSP_UDP_PORT", 1, 65534);
    if (nodes_file && *nodes_file) {
        if (psp_nodes_load(nodes_file, port, &S.nodes, err, sizeof err))
            psp_die("nodes file %s: %s", nodes_file, err);
    } else {
        psp_nodes_single(&S.nodes, port);
    }
    if (S.node >= S.nodes.count || !S.nodes.node[S.node].present)
        psp_die("node %u is not in the nodes file %s: give --node ID of a listed node", S.node,
                nodes_file && *nodes_file ? nodes_file : "(single node 0 on 127.0.0.1)");

    struct mcp_link_params lp;
    memset(&lp, 0, sizeof lp);
    lp.node = S.node;
    lp.nodes = &S.nodes;
    /* Empty: the link takes the nodes file's interface, else the one with this node's MAC. */
    const char *ifname = psp_setting_str("PSP_LINK_IF");
    lp.ifname = *ifname ? ifname : NULL;
    lp.fd = -1;
    lp.ring_fd = -1;
    if (mcp_fault_from_settings(&lp.fault, err, sizeof err))
        psp_die("%s", err);
    S.fault = lp.fault;
    S.link_kind = psp_setting_str("PSP_LINK");
    S.link = mcp_link_open(S.link_kind, &lp, err, sizeof err);
    if (!S.link)
        psp_die("cannot open the %s link of node %u: %s", S.link_kind, S.node, err);

    struct mcp_config cfg;
    if (mcp_config_from_settings(&cfg, S.node, S.link->max_frame, err, sizeof err))
        psp_die("%s", err);
    size_t size = mcp_image_size(&cfg);
    if (!size)
        psp_die("the firmware configuration is invalid (see psinfo -c)");
    size = (size + 4095) / 4096 * 4096;
    S.img_fd = memfd_create("psport-nic", MFD_CLOEXEC);
    if (S.img_fd < 0 || ftruncate(S.img_fd, (off_t)size) != 0)
        psp_die("cannot create the NIC image (%zu bytes): %s", size, strerror(errno));
    S.img = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, S.img_fd, 0);
    if (S.img == MAP_FAILED)
        psp_die("cannot map the NIC image: %s", strerror(errno));
    S.img_size = size;
    int rc = mcp_image_format(S.img, size, &cfg);
    if (rc)
        psp_die("cannot format the NIC image: %s", strerror(-rc));
    mcp_nic_init(&S.nic, S.img, S.link);

    struct pulc_area_cfg acfg = {
        (uint32_t)setting_u64("PSP_AREA_PORTS", 2, 65536),
        (uint32_t)setting_u64("PSP_AREA_MESSAGES", 1, 1u << 24),
        (uint32_t)setting_u64("PSP_AREA_FRAGMENTS", 1, 1u << 24),
        mcp_max_payload(S.img),
        (uint32_t)setting_u64("PSP_AREA_RINGS", 0, 4096),
        (uint32_t)setting_u64("PSP_AREA_RING_BYTES", 1024, 1u << 24),
    };
    S.area = pulc_area_create(&acfg, &S.nodes, S.link_kind, lp.ifname, &lp.fault, &S.area_fd, err,
                              sizeof err);
    if (!S.area)
        psp_die("%s", err);
    /* psid's own context: error notices for messages to ports that are not open, sent when
     * the NIC thread drains the host queue. */
    int ctx = mcp_ctx_attach(S.img, (uint32_t)getpid());
    if (ctx < 0)
        psp_die("cannot take a NIC context for psid: %s", strerror(-ctx));
    S.area->psid_ctx = ctx;
    S.node_view.area = S.area;
    S.node_view.img = S.img;
    S.node_view.ctx = ctx;
    S.node_view.node_id = S.node;
    S.node_view.keep_unknown = 1;
    S.node_view.pid = (int32_t)getpid();
}

static void daemonize(void)
{
    pid_t p = fork();
    if (p < 0)
        psp_die("cannot fork: %s", strerror(errno));
    if (p > 0)
        _exit(0);
    setsid();
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
        if (nul > 2)
            close(nul);
    }
    if (chdir("/") != 0)
        PSP_WARN("cannot change to /: %s", strerror(errno));
}

void psid_nic_peer_restarted(uint16_t node)
{
    if (pulc_nic_lock(S.area, S.img) != 0) {
        PSP_ERROR("the NIC lock is not recoverable: the connection to node %u stays",
                  (unsigned)node);
        return;
    }
    int rc = mcp_peer_restarted(&S.nic, node, mcp_now_ns());
    pulc_nic_unlock(S.area);
    if (rc > 0)
        PSP_INFO("node %u restarted: the NIC's connection to it is dropped (what was sent to "
                 "its old incarnation fails back)",
                 (unsigned)node);
}

/* ---- the NIC thread ---- */

/* Whether the NIC thread must run now rather than nap `kind` (PULC_NAP_*): a client sleeps
 * until something arrives, or (a quiet nap) frames wait to be sent. */
static int nic_wanted(uint32_t kind)
{
    return pulc_net_waiters(S.area) || (kind == PULC_NAP_QUIET && mcp_tx_backlog(S.img));
}

/* Nap ns, or until a client's nudge ends the nap (pulc_nic_nudge; kind: PULC_NAP_QUIET or
 * PULC_NAP_IDLE, which only a client going to sleep ends). */
static void nic_nap(uint64_t ns, uint32_t kind)
{
    struct pulc_area *a = S.area;
    uint32_t seen = __atomic_load_n(&a->nic_nudge, __ATOMIC_SEQ_CST);
    __atomic_store_n(&a->nic_napping, kind, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* the announcement before the look at reasons */
    if (!nic_wanted(kind)) {                 /* else a reason came before the announcement */
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        syscall(SYS_futex, &a->nic_nudge, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    __atomic_store_n(&a->nic_napping, PULC_NAP_NONE, __ATOMIC_SEQ_CST);
}

/*
 * The NIC thread runs the firmware when no client does.  While clients poll it naps: each
 * wake-up pre-empts a polling rank when the ranks fill the cores (measured: osu_latency
 * between two nodes 9.55 us with a wake-up every 500 us, 8.23 us without).  It runs after
 * PSP_NIC_IDLE_US without a pass when frames wait to be sent (a send completes when it is
 * posted, and its client may have gone off to compute), after PSP_NIC_QUIET_US otherwise
 * (ACKs owed, frames for a computing client), and at once while a client sleeps until
 * something arrives.  Clients end a quiet nap when they leave frames behind a full window, and
 * any nap when they go to sleep (pulc_nic_nudge); frames a client posts during a quiet nap
 * without filling the window, and does not send at the post (PSP_TX_AT_POST), wait for its end
 * (waking psid at every post would cost a ping-pong a futex wake per message).  While it is the
 * executor for sleepers or for frames waiting to go out, it waits for the link's next frame (at
 * most a tick: timers).  A client inside a progress turn (pulc_area_turn) polls, however long
 * the turn: else a turn that moved much data handed the NIC to this thread, which then kept it
 * (no client could pass while it ran) and took the cores the ranks needed.
 */
static void *nic_thread(void *arg)
{
    (void)arg;
    /* arrivals show on the link's socket, or on its receive ring's */
    struct pollfd link_pf[2] = {{mcp_link_fd(S.link), POLLIN, 0},
                                {mcp_link_ring_fd(S.link), POLLIN, 0}};
    nfds_t link_npf = link_pf[1].fd >= 0 ? 2 : 1;
    uint64_t own = 0; /* last_poll_ns as our own last pass left it */
    int stuck = 0;    /* the link showed a frame that the pass after it did not take */
    while (!__atomic_load_n(&S.stop_nic, __ATOMIC_RELAXED)) {
        uint64_t now = mcp_now_ns();
        uint64_t last = __atomic_load_n(&S.area->last_poll_ns, __ATOMIC_RELAXED);
        int waiters = pulc_net_waiters(S.area);
        if (!waiters && pulc_area_turn_running(S.area, now, S.quiet_ns))
            last = now; /* a client inside its turn polls now (and will pass again) */
        int backlog = mcp_tx_backlog(S.img);
        uint64_t limit = backlog ? S.idle_ns : S.quiet_ns;
        if (!waiters && !(backlog && last == own) && now - last < limit) {
            uint64_t nap = limit - (now - last);
            if (nap < NIC_TICK_NS)
                nap = NIC_TICK_NS;
            nic_nap(nap, backlog ? PULC_NAP_IDLE : PULC_NAP_QUIET);
            continue;
        }
        int work = pulc_nic_pass(S.area, &S.nic);
        if (work < 0) {
            PSP_ERROR("the NIC lock is not recoverable: the NIC thread stops");
            break;
        }
        own = __atomic_load_n(&S.area->last_poll_ns, __ATOMIC_RELAXED);
        /* Everyone computes or sleeps: move what arrived into the ports (waking their
         * owners), and take the errors of our own notices. */
        struct mcp_rx_desc d;
        if (mcp_recv_peek(S.img, &d)) {
            int taken = pulc_drain(&S.node_view, UINT32_MAX);
            if (taken < 0) {
                PSP_ERROR("the message area lock is not recoverable: the NIC thread stops");
                break;
            }
            if (taken > 0) /* (a frame held for its owner, or no room in the area: no work) */
                work = 1;
        }
        struct mcp_send_error e;
        while (mcp_errq_pop(S.img, (unsigned)S.node_view.ctx, &e))
            ;
        if (!pulc_net_waiters(S.area) && !mcp_tx_backlog(S.img)) {
            if (S.quiet_ns < NIC_TICK_NS) /* PSP_NIC_QUIET_US below a tick: a tick at least */
                nic_nap(NIC_TICK_NS, PULC_NAP_QUIET);
            continue; /* nothing calls for us: the next turn naps */
        }
        if (work > 0) {
            stuck = 0;
            continue; /* more may be right behind */
        }
        if (link_pf[0].fd >= 0 && !stuck) {
            struct timespec tick = {0, (long)NIC_TICK_NS};
            stuck = ppoll(link_pf, link_npf, &tick, NULL) > 0;
        } else {
            stuck = 0;
            struct timespec tick = {0, (long)NIC_TICK_NS};
            nanosleep(&tick, NULL);
        }
    }
    return NULL;
}

/* ---- clients ---- */

static unsigned attached_clients(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < S.nconn; i++)
        n += S.conn[i].ctx >= 0;
    return n;
}

/* Contexts held by clients (psid's own, for its error notices, is not counted). */
static unsigned contexts_used(void)
{
    unsigned n = 0;
    for (unsigned c = 0; c < S.img->cfg.contexts; c++)
        n += (int)c != S.node_view.ctx && MCP_LOAD_ACQ(&mcp_ctx(S.img, c)->state) != MCP_CTX_FREE;
    return n;
}

static int reply(struct client *c, uint32_t op, int32_t status, const void *data, uint32_t len,
                 const int *fds, int nfds)
{
    struct psk_msg m = {PSK_MSG_MAGIC, PSK_ABI_VERSION, op, status, len, 0};
    struct iovec iov[2] = {{&m, sizeof m}, {(void *)data, len}};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cbuf;
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = len ? 2 : 1;
    if (nfds > 0) {
        memset(&cbuf, 0, sizeof cbuf);
        mh.msg_control = cbuf.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
        ch->cmsg_level = SOL_SOCKET;
        ch->cmsg_type = SCM_RIGHTS;
        ch->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(ch), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t want = (ssize_t)(sizeof m + len);
    ssize_t r = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    return r == want ? 0 : -1;
}

static int reply_error(struct client *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reply_error(struct client *c, int err, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    PSP_WARN("refused pid %ld (uid %ld): %s", (long)c->pid, (long)c->uid, text);
    return reply(c, PSK_OP_ERROR, -err, text, (uint32_t)strlen(text) + 1, NULL, 0);
}

static const char *user_name(uid_t uid, char *buf, size_t n)
{
    struct passwd *pw = getpwuid(uid);
    snprintf(buf, n, "%s", pw ? pw->pw_name : "?");
    return buf;
}

static int user_listed(uid_t uid)
{
    if (uid == 0 || !*S.users)
        return 1;
    char list[1024];
    snprintf(list, sizeof list, "%s", S.users);
    char *save = NULL;
    for (char *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        char *end;
        unsigned long v = strtoul(t, &end, 10);
        if (*t && !*end) {
            if ((uid_t)v == uid)
                return 1;
            continue;
        }
        struct passwd *pw = getpwnam(t);
        if (pw && pw->pw_uid == uid)
            return 1;
    }
    return 0;
}

static void fill_info(struct psk_info *in)
{
    memset(in, 0, sizeof *in);
    in->abi_version = PSK_ABI_VERSION;
    in->mcp_abi_version = MCP_ABI_VERSION;
    in->provider = PSK_PROVIDER_PSID;
    in->flags = PSK_INFO_HOST_POLL | (mcp_link_has_ring(S.link) ? PSK_INFO_RX_RING : 0u) |
                (mcp_link_udp_eth(S.link) ? PSK_INFO_UDP_ETH : 0u);
    in->image_size = S.img_size;
    in->area_size = S.area->size;
    in->node_id = S.node;
    in->max_nodes = S.img->cfg.max_nodes;
    in->contexts = S.img->cfg.contexts;
    in->contexts_used = (psk_u16)contexts_used();
    in->slot_size = mcp_max_payload(S.img);
    in->max_clients = (psk_u32)S.max_clients;
    snprintf(in->link_kind, sizeof in->link_kind, "%s", S.link_kind);
    in->window = S.img->cfg.window;
    in->send_slots = S.img->cfg.send_slots;
    in->recv_slots = S.img->cfg.recv_slots;
    in->hostq_slots = S.img->cfg.hostq_slots;
}

int psid_user_allowed(uid_t uid, char *msg, size_t n)
{
    if (user_listed(uid))
        return 1;
    char nb[64];
    if (msg)
        snprintf(msg, n,
                 "user %s (uid %ld) may not use psport on node %u: psid allows only '%s' "
                 "(PSP_PSID_USERS); ask the administrator to add the user",
                 user_name(uid, nb, sizeof nb), (long)uid, S.node, S.users);
    return 0;
}

static int check_user(struct client *c)
{
    char msg[512];
    if (psid_user_allowed(c->uid, msg, sizeof msg))
        return 0;
    return reply_error(c, EACCES, "%s", msg) < 0 ? -1 : 1;
}

static int do_attach(struct client *c, const struct psk_msg *m, const void *payload)
{
    struct psk_attach at;
    if (m->len < sizeof at)
        return reply_error(c, EINVAL, "ATTACH needs struct psk_attach (%zu bytes), got %u",
                           sizeof at, m->len);
    memcpy(&at, payload, sizeof at);
    if (at.abi_version != PSK_ABI_VERSION || m->abi_version != PSK_ABI_VERSION)
        return reply_error(c, EPROTO,
                           "client ABI version %u, psid speaks %u: rebuild the client against "
                           "this psport",
                           at.abi_version != PSK_ABI_VERSION ? at.abi_version : m->abi_version,
                           PSK_ABI_VERSION);
    int u = check_user(c);
    if (u)
        return u < 0 ? -1 : 0;
    if (c->ctx >= 0)
        return reply_error(c, EBUSY, "this connection is already attached (context %d)", c->ctx);
    if (attached_clients() >= S.max_clients)
        return reply_error(c, EUSERS,
                           "psid on node %u serves at most %llu client processes "
                           "(PSP_PSID_MAX_CLIENTS) and all are in use: wait or raise the limit",
                           S.node, (unsigned long long)S.max_clients);
    int ctx = mcp_ctx_attach(S.img, (uint32_t)c->pid);
    if (ctx < 0)
        return reply_error(c, EBUSY,
                           "all %u NIC contexts of node %u are in use: start psid with a larger "
                           "PSP_CONTEXTS",
                           S.img->cfg.contexts, S.node);
    c->ctx = ctx;
    c->generation = mcp_ctx(S.img, (unsigned)ctx)->generation;
    at.context = ctx;
    at.generation = c->generation;
    /* the udp link's receive ring, when it has one, goes fourth */
    int fds[4] = {S.img_fd, mcp_link_fd(S.link), S.area_fd, mcp_link_ring_fd(S.link)};
    PSP_INFO("pid %ld (uid %ld) attached: context %d generation %u", (long)c->pid, (long)c->uid,
             ctx, c->generation);
    return reply(c, PSK_OP_ATTACH, 0, &at, sizeof at, fds, fds[3] >= 0 ? 4 : 3);
}

static void detach_client(struct client *c, const char *why)
{
    if (c->ctx < 0)
        return;
    struct pulc_abort ab[64];
    unsigned nab = 0;
    unsigned ports = pulc_area_reclaim(S.area, (int32_t)c->pid, ab, 64, &nab);
    if (ports)
        PSP_INFO("pid %ld: %u port(s) closed and their messages freed", (long)c->pid, ports);
    /* Receivers of messages it left half sent drop them (else they would wait forever).
     * psid's context also sends the NIC thread's error notices, under the area lock. */
    for (unsigned k = 0; k < nab; k++) {
        int rc = -EAGAIN;
        for (int tries = 0; tries < 1000 && rc == -EAGAIN; tries++) {
            if (pulc_area_lock(S.area) == 0) {
                rc = pulc_send_abort(&S.node_view, ab[k].dest, ab[k].src_port, ab[k].msg_id);
                pulc_area_unlock(S.area);
            }
            if (rc == -EAGAIN)
                pulc_nic_pass(S.area, &S.nic);
        }
        if (rc)
            PSP_WARN("pid %ld: cannot tell port %u:%u that message %u is aborted", (long)c->pid,
                     ab[k].dest >> 16, ab[k].dest & 0xffffu, ab[k].msg_id);
    }
    /* a client killed asleep leaves its count: else the NIC thread would serve it forever */
    if ((unsigned)c->ctx < PULC_AREA_CTXS)
        __atomic_store_n(&S.area->net_waiters[c->ctx], 0u, __ATOMIC_SEQ_CST);
    pulc_area_turn(S.area, c->ctx, 0); /* nor leave it the NIC: killed inside a turn */
    mcp_ctx_detach(S.img, (unsigned)c->ctx);
    psp_log(strcmp(why, "client detached") ? PSP_LOG_WARN : PSP_LOG_INFO,
            "pid %ld: context %d detached (%s)", (long)c->pid, c->ctx, why);
    c->ctx = -1;
}

static int do_map(struct client *c)
{
    int u = check_user(c);
    if (u)
        return u < 0 ? -1 : 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", S.img_fd);
    int ro = open(path, O_RDONLY | O_CLOEXEC);
    if (ro < 0)
        return reply_error(c, errno, "cannot reopen the NIC image read-only: %s", strerror(errno));
    snprintf(path, sizeof path, "/proc/self/fd/%d", S.area_fd);
    int aro = open(path, O_RDONLY | O_CLOEXEC);
    if (aro < 0) {
        int e = errno;
        close(ro);
        return reply_error(c, e, "cannot reopen the message area read-only: %s", strerror(e));
    }
    struct psk_info in;
    fill_info(&in);
    int fds[2] = {ro, aro};
    int rc = reply(c, PSK_OP_MAP, 0, &in, sizeof in, fds, 2);
    close(ro);
    close(aro);
    return rc;
}

static int serve_device(struct client *c, const struct psk_msg *mp, const char *payload);

/* Serve one whole request (m, then its payload; handlers copy fields out of it, so it needs
 * no alignment). Returns -1 to close the connection. */
static int serve_one(struct client *c, const struct psk_msg *m, const char *payload)
{
    if (psid_cluster_is_op(m->op))
        return psid_cluster_request(c, m->op, payload, m->len);
    if (c->spawner)
        return reply_error(c, EINVAL, "a spawner connection serves cluster operations only");
    return serve_device(c, m, payload);
}

#define REQ_MAX      (PSID_DMSG_MAX - 4096) /* a request's payload (it may go on a daemon link) */
#define IN_TOTAL_MAX (256u << 20)           /* all clients' unfinished requests together */
#define IN_KEEP      (64u << 10) /* a larger buffer is freed once its requests are served */

/*
 * Take what the client sent, without blocking, and serve each whole request in it: a client
 * that stops in the middle of a request (stopped, or sending slowly) must not stall psid,
 * whose other clients and daemon link go on.  Returns -1 when the connection is to be closed.
 */
static int serve(struct client *c)
{
    const size_t most = sizeof(struct psk_msg) + REQ_MAX;
    if (c->in_cap - c->in_len < 4096 && c->in_cap < most) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
        if (cap > most)
            cap = most;
        if (S.in_total + (cap - c->in_cap) > IN_TOTAL_MAX) { /* many clients sending slowly */
            PSP_WARN("pid %ld: closing it: the unfinished requests of all clients hold %zu bytes",
                     (long)c->pid, S.in_total);
            return -1;
        }
        char *nb = realloc(c->in, cap);
        if (!nb)
            return -1;
        S.in_total += cap - c->in_cap;
        c->in = nb;
        c->in_cap = cap;
    }
    ssize_t r;
    do
        r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (r <= 0)
        return -1;
    c->in_len += (size_t)r;
    size_t off = 0;
    int rc = 0;
    while (rc >= 0 && c->in_len - off >= sizeof(struct psk_msg)) {
        struct psk_msg m;
        memcpy(&m, c->in + off, sizeof m);
        if (m.magic != PSK_MSG_MAGIC || m.len > REQ_MAX) {
            PSP_WARN("pid %ld sent a malformed request (magic 0x%08x, %u bytes): closing",
                     (long)c->pid, m.magic, m.len);
            return -1;
        }
        if (c->in_len - off < sizeof m + m.len)
            break; /* the rest comes later */
        rc = serve_one(c, &m, c->in + off + sizeof m);
        off += sizeof m + m.len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    if (!c->in_len && c->in_cap > IN_KEEP) { /* one big request (a spawn): not kept for ever */
        free(c->in);
        S.in_total -= c->in_cap;
        c->in = NULL;
        c->in_cap = 0;
    }
    return rc < 0 ? -1 : 0;
}

/* The device ABI's operations (kmod/psport_abi.h). */
static int serve_device(struct client *c, const struct psk_msg *mp, const char *payload)
{
    struct psk_msg m = *mp;
    switch (m.op) {
    case PSK_OP_INFO: {
        struct psk_info in;
        fill_info(&in);
        return reply(c, PSK_OP_INFO, 0, &in, sizeof in, NULL, 0);
    }
    case PSK_OP_ATTACH:
        return do_attach(c, &m, payload);
    case PSK_OP_DETACH: {
        struct psk_attach at;
        memset(&at, 0, sizeof at);
        memcpy(&at, payload, m.len < sizeof at ? m.len : sizeof at);
        if (m.len < sizeof at || c->ctx < 0 || at.context != c->ctx)
            return reply_error(c, EINVAL, "DETACH of a context this connection does not hold");
        detach_client(c, "client detached");
        return reply(c, PSK_OP_DETACH, 0, NULL, 0, NULL, 0);
    }
    case PSK_OP_MAP:
        return do_map(c);
    default:
        return reply_error(c, EOPNOTSUPP, "unknown operation %u (psid speaks ABI version %u)", m.op,
                           PSK_ABI_VERSION);
    }
}

static void accept_clients(void)
{
    for (;;) {
        int fd = accept4(S.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (S.nconn >= MAX_CONNS || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
            PSP_WARN("connection refused: %s",
                     S.nconn >= MAX_CONNS ? "too many connections" : strerror(errno));
            close(fd);
            continue;
        }
        struct timeval tv = {1, 0}; /* replies of the device operations (reads: serve()) */
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (++S.next_key == 0)
            ++S.next_key;
        S.conn[S.nconn++] = (struct client){
            .fd = fd, .pid = cr.pid, .uid = cr.uid, .gid = cr.gid, .ctx = -1, .key = S.next_key};
        PSP_DEBUG_LOG("connection from pid %ld (uid %ld)", (long)cr.pid, (long)cr.uid);
    }
}

static void drop_client(unsigned i)
{
    struct client *c = &S.conn[i];
    detach_client(c, "connection closed: the client exited or was killed; context reclaimed");
    psid_cluster_client_gone(c);
    free(c->out);
    free(c->in);
    S.in_total -= c->in_cap;
    close(c->fd);
    S.conn[i] = S.conn[--S.nconn];
}

/*
 * Raise psid's soft limit on descriptors to the hard one (at most 1M): three a task (its pipes)
 * plus a client's socket each, where the usual soft limit of 1024 held a node to about 300
 * tasks.  Tasks get the limit psid was started with back (psid_task_nofile).
 */
static void raise_nofile(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return;
    psid_task_nofile(&lim);
    rlim_t want =
        lim.rlim_max == RLIM_INFINITY || lim.rlim_max > (1u << 20) ? (1u << 20) : lim.rlim_max;
    if (lim.rlim_cur >= want)
        return;
    struct rlimit raised = {want, lim.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
        PSP_WARN("cannot raise the descriptor limit from %llu to %llu: %s; a node takes fewer "
                 "tasks",
                 (unsigned long long)lim.rlim_cur, (unsigned long long)want, strerror(errno));
}

static void serve_loop(int sig_fd)
{
    /* Room for every client and every task's pipes, grown with them: with a fixed number,
     * the tasks beyond it were never polled, and their output stalled until others ended. */
    struct pollfd *pf = NULL;
    size_t cap = 0;
    for (;;) {
        int timeout = psid_cluster_run();
        size_t need = 3 + (size_t)S.nconn + psid_task_pollfds_max();
        if (need > cap) {
            struct pollfd *grown = realloc(pf, (need + 64) * sizeof *pf);
            if (!grown)
                psp_die("out of memory for %zu poll descriptors", need);
            pf = grown;
            cap = need + 64;
        }
        pf[0] = (struct pollfd){sig_fd, POLLIN, 0};
        pf[1] = (struct pollfd){S.listen_fd, POLLIN, 0};
        pf[2] = (struct pollfd){psid_dlink_fd(psid_g.dlink), POLLIN, 0};
        unsigned n = S.nconn;
        for (unsigned i = 0; i < n; i++)
            pf[3 + i] = (struct pollfd){S.conn[i].fd,
                                        (short)(POLLIN | (S.conn[i].out_len ? POLLOUT : 0)), 0};
        unsigned nt = psid_task_pollfds(pf + 3 + n, (unsigned)(cap - 3 - n));
        int r = poll(pf, 3 + n + nt, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            psp_die("poll: %s", strerror(errno));
        if (pf[0].revents) {
            struct signalfd_siginfo si;
            while (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                PSP_INFO("signal %u: shutting down", si.ssi_signo);
                free(pf);
                return;
            }
        }
        /* Task output before the exits the reaping may send, so the last lines go first. */
        psid_task_handle(pf + 3 + n, nt);
        psid_task_reap();
        /* Clients from the back, so dropping one (moving the last into its place) is safe. */
        for (unsigned i = n; i-- > 0;) {
            short ev = pf[3 + i].revents;
            if (!ev)
                continue;
            struct client *c = &S.conn[i];
            if ((ev & POLLOUT) && client_flush(c) < 0) {
                drop_client(i);
                continue;
            }
            if ((ev & (POLLIN | POLLHUP | POLLERR)) && serve(c) < 0)
                drop_client(i);
        }
        if (pf[1].revents)
            accept_clients();
    }
}

int main(int argc, char **argv)
{
    psp_log_init(PROG);
    static const struct option lo[] = {{"foreground", no_argument, NULL, 'f'},
                                       {"pidfile", required_argument, NULL, 'P'},
                                       {"node", required_argument, NULL, 'n'},
                                       {"nodes", required_argument, NULL, 'N'},
                                       {"socket", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int foreground = 0;
    const char *nodes_file = psp_setting_str("PSP_NODES_FILE");
    const char *node_text = NULL;
    S.pidfile = "/run/psport/psid.pid";
    S.sock_path = psp_setting_str("PSP_PSID_SOCKET");
    int o;
    while ((o = getopt_long(argc, argv, "fP:n:N:s:h", lo, NULL)) != -1) {
        switch (o) {
        case 'f':
            foreground = 1;
            break;
        case 'P':
            S.pidfile = optarg;
            break;
        case 'n':
            node_text = optarg;
            break;
        case 'N':
            nodes_file = optarg;
            break;
        case 's':
            S.sock_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage_error("%s", "bad option");
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    uint64_t v;
    if (node_text) {
        if (psp_parse_u64(node_text, 0, PSP_NODES_MAX - 1, &v))
            usage_error("--node wants a node id 0..1023, not '%s'", node_text);
        S.node = (uint16_t)v;
    } else {
        S.node = (uint16_t)setting_u64("PSP_NODE_ID", 0, PSP_NODES_MAX - 1);
    }
    S.max_clients = setting_u64("PSP_PSID_MAX_CLIENTS", 1, MAX_CONNS);
    S.idle_ns = setting_u64("PSP_NIC_IDLE_US", 0, 10000000) * 1000;
    S.quiet_ns = setting_u64("PSP_NIC_QUIET_US", 0, 10000000) * 1000;
    if (S.quiet_ns < S.idle_ns)
        S.quiet_ns = S.idle_ns;
    S.users = psp_setting_str("PSP_PSID_USERS");

    raise_nofile();
    take_pidfile();
    atexit(remove_files);
    psid_cores_init();
    setup_nic(nodes_file);
    psid_g.node = S.node;
    psid_g.nodes = &S.nodes;
    psid_g.sock_path = S.sock_path;
    psid_cluster_start(&S.fault);
    open_socket();
    if (!foreground)
        daemonize();
    write_pidfile();

    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGHUP);
    sigaddset(&ss, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &ss, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sig_fd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sig_fd < 0)
        psp_die("signalfd: %s", strerror(errno));

    pthread_t nt;
    int rc = pthread_create(&nt, NULL, nic_thread, NULL);
    if (rc)
        psp_die("cannot start the NIC thread: %s", strerror(rc));
    PSP_INFO("node %u ready: %s link%s%s, %u contexts, %u-byte slots, window %u, %u send slots "
             "per context, %u receive slots, socket %s, pid %ld",
             S.node, S.link_kind, mcp_link_has_ring(S.link) ? " (read from a receive ring)" : "",
             mcp_link_udp_eth(S.link) ? " (small frames as Ethernet frames)" : "",
             S.img->cfg.contexts, mcp_max_payload(S.img), S.img->cfg.window, S.img->cfg.send_slots,
             S.img->cfg.recv_slots, S.sock_path, (long)getpid());

    serve_loop(sig_fd);

    psid_task_kill_all();
    __atomic_store_n(&S.stop_nic, 1, __ATOMIC_RELAXED);
    pulc_nic_nudge(S.area, 1); /* out of a long nap */
    pthread_join(nt, NULL);
    while (S.nconn)
        drop_client(S.nconn - 1);
    close(S.listen_fd);
    remove_files();
    S.own_socket = S.own_pidfile = 0;
    close(S.pid_fd);
    lanai_close(S.link);
    pulc_area_unmap(S.area);
    munmap(S.img, S.img_size);
    PSP_INFO("stopped");
    return 0;
}
