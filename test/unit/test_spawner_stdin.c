/*
 * test_spawner_stdin.c — libpulc's stdin flow control against the psid it finds: a psid that
 * reports stdin taken (PSPC_FEATURE_STDIN_TAKEN in PSPC_OP_SPAWNER's reply) has
 * PSP_SpawnerStdinQueued() count bytes in flight and its PSPC_OP_EV_STDIN reports lower it; an
 * older psid (an empty reply) never reports, so nothing counts as queued and a feeder is not
 * held back for ever.  Also a posted signal (PSP_SpawnerSignalPost): it does not wait for its
 * answer, and that answer, coming during a later request's wait, is not taken for that
 * request's.  The psid here is a thread speaking the socket protocol on a UNIX socket
 * of the test's own (the real psid is covered by test/integration/mpirun).
 */
#include "harness.h"
#include "psport_abi.h"
#include "pulc.h"
#include "spawn_proto.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define TID 0x500000123ull /* node 5, pid 0x123 */

/* The thread playing psid: one spawner connection. */
struct fake_psid {
    int listen_fd;
    int features_reply; /* 1: reply with struct pspc_spawner_ok, 0: empty, as older psids */
    uint64_t report;    /* stdin bytes to report taken once this many have arrived */
    uint64_t stdin_got; /* STDIN payload bytes read (set when the thread ends) */
    /* SIGNAL requests: the first is answered only when the second came, just before it */
    unsigned signals;
    struct pspc_task_req sig_req[2];
    pthread_t thread;
};

static int read_all(int fd, void *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int send_all(int fd, uint32_t op, const void *payload, uint32_t len)
{
    struct psk_msg h = {PSK_MSG_MAGIC, PSK_ABI_VERSION, op, 0, len, 0};
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h)
        return -1;
    return len && write(fd, payload, len) != (ssize_t)len ? -1 : 0;
}

/* Accepts the spawner, answers PSPC_OP_SPAWNER, reads messages until the spawner closes. */
static void *fake_psid_run(void *arg)
{
    struct fake_psid *f = arg;
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    static char buf[2u << 20];
    struct psk_msg h;
    int reported = 0;
    while (read_all(fd, &h, sizeof h) == 0 && h.len <= sizeof buf &&
           read_all(fd, buf, h.len) == 0) {
        if (h.op == PSPC_OP_SPAWNER) {
            struct pspc_spawner_ok ok = {PSPC_FEATURE_STDIN_TAKEN, 0};
            send_all(fd, PSPC_OP_SPAWNER, &ok, f->features_reply ? sizeof ok : 0);
        } else if (h.op == PSPC_OP_SIGNAL && h.len == sizeof(struct pspc_task_req)) {
            if (f->signals < 2)
                memcpy(&f->sig_req[f->signals], buf, sizeof f->sig_req[0]);
            if (++f->signals == 2) {
                struct pspc_done first = {f->sig_req[0].req, 0, 0};
                struct pspc_done second = {f->sig_req[1].req, -ESRCH, 0};
                send_all(fd, PSPC_OP_DONE, &first, sizeof first);
                send_all(fd, PSPC_OP_DONE, &second, sizeof second);
            }
        } else if (h.op == PSPC_OP_STDIN && h.len >= sizeof(struct pspc_stdin)) {
            f->stdin_got += h.len - sizeof(struct pspc_stdin);
            if (f->report && !reported && f->stdin_got >= f->report) {
                struct pspc_stdin_taken t = {TID, f->report};
                send_all(fd, PSPC_OP_EV_STDIN, &t, sizeof t);
                reported = 1;
            }
        }
    }
    close(fd);
    return NULL;
}

/* Starts the fake psid on a fresh socket and points PSP_PSID_SOCKET at it. */
static void fake_psid_start(struct fake_psid *f, int features_reply, uint64_t report)
{
    static char path[108];
    snprintf(path, sizeof path, "/tmp/psport-test-spawner-%d.sock", (int)getpid());
    unlink(path);
    *f = (struct fake_psid){.features_reply = features_reply, .report = report};
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, path, strlen(path) + 1);
    REQUIRE(f->listen_fd >= 0 && bind(f->listen_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                listen(f->listen_fd, 1) == 0,
            "socket %s: %s", path, strerror(errno));
    setenv("PSP_PSID_SOCKET", path, 1);
    /* no partition: PSP_SpawnerOpen would resolve it against a nodes file */
    unsetenv("PSP_PARTITION");
    unsetenv("PSP_HOSTFILE");
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("PBS_NODEFILE");
    REQUIRE(pthread_create(&f->thread, NULL, fake_psid_run, f) == 0, "pthread_create");
}

static void fake_psid_stop(struct fake_psid *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
    unlink(getenv("PSP_PSID_SOCKET"));
}

/* Starts the fake psid and opens a spawner on it: the spawner, or NULL (the failure reported). */
static PSP_Spawner_t *open_on_fake_psid(struct fake_psid *f, int features_reply, uint64_t report)
{
    fake_psid_start(f, features_reply, report);
    char err[256] = "";
    PSP_Spawner_t *sp = PSP_SpawnerOpen(err, sizeof err);
    CHECK(sp != NULL, "PSP_SpawnerOpen: %s", err);
    return sp;
}

/* 3 MiB of stdin for TID, in 64 KiB pieces. */
static void feed(PSP_Spawner_t *sp)
{
    static char piece[64 << 10];
    memset(piece, 'x', sizeof piece);
    for (int i = 0; i < 48; i++)
        CHECK_OK(PSP_SpawnerStdin(sp, TID, piece, sizeof piece, i == 47));
}

TEST(reporting_psid_counts_stdin_in_flight)
{
    struct fake_psid f;
    PSP_Spawner_t *sp = open_on_fake_psid(&f, 1, 2u << 20);
    REQUIRE(sp != NULL, "a spawner on the fake psid");
    CHECK_EQ_U64(PSP_SpawnerStdinQueued(sp), 0);
    feed(sp);
    CHECK_EQ_U64(PSP_SpawnerStdinQueued(sp), 3u << 20);
    /* The report of 2 MiB taken lowers the count; it is libpulc's, not an event of the caller. */
    PSP_Event_t ev;
    for (int i = 0; i < 50 && PSP_SpawnerStdinQueued(sp) == (3u << 20); i++)
        CHECK_EQ_I64(PSP_SpawnerEvent(sp, &ev, 100), 0);
    CHECK_EQ_U64(PSP_SpawnerStdinQueued(sp), 1u << 20);
    PSP_SpawnerClose(sp);
    fake_psid_stop(&f);
    CHECK_EQ_U64(f.stdin_got, 3u << 20);
}

TEST(older_psid_without_reports_holds_nothing_back)
{
    struct fake_psid f;
    PSP_Spawner_t *sp = open_on_fake_psid(&f, 0, 0);
    REQUIRE(sp != NULL, "a spawner on the fake psid");
    feed(sp);
    /* No report will ever come: a feeder that waited for one would stop after the window. */
    CHECK_EQ_U64(PSP_SpawnerStdinQueued(sp), 0);
    PSP_SpawnerClose(sp);
    fake_psid_stop(&f);
    CHECK_EQ_U64(f.stdin_got, 3u << 20);
}

TEST(posted_signal_waits_for_nothing_and_its_answer_is_not_taken_for_another)
{
    struct fake_psid f;
    PSP_Spawner_t *sp = open_on_fake_psid(&f, 1, 0);
    REQUIRE(sp != NULL, "a spawner on the fake psid");
    /* the fake psid answers it only after the next request: a post that waited would hang */
    CHECK_EQ_I64(PSP_SpawnerSignalPost(sp, TID, 9), 0);
    /* its answer (0) comes first; this request's own (-ESRCH) must be the one returned */
    CHECK_EQ_I64(PSP_SpawnerSignal(sp, TID, 15), -ESRCH);
    PSP_SpawnerClose(sp);
    fake_psid_stop(&f);
    CHECK_EQ_U64(f.signals, 2);
    CHECK_EQ_U64(f.sig_req[0].tid, TID);
    CHECK_EQ_I64(f.sig_req[0].sig, 9);
    CHECK_EQ_I64(f.sig_req[1].sig, 15);
    CHECK(f.sig_req[0].req != f.sig_req[1].req, "two requests with one id");
}

TEST_MAIN()
