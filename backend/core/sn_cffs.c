/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_cffs.c — circular hierarchical FFS bitmap: create, free, dump.
 *
 * Follows A. Saeed, Y. Zhao, N. Dukkipati, E. Zegura, M. Ammar, K. Harras,
 * A. Vahdat, "Eiffel: Efficient and Flexible Software Packet Scheduling",
 * USENIX NSDI 2019, §3.1.1. A hierarchical FFS queue finds the minimum
 * non-empty bucket among N with one find-first-set per level of a 64-ary
 * bitmap tree, i.e. O(log64 N) bit operations (__builtin_ctzll). Eiffel's
 * cFFS makes the bucket range move with time by keeping two such queues
 * (primary + "buffer" range) and swapping them when the primary drains,
 * because mapping priorities onto buckets with a plain modulo corrupts the
 * ordering the bitmap encodes.
 *
 * We keep one bitmap and put the circularity in the search instead: the
 * caller (sn_twheel) guarantees that every occupied position lies within
 * one revolution ahead of a moving origin (the wheel's front slot), so the
 * circular order origin, origin+1, ..., N-1, 0, ..., origin-1 IS the time
 * order. find_next(origin) = find_ge(origin), else find_ge(0): two
 * O(log64 N) descents, no swapping and no second bitmap. The invariant
 * (nothing occupied beyond one revolution), which Eiffel keeps with two
 * ranges, the timing wheel keeps by clamping or rejecting timestamps.
 *
 * Layout: all levels in one cache-aligned allocation, level 0 first; bits
 * past nbits in a level's last word are never set (no bounds masks). */
#include "sn_cffs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sn_cffs *sn_cffs_create(uint32_t nbits)
{
	struct sn_cffs *c;
	uint64_t total = 0;
	uint64_t *mem;

	if (nbits == 0 || nbits > SN_CFFS_MAX_BITS) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->nbits = nbits;
	for (uint32_t n = nbits;; ) {
		uint32_t w = (n + 63) / 64;

		SN_VERIFY(c->levels < SN_CFFS_MAX_LEVELS);
		c->words[c->levels++] = w;
		total += w;
		if (w == 1)
			break;
		n = w;
	}
	/* Round up to whole cache lines for aligned_alloc. */
	total = (total + 7) & ~7ull;
	mem = aligned_alloc(SN_CACHE_LINE, total * sizeof(uint64_t));
	if (!mem) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	memset(mem, 0, total * sizeof(uint64_t));
	for (uint32_t k = 0, off = 0; k < c->levels; k++) {
		c->lvl[k] = mem + off;
		off += c->words[k];
	}
	return c;
}

void sn_cffs_free(struct sn_cffs *c)
{
	if (!c)
		return;
	free(c->lvl[0]);
	free(c);
}

void sn_cffs_reset(struct sn_cffs *c)
{
	for (uint32_t k = 0; k < c->levels; k++)
		memset(c->lvl[k], 0, c->words[k] * sizeof(uint64_t));
	c->nset = 0;
}

void sn_cffs_dump(const struct sn_cffs *c, uint32_t max)
{
	uint32_t shown = 0;

	fprintf(stderr, "cffs: nbits %u levels %u set %u words", c->nbits, c->levels, c->nset);
	for (uint32_t k = 0; k < c->levels; k++)
		fprintf(stderr, " %u", c->words[k]);
	fprintf(stderr, "\n  set:");
	for (uint32_t i = sn_cffs_find_ge(c, 0); i != SN_CFFS_NONE && shown < max;
	     i = sn_cffs_find_ge(c, i + 1), shown++)
		fprintf(stderr, " %u", i);
	fprintf(stderr, "%s\n", shown < c->nset ? " ..." : "");
}
