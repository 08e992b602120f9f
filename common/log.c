/*
 * log.c — the one logging facility: "progname: level: message" on stderr, filtered by
 * PSP_DEBUG (read once, on first use).
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"

static const char *_Atomic progname = "psport";

/* -1 until PSP_DEBUG has been read. */
static _Atomic int level = -1;

void psp_log_init(const char *name)
{
    atomic_store(&progname, name && *name ? name : "psport");
}

static const char *level_name(int lvl)
{
    static const char *const names[] = {"error", "warning", "info", "debug", "trace"};
    if (lvl < PSP_LOG_ERROR)
        lvl = PSP_LOG_ERROR;
    if (lvl > PSP_LOG_TRACE)
        lvl = PSP_LOG_TRACE;
    return names[lvl];
}

/* One write per message, so lines of concurrent processes and threads do not interleave. */
static void vlog(int lvl, const char *fmt, va_list ap)
{
    int saved = errno; /* callers may log and then look at errno */
    char line[2048];
    int n = snprintf(line, sizeof line, "%s: %s: ", atomic_load(&progname), level_name(lvl));
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        n = m < 0 ? n : n + m;
    }
    if ((size_t)n >= sizeof line - 1) { /* cut: mark it, keep room for the newline */
        n = (int)sizeof line - 2;
        memcpy(line + n - 3, "...", 3);
    }
    if (n == 0 || line[n - 1] != '\n')
        line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
    errno = saved;
}

__attribute__((format(printf, 2, 3))) static void log_always(int lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, fmt, ap);
    va_end(ap);
}

int psp_log_level(void)
{
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l >= 0)
        return l;

    /* First use: concurrent first callers compute the same value, so the race is harmless;
     * only the thread that installs it reports a bad PSP_DEBUG. */
    uint64_t v = 0;
    char err[256];
    int rc = psp_setting_u64("PSP_DEBUG", PSP_LOG_ERROR, PSP_LOG_TRACE, &v, err, sizeof err);
    int expected = -1;
    if (atomic_compare_exchange_strong(&level, &expected, rc == 0 ? (int)v : PSP_LOG_ERROR)) {
        if (rc != 0)
            log_always(PSP_LOG_WARN, "%s; logging errors only", err);
    }
    return atomic_load(&level);
}

void psp_log(int lvl, const char *fmt, ...)
{
    if (lvl > psp_log_level())
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(lvl, fmt, ap);
    va_end(ap);
}

void psp_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(PSP_LOG_ERROR, fmt, ap);
    va_end(ap);
    exit(1);
}

void psp_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
