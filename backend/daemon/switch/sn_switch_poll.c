/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_poll.c — which vhost-user TX queues a worker polls in an
 * iteration, and polling them.
 *
 * A host with hundreds of mostly idle VMs must not pay for the idle ones
 * on every loop: an empty rte_vhost_dequeue_burst() (device lookup, the
 * vring's access lock, a read of the guest's avail index) or an empty
 * sn_vqtx_recv() costs tens of nanoseconds, and each port's struct is
 * another cache line or three; at 500 ports that is most of an
 * iteration's budget. So the worker keeps a poll set, hybrid of busy
 * polling and a sweep:
 *
 *  - Every TX queue the worker owns (sn_port.h "Queues") has an entry,
 *    built from the port table in table order when the worker first sees
 *    a table (sn_port_table.seq; all entries start busy).
 *  - BUSY entries are polled every iteration. A busy entry that found
 *    nothing SN_SWITCH_QUIET_AFTER times in a row becomes QUIET, provided
 *    its queue holds nothing that needs the worker every iteration: a
 *    deferred queue (sn_vqtx) only when sn_vqtx_quiet() (no frame out,
 *    nothing left to publish), so its hold checks, completions and
 *    counters keep their per-iteration service while it matters.
 *  - A SWEEP visits SN_SWITCH_SWEEP entries per iteration, round robin
 *    over all entries (busy ones are skipped: they were polled). A quiet
 *    queue found with frames becomes busy at once, its frames switched in
 *    the same iteration. A deferred quiet queue is serviced (the stop
 *    handshake included) when the sweep polls it.
 *
 *  - A worker that naps (idle_sleep_us: no frame for a while) sweeps every
 *    entry per iteration instead: an idle worker has the time, and a
 *    quiet queue's first frame then waits one nap, as with no sweep.
 *
 * Cost of an idle connected port: nothing per iteration but its share of
 * the sweep (SN_SWITCH_SWEEP polls per iteration in total, whatever the
 * number of ports) while the worker switches. Latency of a quiet queue's
 * first frame: at most ceil(n / SN_SWITCH_SWEEP) iterations of a worker
 * that switches, n = the worker's entries (500 queues: 63 iterations), or
 * one nap of an idle one (measured in tests/datapath/test_idle_ports.py);
 * the next frames see busy polling. No queue is ever starved: the sweep
 * reaches every entry in that many iterations whatever the busy ones do,
 * and an iteration is bounded (each busy queue gives at most a burst).
 * While a stop is open on the worker, every queue is serviced each
 * iteration (sn_vqtx_worker_stops_open), so a quiet queue's stop waits
 * for no sweep. A queue held back by its rate (no room in the pipeline)
 * is not idle: it stays busy.
 *
 * Contract: the poll set belongs to its worker alone (struct sn_switch,
 * "Worker only"); it holds port pointers of the table it was built from,
 * valid because the worker rebuilds it, before any use, from each new
 * table it reads between its quiescent states (port/ frees a port only
 * after a grace period that follows its removal from the table). Port
 * state (up, txq_ready) is read as the port table contract says, at each
 * poll.
 *
 * Immediate ports' mbufs. rte_vhost_dequeue_burst() copies an immediate
 * port's frames into mbufs of the shared pool; a frame handed to a PMD
 * or copied into a peer's ring in the same burst is let go before the
 * poll returns, but one the port's policy queues (timing wheel, client
 * mailbox, scheduler class, the return mailbox) holds its mbufs for as
 * long as it waits. Those are charged to the port's slot of the mbuf
 * quota (sn_port_quota.h), as a deferred port's frames are (sn_vqtx.h),
 * on the pipeline's own count of the port's frames it holds
 * (sn_pipeline_src_held(), which every path out of the pipeline
 * decrements): each worker keeps the units it charged per slot (struct
 * sn_switch_mbc). A dequeue is charged exactly: the segments of the
 * frames it returned are taken from the quota at once, and the frames
 * those units do not cover (another queue of the port took the room
 * meanwhile, or the frames have more segments than the hint foresaw:
 * rte_vhost_dequeue_burst() allocates what each frame needs) are freed
 * before they are switched and counted in quota.mbufs.dropped. After
 * the burst was switched, and before each dequeue, the charge is
 * brought to held x hold (hold: the most segments of a frame charged
 * since the port last held none, sn_switch_mb_want(); the dequeue's
 * hint, the segments per frame of recent bursts as sn_vqtx's seg_hint,
 * sizes dequeues only): a take or give per poll on
 * top of the charge, none per frame. Before the dequeue the port's room
 * in the quota is read (sn_switch_mb_budget()): at most room / hint
 * frames are dequeued, and at least one while there is any room (a room below one
 * frame of the hint halves the hint, as the hint is learnt only from
 * dequeues: a queue kept from them would stall for ever); a port with
 * no room (at its cap, or the pool's shared part used up and its
 * reserve held) is not polled, its frames wait in its TX ring, and the
 * first poll of such a run counts one quota.mbufs hit (a take that is
 * refused). The charge brought to held x hold after the burst may be
 * refused in part: the port then holds up to one burst per queue beyond
 * its charge, uncharged, and is not polled again until it is
 * back below. Units come back within one iteration of the frames
 * leaving (a busy queue is polled every iteration, and a queue whose
 * worker still charges units for it does not go quiet); when the port
 * leaves the worker's poll set (deleted, or its queues moved) the
 * worker gives back what it charged at once: the frames still held
 * drain uncharged.
 */
#define _LGPL_SOURCE
#include "sn_switch_impl.h"
#include "sn_cpufair.h"
#include "sn_switch_mb.h"

#include <errno.h>

#include <rte_malloc.h>
#include <rte_vhost.h>

#include "sn_pipeline.h"
#include "sn_quota.h"
#include "sn_vqtx.h"

int sn_switch_poll_init(struct sn_switch *sw)
{
	struct sn_switch_pollset *ps = &sw->ps;
	const size_t nq = (size_t)sn_config_port_slots * SN_PORT_QMAX;

	ps->e = rte_zmalloc("sn_pollq", sizeof(*ps->e) * nq, RTE_CACHE_LINE_SIZE);
	ps->busy = rte_zmalloc("sn_pollbusy", sizeof(*ps->busy) * nq, RTE_CACHE_LINE_SIZE);
	ps->swept = rte_zmalloc("sn_pollswept", sizeof(*ps->swept) * nq, RTE_CACHE_LINE_SIZE);
	ps->eth = rte_zmalloc("sn_polleth", sizeof(*ps->eth) * sn_config_port_slots,
			      RTE_CACHE_LINE_SIZE);
	ps->mb = rte_zmalloc("sn_pollmb", sizeof(*ps->mb) * sn_config_port_slots,
			     RTE_CACHE_LINE_SIZE);
	if (!ps->e || !ps->busy || !ps->swept || !ps->eth || !ps->mb) {
		sn_switch_poll_fini(sw);
		return -ENOMEM;
	}
	return 0;
}

void sn_switch_poll_fini(struct sn_switch *sw)
{
	rte_free(sw->ps.e);
	rte_free(sw->ps.busy);
	rte_free(sw->ps.eth);
	rte_free(sw->ps.swept);
	rte_free(sw->ps.mb);
	sw->ps.mb = NULL;
	sw->ps.swept = NULL;
	sw->ps.e = NULL;
	sw->ps.busy = NULL;
	sw->ps.eth = NULL;
}

/* The units this worker charged for immediate port p back to held x
 * hold (see "Immediate ports' mbufs" above). */
static void mb_sync(struct sn_switch *sw, const struct sn_port *p)
{
	struct sn_switch_mbc *c = &sw->ps.mb[p->slot];
	uint64_t want;

	if (c->gen != p->gen || !c->hint) {   /* the slot's previous port: its units go */
		if (c->lvl)
			sn_quota_give(sw->mbq, p->slot, c->lvl);
		*c = (struct sn_switch_mbc){ .gen = p->gen, .seen = c->seen, .hint = 1 };
	}
	want = sn_switch_mb_want(sw->pl ? sn_pipeline_src_held(sw->pl, p) : 0, &c->hold);
	if (want > UINT32_MAX)
		want = UINT32_MAX;
	if (want > c->lvl)
		c->lvl += sn_quota_take(sw->mbq, p->slot, (uint32_t)want - c->lvl);
	else if (want < c->lvl) {
		sn_quota_give(sw->mbq, p->slot, c->lvl - (uint32_t)want);
		c->lvl = (uint32_t)want;
	}
}

/* How many frames immediate port p may dequeue now under its mbuf quota
 * (at most max; 0: no room, not polled; the first poll of such a run
 * counts one quota.mbufs hit). */
static uint16_t mb_room(struct sn_switch *sw, struct sn_switch_pollq *e, uint16_t max)
{
	const struct sn_port *p = e->p;
	const uint16_t fit = sn_switch_mb_budget(&sw->ps.mb[p->slot].hint,
						 sn_quota_room(sw->mbq, p->slot), max);
	uint32_t g;

	if (fit) {
		e->mb_held = false;
		return fit;
	}
	if (e->mb_held)
		return 0;
	e->mb_held = true;
	/* a take that is refused counts the hit; one granted in a race is
	 * returned (the next poll reads the room again) */
	g = sn_quota_take(sw->mbq, p->slot, 1);
	if (g)
		sn_quota_give(sw->mbq, p->slot, g);
	return 0;
}

/* After a dequeue of n frames of p: charge their segments exactly; the
 * frames the units taken do not cover are freed and counted
 * (quota.mbufs.dropped). Returns the frames kept, pkts[0, k). The hint
 * learns the burst's largest frame, dropped ones included. */
static uint16_t mb_charge(struct sn_switch *sw, struct sn_port *p, unsigned qi,
			  struct rte_mbuf **pkts, uint16_t n)
{
	struct sn_switch_mbc *c = &sw->ps.mb[p->slot];
	const uint32_t need = sn_switch_mb_need(pkts, n);
	uint32_t got, used;
	uint16_t segs = 1, k;

	for (uint16_t j = 0; j < n; j++)
		if (pkts[j]->nb_segs > segs)
			segs = pkts[j]->nb_segs;
	sn_switch_mb_learn(&c->hint, &c->hold, segs);
	got = sn_quota_take(sw->mbq, p->slot, need);
	k = got >= need ? n : sn_switch_mb_cover(pkts, n, got, &used);
	if (k < n) {
		if (got > used)
			sn_quota_give(sw->mbq, p->slot, got - used);
		got = used;
		rte_pktmbuf_free_bulk(pkts + k, n - k);
		sn_port_count_txq_quota_dropped(p, qi, (uint16_t)(n - k));
	}
	c->lvl += got;
	return k;
}

/* A new poll set from t: the units charged for ports that left it go
 * back (see "Immediate ports' mbufs"). */
static void mb_table(struct sn_switch *sw, const struct sn_port_table *t)
{
	for (unsigned s = 0; s < sn_config_port_slots; s++) {
		struct sn_switch_mbc *c = &sw->ps.mb[s];

		if (c->lvl && c->seen != t->seq) {
			sn_quota_give(sw->mbq, s, c->lvl);
			c->lvl = 0;
		}
	}
}

void sn_switch_poll_sync(struct sn_switch *sw, const struct sn_port_table *t)
{
	struct sn_switch_pollset *ps = &sw->ps;

	if (ps->seq == t->seq)
		return;
	ps->n = ps->nbusy = ps->neth = ps->nswept = 0;
	for (unsigned i = 0; i < t->n; i++) {
		struct sn_port *p = t->list[i];

		if (p->type != SN_PORT_VHOST) {
			ps->eth[ps->neth++] = p;
			continue;
		}
		for (uint16_t qi = 0; qi < p->nq; qi++) {
			if (p->q[qi].owner != sw->wk)
				continue;
			ps->e[ps->n] = (struct sn_switch_pollq){ .p = p, .qi = qi, .busy = true };
			ps->busy[ps->nbusy++] = ps->n++;
			if (ps->mb[p->slot].gen == p->gen)
				ps->mb[p->slot].seen = t->seq;
		}
	}
	if (sw->mbq)
		mb_table(sw, t);
	ps->cursor = 0;
	ps->seq = t->seq;
}

/* Poll TX queue e->qi of vhost port e->p if it may be polled, switch what
 * it holds; returns the frames taken. */
static unsigned poll_txq(struct sn_switch *sw, const struct sn_port_table *t,
			 struct sn_switch_pollq *e, struct rte_mbuf **pkts, uint64_t now)
{
	struct sn_port *p = e->p;
	const unsigned qi = e->qi;
	const uint16_t burst = (uint16_t)sw->burst;
	struct sn_vqtx *vq = p->q[qi].vq;
	uint64_t bytes, t0;
	uint16_t n;

	if (!vq && sw->mbq)
		mb_sync(sw, p);
	if (!sn_port_is_up(p) || !(sn_port_txq_ready(p) & (1u << qi)))
		return 0;
	t0 = sw->cf ? sn_cpufair_clock() : now;
	if (vq) {
		uint16_t mx = burst;

		/* An opted-in guest is backpressured by its completions: while
		 * its port's rate limit is a wheel horizon ahead, its frames
		 * wait in its ring rather than being dropped at the horizon. */
		if (sw->pl && sn_vqtx_opted_in(vq)) {
			mx = sn_pipeline_src_room(sw->pl, p, burst);
			if (!mx) {
				sn_vqtx_count_horizon_wait(vq);
				e->empty = 0;   /* held back, not idle: stays busy */
				return 0;
			}
		} else if (sw->pl) {
			/* A stock guest's frames are copied out rather than held
			 * long (sn_vqtx_copy_out): its frames in the pipeline
			 * stay within a budget of one ring per queue
			 * (sn_pipeline_src_copy_room). */
			mx = sn_pipeline_src_copy_room(sw->pl, p,
						       (uint64_t)p->nq * sn_vqtx_ring_size(vq), burst);
			if (!mx) {
				e->empty = 0;   /* held back, not idle: stays busy */
				return 0;
			}
		}
		n = sn_vqtx_recv(vq, sw->mp, pkts, mx, now, &bytes);
	} else {
		uint16_t mx = sw->mbq ? mb_room(sw, e, burst) : burst;

		if (!mx) {
			e->empty = 0;   /* held back, not idle: stays busy */
			return 0;
		}
		n = rte_vhost_dequeue_burst(p->vid, (uint16_t)(2 * qi + 1), sw->mp, pkts, mx);
		bytes = 0;
		for (uint16_t j = 0; j < n; j++)
			bytes += pkts[j]->pkt_len;
	}
	if (!n)
		return 0;
	sn_port_count_txq(p, qi, n, bytes);
	if (!vq && sw->mbq) {
		uint16_t k = mb_charge(sw, p, qi, pkts, n);

		if (!k) {
			mb_sync(sw, p);
			return n;   /* taken from the guest, all dropped */
		}
		n = k;
	}
	sn_switch_burst_in(sw, t, p, pkts, n, now, t0);
	if (!vq && sw->mbq)
		mb_sync(sw, p);
	return n;
}

/* A busy entry that found nothing: may it leave busy polling? Not while
 * its frames hold something that needs the worker each iteration. */
static bool goes_quiet(const struct sn_switch *sw, struct sn_switch_pollq *e)
{
	const struct sn_vqtx *vq = e->p->q[e->qi].vq;

	if (++e->empty < SN_SWITCH_QUIET_AFTER)
		return false;
	return vq ? sn_vqtx_quiet(vq) : sw->ps.mb[e->p->slot].lvl == 0;
}

unsigned sn_switch_poll_vhost(struct sn_switch *sw, const struct sn_port_table *t,
			      struct rte_mbuf **pkts, uint64_t now, bool napping)
{
	struct sn_switch_pollset *ps = &sw->ps;
	unsigned got = 0, steps;

	for (unsigned b = 0; b < ps->nbusy;) {
		struct sn_switch_pollq *e = &ps->e[ps->busy[b]];
		unsigned n = poll_txq(sw, t, e, pkts, now);

		if (n) {
			e->empty = 0;
			got += n;
		} else if (goes_quiet(sw, e)) {
			e->busy = false;
			ps->busy[b] = ps->busy[--ps->nbusy];   /* not yet polled */
			continue;
		}
		b++;
	}
	ps->nswept = 0;
	steps = napping || ps->n < SN_SWITCH_SWEEP ? ps->n : SN_SWITCH_SWEEP;
	for (unsigned k = 0; k < steps; k++) {
		uint32_t i = ps->cursor;
		struct sn_switch_pollq *e = &ps->e[i];
		unsigned n;

		ps->cursor = i + 1 == ps->n ? 0 : i + 1;
		if (e->busy)
			continue;
		n = poll_txq(sw, t, e, pkts, now);
		if (n) {
			e->busy = true;
			e->empty = 0;
			ps->busy[ps->nbusy++] = i;
			got += n;
		} else {
			ps->swept[ps->nswept++] = i;
		}
	}
	return got;
}
