/*
 * fault.c — the seeded fault generator shared by every link.
 *
 * xorshift64* (Vigna) seeded through splitmix64, so that small or similar seeds still give
 * unrelated streams.  Decisions are taken in a fixed order (drop list, loss, duplication,
 * corruption, reordering) and a random number is drawn only for a fault whose probability is
 * not zero, so the same configuration and the same frame sequence give the same verdicts.
 */
#include "fault.h"

#include <string.h>

/* splitmix64: spreads a seed over all 64 bits. */
static uint64_t mix_seed(uint64_t s)
{
    s += 0x9E3779B97F4A7C15ull;
    s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
    s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
    return s ^ (s >> 31);
}

uint64_t mcp_rand64(uint64_t *state)
{
    uint64_t x = *state;
    if (x == 0)
        x = 0x2545F4914F6CDD1Dull; /* a zero state would stay zero */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* True with probability p (p <= 0: never, p >= 1: always). */
static int chance(uint64_t *state, double p)
{
    if (p <= 0.0)
        return 0;
    uint64_t r = mcp_rand64(state);
    if (p >= 1.0)
        return 1;
    /* 53 random bits -> [0, 1) */
    double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
    return u < p;
}

/* Uniform in [0, n) for n >= 1 (the bias of the modulo is below 2^-32 for n < 2^32). */
static uint32_t below(uint64_t *state, uint32_t n)
{
    return (uint32_t)(mcp_rand64(state) % n);
}

void mcp_fault_init(struct mcp_fault *f, const struct mcp_fault_cfg *cfg)
{
    memset(f, 0, sizeof *f);
    if (cfg)
        f->cfg = *cfg;
    if (f->cfg.ndrops > MCP_FAULT_MAX_DROPS)
        f->cfg.ndrops = MCP_FAULT_MAX_DROPS;
    if (f->cfg.reorder_max == 0)
        f->cfg.reorder_max = 1;
    f->rng = mix_seed(f->cfg.seed);
    if (f->rng == 0)
        f->rng = 1;
}

int mcp_fault_active(const struct mcp_fault_cfg *cfg)
{
    return cfg->loss > 0.0 || cfg->dup > 0.0 || cfg->corrupt > 0.0 || cfg->reorder > 0.0 ||
           cfg->ndrops > 0 || cfg->delay_ns > 0;
}

void mcp_fault_decide(struct mcp_fault *f, uint8_t type, uint32_t len, struct mcp_fault_verdict *v)
{
    const struct mcp_fault_cfg *c = &f->cfg;
    uint64_t no = f->frame_no++;

    memset(v, 0, sizeof *v);

    for (uint32_t i = 0; i < c->ndrops; i++) {
        if (c->drops[i] == no) {
            v->drop = 1;
            f->dropped++;
            return;
        }
    }

    int lossy_type = c->loss_types == 0 || (type < 32 && (c->loss_types & (1u << type)));
    if (lossy_type && chance(&f->rng, c->loss)) {
        v->drop = 1;
        f->dropped++;
        return;
    }

    if (chance(&f->rng, c->dup)) {
        v->dup = 1;
        f->duplicated++;
    }

    if (chance(&f->rng, c->corrupt) && len > 0) {
        v->corrupt = 1;
        v->corrupt_at = below(&f->rng, len);
        v->corrupt_mask = (uint8_t)(1 + below(&f->rng, 255)); /* 1..255: always changes */
        f->corrupted++;
    }

    if (chance(&f->rng, c->reorder)) {
        v->hold = 1;
        v->hold_frames = 1 + below(&f->rng, c->reorder_max);
        f->held++;
    }
}
