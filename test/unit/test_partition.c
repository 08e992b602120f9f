/*
 * test_partition.c — pulc/src/partition.c: hostlist expansion, the partition from the
 * environment (PSP_PARTITION, PSP_HOSTFILE, SLURM_JOB_NODELIST, PBS_NODEFILE) and its
 * resolution to node ids of a nodes file.
 */
#include "harness.h"
#include "nodes.h"
#include "partition.h"
#include "settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* ---- helpers ----------------------------------------------------------------------------- */

/* The hosts of expr joined by ' ', or "ERROR <rc>: <message>". Static buffer. */
static const char *expand(const char *expr)
{
    static char out[8192];
    char err[512] = "";
    char **hosts = (char **)1;
    size_t n = 99;
    int rc = pulc_hostlist_expand(expr, &hosts, &n, err, sizeof err);
    if (rc) {
        CHECK(hosts == NULL && n == 0, "hosts %p n %zu after error %d", (void *)hosts, n, rc);
        snprintf(out, sizeof out, "ERROR %d: %s", rc, err);
        return out;
    }
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof out; i++)
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", i ? " " : "", hosts[i]);
    pulc_hostlist_free(hosts, n);
    return out;
}

/* The error message of expanding expr (checks that it fails with -EINVAL). Static buffer. */
static const char *expand_err(const char *expr)
{
    static char err[512];
    char **hosts = (char **)1;
    size_t n = 99;
    err[0] = '\0';
    int rc = pulc_hostlist_expand(expr, &hosts, &n, err, sizeof err);
    CHECK(rc == -EINVAL, "'%s' expanded with rc %d, expected -EINVAL", expr, rc);
    CHECK(hosts == NULL && n == 0, "'%s': hosts %p n %zu after an error", expr, (void *)hosts, n);
    if (rc == 0)
        pulc_hostlist_free(hosts, n);
    return err;
}

/* s starts with prefix. */
#define CHECK_PREFIX(s, prefix)                                                                    \
    CHECK(strncmp((s), (prefix), strlen(prefix)) == 0, "\"%s\" does not start with \"%s\"", (s),   \
          (prefix))

static void clear_env(void)
{
    unsetenv("PSP_PARTITION");
    unsetenv("PSP_HOSTFILE");
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("PBS_NODEFILE");
}

/* A temporary file with text; its name in path (PATH_LEN bytes). 0 or -1. */
#define PATH_LEN 64
static int temp_file(char path[PATH_LEN], const char *text)
{
    snprintf(path, PATH_LEN, "/tmp/test_partition.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* pulc_partition_from_env: rc, and list/source/err in static buffers. */
struct env_result {
    int rc;
    char list[4096];
    char source[64];
    char err[512];
};

static struct env_result from_env(void)
{
    static struct env_result r;
    char *list = (char *)1;
    const char *source = "junk";
    memset(&r, 0, sizeof r);
    r.rc = pulc_partition_from_env(&list, &source, r.err, sizeof r.err);
    if (r.rc == 1) {
        CHECK(list != NULL && source != NULL, "rc 1 without a list or source");
        snprintf(r.list, sizeof r.list, "%s", list ? list : "(null)");
        snprintf(r.source, sizeof r.source, "%s", source ? source : "(null)");
        free(list);
    } else {
        CHECK(list == NULL && source == NULL, "rc %d: list %p source %s", r.rc, (void *)list,
              source ? source : "(null)");
    }
    return r;
}

/* A 6-id test cluster: 4 is missing, 2 and 3 share 127.0.0.1 (two nodes on one host). */
static const char nodes_text[] = "0 198.18.0.1\n"
                                 "1 198.18.0.2\n"
                                 "2 127.0.0.1:18361\n"
                                 "3 127.0.0.1:18362\n"
                                 "5 198.18.0.6\n";

static int load_nodes(struct psp_nodes *nodes, const char *text)
{
    char err[256] = "";
    int rc = psp_nodes_parse(text, 18360, nodes, err, sizeof err);
    CHECK(rc == 0, "psp_nodes_parse: %d %s", rc, err);
    return rc;
}

/* The member ids joined by ' '. Static buffer. */
static const char *members(const uint8_t *m, size_t len)
{
    static char out[1024];
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < len && n < sizeof out; i++)
        if (m[i])
            n += (size_t)snprintf(out + n, sizeof out - n, "%s%zu", n ? " " : "", i);
    return out;
}

/* ---- hostlist expansion ------------------------------------------------------------------ */

TEST(hostlist_examples)
{
    CHECK_EQ_STR(expand("n[1-3,5]"), "n1 n2 n3 n5");
    CHECK_EQ_STR(expand("rack[1-2]-n[01-03]"),
                 "rack1-n01 rack1-n02 rack1-n03 rack2-n01 rack2-n02 rack2-n03");
    CHECK_EQ_STR(expand("n[08-10]"), "n08 n09 n10");
    CHECK_EQ_STR(expand("198.18.0.[2-3]"), "198.18.0.2 198.18.0.3");
    CHECK_EQ_STR(expand("alpha"), "alpha");
    CHECK_EQ_STR(expand("alpha,beta,gamma"), "alpha beta gamma");
    CHECK_EQ_STR(expand("n[7]"), "n7");
    CHECK_EQ_STR(expand("n[3,1,2]"), "n3 n1 n2");
    CHECK_EQ_STR(expand("x[1-2]y"), "x1y x2y");
    CHECK_EQ_STR(expand("[0-2]"), "0 1 2");
    /* Duplicates are kept: deduplication is the partition's business. */
    CHECK_EQ_STR(expand("a,a,n[1-2],n[2-3]"), "a a n1 n2 n2 n3");
    /* White space separates too, and may surround commas. */
    CHECK_EQ_STR(expand("  a b\tc , d,e \n"), "a b c d e");
    CHECK_EQ_STR(expand("n[1-2] m[1-2],o"), "n1 n2 m1 m2 o");
}

TEST(hostlist_padding)
{
    CHECK_EQ_STR(expand("n[001-003]"), "n001 n002 n003");
    CHECK_EQ_STR(expand("n[8-10]"), "n8 n9 n10");
    CHECK_EQ_STR(expand("n[098-101]"), "n098 n099 n100 n101");
    CHECK_EQ_STR(expand("n[0-0]"), "n0");
    CHECK_EQ_STR(expand("n[00]"), "n00");
    /* Each range keeps its own padding. */
    CHECK_EQ_STR(expand("n[01-02,7,009-010]"), "n01 n02 n7 n009 n010");
    /* Padding grows past the written width when the numbers need more digits. */
    CHECK_EQ_STR(expand("n[9-11]"), "n9 n10 n11");
    CHECK_EQ_STR(expand("n[99-101]"), "n99 n100 n101");
    CHECK_EQ_STR(expand("n[999999998-999999999]"), "n999999998 n999999999");
}

TEST(hostlist_cartesian_product)
{
    CHECK_EQ_STR(expand("a[1-2]b[3-4]c"), "a1b3c a1b4c a2b3c a2b4c");
    CHECK_EQ_STR(expand("n[1-2][5,7]"), "n15 n17 n25 n27");
    CHECK_EQ_STR(expand("r[0-1]c[0-1]n[0-1]"),
                 "r0c0n0 r0c0n1 r0c1n0 r0c1n1 r1c0n0 r1c0n1 r1c1n0 r1c1n1");
    CHECK_EQ_STR(expand("rack[1,3]-n[01-02],x"), "rack1-n01 rack1-n02 rack3-n01 rack3-n02 x");

    /* 256 * 256 = 65536 hosts is the most a list may have: all there, in order. */
    char **hosts;
    size_t n;
    char err[256] = "";
    CHECK_OK(pulc_hostlist_expand("n[1-256]x[001-256]", &hosts, &n, err, sizeof err));
    REQUIRE(n == PULC_HOSTLIST_MAX, "expanded to %zu hosts: %s", n, err);
    CHECK_EQ_STR(hosts[0], "n1x001");
    CHECK_EQ_STR(hosts[255], "n1x256");
    CHECK_EQ_STR(hosts[256], "n2x001");
    CHECK_EQ_STR(hosts[65535], "n256x256");
    pulc_hostlist_free(hosts, n);
    pulc_hostlist_free(NULL, 0);
}

TEST(hostlist_errors)
{
    CHECK_EQ_STR(expand_err("n[1-3"), "position 2: unbalanced brackets: '[' is not closed");
    CHECK_EQ_STR(expand_err("a,n[1-3,b"), "position 4: unbalanced brackets: '[' is not closed");
    CHECK_EQ_STR(expand_err("n1-3]"), "position 5: unbalanced brackets: ']' without '['");
    CHECK_EQ_STR(expand_err("n[1]]"), "position 5: unbalanced brackets: ']' without '['");
    CHECK_EQ_STR(expand_err("n[[1]]"), "position 3: '[' inside brackets (the '[' at position 2 "
                                       "is not closed; ranges do not nest)");
    CHECK_EQ_STR(expand_err("n[5-3]"),
                 "position 3: reversed range 5-3 in 'n[5-3]' (write the smaller number first)");
    CHECK_EQ_STR(expand_err("a,b[1,10-09]"),
                 "position 7: reversed range 10-09 in 'b[1,10-09]' (write the smaller number "
                 "first)");
    CHECK_EQ_STR(expand_err("a,,b"),
                 "position 3: empty item (two commas in a row); separate names by one comma");
    CHECK_EQ_STR(expand_err("a, ,b"),
                 "position 4: empty item (two commas in a row); separate names by one comma");
    CHECK_EQ_STR(expand_err(",a"),
                 "position 1: empty item (a comma at the start); separate names by one comma");
    CHECK_EQ_STR(expand_err("a,b, "), "position 4: empty item (a comma at the end)");
    CHECK_EQ_STR(expand_err(""), "position 1: empty host list (expected names like n[1-4],x)");
    CHECK_EQ_STR(expand_err(" \t"), "position 1: empty host list (expected names like n[1-4],x)");
    CHECK_EQ_STR(expand_err("n[]"), "position 2: empty brackets in 'n[]'");
    CHECK_EQ_STR(expand_err("n[a]"),
                 "position 3: expected a number or a range like 1-4 in 'n[a]', found 'a'");
    CHECK_EQ_STR(expand_err("n[1,]"),
                 "position 5: expected a number or a range like 1-4 in 'n[1,]', found ']'");
    CHECK_EQ_STR(expand_err("n[1-]"),
                 "position 5: expected a number or a range like 1-4 in 'n[1-]', found ']'");
    CHECK_EQ_STR(expand_err("n[-2]"),
                 "position 3: expected a number or a range like 1-4 in 'n[-2]', found '-'");
    CHECK_EQ_STR(expand_err("n[1 2]"),
                 "position 4: expected ',' or ']' after a range in 'n[1 2]', found ' '");
    CHECK_EQ_STR(expand_err("n[1-2-3]"),
                 "position 6: expected ',' or ']' after a range in 'n[1-2-3]', found '-'");
    CHECK_EQ_STR(expand_err("n[1234567890]"),
                 "position 3: number too long in 'n[1234567890]' (at most 9 digits)");
    /* Long items are shown cut. */
    CHECK_EQ_STR(expand_err("abcdefghijabcdefghijabcdefghijabcdefghijXYZ[2-1]"),
                 "position 45: reversed range 2-1 in 'abcdefghijabcdefghijabcdefghijabcdefghij...' "
                 "(write the smaller number first)");

    /* More than 65536 hosts: in one item, over two items, and in a product. */
    CHECK_EQ_STR(expand_err("n[1-65537]"),
                 "position 1: more than 65536 hosts ('n[1-65537]' brings the list to 65536 or "
                 "more); split the job or name fewer hosts");
    CHECK_EQ_STR(expand_err("n[1-65536],x"),
                 "position 12: more than 65536 hosts ('x' brings the list to 65537); split the job "
                 "or name fewer hosts");
    CHECK_EQ_STR(expand_err("n[1-256]x[1-257]"),
                 "position 1: more than 65536 hosts ('n[1-256]x[1-257]' brings the list to 65536 "
                 "or more); split the job or name fewer hosts");
    CHECK(strstr(expand_err("n[0-999999999]x[0-999999999]y[0-999999999]"), "more than 65536") !=
              NULL,
          "huge product: %s", expand_err("n[0-999999999]x[0-999999999]y[0-999999999]"));

    /* Without an error buffer, and with a short one (cut, terminated). */
    char **hosts = (char **)1;
    size_t n = 5;
    CHECK_RC(pulc_hostlist_expand("n[5-3]", &hosts, &n, NULL, 0), -EINVAL);
    CHECK(hosts == NULL && n == 0, "hosts %p n %zu", (void *)hosts, n);
    char small[12];
    CHECK_RC(pulc_hostlist_expand("n[5-3]", &hosts, &n, small, sizeof small), -EINVAL);
    CHECK_EQ_STR(small, "position 3:");
    CHECK_RC(pulc_hostlist_expand(NULL, &hosts, &n, small, sizeof small), -EINVAL);
}

/* ---- the partition from the environment -------------------------------------------------- */

TEST(settings_rows)
{
    const char *names[] = {"PSP_PARTITION", "PSP_HOSTFILE"};
    for (int i = 0; i < 2; i++) {
        const struct psp_setting *s = psp_setting_find(names[i]);
        REQUIRE(s != NULL, "%s is not in the settings table", names[i]);
        CHECK_EQ_STR(s->def, "");
        CHECK_EQ_STR(s->layer, "pulc");
        CHECK(s->help && strlen(s->help) > 10, "%s has no help", names[i]);
    }
}

TEST(env_none_set)
{
    clear_env();
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 0);
    /* Set but empty counts as not set. */
    setenv("PSP_PARTITION", "", 1);
    setenv("PSP_HOSTFILE", "", 1);
    setenv("SLURM_JOB_NODELIST", "", 1);
    setenv("PBS_NODEFILE", "", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, 0);
    clear_env();
}

TEST(env_precedence)
{
    char hostfile[PATH_LEN], pbsfile[PATH_LEN];
    REQUIRE(temp_file(hostfile, "hf1\nhf2\n") == 0, "temp file: %s", strerror(errno));
    REQUIRE(temp_file(pbsfile, "pbs1\npbs1\npbs2\n") == 0, "temp file: %s", strerror(errno));
    clear_env();

    setenv("PBS_NODEFILE", pbsfile, 1);
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PBS_NODEFILE");
    CHECK_EQ_STR(r.list, "pbs1\npbs2");

    setenv("SLURM_JOB_NODELIST", "sl[1-2]", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "SLURM_JOB_NODELIST");
    CHECK_EQ_STR(r.list, "sl1\nsl2");

    setenv("PSP_HOSTFILE", hostfile, 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PSP_HOSTFILE");
    CHECK_EQ_STR(r.list, "hf1\nhf2");

    setenv("PSP_PARTITION", "p1,p2", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PSP_PARTITION");
    CHECK_EQ_STR(r.list, "p1\np2");

    /* An empty variable falls through to the next one. */
    setenv("PSP_PARTITION", "", 1);
    r = from_env();
    CHECK_EQ_STR(r.source, "PSP_HOSTFILE");
    setenv("PSP_HOSTFILE", "", 1);
    r = from_env();
    CHECK_EQ_STR(r.source, "SLURM_JOB_NODELIST");
    unsetenv("SLURM_JOB_NODELIST");
    r = from_env();
    CHECK_EQ_STR(r.source, "PBS_NODEFILE");

    /* A broken earlier source is an error, not a reason to use a later one. */
    setenv("SLURM_JOB_NODELIST", "n[1-", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "SLURM_JOB_NODELIST: position 2: unbalanced brackets: '[' is not closed");

    clear_env();
    unlink(hostfile);
    unlink(pbsfile);
}

TEST(env_psp_partition)
{
    clear_env();
    setenv("PSP_PARTITION", "0-2,5 n[1-2] 198.18.0.1,n1,1 2-3 host-a 007", 1);
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PSP_PARTITION");
    CHECK_EQ_STR(r.list, "0\n1\n2\n5\nn1\nn2\n198.18.0.1\n3\nhost-a\n007");

    setenv("PSP_PARTITION", "[0-3],2-2", 1);
    r = from_env();
    CHECK_EQ_STR(r.list, "0\n1\n2\n3");

    setenv("PSP_PARTITION", "0,3-1", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "PSP_PARTITION: reversed id range 3-1 (write the smaller id first: 1-3)");

    setenv("PSP_PARTITION", "0-70000", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "PSP_PARTITION: id range 0-70000 is out of range (node ids are 0..65534)");

    setenv("PSP_PARTITION", "0-99999999999999999999999", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK(strstr(r.err, "is out of range") != NULL, "%s", r.err);

    setenv("PSP_PARTITION", "n1,,n2", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "PSP_PARTITION: position 4: empty item (two commas in a row); separate "
                        "names by one comma");

    /* Only white space: set, so not skipped, but names nothing. */
    setenv("PSP_PARTITION", "  ", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err,
                 "PSP_PARTITION: position 1: empty host list (expected names like n[1-4],x)");
    clear_env();
}

TEST(env_hostfile)
{
    char path[PATH_LEN];
    REQUIRE(temp_file(path, "# the partition\n"
                            "\n"
                            "n1 slots=4\n"
                            "n2:8\n"
                            "   n3\t  # rack 3\n"
                            "n1\n"
                            "n2 slots=2 max_slots=4\n"
                            "198.18.0.2:1\n"
                            "\t\n"
                            "0\n"
                            "n4") == 0,
            "temp file: %s", strerror(errno));
    clear_env();
    setenv("PSP_HOSTFILE", path, 1);
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PSP_HOSTFILE");
    CHECK_EQ_STR(r.list, "n1\nn2\nn3\n198.18.0.2\n0\nn4");
    unlink(path);

    /* Errors name the variable, the file and the line. */
    char expect[512];
    REQUIRE(temp_file(path, "n1\nn2 foo\n") == 0, "temp file");
    snprintf(expect, sizeof expect,
             "PSP_HOSTFILE %s: line 2: unexpected 'foo' after host 'n2' (expected "
             "'<host> [slots=N]' or '<host>:N')",
             path);
    setenv("PSP_HOSTFILE", path, 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, expect);
    unlink(path);

    const char *bad_slots[] = {"n1:x\n", "n1:\n", ":4\n", "n1 slots=\n", "n1 slots=x\n"};
    for (int i = 0; i < 5; i++) {
        REQUIRE(temp_file(path, bad_slots[i]) == 0, "temp file");
        setenv("PSP_HOSTFILE", path, 1);
        r = from_env();
        CHECK(r.rc == -EINVAL && strstr(r.err, "line 1: ") != NULL, "'%s': rc %d %s", bad_slots[i],
              r.rc, r.err);
        unlink(path);
    }

    REQUIRE(temp_file(path, "# nothing\n\n   \n") == 0, "temp file");
    setenv("PSP_HOSTFILE", path, 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    snprintf(expect, sizeof expect,
             "PSP_HOSTFILE %s: no host names in the file (write one host per line)", path);
    CHECK_EQ_STR(r.err, expect);
    unlink(path);

    /* A missing file: -ENOENT with the reason; a directory: -EISDIR. */
    setenv("PSP_HOSTFILE", "/nonexistent/psport-hosts", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -ENOENT);
    CHECK_EQ_STR(r.err, "PSP_HOSTFILE /nonexistent/psport-hosts: No such file or directory (set "
                        "PSP_HOSTFILE to a readable file of host names, or unset it)");
    setenv("PSP_HOSTFILE", "/tmp", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EISDIR);
    CHECK_PREFIX(r.err, "PSP_HOSTFILE /tmp: Is a directory");
    clear_env();
}

TEST(env_pbs_nodefile)
{
    char path[PATH_LEN];
    /* One line per slot: hosts repeat, not necessarily next to each other. */
    REQUIRE(temp_file(path, "cn07\ncn07\ncn07\ncn02\ncn07\ncn02\ncn11\r\n\n") == 0, "temp file");
    clear_env();
    setenv("PBS_NODEFILE", path, 1);
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "PBS_NODEFILE");
    CHECK_EQ_STR(r.list, "cn07\ncn02\ncn11");
    unlink(path);

    char expect[256];
    REQUIRE(temp_file(path, "cn01\ncn02 cn03\n") == 0, "temp file");
    setenv("PBS_NODEFILE", path, 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    snprintf(expect, sizeof expect,
             "PBS_NODEFILE %s: line 2: 'cn02 cn03': expected one host name per line", path);
    CHECK_EQ_STR(r.err, expect);
    unlink(path);

    setenv("PBS_NODEFILE", "/nonexistent/nodefile", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -ENOENT);
    CHECK_PREFIX(r.err, "PBS_NODEFILE /nonexistent/nodefile: No such file or directory");

    /* More distinct hosts than a partition may have. */
    REQUIRE(temp_file(path, "") == 0, "temp file");
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL, "fopen %s: %s", path, strerror(errno));
    for (int i = 0; i <= PULC_HOSTLIST_MAX; i++)
        fprintf(f, "h%d\nh%d\n", i, i / 2);
    fclose(f);
    setenv("PBS_NODEFILE", path, 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "PBS_NODEFILE: more than 65536 hosts in the partition");
    unlink(path);
    clear_env();
}

TEST(env_slurm)
{
    clear_env();
    setenv("SLURM_JOB_NODELIST", "node[01-03,07],login1,node02", 1);
    struct env_result r = from_env();
    CHECK_EQ_I64(r.rc, 1);
    CHECK_EQ_STR(r.source, "SLURM_JOB_NODELIST");
    CHECK_EQ_STR(r.list, "node01\nnode02\nnode03\nnode07\nlogin1");

    setenv("SLURM_JOB_NODELIST", "node[01-03],node[9-8]", 1);
    r = from_env();
    CHECK_EQ_I64(r.rc, -EINVAL);
    CHECK_EQ_STR(r.err, "SLURM_JOB_NODELIST: position 18: reversed range 9-8 in 'node[9-8]' "
                        "(write the smaller number first)");

    /* The largest list: every host once, in order, quickly (hashed deduplication). */
    setenv("SLURM_JOB_NODELIST", "n[00001-65536]", 1);
    char *list = NULL;
    const char *source = NULL;
    char err[256] = "";
    CHECK_EQ_I64(pulc_partition_from_env(&list, &source, err, sizeof err), 1);
    REQUIRE(list != NULL, "no list: %s", err);
    size_t lines = 1;
    for (const char *p = list; *p; p++)
        lines += *p == '\n';
    CHECK_EQ_U64(lines, 65536);
    CHECK(strncmp(list, "n00001\nn00002\n", 14) == 0, "list starts %.20s", list);
    CHECK(strlen(list) > 6 && strcmp(list + strlen(list) - 6, "n65536") == 0, "list ends wrong");
    free(list);
    clear_env();
}

/* ---- resolution -------------------------------------------------------------------------- */

TEST(resolve_ids_and_ips)
{
    static struct psp_nodes nodes;
    REQUIRE(load_nodes(&nodes, nodes_text) == 0, "nodes");
    REQUIRE(nodes.count == 6, "count %u", nodes.count);
    uint8_t m[PSP_NODES_MAX];
    char err[512] = "";

    CHECK_EQ_I64(
        pulc_partition_resolve("0\n1", "PSP_PARTITION", &nodes, m, sizeof m, err, sizeof err), 2);
    CHECK_EQ_STR(members(m, sizeof m), "0 1");

    /* The member array is cleared first. */
    memset(m, 0xff, sizeof m);
    CHECK_EQ_I64(pulc_partition_resolve("5", "x", &nodes, m, sizeof m, err, sizeof err), 1);
    CHECK_EQ_STR(members(m, sizeof m), "5");
    CHECK_EQ_U64(m[5], 1);

    CHECK_EQ_I64(pulc_partition_resolve("198.18.0.2", "x", &nodes, m, sizeof m, err, sizeof err),
                 1);
    CHECK_EQ_STR(members(m, sizeof m), "1");

    /* Two nodes on one host: an address means both. */
    CHECK_EQ_I64(pulc_partition_resolve("127.0.0.1", "x", &nodes, m, sizeof m, err, sizeof err), 2);
    CHECK_EQ_STR(members(m, sizeof m), "2 3");

    /* Duplicates, blank lines, surrounding white space, leading zeros, exact array size. */
    uint8_t m6[6];
    CHECK_EQ_I64(pulc_partition_resolve("  0 \n\n0\n\t198.18.0.1\n005\n\n", "x", &nodes, m6,
                                        sizeof m6, err, sizeof err),
                 2);
    CHECK_EQ_STR(members(m6, sizeof m6), "0 5");

    /* The whole cluster. */
    CHECK_EQ_I64(pulc_partition_resolve("0\n1\n2\n3\n5", "x", &nodes, m, sizeof m, err, sizeof err),
                 5);
    CHECK_EQ_STR(members(m, sizeof m), "0 1 2 3 5");

    /* The single-node cluster. */
    static struct psp_nodes single;
    psp_nodes_single(&single, 18360);
    CHECK_EQ_I64(pulc_partition_resolve("0", "x", &single, m, sizeof m, err, sizeof err), 1);
    CHECK_EQ_STR(members(m, sizeof m), "0");
}

TEST(resolve_localhost)
{
    /* What getaddrinfo makes of "localhost" (AF_INET): 127.0.0.1 on any sane host. */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    int g = getaddrinfo("localhost", NULL, &hints, &res);
    REQUIRE(g == 0, "getaddrinfo(localhost): %s", gai_strerror(g));
    char addr[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, addr, sizeof addr);
    freeaddrinfo(res);
    CHECK_EQ_STR(addr, "127.0.0.1");

    static struct psp_nodes nodes;
    REQUIRE(load_nodes(&nodes, nodes_text) == 0, "nodes");
    uint8_t m[PSP_NODES_MAX];
    char err[512] = "";
    CHECK_EQ_I64(pulc_partition_resolve("localhost", "x", &nodes, m, sizeof m, err, sizeof err), 2);
    CHECK_EQ_STR(members(m, sizeof m), "2 3");
    CHECK_EQ_I64(
        pulc_partition_resolve("localhost\n0\n2", "x", &nodes, m, sizeof m, err, sizeof err), 3);
    CHECK_EQ_STR(members(m, sizeof m), "0 2 3");
}

TEST(resolve_unknown)
{
    static struct psp_nodes nodes;
    REQUIRE(load_nodes(&nodes, nodes_text) == 0, "nodes");
    uint8_t m[PSP_NODES_MAX];
    char err[512] = "";

    CHECK_RC(pulc_partition_resolve("0\n9", "PSP_PARTITION", &nodes, m, sizeof m, err, sizeof err),
             -ENXIO);
    CHECK_EQ_STR(err, "host '9' (from PSP_PARTITION) is not a node of this cluster: nodes file has "
                      "ids 0..5; remove it from PSP_PARTITION or describe it in the nodes file");

    /* Inside 0..N-1 but not described. */
    CHECK_RC(pulc_partition_resolve("4", "PSP_HOSTFILE", &nodes, m, sizeof m, err, sizeof err),
             -ENXIO);
    CHECK_EQ_STR(err,
                 "host '4' (from PSP_HOSTFILE) is not a node of this cluster: nodes file has ids "
                 "0..5, but not this one; remove it from PSP_HOSTFILE or describe it in the nodes "
                 "file");

    CHECK_RC(
        pulc_partition_resolve("99999999999999999999", "x", &nodes, m, sizeof m, err, sizeof err),
        -ENXIO);
    CHECK_PREFIX(err, "host '99999999999999999999' (from x) is not a node of this cluster: nodes "
                      "file has ids 0..5;");

    CHECK_RC(pulc_partition_resolve("198.18.0.9", "SLURM_JOB_NODELIST", &nodes, m, sizeof m, err,
                                    sizeof err),
             -ENXIO);
    CHECK_EQ_STR(err, "host '198.18.0.9' (from SLURM_JOB_NODELIST) is not a node of this cluster: "
                      "nodes file has ids 0..5, none with this address; remove it from "
                      "SLURM_JOB_NODELIST or add it to the nodes file");

    /* A name that resolves, but to no node's address. */
    static struct psp_nodes remote;
    REQUIRE(load_nodes(&remote, "0 198.18.0.1\n1 198.18.0.2\n") == 0, "nodes");
    CHECK_RC(
        pulc_partition_resolve("localhost", "PBS_NODEFILE", &remote, m, sizeof m, err, sizeof err),
        -ENXIO);
    CHECK_EQ_STR(err, "host 'localhost' (from PBS_NODEFILE) is not a node of this cluster: nodes "
                      "file has ids 0..1, none with address 127.0.0.1 (what 'localhost' resolves "
                      "to); remove it from PBS_NODEFILE or add it to the nodes file");

    /* A name that does not resolve (.invalid is reserved, RFC 6761). */
    CHECK_RC(
        pulc_partition_resolve("no-such-host.invalid", NULL, &nodes, m, sizeof m, err, sizeof err),
        -ENXIO);
    CHECK_PREFIX(err, "host 'no-such-host.invalid' (from the partition) is not a node of this "
                      "cluster: nodes file has ids 0..5");
    printf("# %s\n", err);

    /* A space inside an entry; an overlong entry. */
    CHECK_RC(pulc_partition_resolve("n1 n2", "x", &nodes, m, sizeof m, err, sizeof err), -ENXIO);
    CHECK_EQ_STR(err, "host 'n1 n2' (from x) is not a node of this cluster: one host per line, "
                      "without spaces");
    char longname[400];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_RC(pulc_partition_resolve(longname, "x", &nodes, m, sizeof m, err, sizeof err), -ENXIO);
    CHECK(strstr(err, "is not a node of this cluster: the name is longer than 255 characters") !=
              NULL,
          "%s", err);

    /* An empty description (psp_nodes_parse refuses to make one; a zeroed struct is one). */
    static struct psp_nodes none;
    memset(&none, 0, sizeof none);
    CHECK_RC(pulc_partition_resolve("0", "x", &none, m, sizeof m, err, sizeof err), -ENXIO);
    CHECK(strstr(err, "nodes file has no nodes") != NULL, "%s", err);
}

TEST(resolve_bad_arguments)
{
    static struct psp_nodes nodes;
    REQUIRE(load_nodes(&nodes, nodes_text) == 0, "nodes");
    uint8_t m[PSP_NODES_MAX];
    char err[512] = "";
    CHECK_RC(pulc_partition_resolve("", "PSP_PARTITION", &nodes, m, sizeof m, err, sizeof err),
             -EINVAL);
    CHECK_EQ_STR(err, "the partition from PSP_PARTITION names no hosts");
    CHECK_RC(pulc_partition_resolve("\n \n\t", "x", &nodes, m, sizeof m, err, sizeof err), -EINVAL);
    CHECK_RC(pulc_partition_resolve(NULL, "x", &nodes, m, sizeof m, err, sizeof err), -EINVAL);
    /* Too small a member array for the nodes file. */
    CHECK_RC(pulc_partition_resolve("0", "x", &nodes, m, 5, err, sizeof err), -EINVAL);
    CHECK_EQ_STR(err, "internal error: partition member array of 5 entries for 6 node ids");
    CHECK_RC(pulc_partition_resolve("0", "x", &nodes, NULL, 0, NULL, 0), -EINVAL);
}

TEST(from_env_to_members)
{
    static struct psp_nodes nodes;
    REQUIRE(load_nodes(&nodes, nodes_text) == 0, "nodes");
    clear_env();
    setenv("SLURM_JOB_NODELIST", "198.18.0.[1-2],localhost", 1);
    char *list = NULL;
    const char *source = NULL;
    char err[512] = "";
    CHECK_EQ_I64(pulc_partition_from_env(&list, &source, err, sizeof err), 1);
    REQUIRE(list != NULL, "%s", err);
    uint8_t m[PSP_NODES_MAX];
    CHECK_EQ_I64(pulc_partition_resolve(list, source, &nodes, m, sizeof m, err, sizeof err), 4);
    CHECK_EQ_STR(members(m, sizeof m), "0 1 2 3");
    free(list);

    setenv("PSP_PARTITION", "0-1 5 7", 1);
    CHECK_EQ_I64(pulc_partition_from_env(&list, &source, err, sizeof err), 1);
    REQUIRE(list != NULL, "%s", err);
    CHECK_RC(pulc_partition_resolve(list, source, &nodes, m, sizeof m, err, sizeof err), -ENXIO);
    CHECK_PREFIX(err, "host '7' (from PSP_PARTITION) is not a node of this cluster: nodes file "
                      "has ids 0..5");
    free(list);
    clear_env();
}

TEST_MAIN()
