/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_quota.c — libFuzzer target for sn_quota (per-owner budgets on one
 * shared pool).
 *
 * The first bytes pick the pool (1..128 units) and the owners (1..8); then
 * each 4-byte record is a take (up to a little more than the pool), a give
 * (at most what the owner holds) or a set (reserve and cap, valid or not)
 * on one owner. A model holds each owner's use, reserve, cap, hits and
 * refused units. After every operation: a take grants exactly what the
 * rules of sn_quota.h allow (its reserve left plus what the shared part
 * has free, within its cap) and sn_quota_room() said so before; an owner
 * below its reserve always gets its reserve; no take lifts an owner above
 * its cap; the units held by all owners never exceed the pool; a set
 * returns what its contract says and changes nothing when refused; use,
 * reserve, cap, hits, refused, the sum of reserves and the shared use
 * (sum of excesses) equal the model's. Any difference aborts. A raised
 * reserve that does not fit beside the excess held is refused: else its
 * owner could take units the pool does not have.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_quota.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_quota: " __VA_ARGS__); abort(); } while (0)
#define NOWN 8

struct mown {
	uint32_t used, min, max;
	uint64_t hits, refused;
};

struct model {
	uint32_t total, n;
	struct mown o[NOWN];
};

static uint32_t excess(const struct mown *o)
{
	return o->used > o->min ? o->used - o->min : 0;
}

static uint32_t m_reserved(const struct model *m)
{
	uint32_t r = 0;

	for (uint32_t i = 0; i < m->n; i++)
		r += m->o[i].min;
	return r;
}

static uint32_t m_shared(const struct model *m)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i < m->n; i++)
		s += excess(&m->o[i]);
	return s;
}

/* What a take by owner i gets now (sn_quota.h): its reserve left plus the
 * shared part's free units, within its cap. */
static uint32_t m_room(const struct model *m, uint32_t i)
{
	const struct mown *o = &m->o[i];
	uint32_t res = m_reserved(m), sh = m_shared(m);
	uint32_t lim = m->total - (res < m->total ? res : m->total);
	uint64_t room;

	if (o->used >= o->max)
		return 0;
	room = (uint64_t)(o->min > o->used ? o->min - o->used : 0) + (sh < lim ? lim - sh : 0);
	return (uint32_t)(room < o->max - o->used ? room : o->max - o->used);
}

static void compare(const struct sn_quota *q, const struct model *m)
{
	uint64_t held = 0;

	for (uint32_t i = 0; i < m->n; i++) {
		struct sn_quota_owner_stats st;
		const struct mown *o = &m->o[i];

		sn_quota_owner_stats(q, i, &st);
		if (st.used != o->used || st.min != o->min || st.max != o->max ||
		    st.hits != o->hits || st.refused != o->refused || sn_quota_used(q, i) != o->used)
			FAIL("owner %u: used %u min %u max %u hits %llu refused %llu, "
			     "model %u %u %u %llu %llu\n", i, st.used, st.min, st.max,
			     (unsigned long long)st.hits, (unsigned long long)st.refused, o->used,
			     o->min, o->max, (unsigned long long)o->hits,
			     (unsigned long long)o->refused);
		if (sn_quota_room(q, i) != m_room(m, i))
			FAIL("owner %u: room %u, model %u\n", i, sn_quota_room(q, i), m_room(m, i));
		held += o->used;
	}
	if (held > m->total)
		FAIL("owners hold %llu units of a pool of %u\n", (unsigned long long)held, m->total);
	if (sn_quota_reserved(q) != m_reserved(m) || sn_quota_shared_used(q) != m_shared(m))
		FAIL("reserved %u shared %u, model %u %u\n", sn_quota_reserved(q),
		     sn_quota_shared_used(q), m_reserved(m), m_shared(m));
	if (sn_quota_total(q) != m->total || sn_quota_owners(q) != m->n)
		FAIL("total %u owners %u, model %u %u\n", sn_quota_total(q), sn_quota_owners(q),
		     m->total, m->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m;
	struct sn_quota *q;

	if (size < 2)
		return 0;
	memset(&m, 0, sizeof(m));
	m.total = (uint32_t)(data[0] & 127) + 1;
	m.n = (uint32_t)(data[1] % NOWN) + 1;
	data += 2;
	size -= 2;
	if (sn_quota_create(0, 1) || sn_quota_create(1, 0) ||
	    sn_quota_create(SN_QUOTA_OWNERS_MAX + 1, 1) || sn_quota_create(1, SN_QUOTA_TOTAL_MAX + 1))
		FAIL("create accepted an invalid pool\n");
	q = sn_quota_create(m.n, m.total);
	if (!q)
		FAIL("create(%u, %u) failed\n", m.n, m.total);
	for (uint32_t i = 0; i < m.n; i++)
		m.o[i].max = m.total;
	compare(q, &m);

	for (; size >= 4; data += 4, size -= 4) {
		uint32_t op = data[0] % 3, i = data[0] / 3 % m.n;
		struct mown *o = &m.o[i];

		if (op == 0) {
			uint32_t want = (uint32_t)data[1] % (m.total + 4);
			uint32_t room = m_room(&m, i), before = o->used, g;
			uint32_t rl = o->min > o->used ? o->min - o->used : 0;
			uint32_t want_g = want < room ? want : room;

			if (sn_quota_room(q, i) != room)
				FAIL("owner %u: room %u before take, model %u\n", i,
				     sn_quota_room(q, i), room);
			g = sn_quota_take(q, i, want);
			if (g != want_g)
				FAIL("owner %u: take %u granted %u, model %u\n", i, want, g, want_g);
			if (o->used < o->max && o->min <= o->max && g < (want < rl ? want : rl))
				FAIL("owner %u: take %u below its reserve got %u (reserve left %u)\n",
				     i, want, g, rl);
			if (g && before + g > o->max)
				FAIL("owner %u: take lifted it to %u above its cap %u\n", i,
				     before + g, o->max);
			o->used += g;
			if (g < want) {
				o->hits++;
				o->refused += want - g;
			}
		} else if (op == 1) {
			uint32_t n = (uint32_t)data[1] % (o->used + 1);

			sn_quota_give(q, i, n);
			o->used -= n;
		} else {
			uint32_t owner = data[3] == 0xff ? m.n + data[0] % 3 : i;
			uint32_t min = (uint32_t)data[1] % (m.total + 2);
			uint32_t max = (uint32_t)data[2] % (m.total + 2);
			int want_rc, rc;

			if (owner >= m.n || min > max || max > m.total)
				want_rc = -EINVAL;
			else if ((uint64_t)m_reserved(&m) - o->min + min > m.total)
				want_rc = -ENOSPC;
			else
				want_rc = 0;
			if (want_rc == 0 && min > o->min) {
				/* A raised reserve must fit beside the excess
				 * held (with this owner's under the new reserve). */
				uint32_t old = o->min, nres, sh;

				o->min = min;
				nres = m_reserved(&m);
				sh = m_shared(&m);
				o->min = old;
				if ((uint64_t)nres + sh > m.total)
					want_rc = -ENOSPC;
			}
			rc = sn_quota_set(q, owner, min, max);
			if (rc != want_rc)
				FAIL("set(%u, %u, %u) returned %d, model %d\n", owner, min, max, rc,
				     want_rc);
			if (rc == 0) {
				o->min = min;
				o->max = max;
			}
		}
		compare(q, &m);
	}
	sn_quota_free(q);
	return 0;
}
