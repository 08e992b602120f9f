/*
 * nodes.c — reading the cluster description (see nodes.h for the format).
 */
#include "nodes.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX  64        /* longer tokens are wrong anyway; shown shortened in errors */
#define MAX_TOKENS 5         /* id, address, mac, interface + one to detect extra words */
#define FILE_MAX   (4 << 20) /* a nodes file larger than this is not a nodes file */

/* Decimal number without sign or suffix, at most max. 0 on success. */
static int parse_dec(const char *s, unsigned long max, unsigned long *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* aa:bb:cc:dd:ee:ff (or with '-'). 0 on success. */
static int parse_mac(const char *s, uint8_t mac[6])
{
    if (strlen(s) != 17)
        return -1;
    for (int i = 0; i < 6; i++) {
        int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        if (i < 5 && s[3 * i + 2] != ':' && s[3 * i + 2] != '-')
            return -1;
        mac[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/*
 * Split one line (without its newline) into at most MAX_TOKENS words, stopping at '#'.
 * Returns the number of words; a word longer than TOKEN_MAX - 1 is cut (and flagged long).
 */
static int split(const char *line, size_t n, char tok[MAX_TOKENS][TOKEN_MAX], int *long_tok)
{
    int nt = 0;
    size_t i = 0;
    *long_tok = -1;
    while (i < n) {
        while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            i++;
        if (i >= n || line[i] == '#')
            break;
        size_t start = i;
        while (i < n && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '#')
            i++;
        if (nt == MAX_TOKENS)
            return nt + 1; /* too many words; the count is all the caller needs */
        size_t len = i - start;
        if (len >= TOKEN_MAX) {
            if (*long_tok < 0)
                *long_tok = nt;
            len = TOKEN_MAX - 1;
        }
        memcpy(tok[nt], line + start, len);
        tok[nt][len] = '\0';
        nt++;
    }
    return nt;
}

int psp_nodes_parse(const char *text, uint16_t default_port, struct psp_nodes *out, char *err,
                    size_t errlen)
{
    static const char fmt_hint[] = "expected '<id> <ipv4>[:<port>] [<mac>] [<interface>]'";
    char tok[MAX_TOKENS][TOKEN_MAX];
    uint32_t first_line[PSP_NODES_MAX]; /* line number where each id was described */
    unsigned lineno = 0;
    int found = 0;

    memset(out, 0, sizeof *out);
    memset(first_line, 0, sizeof first_line);
    if (!text)
        text = "";

    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *line = p;
        p = nl ? nl + 1 : p + n;
        lineno++;

        int long_tok;
        int nt = split(line, n, tok, &long_tok);
        if (nt == 0)
            continue;
        if (nt > 4) {
            psp_set_err(err, errlen, "line %u: too many words (%s)", lineno, fmt_hint);
            return -EINVAL;
        }
        if (long_tok >= 0) {
            psp_set_err(err, errlen, "line %u: word '%.20s...' is too long (%s)", lineno,
                        tok[long_tok], fmt_hint);
            return -EINVAL;
        }
        if (nt < 2) {
            psp_set_err(err, errlen, "line %u: node %s has no address (%s)", lineno, tok[0],
                        fmt_hint);
            return -EINVAL;
        }

        unsigned long id;
        if (parse_dec(tok[0], ULONG_MAX / 16, &id) != 0) {
            psp_set_err(err, errlen, "line %u: bad node id '%s' (a number 0..%d)", lineno, tok[0],
                        PSP_NODES_MAX - 1);
            return -EINVAL;
        }
        if (id >= PSP_NODES_MAX) {
            psp_set_err(err, errlen, "line %u: node id %lu out of range (0..%d)", lineno, id,
                        PSP_NODES_MAX - 1);
            return -EINVAL;
        }
        if (out->node[id].present) {
            psp_set_err(err, errlen, "line %u: duplicate node id %lu (already on line %u)", lineno,
                        id, (unsigned)first_line[id]);
            return -EINVAL;
        }

        struct psp_node_addr a;
        memset(&a, 0, sizeof a);
        a.present = 1;
        a.port = default_port;

        /* address[:port] */
        char ipbuf[TOKEN_MAX];
        snprintf(ipbuf, sizeof ipbuf, "%s", tok[1]);
        char *colon = strchr(ipbuf, ':');
        if (colon) {
            *colon = '\0';
            unsigned long port;
            if (parse_dec(colon + 1, 65535, &port) != 0 || port == 0) {
                psp_set_err(err, errlen, "line %u: bad port '%s' (1..65535)", lineno, colon + 1);
                return -EINVAL;
            }
            a.port = (uint16_t)port;
        }
        if (inet_pton(AF_INET, ipbuf, &a.ip) != 1) {
            psp_set_err(err, errlen, "line %u: bad IP address '%s' (dotted IPv4, e.g. 198.18.0.1)",
                        lineno, ipbuf);
            return -EINVAL;
        }
        if (a.port == 0) {
            psp_set_err(err, errlen, "line %u: node %lu has no UDP port (write %s:<port>)", lineno,
                        id, ipbuf);
            return -EINVAL;
        }

        /* optional MAC (a word with ':'), then optional interface */
        int t = 2;
        if (t < nt && (nt == 4 || strchr(tok[t], ':') || parse_mac(tok[t], a.mac) == 0)) {
            if (parse_mac(tok[t], a.mac) != 0) {
                psp_set_err(err, errlen, "line %u: bad MAC '%s' (aa:bb:cc:dd:ee:ff)", lineno,
                            tok[t]);
                return -EINVAL;
            }
            a.has_mac = 1;
            t++;
        }
        if (t < nt) {
            if (strlen(tok[t]) >= sizeof a.ifname || strchr(tok[t], ':') || strchr(tok[t], '/')) {
                psp_set_err(err, errlen,
                            "line %u: bad interface name '%s' (at most %zu characters)", lineno,
                            tok[t], sizeof a.ifname - 1);
                return -EINVAL;
            }
            memcpy(a.ifname, tok[t], strlen(tok[t]) + 1);
        }

        /* two nodes on one address cannot both receive */
        for (unsigned j = 0; j < out->count; j++) {
            const struct psp_node_addr *b = &out->node[j];
            if (b->present && b->ip.s_addr == a.ip.s_addr && b->port == a.port) {
                psp_set_err(err, errlen, "line %u: node %lu uses %s:%u, already taken by node %u",
                            lineno, id, ipbuf, (unsigned)a.port, j);
                return -EINVAL;
            }
        }

        out->node[id] = a;
        first_line[id] = lineno;
        if (id + 1 > out->count)
            out->count = (uint16_t)(id + 1);
        found++;
    }

    if (!found) {
        psp_set_err(err, errlen, "no nodes described (%s)", fmt_hint);
        return -EINVAL;
    }
    return 0;
}

int psp_nodes_load(const char *path, uint16_t default_port, struct psp_nodes *out, char *err,
                   size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        psp_set_err(err, errlen, "cannot read nodes file %s: %s", path, strerror(e));
        return -e;
    }
    char *buf = malloc(FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        psp_set_err(err, errlen, "cannot read nodes file %s: out of memory", path);
        return -ENOMEM;
    }
    size_t n = fread(buf, 1, FILE_MAX + 1, f);
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) {
        free(buf);
        psp_set_err(err, errlen, "cannot read nodes file %s: %s", path, strerror(rerr));
        return -rerr;
    }
    if (n > FILE_MAX) {
        free(buf);
        psp_set_err(err, errlen, "nodes file %s is larger than %d bytes", path, FILE_MAX);
        return -EFBIG;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        free(buf);
        psp_set_err(err, errlen, "nodes file %s is not a text file", path);
        return -EINVAL;
    }

    char msg[256];
    int rc = psp_nodes_parse(buf, default_port, out, msg, sizeof msg);
    free(buf);
    if (rc)
        psp_set_err(err, errlen, "%s: %s", path, msg);
    return rc;
}

void psp_nodes_single(struct psp_nodes *out, uint16_t default_port)
{
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->node[0].present = 1;
    out->node[0].port = default_port;
    out->node[0].ip.s_addr = htonl(INADDR_LOOPBACK);
}
