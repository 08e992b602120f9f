# mcp/: the firmware (kernel-compatible core) and its user-space glue.
noinst_LTLIBRARIES += mcp/libmcp.la
mcp_libmcp_la_SOURCES = \
	mcp/crc32c.c mcp/crc32c.h \
	mcp/mcp_wire.c mcp/mcp_wire.h \
	mcp/mcp_image.c mcp/mcp_image.h \
	mcp/mcp_rdp.c mcp/mcp_repair.c mcp/mcp_fw.h mcp/mcp.h mcp/lanai.h mcp/mcp_compat.h \
	mcp/mcp_types.h \
	mcp/mcp_host.c mcp/mcp_host.h \
	mcp/mcp_env.c mcp/mcp_env.h
# Convenience libraries do not embed one another (a shared library that takes several would
# get common/ twice): consumers list common/libpspcommon.la themselves.
EXTRA_DIST += mcp/PROTOCOL.md
