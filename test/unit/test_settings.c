/* test_settings.c — common/settings.c and common/log.c (written by the common/ owner; adopt as
 * test/unit/test_settings.c). */
#include "harness.h"
#include "settings.h"
#include "log.h"
#include <errno.h>
#include <fcntl.h>

TEST(table_lookup)
{
    unsigned n = 0;
    const struct psp_setting *t = psp_settings_table(&n);
    CHECK_GE_U64(n, 22);
    const char *need[] = {"PSP_DEBUG",
                          "PSP_LINK",
                          "PSP_LINK_IF",
                          "PSP_NODES_FILE",
                          "PSP_UDP_PORT",
                          "PSP_LINK_LOSS",
                          "PSP_LINK_DUP",
                          "PSP_LINK_CORRUPT",
                          "PSP_LINK_SEED",
                          "PSP_WINDOW",
                          "PSP_FRAME_SIZE",
                          "PSP_CONTEXTS",
                          "PSP_SEND_SLOTS",
                          "PSP_RECV_SLOTS",
                          "PSP_HOSTQ_SLOTS",
                          "PSP_MAX_NODES",
                          "PSP_RTO_US",
                          "PSP_RTO_MAX_US",
                          "PSP_ACK_DELAY_US",
                          "PSP_NACK_INTERVAL_US",
                          "PSP_NOBUF_BACKOFF_US",
                          "PSP_PEER_TIMEOUT_MS",
                          NULL};
    for (int i = 0; need[i]; i++)
        CHECK(psp_setting_find(need[i]) != NULL, "%s missing", need[i]);
    CHECK_EQ_STR(t[0].name, "PSP_DEBUG");
    REQUIRE(psp_setting_find("PSP_WINDOW") != NULL, "no window");
    CHECK_EQ_STR(psp_setting_find("PSP_WINDOW")->def, "auto");
    CHECK(psp_setting_find("PSP_NOPE") == NULL, "found nope");
    CHECK(psp_setting_find(NULL) == NULL, "found null");
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++)
            CHECK(strcmp(t[i].name, t[j].name) != 0, "dup %s", t[i].name);
}

TEST(str_env_and_default)
{
    unsetenv("PSP_LINK");
    CHECK_EQ_STR(psp_setting_str("PSP_LINK"), "udp");
    setenv("PSP_LINK", "", 1);
    CHECK_EQ_STR(psp_setting_str("PSP_LINK"), "udp");
    setenv("PSP_LINK", "eth", 1);
    CHECK_EQ_STR(psp_setting_str("PSP_LINK"), "eth");
}

TEST(unknown_aborts)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        int fd = open("/dev/null", 1);
        dup2(fd, 2);
        psp_setting_str("PSP_BOGUS");
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %d", st);
}

TEST(parse_u64)
{
    uint64_t v = 0;
    CHECK_OK(psp_parse_u64("0", 0, 10, &v));
    CHECK_EQ_U64(v, 0);
    CHECK_OK(psp_parse_u64("4k", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 4096);
    CHECK_OK(psp_parse_u64("2M", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 2u << 20);
    CHECK_OK(psp_parse_u64("3g", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 3ull << 30);
    CHECK_OK(psp_parse_u64("18446744073709551615", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_RC(psp_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -EINVAL);
    CHECK_RC(psp_parse_u64("17179869184g", 0, UINT64_MAX, &v), -EINVAL);
    CHECK_OK(psp_parse_u64("17179869183g", 0, UINT64_MAX, &v));
    v = 77;
    const char *bad[] = {"", "-1", " 1", "1 ", "+1", "1kb", "k", "0x10", "1.5", "1e3", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK_RC(psp_parse_u64(bad[i], 0, UINT64_MAX, &v), -EINVAL);
    CHECK_RC(psp_parse_u64(NULL, 0, 1, &v), -EINVAL);
    CHECK_EQ_U64(v, 77);
    CHECK_RC(psp_parse_u64("11", 0, 10, &v), -EINVAL);
    CHECK_RC(psp_parse_u64("0", 1, 10, &v), -EINVAL);
}

TEST(setting_u64_messages)
{
    char err[256] = "";
    uint64_t v;
    setenv("PSP_WINDOW", "100", 1);
    CHECK_RC(psp_setting_u64("PSP_WINDOW", 1, 64, &v, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "PSP_WINDOW=100 is out of range 1..64");
    setenv("PSP_WINDOW", "abc", 1);
    CHECK_RC(psp_setting_u64("PSP_WINDOW", 1, 64, &v, err, sizeof err), -EINVAL);
    CHECK(strstr(err, "PSP_WINDOW=abc is not a number") != NULL, "%s", err);
    printf("# %s\n", err);
    setenv("PSP_WINDOW", "16", 1);
    CHECK_OK(psp_setting_u64("PSP_WINDOW", 1, 64, &v, err, sizeof err));
    CHECK_EQ_U64(v, 16);
    unsetenv("PSP_WINDOW");
    unsetenv("PSP_CONTEXTS");
    CHECK_OK(psp_setting_u64("PSP_CONTEXTS", 1, 64, &v, NULL, 0));
    CHECK_EQ_U64(v, 64);
    char small[8];
    setenv("PSP_WINDOW", "100", 1);
    CHECK_RC(psp_setting_u64("PSP_WINDOW", 1, 64, &v, small, sizeof small), -EINVAL);
    CHECK_EQ_STR(small, "PSP_WIN");
}

TEST(prob)
{
    char err[256];
    double p;
    const char *good[] = {"0", "1", "0.01", ".5", "1.000", "0.", NULL};
    double gv[] = {0, 1, 0.01, 0.5, 1, 0};
    for (int i = 0; good[i]; i++) {
        setenv("PSP_LINK_LOSS", good[i], 1);
        CHECK_OK(psp_setting_prob("PSP_LINK_LOSS", &p, err, sizeof err));
        CHECK(p > gv[i] - 1e-12 && p < gv[i] + 1e-12, "%s -> %g", good[i], p);
    }
    const char *bad[] = {"1.01", "2",   "-0.1", "abc",  ".", "0.1.2",
                         "1e-3", "nan", "inf",  " 0.1", NULL};
    for (int i = 0; bad[i]; i++) {
        setenv("PSP_LINK_LOSS", bad[i], 1);
        CHECK_RC(psp_setting_prob("PSP_LINK_LOSS", &p, err, sizeof err), -EINVAL);
    }
    printf("# %s\n", err);
    CHECK(strstr(err, "PSP_LINK_LOSS= 0.1 is not a probability") != NULL, "%s", err);
    unsetenv("PSP_LINK_LOSS");
    CHECK_OK(psp_setting_prob("PSP_LINK_LOSS", &p, err, sizeof err));
}

TEST(print)
{
    setenv("PSP_WINDOW", "16", 1);
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    psp_settings_print(f);
    fclose(f);
    fputs(buf, stdout);
    CHECK(strstr(buf, "16 *") != NULL, "no env mark");
    CHECK(strstr(buf, "[link]") != NULL && strstr(buf, "[mcp]") != NULL, "no groups");
    CHECK(strstr(buf, "* = set in the environment") != NULL, "no legend");
    free(buf);
    unsetenv("PSP_WINDOW");
}

TEST(log_levels)
{
    fflush(stdout);
    int fds[2];
    pipe(fds);
    pid_t p = fork();
    if (p == 0) {
        dup2(fds[1], 2);
        setenv("PSP_DEBUG", "2", 1);
        psp_log_init("tst");
        errno = 42;
        PSP_INFO("info %d", 1);
        if (errno != 42)
            _exit(3);
        PSP_DEBUG_LOG("debug hidden");
        psp_log(PSP_LOG_TRACE, "trace hidden");
        PSP_WARN("warn\n");
        setenv("PSP_DEBUG", "4", 1); /* read once */
        PSP_DEBUG_LOG("still hidden");
        psp_die("bye %s", "now");
    }
    close(fds[1]);
    char out[1024] = "";
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += n;
    out[len] = 0;
    int st;
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    CHECK_EQ_STR(out, "tst: info: info 1\ntst: warning: warn\ntst: error: bye now\n");
}

TEST(log_bad_level)
{
    fflush(stdout);
    int fds[2];
    pipe(fds);
    pid_t p = fork();
    if (p == 0) {
        dup2(fds[1], 2);
        setenv("PSP_DEBUG", "9", 1);
        psp_log_init(NULL);
        PSP_WARN("hidden");
        PSP_ERROR("shown");
        _exit(0);
    }
    close(fds[1]);
    char out[1024] = "";
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += n;
    out[len] = 0;
    int st;
    waitpid(p, &st, 0);
    CHECK_EQ_STR(out, "psport: warning: PSP_DEBUG=9 is out of range 0..4; logging errors "
                      "only\npsport: error: shown\n");
}
TEST(log_long)
{
    fflush(stdout);
    int fds[2];
    pipe(fds);
    pid_t p = fork();
    if (p == 0) {
        dup2(fds[1], 2);
        char big[5000];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        PSP_ERROR("%s", big);
        _exit(0);
    }
    close(fds[1]);
    static char out[8192];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += n;
    out[len] = 0;
    waitpid(p, NULL, 0);
    CHECK_EQ_U64(len, 2047);
    CHECK(strcmp(out + len - 4, "...\n") == 0, "end %s", out + len - 10);
}
TEST_MAIN()
