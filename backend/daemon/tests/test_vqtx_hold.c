/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vqtx_hold.c — unit tests of the deferred queue's hold verdict and
 * burst hold bound (sn_vqtx_hold.c) over hand-built queues, slots and
 * mbufs: no EAL, no vhost device. The per-worker contexts and the
 * caller's identity, which sn_vqtx.c owns in the daemon, are defined here;
 * a real sn_vring with held descriptors gives the oldest held head.
 *
 * Properties: the deadline of each hold class; the verdict (keep, stopping,
 * expired) by the worker's iteration clock; keep_run stops at the first
 * frame that is not kept and ORs the flags of those before; the bound is
 * the oldest held stamp plus the short limit, or none (late frames, no live
 * ring, a tiny hold limit); keep_all is true only on the worker's own
 * thread, before the bound and with no stop open; and whenever keep_all is
 * true, keep_run keeps the whole burst; the stock-guest fallback's
 * copy-by time (deadline less a quarter of the short limit, none for the
 * long class).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf_core.h>

#include "sn_vqtx_impl.h"

#include "sn_check.h"

/* What sn_vqtx.c and sn_vqtx_done.c define in the daemon. */
struct sn_vqtx_worker sn_vqtx_workers[SN_VQTX_WORKERS_MAX];
__thread struct sn_vqtx_worker *sn_vqtx_self __attribute__((tls_model("initial-exec")));

void sn_vqtx_extbuf_free_cb(void *addr, void *opaque)
{
	(void)addr, (void)opaque;
}

#define RING 8u
#define MEM  0x4000u
#define DATA 0x1000u   /* frames from here, 0x100 each */

/* A fake guest: one memory region holding a split ring of RING entries. */
struct guest {
	unsigned char *mem;
	struct sn_vring_mem table;
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	uint16_t avail_idx;
};

static struct sn_vring *ring_new(struct guest *g)
{
	struct sn_vring_config c = { .size = RING, .hdr_len = 12 };

	memset(g, 0, sizeof(*g));
	g->mem = aligned_alloc(64, MEM);
	if (!g->mem)
		abort();
	memset(g->mem, 0, MEM);
	g->table.nregions = 1;
	g->table.regions[0].guest_phys_addr = 0;
	g->table.regions[0].size = MEM;
	g->table.regions[0].host_user_addr = (uintptr_t)g->mem;
	g->desc = (void *)g->mem;
	g->avail = (void *)(g->mem + 16 * RING);
	c.desc = g->desc;
	c.avail = g->avail;
	c.used = g->mem + 0x400;
	return sn_vring_create(&c, &g->table);
}

/* The guest posts a one-descriptor frame at head h; the ring pops it. */
static void post_pop(struct guest *g, struct sn_vring *vr, uint16_t h)
{
	struct sn_vring_pkt p;

	g->desc[h].addr = DATA + 0x100u * h;
	g->desc[h].len = 12 + 64;
	g->desc[h].flags = 0;
	g->avail->ring[g->avail_idx % RING] = h;
	g->avail_idx++;
	__atomic_store_n(&g->avail->idx, g->avail_idx, __ATOMIC_RELEASE);
	CHECK(sn_vring_tx_pop(vr, &p, 1) == 1 && p.head == h && p.err == 0);
}

/* A frame of q at head h with stamp pop (its slot) and mbuf m. */
static void frame(struct rte_mbuf *m, struct slot *s, struct sn_vqtx *q, uint16_t h,
		  uint64_t pop, uint64_t ol_flags)
{
	memset(s, 0, sizeof(*s));
	s->q = q;
	s->head = h;
	s->pop_tsc = pop;
	s->shinfo.free_cb = sn_vqtx_extbuf_free_cb;
	s->shinfo.fcb_opaque = s;
	memset(m, 0, sizeof(*m));
	m->ol_flags = RTE_MBUF_F_EXTERNAL | ol_flags;
	m->shinfo = &s->shinfo;
}

static void queue(struct sn_vqtx *q, struct sn_vqtx_worker *w, uint64_t unmarked, uint64_t maxh)
{
	memset(q, 0, sizeof(*q));
	q->w = w;
	q->unmarked_hold_tsc = unmarked;
	q->max_hold_tsc = maxh;
}

static void test_deadline(void)
{
	struct sn_vqtx q;

	queue(&q, &sn_vqtx_workers[0], 100, 0);
	CHECK(sn_vqtx_deadline(&q, 1001) == 1101);        /* short class */
	CHECK(sn_vqtx_deadline(&q, 1000) == UINT64_MAX);  /* long, no limit */
	q.max_hold_tsc = 5000;
	CHECK(sn_vqtx_deadline(&q, 1000) == 6000);
	CHECK(sn_vqtx_deadline(&q, 1001) == 1101);
}

static void test_verdict(void)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[0];
	struct sn_vqtx q, *got;
	struct rte_mbuf m, plain;
	struct slot s;
	uint64_t pop;

	queue(&q, w, 100, 1000);
	sn_vqtx_self = w;
	frame(&m, &s, &q, 3, 2001, 0);
	memset(&plain, 0, sizeof(plain));

	got = &q;
	CHECK(sn_vqtx_verdict(&plain, &got) == SN_VQTX_KEEP && got == NULL);
	CHECK(sn_vqtx_of(&plain, &pop) == NULL);
	CHECK(sn_vqtx_of(&m, &pop) == &q && pop == 2001);

	w->now = 2100;   /* deadline 2101 */
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_KEEP && got == &q);
	w->now = 2101;
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_EXPIRED);
	s.pop_tsc = 2000;   /* long class: deadline 3000 */
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_KEEP);
	w->now = 3000;
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_EXPIRED);

	w->now = 0;
	q.stop_req = 1;
	CHECK(stop_pending(&q));
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_STOPPING);
	q.stop_ack = 1;   /* acknowledged: no longer pending */
	CHECK(sn_vqtx_verdict(&m, &got) == SN_VQTX_KEEP);
	sn_vqtx_self = NULL;
}

/* The stock-guest fallback's copy-by time: the short class's deadline
 * less a quarter of its limit, by the worker's clock; never for the long
 * class or a plain mbuf. */
static void test_copy_by(void)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[0];
	struct sn_vqtx q;
	struct rte_mbuf m, plain;
	struct slot s;

	queue(&q, w, 400, 1000);
	sn_vqtx_self = w;
	memset(&plain, 0, sizeof(plain));
	CHECK(sn_vqtx_copy_by_tsc(&plain) == UINT64_MAX && !sn_vqtx_is_stock(&plain));
	frame(&m, &s, &q, 2, 1001, 0);     /* short class: deadline 1401, copy by 1301 */
	CHECK(sn_vqtx_is_stock(&m));
	w->now = 1001;
	CHECK(sn_vqtx_copy_by_tsc(&m) == 300);
	w->now = 1300;
	CHECK(sn_vqtx_copy_by_tsc(&m) == 1);
	w->now = 1301;
	CHECK(sn_vqtx_copy_by_tsc(&m) == 0);
	w->now = 5000;                     /* past the deadline */
	CHECK(sn_vqtx_copy_by_tsc(&m) == 0 && sn_vqtx_copy_by_ns(&m) == 0);
	s.pop_tsc = 1000;                  /* long class: never copied */
	CHECK(sn_vqtx_copy_by_tsc(&m) == UINT64_MAX && !sn_vqtx_is_stock(&m));
	CHECK(sn_vqtx_copy_by_ns(&m) == UINT64_MAX);
	sn_vqtx_self = NULL;
}

static void test_keep_run(void)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[0];
	struct sn_vqtx q1, q2;
	struct rte_mbuf m[5];
	struct rte_mbuf *pk[5];
	struct slot s[5];
	uint64_t fl;

	queue(&q1, w, 100, 0);
	queue(&q2, w, 50, 400);
	sn_vqtx_self = w;
	frame(&m[0], &s[0], &q1, 0, 1101, 0x10);   /* deadline 1201 */
	frame(&m[1], &s[1], &q1, 1, 1000, 0x20);   /* never */
	memset(&m[2], 0, sizeof(m[2]));            /* not deferred */
	m[2].ol_flags = 0x40;
	frame(&m[3], &s[3], &q2, 0, 1000, 0x80);   /* deadline 1400 */
	frame(&m[4], &s[4], &q2, 1, 1101, 0x100);  /* deadline 1151 */
	for (int i = 0; i < 5; i++)
		pk[i] = &m[i];

	w->now = 1100;
	CHECK(sn_vqtx_keep_run(pk, 5, &fl) == 5 && fl == (RTE_MBUF_F_EXTERNAL | 0x1f0));
	w->now = 1151;   /* the last frame is due */
	CHECK(sn_vqtx_keep_run(pk, 5, &fl) == 4 && fl == (RTE_MBUF_F_EXTERNAL | 0xf0));
	w->now = 1201;   /* the first is due */
	CHECK(sn_vqtx_keep_run(pk, 5, &fl) == 0 && fl == 0);
	w->now = 1100;
	q2.stop_req = 1;  /* stops at q2's first frame */
	CHECK(sn_vqtx_keep_run(pk, 5, &fl) == 3 && fl == (RTE_MBUF_F_EXTERNAL | 0x70));
	q2.stop_req = 0;
	CHECK(sn_vqtx_keep_run(pk, 0, &fl) == 0 && fl == 0);
	sn_vqtx_self = NULL;
}

static void test_bound(void)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[1];
	struct sn_vqtx q, idle;
	struct slot slots[RING];
	struct guest g;
	struct sn_vring *vr = ring_new(&g);

	CHECK(vr != NULL);
	memset(w, 0, sizeof(*w));
	w->min_hold_tsc = 50;
	queue(&q, w, 100, 0);
	queue(&idle, w, 10, 0);
	memset(slots, 0, sizeof(slots));
	q.vr = vr;
	q.slots = slots;
	q.live = 1;
	/* heads 5 then 2 popped (5 is the oldest held), stamps of two
	 * iterations */
	post_pop(&g, vr, 5);
	slots[5].pop_tsc = 1001;
	post_pop(&g, vr, 2);
	slots[2].pop_tsc = 1200;
	q.outstanding = 2;

	/* not the worker's thread: no bound, keep_all false */
	sn_vqtx_self = NULL;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&q);
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 0 && !sn_vqtx_keep_all(1));

	sn_vqtx_self = w;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&idle);   /* nothing out: no term */
	sn_vqtx_keep_bound_add(&q);      /* (1001 & ~1) + 100 */
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 1100);
	w->now = 1099;
	CHECK(sn_vqtx_keep_all(1));
	CHECK(!sn_vqtx_keep_all(0));     /* another worker's context */
	w->now = 1100;
	CHECK(!sn_vqtx_keep_all(1));
	w->now = 1099;
	w->stops_open = 1;
	CHECK(!sn_vqtx_keep_all(1));
	w->stops_open = 0;

	/* the oldest completed: the next one bounds */
	CHECK(sn_vring_used_put(vr, 5, 0) == 0);
	q.outstanding = 1;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&q);
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 1300);

	/* no bound: frames of an earlier connection, no live ring, or a hold
	 * limit under 2 ticks anywhere on this worker */
	q.late_out = 1;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&q);
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 0 && !sn_vqtx_keep_all(1));
	q.late_out = 0;
	q.live = 0;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&q);
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 0);
	q.live = 1;
	w->min_hold_tsc = 1;
	sn_vqtx_keep_bound_begin(1);
	sn_vqtx_keep_bound_add(&idle);
	sn_vqtx_keep_bound_end(1);
	CHECK(w->keep_until == 0);
	w->min_hold_tsc = 50;

	sn_vqtx_self = NULL;
	sn_vring_free(vr);
	free(g.mem);
}

/* keep_all true -> keep_run keeps every frame of the worker's queues:
 * frames popped up to the scan (held, stamps from the oldest on) and
 * frames popped in the iteration after it (stamp >= its clock). */
static void test_bound_implies_keep(void)
{
	struct sn_vqtx_worker *w = &sn_vqtx_workers[2];
	struct sn_vqtx q;
	struct slot slots[RING];
	struct rte_mbuf m[RING];
	struct rte_mbuf *pk[RING];
	struct guest g;
	struct sn_vring *vr = ring_new(&g);
	unsigned checked = 0;

	CHECK(vr != NULL);
	memset(w, 0, sizeof(*w));
	w->min_hold_tsc = 30;
	queue(&q, w, 30, 90);
	q.vr = vr;
	q.slots = slots;
	q.live = 1;
	sn_vqtx_self = w;
	/* iterations 10 ticks apart; one frame popped per iteration,
	 * alternating hold classes, the oldest completed once 4 are held */
	for (uint64_t it = 0, now = 1000; it < 40; it++, now += 10) {
		uint16_t h = (uint16_t)(it % RING);
		int n = 0, id;

		w->now = now;
		/* this iteration's checks happen before its pop: the bound is
		 * the previous scan's */
		for (id = 0; id < (int)RING; id++)
			if (sn_vring_is_held(vr, (uint32_t)id))
				pk[n++] = &m[id];
		if (sn_vqtx_keep_all(2)) {
			uint64_t fl;

			CHECK(sn_vqtx_keep_run(pk, (uint16_t)n, &fl) == n);
			checked++;
		}
		if (sn_vring_is_held(vr, h) || q.outstanding == 4) {
			id = sn_vring_oldest_held(vr);
			CHECK(id >= 0 && sn_vring_used_put(vr, (uint32_t)id, 0) == 0);
			q.outstanding--;
		}
		post_pop(&g, vr, h);
		frame(&m[h], &slots[h], &q, h, (it & 1) ? now | 1 : now & ~1ULL, 0);
		q.outstanding++;
		/* a frame popped now is kept by the bound of the scan before */
		if (sn_vqtx_keep_all(2)) {
			uint64_t fl;

			pk[0] = &m[h];
			CHECK(sn_vqtx_keep_run(pk, 1, &fl) == 1);
		}
		sn_vqtx_keep_bound_begin(2);
		sn_vqtx_keep_bound_add(&q);
		sn_vqtx_keep_bound_end(2);
	}
	CHECK(checked > 0);
	sn_vqtx_self = NULL;
	sn_vring_free(vr);
	free(g.mem);
}

int main(void)
{
	test_deadline();
	test_verdict();
	test_copy_by();
	test_keep_run();
	test_bound();
	test_bound_implies_keep();
	return sn_check_exit("vqtx_hold");
}
