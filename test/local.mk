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
test_unit_test_link_LDADD = mcp/link/libmcplink.la common/libpspcommon.la
# --- end links ---

# --- settings and log ---
check_PROGRAMS += test/unit/test_settings
test_unit_test_settings_SOURCES = test/unit/test_settings.c test/harness.h
test_unit_test_settings_CPPFLAGS = $(TEST_CPPFLAGS)
test_unit_test_settings_LDADD = common/libpspcommon.la
# --- end settings and log ---
