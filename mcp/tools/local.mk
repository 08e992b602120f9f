# mcp/tools/: firmware-level tools installed to bin.
#   mcp-pp  benchmark and verification between two nodes (firmware vs raw UDP)
bin_PROGRAMS += mcp/tools/mcp-pp
mcp_tools_mcp_pp_SOURCES = mcp/tools/mcp-pp.c
mcp_tools_mcp_pp_LDADD = mcp/libmcp.la mcp/link/libmcplink.la common/libpspcommon.la
