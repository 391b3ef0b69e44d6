/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_mac.c — libFuzzer target for the switch's MAC learning table
 * (sn_mac.h, sn_mac_impl.h) as a state machine.
 *
 * The first bytes pick the table size (16, 32 or 64 entries), the aging
 * time (1..256 ticks) and each of 4 port slots' quota cap (slot 0 is the
 * uplink, 1..3 VM ports); then each 3-byte record is an operation: learn
 * (one of 24 MACs or any MAC, from a slot and one of 2 generations, with
 * the port's allowed_macs holding the MAC or not, or a static install),
 * lookup, time advancing (0..255 or a jump past the aging time), an aging
 * scan from a fuzzed bucket, forgetting a slot, or a move-policy change.
 * A model holds, per bucket, the entries (MAC, slot, generation, last
 * seen, VM / static), per slot the quota units, and the counters. After
 * every operation the table must match it: a lookup finds exactly a
 * learned entry that has not expired (static ones never do) with its slot
 * and generation; a learn reports KNOWN / WROTE / FULL / QUOTA / REFUSED
 * as the rules of sn_mac.h say (move policy, a VM port's share of a
 * bucket, its quota, a static install taking the oldest learned way of a
 * full bucket), evicts only an expired entry but for that, refreshes
 * `seen` as documented; an aging scan removes exactly the expired entries
 * of its slice; forget removes every entry of the slot; the table never
 * holds more entries than its capacity nor a MAC twice; each slot's quota
 * use equals its entries; the counters add up (entries = learned - aged -
 * forgotten). Any difference aborts.
 */
#define ALLOW_EXPERIMENTAL_API
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_mac_impl.h"
#include "sn_quota.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_mac: " __VA_ARGS__); abort(); } while (0)
#define MAXB 16   /* buckets of the largest table (64 entries) */
#define NMAC 24

#define NSLOT 4

struct ment {
	uint64_t key, seen;
	uint32_t gen;
	uint16_t slot, flags;
};

struct model {
	struct ment e[MAXB][SN_MAC_WAYS];
	unsigned n[MAXB];
	uint32_t cap[NSLOT];
	bool move_any;
	uint64_t learned, aged, moves, full, refused, quota, forgotten;
};

static bool m_expired(const struct sn_mac *t, const struct ment *e, uint64_t now)
{
	return !(e->flags & SN_MAC_E_STATIC) && sn_mac_expired(t, e->seen, now);
}

static unsigned bucket_of(struct sn_mac *t, uint64_t key)
{
	return (unsigned)(sn_mac_bucket(t, key) - t->b);
}

static int mfind(const struct model *m, unsigned b, uint64_t key)
{
	for (unsigned i = 0; i < m->n[b]; i++)
		if (m->e[b][i].key == key)
			return (int)i;
	return -1;
}

static void mdel(struct model *m, unsigned b, unsigned i)
{
	m->e[b][i] = m->e[b][--m->n[b]];
}

static uint32_t m_units(const struct model *m, uint16_t slot)
{
	uint32_t n = 0;

	for (unsigned b = 0; b < MAXB; b++)
		for (unsigned i = 0; i < m->n[b]; i++)
			n += m->e[b][i].slot == slot;
	return n;
}

/* The table's bucket b holds exactly the model's entries (any ways). */
static void compare_bucket(struct sn_mac *t, const struct model *m, unsigned b)
{
	unsigned used = 0;

	for (unsigned w = 0; w < SN_MAC_WAYS; w++) {
		const struct sn_mac_entry *e = &t->b[b].e[w];
		int i;

		if (!e->key)
			continue;
		used++;
		if (!(e->key & SN_MAC_VALID))
			FAIL("bucket %u way %u: key %#llx without the valid bit\n", b, w,
			     (unsigned long long)e->key);
		for (unsigned v = w + 1; v < SN_MAC_WAYS; v++)
			if (t->b[b].e[v].key == e->key)
				FAIL("bucket %u: key %#llx in two ways\n", b, (unsigned long long)e->key);
		i = mfind(m, b, e->key);
		if (i < 0)
			FAIL("bucket %u: key %#llx was never learned there\n", b,
			     (unsigned long long)e->key);
		if (e->slot != m->e[b][i].slot || e->gen != m->e[b][i].gen ||
		    e->seen != m->e[b][i].seen || e->flags != m->e[b][i].flags)
			FAIL("bucket %u: key %#llx slot %u gen %u seen %llu flags %u, model %u %u %llu %u\n",
			     b, (unsigned long long)e->key, e->slot, e->gen, (unsigned long long)e->seen,
			     e->flags, m->e[b][i].slot, m->e[b][i].gen,
			     (unsigned long long)m->e[b][i].seen, m->e[b][i].flags);
	}
	if (used != m->n[b])
		FAIL("bucket %u: %u entries, model %u\n", b, used, m->n[b]);
}

static void compare_all(struct sn_mac *t, const struct sn_quota *q, const struct model *m)
{
	struct sn_mac_stats st;
	uint64_t n = 0;

	for (unsigned b = 0; b < t->nb; b++) {
		compare_bucket(t, m, b);
		n += m->n[b];
	}
	for (uint16_t s = 0; s < NSLOT; s++)
		if (sn_quota_used(q, s) != m_units(m, s))
			FAIL("slot %u: %u quota units, %u entries\n", s, sn_quota_used(q, s),
			     m_units(m, s));
	sn_mac_stats(t, &st);
	if (st.entries != n || st.entries > (uint64_t)t->nb * SN_MAC_WAYS)
		FAIL("stats.entries %llu, table holds %llu (capacity %u)\n",
		     (unsigned long long)st.entries, (unsigned long long)n, t->nb * SN_MAC_WAYS);
	if (st.learned != m->learned || st.aged != m->aged || st.moves != m->moves ||
	    st.full != m->full || st.move_refused != m->refused || st.quota != m->quota ||
	    st.entries != st.learned - st.aged - m->forgotten)
		FAIL("stats learned %llu aged %llu moves %llu full %llu refused %llu quota %llu, "
		     "model %llu %llu %llu %llu %llu %llu (forgotten %llu)\n",
		     (unsigned long long)st.learned, (unsigned long long)st.aged,
		     (unsigned long long)st.moves, (unsigned long long)st.full,
		     (unsigned long long)st.move_refused, (unsigned long long)st.quota,
		     (unsigned long long)m->learned, (unsigned long long)m->aged,
		     (unsigned long long)m->moves, (unsigned long long)m->full,
		     (unsigned long long)m->refused, (unsigned long long)m->quota,
		     (unsigned long long)m->forgotten);
}

/* The move policy of sn_mac.h for entry e and a port of flags `in`. */
static bool m_may_move(const struct sn_mac *t, const struct model *m, const struct ment *e,
		       unsigned in, uint64_t now)
{
	const bool vm_entry = e->flags & SN_MAC_E_VM, vm_port = in & SN_MAC_IN_VM;

	if (e->flags & SN_MAC_E_STATIC)
		return (in & SN_MAC_IN_ALLOWED) && !(in & SN_MAC_IN_STATIC);
	if ((in & SN_MAC_IN_ALLOWED) || sn_mac_expired(t, e->seen, now) || m->move_any)
		return true;
	return vm_entry == vm_port;
}

static enum sn_mac_learn_res m_learn(struct sn_mac *t, struct model *m, unsigned b,
				     uint64_t key, uint16_t slot, uint32_t gen, unsigned in,
				     uint64_t now, bool *new_entry)
{
	const uint16_t flags = (uint16_t)(((in & SN_MAC_IN_VM) ? SN_MAC_E_VM : 0) |
					  ((in & (SN_MAC_IN_STATIC | SN_MAC_IN_ALLOWED)) ?
					   SN_MAC_E_STATIC : 0));
	int i = mfind(m, b, key);
	unsigned dead = 0, mine = 0, nonstatic = 0;

	*new_entry = false;
	if (i >= 0) {
		struct ment *e = &m->e[b][i];

		if (e->slot == slot && e->gen == gen &&
		    (e->flags & SN_MAC_E_STATIC) >= (flags & SN_MAC_E_STATIC)) {
			if (now - e->seen > t->aging_tsc / SN_MAC_SEEN_REFRESH)
				e->seen = now;
			return SN_MAC_KNOWN;
		}
		if (e->slot != slot || e->gen != gen) {
			if (!m_may_move(t, m, e, in, now)) {
				m->refused++;
				return SN_MAC_REFUSED;
			}
			if (e->slot != slot && m_units(m, slot) >= m->cap[slot]) {
				m->quota++;
				return SN_MAC_QUOTA;
			}
			e->slot = slot;
			e->gen = gen;
			m->moves++;
		}
		e->flags = flags;
		e->seen = now;
		return SN_MAC_WROTE;
	}
	for (unsigned k = 0; k < m->n[b]; k++) {
		const struct ment *e = &m->e[b][k];

		if (m_expired(t, e, now)) {
			dead++;
			continue;
		}
		mine += e->slot == slot && !(e->flags & SN_MAC_E_STATIC);
	}
	for (unsigned k = 0; k < m->n[b]; k++)
		nonstatic += !(m->e[b][k].flags & SN_MAC_E_STATIC);
	dead += SN_MAC_WAYS - m->n[b];
	if (!dead && !((in & SN_MAC_IN_STATIC) && nonstatic)) {
		m->full++;
		return SN_MAC_FULL;
	}
	if (((in & SN_MAC_IN_VM) && !(in & SN_MAC_IN_STATIC) && mine >= SN_MAC_BUCKET_PORT_MAX)) {
		m->quota++;
		return SN_MAC_QUOTA;
	}
	/* The unit: taken for slot, given back by a replaced entry's slot. */
	*new_entry = true;
	return SN_MAC_WROTE;
}

static void do_learn(struct sn_mac *t, struct model *m, uint64_t key, uint16_t slot,
		     uint32_t gen, unsigned in, uint64_t now)
{
	unsigned b = bucket_of(t, key);
	bool fresh;
	enum sn_mac_learn_res want = m_learn(t, m, b, key, slot, gen, in, now, &fresh);
	enum sn_mac_learn_res r = sn_mac_learn(t, key, slot, gen, in, now);
	const uint16_t flags = (uint16_t)(((in & SN_MAC_IN_VM) ? SN_MAC_E_VM : 0) |
					  ((in & (SN_MAC_IN_STATIC | SN_MAC_IN_ALLOWED)) ?
					   SN_MAC_E_STATIC : 0));

	if (fresh) {
		/* The table chose the way: find the entry it replaced, if any.
		 * Dead ones (free, expired) first; a live one only for a static
		 * install into a bucket without a dead way, and then the oldest
		 * learned one. */
		int gone = -1;
		bool any_dead = m->n[b] < SN_MAC_WAYS;
		uint64_t oldest = UINT64_MAX;

		for (unsigned k = 0; k < m->n[b]; k++) {
			bool present = false;

			any_dead |= m_expired(t, &m->e[b][k], now);
			if (!(m->e[b][k].flags & SN_MAC_E_STATIC) && m->e[b][k].seen < oldest)
				oldest = m->e[b][k].seen;
			for (unsigned w = 0; w < SN_MAC_WAYS; w++)
				present |= t->b[b].e[w].key == m->e[b][k].key;
			if (!present)
				gone = (int)k;
		}
		/* The quota: a replaced entry of the same slot moves its unit. */
		if (!(gone >= 0 && m->e[b][gone].slot == slot) && m_units(m, slot) >= m->cap[slot]) {
			if (r != SN_MAC_QUOTA)
				FAIL("learn of a new MAC for slot %u at its cap %u returned %d\n", slot,
				     m->cap[slot], r);
			m->quota++;
			compare_bucket(t, m, b);
			return;
		}
		if (r != SN_MAC_WROTE)
			FAIL("learn of a new MAC with room returned %d\n", r);
		if (gone >= 0) {
			const struct ment *g = &m->e[b][gone];

			if (!m_expired(t, g, now) &&
			    (any_dead || !(in & SN_MAC_IN_STATIC) || (g->flags & SN_MAC_E_STATIC) ||
			     g->seen != oldest))
				FAIL("learn evicted a live MAC %#llx (static install %d, dead way %d)\n",
				     (unsigned long long)g->key, !!(in & SN_MAC_IN_STATIC), any_dead);
			mdel(m, b, (unsigned)gone);
			m->aged++;
		}
		if (m->n[b] == SN_MAC_WAYS)
			FAIL("learn wrote a new MAC into a full bucket without evicting\n");
		m->e[b][m->n[b]++] = (struct ment){ key, now, gen, slot, flags };
		m->learned++;
	} else if (r != want) {
		FAIL("learn of %#llx slot %u gen %u in %u returned %d, model %d\n",
		     (unsigned long long)key, slot, gen, in, r, want);
	}
	if (r == SN_MAC_KNOWN || r == SN_MAC_WROTE) {
		uint16_t s;
		uint32_t g;

		if (!sn_mac_lookup(t, key, now, &s, &g) || s != slot || g != gen)
			FAIL("a MAC just learned is not found on its port\n");
	}
	compare_bucket(t, m, b);
}

static void do_lookup(struct sn_mac *t, const struct model *m, uint64_t key, uint64_t now)
{
	unsigned b = bucket_of(t, key);
	int i = mfind(m, b, key);
	bool want = i >= 0 && !m_expired(t, &m->e[b][i], now);
	uint16_t s = 0xffff;
	uint32_t g = 0xffffffffu;
	bool got = sn_mac_lookup(t, key, now, &s, &g);

	if (got != want)
		FAIL("lookup %#llx: %d, model %d\n", (unsigned long long)key, got, want);
	if (got && (s != m->e[b][i].slot || g != m->e[b][i].gen))
		FAIL("lookup %#llx: slot %u gen %u, model %u %u\n", (unsigned long long)key, s, g,
		     m->e[b][i].slot, m->e[b][i].gen);
}

static void do_age(struct sn_mac *t, struct model *m, unsigned from, uint64_t now)
{
	unsigned next = sn_mac_age(t, from, now);
	unsigned want = from + SN_MAC_AGE_SLICE / SN_MAC_WAYS;

	if (want > t->nb)
		want = t->nb;
	if (next != want)
		FAIL("age from %u returned %u, want %u\n", from, next, want);
	for (unsigned b = from; b < next; b++)
		for (unsigned k = 0; k < m->n[b];) {
			if (m_expired(t, &m->e[b][k], now)) {
				mdel(m, b, k);
				m->aged++;
			} else {
				k++;
			}
		}
}

static void do_forget(struct sn_mac *t, struct model *m, uint16_t slot)
{
	unsigned n = sn_mac_forget(t, slot), want = 0;

	for (unsigned b = 0; b < t->nb; b++)
		for (unsigned k = 0; k < m->n[b];) {
			if (m->e[b][k].slot == slot) {
				mdel(m, b, k);
				want++;
			} else {
				k++;
			}
		}
	if (n != want)
		FAIL("forget of slot %u removed %u entries, model %u\n", slot, n, want);
	m->forgotten += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned sizes[] = { 16, 32, 64 };
	static struct model m;
	uint64_t macs[NMAC], now = 1000, aging;
	unsigned entries;
	struct sn_quota *q;
	struct sn_mac *t;
	void *mem;

	if (size < 2 + NSLOT)
		return 0;
	entries = sizes[data[0] % 3];
	aging = (uint64_t)data[1] + 1;
	memset(&m, 0, sizeof(m));
	/* The pool the switch makes: one unit per way and one per learning
	 * thread (sn_mac_quota_units), so the pool itself never refuses. */
	q = sn_quota_create(NSLOT, sn_mac_quota_units(entries));
	if (!q)
		abort();
	for (unsigned s = 0; s < NSLOT; s++) {
		m.cap[s] = data[2 + s] % (entries + 1);
		if (sn_quota_set(q, s, 0, m.cap[s]))
			FAIL("quota cap %u of %u refused\n", m.cap[s], entries);
	}
	data += 2 + NSLOT;
	size -= 2 + NSLOT;
	if (posix_memalign(&mem, 64, sn_mac_mem_size(entries)))
		abort();
	memset(mem, 0, sn_mac_mem_size(entries));
	t = sn_mac_init(mem, entries, aging);
	if (!t || sn_mac_buckets(t) != entries / SN_MAC_WAYS)
		FAIL("init of %u entries failed\n", entries);
	sn_mac_set_quota(t, q);
	for (unsigned i = 0; i < NMAC; i++)   /* locally administered 52:54:00:00:00:i */
		macs[i] = (0x52ULL | 0x54ULL << 8 | (uint64_t)i << 40) | SN_MAC_VALID;

	for (; size >= 3; data += 3, size -= 3) {
		uint8_t op = data[0] & 7, a = data[1], c = data[2];
		uint64_t key = a < 4 * NMAC ? macs[a % NMAC]
			     : ((uint64_t)a * 0x0101010101ULL ^ (uint64_t)c << 17) & 0xffffffffffffULL;
		uint16_t slot = (uint16_t)(c & 3);
		/* Slot 0 is the uplink; a VM port's allowed_macs may hold the
		 * MAC; a static install is MAIN's for a VM port. */
		unsigned in = (slot ? SN_MAC_IN_VM : 0) |
			      (slot && (data[0] & 0x40) ? SN_MAC_IN_ALLOWED : 0) |
			      (slot && (data[0] & 0xc0) == 0xc0 ? SN_MAC_IN_STATIC : 0);

		key |= SN_MAC_VALID;
		switch (op) {
		case 0: case 1: case 7:
			do_learn(t, &m, key, slot, (uint32_t)(c >> 2 & 1), in, now);
			break;
		case 2:
			do_lookup(t, &m, key, now);
			break;
		case 3:
			now += data[0] & 8 ? aging + 1 + c : c;
			break;
		case 4:
			do_age(t, &m, (unsigned)c % t->nb, now);
			break;
		case 5:
			if (!(a & 7))
				do_forget(t, &m, slot);
			break;
		default:
			m.move_any = a & 1;
			sn_mac_set_move(t, m.move_any ? SN_MAC_MOVE_ANY : SN_MAC_MOVE_VM_STICKY);
			break;
		}
		compare_all(t, q, &m);
	}
	free(mem);
	sn_quota_free(q);
	return 0;
}
