/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mac.c — the switch's MAC learning table (sn_mac.h) without EAL: a
 * table in heap memory (sn_mac_init), driven by scripted steps (learn,
 * lookup, aging scan, counters) against the expected results: learning and
 * refresh, moves to another port or port generation, expiry at the exact
 * aging boundary, a full bucket and the reuse of an expired way, the
 * sliced aging scan; the keys of a frame's header; a reader racing a
 * writer never sees a torn entry; static (allowed_macs) entries, the move
 * policy, per-port entry quotas and the per-bucket share of a VM port.
 * Exit status 1 if any check failed.
 */
#define ALLOW_EXPERIMENTAL_API
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_mac_impl.h"
#include "sn_quota.h"

#include "sn_check.h"

#define AGING 1000u   /* aging time, in the TSC ticks of every `now` */

static struct sn_mac *table(unsigned entries, uint64_t aging)
{
	size_t size = sn_mac_mem_size(entries);
	void *mem = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL(size, RTE_CACHE_LINE_SIZE));

	if (!size || !mem) {
		fprintf(stderr, "no table of %u entries\n", entries);
		exit(1);
	}
	memset(mem, 0, size);
	return sn_mac_init(mem, entries, aging);
}

/* The source key of a frame from mac, as the switch computes it. */
static uint64_t key_of(const uint8_t mac[6])
{
	uint8_t hdr[RTE_ETHER_HDR_LEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint64_t d, s;

	memcpy(hdr + 6, mac, 6);
	hdr[12] = 0x08;   /* ethertype bytes must not leak into the key */
	hdr[13] = 0x00;
	sn_mac_keys((const struct rte_ether_hdr *)hdr, &d, &s);
	return s;
}

static uint64_t key_n(unsigned n)
{
	const uint8_t mac[6] = { 0x52, 0x54, 0x00, (uint8_t)(n >> 16), (uint8_t)(n >> 8),
				 (uint8_t)n };

	return key_of(mac);
}

static void test_keys(void)
{
	const uint8_t hdr[RTE_ETHER_HDR_LEN] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
						 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0x86, 0xdd };
	uint64_t d, s;

	sn_mac_keys((const struct rte_ether_hdr *)hdr, &d, &s);
	CHECK(d == (0x060504030201ULL | SN_MAC_VALID));
	CHECK(s == (0xefcdab005452ULL | SN_MAC_VALID));
	CHECK(key_n(1) != key_n(2) && key_n(1) == key_n(1));
	CHECK(key_n(0) != 0);   /* every key carries SN_MAC_VALID: 0 is none */
}

static void test_init(void)
{
	CHECK(sn_mac_mem_size(0) == 0);
	CHECK(sn_mac_mem_size(8) == 0);
	CHECK(sn_mac_mem_size(24) == 0);
	CHECK(sn_mac_mem_size(16) >= sizeof(struct sn_mac) + 4 * sizeof(struct sn_mac_bucket));
	errno = 0;
	CHECK(sn_mac_init(NULL, 16, AGING) == NULL && errno == EINVAL);
	{
		struct sn_mac *t = table(64, AGING);

		CHECK(sn_mac_buckets(t) == 16);
		free(t);
	}
}

enum op { LEARN, LOOKUP, AGE, STATS };

/* One scripted step. LEARN: key -> (slot, gen) at now, expect res.
 * LOOKUP: expect hit (and slot, gen). AGE: a whole scan at now. STATS:
 * expect the counters st. */
struct step {
	enum op op;
	unsigned mac;        /* key_n(mac) */
	uint16_t slot;
	uint32_t gen;
	uint64_t now;
	int res;             /* LEARN: enum sn_mac_learn_res; LOOKUP: 1 hit, 0 miss */
	struct sn_mac_stats st;
};

#define L(m, s, g, t, r) { LEARN, m, s, g, t, r, { 0 } }
#define HIT(m, s, g, t)  { LOOKUP, m, s, g, t, 1, { 0 } }
#define MISS(m, t)       { LOOKUP, m, 0, 0, t, 0, { 0 } }
#define AGE_AT(t)        { AGE, 0, 0, 0, t, 0, { 0 } }
#define ST(e, l, a, mv, f) { STATS, 0, 0, 0, 0, 0, { e, l, a, mv, f } }

static const struct step learn_script[] = {
	L(1, 3, 7, 0, SN_MAC_WROTE),             /* new */
	ST(1, 1, 0, 0, 0),
	HIT(1, 3, 7, 0),
	MISS(2, 0),                              /* never seen */
	L(1, 3, 7, 5, SN_MAC_KNOWN),             /* same port: nothing written */
	ST(1, 1, 0, 0, 0),
	L(1, 4, 7, 10, SN_MAC_WROTE),            /* moved to slot 4 */
	HIT(1, 4, 7, 10),
	ST(1, 1, 0, 1, 0),
	L(1, 4, 8, 10, SN_MAC_WROTE),            /* same slot, a new port there */
	HIT(1, 4, 8, 10),
	ST(1, 1, 0, 2, 0),
	/* seen = 10. Refreshed by a known frame only past AGING / 64 = 15. */
	L(1, 4, 8, 20, SN_MAC_KNOWN),            /* 10 later: seen stays 10 */
	HIT(1, 4, 8, 10 + AGING),                /* now - seen == aging: alive */
	MISS(1, 11 + AGING),                     /* one tick later: expired */
	L(1, 4, 8, 30, SN_MAC_KNOWN),            /* 20 later: seen = 30 */
	HIT(1, 4, 8, 30 + AGING),
	MISS(1, 31 + AGING),
	/* Expired but not aged out yet: a frame from the same port revives
	 * it (known, `seen` refreshed); from another port it moves. */
	L(1, 4, 8, 32 + AGING, SN_MAC_KNOWN),
	HIT(1, 4, 8, 32 + AGING),
	L(1, 5, 9, 40 + AGING, SN_MAC_WROTE),
	HIT(1, 5, 9, 40 + AGING),
	ST(1, 1, 0, 3, 0),
	L(2, 6, 1, 100 + AGING, SN_MAC_WROTE),
	ST(2, 2, 0, 3, 0),
	/* The scan removes what expired (mac 1, seen 40 + AGING) and keeps
	 * what did not (mac 2). */
	AGE_AT(41 + 2 * AGING),
	MISS(1, 41 + 2 * AGING),
	HIT(2, 6, 1, 41 + 2 * AGING),
	ST(1, 2, 1, 3, 0),
	AGE_AT(101 + 2 * AGING),
	MISS(2, 101 + 2 * AGING),
	ST(0, 2, 2, 3, 0),
	L(1, 3, 7, 200 + 2 * AGING, SN_MAC_WROTE),  /* learned anew */
	ST(1, 3, 2, 3, 0),
};

static void check_stats(const struct sn_mac *t, const struct sn_mac_stats *want, unsigned i)
{
	struct sn_mac_stats st;

	sn_mac_stats(t, &st);
	if (memcmp(&st, want, sizeof(st))) {
		fprintf(stderr, "step %u: entries %lu learned %lu aged %lu moves %lu full %lu\n", i,
			st.entries, st.learned, st.aged, st.moves, st.full);
		CHECK(!"counters as expected");
	}
}

/* Run script against t; keys[] maps a step's mac to its key. */
static void run(struct sn_mac *t, const struct step *script, unsigned n, const uint64_t *keys)
{
	for (unsigned i = 0; i < n; i++) {
		const struct step *s = &script[i];
		uint64_t key = keys ? keys[s->mac] : key_n(s->mac);
		uint16_t slot = 0xffff;
		uint32_t gen = 0;
		bool hit;

		switch (s->op) {
		case LEARN:
			if ((int)sn_mac_learn(t, key, s->slot, s->gen, 0, s->now) != s->res) {
				fprintf(stderr, "step %u: learn mac %u\n", i, s->mac);
				CHECK(!"learn result as expected");
			}
			break;
		case LOOKUP:
			hit = sn_mac_lookup(t, key, s->now, &slot, &gen);
			if (hit != (s->res == 1) || (hit && (slot != s->slot || gen != s->gen))) {
				fprintf(stderr, "step %u: lookup mac %u: hit %d slot %u gen %u\n", i,
					s->mac, hit, slot, gen);
				CHECK(!"lookup as expected");
			}
			break;
		case AGE:
			for (unsigned b = 0; b < sn_mac_buckets(t);)
				b = sn_mac_age(t, b, s->now);
			break;
		case STATS:
			check_stats(t, &s->st, i);
			break;
		}
	}
}

static void test_learn(void)
{
	struct sn_mac *t = table(1024, AGING);

	run(t, learn_script, RTE_DIM(learn_script), NULL);
	free(t);
}

/* Keys 1..5 share one bucket (found by search); key 6 is in another. */
static const struct step full_script[] = {
	L(1, 1, 1, 0, SN_MAC_WROTE),
	L(2, 2, 1, 0, SN_MAC_WROTE),
	L(3, 3, 1, 0, SN_MAC_WROTE),
	L(4, 4, 1, 500, SN_MAC_WROTE),
	L(5, 5, 1, 600, SN_MAC_FULL),            /* 4 ways taken */
	ST(4, 4, 0, 0, 1),
	MISS(5, 600),
	L(5, 5, 1, 600, SN_MAC_FULL),            /* counted every time */
	ST(4, 4, 0, 0, 2),
	L(6, 6, 1, 600, SN_MAC_WROTE),           /* other buckets unaffected */
	HIT(1, 1, 1, 600),
	HIT(4, 4, 1, 600),
	L(1, 1, 1, 600, SN_MAC_KNOWN),           /* a known MAC is no new entry */
	/* Keys 2 and 3 expire (seen 0) while 1 (refreshed at 600) and 4
	 * (500) do not: key 5 takes an expired way, counted as aged. */
	L(5, 5, 1, 1001, SN_MAC_WROTE),
	ST(5, 6, 1, 0, 2),
	HIT(5, 5, 1, 1001),
	HIT(1, 1, 1, 1001),
	HIT(4, 4, 1, 1001),
	/* Of 2 and 3 one way is left: a sixth key of the bucket fits, a
	 * seventh does not (1, 4 and 5 are alive). */
	L(7, 7, 1, 1002, SN_MAC_WROTE),
	L(8, 8, 1, 1002, SN_MAC_FULL),
	ST(5, 7, 2, 0, 3),
};

static void test_bucket_full(void)
{
	struct sn_mac *t = table(16, AGING);   /* 4 buckets */
	uint64_t keys[9];
	unsigned n = 1;
	struct sn_mac_bucket *b = sn_mac_bucket(t, key_n(1000));

	/* Keys 1-5, 7, 8 in b, key 6 elsewhere. */
	for (unsigned m = 1000; n < RTE_DIM(keys) && m < 100000; m++) {
		bool in_b = sn_mac_bucket(t, key_n(m)) == b;

		if (in_b != (n != 6))
			continue;
		keys[n++] = key_n(m);
	}
	CHECK(n == RTE_DIM(keys));
	if (n != RTE_DIM(keys))
		return;
	keys[0] = 0;
	run(t, full_script, RTE_DIM(full_script), keys);
	free(t);
}

/* The scan advances SN_MAC_AGE_SLICE entries' worth of buckets per call
 * and removes exactly the expired entries of each slice. */
static void test_age_slices(void)
{
	const unsigned entries = 1024, per = SN_MAC_AGE_SLICE / SN_MAC_WAYS;
	struct sn_mac *t = table(entries, AGING);
	struct sn_mac_stats st;
	unsigned learned = 0, old = 0, b, calls = 0;

	/* 600 MACs: the even ones seen at 0, then the odd ones at 500 (the
	 * clock never goes back). */
	for (unsigned i = 0; i < 600; i++) {
		unsigned m = i < 300 ? 2 * i : 2 * (i - 300) + 1;
		enum sn_mac_learn_res r = sn_mac_learn(t, key_n(m), 1, 1, 0, m % 2 ? 500 : 0);

		learned += r == SN_MAC_WROTE;
		old += r == SN_MAC_WROTE && m % 2 == 0;
	}
	CHECK(learned > 500);    /* some buckets may overflow, most do not */
	b = sn_mac_age(t, 0, 1001);
	CHECK(b == per);
	sn_mac_stats(t, &st);
	CHECK(st.aged > 0 && st.aged < old);   /* one slice only */
	for (calls = 1; b < sn_mac_buckets(t); calls++) {
		unsigned next = sn_mac_age(t, b, 1001);

		CHECK(next == RTE_MIN(b + per, sn_mac_buckets(t)));
		b = next;
	}
	CHECK(calls == entries / SN_MAC_WAYS / per);
	sn_mac_stats(t, &st);
	CHECK(st.aged == old);
	CHECK(st.entries == learned - old);
	for (unsigned m = 0; m < 600; m++) {
		uint16_t slot;
		uint32_t gen;

		if (m % 2 == 0)
			CHECK(!sn_mac_lookup(t, key_n(m), 1001, &slot, &gen));
	}
	/* A scan at the same time again finds nothing more. */
	for (b = 0; b < sn_mac_buckets(t);)
		b = sn_mac_age(t, b, 1001);
	sn_mac_stats(t, &st);
	CHECK(st.aged == old);
	free(t);
}

/* A writer moves one MAC between ports (slot i, generation 7 i) while a
 * reader looks it up: every hit must be a pair the writer wrote. */
struct race {
	struct sn_mac *t;
	uint64_t key;
	int stop;
	unsigned bad, hits;
};

static void *race_reader(void *arg)
{
	struct race *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint16_t slot;
		uint32_t gen;

		if (sn_mac_lookup(r->t, r->key, 1, &slot, &gen)) {
			__atomic_store_n(&r->hits, r->hits + 1, __ATOMIC_RELAXED);
			r->bad += gen != 7u * slot;
		}
	}
	return NULL;
}

static void test_race(void)
{
	struct race r = { .t = table(16, AGING), .key = key_n(42) };
	pthread_t th;

	CHECK(sn_mac_learn(r.t, r.key, 1, 7, 0, 1) == SN_MAC_WROTE);
	CHECK(pthread_create(&th, NULL, race_reader, &r) == 0);
	/* Until the reader had its share of the race (it may start late). */
	for (uint32_t i = 0; i < 200000 || (__atomic_load_n(&r.hits, __ATOMIC_RELAXED) < 100000 &&
					    i < 100000000); i++) {
		uint16_t slot = (uint16_t)(1 + i % 60);

		sn_mac_learn(r.t, r.key, slot, 7u * slot, 0, 1);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	CHECK(r.bad == 0);
	CHECK(r.hits >= 100000);
	free(r.t);
}

/* n keys of one bucket of t (the bucket of key_n(from)), searched. */
static unsigned same_bucket(struct sn_mac *t, unsigned from, uint64_t *keys, unsigned n)
{
	struct sn_mac_bucket *b = sn_mac_bucket(t, key_n(from));
	unsigned got = 0;

	for (unsigned m = from; got < n && m < from + 100000; m++)
		if (sn_mac_bucket(t, key_n(m)) == b)
			keys[got++] = key_n(m);
	return got;
}

static bool on(struct sn_mac *t, uint64_t key, uint64_t now, uint16_t want_slot)
{
	uint16_t slot;
	uint32_t gen;

	return sn_mac_lookup(t, key, now, &slot, &gen) && slot == want_slot;
}

#define VM SN_MAC_IN_VM
#define ALLOWED (SN_MAC_IN_VM | SN_MAC_IN_ALLOWED)
#define INSTALL (SN_MAC_IN_VM | SN_MAC_IN_ALLOWED | SN_MAC_IN_STATIC)

/* Slot 1, 2: VM ports; slot 9: the uplink (no SN_MAC_IN_VM). */
static void test_move_policy(void)
{
	struct sn_mac *t = table(1024, AGING);
	struct sn_mac_stats st;
	const uint64_t a = key_n(1), v = key_n(2), s = key_n(3);

	/* vm_sticky: the uplink does not take a VM's entry ... */
	CHECK(sn_mac_learn(t, v, 1, 1, VM, 0) == SN_MAC_WROTE);
	CHECK(sn_mac_learn(t, v, 9, 9, 0, 10) == SN_MAC_REFUSED);
	CHECK(sn_mac_learn(t, v, 9, 9, 0, 11) == SN_MAC_REFUSED);
	CHECK(on(t, v, 11, 1));
	sn_mac_stats(t, &st);
	CHECK(st.move_refused == 2 && st.moves == 0);
	/* ... but another VM port may (a guest moved without allowed_macs). */
	CHECK(sn_mac_learn(t, v, 2, 2, VM, 12) == SN_MAC_WROTE);
	CHECK(on(t, v, 12, 2));
	/* Nor does a VM port without allowed_macs take a live entry of the
	 * uplink; the uplink's own frames refresh it. */
	CHECK(sn_mac_learn(t, a, 9, 9, 0, 0) == SN_MAC_WROTE);
	CHECK(sn_mac_learn(t, a, 2, 2, VM, 1) == SN_MAC_REFUSED);
	CHECK(on(t, a, 1, 9));
	CHECK(sn_mac_learn(t, a, 9, 9, 0, 2) == SN_MAC_KNOWN);
	/* Expired, it is free for the VM port, and a VM entry then is not
	 * the uplink's to take back until it expires in turn. */
	CHECK(sn_mac_learn(t, a, 2, 2, VM, 2 + AGING + 1) == SN_MAC_WROTE);
	CHECK(on(t, a, 3 + AGING, 2));
	CHECK(sn_mac_learn(t, a, 9, 9, 0, 3 + AGING) == SN_MAC_REFUSED);
	CHECK(sn_mac_learn(t, a, 9, 9, 0, 4 + 2 * AGING) == SN_MAC_WROTE);
	CHECK(on(t, a, 4 + 2 * AGING, 9));
	/* A port whose allowed_macs hold the MAC takes the uplink's entry. */
	CHECK(sn_mac_learn(t, a, 1, 1, ALLOWED, 5 + 2 * AGING) == SN_MAC_WROTE);
	CHECK(on(t, a, 5 + 2 * AGING, 1));
	CHECK(sn_mac_forget(t, 1) == 1);
	/* "any": a VM port moves the uplink's entry ... */
	sn_mac_set_move(t, SN_MAC_MOVE_ANY);
	CHECK(sn_mac_learn(t, a, 9, 9, 0, 6 + 2 * AGING) == SN_MAC_WROTE);
	CHECK(sn_mac_learn(t, a, 2, 2, VM, 7 + 2 * AGING) == SN_MAC_WROTE);
	CHECK(on(t, a, 7 + 2 * AGING, 2));
	sn_mac_set_move(t, SN_MAC_MOVE_VM_STICKY);
	/* ... and the uplink a VM entry. */
	sn_mac_set_move(t, SN_MAC_MOVE_ANY);
	CHECK(sn_mac_learn(t, v, 9, 9, 0, 20) == SN_MAC_WROTE);
	CHECK(on(t, v, 20, 9));
	sn_mac_set_move(t, SN_MAC_MOVE_VM_STICKY);

	/* A static entry: never expires, never aged, moved by no one but a
	 * port that lists it, whatever the policy. */
	CHECK(sn_mac_learn(t, s, 1, 1, INSTALL, 0) == SN_MAC_WROTE);
	CHECK(on(t, s, 10 * AGING, 1));
	for (unsigned b = 0; b < sn_mac_buckets(t);)
		b = sn_mac_age(t, b, 10 * AGING);
	CHECK(on(t, s, 10 * AGING, 1));
	sn_mac_set_move(t, SN_MAC_MOVE_ANY);
	CHECK(sn_mac_learn(t, s, 2, 2, VM, 10 * AGING) == SN_MAC_REFUSED);
	CHECK(sn_mac_learn(t, s, 9, 9, 0, 10 * AGING) == SN_MAC_REFUSED);
	CHECK(on(t, s, 10 * AGING, 1));
	/* A frame from its own port is known (no write). */
	CHECK(sn_mac_learn(t, s, 1, 1, ALLOWED, 10 * AGING) == SN_MAC_KNOWN);
	/* Live migration: the new port lists the MAC. */
	CHECK(sn_mac_learn(t, s, 2, 2, ALLOWED, 10 * AGING + 1) == SN_MAC_WROTE);
	CHECK(on(t, s, 20 * AGING, 2));
	CHECK(sn_mac_learn(t, s, 1, 1, VM, 20 * AGING) == SN_MAC_REFUSED);
	/* The old port's install (re-run at each policy publication) does
	 * not take it back. */
	CHECK(sn_mac_learn(t, s, 1, 1, INSTALL, 20 * AGING) == SN_MAC_REFUSED);
	CHECK(on(t, s, 20 * AGING, 2));
	/* Forgetting a port removes its entries, static ones too. */
	CHECK(sn_mac_forget(t, 2) == 1);
	CHECK(!on(t, s, 20 * AGING, 2));

	/* A writer's clock ahead of another's: an entry refreshed at a later
	 * `now` than the one the uplink's worker read is live for it, so
	 * neither a move nor the aging scan treats it as expired. */
	const uint64_t f = key_n(4), t0 = 100 * AGING;
	CHECK(sn_mac_learn(t, f, 1, 1, VM, t0) == SN_MAC_WROTE);
	sn_mac_set_move(t, SN_MAC_MOVE_VM_STICKY);
	CHECK(sn_mac_learn(t, f, 9, 9, 0, t0 - 1) == SN_MAC_REFUSED);
	CHECK(on(t, f, t0 - 1, 1));
	for (unsigned b = 0; b < sn_mac_buckets(t);)
		b = sn_mac_age(t, b, t0 - 1);
	CHECK(on(t, f, t0, 1));
	free(t);
}

/* A static install takes the oldest learned way of a full bucket; four
 * static entries keep the bucket. */
static void test_static_install(void)
{
	struct sn_mac *t = table(64, AGING);
	uint64_t k[6];

	CHECK(same_bucket(t, 100, k, 6) == 6);
	for (unsigned i = 0; i < 4; i++)
		CHECK(sn_mac_learn(t, k[i], (uint16_t)(10 + i), 1, 0, i) == SN_MAC_WROTE);
	CHECK(sn_mac_learn(t, k[4], 1, 1, VM, 5) == SN_MAC_FULL);
	CHECK(sn_mac_learn(t, k[4], 1, 1, INSTALL, 5) == SN_MAC_WROTE);
	CHECK(on(t, k[4], 5, 1));
	CHECK(!on(t, k[0], 5, 10));          /* the oldest went */
	CHECK(on(t, k[1], 5, 11));
	/* A second port installing the same MAC leaves the first one's
	 * static entry where it is. */
	CHECK(sn_mac_learn(t, k[4], 2, 2, INSTALL, 6) == SN_MAC_REFUSED);
	CHECK(on(t, k[4], 6, 1));
	/* An install takes a live learned entry of the uplink or of another
	 * VM port (the MAC is the installing port's by its binding). */
	CHECK(sn_mac_learn(t, k[1], 3, 3, INSTALL, 7) == SN_MAC_WROTE);
	CHECK(on(t, k[1], 7, 3));
	CHECK(sn_mac_learn(t, key_n(7), 5, 5, VM, 7) == SN_MAC_WROTE);
	CHECK(sn_mac_learn(t, key_n(7), 4, 4, INSTALL, 8) == SN_MAC_WROTE);
	CHECK(on(t, key_n(7), 8, 4));
	free(t);
}

/* Entries per slot: the cap, the reserve, units given back. */
static void test_quota(void)
{
	struct sn_mac *t = table(1024, AGING);
	struct sn_quota *q = sn_quota_create(16, 1024);
	struct sn_quota_owner_stats os;
	struct sn_mac_stats st;
	unsigned learned = 0, refused = 0;

	CHECK(q != NULL);
	if (!q)
		return;
	sn_mac_set_quota(t, q);
	CHECK(sn_quota_set(q, 1, 2, 8) == 0);       /* attacker: 8, 2 reserved */
	CHECK(sn_quota_set(q, 2, 1, 8) == 0);       /* victim */
	CHECK(sn_mac_learn(t, key_n(5000), 1, 1, INSTALL, 0) == SN_MAC_WROTE);
	for (unsigned m = 0; m < 200; m++) {
		enum sn_mac_learn_res r = sn_mac_learn(t, key_n(10000 + m), 1, 1, VM, 1);

		learned += r == SN_MAC_WROTE;
		refused += r == SN_MAC_QUOTA;
	}
	printf("quota: learned %u refused %u\n", learned, refused);
	CHECK(learned == 7 && refused == 193);      /* 8 with the static one */
	CHECK(sn_quota_used(q, 1) == 8);
	sn_quota_owner_stats(q, 1, &os);
	CHECK(os.hits == 193);
	sn_mac_stats(t, &st);
	CHECK(st.quota == 193 && st.entries == 8);
	/* The victim still learns. */
	CHECK(sn_mac_learn(t, key_n(1), 2, 2, VM, 1) == SN_MAC_WROTE);
	CHECK(on(t, key_n(1), 1, 2));
	/* A move charges the new slot and refunds the old one. */
	CHECK(sn_mac_learn(t, key_n(10000), 2, 2, VM, 2) == SN_MAC_WROTE);
	CHECK(sn_quota_used(q, 1) == 7 && sn_quota_used(q, 2) == 2);
	/* Aging gives learned units back, the static entry keeps its own. */
	for (unsigned b = 0; b < sn_mac_buckets(t);)
		b = sn_mac_age(t, b, 3 + AGING);
	CHECK(sn_quota_used(q, 1) == 1 && sn_quota_used(q, 2) == 0);
	/* Forget gives the rest back. */
	CHECK(sn_mac_forget(t, 1) == 1);
	CHECK(sn_quota_used(q, 1) == 0);
	sn_quota_free(q);
	free(t);
}

/* In a table whose every way is taken, a move still gets its unit: the
 * pool counts the moved entry twice for a moment. */
static void test_quota_full_table(void)
{
	struct sn_mac *t = table(16, AGING);   /* 4 buckets */
	struct sn_quota *q = sn_quota_create(16, sn_mac_quota_units(16));
	unsigned n = 0;

	CHECK(q != NULL);
	if (!q)
		return;
	sn_mac_set_quota(t, q);
	/* Fill every way from the uplink (slot 9: no share limit). */
	for (unsigned m = 0; n < 16 && m < 100000; m++)
		n += sn_mac_learn(t, key_n(20000 + m), 9, 9, 0, 1) == SN_MAC_WROTE;
	CHECK(n == 16);
	CHECK(sn_quota_used(q, 9) == 16);
	/* Every entry moves to VM port 1, one after another. */
	unsigned moved = 0;
	for (unsigned m = 0; m < 100000 && moved < 16; m++) {
		uint64_t k = key_n(20000 + m);

		if (!on(t, k, 2, 9))
			continue;
		moved += sn_mac_learn(t, k, 1, 1, ALLOWED, 2) == SN_MAC_WROTE;
	}
	CHECK(moved == 16);
	CHECK(sn_quota_used(q, 9) == 0 && sn_quota_used(q, 1) == 16);
	sn_quota_free(q);
	free(t);
}

/* One VM port never holds more than SN_MAC_BUCKET_PORT_MAX learned ways of
 * a bucket: an attacker choosing MACs of a victim's bucket leaves it room. */
static void test_bucket_share(void)
{
	struct sn_mac *t = table(64, AGING);
	uint64_t k[8];
	unsigned won = 0;

	CHECK(same_bucket(t, 300, k, 8) == 8);
	for (unsigned i = 0; i < 7; i++)
		won += sn_mac_learn(t, k[i], 1, 1, VM, 0) == SN_MAC_WROTE;
	CHECK(won == SN_MAC_BUCKET_PORT_MAX);
	CHECK(sn_mac_learn(t, k[7], 2, 2, VM, 0) == SN_MAC_WROTE);   /* the victim */
	CHECK(on(t, k[7], 0, 2));
	/* The uplink is not limited per bucket. */
	CHECK(sn_mac_learn(t, k[5], 9, 9, 0, 0) == SN_MAC_WROTE);
	CHECK(sn_mac_quota_auto(16384, 64) == 128);
	CHECK(sn_mac_quota_auto(16384, 4096) == 2 * SN_MAC_WAYS);
	CHECK(sn_mac_quota_auto(64, 1) == 16);
	free(t);
}

int main(void)
{
	test_keys();
	test_init();
	test_learn();
	test_bucket_full();
	test_age_slices();
	test_race();
	test_move_policy();
	test_static_install();
	test_quota();
	test_quota_full_table();
	test_bucket_share();
	return sn_check_exit("test_mac");
}
