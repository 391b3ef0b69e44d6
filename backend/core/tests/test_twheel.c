/* SPDX-License-Identifier: BSD-3-Clause */
/* test_twheel.c — sn_twheel unit tests and an exact model check.
 *
 * Directed cases: FIFO within a slot, never-early (ceil) slotting, past ->
 * front slot, clamp vs reject at the horizon, pool exhaustion and reuse,
 * next_due. Then a randomized run over many revolutions (small wheels,
 * odd granularities, time jumps beyond the horizon, limited extract
 * bursts) compared output-for-output with a direct model of the release
 * rule documented in sn_twheel.h. TAP-style; exit 1 on first failure.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_twheel.h"

#include "sn_tap.h"

#define ID(i) ((void *)(uintptr_t)(i))
#define UN(p) ((uint64_t)(uintptr_t)(p))

static uint64_t rng_state = 12345;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t mk_node_items;   /* 0 = the default node size */

static struct sn_twheel *mk(uint64_t g, uint32_t slots, uint32_t nodes, uint64_t start)
{
	struct sn_twheel_params p = { .granularity_ns = g, .slots = slots,
				      .pool_nodes = nodes, .start_ns = start,
				      .node_items = mk_node_items };
	struct sn_twheel *w = sn_twheel_create(&p);

	CHECK(w, "create g=%lu slots=%u", (unsigned long)g, slots);
	return w;
}

static void test_params(void)
{
	struct sn_twheel_params p = { .granularity_ns = 1000, .slots = 1024, .pool_nodes = 16 };
	struct sn_twheel *w;

	p.slots = 1000;
	errno = 0;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "non-pow2 slots");
	p.slots = 1024;
	p.granularity_ns = 0;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "zero granularity");
	p.granularity_ns = 1000;
	p.pool_nodes = 0;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "empty pool");
	p.pool_nodes = 16;
	p.node_items = 8;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "node_items not 2^k-1");
	p.node_items = 3;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "node_items below a line");
	p.node_items = 2047;
	CHECK(!sn_twheel_create(&p) && errno == EINVAL, "node_items above 8 KiB");
	p.node_items = 0;
	w = sn_twheel_create(&p);
	CHECK(w && sn_twheel_horizon_ns(w) == 1024000, "horizon");
	CHECK(sn_twheel_next_due(w) == UINT64_MAX, "empty next_due");
	sn_twheel_free(w);
	printf("ok %d - params\n", ++n_test);
}

static void test_fifo_and_ceil(void)
{
	struct sn_twheel *w = mk(1000, 64, 64, 0);
	void *out[64];
	unsigned n;

	/* Timestamps in (4000, 5000] all round up to slot 5 -> FIFO by insert. */
	CHECK(sn_twheel_insert(w, ID(1), 4999, 0) == 0, "ins");
	CHECK(sn_twheel_insert(w, ID(2), 4001, 0) == 0, "ins");
	CHECK(sn_twheel_insert(w, ID(3), 5000, 0) == 0, "ins");
	for (int i = 0; i < 20; i++)
		CHECK(sn_twheel_insert(w, ID(10 + i), 4500 - (uint64_t)i, 0) == 0, "ins");
	/* 4000 exactly is slot 4. */
	CHECK(sn_twheel_insert(w, ID(99), 4000, 0) == 0, "ins");
	CHECK(sn_twheel_count(w) == 24, "count");
	CHECK(sn_twheel_next_due(w) == 4000, "next_due %lu", (unsigned long)sn_twheel_next_due(w));
	CHECK(sn_twheel_extract(w, 3999, out, 64) == 0, "nothing before 4000");
	n = sn_twheel_extract(w, 4999, out, 64);
	CHECK(n == 1 && UN(out[0]) == 99, "slot 4 only (never early): n=%u", n);
	CHECK(sn_twheel_next_due(w) == 5000, "next_due 5000");
	n = sn_twheel_extract(w, 5000, out, 5);
	CHECK(n == 5 && UN(out[0]) == 1 && UN(out[1]) == 2 && UN(out[2]) == 3 &&
	      UN(out[3]) == 10 && UN(out[4]) == 11, "fifo head, burst limit");
	n = sn_twheel_extract(w, 5000, out, 64);
	CHECK(n == 18, "rest of slot: %u", n);
	for (unsigned i = 0; i < n; i++)
		CHECK(UN(out[i]) == 12 + i, "fifo across nodes at %u", i);
	CHECK(sn_twheel_count(w) == 0 && sn_twheel_pool_free(w) == 64, "all nodes back");
	sn_twheel_free(w);
	printf("ok %d - fifo within slot, ceil slotting, burst limit\n", ++n_test);
}

static void test_past_and_horizon(void)
{
	struct sn_twheel *w = mk(100, 16, 64, 10000);   /* front slot 100, horizon 1600 ns */
	struct sn_twheel_stats st;
	void *out[64];
	unsigned n;

	CHECK(sn_twheel_insert(w, ID(1), 10000, 0) == 0, "at now");
	CHECK(sn_twheel_insert(w, ID(2), 5, 0) == 0, "far past");
	CHECK(sn_twheel_insert(w, ID(3), 10100, 0) == 0, "next slot");
	CHECK(sn_twheel_next_due(w) == 10000, "front due");
	n = sn_twheel_extract(w, 10000, out, 64);
	CHECK(n == 2 && UN(out[0]) == 1 && UN(out[1]) == 2, "past to front, FIFO");
	/* Last slot is front+15 -> ts up to 11500 fits; 11501 is beyond. */
	CHECK(sn_twheel_insert(w, ID(4), 11500, SN_TWHEEL_REJECT) == 0, "last slot fits");
	CHECK(sn_twheel_insert(w, ID(5), 11501, SN_TWHEEL_REJECT) == -ERANGE, "reject");
	CHECK(sn_twheel_insert(w, ID(6), 99999999, SN_TWHEEL_CLAMP) == 0, "clamp");
	CHECK(sn_twheel_count(w) == 3, "count %lu", (unsigned long)sn_twheel_count(w));
	sn_twheel_stats_get(w, &st);
	CHECK(st.drop_range == 1 && st.clamped == 1 && st.past == 2 && st.inserted == 5,
	      "stats range %lu clamped %lu past %lu ins %lu", (unsigned long)st.drop_range,
	      (unsigned long)st.clamped, (unsigned long)st.past, (unsigned long)st.inserted);
	n = sn_twheel_extract(w, 11499, out, 64);
	CHECK(n == 1 && UN(out[0]) == 3, "slot 101 only");
	CHECK(sn_twheel_next_due(w) == 11500, "last slot due at 11500");
	n = sn_twheel_extract(w, 11500, out, 64);
	CHECK(n == 2 && UN(out[0]) == 4 && UN(out[1]) == 6, "clamped one with last slot");
	/* A past insert lands behind items already waiting in the front slot. */
	CHECK(sn_twheel_insert(w, ID(7), 11500, 0) == 0 && sn_twheel_insert(w, ID(8), 1, 0) == 0,
	      "ins");
	n = sn_twheel_extract(w, 11500, out, 1);
	CHECK(n == 1 && UN(out[0]) == 7, "front 1");
	CHECK(sn_twheel_insert(w, ID(9), 0, 0) == 0, "ins");
	n = sn_twheel_extract(w, 11500, out, 64);
	CHECK(n == 2 && UN(out[0]) == 8 && UN(out[1]) == 9, "front FIFO with past");
	sn_twheel_free(w);
	printf("ok %d - past -> front, clamp vs reject\n", ++n_test);
}

static void test_pool(void)
{
	struct sn_twheel_params p = { .granularity_ns = 10, .slots = 64, .pool_nodes = 3,
				      .node_items = 7 };
	struct sn_twheel *w = sn_twheel_create(&p);
	struct sn_twheel_stats st;
	void *out[64];
	int i;

	/* One slot: 3 nodes x 7 = 21 items. */
	for (i = 0; i < 21; i++)
		CHECK(sn_twheel_insert(w, ID(i), 50, 0) == 0, "fill %d", i);
	CHECK(sn_twheel_insert(w, ID(21), 50, 0) == -ENOBUFS, "full");
	CHECK(sn_twheel_pool_free(w) == 0, "pool empty");
	/* count() is derived from the pool and the cursors: tail node full
	 * (cursor on the next node's word 0), then a part-read head node. */
	CHECK(sn_twheel_count(w) == 21, "count, tail full: %lu", (unsigned long)sn_twheel_count(w));
	CHECK(sn_twheel_extract(w, 50, out, 3) == 3, "part of the head");
	CHECK(sn_twheel_count(w) == 18, "count, head part-read: %lu",
	      (unsigned long)sn_twheel_count(w));
	CHECK(sn_twheel_extract(w, 50, out, 4) == 4, "rest of the head node");
	CHECK(sn_twheel_pool_free(w) == 1, "one node back");
	CHECK(sn_twheel_count(w) == 14 && !sn_twheel_empty(w), "count 14");
	/* Other slots: one node each. */
	CHECK(sn_twheel_insert(w, ID(100), 60, 0) == 0, "reuse");
	CHECK(sn_twheel_insert(w, ID(101), 70, 0) == -ENOBUFS, "full again");
	CHECK(sn_twheel_insert(w, ID(102), 60, 0) == 0, "same node has room");
	CHECK(sn_twheel_count(w) == 16, "count, two slots");
	sn_twheel_stats_get(w, &st);
	CHECK(st.drop_nobufs == 2, "nobufs counted");
	CHECK(st.inserted == 23 && st.extracted == 7, "stats inserted %lu extracted %lu",
	      (unsigned long)st.inserted, (unsigned long)st.extracted);
	CHECK(sn_twheel_extract(w, 1000, out, 64) == 16, "drain");
	CHECK(UN(out[13]) == 20 && UN(out[14]) == 100 && UN(out[15]) == 102, "order");
	CHECK(sn_twheel_pool_free(w) == 3 && sn_twheel_count(w) == 0 && sn_twheel_empty(w),
	      "pool back");
	sn_twheel_free(w);
	printf("ok %d - pool exhaustion and reuse\n", ++n_test);
}

static void test_next_due_sparse(void)
{
	struct sn_twheel *w = mk(1000, 1u << 20, 1024, 7);
	void *out[4];

	CHECK(sn_twheel_insert(w, ID(1), 900000000ull, 0) == 0, "far");
	CHECK(sn_twheel_insert(w, ID(2), 3000, 0) == 0, "near");
	CHECK(sn_twheel_next_due(w) == 3000, "near first");
	CHECK(sn_twheel_extract(w, 3000, out, 4) == 1 && UN(out[0]) == 2, "near out");
	CHECK(sn_twheel_next_due(w) == 900000000ull, "far next");
	CHECK(sn_twheel_extract(w, 899999999ull, out, 4) == 0, "not early");
	/* Inserting behind the new front after a skip still orders correctly. */
	CHECK(sn_twheel_insert(w, ID(3), 899999000ull, 0) == 0, "just before");
	CHECK(sn_twheel_next_due(w) == 899999000ull, "front slot due %lu",
	      (unsigned long)sn_twheel_next_due(w));
	CHECK(sn_twheel_extract(w, 900000000ull, out, 4) == 2 && UN(out[0]) == 3 &&
	      UN(out[1]) == 1, "order after skip");
	CHECK(sn_twheel_next_due(w) == UINT64_MAX, "empty");
	sn_twheel_free(w);
	printf("ok %d - next_due on a sparse 1M-slot wheel\n", ++n_test);
}

/* ---- exact model of the documented release rule ---- */
struct mitem {
	uint64_t id, ts, slot, seq, ins_now;
	size_t idx;   /* position in pend[] when copied into due[] */
	int clamped;
};

static int cmp_mitem(const void *a, const void *b)
{
	const struct mitem *x = a, *y = b;

	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static void run_model(uint64_t g, uint32_t slots, uint32_t nodes, uint64_t steps, int on_time)
{
	uint64_t now = rnd() % (1ull << 40);
	struct sn_twheel *w = mk(g, slots, nodes, now);
	uint64_t front = now / g, seq = 0, next_id = 1, released = 0, revs;
	size_t cap = 1 << 16, np = 0;
	struct mitem *pend = malloc(cap * sizeof(*pend));
	struct mitem *due = malloc(cap * sizeof(*due));
	void *out[256];
	uint64_t start = now;

	CHECK(pend && due, "oom");
	for (uint64_t step = 0; step < steps; step++) {
		uint64_t r = rnd() % 100;

		if (r < 55) {   /* insert */
			uint64_t span = (uint64_t)slots * g;
			uint64_t ts;
			int mode = (int)(rnd() & 1), rc;
			uint64_t s;

			switch (rnd() % 8) {
			case 0: ts = now - SN_MIN(now, rnd() % (3 * span)); break;      /* past */
			case 1: ts = now + span + rnd() % span; break;                  /* beyond */
			case 2: ts = now + rnd() % (g * 4); break;                      /* near */
			default: ts = now + rnd() % span; break;
			}
			s = ts / g + (ts % g != 0);
			rc = sn_twheel_insert(w, ID(next_id), ts, mode);
			if (s <= front)
				s = front;
			if (s > front + slots - 1) {
				if (mode == SN_TWHEEL_REJECT) {
					CHECK(rc == -ERANGE, "reject rc %d", rc);
					continue;
				}
				s = front + slots - 1;
			}
			if (rc == -ENOBUFS) {
				/* Legal only if the slot's tail node is full or absent and
				 * the pool is empty. */
				CHECK(sn_twheel_pool_free(w) == 0, "nobufs with free nodes");
				continue;
			}
			CHECK(rc == 0, "insert rc %d", rc);
			CHECK(np < cap, "model cap");
			pend[np++] = (struct mitem){ .id = next_id++, .ts = ts, .slot = s, .seq = seq++,
						     .ins_now = now, .clamped = s * g < ts };
		} else if (r < 90) {   /* extract, maybe after advancing time */
			unsigned max = (unsigned)(on_time || rnd() % 4 ? SN_ARRAY_SIZE(out)
								 : 1 + rnd() % 5);
			uint64_t ns, nd = 0;
			size_t k;
			unsigned got, i;

			if (on_time) {
				uint64_t nxt = sn_twheel_next_due(w);

				now += rnd() % (g + 1);          /* at least once per slot */
				if (nxt != UINT64_MAX && nxt > now && rnd() % 2)
					now = nxt;                /* or jump to next_due */
			} else {
				r = rnd() % 10;
				now += r < 7 ? rnd() % (2 * g) : r < 9 ? rnd() % ((uint64_t)slots * g)
								       : rnd() % (5ull * slots * g);
			}
			ns = now / g;
			for (k = 0; k < np; k++)
				if (pend[k].slot <= ns) {
					due[nd] = pend[k];
					due[nd++].idx = k;
				}
			qsort(due, nd, sizeof(*due), cmp_mitem);
			got = sn_twheel_extract(w, now, out, max);
			CHECK(got == SN_MIN(nd, (uint64_t)max), "got %u due %lu max %u", got,
			      (unsigned long)nd, max);
			for (i = 0; i < got; i++) {
				CHECK(UN(out[i]) == due[i].id, "item %u: got %lu want %lu", i,
				      (unsigned long)UN(out[i]), (unsigned long)due[i].id);
				/* Never early (clamped items excepted by design), and on
				 * time within one slot when called on time. */
				CHECK(due[i].clamped || now >= due[i].ts, "early");
				if (on_time && !due[i].clamped)
					CHECK(now < SN_MAX(due[i].ts, due[i].ins_now) + 2 * g,
					      "late: now %lu ts %lu", (unsigned long)now,
					      (unsigned long)due[i].ts);
			}
			released += got;
			/* Remove released from the model. */
			for (i = 0; i < got; i++)
				pend[due[i].idx].id = 0;
			for (k = 0, i = 0; k < np; k++)
				if (pend[k].id)
					pend[i++] = pend[k];
			np = i;
			front = got < max ? SN_MAX(front, ns) : due[got - 1].slot;
		} else {   /* next_due */
			uint64_t best = UINT64_MAX;

			for (size_t k = 0; k < np; k++)
				best = SN_MIN(best, pend[k].slot * g);
			CHECK(sn_twheel_next_due(w) == best, "next_due %lu want %lu",
			      (unsigned long)sn_twheel_next_due(w), (unsigned long)best);
		}
		/* count() is O(non-empty slots): every 16th step (and at the end)
		 * keeps the ASan run of the 2^16-slot model within its timeout. */
		CHECK(sn_twheel_empty(w) == (np == 0), "empty");
		if (!(step & 15))
			CHECK(sn_twheel_count(w) == np, "count %lu want %zu",
			      (unsigned long)sn_twheel_count(w), np);
	}
	CHECK(sn_twheel_count(w) == np, "final count");
	revs = (now - start) / ((uint64_t)slots * g);
	sn_twheel_free(w);
	free(pend);
	free(due);
	printf("ok %d - model g=%lu slots=%u nodes=%u x %u items steps=%lu on_time=%d: "
	       "%lu released, %lu revolutions\n", ++n_test, (unsigned long)g, slots, nodes,
	       mk_node_items ? mk_node_items : SN_TWHEEL_NODE_ITEMS,
	       (unsigned long)steps, on_time, (unsigned long)released, (unsigned long)revs);
	CHECK(revs >= 5 || slots > 4096, "too few revolutions to exercise wrap");
}

/* sn_twheel_rewind (used by a restamp): only an empty wheel; after a
 * far-future drain, items are again due relative to the rewound now. */
static void test_rewind(void)
{
	struct sn_twheel *w = mk(100, 16, 64, 10000);   /* front slot 100, horizon 1600 ns */
	void *out[64];
	unsigned n;

	CHECK(sn_twheel_insert(w, ID(1), 10500, SN_TWHEEL_REJECT) == 0, "ins");
	CHECK(sn_twheel_rewind(w, 10000) == -EBUSY, "busy while not empty");
	n = sn_twheel_extract(w, UINT64_MAX >> 2, out, 64);
	CHECK(n == 1 && UN(out[0]) == 1, "far-future drain");
	/* the front is far ahead now: 10700 would be "past" (due at once) */
	CHECK(sn_twheel_rewind(w, 10200) == 0, "rewind empty");
	CHECK(sn_twheel_insert(w, ID(2), 10700, SN_TWHEEL_REJECT) == 0, "ins after rewind");
	CHECK(sn_twheel_insert(w, ID(3), 11801, SN_TWHEEL_REJECT) == -ERANGE,
	      "horizon counted from the rewound front");
	CHECK(sn_twheel_extract(w, 10600, out, 64) == 0, "not due before its time");
	n = sn_twheel_extract(w, 10700, out, 64);
	CHECK(n == 1 && UN(out[0]) == 2, "due at its time");
	sn_twheel_free(w);
	printf("ok %d - rewind an empty wheel\n", ++n_test);
}

/* The write cursors live in a window of 2 * slots entries that
 * moves down by `slots` when the front crosses a multiple of slots
 * (sn_twheel_rebase_). Keep every slot of an 8-slot wheel busy (two items
 * per slot, one of them in a second node: 7-item nodes, 8 per slot) while
 * the front walks 6 revolutions one slot at a time, so each rebase moves
 * 7 live slots with full and partial tail nodes; every extract must
 * return exactly its slot's items in order, count() stay exact and the
 * front stay inside the window. Then a front jump of several revolutions
 * (empty wheel) and a rewind backwards. */
static void test_window_rebase(void)
{
	const uint64_t g = 100;
	const uint32_t slots = 8, per = 8;
	struct sn_twheel_params p = { .granularity_ns = g, .slots = slots, .pool_nodes = 64,
				      .start_ns = 0, .node_items = 7 };
	struct sn_twheel *w = sn_twheel_create(&p);
	void *out[16];
	uint64_t id = 1, want = 1, now = 0;

	CHECK(w, "create");
	/* slots 1..7: per items each, ids in slot order */
	for (uint64_t s = 1; s < slots; s++)
		for (uint32_t i = 0; i < per; i++)
			CHECK(sn_twheel_insert(w, ID(id++), s * g, SN_TWHEEL_REJECT) == 0, "prefill");
	for (uint64_t s = 1; s <= 6 * slots; s++) {
		unsigned n;

		now = s * g;
		/* the slot entering the horizon (front + slots - 1 after this
		 * extract moves the front to s) */
		n = sn_twheel_extract(w, now, out, SN_ARRAY_SIZE(out));
		CHECK(n == per, "slot %lu: %u items", (unsigned long)s, n);
		for (unsigned i = 0; i < n; i++)
			CHECK(UN(out[i]) == want + i, "slot %lu item %u: %lu want %lu",
			      (unsigned long)s, i, (unsigned long)UN(out[i]),
			      (unsigned long)(want + i));
		want += per;
		CHECK(w->front == s && w->front - w->wbase <= w->mask, "window: front %lu wbase %lu",
		      (unsigned long)w->front, (unsigned long)w->wbase);
		for (uint32_t i = 0; i < per; i++)
			CHECK(sn_twheel_insert(w, ID(id++), (s + slots - 1) * g, SN_TWHEEL_REJECT) == 0,
			      "refill slot %lu", (unsigned long)(s + slots - 1));
		CHECK(sn_twheel_count(w) == (uint64_t)per * (slots - 1), "count %lu",
		      (unsigned long)sn_twheel_count(w));
		CHECK(sn_twheel_next_due(w) == (s + 1) * g, "next_due");
	}
	/* Drain with a far-future now: the front jumps many revolutions. */
	CHECK(sn_twheel_extract(w, now + 100 * slots * g, out, SN_ARRAY_SIZE(out)) == 16, "drain 1");
	while (sn_twheel_extract(w, now + 100 * slots * g, out, SN_ARRAY_SIZE(out)))
		;
	CHECK(sn_twheel_empty(w) && sn_twheel_count(w) == 0, "drained");
	CHECK(sn_twheel_extract(w, now + 1000 * slots * g, out, SN_ARRAY_SIZE(out)) == 0, "jump");
	CHECK(w->front - w->wbase <= w->mask, "window after jump");
	CHECK(sn_twheel_rewind(w, 3 * g) == 0, "rewind back");
	CHECK(w->front == 3 && w->wbase == 0, "window after rewind: wbase %lu",
	      (unsigned long)w->wbase);
	CHECK(sn_twheel_insert(w, ID(1), 9 * g, SN_TWHEEL_REJECT) == 0, "insert across the window");
	CHECK(sn_twheel_insert(w, ID(2), 10 * g, SN_TWHEEL_REJECT) == 0, "insert across the window");
	CHECK(sn_twheel_extract(w, 9 * g, out, 16) == 1 && UN(out[0]) == 1, "first after rewind");
	CHECK(sn_twheel_extract(w, 10 * g, out, 16) == 1 && UN(out[0]) == 2, "second after rewind");
	sn_twheel_free(w);
	printf("ok %d - write-cursor window rebased over 6 revolutions\n", ++n_test);
}

int main(void)
{
	test_params();
	test_fifo_and_ceil();
	test_past_and_horizon();
	test_pool();
	test_next_due_sparse();
	test_rewind();
	test_window_rebase();
	run_model(1000, 64, 1 << 12, 200000, 1);
	run_model(1000, 64, 1 << 12, 200000, 0);
	run_model(3, 16, 8, 100000, 0);            /* tiny pool: -ENOBUFS paths */
	run_model(1, 2, 1 << 12, 50000, 1);
	run_model(2000, 4096, 1 << 12, 200000, 1);
	run_model(2000, 4096, 1 << 12, 200000, 0);
	run_model(7, 1u << 16, 1 << 12, 100000, 0);
	/* Other node sizes: 64 B (one line), 128 B, 8 KiB. */
	mk_node_items = 7;
	run_model(1000, 64, 1 << 12, 200000, 0);
	run_model(3, 16, 8, 100000, 0);
	mk_node_items = 15;
	run_model(2000, 4096, 1 << 12, 200000, 1);
	run_model(3, 16, 8, 100000, 0);
	mk_node_items = SN_TWHEEL_NODE_ITEMS_MAX;
	run_model(1, 2, 64, 50000, 1);
	run_model(3, 16, 4, 100000, 0);
	printf("1..%d\n", n_test);
	return 0;
}
