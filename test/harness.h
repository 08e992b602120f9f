/*
 * harness.h — the header-only unit test harness of every test binary.
 *
 *     #include "harness.h"
 *
 *     TEST(window_wraps)
 *     {
 *         uint64_t seed = th_seed(1234);       // fixed default, printed, TEST_SEED overrides
 *         CHECK_EQ_U64(seq_next(255), 0);
 *         CHECK(ring_empty(&r), "ring has %u entries after drain", ring_count(&r));
 *         REQUIRE(p != NULL, "alloc failed");  // like CHECK, but ends the test on failure
 *         if (!have_root())
 *             SKIP("needs root");
 *     }
 *
 *     TEST_MAIN()
 *
 * A failed CHECK records file:line and the message and lets the test go on.  Each test prints
 * one line, which test/run counts:
 *
 *     ok - <binary>: <test>
 *     ok - <binary>: <test> # SKIP <reason>
 *     not ok - <binary>: <test>: <file>:<line>: <first failure>
 *     # reproduce: [TEST_SEED=<n>] <argv0> <test>
 *
 * `<binary> [--list] [--no-fork] [test...]` runs every TEST (or the ones named, in that order;
 * TEST_EXPLICIT tests only run when named) and exits 1 if any failed, 2 on a bad command line.
 * Each test runs in a forked child, so a crash or an early exit() is reported as that test's
 * failure and the other tests still run; --no-fork (or TEST_NOFORK=1) runs them in-process,
 * for a debugger.
 *
 * The state lives in one weak object, so a test binary may be built from several .c files that
 * include this header; exactly one of them has TEST_MAIN().  CHECK formats must be printf
 * format strings.  Tests appear in source order.
 */
#ifndef PSPORT_TEST_HARNESS_H
#define PSPORT_TEST_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define TH_MAX_TESTS 1024
#define TH_MSG_LEN   1024

/* Exit codes of a forked test child that printed its own result line. */
#define TH_EXIT_PASSED 112
#define TH_EXIT_FAILED 113

struct th_test {
    const char *name;
    void (*fn)(void);
    const char *file;
    int line;
    int explicit_only; /* run only when named on the command line */
};

struct th_state {
    struct th_test tests[TH_MAX_TESTS];
    unsigned ntests;
    const char *argv0;  /* as invoked (for reproduce lines) */
    const char *binary; /* basename, in result lines */
    /* The running test. */
    const struct th_test *current;
    unsigned failures;
    char first[TH_MSG_LEN];
    int seeded;
    uint64_t seed;
    int skipped;
    char skip_reason[TH_MSG_LEN];
};

__attribute__((weak)) struct th_state th_state;

#define TH_REGISTER_(name, explicit_only)                                                          \
    static void th_test_##name(void);                                                              \
    __attribute__((constructor)) static void th_register_##name(void)                              \
    {                                                                                              \
        th_register(#name, th_test_##name, __FILE__, __LINE__, explicit_only);                     \
    }                                                                                              \
    static void th_test_##name(void)

/* Define a test; the body follows as a function body. */
#define TEST(name) TH_REGISTER_(name, 0)
/* A test that only runs when named on the command line (demonstrations, long benchmarks). */
#define TEST_EXPLICIT(name) TH_REGISTER_(name, 1)

/* Record a failure unless cond holds; evaluates to 1 if it held, 0 if not. */
#define CHECK(cond, ...) th_check((cond) ? 1 : 0, __FILE__, __LINE__, #cond, __VA_ARGS__)
/* CHECK, and end the test (return) on failure. Only in the test function itself. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!CHECK(cond, __VA_ARGS__))                                                             \
            return;                                                                                \
    } while (0)
/* End the test, reported as skipped (unless a check already failed). */
#define SKIP(...)                                                                                  \
    do {                                                                                           \
        th_skip(__VA_ARGS__);                                                                      \
        return;                                                                                    \
    } while (0)

enum th_op { TH_EQ, TH_NE, TH_LT, TH_LE, TH_GT, TH_GE };

#define TH_CMP_U64_(a, op, b)                                                                      \
    th_check_u64(__FILE__, __LINE__, #a, #b, op, (uint64_t)(a), (uint64_t)(b))
#define TH_CMP_I64_(a, op, b)                                                                      \
    th_check_i64(__FILE__, __LINE__, #a, #b, op, (int64_t)(a), (int64_t)(b))
#define CHECK_EQ_U64(a, b) TH_CMP_U64_(a, TH_EQ, b)
#define CHECK_NE_U64(a, b) TH_CMP_U64_(a, TH_NE, b)
#define CHECK_LT_U64(a, b) TH_CMP_U64_(a, TH_LT, b)
#define CHECK_LE_U64(a, b) TH_CMP_U64_(a, TH_LE, b)
#define CHECK_GT_U64(a, b) TH_CMP_U64_(a, TH_GT, b)
#define CHECK_GE_U64(a, b) TH_CMP_U64_(a, TH_GE, b)
#define CHECK_EQ_I64(a, b) TH_CMP_I64_(a, TH_EQ, b)
#define CHECK_NE_I64(a, b) TH_CMP_I64_(a, TH_NE, b)
#define CHECK_LT_I64(a, b) TH_CMP_I64_(a, TH_LT, b)
#define CHECK_LE_I64(a, b) TH_CMP_I64_(a, TH_LE, b)
#define CHECK_GT_I64(a, b) TH_CMP_I64_(a, TH_GT, b)
#define CHECK_GE_I64(a, b) TH_CMP_I64_(a, TH_GE, b)
/* Strings equal (NULL equals only NULL). */
#define CHECK_EQ_STR(a, b) th_check_str(__FILE__, __LINE__, #a, #b, (a), (b))
/* n bytes equal; reports the first differing offset. */
#define CHECK_EQ_MEM(a, b, n) th_check_mem(__FILE__, __LINE__, #a, #b, (a), (b), (size_t)(n))
/* An int-returning call (0 or -errno style) returned `expected`; reports strerror. */
#define CHECK_RC(expr, expected) th_check_rc(__FILE__, __LINE__, #expr, (int)(expr), (expected))
#define CHECK_OK(expr)           CHECK_RC(expr, 0)

/* Define main(): run the tests named on the command line, or all. */
#define TEST_MAIN()                                                                                \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        return th_main(argc, argv);                                                                \
    }

/* ---- implementation ------------------------------------------------------------------- */

static inline void th_register(const char *name, void (*fn)(void), const char *file, int line,
                               int explicit_only)
{
    struct th_state *s = &th_state;
    if (s->ntests == TH_MAX_TESTS) {
        fprintf(stderr, "harness: more than %d tests in one binary; raise TH_MAX_TESTS\n",
                TH_MAX_TESTS);
        abort();
    }
    for (unsigned i = 0; i < s->ntests; i++) {
        if (strcmp(s->tests[i].name, name) == 0) {
            fprintf(stderr, "harness: test %s defined twice (%s:%d and %s:%d)\n", name,
                    s->tests[i].file, s->tests[i].line, file, line);
            abort();
        }
    }
    s->tests[s->ntests++] = (struct th_test){name, fn, file, line, explicit_only};
}

/* snprintf that truncates silently (messages are cut to the buffer on purpose). */
__attribute__((format(printf, 3, 4))) static inline void th_fmt(char *buf, size_t cap,
                                                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

/* Messages go on one output line each: no line breaks. */
static inline void th_one_line(char *m)
{
    for (; *m; m++)
        if (*m == '\n' || *m == '\r')
            *m = ' ';
}

static inline const char *th_test_name(void)
{
    return th_state.current ? th_state.current->name : "(no test)";
}

/* Record one failure: the first goes on the "not ok" line, every one is printed as it happens. */
static inline void th_fail_msg(const char *file, int line, const char *msg)
{
    struct th_state *s = &th_state;
    char full[TH_MSG_LEN + 256];
    th_fmt(full, sizeof full, "%s:%d: %s", file, line, msg);
    th_one_line(full);
    if (s->failures++ == 0)
        th_fmt(s->first, sizeof s->first, "%s", full);
    printf("#   %s: %s: %s\n", s->binary ? s->binary : "test", th_test_name(), full);
    fflush(stdout);
}

__attribute__((format(printf, 4, 0))) static inline void
th_vfail(const char *file, int line, const char *what, const char *fmt, va_list ap)
{
    char msg[TH_MSG_LEN], user[TH_MSG_LEN];
    vsnprintf(user, sizeof user, fmt, ap);
    if (user[0])
        th_fmt(msg, sizeof msg, "%s: %s", what, user);
    else
        th_fmt(msg, sizeof msg, "%s", what);
    th_fail_msg(file, line, msg);
}

__attribute__((format(printf, 5, 6))) static inline int
th_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    if (ok)
        return 1;
    char what[TH_MSG_LEN];
    snprintf(what, sizeof what, "CHECK(%s) failed", expr);
    va_list ap;
    va_start(ap, fmt);
    th_vfail(file, line, what, fmt, ap);
    va_end(ap);
    return 0;
}

static inline const char *th_op_text(enum th_op op)
{
    static const char *const t[] = {"==", "!=", "<", "<=", ">", ">="};
    return t[op];
}

#define TH_CMP_(op, a, b)                                                                          \
    ((op) == TH_EQ   ? (a) == (b)                                                                  \
     : (op) == TH_NE ? (a) != (b)                                                                  \
     : (op) == TH_LT ? (a) < (b)                                                                   \
     : (op) == TH_LE ? (a) <= (b)                                                                  \
     : (op) == TH_GT ? (a) > (b)                                                                   \
                     : (a) >= (b))

static inline int th_check_u64(const char *file, int line, const char *ea, const char *eb,
                               enum th_op op, uint64_t a, uint64_t b)
{
    if (TH_CMP_(op, a, b))
        return 1;
    char msg[TH_MSG_LEN];
    snprintf(msg, sizeof msg,
             "%s %s %s failed: %" PRIu64 " (0x%" PRIx64 ") vs %" PRIu64 " (0x%" PRIx64 ")", ea,
             th_op_text(op), eb, a, a, b, b);
    th_fail_msg(file, line, msg);
    return 0;
}

static inline int th_check_i64(const char *file, int line, const char *ea, const char *eb,
                               enum th_op op, int64_t a, int64_t b)
{
    if (TH_CMP_(op, a, b))
        return 1;
    char msg[TH_MSG_LEN];
    snprintf(msg, sizeof msg, "%s %s %s failed: %" PRId64 " vs %" PRId64, ea, th_op_text(op), eb, a,
             b);
    th_fail_msg(file, line, msg);
    return 0;
}

static inline int th_check_str(const char *file, int line, const char *ea, const char *eb,
                               const char *a, const char *b)
{
    if (a == b || (a && b && strcmp(a, b) == 0))
        return 1;
    char msg[TH_MSG_LEN];
    snprintf(msg, sizeof msg, "%s == %s failed: \"%.400s\" vs \"%.400s\"", ea, eb, a ? a : "(null)",
             b ? b : "(null)");
    th_fail_msg(file, line, msg);
    return 0;
}

static inline int th_check_mem(const char *file, int line, const char *ea, const char *eb,
                               const void *a, const void *b, size_t n)
{
    const unsigned char *pa = (const unsigned char *)a, *pb = (const unsigned char *)b;
    size_t i = 0;
    while (i < n && pa[i] == pb[i])
        i++;
    if (i == n)
        return 1;
    char msg[TH_MSG_LEN];
    snprintf(msg, sizeof msg, "%s and %s differ at byte %zu of %zu: 0x%02x vs 0x%02x", ea, eb, i, n,
             pa[i], pb[i]);
    th_fail_msg(file, line, msg);
    return 0;
}

static inline int th_check_rc(const char *file, int line, const char *expr, int rc, int expected)
{
    if (rc == expected)
        return 1;
    char msg[TH_MSG_LEN];
    snprintf(msg, sizeof msg, "%s returned %d (%s), expected %d (%s)", expr, rc,
             rc < 0 ? strerror(-rc) : "no error", expected,
             expected < 0 ? strerror(-expected) : "no error");
    th_fail_msg(file, line, msg);
    return 0;
}

__attribute__((format(printf, 1, 2))) static inline void th_skip(const char *fmt, ...)
{
    struct th_state *s = &th_state;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->skip_reason, sizeof s->skip_reason, fmt, ap);
    va_end(ap);
    th_one_line(s->skip_reason);
    s->skipped = 1;
}

/*
 * The seed of the running test: TEST_SEED from the environment if set, else def.  Printed,
 * and put into the reproduce line if the test fails.
 */
static inline uint64_t th_seed(uint64_t def)
{
    struct th_state *s = &th_state;
    uint64_t seed = def;
    const char *env = getenv("TEST_SEED");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 0);
        if (errno || *end || env[0] == '-') {
            fprintf(stderr, "harness: TEST_SEED=%s is not an unsigned integer\n", env);
            exit(2);
        }
        seed = v;
    }
    s->seeded = 1;
    s->seed = seed;
    printf("# %s: %s: seed %" PRIu64 "\n", s->binary ? s->binary : "test", th_test_name(), seed);
    fflush(stdout);
    return seed;
}

static inline void th_print_reproduce(const char *name, int seeded, uint64_t seed)
{
    if (seeded)
        printf("# reproduce: TEST_SEED=%" PRIu64 " %s %s\n", seed, th_state.argv0, name);
    else
        printf("# reproduce: %s %s\n", th_state.argv0, name);
}

/* Run t in this process and print its result line. Returns 1 if it passed. */
static inline int th_run_here(const struct th_test *t)
{
    struct th_state *s = &th_state;
    s->current = t;
    s->failures = 0;
    s->first[0] = 0;
    s->seeded = 0;
    s->skipped = 0;
    s->skip_reason[0] = 0;
    t->fn();
    if (s->failures) {
        printf("not ok - %s: %s: %s", s->binary, t->name, s->first);
        if (s->failures > 1)
            printf(" (and %u more failed checks)", s->failures - 1);
        printf("\n");
        th_print_reproduce(t->name, s->seeded, s->seed);
    } else if (s->skipped) {
        printf("ok - %s: %s # SKIP %s\n", s->binary, t->name, s->skip_reason);
    } else {
        printf("ok - %s: %s\n", s->binary, t->name);
    }
    fflush(stdout);
    s->current = NULL;
    return s->failures == 0;
}

/* Run t in a forked child, so that a crash or exit() inside it is a failure of t alone. */
static inline int th_run_forked(const struct th_test *t)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "harness: fork: %s; running %s in-process\n", strerror(errno), t->name);
        return th_run_here(t);
    }
    if (pid == 0) {
        int ok = th_run_here(t);
        fflush(stdout);
        fflush(stderr);
        _exit(ok ? TH_EXIT_PASSED : TH_EXIT_FAILED);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "harness: waitpid: %s\n", strerror(errno));
            return 0;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == TH_EXIT_PASSED)
        return 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == TH_EXIT_FAILED)
        return 0;
    if (WIFSIGNALED(status))
        printf("not ok - %s: %s: crashed: killed by signal %d (%s)\n", th_state.binary, t->name,
               WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        printf("not ok - %s: %s: the test exited with status %d before it finished\n",
               th_state.binary, t->name, WEXITSTATUS(status));
    th_print_reproduce(t->name, 0, 0);
    fflush(stdout);
    return 0;
}

static inline int th_before(const struct th_test *a, const struct th_test *b)
{
    int c = strcmp(a->file, b->file);
    return c < 0 || (c == 0 && a->line < b->line);
}

/* Main helper: see the comment at the top. Returns the exit status. */
static inline int th_main(int argc, char **argv)
{
    struct th_state *s = &th_state;
    s->argv0 = argc > 0 ? argv[0] : "test";
    const char *slash = strrchr(s->argv0, '/');
    s->binary = slash ? slash + 1 : s->argv0;
    /* Inside a libtool wrapper: show the wrapper's name (dir/.libs/lt-foo -> dir/foo). */
    static char wrapper[4096];
    const char *lt = strstr(s->argv0, ".libs/lt-");
    if (lt && !strchr(lt + 9, '/')) {
        snprintf(wrapper, sizeof wrapper, "%.*s%s", (int)(lt - s->argv0), s->argv0, lt + 9);
        s->argv0 = wrapper;
        s->binary += 3;
    }

    /* Source order (constructors may run in any order). */
    for (unsigned i = 1; i < s->ntests; i++) {
        struct th_test t = s->tests[i];
        unsigned j = i;
        for (; j > 0 && th_before(&t, &s->tests[j - 1]); j--)
            s->tests[j] = s->tests[j - 1];
        s->tests[j] = t;
    }

    const char *nofork_env = getenv("TEST_NOFORK");
    int nofork = nofork_env && *nofork_env && strcmp(nofork_env, "0") != 0;
    int first_name = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) {
            for (unsigned k = 0; k < s->ntests; k++)
                printf("%s%s\n", s->tests[k].name,
                       s->tests[k].explicit_only ? " (explicit: runs only when named)" : "");
            return 0;
        } else if (strcmp(argv[i], "--no-fork") == 0) {
            nofork = 1;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s [--list] [--no-fork] [test...]\n"
                   "Runs the named tests (default: all but explicit ones); exits 1 if one "
                   "fails.\nTEST_SEED=n overrides a seeded test's seed; TEST_NOFORK=1 = "
                   "--no-fork.\n",
                   s->argv0);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "%s: unknown option %s (try --help)\n", s->binary, argv[i]);
            return 2;
        } else {
            first_name = i;
            break;
        }
    }

    /* Resolve names first, so a typo fails before anything runs. */
    const struct th_test *run[TH_MAX_TESTS];
    unsigned nrun = 0;
    if (first_name < argc) {
        for (int i = first_name; i < argc; i++) {
            const struct th_test *t = NULL;
            for (unsigned k = 0; k < s->ntests && !t; k++)
                if (strcmp(s->tests[k].name, argv[i]) == 0)
                    t = &s->tests[k];
            if (!t) {
                fprintf(stderr, "%s: no test named '%s' (see %s --list)\n", s->binary, argv[i],
                        s->argv0);
                return 2;
            }
            if (nrun < TH_MAX_TESTS)
                run[nrun++] = t;
        }
    } else {
        for (unsigned k = 0; k < s->ntests; k++)
            if (!s->tests[k].explicit_only)
                run[nrun++] = &s->tests[k];
    }

    unsigned passed = 0, failed = 0;
    for (unsigned i = 0; i < nrun; i++) {
        int ok = nofork ? th_run_here(run[i]) : th_run_forked(run[i]);
        ok ? passed++ : failed++;
    }
    printf("# %s: %u passed, %u failed\n", s->binary, passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}

#endif
