/*
 * settings.h — the one table of PSP_* environment settings.
 *
 * Every tunable of every layer is one row here: name, default, help.  Values come from the
 * environment, falling back to the default; `psinfo -c` prints the table.  Reading a name
 * that is not in the table is a programming error and aborts.
 */
#ifndef PSPORT_COMMON_SETTINGS_H
#define PSPORT_COMMON_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct psp_setting {
    const char *name;  /* "PSP_WINDOW" */
    const char *def;   /* default value as text */
    const char *layer; /* "link", "mcp", "pulc", "psid", "mpi", "log" */
    const char *help;  /* one line */
};

/* The table and its length. Static storage. */
const struct psp_setting *psp_settings_table(unsigned *count);

/* The row for name, or NULL. */
const struct psp_setting *psp_setting_find(const char *name);

/* Value of name: the environment's if set and non-empty, else the default. Aborts on an
 * unknown name. The string belongs to the environment or the table. */
const char *psp_setting_str(const char *name);

/*
 * Value of name as an unsigned integer in [min, max].  Accepts decimal with an optional
 * k/K, m/M, g/G suffix (powers of 1024).  Returns 0, or -EINVAL with a message in err
 * naming the variable, the bad value and the accepted range.
 */
int psp_setting_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out, char *err,
                    size_t errlen);

/* Value of name as a probability in [0, 1]. Returns 0 or -EINVAL with a message in err. */
int psp_setting_prob(const char *name, double *out, char *err, size_t errlen);

/* Parse text as for psp_setting_u64 (used for command-line options too). 0 or -EINVAL. */
int psp_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Print the table with current values to f (psinfo -c). */
void psp_settings_print(FILE *f);

#endif
