/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_mac.c — libFuzzer target for the switch's MAC learning table
 * (sn_mac.h, sn_mac_impl.h) as a state machine.
 *
 * The first bytes pick the table size (16, 32 or 64 entries) and the
 * aging time (1..256 ticks); then each 3-byte record is an operation:
 * learn (one of 24 MACs, or any MAC, from one of 4 port slots and 2
 * generations), lookup, time advancing (0..255 or a jump past the aging
 * time) or an aging scan from a fuzzed bucket. A model holds, per bucket,
 * the entries learned (MAC, slot, generation, last seen) and the
 * counters. After every operation the table must match it: a lookup
 * finds exactly a learned, unexpired entry for that MAC with its slot and
 * generation; a learn reports KNOWN / WROTE / FULL as the rules of
 * sn_mac.h say (full only when every way holds another unexpired MAC),
 * evicts only an expired entry, refreshes `seen` as documented; an aging
 * scan removes exactly the expired entries of its slice of buckets; the
 * table never holds more entries than its capacity nor a MAC twice, and
 * the counters (entries = learned - aged, moves, full) add up. Any
 * difference aborts.
 */
#define ALLOW_EXPERIMENTAL_API
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_mac_impl.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_mac: " __VA_ARGS__); abort(); } while (0)
#define MAXB 16   /* buckets of the largest table (64 entries) */
#define NMAC 24

struct ment {
	uint64_t key, seen;
	uint32_t gen;
	uint16_t slot;
};

struct model {
	struct ment e[MAXB][SN_MAC_WAYS];
	unsigned n[MAXB];
	uint64_t learned, aged, moves, full;
};

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
		    e->seen != m->e[b][i].seen)
			FAIL("bucket %u: key %#llx slot %u gen %u seen %llu, model %u %u %llu\n", b,
			     (unsigned long long)e->key, e->slot, e->gen, (unsigned long long)e->seen,
			     m->e[b][i].slot, m->e[b][i].gen, (unsigned long long)m->e[b][i].seen);
	}
	if (used != m->n[b])
		FAIL("bucket %u: %u entries, model %u\n", b, used, m->n[b]);
}

static void compare_all(struct sn_mac *t, const struct model *m)
{
	struct sn_mac_stats st;
	uint64_t n = 0;

	for (unsigned b = 0; b < t->nb; b++) {
		compare_bucket(t, m, b);
		n += m->n[b];
	}
	sn_mac_stats(t, &st);
	if (st.entries != n || st.entries > (uint64_t)t->nb * SN_MAC_WAYS)
		FAIL("stats.entries %llu, table holds %llu (capacity %u)\n",
		     (unsigned long long)st.entries, (unsigned long long)n, t->nb * SN_MAC_WAYS);
	if (st.learned != m->learned || st.aged != m->aged || st.moves != m->moves ||
	    st.full != m->full || st.entries != st.learned - st.aged)
		FAIL("stats learned %llu aged %llu moves %llu full %llu, model %llu %llu %llu %llu\n",
		     (unsigned long long)st.learned, (unsigned long long)st.aged,
		     (unsigned long long)st.moves, (unsigned long long)st.full,
		     (unsigned long long)m->learned, (unsigned long long)m->aged,
		     (unsigned long long)m->moves, (unsigned long long)m->full);
}

static void do_learn(struct sn_mac *t, struct model *m, uint64_t key, uint16_t slot,
		     uint32_t gen, uint64_t now)
{
	unsigned b = bucket_of(t, key);
	int i = mfind(m, b, key);
	enum sn_mac_learn_res r = sn_mac_learn(t, key, slot, gen, now);

	if (i >= 0 && m->e[b][i].slot == slot && m->e[b][i].gen == gen) {
		if (r != SN_MAC_KNOWN)
			FAIL("learn of a known MAC on its port returned %d\n", r);
		if (now - m->e[b][i].seen > t->aging_tsc / SN_MAC_SEEN_REFRESH)
			m->e[b][i].seen = now;
	} else if (i >= 0) {
		if (r != SN_MAC_WROTE)
			FAIL("move of a MAC returned %d\n", r);
		m->e[b][i].slot = slot;
		m->e[b][i].gen = gen;
		m->e[b][i].seen = now;
		m->moves++;
	} else {
		unsigned live = 0;

		for (unsigned k = 0; k < m->n[b]; k++)
			live += !sn_mac_expired(t, m->e[b][k].seen, now);
		if (live == SN_MAC_WAYS) {
			if (r != SN_MAC_FULL)
				FAIL("learn into a bucket of 4 live MACs returned %d\n", r);
			m->full++;
		} else {
			if (r != SN_MAC_WROTE)
				FAIL("learn of a new MAC with room returned %d (live %u)\n", r, live);
			/* The table chose which free or expired way to take: find
			 * the entry it evicted, if any; it must have been expired. */
			for (unsigned k = 0; k < m->n[b]; k++) {
				bool present = false;

				for (unsigned w = 0; w < SN_MAC_WAYS; w++)
					present |= t->b[b].e[w].key == m->e[b][k].key;
				if (!present) {
					if (!sn_mac_expired(t, m->e[b][k].seen, now))
						FAIL("learn evicted a live MAC %#llx\n",
						     (unsigned long long)m->e[b][k].key);
					mdel(m, b, k);
					m->aged++;
					break;
				}
			}
			if (m->n[b] == SN_MAC_WAYS)
				FAIL("learn wrote a new MAC into a full bucket without evicting\n");
			m->e[b][m->n[b]++] = (struct ment){ key, now, gen, slot };
			m->learned++;
		}
	}
	if (r != SN_MAC_FULL) {
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
	bool want = i >= 0 && !sn_mac_expired(t, m->e[b][i].seen, now);
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
			if (sn_mac_expired(t, m->e[b][k].seen, now)) {
				mdel(m, b, k);
				m->aged++;
			} else {
				k++;
			}
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned sizes[] = { 16, 32, 64 };
	static struct model m;
	uint64_t macs[NMAC], now = 1000, aging;
	unsigned entries;
	struct sn_mac *t;
	void *mem;

	if (size < 2)
		return 0;
	entries = sizes[data[0] % 3];
	aging = (uint64_t)data[1] + 1;
	data += 2;
	size -= 2;
	if (posix_memalign(&mem, 64, sn_mac_mem_size(entries)))
		abort();
	memset(mem, 0, sn_mac_mem_size(entries));
	t = sn_mac_init(mem, entries, aging);
	if (!t || sn_mac_buckets(t) != entries / SN_MAC_WAYS)
		FAIL("init of %u entries failed\n", entries);
	memset(&m, 0, sizeof(m));
	for (unsigned i = 0; i < NMAC; i++)   /* locally administered 52:54:00:00:00:i */
		macs[i] = (0x52ULL | 0x54ULL << 8 | (uint64_t)i << 40) | SN_MAC_VALID;

	for (; size >= 3; data += 3, size -= 3) {
		uint8_t op = data[0] & 3, a = data[1], c = data[2];
		uint64_t key = a < 4 * NMAC ? macs[a % NMAC]
			     : ((uint64_t)a * 0x0101010101ULL ^ (uint64_t)c << 17) & 0xffffffffffffULL;

		key |= SN_MAC_VALID;
		switch (op) {
		case 0:
			do_learn(t, &m, key, (uint16_t)(c & 3), (uint32_t)(c >> 2 & 1), now);
			break;
		case 1:
			do_lookup(t, &m, key, now);
			break;
		case 2:
			now += data[0] & 4 ? aging + 1 + c : c;
			break;
		default:
			do_age(t, &m, (unsigned)c % t->nb, now);
			break;
		}
		compare_all(t, &m);
	}
	free(mem);
	return 0;
}
