/*
 * test_harness_selftest.c — tests of test/harness.h.
 *
 * The TEST_EXPLICIT tests below fail, crash or skip on purpose.  They never run by default;
 * the ordinary tests run this same binary (/proc/self/exe) on them as a child, capture its
 * output and check what the harness reported and its exit status.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdbool.h>

/* ---- the demonstrations, run only as a child ---------------------------------------------- */

TEST_EXPLICIT(must_pass)
{
    CHECK(1 + 1 == 2, "arithmetic");
}

TEST_EXPLICIT(must_fail_checks)
{
    int one = 1;
    CHECK(one == 2, "one is %d", one);
    CHECK_EQ_U64(3, 4);
    CHECK_EQ_STR("left", "right");
    printf("# still running after three failed checks\n");
}

TEST_EXPLICIT(must_fail_require)
{
    REQUIRE(0, "required thing missing");
    printf("# REQUIRE did not stop the test\n");
}

TEST_EXPLICIT(must_crash)
{
    raise(SIGSEGV);
}

TEST_EXPLICIT(must_exit_early)
{
    exit(0);
}

TEST_EXPLICIT(must_skip)
{
    SKIP("no %s here", "widget");
}

TEST_EXPLICIT(must_fail_seeded)
{
    uint64_t seed = th_seed(42);
    CHECK(seed == 0, "seed was %" PRIu64, seed);
}

/* ---- running this binary as a child -------------------------------------------------------- */

struct child {
    int status; /* exit status, or 128 + signal */
    char out[65536];
};

/* Run this binary with args (NULL-terminated), env assignment env ("NAME=value" or NULL),
 * and stdout+stderr captured into c->out. Returns false if it could not be run. */
static bool run_self(struct child *c, const char *env, const char *const *args)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        if (env)
            putenv((char *)env);
        setenv("HARNESS_SELFTEST_CHILD", "1", 1);
        unsetenv("TEST_NOFORK");
        const char *argv[32] = {th_state.argv0};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv("/proc/self/exe", (char *const *)argv);
        fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], c->out + len, sizeof c->out - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof c->out - 1)
            break;
    }
    c->out[len] = 0;
    close(fds[0]);
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return false;
    c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
}

/* Number of output lines that start with prefix. */
static int lines_starting(const char *out, const char *prefix)
{
    int n = 0;
    size_t plen = strlen(prefix);
    for (const char *l = out; *l;) {
        if (strncmp(l, prefix, plen) == 0)
            n++;
        const char *nl = strchr(l, '\n');
        if (!nl)
            break;
        l = nl + 1;
    }
    return n;
}

/* The line that starts with prefix, copied into buf ("" if none). */
static const char *line_of(const char *out, const char *prefix, char *buf, size_t len)
{
    size_t plen = strlen(prefix);
    buf[0] = 0;
    for (const char *l = out; *l;) {
        const char *nl = strchr(l, '\n');
        size_t ll = nl ? (size_t)(nl - l) : strlen(l);
        if (strncmp(l, prefix, plen) == 0) {
            snprintf(buf, len, "%.*s", (int)ll, l);
            break;
        }
        if (!nl)
            break;
        l = nl + 1;
    }
    return buf;
}

/* Show a child's output in the log, as comments, so a failure here can be understood. */
static void show(const struct child *c)
{
    for (const char *l = c->out; *l;) {
        const char *nl = strchr(l, '\n');
        int ll = nl ? (int)(nl - l) : (int)strlen(l);
        printf("#   | %.*s\n", ll, l);
        if (!nl)
            break;
        l = nl + 1;
    }
}

#define NESTED_SKIP()                                                                              \
    do {                                                                                           \
        if (getenv("HARNESS_SELFTEST_CHILD"))                                                      \
            SKIP("nested run");                                                                    \
    } while (0)

static char prefix[512], line[2048];

static const char *result_prefix(const char *verdict, const char *test)
{
    snprintf(prefix, sizeof prefix, "%s - %s: %s", verdict, th_state.binary, test);
    return prefix;
}

/* ---- the tests ------------------------------------------------------------------------------ */

TEST(checks_that_hold_record_nothing)
{
    unsigned before = th_state.failures;
    CHECK_EQ_U64(CHECK(2 > 1, "two > one"), 1);
    CHECK_EQ_U64(CHECK_EQ_U64(2 + 2, 4), 1);
    CHECK_EQ_U64(CHECK_NE_U64(1, 2), 1);
    CHECK_EQ_U64(CHECK_LT_I64(-5, 3), 1);
    CHECK_EQ_U64(CHECK_GE_U64(7, 7), 1);
    CHECK_EQ_U64(CHECK_EQ_STR("abc", "abc"), 1);
    CHECK_EQ_U64(CHECK_EQ_STR(NULL, NULL), 1);
    CHECK_EQ_U64(CHECK_EQ_MEM("abcd", "abcd", 4), 1);
    CHECK_EQ_U64(CHECK_OK(0), 1);
    CHECK_EQ_U64(CHECK_RC(-EINVAL, -EINVAL), 1);
    CHECK_EQ_U64(th_state.failures, before);
}

TEST(failed_checks_are_reported_and_do_not_stop_the_test)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"must_fail_checks", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 1);
    line_of(c.out, result_prefix("not ok", "must_fail_checks"), line, sizeof line);
    CHECK(line[0], "no 'not ok' line for must_fail_checks");
    CHECK(strstr(line, "test_harness_selftest.c:"), "no file:line in: %s", line);
    CHECK(strstr(line, "one == 2") && strstr(line, "one is 1"), "reason missing in: %s", line);
    CHECK(strstr(line, "and 2 more failed checks"), "failure count missing in: %s", line);
    CHECK(strstr(c.out, "3 == 4 failed: 3 (0x3) vs 4 (0x4)"), "CHECK_EQ_U64 values missing");
    CHECK(strstr(c.out, "\"left\" vs \"right\""), "CHECK_EQ_STR values missing");
    CHECK(strstr(c.out, "# still running after three failed checks"),
          "the test stopped at a failed CHECK");
    snprintf(prefix, sizeof prefix, "# reproduce: %s must_fail_checks", th_state.argv0);
    CHECK_EQ_I64(lines_starting(c.out, prefix), 1);
    CHECK_EQ_I64(lines_starting(c.out, "ok - "), 0);
    if (th_state.failures)
        show(&c);
}

TEST(require_ends_the_test)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"must_fail_require", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 1);
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("not ok", "must_fail_require")), 1);
    CHECK(!strstr(c.out, "REQUIRE did not stop"), "REQUIRE went on after failing");
    if (th_state.failures)
        show(&c);
}

TEST(crash_and_early_exit_fail_only_that_test)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"must_crash", "must_exit_early", "must_pass", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 1);
    line_of(c.out, result_prefix("not ok", "must_crash"), line, sizeof line);
    CHECK(strstr(line, "killed by signal 11"), "crash not reported: '%s'", line);
    line_of(c.out, result_prefix("not ok", "must_exit_early"), line, sizeof line);
    CHECK(strstr(line, "exited with status 0 before it finished"), "exit not reported: '%s'", line);
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("ok", "must_pass")), 1);
    CHECK_EQ_I64(lines_starting(c.out, "# reproduce: "), 2);
    CHECK_EQ_I64(lines_starting(c.out, "not ok - "), 2);
    if (th_state.failures)
        show(&c);
}

TEST(skip_is_reported_as_skip)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"must_skip", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 0);
    snprintf(prefix, sizeof prefix, "ok - %s: must_skip # SKIP no widget here", th_state.binary);
    CHECK_EQ_I64(lines_starting(c.out, prefix), 1);
    if (th_state.failures)
        show(&c);
}

TEST(seed_is_printed_and_reproducible)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"must_fail_seeded", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 1);
    snprintf(prefix, sizeof prefix, "# %s: must_fail_seeded: seed 42", th_state.binary);
    CHECK_EQ_I64(lines_starting(c.out, prefix), 1);
    snprintf(prefix, sizeof prefix, "# reproduce: TEST_SEED=42 %s must_fail_seeded",
             th_state.argv0);
    CHECK_EQ_I64(lines_starting(c.out, prefix), 1);

    REQUIRE(run_self(&c, "TEST_SEED=7", args), "could not run %s", th_state.argv0);
    CHECK(strstr(c.out, "seed was 7"), "TEST_SEED=7 did not override the seed");
    if (th_state.failures)
        show(&c);
}

TEST(named_tests_run_alone_and_in_order)
{
    NESTED_SKIP();
    struct child c;
    const char *one[] = {"must_pass", NULL};
    REQUIRE(run_self(&c, NULL, one), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 0);
    CHECK_EQ_I64(lines_starting(c.out, "ok - "), 1);
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("ok", "must_pass")), 1);

    const char *two[] = {"must_skip", "must_pass", NULL};
    REQUIRE(run_self(&c, NULL, two), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 0);
    const char *skip = strstr(c.out, result_prefix("ok", "must_skip"));
    const char *pass = strstr(c.out, result_prefix("ok", "must_pass"));
    CHECK(skip && pass && skip < pass, "named tests did not run in the given order");
    if (th_state.failures)
        show(&c);
}

TEST(no_fork_mode_reports_the_same)
{
    NESTED_SKIP();
    struct child c;
    const char *args[] = {"--no-fork", "must_fail_checks", "must_pass", NULL};
    REQUIRE(run_self(&c, NULL, args), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 1);
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("not ok", "must_fail_checks")), 1);
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("ok", "must_pass")), 1);
    if (th_state.failures)
        show(&c);
}

TEST(bad_command_lines_exit_2)
{
    NESTED_SKIP();
    struct child c;
    const char *unknown[] = {"must_pass", "no_such_test", NULL};
    REQUIRE(run_self(&c, NULL, unknown), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 2);
    CHECK(strstr(c.out, "no test named 'no_such_test'"), "unclear message for a typo");
    CHECK_EQ_I64(lines_starting(c.out, "ok - "), 0); /* nothing ran */

    const char *option[] = {"--bogus", NULL};
    REQUIRE(run_self(&c, NULL, option), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 2);
    CHECK(strstr(c.out, "unknown option --bogus"), "unclear message for a bad option");
    if (th_state.failures)
        show(&c);
}

TEST(default_run_leaves_out_explicit_tests)
{
    NESTED_SKIP();
    struct child c;
    const char *list[] = {"--list", NULL};
    REQUIRE(run_self(&c, NULL, list), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 0);
    CHECK_EQ_I64(lines_starting(c.out, "must_crash (explicit"), 1);
    CHECK_EQ_I64(lines_starting(c.out, "checks_that_hold_record_nothing\n"), 1);

    /* A default run in the child: the tests that run children skip there ("nested run"),
     * so this shows which tests run by default without recursing. */
    const char *none[] = {NULL};
    REQUIRE(run_self(&c, NULL, none), "could not run %s", th_state.argv0);
    CHECK_EQ_I64(c.status, 0);
    CHECK(!strstr(c.out, ": must_"), "an explicit test ran by default");
    CHECK_EQ_I64(lines_starting(c.out, result_prefix("ok", "checks_that_hold_record_nothing")), 1);
    snprintf(prefix, sizeof prefix, "# %s: ", th_state.binary);
    line_of(c.out, prefix, line, sizeof line);
    CHECK(strstr(line, " passed, 0 failed"), "no summary line: '%s'", line);
    if (th_state.failures)
        show(&c);
}

TEST_MAIN()
