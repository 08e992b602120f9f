/*
 * partition.c — the partition of a job: hostlist expansion, reading it from the environment
 * (PSP_PARTITION, PSP_HOSTFILE, SLURM_JOB_NODELIST, PBS_NODEFILE) and resolving it to node ids
 * of the nodes file.  See partition.h.
 */
#include "partition.h"
#include "log.h"
#include "settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NUM_DIGITS_MAX 9   /* numbers in ranges: at most 999999999, so sums cannot overflow */
#define SHOW_MAX       40  /* items are shown in messages cut to this many characters */
#define ENTRY_MAX      256 /* longer partition entries are not host names (max 253) */
#define SUBERR_MAX     512 /* room for a message that gets a prefix */
#define NODE_ID_MAX    65534

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- hostlist expansion ------------------------------------------------------------------ */

struct hl_range {
    unsigned long lo, hi;
    int width; /* digits of lo as written: the zero padding of every value */
};

/* One bracket group of an item, and the literal text before it. */
struct hl_group {
    size_t lit_off, lit_len; /* in expr */
    size_t first, nranges;   /* in the item's range array */
    size_t cur_range;        /* odometer position */
    unsigned long cur;
};

/* The hosts produced so far. */
struct hl_out {
    char **v;
    size_t n, cap;
};

static int out_push(struct hl_out *o, const char *s, size_t len)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        char **v = realloc(o->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        o->v = v;
        o->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, s, len);
    copy[len] = '\0';
    o->v[o->n++] = copy;
    return 0;
}

/* "'<item>'" for messages, cut to SHOW_MAX characters. */
static void show_item(char *buf, size_t cap, const char *s, size_t len)
{
    if (len > SHOW_MAX)
        snprintf(buf, cap, "'%.*s...'", SHOW_MAX, s);
    else
        snprintf(buf, cap, "'%.*s'", (int)len, s);
}

/*
 * Parse one number of a range at expr[*i] (digits only, before limit).  Returns 0, or
 * -EINVAL with a message.  *width gets the number of digits as written.
 */
static int parse_num(const char *expr, size_t *i, size_t limit, const char *item, unsigned long *v,
                     int *width, char *err, size_t errlen)
{
    size_t start = *i;
    unsigned long x = 0;
    while (*i < limit && is_digit(expr[*i])) {
        if (*i - start == NUM_DIGITS_MAX) {
            psp_set_err(err, errlen, "position %zu: number too long in %s (at most %d digits)",
                        start + 1, item, NUM_DIGITS_MAX);
            return -EINVAL;
        }
        x = x * 10 + (unsigned long)(expr[*i] - '0');
        (*i)++;
    }
    if (*i == start) {
        /* expr[limit] is the closing ']'. */
        psp_set_err(err, errlen,
                    "position %zu: expected a number or a range like 1-4 in %s, found '%c'",
                    start + 1, item, expr[start]);
        return -EINVAL;
    }
    *v = x;
    *width = (int)(*i - start);
    return 0;
}

/*
 * Parse the ranges between '[' at expr[open] and ']' at expr[close] into *r (grown as needed).
 * Adds the number of values to *count (capped just above PULC_HOSTLIST_MAX).
 */
static int parse_group(const char *expr, size_t open, size_t close, const char *item,
                       struct hl_range **r, size_t *nr, size_t *cap, unsigned long *count,
                       char *err, size_t errlen)
{
    size_t i = open + 1;
    *count = 0;
    for (;;) {
        struct hl_range x;
        int hi_width;
        size_t at = i;
        int rc = parse_num(expr, &i, close, item, &x.lo, &x.width, err, errlen);
        if (rc)
            return rc;
        x.hi = x.lo;
        if (i < close && expr[i] == '-') {
            i++;
            rc = parse_num(expr, &i, close, item, &x.hi, &hi_width, err, errlen);
            if (rc)
                return rc;
            if (x.hi < x.lo) {
                psp_set_err(err, errlen,
                            "position %zu: reversed range %.*s in %s (write the smaller "
                            "number first)",
                            at + 1, (int)(i - at), expr + at, item);
                return -EINVAL;
            }
        }
        if (i < close && expr[i] != ',') {
            psp_set_err(err, errlen,
                        "position %zu: expected ',' or ']' after a range in %s, found '%c'", i + 1,
                        item, expr[i]);
            return -EINVAL;
        }
        if (*nr == *cap) {
            size_t ncap = *cap ? *cap * 2 : 8;
            struct hl_range *nrp = realloc(*r, ncap * sizeof *nrp);
            if (!nrp)
                return -ENOMEM;
            *r = nrp;
            *cap = ncap;
        }
        (*r)[(*nr)++] = x;
        *count += x.hi - x.lo + 1;
        if (*count > PULC_HOSTLIST_MAX)
            *count = PULC_HOSTLIST_MAX + 1;
        if (i == close)
            return 0;
        i++; /* ',' */
    }
}

/*
 * Expand the item expr[s .. e) (brackets balanced and not nested: checked by the caller) and
 * append its hosts to o, which must stay within PULC_HOSTLIST_MAX hosts.
 */
static int expand_item(const char *expr, size_t s, size_t e, struct hl_out *o, char *err,
                       size_t errlen)
{
    char item[SHOW_MAX + 8];
    show_item(item, sizeof item, expr + s, e - s);

    size_t ngroups = 0;
    for (size_t i = s; i < e; i++)
        ngroups += expr[i] == '[';

    struct hl_group *g = calloc(ngroups ? ngroups : 1, sizeof *g);
    struct hl_range *r = NULL;
    size_t nr = 0, rcap = 0;
    char *name = NULL;
    int rc = 0;
    if (!g)
        return -ENOMEM;

    /* Parse: literal, group, literal, group, ..., trailing literal. */
    unsigned long count = 1;
    size_t lit = s, k = 0, name_max = e - s + 1;
    for (size_t i = s; i < e; i++) {
        if (expr[i] != '[')
            continue;
        size_t close = i + 1;
        while (expr[close] != ']')
            close++;
        if (close == i + 1) {
            psp_set_err(err, errlen, "position %zu: empty brackets in %s", i + 1, item);
            rc = -EINVAL;
            goto out;
        }
        unsigned long gcount;
        g[k].lit_off = lit;
        g[k].lit_len = i - lit;
        g[k].first = nr;
        rc = parse_group(expr, i, close, item, &r, &nr, &rcap, &gcount, err, errlen);
        if (rc)
            goto out;
        g[k].nranges = nr - g[k].first;
        /* Capped just above PULC_HOSTLIST_MAX, without overflow. */
        if (gcount > PULC_HOSTLIST_MAX / count)
            count = PULC_HOSTLIST_MAX + 1;
        else
            count *= gcount;
        name_max += NUM_DIGITS_MAX;
        lit = close + 1;
        i = close;
        k++;
    }
    if (o->n + count > PULC_HOSTLIST_MAX) {
        psp_set_err(err, errlen,
                    "position %zu: more than %d hosts (%s brings the list to %lu%s); "
                    "split the job or name fewer hosts",
                    s + 1, PULC_HOSTLIST_MAX, item,
                    (unsigned long)o->n + (count > PULC_HOSTLIST_MAX ? PULC_HOSTLIST_MAX : count),
                    count > PULC_HOSTLIST_MAX ? " or more" : "");
        rc = -EINVAL;
        goto out;
    }

    name = malloc(name_max);
    if (!name) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t j = 0; j < ngroups; j++) {
        g[j].cur_range = 0;
        g[j].cur = r[g[j].first].lo;
    }
    for (;;) {
        size_t len = 0;
        for (size_t j = 0; j < ngroups; j++) {
            memcpy(name + len, expr + g[j].lit_off, g[j].lit_len);
            len += g[j].lit_len;
            const struct hl_range *x = &r[g[j].first + g[j].cur_range];
            len += (size_t)snprintf(name + len, name_max - len, "%0*lu", x->width, g[j].cur);
        }
        memcpy(name + len, expr + lit, e - lit);
        len += e - lit;
        rc = out_push(o, name, len);
        if (rc)
            goto out;

        /* Next: the rightmost group varies fastest. */
        size_t j = ngroups;
        while (j > 0) {
            struct hl_group *gj = &g[j - 1];
            const struct hl_range *x = &r[gj->first + gj->cur_range];
            if (gj->cur < x->hi) {
                gj->cur++;
                break;
            }
            if (gj->cur_range + 1 < gj->nranges) {
                gj->cur_range++;
                gj->cur = r[gj->first + gj->cur_range].lo;
                break;
            }
            gj->cur_range = 0;
            gj->cur = r[gj->first].lo;
            j--;
        }
        if (j == 0)
            break;
    }

out:
    free(name);
    free(r);
    free(g);
    return rc;
}

void pulc_hostlist_free(char **hosts, size_t n)
{
    if (!hosts)
        return;
    for (size_t i = 0; i < n; i++)
        free(hosts[i]);
    free(hosts);
}

int pulc_hostlist_expand(const char *expr, char ***hosts, size_t *n, char *err, size_t errlen)
{
    struct hl_out o = {NULL, 0, 0};
    int rc = 0;
    bool need_item = true; /* at the start or after a comma */
    bool any = false;
    size_t last_comma = 0, i = 0;

    *hosts = NULL;
    *n = 0;
    if (!expr)
        expr = "";
    size_t len = strlen(expr);

    while (i < len) {
        if (is_space(expr[i])) {
            i++;
            continue;
        }
        if (expr[i] == ',') {
            if (need_item) {
                psp_set_err(err, errlen,
                            "position %zu: empty item (%s); separate names by one comma", i + 1,
                            any ? "two commas in a row" : "a comma at the start");
                rc = -EINVAL;
                goto fail;
            }
            need_item = true;
            last_comma = i;
            i++;
            continue;
        }
        /* An item: up to a comma or white space outside brackets. */
        size_t s = i, open = 0;
        bool in = false;
        for (; i < len; i++) {
            char c = expr[i];
            if (!in && (c == ',' || is_space(c)))
                break;
            if (c == '[') {
                if (in) {
                    psp_set_err(err, errlen,
                                "position %zu: '[' inside brackets (the '[' at position %zu is "
                                "not closed; ranges do not nest)",
                                i + 1, open + 1);
                    rc = -EINVAL;
                    goto fail;
                }
                in = true;
                open = i;
            } else if (c == ']') {
                if (!in) {
                    psp_set_err(err, errlen, "position %zu: unbalanced brackets: ']' without '['",
                                i + 1);
                    rc = -EINVAL;
                    goto fail;
                }
                in = false;
            }
        }
        if (in) {
            psp_set_err(err, errlen, "position %zu: unbalanced brackets: '[' is not closed",
                        open + 1);
            rc = -EINVAL;
            goto fail;
        }
        rc = expand_item(expr, s, i, &o, err, errlen);
        if (rc)
            goto fail;
        need_item = false;
        any = true;
    }
    if (!any) {
        psp_set_err(err, errlen, "position 1: empty host list (expected names like n[1-4],x)");
        rc = -EINVAL;
        goto fail;
    }
    if (need_item) {
        psp_set_err(err, errlen, "position %zu: empty item (a comma at the end)", last_comma + 1);
        rc = -EINVAL;
        goto fail;
    }
    *hosts = o.v;
    *n = o.n;
    return 0;

fail:
    if (rc == -ENOMEM)
        psp_set_err(err, errlen, "out of memory expanding a host list of %zu characters", len);
    pulc_hostlist_free(o.v, o.n);
    return rc;
}

/* ---- a list of unique entries ------------------------------------------------------------ */

struct uniq_slot {
    size_t off, len; /* entry in buf; len 0 = empty slot */
};

/* Entries joined by '\n' in buf, with a hash set of them for dedupe. */
struct uniq {
    char *buf;
    size_t len, cap;
    struct uniq_slot *slot;
    size_t nslot; /* power of 2 */
    size_t count;
};

static size_t hash_str(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 32));
}

static struct uniq_slot *uniq_find(struct uniq *u, const char *s, size_t len)
{
    size_t mask = u->nslot - 1;
    for (size_t i = hash_str(s, len) & mask;; i = (i + 1) & mask) {
        struct uniq_slot *sl = &u->slot[i];
        if (sl->len == 0 || (sl->len == len && memcmp(u->buf + sl->off, s, len) == 0))
            return sl;
    }
}

static int uniq_grow(struct uniq *u)
{
    size_t nslot = u->nslot ? u->nslot * 2 : 64;
    struct uniq_slot *slot = calloc(nslot, sizeof *slot);
    if (!slot)
        return -ENOMEM;
    struct uniq old = *u;
    u->slot = slot;
    u->nslot = nslot;
    for (size_t i = 0; i < old.nslot; i++)
        if (old.slot[i].len)
            *uniq_find(u, u->buf + old.slot[i].off, old.slot[i].len) = old.slot[i];
    free(old.slot);
    return 0;
}

/* Add s[0 .. len) (len > 0, no '\n') unless present. 0, -ENOMEM, or -E2BIG (too many). */
static int uniq_add(struct uniq *u, const char *s, size_t len)
{
    if (2 * (u->count + 1) > u->nslot && uniq_grow(u))
        return -ENOMEM;
    struct uniq_slot *sl = uniq_find(u, s, len);
    if (sl->len)
        return 0;
    if (u->count == PULC_HOSTLIST_MAX)
        return -E2BIG;
    if (u->len + len + 2 > u->cap) {
        size_t cap = u->cap ? u->cap : 256;
        while (u->len + len + 2 > cap)
            cap *= 2;
        char *buf = realloc(u->buf, cap);
        if (!buf)
            return -ENOMEM;
        u->buf = buf;
        u->cap = cap;
    }
    if (u->count)
        u->buf[u->len++] = '\n';
    sl->off = u->len;
    sl->len = len;
    memcpy(u->buf + u->len, s, len);
    u->len += len;
    u->buf[u->len] = '\0';
    u->count++;
    return 0;
}

static void uniq_free(struct uniq *u)
{
    free(u->buf);
    free(u->slot);
}

/* Add with the messages of the partition's source. */
static int add_entry(struct uniq *u, const char *s, size_t len, const char *var, char *err,
                     size_t errlen)
{
    int rc = uniq_add(u, s, len);
    if (rc == -E2BIG) {
        psp_set_err(err, errlen, "%s: more than %d hosts in the partition", var, PULC_HOSTLIST_MAX);
        return -EINVAL;
    }
    if (rc == -ENOMEM)
        psp_set_err(err, errlen, "%s: out of memory reading the partition", var);
    return rc;
}

/* ---- sources ----------------------------------------------------------------------------- */

/* "a-b" with decimal a and b: an id range. Returns 1 and the bounds, else 0. */
static int id_range(const char *s, unsigned long *lo, unsigned long *hi)
{
    const char *dash = strchr(s, '-');
    if (!dash || dash == s || !dash[1])
        return 0;
    for (const char *p = s; *p; p++)
        if (p != dash && !is_digit(*p))
            return 0;
    errno = 0;
    *lo = strtoul(s, NULL, 10);
    *hi = strtoul(dash + 1, NULL, 10);
    if (errno)
        *lo = *hi = ULONG_MAX;
    return 1;
}

/* PSP_PARTITION: hostlist syntax, and id ranges like 0-2 among the names. */
static int from_partition(const char *value, struct uniq *u, char *err, size_t errlen)
{
    static const char var[] = "PSP_PARTITION";
    char sub[SUBERR_MAX];
    char **hosts;
    size_t n;
    int rc = pulc_hostlist_expand(value, &hosts, &n, sub, sizeof sub);
    if (rc) {
        psp_set_err(err, errlen, "%s: %s", var, sub);
        return rc;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned long lo, hi;
        if (!id_range(hosts[i], &lo, &hi)) {
            rc = add_entry(u, hosts[i], strlen(hosts[i]), var, err, errlen);
            continue;
        }
        if (lo > NODE_ID_MAX || hi > NODE_ID_MAX) {
            psp_set_err(err, errlen, "%s: id range %s is out of range (node ids are 0..%d)", var,
                        hosts[i], NODE_ID_MAX);
            rc = -EINVAL;
        } else if (hi < lo) {
            psp_set_err(err, errlen,
                        "%s: reversed id range %s (write the smaller id first: %lu-%lu)", var,
                        hosts[i], hi, lo);
            rc = -EINVAL;
        }
        for (unsigned long id = lo; rc == 0 && id <= hi; id++) {
            char num[24];
            int len = snprintf(num, sizeof num, "%lu", id);
            rc = add_entry(u, num, (size_t)len, var, err, errlen);
        }
    }
    pulc_hostlist_free(hosts, n);
    return rc;
}

/* SLURM_JOB_NODELIST: hostlist syntax. */
static int from_slurm(const char *value, struct uniq *u, char *err, size_t errlen)
{
    static const char var[] = "SLURM_JOB_NODELIST";
    char sub[SUBERR_MAX];
    char **hosts;
    size_t n;
    int rc = pulc_hostlist_expand(value, &hosts, &n, sub, sizeof sub);
    if (rc) {
        psp_set_err(err, errlen, "%s: %s", var, sub);
        return rc;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = add_entry(u, hosts[i], strlen(hosts[i]), var, err, errlen);
    pulc_hostlist_free(hosts, n);
    return rc;
}

/* "slots=N" or "max_slots=N". */
static bool slots_word(const char *w)
{
    const char *v = NULL;
    if (strncmp(w, "slots=", 6) == 0)
        v = w + 6;
    else if (strncmp(w, "max_slots=", 10) == 0)
        v = w + 10;
    if (!v || !*v)
        return false;
    for (; *v; v++)
        if (!is_digit(*v))
            return false;
    return true;
}

/*
 * A file of hosts, one per line.  pbs: PBS_NODEFILE (a host name per line, nothing else);
 * else PSP_HOSTFILE (also '#' comments, "slots=N" words and ":N" suffixes).
 */
static int from_file(const char *var, const char *path, bool pbs, struct uniq *u, char *err,
                     size_t errlen)
{
    static const char ws[] = " \t\r\n\v\f";
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        psp_set_err(err, errlen, "%s %s: %s (set %s to a readable file of host names, or unset it)",
                    var, path, strerror(e), var);
        return -e;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *host = strtok_r(line, ws, &save);
        if (!host)
            continue;
        char *extra = strtok_r(NULL, ws, &save);
        if (pbs) {
            if (extra) {
                psp_set_err(err, errlen, "%s %s: line %u: '%s %s': expected one host name per line",
                            var, path, lineno, host, extra);
                rc = -EINVAL;
            }
        } else {
            char *colon = strrchr(host, ':');
            if (colon) {
                bool ok = colon != host && colon[1];
                for (const char *p = colon + 1; ok && *p; p++)
                    ok = is_digit(*p);
                if (!ok) {
                    psp_set_err(err, errlen,
                                "%s %s: line %u: bad host '%s' (expected <host> or <host>:<slots>)",
                                var, path, lineno, host);
                    rc = -EINVAL;
                }
                *colon = '\0';
            }
            for (; rc == 0 && extra; extra = strtok_r(NULL, ws, &save)) {
                if (!slots_word(extra)) {
                    psp_set_err(err, errlen,
                                "%s %s: line %u: unexpected '%s' after host '%s' (expected "
                                "'<host> [slots=N]' or '<host>:N')",
                                var, path, lineno, extra, host);
                    rc = -EINVAL;
                }
            }
        }
        if (rc == 0)
            rc = add_entry(u, host, strlen(host), var, err, errlen);
    }
    if (rc == 0 && ferror(f)) {
        int e = errno ? errno : EIO;
        psp_set_err(err, errlen, "%s %s: %s", var, path, strerror(e));
        rc = -e;
    }
    free(line);
    fclose(f);
    if (rc == 0 && u->count == 0) {
        psp_set_err(err, errlen, "%s %s: no host names in the file (write one host per line)", var,
                    path);
        rc = -EINVAL;
    }
    return rc;
}

int pulc_partition_from_env(char **list, const char **source, char *err, size_t errlen)
{
    struct uniq u = {0};
    const char *value;
    int rc;

    *list = NULL;
    *source = NULL;
    if (*(value = psp_setting_str("PSP_PARTITION"))) {
        *source = "PSP_PARTITION";
        rc = from_partition(value, &u, err, errlen);
    } else if (*(value = psp_setting_str("PSP_HOSTFILE"))) {
        *source = "PSP_HOSTFILE";
        rc = from_file(*source, value, false, &u, err, errlen);
    } else if ((value = getenv("SLURM_JOB_NODELIST")) && *value) {
        *source = "SLURM_JOB_NODELIST";
        rc = from_slurm(value, &u, err, errlen);
    } else if ((value = getenv("PBS_NODEFILE")) && *value) {
        *source = "PBS_NODEFILE";
        rc = from_file(*source, value, true, &u, err, errlen);
    } else {
        return 0;
    }
    if (rc) {
        uniq_free(&u);
        *source = NULL;
        return rc;
    }
    free(u.slot);
    *list = u.buf;
    return 1;
}

/* ---- resolution -------------------------------------------------------------------------- */

/* "ids 0..N-1" or "no nodes", for messages. */
static void ids_text(const struct psp_nodes *nodes, char *buf, size_t cap)
{
    if (nodes->count == 0)
        snprintf(buf, cap, "no nodes");
    else
        snprintf(buf, cap, "ids 0..%u", nodes->count - 1u);
}

/* Mark every node with address ip. Returns how many there are. */
static int mark_ip(const struct psp_nodes *nodes, struct in_addr ip, uint8_t *member)
{
    int found = 0;
    for (unsigned id = 0; id < nodes->count; id++) {
        if (nodes->node[id].present && nodes->node[id].ip.s_addr == ip.s_addr) {
            member[id] = 1;
            found++;
        }
    }
    return found;
}

/* Resolve one entry (non-empty, no white space). 0 or -ENXIO with a message. */
static int resolve_entry(const char *e, const char *src, const struct psp_nodes *nodes,
                         uint8_t *member, char *err, size_t errlen)
{
    char ids[32], addr[INET_ADDRSTRLEN];
    ids_text(nodes, ids, sizeof ids);

    bool digits = true;
    for (const char *p = e; *p && digits; p++)
        digits = is_digit(*p);
    if (digits) {
        unsigned long id = 0;
        for (const char *p = e; *p && id < PSP_NODES_MAX; p++)
            id = id * 10 + (unsigned long)(*p - '0');
        if (id < nodes->count && nodes->node[id].present) {
            member[id] = 1;
            return 0;
        }
        psp_set_err(err, errlen,
                    "host '%s' (from %s) is not a node of this cluster: nodes file has %s%s; "
                    "remove it from %s or describe it in the nodes file",
                    e, src, ids, id < nodes->count ? ", but not this one" : "", src);
        return -ENXIO;
    }

    struct in_addr ip;
    if (inet_pton(AF_INET, e, &ip) == 1) {
        if (mark_ip(nodes, ip, member))
            return 0;
        psp_set_err(err, errlen,
                    "host '%s' (from %s) is not a node of this cluster: nodes file has %s, "
                    "none with this address; remove it from %s or add it to the nodes file",
                    e, src, ids, src);
        return -ENXIO;
    }

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    int g = getaddrinfo(e, NULL, &hints, &res);
    if (g != 0) {
        psp_set_err(err, errlen,
                    "host '%s' (from %s) is not a node of this cluster: nodes file has %s, and "
                    "'%s' has no IPv4 address (%s)",
                    e, src, ids, e, g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        return -ENXIO;
    }
    int found = 0;
    addr[0] = '\0';
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family != AF_INET)
            continue;
        struct in_addr in = ((const struct sockaddr_in *)(const void *)a->ai_addr)->sin_addr;
        if (!addr[0])
            inet_ntop(AF_INET, &in, addr, sizeof addr);
        found += mark_ip(nodes, in, member);
    }
    freeaddrinfo(res);
    if (found)
        return 0;
    psp_set_err(err, errlen,
                "host '%s' (from %s) is not a node of this cluster: nodes file has %s, none with "
                "address %s (what '%s' resolves to); remove it from %s or add it to the nodes file",
                e, src, ids, addr[0] ? addr : "?", e, src);
    return -ENXIO;
}

int pulc_partition_resolve(const char *list, const char *source, const struct psp_nodes *nodes,
                           uint8_t *member, size_t member_len, char *err, size_t errlen)
{
    const char *src = source ? source : "the partition";
    if (!nodes || !member || member_len < nodes->count) {
        psp_set_err(err, errlen,
                    "internal error: partition member array of %zu entries for %u node ids",
                    member_len, nodes ? nodes->count : 0u);
        return -EINVAL;
    }
    memset(member, 0, member_len);

    unsigned entries = 0;
    const char *p = list ? list : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        const char *s = p;
        p = nl ? nl + 1 : end;
        while (s < end && is_space(*s))
            s++;
        while (end > s && is_space(end[-1]))
            end--;
        if (s == end)
            continue;
        entries++;

        size_t len = (size_t)(end - s);
        char e[ENTRY_MAX];
        if (len >= sizeof e) {
            psp_set_err(err, errlen,
                        "host '%.*s...' (from %s) is not a node of this cluster: the name is "
                        "longer than %d characters",
                        SHOW_MAX, s, src, ENTRY_MAX - 1);
            return -ENXIO;
        }
        memcpy(e, s, len);
        e[len] = '\0';
        for (size_t i = 0; i < len; i++) {
            if (is_space(e[i])) {
                psp_set_err(err, errlen,
                            "host '%s' (from %s) is not a node of this cluster: one host per "
                            "line, without spaces",
                            e, src);
                return -ENXIO;
            }
        }
        int rc = resolve_entry(e, src, nodes, member, err, errlen);
        if (rc)
            return rc;
    }
    if (entries == 0) {
        psp_set_err(err, errlen, "the partition from %s names no hosts", src);
        return -EINVAL;
    }
    int count = 0;
    for (size_t id = 0; id < member_len; id++)
        count += member[id] != 0;
    return count;
}
