/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch.c — transparent L2 learning switch (IEEE 802.1D style) on one
 * worker lcore: the poll loop, staging per destination, and the backlogs of
 * deferred frames.
 *
 * Per ingress burst: (1) learn each source MAC -> ingress port (sn_mac.h);
 * (2) pick the destination: a learned, unexpired unicast MAC whose port
 * still exists (slot + generation match) gives one port, anything else is
 * flooded to every other up port ((1) and (2) are skipped for a frame
 * that repeats an earlier frame's source / the previous frame's
 * destination within the burst, whose results they would repeat: see the
 * burst memo in switch_burst); (3) stage the packet on each destination;
 * (4) flush each destination with one burst call; (5) free the input
 * mbufs. vhost-user enqueue copies the packet into the guest, so one mbuf
 * serves every vhost destination of a flood; the uplink's tx_burst takes
 * ownership, so the uplink gets its own reference (refcnt + 1). Every mbuf
 * is freed on every path: what a destination did not take is freed here and
 * counted as ring_full on that destination. Ethdev destinations and GSO
 * frames: sn_switch_gso.c.
 *
 * Deferred-completion ports (sn_vqtx.h, Carousel §5.2): their frames are
 * guest buffers wrapped zero-copy in mbufs, and the guest gets a
 * descriptor back only when the last reference is freed. That turns a full
 * destination ring from a drop into backpressure: a frame from a deferred
 * port that a vhost destination cannot take now waits in that
 * destination's BACKLOG (FIFO, BACKLOG_MAX frames, drained before anything
 * new goes to that destination, so a flow stays in order) until the
 * destination takes it, goes down (port_down) or the frame's hold time
 * passes its port's max_hold_us (dropped, counted as hold_timeouts; a
 * frame of a guest that did not opt in is copied out instead and its copy
 * waits on, sn_vqtx_copy_out). Its
 * descriptor stays held meanwhile, so the guest's TX ring, not our
 * mempool, absorbs the queue. Frames to the uplink are copied (a PMD may
 * keep an mbuf past a device stop, and guest memory must not outlive it).
 * Backlogs belong to the worker alone (sn_switch_bl.c, with each source's
 * backlog quota); a port being stopped has every one of its frames purged
 * from them before sn_vqtx_stop_ack().
 */
#define _LGPL_SOURCE
/* rte_seqlock (sn_mac_impl.h) is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_switch_impl.h"
#include "sn_cpufair.h"
#include "sn_mac_impl.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_vhost.h>
#include <urcu-qsbr.h>

#include "sn_bind.h"
#include "sn_config.h"
#include "sn_pipeline.h"
#include "sn_port.h"
#include "sn_port_quota.h"
#include "sn_quota.h"
#include "sn_vqtx.h"

#define IDLE_SPINS 20000 /* empty polls before napping */
#define BACKLOG_MAX SN_SWITCH_BACKLOG_MAX

/* The destination port of a unicast MAC, or NULL (unknown: flood). */
static inline struct sn_port *mac_lookup(struct sn_switch *sw, const struct sn_port_table *t,
					 uint64_t key, uint64_t now)
{
	struct sn_port *p;
	uint32_t gen;
	uint16_t slot;

	if (!sn_mac_lookup(sw->mt, key, now, &slot, &gen))
		return NULL;
	p = t->by_slot[slot];
	return p && p->gen == gen ? p : NULL;
}

static inline void stage_add(struct sn_switch *sw, struct sn_port *in, struct sn_port *p,
			     struct rte_mbuf *m)
{
	struct sn_switch_stage *s = &sw->stage[p->slot];

	if (p->type == SN_PORT_UPLINK) {
		if (in->vq && !p->tx_sync) {
			/* Guest memory must not outlive a device stop in a PMD
			 * (unless the PMD is done with it when tx_burst
			 * returns, sn_port_tx_sync(); the worker's tx_burst
			 * then frees, i.e. completes, the guest frame itself). */
			m = rte_pktmbuf_copy(m, sw->mp, 0, UINT32_MAX);
			if (!m) {
				sn_port_ctr_add(&in->st.drop[SN_DROP_NO_MBUF], 1);
				return;
			}
		} else {
			/* Every segment: rte_pktmbuf_free() frees each segment
			 * by its own refcnt, so a head-only reference would let
			 * the PMD and the final free_bulk free a multi-segment
			 * (TSO) frame's tail twice. */
			rte_pktmbuf_refcnt_update(m, 1);
		}
	}
	if (s->n == 0) {
		s->port = p;
		sw->touched[sw->n_touched++] = p->slot;
	}
	s->pkts[s->n++] = m;
}

/* sn_pipeline's GSO hook: shaped ports' TSO frames for the uplink. */
static int pipeline_gso(void *arg, const struct sn_port *p, struct rte_mbuf *m)
{
	return sn_switch_gso_tx(arg, p, m);
}


/* Every iteration, after switching: deferred ports publish completions, or
 * hand their ring back when a stop is pending. The stop never waits on the
 * link: a stopping queue's frames are purged from the backlogs here and
 * from the policy pipeline (wheel here, mailboxes and scheduler classes by
 * the arbiter half at its next round: sn_pipeline_src_purge), each
 * dropped and completed at once, and the stop is acknowledged once the
 * port holds none (microseconds, an arbiter round later in layout 2core). */
static void vq_service_one(struct sn_switch *sw, const struct sn_switch_pollq *e, uint64_t now)
{
	struct sn_port *p = e->p;
	struct sn_vqtx *q = p->q[e->qi].vq;

	if (!q)
		return;
	sn_vqtx_keep_bound_add(q);
	if (sn_vqtx_stop_pending(q)) {
		sn_switch_bl_purge_queue(sw, q);
		/* Acknowledged once none of the queue's own frames is out, or
		 * the port holds nothing in the pipeline: a stock guest's
		 * copies there reference no descriptor and leave at their own
		 * pace. */
		if (sw->pl && sn_pipeline_src_purge(sw->pl, p) && sn_vqtx_frames_out(q))
			return;
		sn_vqtx_stop_ack(q);
	} else {
		sn_vqtx_service(q, now);
	}
}

/* The queues polled this iteration (busy and swept, sn_switch_poll.c), or
 * all: a quiet queue has nothing to publish and no frame out, so the
 * hold-check bound over the busy ones covers every frame of the worker. */
static void vq_service(struct sn_switch *sw, uint64_t now, bool all)
{
	const struct sn_switch_pollset *ps = &sw->ps;

	/* The hold-check bound over every queue this worker owns, after the
	 * iteration's last pop (sn_vqtx_keep_all). */
	sn_vqtx_keep_bound_begin(sw->wk);
	if (all) {
		for (unsigned i = 0; i < ps->n; i++)
			vq_service_one(sw, &ps->e[i], now);
	} else {
		for (unsigned b = 0; b < ps->nbusy; b++)
			vq_service_one(sw, &ps->e[ps->busy[b]], now);
		for (unsigned k = 0; k < ps->nswept; k++)
			vq_service_one(sw, &ps->e[ps->swept[k]], now);
	}
	sn_vqtx_keep_bound_end(sw->wk);
}

/* in: the port whose burst was staged; its deferred frames a full
 * destination cannot take wait in the destination's backlog while in
 * holds fewer than its backlog quota of entries on this worker (loaded
 * once per burst), else they are dropped and counted on in
 * (quota_backlog): one source cannot take the backlog others need. */
static void flush(struct sn_switch *sw, struct sn_port *in)
{
	const uint32_t bq = __atomic_load_n(&in->quota.backlog, __ATOMIC_RELAXED);
	const uint32_t bcap = bq ? bq : UINT32_MAX;
	uint64_t over = 0;

	for (unsigned i = 0; i < sw->n_touched; i++) {
		struct sn_switch_stage *s = &sw->stage[sw->touched[i]];
		struct sn_port *p = s->port;
		struct sn_switch_backlog *b;
		uint64_t bytes = 0;
		uint16_t k;

		if (p->type != SN_PORT_VHOST) {
			sn_switch_flush_eth(sw, p, s);
			s->n = 0;
			continue;
		}
		b = &sw->bl[p->slot];
		if (b->n)
			sn_switch_bl_drain(sw, b, p);
		/* MQ: reorders s->pkts, taken ones first. */
		k = b->n ? 0 : sn_port_vhost_enqueue_bytes(p, s->pkts, s->n, &bytes);
		/* Deferred frames the destination cannot take now wait; the
		 * rest are dropped below. Keep the untaken ones at the end of
		 * s->pkts for the drop count. */
		for (uint16_t j = k; j < s->n; j++) {
			struct rte_mbuf *m = s->pkts[j];
			struct sn_vqtx *q;
			uint64_t pop;

			q = sn_vqtx_of(m, &pop);
			if (!q || b->n >= BACKLOG_MAX)
				continue;
			if (sw->bl_src[in->slot] >= bcap) {
				over++;
				s->pkts[j] = NULL;   /* freed (completed) with the burst */
				continue;
			}
			sn_switch_bl_push(sw, b, p, m, in->slot, sn_vqtx_deadline(q, pop));
			s->pkts[j] = NULL;
		}
		sn_port_ctr_add(&p->st.tx_packets, k);
		sn_port_ctr_add(&p->st.tx_bytes, bytes);
		for (uint16_t j = k; j < s->n; j++)
			if (s->pkts[j]) {
				sn_port_ctr_add(&p->st.drop[SN_DROP_RING_FULL], 1);
				sn_port_count_rxq_full(p, s->pkts[j]);
			}
		s->n = 0;
	}
	sw->n_touched = 0;
	if (over)
		sn_port_ctr_add(&in->st.drop[SN_DROP_QUOTA_BACKLOG], over);
}

/* Free the frames of a burst that came in by copy (an immediate
 * port's rte_vhost_dequeue_burst, the uplink's rx_burst): what
 * rte_pktmbuf_free_bulk() does, with DPDK's own per-segment step
 * (rte_pktmbuf_prefree_seg: reference count, detach, next/nb_segs reset),
 * but single-segment frames skip its per-segment pending-array
 * bookkeeping and go back to their pool in one rte_mempool_put_bulk() per
 * run of equal pools; chains go through rte_pktmbuf_free_bulk(). */
static void free_copied_bulk(struct rte_mbuf **pkts, unsigned n)
{
	void *put[SN_CONFIG_BURST_MAX];
	struct rte_mbuf *chains[SN_CONFIG_BURST_MAX];
	struct rte_mempool *mp = NULL;
	unsigned nput = 0, nchains = 0;

	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];

		if (m->nb_segs != 1) {
			chains[nchains++] = m;
			continue;
		}
		m = rte_pktmbuf_prefree_seg(m);
		if (!m)
			continue;        /* another reference remains */
		if (m->pool != mp) {
			if (nput)
				rte_mempool_put_bulk(mp, put, nput);
			mp = m->pool;
			nput = 0;
		}
		put[nput++] = m;
	}
	if (nput)
		rte_mempool_put_bulk(mp, put, nput);
	if (nchains)
		rte_pktmbuf_free_bulk(chains, nchains);
}

static void switch_burst(struct sn_switch *sw, const struct sn_port_table *t,
			 struct sn_port *in, struct rte_mbuf **pkts, uint16_t n, uint64_t now)
{
	uint64_t bytes = 0;
	uint16_t keep = 0, ns = 0;
	/* Frames of a port with a policy go through the shaper. */
	const bool shaped = sw->pl && sn_pipeline_shaped(sw->pl, in);
	struct rte_mbuf *spkts[SN_CONFIG_BURST_MAX];   /* shaped frames, */
	struct sn_port *sdst[SN_CONFIG_BURST_MAX];     /* one submit per burst */

	/* Burst memo. A frame with the source MAC of an earlier frame
	 * of this burst that was learned (SN_MAC_KNOWN/WROTE: the entry maps
	 * it to `in`) skips sn_mac_learn(): with the same port and the same
	 * iteration clock it would find exactly that and write nothing. A
	 * frame with the destination MAC of the previous lookup reuses its
	 * result: the lookup depends on the table (our own writes below clear
	 * the memo), the port snapshot t and `now`, all fixed for the burst.
	 * Another worker's concurrent write (ncore) is ordered as if it came
	 * after the burst. Keys carry SN_MAC_VALID, so 0 matches no frame.
	 * OVS-DPDK groups its batches by flow for the same reason. Counters
	 * keep their meaning: a MAC the table could not take (SN_MAC_FULL) is
	 * not memoized, so `full` still counts every such frame. */
	uint64_t memo_src = 0, memo_dst = 0;
	struct sn_port *memo_dp = NULL;
	/* How the port learns (sn_mac.h "Source binding"): a VM port's
	 * allowed_macs are the only sources that pass its binding. */
	const unsigned learn_in = (in->type == SN_PORT_VHOST ? SN_MAC_IN_VM : 0) |
				  (in->bound && in->bind.n_macs ? SN_MAC_IN_ALLOWED : 0);

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ether_hdr *eth;
		struct sn_port *dp = NULL;
		uint64_t skey, dkey;

		bytes += m->pkt_len;
		if (m->data_len < RTE_ETHER_HDR_LEN) {
			sn_switch_diag(&sw->diag_malformed, in->name, "malformed (runt)", m);
			sn_port_ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
		if (rte_is_multicast_ether_addr(&eth->src_addr)) {
			sn_switch_diag(&sw->diag_malformed, in->name, "malformed (multicast source)", m);
			sn_port_ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		sn_mac_keys(eth, &dkey, &skey);
		if (in->bound) {
			/* One branch per frame for a port without a binding. */
			enum sn_bind_verdict v = sn_bind_check(&in->bind, m, skey);

			if (v != SN_BIND_OK) {
				sn_port_ctr_add(&in->st.drop[v == SN_BIND_SPOOFED_ARP ? SN_DROP_SPOOFED_ARP
						: v == SN_BIND_SPOOFED_ND ? SN_DROP_SPOOFED_ND
						: SN_DROP_SPOOFED], 1);
				rte_pktmbuf_free(m);
				continue;
			}
		}
		if (skey != memo_src) {
			enum sn_mac_learn_res r = sn_mac_learn(sw->mt, skey, in->slot, in->gen,
							       learn_in, now);

			/* Not learned: counted for every such frame. */
			memo_src = r == SN_MAC_KNOWN || r == SN_MAC_WROTE ? skey : 0;
			if (r == SN_MAC_QUOTA)
				sn_port_ctr_add(&in->st.quota_macs, 1);
			else if (r == SN_MAC_REFUSED)
				sn_port_ctr_add(&in->st.move_refused, 1);
			/* A write changes lookups; so does a known entry's
			 * refreshed `seen` if it had expired (not yet aged
			 * out): the memoized lookup of that very MAC. */
			if (r == SN_MAC_WROTE || skey == memo_dst)
				memo_dst = 0;
		}
		if (dkey == memo_dst) {
			dp = memo_dp;
		} else {
			if (!rte_is_multicast_ether_addr(&eth->dst_addr))
				dp = mac_lookup(sw, t, dkey, now);
			memo_dst = dkey;
			memo_dp = dp;
		}
		if (dp) {
			if (dp == in) {
				sn_port_ctr_add(&in->st.drop[SN_DROP_HAIRPIN], 1);
				rte_pktmbuf_free(m);
				continue;
			}
			if (!sn_port_is_up(dp)) {
				sn_port_ctr_add(&dp->st.drop[SN_DROP_PORT_DOWN], 1);
				rte_pktmbuf_free(m);
				continue;
			}
			/* A frame to a port with an inbound limit goes
			 * through the shaper too, whatever its source. */
			if (shaped || (sw->pl && sn_pipeline_in_limited(sw->pl, dp))) {
				/* submitted as one burst below */
				spkts[ns] = m;
				sdst[ns++] = dp;
				continue;
			}
			stage_add(sw, in, dp, m);
		} else if (shaped) {
			spkts[ns] = m;
			sdst[ns++] = NULL;
			continue;
		} else {
			unsigned ndst = 0;

			for (unsigned j = 0; j < t->n; j++) {
				struct sn_port *p = t->list[j];

				if (p != in && sn_port_is_up(p)) {
					stage_add(sw, in, p, m);
					ndst++;
				}
			}
			/* A flood that no port can take is a drop too: counted on
			 * the ingress port as unknown_dst (no destination). */
			if (ndst == 0)
				sn_port_ctr_add(&in->st.drop[SN_DROP_UNKNOWN_DST], 1);
		}
		pkts[keep++] = m;
	}
	sn_port_ctr_add(&in->st.rx_packets, n);
	sn_port_ctr_add(&in->st.rx_bytes, bytes);
	if (ns)
		sn_pipeline_submit_burst(sw->pl, in, spkts, sdst, ns);
	flush(sw, in);
	/* Deferred frames delivered by copy are completed and their mbufs
	 * recycled without a detach (sn_vqtx.h); frames of a port without
	 * deferred queues are plain copies. */
	if (in->vq)
		sn_vqtx_free_bulk(pkts, keep);
	else
		free_copied_bulk(pkts, keep);
}

/* With CPU fair dropping (sn_cpufair.h), a burst dequeued at worker CPU
 * time t0 (ns) first loses the frames of flows above their CPU share, and
 * its measured CPU time (dequeue included) is apportioned afterwards. */
void sn_switch_burst_in(struct sn_switch *sw, const struct sn_port_table *t, struct sn_port *in,
			struct rte_mbuf **pkts, uint16_t n, uint64_t now, uint64_t t0)
{
	if (!sw->cf) {
		switch_burst(sw, t, in, pkts, n, now);
		return;
	}
	uint16_t k = sn_cpufair_filter(sw->cf, in->slot, pkts, n, n == sw->burst, t0);

	if (k)
		switch_burst(sw, t, in, pkts, k, now);
	sn_cpufair_account(sw->cf, sn_cpufair_clock() - t0);
}

/* Poll the uplink's RX queues this worker owns (q[qi].owner: worker
 * qi mod W, sn_uplink.h) and switch what they hold. Returns the frames
 * taken. */
static __rte_always_inline unsigned poll_uplink(struct sn_switch *sw, const struct sn_port_table *t,
						struct sn_port *p, struct rte_mbuf **pkts,
						uint16_t burst, uint64_t now)
{
	unsigned got = 0;

	for (unsigned qi = 0; qi < p->nq; qi++) {
		if (p->q[qi].owner != sw->wk)
			continue;
		uint64_t t0 = sw->cf ? sn_cpufair_clock() : now, bytes = 0;
		uint16_t n = rte_eth_rx_burst(p->eth_port, (uint16_t)qi, pkts, burst);

		if (!n)
			continue;
		for (uint16_t j = 0; j < n; j++)
			bytes += pkts[j]->pkt_len;
		sn_port_count_txq(p, qi, n, bytes);
		sn_switch_burst_in(sw, t, p, pkts, n, now, t0);
		got += n;
	}
	return got;
}

/* The worker is leaving: nothing of a guest stays held by it. */
static void worker_drain(struct sn_switch *sw)
{
	struct sn_port_table *t = sn_ports_table_rcu(sw->reg);

	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (sw->bl[i].n)
			sn_switch_bl_drop_all(sw, &sw->bl[i]);
	if (sw->pl)
		sn_pipeline_drain(sw->pl);
	sn_switch_poll_sync(sw, t);
	vq_service(sw, rte_rdtsc(), true);
}

#ifdef SN_TEST_HOOKS
/* Test builds only (meson -Dtest_hooks=true): SCHEDNICD_TEST_STALL=W:A:F
 * stalls worker W once, A ms after its start, for F ms, inside its loop
 * (no loop iteration counted): the stuck worker the systemd watchdog
 * must notice (tests/daemon/test_watchdog_stall.py). *at is 0 when this
 * worker does not stall. */
static void test_stall_parse(unsigned wk, uint64_t *at, uint64_t *for_us)
{
	const char *v = getenv("SCHEDNICD_TEST_STALL");
	unsigned w, a, f;

	*at = 0;
	if (v && sscanf(v, "%u:%u:%u", &w, &a, &f) == 3 && w == wk) {
		*at = rte_rdtsc() + (uint64_t)a * rte_get_tsc_hz() / 1000u;
		*for_us = (uint64_t)f * 1000u;
	}
}

const char *sn_switch_test_hooks(void)
{
	return " test-hooks";
}
#else
const char *sn_switch_test_hooks(void)
{
	return "";
}
#endif

int sn_switch_worker(void *arg)
{
	struct sn_switch *sw = arg;
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
	const uint16_t burst = (uint16_t)sw->burst;
	unsigned idle = 0;

	rcu_register_thread();
	sn_vqtx_worker_enter(sw->wk);
	/* MAIN created the mbuf quota before the launch, which orders it. */
	sw->mbq = sn_ports_mbuf_quota(sw->reg);
	sw->next_scan = rte_rdtsc() + sw->scan_tsc;
#ifdef SN_TEST_HOOKS
	uint64_t stall_at, stall_us = 0;

	test_stall_parse(sw->wk, &stall_at, &stall_us);
#endif
	/* Acquire pairs with the release store in sn_switch_stop(). */
	while (!__atomic_load_n(&sw->stop, __ATOMIC_ACQUIRE)) {
		struct sn_port_table *t = sn_ports_table_rcu(sw->reg);
		uint64_t now = rte_rdtsc();
		unsigned got = 0;

#ifdef SN_TEST_HOOKS
		if (stall_at && now >= stall_at) {
			stall_at = 0;
			rte_delay_us_block((unsigned)stall_us);
		}
#endif

		sn_vqtx_set_now(sw->wk, now);       /* the hold-time clock: one rdtsc per iteration */
		if (sw->pl)
			sn_pipeline_run(sw->pl, t);   /* due frames, arbiter */
		sn_switch_poll_sync(sw, t);
		got += sn_switch_poll_vhost(sw, t, pkts, now, idle > IDLE_SPINS);
		for (unsigned i = 0; i < sw->ps.neth; i++) {
			struct sn_port *p = sw->ps.eth[i];

			if (!sn_port_is_up(p))
				continue;
			got += poll_uplink(sw, t, p, pkts, burst, now);
		}
		if (sw->pl)
			sn_pipeline_flush(sw->pl);    /* before t goes stale */
		sn_switch_bl_service(sw, t, now);
		/* every queue while a stop is open: a quiet one's stop never
		 * waits for the sweep */
		vq_service(sw, now, sn_vqtx_worker_stops_open(sw->wk));
		/* Ends the read-side use of t and of every port's vid: pairs
		 * with synchronize_rcu() in port/ (publish, destroy). */
		rcu_quiescent_state();
		if (sw->wk != 0) {
			/* aging: worker 0 only */
		} else if (sw->scan_pos < sw->mac_n) {
			sw->scan_pos = sn_mac_age(sw->mt, sw->scan_pos, now);
		} else if ((int64_t)(now - sw->next_scan) > 0) {
			sw->scan_pos = 0;     /* a full scan once a second */
			sw->next_scan = now + sw->scan_tsc;
		}
		/* Idle back-off: after IDLE_SPINS empty polls, nap between polls
		 * so an idle daemon leaves its CPU to others (2-core hosts); any
		 * packet brings back pure busy polling. */
		if (got)
			idle = 0;
		else if (sw->idle_sleep_us && ++idle > IDLE_SPINS) {
			uint64_t t0 = rte_rdtsc();

			rte_delay_us_sleep(sw->idle_sleep_us);
			if (sw->pl)
				sn_pipeline_count_sleep(sw->pl, (rte_rdtsc() - t0) * 1000000000ull /
							rte_get_tsc_hz());
		}
	}
	worker_drain(sw);
	sn_vqtx_worker_exit(sw->wk);
	rcu_unregister_thread();
	return 0;
}

/* The per-slot tables, sized from sn_config_port_slots: 0 or -ENOMEM
 * (port_tables_free() releases what was allocated). */
static int port_tables(struct sn_switch *sw)
{
	const unsigned n = sn_config_port_slots;

	sw->bl = rte_zmalloc("sn_backlog", sizeof(*sw->bl) * n, RTE_CACHE_LINE_SIZE);
	sw->bl_src = rte_zmalloc("sn_bl_src", sizeof(*sw->bl_src) * n, RTE_CACHE_LINE_SIZE);
	sw->stage = rte_zmalloc("sn_stage", sizeof(*sw->stage) * n, RTE_CACHE_LINE_SIZE);
	sw->touched = rte_zmalloc("sn_touched", sizeof(*sw->touched) * n, RTE_CACHE_LINE_SIZE);
	sw->bl_busy = rte_zmalloc("sn_bl_busy", sizeof(*sw->bl_busy) * ((n + 63) / 64),
				  RTE_CACHE_LINE_SIZE);
	return sw->bl && sw->bl_src && sw->stage && sw->touched && sw->bl_busy ? 0 : -ENOMEM;
}

static void port_tables_free(struct sn_switch *sw)
{
	rte_free(sw->bl);
	rte_free(sw->bl_src);
	rte_free(sw->stage);
	rte_free(sw->touched);
	rte_free(sw->bl_busy);
}

struct sn_switch *sn_switch_create(const struct sn_switch_config *cfg,
				   struct sn_ports *reg, struct rte_mempool *mp)
{
	struct sn_switch *sw;

	if (cfg->burst == 0 || cfg->burst > SN_CONFIG_BURST_MAX ||
	    !sn_mac_mem_size(cfg->mac_table_size)) {
		errno = EINVAL;
		return NULL;
	}
	sw = rte_zmalloc("sn_switch", sizeof(*sw), RTE_CACHE_LINE_SIZE);
	if (!sw) {
		errno = ENOMEM;
		return NULL;
	}
	if (cfg->share) {
		sw->mt = cfg->share->mt;
		sw->mq = cfg->share->mq;
	} else {
		sw->mt = sn_mac_create(cfg->mac_table_size,
				       (uint64_t)cfg->mac_aging_s * rte_get_tsc_hz());
		sw->mq = sn_quota_create(sn_config_port_slots, sn_mac_quota_units(cfg->mac_table_size));
		sw->mt_owner = true;
		if (sw->mt && sw->mq) {
			sn_mac_set_quota(sw->mt, sw->mq);
			sn_mac_set_move(sw->mt, cfg->mac_move);
		}
	}
	if (!sw->mt || !sw->mq || port_tables(sw) || sn_switch_poll_init(sw)) {
		if (sw->mt_owner) {
			sn_mac_free(sw->mt);
			sn_quota_free(sw->mq);
		}
		sn_switch_poll_fini(sw);
		port_tables_free(sw);
		rte_free(sw);
		errno = ENOMEM;
		return NULL;
	}
	sw->reg = reg;
	sw->mp = mp;
	sw->wk = cfg->worker;
	sw->txq = (uint16_t)cfg->worker;
	sw->gso.direct_pool = mp;    /* segment headers */
	sw->gso.indirect_pool = mp;  /* segment payloads: attached to the frame */
	sw->gso.gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO;
	sw->gso.flag = 0;            /* incrementing IP ids, like a NIC's TSO */
	sw->diag_malformed = SN_SWITCH_DIAG_LINES;
	sw->diag_txfail = SN_SWITCH_DIAG_LINES;
	sw->pl = cfg->pipeline;
	if (sw->pl)
		sn_pipeline_set_gso(sw->pl, pipeline_gso, sw);
	sw->burst = cfg->burst;
	sw->idle_sleep_us = cfg->idle_sleep_us;
	sw->cf = cfg->cpufair;
	sw->mac_n = sn_mac_buckets(sw->mt);
	sw->scan_tsc = rte_get_tsc_hz();
	sw->scan_pos = sw->mac_n;
	return sw;
}

void sn_switch_stop(struct sn_switch *sw)
{
	__atomic_store_n(&sw->stop, 1, __ATOMIC_RELEASE);
}

void sn_switch_destroy(struct sn_switch *sw)
{
	if (!sw)
		return;
	if (sw->mt_owner) {
		sn_mac_free(sw->mt);
		sn_quota_free(sw->mq);
	}
	sn_switch_poll_fini(sw);
	port_tables_free(sw);
	rte_free(sw);
}
