# test/ — unit test binaries and the suite (run by `make check` through test/run).
#
# To add a unit test:
#  1. write test/unit/test_<thing>.c with `#include "harness.h"`, TEST(...) functions and
#     TEST_MAIN() (see test/harness.h);
#  2. add a block below (in your own local.mk if the code lives elsewhere), e.g.
#
#       check_PROGRAMS += test/unit/test_thing
#       test_unit_test_thing_SOURCES = test/unit/test_thing.c
#       test_unit_test_thing_CPPFLAGS = $(TEST_CPPFLAGS)
#       test_unit_test_thing_LDADD = mcp/libmcp.la common/libpspcommon.la
#
#  3. add a line `<name> <command>` to a test/suite.d/*.list file, e.g.
#       mcp-thing  test/unit/test_thing
#     (commands run in the build directory; tags [full], [root], [timeout=N]: see test/run).
#
# check_PROGRAMS are built by `make check` only; test/run runs whatever the lists name.

# Include path for harness.h.
TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/test

check_PROGRAMS += test/unit/test_harness_selftest
test_unit_test_harness_selftest_SOURCES = test/unit/test_harness_selftest.c test/harness.h
test_unit_test_harness_selftest_CPPFLAGS = $(TEST_CPPFLAGS)

# --- links ---
check_PROGRAMS += test/unit/test_link
test_unit_test_link_SOURCES = test/unit/test_link.c test/harness.h
test_unit_test_link_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_link_LDADD = mcp/link/libmcplink.la mcp/libmcp.la common/libpspcommon.la
# --- end links ---

# --- settings and log ---
check_PROGRAMS += test/unit/test_settings
test_unit_test_settings_SOURCES = test/unit/test_settings.c test/harness.h
test_unit_test_settings_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_settings_LDADD = common/libpspcommon.la
# --- end settings and log ---

# --- firmware tests ---
# RDP (mcp/PROTOCOL.md): table 1 row by row, the buffer states of figure 3, soak under faults,
# edge cases, malformed frames.  rdp_fixture.{c,h}: the shared DUT/peer and cluster scaffolding.
RDP_TEST_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la
RDP_TEST_FIXTURE = test/unit/rdp_fixture.c test/unit/rdp_fixture.h test/harness.h
check_PROGRAMS += test/unit/test_rdp_table1 test/unit/test_rdp_states test/unit/test_rdp_soak \
	test/unit/test_rdp_edge test/unit/test_rdp_malformed
test_unit_test_rdp_table1_SOURCES = test/unit/test_rdp_table1.c $(RDP_TEST_FIXTURE)
test_unit_test_rdp_table1_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_rdp_table1_LDADD = $(RDP_TEST_LDADD)
test_unit_test_rdp_states_SOURCES = test/unit/test_rdp_states.c $(RDP_TEST_FIXTURE)
test_unit_test_rdp_states_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_rdp_states_LDADD = $(RDP_TEST_LDADD)
test_unit_test_rdp_soak_SOURCES = test/unit/test_rdp_soak.c $(RDP_TEST_FIXTURE)
test_unit_test_rdp_soak_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_rdp_soak_LDADD = $(RDP_TEST_LDADD)
test_unit_test_rdp_edge_SOURCES = test/unit/test_rdp_edge.c $(RDP_TEST_FIXTURE)
test_unit_test_rdp_edge_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_rdp_edge_LDADD = $(RDP_TEST_LDADD)
test_unit_test_rdp_malformed_SOURCES = test/unit/test_rdp_malformed.c $(RDP_TEST_FIXTURE)
test_unit_test_rdp_malformed_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_rdp_malformed_LDADD = $(RDP_TEST_LDADD)
# An executor killed at every store of a pass, and mcp_image_repair(): the firmware is compiled
# into the test with MCP_TEST_HOOKS (every MCP_STORE a kill point), so not from libmcp.la.
check_PROGRAMS += test/unit/test_mcp_repair
test_unit_test_mcp_repair_SOURCES = test/unit/test_mcp_repair.c $(RDP_TEST_FIXTURE) \
	mcp/crc32c.c mcp/mcp_wire.c mcp/mcp_image.c mcp/mcp_rdp.c mcp/mcp_repair.c mcp/mcp_host.c
test_unit_test_mcp_repair_CPPFLAGS = $(TEST_CPPFLAGS) -DMCP_TEST_HOOKS
test_unit_test_mcp_repair_LDADD = mcp/link/libmcplink.la common/libpspcommon.la
# The libFuzzer harness test/fuzz/fuzz_frame.c is built by test/fuzz/run-fuzz itself (clang,
# sanitizers); test/ is in EXTRA_DIST as a whole.
# --- end firmware tests ---

# --- crc32c ---
check_PROGRAMS += test/unit/test_crc32c
test_unit_test_crc32c_SOURCES = test/unit/test_crc32c.c test/harness.h
test_unit_test_crc32c_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_crc32c_LDADD = mcp/libmcp.la common/libpspcommon.la
# --- end crc32c ---

# --- rawdata's receive handler, on a message area in the test's memory ---
check_PROGRAMS += test/unit/test_raw_rx
test_unit_test_raw_rx_SOURCES = test/unit/test_raw_rx.c pulc/src/raw_rx.c pulc/src/marea.c \
	pulc/src/area.c pulc/src/lring.c
test_unit_test_raw_rx_CPPFLAGS = $(TEST_CPPFLAGS) $(PULC_CPPFLAGS)
test_unit_test_raw_rx_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la -lpthread
# --- end rawdata ---

# --- benchmarks (test/bench/README.md) ---
# udp-pp: the raw-link baseline of `make bench` (UDP ping-pong and stream, TCP stream).  Built by
# `make check` (the bench-driver test runs it) and `make bench`; test/bench/run compiles it
# itself with cc when it finds no build.
check_PROGRAMS += test/bench/udp-pp
test_bench_udp_pp_SOURCES = test/bench/udp-pp.c
# crc-speed: the frame CRC's speed by each way this CPU has (test/bench/README.md).
check_PROGRAMS += test/bench/crc-speed
test_bench_crc_speed_SOURCES = test/bench/crc-speed.c
test_bench_crc_speed_CPPFLAGS = $(TEST_CPPFLAGS)
test_bench_crc_speed_LDADD = mcp/libmcp.la common/libpspcommon.la
# --- end benchmarks ---
