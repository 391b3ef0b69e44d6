/* SPDX-License-Identifier: BSD-3-Clause */
/* test_quota.c — sn_quota against a sequential model, then under threads.
 *
 * Model part: random take/give/set sequences over a few owners; after every
 * step the grants equal the model's (the model computes what a take may
 * get: up to the cap, the reserve first, then the shared part), the
 * reserves stay reachable whatever the others hold, and the pool's
 * accounting (used, shared part, reserves) matches. Thread part: four
 * threads take and give on the same owners; the pool is never overdrawn,
 * no cap is ever exceeded, and everything given back leaves the pool empty.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sn_quota.h"

#include "sn_check.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define NO 6

struct model {
	uint32_t total, used[NO], min[NO], max[NO];
};

static uint32_t m_excess(const struct model *m, unsigned i)
{
	return m->used[i] > m->min[i] ? m->used[i] - m->min[i] : 0;
}

static uint32_t m_shared(const struct model *m)
{
	uint32_t s = 0;
	for (unsigned i = 0; i < NO; i++)
		s += m_excess(m, i);
	return s;
}

static uint32_t m_reserved(const struct model *m)
{
	uint32_t r = 0;
	for (unsigned i = 0; i < NO; i++)
		r += m->min[i];
	return r;
}

static uint32_t m_take(struct model *m, unsigned i, uint32_t want)
{
	if (m->used[i] >= m->max[i])
		return 0;
	uint32_t g = want < m->max[i] - m->used[i] ? want : m->max[i] - m->used[i];
	uint32_t res = m->min[i] > m->used[i] ? m->min[i] - m->used[i] : 0;
	uint32_t from_res = g < res ? g : res;
	uint32_t lim = m->total - m_reserved(m), sh = m_shared(m);
	uint32_t free_sh = sh < lim ? lim - sh : 0;
	uint32_t from_sh = g - from_res < free_sh ? g - from_res : free_sh;
	m->used[i] += from_res + from_sh;
	return from_res + from_sh;
}

static void test_model(void)
{
	for (int round = 0; round < 200; round++) {
		struct model m = { .total = 16 + (uint32_t)(rnd() % 200) };
		struct sn_quota *q = sn_quota_create(NO, m.total);
		CHECK(q != NULL);
		if (q == NULL)
			return;
		uint64_t hits[NO] = { 0 };
		for (unsigned i = 0; i < NO; i++)
			m.max[i] = m.total;
		for (int step = 0; step < 2000; step++) {
			unsigned i = (unsigned)(rnd() % NO);
			switch (rnd() % 8) {
			case 0: {   /* set: sometimes refused for want of room */
				uint32_t min = (uint32_t)(rnd() % (m.total / 3 + 1));
				uint32_t max = min + (uint32_t)(rnd() % (m.total - min + 1));
				int rc = sn_quota_set(q, i, min, max);
				uint32_t nres = m_reserved(&m) - m.min[i] + min;
				uint32_t old = m.min[i];
				/* A raise must also fit beside the excess held:
				 * the shared use with the new reserve. */
				m.min[i] = min;
				uint32_t sh = m_shared(&m);
				m.min[i] = old;
				int want = nres > m.total || (min > old && nres + sh > m.total) ? -ENOSPC : 0;
				CHECK(rc == want);
				if (rc == 0) {
					m.min[i] = min;
					m.max[i] = max;
				}
				break;
			}
			case 1: case 2: case 3: case 4: {
				uint32_t want = (uint32_t)(rnd() % 40);
				uint32_t exp = m_take(&m, i, want);
				uint32_t got = sn_quota_take(q, i, want);
				CHECK(got == exp);
				/* Never above the cap by a take (a set may
				 * lower the cap below the use). */
				CHECK(got == 0 || m.used[i] <= m.max[i]);
				if (got < want)
					hits[i]++;
				break;
			}
			default: {
				uint32_t n = m.used[i] ? (uint32_t)(rnd() % (m.used[i] + 1)) : 0;
				m.used[i] -= n;
				sn_quota_give(q, i, n);
				break;
			}
			}
			uint32_t sum = 0;
			for (unsigned k = 0; k < NO; k++) {
				struct sn_quota_owner_stats st;
				sn_quota_owner_stats(q, k, &st);
				CHECK(st.used == m.used[k]);
				CHECK(st.min == m.min[k] && st.max == m.max[k]);
				CHECK(st.hits == hits[k]);
				sum += st.used;
				/* The reserve is always reachable. */
				uint32_t room = sn_quota_room(q, k);
				if (m.used[k] < m.min[k])
					CHECK(room >= m.min[k] - m.used[k]);
			}
			CHECK(sum <= m.total);
			CHECK(sn_quota_shared_used(q) == m_shared(&m));
			CHECK(sn_quota_reserved(q) == m_reserved(&m));
		}
		sn_quota_free(q);
	}
}

static void test_args(void)
{
	errno = 0;
	CHECK(sn_quota_create(0, 10) == NULL && errno == EINVAL);
	CHECK(sn_quota_create(1, 0) == NULL && errno == EINVAL);
	CHECK(sn_quota_create(SN_QUOTA_OWNERS_MAX + 1, 10) == NULL && errno == EINVAL);
	struct sn_quota *q = sn_quota_create(2, 10);
	CHECK(q != NULL);
	CHECK(sn_quota_set(q, 2, 0, 1) == -EINVAL);
	CHECK(sn_quota_set(q, 0, 5, 4) == -EINVAL);
	CHECK(sn_quota_set(q, 0, 0, 11) == -EINVAL);
	CHECK(sn_quota_set(q, 0, 6, 10) == 0);
	CHECK(sn_quota_set(q, 1, 5, 10) == -ENOSPC);
	CHECK(sn_quota_set(q, 1, 4, 6) == 0);
	/* Owner 1 cannot eat owner 0's reserve. */
	CHECK(sn_quota_take(q, 1, 10) == 4);
	CHECK(sn_quota_take(q, 0, 10) == 6);
	CHECK(sn_quota_take(q, 0, 1) == 0);
	sn_quota_give(q, 1, 4);
	CHECK(sn_quota_take(q, 0, 10) == 0);   /* the shared part is empty: 10 - 6 - 4 */
	CHECK(sn_quota_set(q, 1, 0, 6) == 0);  /* reserve released to the shared part */
	CHECK(sn_quota_take(q, 0, 10) == 4);
	sn_quota_free(q);
	sn_quota_free(NULL);

	/* A reserve raised while another owner holds the shared part would
	 * let its owner take units the pool does not have: refused until
	 * they come back (fuzz_quota found the overdraw). */
	q = sn_quota_create(2, 10);
	CHECK(q != NULL);
	CHECK(sn_quota_take(q, 0, 10) == 10);
	CHECK(sn_quota_set(q, 1, 5, 10) == -ENOSPC);
	CHECK(sn_quota_reserved(q) == 0);
	CHECK(sn_quota_take(q, 1, 5) == 0);
	sn_quota_give(q, 0, 5);
	CHECK(sn_quota_set(q, 1, 5, 10) == 0);
	CHECK(sn_quota_take(q, 1, 5) == 5);
	CHECK(sn_quota_used(q, 0) + sn_quota_used(q, 1) == 10);
	/* Raising the reserve of the owner holding the excess turns its own
	 * excess into reserve: allowed. */
	CHECK(sn_quota_set(q, 0, 5, 10) == 0);
	CHECK(sn_quota_shared_used(q) == 0);
	sn_quota_free(q);
}

#define NT 4
#define ITERS 200000
static struct sn_quota *tq;
static _Atomic uint32_t held_sum;
static _Atomic int overdrawn, over_cap;

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	uint32_t mine[3] = { 0 };
	uint64_t s = 0x1234567ull * (id + 1);
	for (int it = 0; it < ITERS; it++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		unsigned o = (unsigned)(s >> 33) % 3;
		if ((s >> 40) & 1) {
			uint32_t g = sn_quota_take(tq, o, (uint32_t)(s >> 50) % 16 + 1);
			mine[o] += g;
			if (atomic_fetch_add(&held_sum, g) + g > sn_quota_total(tq))
				atomic_store(&overdrawn, 1);
			if (sn_quota_used(tq, o) > 40)
				atomic_store(&over_cap, 1);
		} else if (mine[o]) {
			uint32_t n = (uint32_t)(s >> 50) % mine[o] + 1;
			mine[o] -= n;
			atomic_fetch_sub(&held_sum, n);
			sn_quota_give(tq, o, n);
		}
	}
	for (unsigned o = 0; o < 3; o++) {
		atomic_fetch_sub(&held_sum, mine[o]);
		sn_quota_give(tq, o, mine[o]);
	}
	return NULL;
}

static void test_threads(void)
{
	tq = sn_quota_create(3, 100);
	CHECK(tq != NULL);
	CHECK(sn_quota_set(tq, 0, 10, 40) == 0);
	CHECK(sn_quota_set(tq, 1, 10, 40) == 0);
	CHECK(sn_quota_set(tq, 2, 0, 40) == 0);
	pthread_t t[NT];
	for (unsigned i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	CHECK(!atomic_load(&overdrawn));
	CHECK(!atomic_load(&over_cap));
	for (unsigned o = 0; o < 3; o++)
		CHECK(sn_quota_used(tq, o) == 0);
	CHECK(sn_quota_shared_used(tq) == 0);
	struct sn_quota_owner_stats st;
	sn_quota_owner_stats(tq, 0, &st);
	printf("threads: owner 0 hits %llu, units refused %llu\n",
	       (unsigned long long)st.hits, (unsigned long long)st.refused);
	sn_quota_free(tq);
}

int main(void)
{
	test_args();
	test_model();
	test_threads();
	return sn_check_exit("test_quota");
}
