# common/ — settings table, logging and the tools' shared helpers, linked into every psport program and library.
# Link with: <target>_LIBADD / _LDADD = common/libpspcommon.la
noinst_LTLIBRARIES += common/libpspcommon.la
common_libpspcommon_la_SOURCES = \
	common/settings.c \
	common/settings.h \
	common/log.c \
	common/log.h \
	common/tool.c \
	common/tool.h
