/*
 * pmi_probe.c — a rank speaking PMI-1 over PMI_PORT as MPICH's simple PMI client does, to test
 * mpirun without MPI: it announces itself (initack), puts a business card, meets the others at
 * a barrier, reads every other rank's card, checks PMI_process_mapping and a missing key, and
 * then does what argv[1] says: "ok" (finalize, exit 0), "abort" (rank 1 calls abort with exit
 * code 9), "abort256" (the same with exit code 256), "crash" (rank 1 dies of SIGSEGV), "exit3"
 * (rank 1 exits 3 without finalize), "exit0" (rank 1 exits 0 without finalize), "hang"
 * (everyone sleeps until killed; in the failure modes the ranks but 1 do too).
 */
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd;
static char rbuf[65536];
static size_t rlen;

static void die(const char *what)
{
    fprintf(stderr, "pmi_probe: %s\n", what);
    exit(99);
}

static void put_line(const char *s)
{
    size_t n = strlen(s);
    if (write(fd, s, n) != (ssize_t)n)
        die("write to PMI_PORT failed");
}

/* The next reply line (without its newline), static. */
static const char *get_line(void)
{
    static char line[65536];
    for (;;) {
        char *nl = memchr(rbuf, '\n', rlen);
        if (nl) {
            size_t n = (size_t)(nl - rbuf);
            memcpy(line, rbuf, n);
            line[n] = 0;
            memmove(rbuf, nl + 1, rlen - n - 1);
            rlen -= n + 1;
            return line;
        }
        ssize_t r = read(fd, rbuf + rlen, sizeof rbuf - rlen);
        if (r <= 0)
            die("PMI connection closed");
        rlen += (size_t)r;
    }
}

static void expect(const char *want)
{
    const char *got = get_line();
    if (strncmp(got, want, strlen(want))) {
        fprintf(stderr, "pmi_probe: expected '%s', got '%s'\n", want, got);
        exit(99);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    const char *port = getenv("PMI_PORT"), *id = getenv("PMI_ID");
    if (!port || !id)
        die("PMI_PORT and PMI_ID must be set (run me with mpirun)");
    char host[256];
    snprintf(host, sizeof host, "%s", port);
    char *colon = strrchr(host, ':');
    if (!colon)
        die("PMI_PORT is not host:port");
    *colon = 0;
    struct addrinfo hints = {0}, *res;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        die("cannot resolve PMI_PORT");
    fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0)
        die("cannot connect to PMI_PORT");
    freeaddrinfo(res);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmd=initack pmiid=%s\n", id);
    put_line(cmd);
    expect("cmd=initack");
    int size = 0, rank = -1;
    if (sscanf(get_line(), "cmd=set size=%d", &size) != 1 ||
        sscanf(get_line(), "cmd=set rank=%d", &rank) != 1)
        die("bad initack reply");
    expect("cmd=set debug=");
    put_line("cmd=init pmi_version=1 pmi_subversion=1\n");
    expect("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    put_line("cmd=get_maxes\n");
    expect("cmd=maxes");
    put_line("cmd=get_my_kvsname\n");
    char kvs[256];
    if (sscanf(get_line(), "cmd=my_kvsname kvsname=%255s", kvs) != 1)
        die("bad kvsname reply");
    char me[128];
    gethostname(me, sizeof me);
    snprintf(cmd, sizeof cmd, "cmd=put kvsname=%s key=card-%d value=%s/%d\n", kvs, rank,
             getenv("PSP_NODE_ID") ? getenv("PSP_NODE_ID") : "?", (int)getpid());
    put_line(cmd);
    expect("cmd=put_result rc=0");
    put_line("cmd=barrier_in\n");
    expect("cmd=barrier_out");
    int cards = 0;
    for (int r = 0; r < size; r++) {
        snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=card-%d\n", kvs, r);
        put_line(cmd);
        const char *l = get_line();
        if (!strncmp(l, "cmd=get_result rc=0", 19) && strstr(l, "value="))
            cards++;
    }
    snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=PMI_process_mapping\n", kvs);
    put_line(cmd);
    const char *map = get_line();
    char mapping[512] = "";
    const char *v = strstr(map, "value=");
    if (v)
        snprintf(mapping, sizeof mapping, "%s", v + 6);
    snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=no-such-key\n", kvs);
    put_line(cmd);
    expect("cmd=get_result rc=-1");
    printf("rank %d of %d: %d cards, mapping %s\n", rank, size, cards, mapping);
    fflush(stdout);
    if (cards != size)
        return 98;
    if (!strcmp(mode, "abort") && rank == 1) {
        put_line("cmd=abort exitcode=9 message=probe aborts on purpose\n");
        pause();
    }
    if (!strcmp(mode, "abort256") && rank == 1) { /* exit() would keep 0 of it */
        put_line("cmd=abort exitcode=256 message=probe aborts with 256\n");
        pause();
    }
    if (!strcmp(mode, "crash") && rank == 1)
        raise(SIGSEGV);
    if (!strcmp(mode, "exit3") && rank == 1)
        return 3;
    if (!strcmp(mode, "exit0") && rank == 1)
        return 0;
    if (!strcmp(mode, "hang") || strcmp(mode, "ok"))
        for (;;)
            pause();
    put_line("cmd=finalize\n");
    expect("cmd=finalize_ack");
    return 0;
}
