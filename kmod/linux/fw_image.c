// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/mcp_image.c compiled into the module: the memory image's layout and format.
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "mcp_image.c"
