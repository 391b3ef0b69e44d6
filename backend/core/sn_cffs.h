/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_cffs.h — circular hierarchical find-first-set bitmap (Eiffel cFFS).
 *
 * A fixed set of `nbits` positions (slots of a timing wheel) with one bit
 * each, kept in 64-ary levels: bit i of level k+1 is set iff word i of
 * level k is non-zero. Level 0 holds the slot bits; the top level is a
 * single word. Set, clear and test are O(levels); finding the first set
 * slot at or after a *circular* position (the wheel's "now" slot, wrapping
 * from nbits-1 to 0) is two O(levels) descents, levels = ceil(log64 nbits)
 * (6 bit operations for a billion slots). See sn_cffs.c for the design.
 *
 * Concurrency: none. One thread owns a cFFS; no internal locking, no
 * barriers. Hot-path bodies are inline below; the struct is public only so
 * they can be; its fields are private to sn_cffs.
 *
 * Errors: sn_cffs_create returns NULL and sets errno; positions passed to
 * set/clear/test must be < nbits (checked only by SN_CFFS_DEBUG builds).
 */
#ifndef SN_CFFS_H
#define SN_CFFS_H

#include <stdint.h>

#include "sn_common.h"

#define SN_CFFS_MAX_LEVELS 6
#define SN_CFFS_MAX_BITS   (1u << 30)   /* 64^5: five levels */
#define SN_CFFS_NONE       UINT32_MAX   /* "no set bit" from the finders */

struct sn_cffs {
	/* Read mostly: geometry. */
	uint32_t nbits;
	uint32_t levels;                          /* 1 .. SN_CFFS_MAX_LEVELS */
	uint32_t words[SN_CFFS_MAX_LEVELS];       /* words in each level */
	uint64_t *lvl[SN_CFFS_MAX_LEVELS];        /* lvl[0] = slot bits; lvl[levels-1] = 1 word */
	/* Written by set/clear. */
	uint32_t nset;                            /* number of set bits */
};

/* Create a cFFS of nbits (1 .. SN_CFFS_MAX_BITS) positions, all clear.
 * NULL + errno EINVAL / ENOMEM. */
struct sn_cffs *sn_cffs_create(uint32_t nbits);
void sn_cffs_free(struct sn_cffs *c);
/* Clear every bit. O(nbits / 64). */
void sn_cffs_reset(struct sn_cffs *c);
/* Print the geometry and the set positions (up to `max` of them) to stderr. */
void sn_cffs_dump(const struct sn_cffs *c, uint32_t max);

#ifdef SN_CFFS_DEBUG
#define SN_CFFS_CHECK_POS(c, i) SN_VERIFY((i) < (c)->nbits)
#else
#define SN_CFFS_CHECK_POS(c, i) ((void)0)
#endif

static inline uint32_t sn_cffs_size(const struct sn_cffs *c) { return c->nbits; }
static inline uint32_t sn_cffs_count(const struct sn_cffs *c) { return c->nset; }
static inline int sn_cffs_empty(const struct sn_cffs *c) { return c->nset == 0; }

static inline int sn_cffs_test(const struct sn_cffs *c, uint32_t i)
{
	SN_CFFS_CHECK_POS(c, i);
	return (int)((c->lvl[0][i >> 6] >> (i & 63)) & 1);
}

/* Set bit i (no-op if set). Propagates upward only while a word turns
 * from zero to non-zero. */
static inline void sn_cffs_set(struct sn_cffs *c, uint32_t i)
{
	SN_CFFS_CHECK_POS(c, i);
	uint64_t *w = &c->lvl[0][i >> 6];
	uint64_t bit = 1ull << (i & 63);

	if (*w & bit)
		return;
	c->nset++;
	for (uint32_t k = 0;;) {
		uint64_t old = *w;

		*w = old | bit;
		if (old || ++k == c->levels)
			return;
		i >>= 6;
		w = &c->lvl[k][i >> 6];
		bit = 1ull << (i & 63);
	}
}

/* Clear bit i (no-op if clear). Propagates upward only while a word turns
 * from non-zero to zero. */
static inline void sn_cffs_clear(struct sn_cffs *c, uint32_t i)
{
	SN_CFFS_CHECK_POS(c, i);
	uint64_t *w = &c->lvl[0][i >> 6];
	uint64_t bit = 1ull << (i & 63);

	if (!(*w & bit))
		return;
	c->nset--;
	for (uint32_t k = 0;;) {
		*w &= ~bit;
		if (*w || ++k == c->levels)
			return;
		i >>= 6;
		w = &c->lvl[k][i >> 6];
		bit = 1ull << (i & 63);
	}
}

/* Smallest set position >= pos (linear, no wrap), or SN_CFFS_NONE.
 * Climbs while the rest of the current word is empty, then descends along
 * the first set bit of each level. pos may be >= nbits (gives NONE). */
static inline uint32_t sn_cffs_find_ge(const struct sn_cffs *c, uint32_t pos)
{
	uint32_t idx = pos;

	for (uint32_t k = 0; k < c->levels; k++) {
		uint32_t w = idx >> 6;
		uint64_t m;

		if (w >= c->words[k])
			return SN_CFFS_NONE;
		m = c->lvl[k][w] & (~0ull << (idx & 63));
		if (m) {
			idx = (w << 6) | (uint32_t)__builtin_ctzll(m);
			while (k-- > 0)
				idx = (idx << 6) | (uint32_t)__builtin_ctzll(c->lvl[k][idx]);
			return idx;
		}
		idx = w + 1;
	}
	return SN_CFFS_NONE;
}

/* First set position in circular order starting at pos: pos, pos+1, ...,
 * nbits-1, 0, ..., pos-1. SN_CFFS_NONE if all clear. pos < nbits. */
static inline uint32_t sn_cffs_find_next(const struct sn_cffs *c, uint32_t pos)
{
	uint32_t r = sn_cffs_find_ge(c, pos);

	if (r != SN_CFFS_NONE || pos == 0)
		return r;
	return sn_cffs_find_ge(c, 0);   /* wrapped: anything found is < pos */
}

#endif /* SN_CFFS_H */
