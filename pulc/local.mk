# pulc/: libpulc (installed), the psid daemon and psinfo (pulc/README.md).
PULC_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/pulc/include -I$(top_srcdir)/pulc/src \
	-I$(top_srcdir)/kmod

lib_LTLIBRARIES += pulc/libpulc.la
include_HEADERS = pulc/include/pulc.h
pulc_libpulc_la_SOURCES = \
	pulc/src/area.c pulc/src/area.h pulc/src/marea.c pulc/src/marea.h \
	pulc/src/lring.c pulc/src/lring.h pulc/src/local.c \
	pulc/src/wakefence.c pulc/src/wakefence.h pulc/src/yield.c \
	pulc/src/proto.c pulc/src/proto.h pulc/src/port.c pulc/src/pulc_int.h \
	pulc/src/stream.c \
	pulc/src/raw_rx.c pulc/src/rawdata.c \
	pulc/src/psk_client.c pulc/src/psk_client.h \
	pulc/src/psk_dev.c pulc/src/psk_dev.h \
	pulc/src/hal.c pulc/src/hal.h \
	pulc/src/partition.c pulc/src/partition.h \
	pulc/src/spawn.c pulc/src/spawn_proto.h \
	pulc/src/init.c pulc/include/pulc.h kmod/psport_abi.h
pulc_libpulc_la_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_libpulc_la_LIBADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la -lpthread

bin_PROGRAMS += pulc/psid/psid pulc/tools/psinfo
pulc_psid_psid_SOURCES = pulc/psid/psid.c pulc/psid/psid_int.h \
	pulc/psid/cluster.c pulc/psid/tasks.c pulc/psid/cores.c pulc/psid/cores.h \
	pulc/psid/dlink.c pulc/psid/dlink.h \
	pulc/psid/dmsg.c pulc/psid/dmsg.h pulc/src/spawn_proto.h \
	pulc/src/partition.c pulc/src/partition.h \
	pulc/src/area.c pulc/src/area.h pulc/src/marea.c \
	pulc/src/marea.h pulc/src/lring.c pulc/src/lring.h pulc/src/proto.c pulc/src/proto.h pulc/src/raw_rx.c
pulc_psid_psid_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_psid_psid_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la -lpthread \
	$(HWLOC_LIBS)

# psspawn (start tasks, logger, spawn benchmark) and psiadmin (nodes, tasks, counters, kill).
bin_PROGRAMS += pulc/tools/psspawn pulc/tools/psiadmin
pulc_tools_psspawn_SOURCES = pulc/tools/psspawn.c
pulc_tools_psspawn_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_tools_psspawn_LDADD = pulc/libpulc.la
pulc_tools_psiadmin_SOURCES = pulc/tools/psiadmin.c
pulc_tools_psiadmin_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_tools_psiadmin_LDADD = pulc/libpulc.la

pulc_tools_psinfo_SOURCES = pulc/tools/psinfo.c
pulc_tools_psinfo_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_tools_psinfo_LDADD = pulc/libpulc.la

EXTRA_DIST += pulc/README.md

# The psid tests' client (test/integration/psid-basic), once announcing ABI version 99.
check_PROGRAMS += test/unit/pulc_attach_client test/unit/pulc_attach_client_abi99
test_unit_pulc_attach_client_SOURCES = test/unit/pulc_attach_client.c
test_unit_pulc_attach_client_CPPFLAGS = $(PULC_CPPFLAGS)
test_unit_pulc_attach_client_LDADD = pulc/libpulc.la
test_unit_pulc_attach_client_LDFLAGS = -no-install
test_unit_pulc_attach_client_abi99_SOURCES = test/unit/pulc_attach_client.c
test_unit_pulc_attach_client_abi99_CPPFLAGS = $(PULC_CPPFLAGS) -DPULC_TEST_ABI_VERSION=99
test_unit_pulc_attach_client_abi99_LDADD = pulc/libpulc.la
test_unit_pulc_attach_client_abi99_LDFLAGS = -no-install

# Port-D tests against a running psid (test/integration/pulc-ports).
check_PROGRAMS += test/unit/test_yield
test_unit_test_yield_SOURCES = test/unit/test_yield.c test/harness.h
test_unit_test_yield_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/test
test_unit_test_yield_LDADD = pulc/libpulc.la
test_unit_test_yield_LDFLAGS = -no-install

check_PROGRAMS += test/unit/test_pulc_portd
test_unit_test_pulc_portd_SOURCES = test/unit/test_pulc_portd.c test/unit/pulc_test_roles.h test/harness.h
test_unit_test_pulc_portd_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/test
test_unit_test_pulc_portd_LDADD = pulc/libpulc.la
test_unit_test_pulc_portd_LDFLAGS = -no-install

# Port-S and port-M stream tests against a running psid (like test_pulc_portd).
check_PROGRAMS += test/unit/test_pulc_streams
test_unit_test_pulc_streams_SOURCES = test/unit/test_pulc_streams.c test/unit/pulc_test_roles.h test/harness.h
test_unit_test_pulc_streams_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/test
test_unit_test_pulc_streams_LDADD = pulc/libpulc.la
test_unit_test_pulc_streams_LDFLAGS = -no-install

# Partitions: hostlist expansion, PSP_PARTITION/PSP_HOSTFILE/Slurm/PBS, resolution to node ids.
check_PROGRAMS += test/unit/test_partition
test_unit_test_partition_SOURCES = test/unit/test_partition.c pulc/src/partition.c \
	pulc/src/partition.h test/harness.h
test_unit_test_partition_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/test
test_unit_test_partition_LDADD = mcp/link/libmcplink.la mcp/libmcp.la common/libpspcommon.la

# The spawner's stdin flow control against a psid that reports stdin taken and an older one
# that does not (a psid thread of the test's own on a UNIX socket).
check_PROGRAMS += test/unit/test_spawner_stdin
test_unit_test_spawner_stdin_SOURCES = test/unit/test_spawner_stdin.c test/harness.h
test_unit_test_spawner_stdin_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/test
test_unit_test_spawner_stdin_LDADD = pulc/libpulc.la
test_unit_test_spawner_stdin_LDFLAGS = -no-install

# Traffic programs of the all-to-all and kill tests (test/integration/pulc-alltoall, pulc-kill).
check_PROGRAMS += test/unit/pulc_stress
test_unit_pulc_stress_SOURCES = test/unit/pulc_stress.c
test_unit_pulc_stress_CPPFLAGS = $(PULC_CPPFLAGS)
test_unit_pulc_stress_LDADD = pulc/libpulc.la
test_unit_pulc_stress_LDFLAGS = -no-install

# pulc-pp: the PULC benchmark (HAL and port-D, inter- and intra-node; seed table 3 style),
# tested by test/integration/pulc-pp.
bin_PROGRAMS += pulc/tools/pulc-pp
pulc_tools_pulc_pp_SOURCES = pulc/tools/pulc-pp.c
pulc_tools_pulc_pp_CPPFLAGS = $(PULC_CPPFLAGS)
pulc_tools_pulc_pp_LDADD = pulc/libpulc.la -lm

# The daemon link (dlink.c: fragments, channels, faults, malformed frames) and the daemon
# messages' check (dmsg.c), on 127.0.0.1.
check_PROGRAMS += test/unit/test_dlink
test_unit_test_dlink_SOURCES = test/unit/test_dlink.c pulc/psid/dlink.c pulc/psid/dlink.h \
	pulc/psid/dmsg.c pulc/psid/dmsg.h test/harness.h
test_unit_test_dlink_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/pulc/psid -I$(top_srcdir)/test
test_unit_test_dlink_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la
test_unit_test_dlink_LDFLAGS = -no-install

# A rogue psid: malformed daemon messages to the other psids (psid integration tests).
check_PROGRAMS += test/unit/psid_rogue
test_unit_psid_rogue_SOURCES = test/unit/psid_rogue.c pulc/psid/dlink.c pulc/psid/dlink.h \
	pulc/psid/dmsg.c pulc/psid/dmsg.h
test_unit_psid_rogue_CPPFLAGS = $(PULC_CPPFLAGS) -I$(top_srcdir)/pulc/psid
test_unit_psid_rogue_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la
test_unit_psid_rogue_LDFLAGS = -no-install

# The kernel module test's frame injector (test/kmod/kmod-qemu runs it in the guest).
check_PROGRAMS += test/kmod/psk_inject
test_kmod_psk_inject_SOURCES = test/kmod/psk_inject.c
test_kmod_psk_inject_CPPFLAGS = $(AM_CPPFLAGS)
test_kmod_psk_inject_LDADD = mcp/libmcp.la common/libpspcommon.la
# ... and its client of the first device ABI (INFO answered, ATTACH refused with EPROTO).
check_PROGRAMS += test/kmod/psk_oldabi
test_kmod_psk_oldabi_SOURCES = test/kmod/psk_oldabi.c
test_kmod_psk_oldabi_CPPFLAGS = $(PULC_CPPFLAGS)
