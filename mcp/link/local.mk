# mcp/link/: the links the firmware runs over (udp, eth, the simulated net), fault injection
# and the nodes file.  Headers are listed with the sources (noinst_HEADERS is not initialised
# at the top level, and `+=` on it would fail automake).
noinst_LTLIBRARIES += mcp/link/libmcplink.la
mcp_link_libmcplink_la_SOURCES = \
	mcp/link/link.c mcp/link/link.h \
	mcp/link/fault.c mcp/link/fault.h \
	mcp/link/nodes.c mcp/link/nodes.h \
	mcp/link/link_sim.c mcp/link/link_sim.h \
	mcp/link/link_sock.c mcp/link/link_sock.h \
	mcp/link/link_udp.c mcp/link/udp_seg.c mcp/link/udp_seg.h \
	mcp/link/udp_pack.c mcp/link/udp_pack.h \
	mcp/link/udp_ring.c mcp/link/udp_ring.h \
	mcp/link/udp_eth.c mcp/link/udp_eth.h \
	mcp/link/link_eth.c mcp/link/pkt_ring.c mcp/link/pkt_ring.h
# Consumers add common/libpspcommon.la (see mcp/local.mk).
