## ch_psport/Makefile.mk — the psport channel in MPICH's build, as
## src/mpid/ch3/channels/psport (scripts/build-mpich links it there and lists it in
## src/mpid/ch3/channels/Makefile.mk).

errnames_txt_files += src/mpid/ch3/channels/psport/errnames.txt

if BUILD_CH3_PSPORT

AM_CPPFLAGS +=                                            \
    -I$(top_srcdir)/src/mpid/ch3/channels/psport/include  \
    -I$(top_builddir)/src/mpid/ch3/channels/psport/include

noinst_HEADERS +=                                          \
    src/mpid/ch3/channels/psport/include/mpidi_ch3_pre.h   \
    src/mpid/ch3/channels/psport/include/mpidi_ch3_post.h  \
    src/mpid/ch3/channels/psport/include/mpidi_ch3_impl.h

mpi_core_sources +=                                        \
    src/mpid/ch3/channels/psport/src/psport_init.c         \
    src/mpid/ch3/channels/psport/src/psport_send.c         \
    src/mpid/ch3/channels/psport/src/psport_recv.c         \
    src/mpid/ch3/channels/psport/src/psport_rndv.c         \
    src/mpid/ch3/channels/psport/src/psport_progress.c     \
    src/mpid/ch3/channels/psport/src/psport_dynamic.c      \
    src/mpid/ch3/channels/psport/src/psport_part.c         \
    src/mpid/ch3/channels/psport/src/psport_win.c

endif BUILD_CH3_PSPORT
