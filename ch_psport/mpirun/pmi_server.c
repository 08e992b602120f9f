/*
 * pmi_server.c — PMI-1 wire protocol server (see pmi_server.h).
 *
 * A command is one line of space-separated key=value pairs starting with cmd=...; replies
 * are lines of the same form.  The value of the last key of a line (abort's message) may
 * contain spaces.
 */
#include "pmi_server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 65536
#define KEY_MAX        256
#define VAL_MAX        1024

struct kv {
    char *key, *val;
};

struct conn {
    int used;
    int rank;
    char *in;
    size_t in_len;
    char *out;
    size_t out_len, out_off, out_cap;
    int in_barrier;
};

struct pmi_server {
    int size;
    char kvsname[64];
    struct kv *kv;
    size_t nkv, capkv;
    struct conn *c;
    int nc;
    int barrier_count;
    int finalized;
    unsigned char *started; /* per rank: 1 announced itself (initack), 2 finalized too */
    char abort_msg[1024];
};

struct pmi_server *pmi_server_new(int size, const char *kvsname, const char *mapping)
{
    struct pmi_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->size = size;
    snprintf(s->kvsname, sizeof s->kvsname, "%s", kvsname);
    s->kv = calloc(1, sizeof *s->kv);
    s->started = calloc(size > 0 ? (size_t)size : 1, 1);
    if (!s->kv || !s->started) {
        free(s->kv);
        free(s->started);
        free(s);
        return NULL;
    }
    s->capkv = 1;
    s->kv[0].key = strdup("PMI_process_mapping");
    s->kv[0].val = strdup(mapping);
    s->nkv = 1;
    return s;
}

void pmi_server_free(struct pmi_server *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nkv; i++) {
        free(s->kv[i].key);
        free(s->kv[i].val);
    }
    free(s->kv);
    for (int i = 0; i < s->nc; i++) {
        free(s->c[i].in);
        free(s->c[i].out);
    }
    free(s->c);
    free(s->started);
    free(s);
}

int pmi_server_connect(struct pmi_server *s)
{
    for (int i = 0; i < s->nc; i++)
        if (!s->c[i].used) {
            memset(&s->c[i], 0, sizeof s->c[i]);
            s->c[i].used = 1;
            s->c[i].rank = -1;
            return i;
        }
    struct conn *nc = realloc(s->c, (size_t)(s->nc + 1) * sizeof *nc);
    if (!nc)
        return -1;
    s->c = nc;
    memset(&s->c[s->nc], 0, sizeof s->c[s->nc]);
    s->c[s->nc].used = 1;
    s->c[s->nc].rank = -1;
    return s->nc++;
}

void pmi_server_disconnect(struct pmi_server *s, int conn)
{
    struct conn *c = &s->c[conn];
    if (c->in_barrier)
        s->barrier_count--;
    free(c->in);
    free(c->out);
    memset(c, 0, sizeof *c);
}

int pmi_server_rank(const struct pmi_server *s, int conn)
{
    return s->c[conn].rank;
}

int pmi_server_finalized(const struct pmi_server *s)
{
    return s->finalized;
}

int pmi_server_unfinished(const struct pmi_server *s, int rank)
{
    return rank >= 0 && rank < s->size && s->started[rank] == 1;
}

const char *pmi_server_output(struct pmi_server *s, int conn, size_t *len)
{
    struct conn *c = &s->c[conn];
    *len = c->out_len - c->out_off;
    return *len ? c->out + c->out_off : NULL;
}

void pmi_server_consumed(struct pmi_server *s, int conn, size_t n)
{
    struct conn *c = &s->c[conn];
    c->out_off += n;
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
}

/* Queue a reply line (printf-style, newline added). */
static void reply(struct pmi_server *s, int conn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply(struct pmi_server *s, int conn, const char *fmt, ...)
{
    struct conn *c = &s->c[conn];
    char line[VAL_MAX + KEY_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (c->out_len + (size_t)n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap * 2 : 1024;
        while (cap < c->out_len + (size_t)n)
            cap *= 2;
        char *nb = realloc(c->out, cap);
        if (!nb)
            return;
        c->out = nb;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, line, (size_t)n);
    c->out_len += (size_t)n;
}

/* The value of key in a command line (tokens "k=v"), or NULL. `rest`: value runs to the end. */
static const char *arg(char *line, const char *key, char *buf, size_t n, int rest)
{
    size_t kl = strlen(key);
    for (char *p = line; p && *p;) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, key, kl) && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t vl = rest ? strlen(v) : strcspn(v, " ");
            if (vl >= n)
                vl = n - 1;
            memcpy(buf, v, vl);
            buf[vl] = 0;
            return buf;
        }
        p = strchr(p, ' ');
    }
    return NULL;
}

static struct kv *kv_find(struct pmi_server *s, const char *key)
{
    for (size_t i = 0; i < s->nkv; i++)
        if (!strcmp(s->kv[i].key, key))
            return &s->kv[i];
    return NULL;
}

static int kv_put(struct pmi_server *s, const char *key, const char *val)
{
    struct kv *e = kv_find(s, key);
    if (e) {
        char *v = strdup(val);
        if (!v)
            return -1;
        free(e->val);
        e->val = v;
        return 0;
    }
    if (s->nkv == s->capkv) {
        struct kv *nk = realloc(s->kv, s->capkv * 2 * sizeof *nk);
        if (!nk)
            return -1;
        s->kv = nk;
        s->capkv *= 2;
    }
    s->kv[s->nkv].key = strdup(key);
    s->kv[s->nkv].val = strdup(val);
    if (!s->kv[s->nkv].key || !s->kv[s->nkv].val)
        return -1;
    s->nkv++;
    return 0;
}

static int serve_line(struct pmi_server *s, int conn, char *line, int *code, const char **msg)
{
    struct conn *c = &s->c[conn];
    char cmd[64], a[VAL_MAX + 1], b[VAL_MAX + 1];
    if (!arg(line, "cmd", cmd, sizeof cmd, 0)) {
        /* MPICH's multi-line commands (mcmd=spawn ... endcmd): refused. */
        if (!strncmp(line, "mcmd=", 5))
            reply(s, conn, "cmd=spawn_result rc=-1 errmsg=spawn_not_supported");
        return PMI_EV_NONE;
    }
    if (!strcmp(cmd, "initack")) {
        if (!arg(line, "pmiid", a, sizeof a, 0))
            return PMI_EV_ERROR;
        char *end;
        long id = strtol(a, &end, 10);
        if (*end || id < 0 || id >= s->size)
            return PMI_EV_ERROR;
        c->rank = (int)id;
        if (!s->started[id])
            s->started[id] = 1;
        reply(s, conn, "cmd=initack");
        reply(s, conn, "cmd=set size=%d", s->size);
        reply(s, conn, "cmd=set rank=%d", c->rank);
        reply(s, conn, "cmd=set debug=0");
    } else if (!strcmp(cmd, "init")) {
        reply(s, conn, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    } else if (!strcmp(cmd, "get_maxes")) {
        reply(s, conn, "cmd=maxes kvsname_max=%d keylen_max=%d vallen_max=%d rc=0",
              (int)sizeof s->kvsname, KEY_MAX, VAL_MAX);
    } else if (!strcmp(cmd, "get_appnum")) {
        reply(s, conn, "cmd=appnum appnum=0 rc=0");
    } else if (!strcmp(cmd, "get_universe_size")) {
        reply(s, conn, "cmd=universe_size size=%d rc=0", s->size);
    } else if (!strcmp(cmd, "get_my_kvsname")) {
        reply(s, conn, "cmd=my_kvsname kvsname=%s rc=0", s->kvsname);
    } else if (!strcmp(cmd, "put")) {
        if (!arg(line, "key", a, KEY_MAX + 1, 0) || !arg(line, "value", b, sizeof b, 0))
            reply(s, conn, "cmd=put_result rc=-1 msg=key_or_value_missing");
        else if (kv_put(s, a, b))
            reply(s, conn, "cmd=put_result rc=-1 msg=out_of_memory");
        else
            reply(s, conn, "cmd=put_result rc=0 msg=success");
    } else if (!strcmp(cmd, "get")) {
        struct kv *e = arg(line, "key", a, KEY_MAX + 1, 0) ? kv_find(s, a) : NULL;
        if (e)
            reply(s, conn, "cmd=get_result rc=0 msg=success value=%s", e->val);
        else
            reply(s, conn, "cmd=get_result rc=-1 msg=key_%s_not_found", a);
    } else if (!strcmp(cmd, "barrier_in")) {
        if (!c->in_barrier) {
            c->in_barrier = 1;
            s->barrier_count++;
        }
        if (s->barrier_count >= s->size) {
            for (int i = 0; i < s->nc; i++)
                if (s->c[i].used && s->c[i].in_barrier) {
                    s->c[i].in_barrier = 0;
                    reply(s, i, "cmd=barrier_out rc=0");
                }
            s->barrier_count = 0;
        }
    } else if (!strcmp(cmd, "finalize")) {
        reply(s, conn, "cmd=finalize_ack rc=0");
        s->finalized++;
        if (c->rank >= 0)
            s->started[c->rank] = 2;
        return PMI_EV_FINALIZE;
    } else if (!strcmp(cmd, "abort")) {
        *code = arg(line, "exitcode", a, sizeof a, 0) ? atoi(a) : 1;
        if (!arg(line, "message", s->abort_msg, sizeof s->abort_msg, 1))
            s->abort_msg[0] = 0;
        *msg = s->abort_msg;
        return PMI_EV_ABORT;
    } else if (!strcmp(cmd, "publish_name")) {
        reply(s, conn, "cmd=publish_result rc=-1 msg=not_supported");
    } else if (!strcmp(cmd, "unpublish_name")) {
        reply(s, conn, "cmd=unpublish_result rc=-1 msg=not_supported");
    } else if (!strcmp(cmd, "lookup_name")) {
        reply(s, conn, "cmd=lookup_result rc=-1 msg=not_supported");
    } else {
        reply(s, conn, "cmd=%s_result rc=-1 msg=unknown_command", cmd);
    }
    return PMI_EV_NONE;
}

int pmi_server_input(struct pmi_server *s, int conn, const char *data, size_t len, int *code,
                     const char **msg)
{
    struct conn *c = &s->c[conn];
    if (c->in_len + len > LINE_MAX_BYTES)
        return PMI_EV_ERROR;
    char *nb = realloc(c->in, c->in_len + len + 1);
    if (!nb)
        return PMI_EV_ERROR;
    c->in = nb;
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    int ev = PMI_EV_NONE;
    for (;;) {
        char *nl = memchr(c->in, '\n', c->in_len);
        if (!nl)
            break;
        *nl = 0;
        size_t used = (size_t)(nl - c->in) + 1;
        char line[LINE_MAX_BYTES];
        memcpy(line, c->in, used);
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
        int e = serve_line(s, conn, line, code, msg);
        if (e == PMI_EV_ERROR || e == PMI_EV_ABORT)
            return e;
        if (e)
            ev = e;
    }
    return ev;
}

int pmi_process_mapping(const int *node_of, int size, char *buf, size_t n)
{
    int *order = malloc((size_t)size * sizeof *order); /* distinct nodes, first-seen order */
    if (!order)
        return -1;
    int nodes = 0;
    size_t off = (size_t)snprintf(buf, n, "(vector");
    int r = 0;
    /* Runs: (node index, consecutive ranks); merge runs whose node index steps by one with
     * the same length. */
    int b_start = -1, b_count = 0, b_len = 0, prev_idx = -1;
    while (r < size) {
        int node = node_of[r], len = 0;
        while (r + len < size && node_of[r + len] == node)
            len++;
        int idx = -1;
        for (int i = 0; i < nodes; i++)
            if (order[i] == node)
                idx = i;
        if (idx < 0)
            order[idx = nodes++] = node;
        if (b_count && len == b_len && idx == prev_idx + 1) {
            b_count++;
        } else {
            if (b_count)
                off += (size_t)snprintf(buf + (off < n ? off : n), off < n ? n - off : 0,
                                        ",(%d,%d,%d)", b_start, b_count, b_len);
            b_start = idx;
            b_count = 1;
            b_len = len;
        }
        prev_idx = idx;
        r += len;
    }
    if (b_count)
        off += (size_t)snprintf(buf + (off < n ? off : n), off < n ? n - off : 0, ",(%d,%d,%d)",
                                b_start, b_count, b_len);
    off += (size_t)snprintf(buf + (off < n ? off : n), off < n ? n - off : 0, ")");
    free(order);
    return off < n ? 0 : -1;
}
