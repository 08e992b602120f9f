[#] start of __file__
dnl ch_psport/subconfigure.m4 — configure part of the ch3:psport channel: the condition that
dnl builds it, the thread level it supports, and a check that PULC (libpulc, pulc.h from
dnl psport's prefix, given by CPPFLAGS/LDFLAGS/LIBS: scripts/build-mpich) is there.

AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_CONDITIONAL([BUILD_CH3_PSPORT],[test "X$device_name" = "Xch3" -a "X$channel_name" = "Xpsport"])
    AM_COND_IF([BUILD_CH3_PSPORT],[
        AC_MSG_NOTICE([RUNNING PREREQ FOR ch3:psport])
        dnl MPI_THREAD_MULTIPLE through CH3's global lock (psport_progress.c)
        MPID_MAX_THREAD_LEVEL=MPI_THREAD_MULTIPLE
        MPID_CH3I_CH_HCOLL_BCOL="basesmuma,basesmuma,ptpcoll"
    ])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH3_PSPORT],[
AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch3:psport])
AC_CHECK_HEADER([pulc.h],[],
    [AC_MSG_ERROR([pulc.h not found: build and install psport first and pass CPPFLAGS=-I<prefix>/include (scripts/build-mpich does)])])
AC_CHECK_FUNC([PSP_WaitPort],[],
    [AC_MSG_ERROR([libpulc with PSP_WaitPort not found: pass LDFLAGS=-L<prefix>/lib LIBS=-lpulc (scripts/build-mpich does)])])
])dnl end AM_COND_IF(BUILD_CH3_PSPORT,...)
])dnl end _BODY

[#] end of __file__
