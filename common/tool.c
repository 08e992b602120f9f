/*
 * tool.c — messages, exit codes, option numbers and stdin of psport's command-line tools.
 */
#include "tool.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "settings.h"

static const char *tool_prog = "psport";
static void (*tool_usage)(FILE *);

void psp_tool_init(const char *prog, void (*usage)(FILE *))
{
    tool_prog = prog;
    tool_usage = usage;
}

void psp_tool_vmessage(const char *fmt, va_list ap)
{
    fprintf(stderr, "%s: ", tool_prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}

void psp_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    psp_tool_vmessage(fmt, ap);
    va_end(ap);
    if (tool_usage)
        tool_usage(stderr);
    exit(PSP_EXIT_USAGE);
}

void psp_fail_exit(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    va_start(ap, fmt);
    psp_tool_vmessage(fmt, ap);
    va_end(ap);
    exit(PSP_EXIT_FAIL);
}

uint64_t psp_opt_u64(const char *name, const char *text, uint64_t min, uint64_t max)
{
    uint64_t v;
    if (psp_parse_u64(text, min, max, &v))
        psp_usage_error("--%s: '%s' is not a number in %" PRIu64 "..%" PRIu64
                        " (k, m, g suffixes allowed)",
                        name, text, min, max);
    return v;
}

void psp_stdin_to_null(void)
{
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul > 0) { /* (0: stdin was closed, and now is /dev/null) */
        dup2(nul, 0);
        close(nul);
    }
}
