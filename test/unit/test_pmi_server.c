/*
 * test_pmi_server.c — mpirun's PMI-1 server: the exchanges MPICH's simple PMI client makes,
 * byte for byte, and PMI_process_mapping for block and cyclic placements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pmi_server.h"

/* Feed a command line to conn; return everything queued for conn (static buffer). */
static const char *say(struct pmi_server *s, int conn, const char *line, int *ev)
{
    static char out[8192];
    int code = 0;
    const char *msg = NULL;
    int e = pmi_server_input(s, conn, line, strlen(line), &code, &msg);
    if (ev)
        *ev = e;
    size_t len;
    const char *o = pmi_server_output(s, conn, &len);
    snprintf(out, sizeof out, "%.*s", (int)len, o ? o : "");
    pmi_server_consumed(s, conn, len);
    return out;
}

TEST(handshake_and_kvs)
{
    struct pmi_server *s = pmi_server_new(2, "kvs_1", "(vector,(0,1,2))");
    REQUIRE(s != NULL, "server");
    int a = pmi_server_connect(s), b = pmi_server_connect(s);
    CHECK(a >= 0 && b >= 0 && a != b, "connections %d %d", a, b);
    CHECK_EQ_STR(say(s, a, "cmd=initack pmiid=1\n", NULL),
                 "cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n");
    CHECK_EQ_I64(pmi_server_rank(s, a), 1);
    CHECK_EQ_STR(say(s, a, "cmd=init pmi_version=1 pmi_subversion=1\n", NULL),
                 "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
    CHECK_EQ_STR(say(s, a, "cmd=get_maxes\n", NULL),
                 "cmd=maxes kvsname_max=64 keylen_max=256 vallen_max=1024 rc=0\n");
    CHECK_EQ_STR(say(s, a, "cmd=get_my_kvsname\n", NULL), "cmd=my_kvsname kvsname=kvs_1 rc=0\n");
    CHECK_EQ_STR(say(s, a, "cmd=get_appnum\n", NULL), "cmd=appnum appnum=0 rc=0\n");
    CHECK_EQ_STR(say(s, a, "cmd=get_universe_size\n", NULL), "cmd=universe_size size=2 rc=0\n");
    /* A command split across reads is served once complete. */
    CHECK_EQ_STR(say(s, a, "cmd=put kvsname=kvs_1 key=bc-1 ", NULL), "");
    CHECK_EQ_STR(say(s, a, "value=port#3:17\n", NULL), "cmd=put_result rc=0 msg=success\n");
    CHECK_EQ_STR(say(s, b, "cmd=get kvsname=kvs_1 key=bc-1\n", NULL),
                 "cmd=get_result rc=0 msg=success value=port#3:17\n");
    CHECK_EQ_STR(say(s, b, "cmd=get kvsname=kvs_1 key=PMI_process_mapping\n", NULL),
                 "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))\n");
    CHECK_EQ_STR(say(s, b, "cmd=get kvsname=kvs_1 key=nothere\n", NULL),
                 "cmd=get_result rc=-1 msg=key_nothere_not_found\n");
    /* Two commands in one read. */
    CHECK_EQ_STR(
        say(s, b, "cmd=put kvsname=kvs_1 key=x value=1\ncmd=get kvsname=kvs_1 key=x\n", NULL),
        "cmd=put_result rc=0 msg=success\ncmd=get_result rc=0 msg=success value=1\n");
    /* Barrier: no answer until both are in, then both get barrier_out. */
    CHECK_EQ_STR(say(s, a, "cmd=barrier_in\n", NULL), "");
    CHECK_EQ_STR(say(s, b, "cmd=barrier_in\n", NULL), "cmd=barrier_out rc=0\n");
    size_t len;
    const char *o = pmi_server_output(s, a, &len);
    CHECK(o && len == strlen("cmd=barrier_out rc=0\n") && !memcmp(o, "cmd=barrier_out rc=0\n", len),
          "rank 1 got its barrier_out");
    pmi_server_consumed(s, a, len);
    int ev;
    CHECK_EQ_STR(say(s, a, "cmd=finalize\n", &ev), "cmd=finalize_ack rc=0\n");
    CHECK_EQ_I64(ev, PMI_EV_FINALIZE);
    CHECK_EQ_I64(pmi_server_finalized(s), 1);
    CHECK_EQ_STR(say(s, b, "cmd=publish_name service=a port=b\n", NULL),
                 "cmd=publish_result rc=-1 msg=not_supported\n");
    pmi_server_free(s);
}

TEST(abort_and_errors)
{
    struct pmi_server *s = pmi_server_new(4, "k", "(vector,(0,1,4))");
    int a = pmi_server_connect(s);
    int code = 0, ev;
    const char *msg = NULL;
    const char *line = "cmd=abort exitcode=7 message=rank 2 gave up here\n";
    ev = pmi_server_input(s, a, line, strlen(line), &code, &msg);
    CHECK_EQ_I64(ev, PMI_EV_ABORT);
    CHECK_EQ_I64(code, 7);
    CHECK_EQ_STR(msg, "rank 2 gave up here");
    int b = pmi_server_connect(s);
    say(s, b, "cmd=initack pmiid=4\n", &ev);
    CHECK_EQ_I64(ev, PMI_EV_ERROR);
    int c = pmi_server_connect(s);
    say(s, c, "cmd=initack pmiid=x\n", &ev);
    CHECK_EQ_I64(ev, PMI_EV_ERROR);
    int d = pmi_server_connect(s);
    CHECK_EQ_STR(say(s, d, "cmd=frobnicate\n", &ev),
                 "cmd=frobnicate_result rc=-1 msg=unknown_command\n");
    CHECK_EQ_I64(ev, PMI_EV_NONE);
    /* A disconnect inside the barrier takes that rank out of it. */
    say(s, d, "cmd=barrier_in\n", NULL);
    pmi_server_disconnect(s, d);
    int e2 = pmi_server_connect(s);
    CHECK_EQ_I64(e2, d);
    pmi_server_free(s);
}

/* Which ranks left MPI without finalizing: announced (initack) and no finalize since, also
 * after their connection closed (mpirun asks when the rank's exit comes). */
TEST(unfinished_ranks)
{
    struct pmi_server *s = pmi_server_new(3, "k", "(vector,(0,1,3))");
    REQUIRE(s != NULL, "server");
    for (int r = -1; r <= 3; r++)
        CHECK_EQ_I64(pmi_server_unfinished(s, r), 0); /* nobody announced yet; out of range */
    int a = pmi_server_connect(s), b = pmi_server_connect(s);
    say(s, a, "cmd=initack pmiid=0\n", NULL);
    say(s, b, "cmd=initack pmiid=2\n", NULL);
    CHECK_EQ_I64(pmi_server_unfinished(s, 0), 1);
    CHECK_EQ_I64(pmi_server_unfinished(s, 1), 0); /* never started MPI: not ours to judge */
    CHECK_EQ_I64(pmi_server_unfinished(s, 2), 1);
    int ev;
    CHECK_EQ_STR(say(s, a, "cmd=finalize\n", &ev), "cmd=finalize_ack rc=0\n");
    pmi_server_disconnect(s, a);
    pmi_server_disconnect(s, b);
    CHECK_EQ_I64(pmi_server_unfinished(s, 0), 0);
    CHECK_EQ_I64(pmi_server_unfinished(s, 2), 1);
    /* a finalized rank that announces itself again (a reconnect) stays finalized */
    int c = pmi_server_connect(s);
    say(s, c, "cmd=initack pmiid=0\n", NULL);
    CHECK_EQ_I64(pmi_server_unfinished(s, 0), 0);
    pmi_server_free(s);
}

TEST(process_mapping)
{
    char buf[256];
    int block[] = {5, 5, 5, 5, 7, 7, 7, 7};
    CHECK_OK(pmi_process_mapping(block, 8, buf, sizeof buf));
    CHECK_EQ_STR(buf, "(vector,(0,2,4))");
    int cyclic[] = {0, 1, 2, 3, 0, 1, 2, 3};
    CHECK_OK(pmi_process_mapping(cyclic, 8, buf, sizeof buf));
    CHECK_EQ_STR(buf, "(vector,(0,4,1),(0,4,1))");
    int one[] = {3, 3, 3};
    CHECK_OK(pmi_process_mapping(one, 3, buf, sizeof buf));
    CHECK_EQ_STR(buf, "(vector,(0,1,3))");
    int uneven[] = {0, 0, 1, 2, 2};
    CHECK_OK(pmi_process_mapping(uneven, 5, buf, sizeof buf));
    CHECK_EQ_STR(buf, "(vector,(0,1,2),(1,1,1),(2,1,2))");
    CHECK_RC(pmi_process_mapping(cyclic, 8, buf, 10), -1);
}

TEST_MAIN()
