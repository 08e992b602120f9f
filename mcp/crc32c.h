/*
 * crc32c.h — CRC-32C (Castagnoli), the frame checksum.  Uses the SSE4.2 instruction when the
 * CPU has it, a table otherwise.  No allocation, usable from the firmware.
 */
#ifndef PSPORT_MCP_CRC32C_H
#define PSPORT_MCP_CRC32C_H

#include "mcp_types.h"

/* Continue a CRC-32C over len bytes. Start with crc = 0; the result is final (no extra xor). */
uint32_t mcp_crc32c(uint32_t crc, const void *data, size_t len);

#endif
