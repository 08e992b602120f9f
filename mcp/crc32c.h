/*
 * crc32c.h — CRC-32C (Castagnoli), the frame checksum.  Uses the fastest way the CPU has: the
 * carry-less multiply (VPCLMULQDQ, on 512- or 256-bit registers) for long runs, the SSE4.2
 * instruction, a table.  No
 * allocation, usable from the firmware.
 */
#ifndef PSPORT_MCP_CRC32C_H
#define PSPORT_MCP_CRC32C_H

#include "mcp_types.h"

/* Continue a CRC-32C over len bytes. Start with crc = 0; the result is final (no extra xor). */
uint32_t mcp_crc32c(uint32_t crc, const void *data, size_t len);

/*
 * mcp_crc32c that also copies the len bytes at src to dst (not overlapping): the folding ways
 * load each byte once for both, where a copy and then a CRC read everything twice.  The frame
 * CRC of a bulk transfer is taken where its bytes are copied anyway (the host filling a send
 * slot, the link putting a frame together).  Returns the continued CRC.
 */
uint32_t mcp_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* The ways to compute it, each also able to do what the ones before it do: a slicing table; the
 * SSE4.2 crc32 instruction in three lanes; the carry-less multiply folding long runs on 256-bit
 * registers (AVX2), on 512-bit ones (AVX-512). */
enum mcp_crc32c_impl { MCP_CRC32C_TABLE, MCP_CRC32C_INSN, MCP_CRC32C_FOLD256, MCP_CRC32C_FOLD512 };

/* mcp_crc32c by one named way, for tests: continues *crc and returns 1, or returns 0 (and
 * leaves *crc) if this CPU cannot do it that way. */
int mcp_crc32c_with(enum mcp_crc32c_impl impl, uint32_t *crc, const void *data, size_t len);

/* mcp_crc32c_copy by one named way, for tests and crc-speed (as mcp_crc32c_with). */
int mcp_crc32c_copy_with(enum mcp_crc32c_impl impl, uint32_t *crc, void *dst, const void *src,
                         size_t len);

#endif
