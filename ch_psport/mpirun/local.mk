# ch_psport/mpirun: mpirun/mpiexec (PULC spawn + PMI-1 server); the PMI server's unit test.
bin_PROGRAMS += ch_psport/mpirun/mpirun
ch_psport_mpirun_mpirun_SOURCES = ch_psport/mpirun/mpirun.c ch_psport/mpirun/pmi_server.c \
	ch_psport/mpirun/pmi_server.h
ch_psport_mpirun_mpirun_CPPFLAGS = $(PULC_CPPFLAGS)
ch_psport_mpirun_mpirun_LDADD = pulc/libpulc.la

# mpiexec is mpirun under its other name.
install-exec-hook: install-mpiexec
install-mpiexec:
	cd $(DESTDIR)$(bindir) && rm -f mpiexec && $(LN_S) mpirun mpiexec

check_PROGRAMS += test/unit/test_pmi_server
test_unit_test_pmi_server_SOURCES = test/unit/test_pmi_server.c ch_psport/mpirun/pmi_server.c \
	ch_psport/mpirun/pmi_server.h test/harness.h
test_unit_test_pmi_server_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/ch_psport/mpirun -I$(top_srcdir)/test
test_unit_test_pmi_server_LDADD = common/libpspcommon.la

# A PMI-1 client without MPI, for mpirun's integration test (test/integration/mpirun).
check_PROGRAMS += test/unit/pmi_probe
test_unit_pmi_probe_SOURCES = test/unit/pmi_probe.c
test_unit_pmi_probe_LDFLAGS = -no-install
