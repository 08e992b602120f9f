/*
 * tool.h — what psport's command-line tools share: "<prog>: message" on stderr, the exit codes,
 * option numbers with k/m/g suffixes, and stdin made /dev/null.  Each tool calls
 * psp_tool_init() first.
 */
#ifndef PSPORT_COMMON_TOOL_H
#define PSPORT_COMMON_TOOL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define PSP_EXIT_FAIL  1 /* the run failed */
#define PSP_EXIT_USAGE 2 /* bad command line or settings */

/* Name the tool (prog, kept by reference) and its usage printer for the functions below. */
void psp_tool_init(const char *prog, void (*usage)(FILE *));

/* "<prog>: <message>" on stderr. */
void psp_tool_vmessage(const char *fmt, va_list ap);

/* A bad command line: message, the usage on stderr, exit PSP_EXIT_USAGE. */
void psp_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A failure that ends the run: stdout flushed, message, exit PSP_EXIT_FAIL. */
void psp_fail_exit(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Option --name's value text as a number in min..max (k/m/g suffixes), or a usage error. */
uint64_t psp_opt_u64(const char *name, const char *text, uint64_t min, uint64_t max);

/* Make stdin /dev/null: whoever writes into our stdin's pipe gets EPIPE, as in a pipeline whose
 * reader ended (a launcher whose rank 0, the reader of what it forwards, has exited). */
void psp_stdin_to_null(void);

#endif
