/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cffs.c — sn_cffs against a naive byte-array model.
 *
 * Random set/clear/test/find_ge/find_next sequences over sizes around the
 * 64-ary level boundaries; find_next from random origins exercises the
 * wrap-around; the level invariant (upper bit set iff the word below is
 * non-zero) is checked after every batch. TAP-style output; exit 1 on the
 * first failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_cffs.h"

#include "sn_tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t model_ge(const uint8_t *m, uint32_t n, uint32_t pos)
{
	for (uint32_t i = pos; i < n; i++)
		if (m[i])
			return i;
	return SN_CFFS_NONE;
}

static uint32_t model_next(const uint8_t *m, uint32_t n, uint32_t pos)
{
	for (uint32_t d = 0; d < n; d++)
		if (m[(pos + d) % n])
			return (pos + d) % n;
	return SN_CFFS_NONE;
}

static void check_levels(const struct sn_cffs *c)
{
	for (uint32_t k = 0; k + 1 < c->levels; k++)
		for (uint32_t w = 0; w < c->words[k]; w++) {
			int up = (int)((c->lvl[k + 1][w >> 6] >> (w & 63)) & 1);

			CHECK(up == (c->lvl[k][w] != 0), "level %u word %u", k, w);
		}
	CHECK(c->words[c->levels - 1] == 1, "top level is one word");
}

static void run_random(uint32_t n, uint32_t ops, uint32_t density_pct)
{
	struct sn_cffs *c = sn_cffs_create(n);
	uint8_t *m = calloc(n, 1);
	uint32_t nset = 0;

	CHECK(c && m, "create %u", n);
	CHECK(sn_cffs_size(c) == n, "size");
	CHECK(sn_cffs_find_next(c, 0) == SN_CFFS_NONE, "empty");
	for (uint32_t op = 0; op < ops; op++) {
		uint32_t i = (uint32_t)(rnd() % n);
		uint32_t r = (uint32_t)(rnd() % 100);

		/* Clustered positions sometimes, to exercise full words. */
		if (r < 10 && n > 200)
			i = (uint32_t)(n - 1 - rnd() % 130);
		if (r < density_pct) {
			nset += !m[i];
			m[i] = 1;
			sn_cffs_set(c, i);
		} else if (r < 2 * density_pct || r >= 90) {
			nset -= m[i];
			m[i] = 0;
			sn_cffs_clear(c, i);
		}
		CHECK(sn_cffs_test(c, i) == m[i], "test %u", i);
		CHECK(sn_cffs_count(c) == nset, "count %u vs %u", sn_cffs_count(c), nset);
		if (n <= 5000 || op % 64 == 0) {
			uint32_t p = (uint32_t)(rnd() % n);

			CHECK(sn_cffs_find_ge(c, p) == model_ge(m, n, p), "ge n=%u p=%u", n, p);
			CHECK(sn_cffs_find_next(c, p) == model_next(m, n, p),
			      "next n=%u p=%u got %u want %u", n, p, sn_cffs_find_next(c, p),
			      model_next(m, n, p));
		}
		if (op % 4096 == 0)
			check_levels(c);
	}
	check_levels(c);
	/* Drain in circular order from a random origin: must visit every set
	 * position exactly once, in circular order. */
	{
		uint32_t origin = (uint32_t)(rnd() % n), seen = 0, last_d = 0;

		for (uint32_t i = sn_cffs_find_next(c, origin); i != SN_CFFS_NONE;
		     i = sn_cffs_find_next(c, origin)) {
			uint32_t d = (i + n - origin) % n;

			CHECK(m[i], "drain hit clear %u", i);
			CHECK(seen == 0 || d > last_d, "circular order");
			last_d = d;
			m[i] = 0;
			sn_cffs_clear(c, i);
			seen++;
		}
		CHECK(seen == nset, "drained %u of %u", seen, nset);
		CHECK(sn_cffs_empty(c), "empty after drain");
		check_levels(c);
	}
	sn_cffs_free(c);
	free(m);
	printf("ok %d - random n=%u ops=%u density=%u%%\n", ++n_test, n, ops, density_pct);
}

static void test_edges(void)
{
	struct sn_cffs *c;

	errno = 0;
	CHECK(sn_cffs_create(0) == NULL && errno == EINVAL, "zero bits");
	errno = 0;
	CHECK(sn_cffs_create(SN_CFFS_MAX_BITS + 1) == NULL && errno == EINVAL, "too many");

	c = sn_cffs_create(SN_CFFS_MAX_BITS);
	CHECK(c && c->levels == 5, "max geometry");
	sn_cffs_set(c, SN_CFFS_MAX_BITS - 1);
	sn_cffs_set(c, 7);
	CHECK(sn_cffs_find_next(c, 8) == SN_CFFS_MAX_BITS - 1, "far");
	CHECK(sn_cffs_find_next(c, SN_CFFS_MAX_BITS - 1) == SN_CFFS_MAX_BITS - 1, "at");
	sn_cffs_clear(c, SN_CFFS_MAX_BITS - 1);
	CHECK(sn_cffs_find_next(c, 8) == 7, "wrap to 7");
	CHECK(sn_cffs_find_ge(c, 8) == SN_CFFS_NONE, "no wrap in ge");
	CHECK(sn_cffs_find_ge(c, SN_CFFS_MAX_BITS) == SN_CFFS_NONE, "ge past end");
	sn_cffs_reset(c);
	CHECK(sn_cffs_empty(c) && sn_cffs_find_next(c, 0) == SN_CFFS_NONE, "reset");
	sn_cffs_free(c);

	c = sn_cffs_create(1);
	CHECK(c && c->levels == 1, "one bit");
	CHECK(sn_cffs_find_next(c, 0) == SN_CFFS_NONE, "1 empty");
	sn_cffs_set(c, 0);
	sn_cffs_set(c, 0);
	CHECK(sn_cffs_count(c) == 1 && sn_cffs_find_next(c, 0) == 0, "1 set");
	sn_cffs_clear(c, 0);
	sn_cffs_clear(c, 0);
	CHECK(sn_cffs_count(c) == 0, "1 clear");
	sn_cffs_free(c);
	printf("ok %d - edges\n", ++n_test);
}

int main(void)
{
	static const uint32_t sizes[] = { 1, 2, 63, 64, 65, 127, 4095, 4096, 4097,
					  262143, 262144, 262145, 1u << 20 };

	test_edges();
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		run_random(sizes[s], 20000, 45);
		run_random(sizes[s], 20000, 3);
	}
	printf("1..%d\n", n_test);
	return 0;
}
