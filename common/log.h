/*
 * log.h — the one logging facility.  Level from PSP_DEBUG (0 errors only .. 4 trace);
 * messages go to stderr prefixed with the program name and level.
 */
#ifndef PSPORT_COMMON_LOG_H
#define PSPORT_COMMON_LOG_H

#include <stddef.h>

enum psp_log_level {
    PSP_LOG_ERROR = 0,
    PSP_LOG_WARN = 1,
    PSP_LOG_INFO = 2,
    PSP_LOG_DEBUG = 3,
    PSP_LOG_TRACE = 4,
};

/* Set the program name shown in messages (defaults to "psport"). The string is not copied. */
void psp_log_init(const char *progname);

/* Current level (PSP_DEBUG read once). */
int psp_log_level(void);

/* Log a printf-style message at level. */
void psp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Format a message into err (errlen bytes) for a caller to show; nothing if err is NULL.
 * The way every layer returns "what went wrong and what to do" alongside an error code. */
void psp_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Log at error level and exit(1). */
void psp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define PSP_ERROR(...) psp_log(PSP_LOG_ERROR, __VA_ARGS__)
#define PSP_WARN(...)  psp_log(PSP_LOG_WARN, __VA_ARGS__)
#define PSP_INFO(...)  psp_log(PSP_LOG_INFO, __VA_ARGS__)
#define PSP_DEBUG_LOG(...)                                                                         \
    do {                                                                                           \
        if (psp_log_level() >= PSP_LOG_DEBUG)                                                      \
            psp_log(PSP_LOG_DEBUG, __VA_ARGS__);                                                   \
    } while (0)

#endif
