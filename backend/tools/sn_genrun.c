/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_genrun.c — the traffic loops of sn-gen: bench, count, echo.
 *
 * One loop, one lcore: every iteration transmits at most one burst per
 * sending port and then drains every port (generator and sink are one
 * thread: on a 2-core host a second poller would compete with the switch
 * under test). Nothing blocks: a full virtio
 * TX ring just leaves frames pending for the next iteration, so a slow
 * switch slows the sender down instead of making it drop (the count mode
 * sends exactly N frames per flow, whatever the rate).
 *
 * Count mode exactness: frames are built in sequence order and kept in
 * order until the driver accepts them, so the sink's per-(flow, port)
 * sequence check reports reordering by the switch, never by us. Phases run
 * one after another: timed (--phase-gap) or, with --sync DIR, driven by the
 * caller through files (we create DIR/ready, wait for DIR/go-learn and
 * DIR/go-<k>, create DIR/sent-learn, DIR/sent-<k>, DIR/done, then drain
 * until SIGINT/SIGTERM), which is what makes the tests rate-independent.
 */
#include "sn_gen.h"
#include "sn_genlat.h"
#include "sn_genpkt.h"
#include "sn_common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_memcpy.h>

static uint16_t flow_size(const struct sn_gen *g, const struct sn_gen_flow *f)
{
	return f->size ? f->size : g->size;
}

static uint64_t secs_to_tsc(const struct sn_gen *g, double s)
{
	return s <= 0 ? 0 : (uint64_t)(s * (double)g->hz);
}

static void rx_account(struct sn_gen *g, unsigned int pi, struct rte_mbuf *m)
{
	struct sn_gen_port *p = &g->ports[pi];
	uint16_t flow;
	uint64_t seq;

	p->rx_packets++;
	p->rx_bytes += m->pkt_len;
	switch (sn_genpkt_classify(m, g->run_id, 1, &flow, &seq)) {
	case SN_GENPKT_FOREIGN:
		p->rx_foreign++;
		break;
	case SN_GENPKT_LEARN:
		p->rx_learn++;
		break;
	case SN_GENPKT_BAD:
		p->rx_bad++;
		if (flow < g->nflows)
			g->flows[flow].rx_bad++;
		break;
	case SN_GENPKT_DATA:
		if (flow >= g->nflows) {
			p->rx_bad++;
			break;
		}
		p->rx_data++;
		struct sn_gen_flow *f = &g->flows[flow];
		f->rx++;
		f->rx_by_port[pi]++;
		if (f->lat_tx)                                 /* lat=1 */
			sn_genlat_received(f, seq, rte_rdtsc(), g->lat_gap);
		if (seq + 1 <= f->next_seq[pi])
			f->rx_ooo++;
		else
			f->next_seq[pi] = seq + 1;
		break;
	}
}

/* Reading a virtio-user port's link status is what makes the driver notice
 * that its vhost-user peer went away and, in server mode, accept the peer's
 * reconnection (virtio_user_dev_update_link_state() in DPDK 22.11); no
 * interrupt thread does it for us, so poll it every 100 ms. Returns the
 * number of ports up. */
static unsigned int poll_links(struct sn_gen *g)
{
	unsigned int up = 0;

	for (unsigned int i = 0; i < g->nports; i++) {
		struct sn_gen_port *p = &g->ports[i];
		struct rte_eth_link link;
		int now_up = rte_eth_link_get_nowait(p->id, &link) == 0 &&
			     link.link_status == RTE_ETH_LINK_UP;
		if (p->link_up && !now_up) {
			p->link_downs++;
			fprintf(stderr, "sn-gen: port %u (%s) link down\n", i, p->path);
		} else if (!p->link_up && now_up && p->link_downs) {
			fprintf(stderr, "sn-gen: port %u (%s) link up again\n", i, p->path);
		}
		p->link_up = now_up;
		up += (unsigned int)now_up;
	}
	g->next_link_check = rte_rdtsc() + g->hz / 10;
	return up;
}

#define COUNT_RX_ROUNDS 8

/* Sampling sink (--sample-ms): one JSON line per period with the time
 * (CLOCK_MONOTONIC, the daemon's clock_ns base) the counters were read at, so that a consumer computes rates from the
 * actual sample spacing: on a loaded machine this loop can be descheduled
 * across a boundary, and the lines then come late, never wrong. Counters
 * are cumulative (bytes as received, without FCS; flow bytes count data
 * frames of that flow at any port). One fflush per line. */
static void sample_emit(struct sn_gen *g, const struct timespec *ts, uint64_t now)
{
	FILE *out = g->sample_out;

	fprintf(out, "{\"t_ns\": %" PRIu64 ", \"rx_bytes\": [",
		(uint64_t)ts->tv_sec * UINT64_C(1000000000) + (uint64_t)ts->tv_nsec);
	for (unsigned int i = 0; i < g->nports; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "", g->ports[i].rx_bytes);
	fputs("], \"flow_rx_bytes\": [", out);
	for (unsigned int i = 0; i < g->nflows; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "",
			g->flows[i].rx * flow_size(g, &g->flows[i]));
	fputs("]}\n", out);
	fflush(out);
	uint64_t period = g->sample_ms * g->hz / 1000;
	g->next_sample += period;
	if (g->next_sample <= now)          /* descheduled: skip, do not burst */
		g->next_sample = now + period;
}

/* Drain every port once. In bench mode frames are only counted. Returns
 * the number of frames received. */
static unsigned int poll_rx_once(struct sn_gen *g)
{
	unsigned int got = 0;

	struct rte_mbuf *bufs[SN_GEN_BURST_MAX];
	struct rte_mbuf *replies[SN_GEN_BURST_MAX];

	if (g->mode != SN_GEN_BENCH && rte_rdtsc() >= g->next_link_check)
		poll_links(g);

	/* Count mode drains up to COUNT_RX_ROUNDS full bursts per queue per
	 * call: several flows (each sent a burst per loop) may converge on one
	 * RX queue, and a sink that takes less than it is sent per loop would
	 * make the switch drop at that ring. */
	unsigned int rounds = 0;

	for (unsigned int pq = 0; pq < g->nports * SN_GEN_MAX_QUEUES; pq++) {
		unsigned int pi = pq / SN_GEN_MAX_QUEUES, q = pq % SN_GEN_MAX_QUEUES;
		struct sn_gen_port *p = &g->ports[pi];
		uint16_t n, nrep = 0;

		if (q >= p->nq)
			continue;
		n = rte_eth_rx_burst(p->id, (uint16_t)q, bufs, SN_GEN_BURST_MAX);
		if (n == SN_GEN_BURST_MAX && g->mode == SN_GEN_COUNT &&
		    ++rounds < COUNT_RX_ROUNDS)
			pq--;           /* this queue again after this burst */
		else
			rounds = 0;
		if (n == 0)
			continue;
		p->rx_q[q] += n;
		got += n;
		if (g->mode == SN_GEN_BENCH) {
			p->rx_packets += n;
			for (uint16_t i = 0; i < n; i++)
				p->rx_bytes += bufs[i]->pkt_len;
			rte_pktmbuf_free_bulk(bufs, n);
			continue;
		}
		for (uint16_t i = 0; i < n; i++) {
			if (g->mode == SN_GEN_ECHO && (int)pi == g->echo_port) {
				p->rx_packets++;
				p->rx_bytes += bufs[i]->pkt_len;
				int r = sn_genpkt_echo(bufs[i], &p->mac, g->echo_ip);
				if (r != 0) {
					if (r == 1)
						p->echo_arp++;
					else
						p->echo_icmp++;
					replies[nrep++] = bufs[i];
					continue;
				}
				p->rx_foreign++;
			} else {
				rx_account(g, pi, bufs[i]);
			}
			rte_pktmbuf_free(bufs[i]);
		}
		if (nrep > 0) {
			uint32_t bytes = 0;
			for (uint16_t i = 0; i < nrep; i++)
				bytes += replies[i]->pkt_len;
			uint16_t s = rte_eth_tx_burst(p->id, (uint16_t)q, replies, nrep);
			for (uint16_t i = s; i < nrep; i++)
				bytes -= replies[i]->pkt_len;
			p->tx_packets += s;
			p->tx_bytes += bytes;
			if (s < nrep) {
				p->echo_tx_fail += nrep - s;
				rte_pktmbuf_free_bulk(replies + s, nrep - s);
			}
		}
	}
	return got;
}

/* Drain every port once; when a sample is due, first drain what queued up
 * in the rings (e.g. while we were descheduled: it arrived before now). */
static void poll_rx(struct sn_gen *g)
{
	uint64_t now = rte_rdtsc();

	/* lat=1: how long the sink did not look (descheduled, or busy
	 * sending): a frame read now arrived at some point in that gap */
	g->lat_gap = g->lat_poll ? now - g->lat_poll : 0;
	g->lat_poll = now;
	poll_rx_once(g);
	if (g->sample_out != NULL && rte_rdtsc() >= g->next_sample) {
		struct timespec ts;

		/* The sample's time is taken BEFORE the pass that finds every
		 * ring empty: all frames counted arrived before it, and every
		 * frame that arrived before it was counted (that pass found
		 * none left). So a sink descheduled anywhere around the
		 * boundary (while draining, or between the last pass and
		 * writing the line) moves the sample's time, never its
		 * byte count relative to that time. */
		for (int pass = 0; pass < 256; pass++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if (poll_rx_once(g) == 0)
				break;
		}
		sample_emit(g, &ts, rte_rdtsc());
	}
}

/* Hand pending frames of port p to the driver, keeping the rest in order. */
static void flush_port(struct sn_gen *g, struct sn_gen_port *p)
{
	if (p->npend == 0)
		return;
	/* Multiqueue: flow i on TX queue i mod nq (learn frames on 0). */
	uint16_t q = p->pend_flow < 0 ? 0 : (uint16_t)((unsigned int)p->pend_flow % p->nq);
	uint16_t s = rte_eth_tx_burst(p->id, q, p->pend, p->npend);
	if (s == 0)
		return;
	if (p->pend_flow >= 0 && g->flows[p->pend_flow].lat_tx)   /* lat=1 */
		sn_genlat_sent(&g->flows[p->pend_flow], g->flows[p->pend_flow].sent, s,
			       rte_rdtsc());
	p->tx_q[q] += s;
	p->tx_packets += s;
	p->tx_bytes += (uint64_t)s * (p->pend_flow < 0 ? g->size
					: flow_size(g, &g->flows[p->pend_flow]));
	if (p->pend_flow < 0)
		p->tx_learn += s;
	else
		g->flows[p->pend_flow].sent += s;
	p->npend -= s;
	memmove(p->pend, p->pend + s, p->npend * sizeof(p->pend[0]));
}

/* Final drain after a stop request: poll until one pass finds nothing, so
 * that frames the switch delivered before we were asked to stop are
 * counted even if we were descheduled in between. */
static void drain_idle(struct sn_gen *g)
{
	for (int passes = 0; passes < 1000; passes++) {
		uint64_t before = 0, after = 0;
		for (unsigned int i = 0; i < g->nports; i++)
			before += g->ports[i].rx_packets;
		poll_rx(g);
		for (unsigned int i = 0; i < g->nports; i++)
			after += g->ports[i].rx_packets;
		if (after == before)
			return;
	}
}

static void drain_for(struct sn_gen *g, double s)
{
	uint64_t end = rte_rdtsc() + secs_to_tsc(g, s);

	while (!sn_gen_stop && rte_rdtsc() < end)
		poll_rx(g);
}

static void sync_mark(const struct sn_gen *g, const char *name)
{
	char path[PATH_MAX];

	if (g->sync_dir == NULL)
		return;
	if (snprintf(path, sizeof(path), "%s/%s", g->sync_dir, name) >= (int)sizeof(path))
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	else
		fprintf(stderr, "sn-gen: cannot create %s: %s\n", path, strerror(errno));
}

/* Drain until the caller creates sync_dir/name (or, without --sync, for
 * `fallback_s` seconds). Returns 0, or -EINTR when asked to stop. */
static int sync_wait(struct sn_gen *g, const char *name, double fallback_s)
{
	char path[PATH_MAX];

	if (g->sync_dir == NULL) {
		drain_for(g, fallback_s);
		return sn_gen_stop ? -EINTR : 0;
	}
	if (snprintf(path, sizeof(path), "%s/%s", g->sync_dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	uint64_t period = g->hz / 1000, next = 0;
	while (!sn_gen_stop) {
		uint64_t now = rte_rdtsc();
		if (now >= next) {
			if (access(path, F_OK) == 0)
				return 0;
			next = now + period;
		}
		poll_rx(g);
	}
	return -EINTR;
}

static int wait_links(struct sn_gen *g)
{
	uint64_t end = rte_rdtsc() + secs_to_tsc(g, g->connect_s);

	for (;;) {
		unsigned int up = poll_links(g);
		if (up == g->nports)
			return 0;
		if (sn_gen_stop)
			return -EINTR;
		if (rte_rdtsc() >= end) {
			fprintf(stderr, "sn-gen: only %u of %u ports up after %.1f s\n",
				up, g->nports, g->connect_s);
			return -ETIMEDOUT;
		}
		poll_rx(g);
		rte_delay_us_sleep(1000);
	}
}

/* One broadcast from every port's own MAC, so the switch learns them. */
static void send_learn(struct sn_gen *g)
{
	struct rte_ether_addr bcast;
	memset(&bcast, 0xff, sizeof(bcast));

	for (unsigned int pi = 0; pi < g->nports; pi++) {
		struct sn_gen_port *p = &g->ports[pi];
		struct rte_mbuf *m = rte_pktmbuf_alloc(g->mp);
		if (m == NULL) {
			g->alloc_fail++;
			continue;
		}
		if (sn_genpkt_build(m, &bcast, &p->mac, g->run_id, SN_GENPKT_FLOW_LEARN,
				    pi, g->size) != 0)
			sn_die("frame size %u does not fit an mbuf", g->size);
		p->pend[0] = m;
		p->npend = 1;
		p->pend_flow = -1;
	}
	for (;;) {
		unsigned int left = 0;
		for (unsigned int pi = 0; pi < g->nports; pi++) {
			flush_port(g, &g->ports[pi]);
			left += g->ports[pi].npend;
		}
		if (left == 0 || sn_gen_stop)
			return;
		poll_rx(g);
	}
}

/* Build the next burst of flow f into its source port's pending array. */
static void fill_flow(struct sn_gen *g, unsigned int fi, uint64_t budget)
{
	struct sn_gen_flow *f = &g->flows[fi];
	struct sn_gen_port *p = &g->ports[f->src];
	struct rte_mbuf *m[SN_GEN_BURST_MAX];
	uint64_t n = RTE_MIN(RTE_MIN((uint64_t)g->burst, f->count - f->built), budget);

	if (n == 0 || p->npend != 0)
		return;
	if (rte_pktmbuf_alloc_bulk(g->mp, m, (unsigned int)n) != 0) {
		g->alloc_fail++;
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (sn_genpkt_build(m[i], &f->dst, f->has_smac ? &f->smac : &p->mac,
				    g->run_id, (uint16_t)fi, f->built + i, flow_size(g, f)) != 0)
			sn_die("frame size %u does not fit an mbuf", flow_size(g, f));
		if (f->smacs > 1) {
			struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m[i], struct rte_ether_hdr *);
			uint8_t *b = eth->src_addr.addr_bytes;
			uint32_t low = ((uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5]) +
				       (uint32_t)((f->built + i) % f->smacs);

			b[3] = (uint8_t)(low >> 16);
			b[4] = (uint8_t)(low >> 8);
			b[5] = (uint8_t)low;
		}
		if (f->udp) {
			uint16_t sport = f->udp_sports > 1 ?
				(uint16_t)(f->udp_sport + (f->built + i) % f->udp_sports) : f->udp_sport;

			if (f->udp == 6)
				sn_genpkt_to_udp6(m[i], f->ip6_src, f->ip6_dst, sport, f->udp_dport);
			else
				sn_genpkt_to_udp(m[i], f->ip_src, f->ip_dst, sport, f->udp_dport);
		}
		else if (f->arp)
			sn_genpkt_to_arp(m[i], f->ip_src, f->ip_dst);
		else if (f->nd)
			sn_genpkt_to_nd(m[i], f->nd, f->nd_src, f->nd_tgt, &f->nd_lla);
		p->pend[i] = m[i];
	}
	p->npend = (uint16_t)n;
	p->pend_flow = (int)fi;
	f->built += n;
}

static int run_phase(struct sn_gen *g, unsigned int phase)
{
	uint64_t t0 = rte_rdtsc(), built = 0, next_fill = 0;
	uint64_t gap = g->gap_us * g->hz / 1000000;
	unsigned int rr = 0;

	for (;;) {
		unsigned int busy = 0;
		uint64_t budget = UINT64_MAX, now = rte_rdtsc(), built_before = built;

		if (sn_gen_stop)
			return -EINTR;
		if (now < next_fill)
			budget = 0;
		else if (g->rate_pps != 0) {
			uint64_t allowed = (uint64_t)((double)(now - t0) *
						      (double)g->rate_pps / (double)g->hz) + 1;
			budget = allowed > built ? allowed - built : 0;
		}
		/* Rotate the first flow served: with --rate the budget of one
		 * iteration is small, and a fixed order would give it all to the
		 * first flows (flows of one port must get equal shares).
		 * After a stall the budget is large and each flow sends one full
		 * burst per iteration until it has caught up (iterations take
		 * microseconds: far above 1.2 Gbit/s of 1500 B frames). */
		rr = (rr + 1) % g->nflows;
		for (unsigned int k = 0; k < g->nflows; k++) {
			unsigned int fi = (rr + k) % g->nflows;
			struct sn_gen_flow *f = &g->flows[fi];
			if (f->phase != phase)
				continue;
			uint64_t before = f->built;
			fill_flow(g, fi, budget);
			budget -= f->built - before;
			built += f->built - before;
			flush_port(g, &g->ports[f->src]);
			busy += f->built < f->count || g->ports[f->src].npend != 0;
		}
		if (busy == 0)
			return 0;
		if (gap != 0 && built != built_before)
			next_fill = now + gap;
		poll_rx(g);
	}
}

static int run_count(struct sn_gen *g)
{
	char name[32];
	unsigned int last_phase = 0;
	int rc;

	for (unsigned int fi = 0; fi < g->nflows; fi++)
		last_phase = RTE_MAX(last_phase, g->flows[fi].phase);
	if (g->learn) {
		if ((rc = sync_wait(g, "go-learn", 0)) != 0)
			return rc;
		send_learn(g);
		sync_mark(g, "sent-learn");
	}
	for (unsigned int ph = 0; ph <= last_phase; ph++) {
		snprintf(name, sizeof(name), "go-%u", ph);
		if ((rc = sync_wait(g, name, (ph > 0 || g->learn) ? g->phase_gap_s : 0)) != 0)
			return rc;
		if ((rc = run_phase(g, ph)) != 0)
			return rc;
		snprintf(name, sizeof(name), "sent-%u", ph);
		sync_mark(g, name);
	}
	g->completed = 1;
	sync_mark(g, "done");
	if (g->sync_dir != NULL) {
		while (!sn_gen_stop)
			poll_rx(g);
		drain_idle(g);
	} else {
		drain_for(g, g->grace_s);
	}
	return 0;
}

static int run_bench(struct sn_gen *g)
{
	const struct sn_gen_flow *f = &g->flows[0];
	struct sn_gen_port *tx = &g->ports[f->src];
	struct sn_gen_port *rx = &g->ports[f->dst_port >= 0 ? f->dst_port : f->src];
	struct rte_mbuf *tmpl_m = rte_pktmbuf_alloc(g->mp);
	struct rte_mbuf *m[SN_GEN_BURST_MAX];
	uint8_t tmpl[SN_GENPKT_MAX_SIZE];

	if (tmpl_m == NULL)
		return -ENOMEM;
	if (sn_genpkt_build(tmpl_m, &f->dst, f->has_smac ? &f->smac : &tx->mac,
			    g->run_id, 0, 0, g->size) != 0) {
		rte_pktmbuf_free(tmpl_m);
		return -EINVAL;
	}
	memcpy(tmpl, rte_pktmbuf_mtod(tmpl_m, void *), g->size);
	rte_pktmbuf_free(tmpl_m);

	if (g->learn) {
		send_learn(g);
		drain_for(g, g->phase_gap_s);
	}
	/* --marker: the loop below writes the opt-in marker once per
	 * frame as it builds it (where a patched guest driver writes it: in
	 * the header it builds anyway), instead of the TX callback that
	 * re-marks every frame the ring refused at each retry and costs a
	 * callback dispatch per tx_burst (the only TX of this loop is queue
	 * 0 of the tx port, with --queues 1; the PMD leaves num_buffers
	 * alone, sn_gen.c). */
	const int mark = g->marker && tx->marker_cb[0] &&
			 rte_eth_remove_tx_callback(tx->id, 0, tx->marker_cb[0]) == 0;
	/* --hdr-write: num_buffers is stored in every frame, 0 without the
	 * marker. A guest kernel writes its whole virtio-net header for every
	 * frame; the virtio PMD writes a header field only when its value
	 * changes (ASSIGN_UNLESS_EQUAL), so without this a frame's header line
	 * stays clean in the switch's cache and only --marker runs dirty it
	 * (one more cross-core line per frame, backend/tools/README.md). */
	const int store = mark || g->hdr_write;
	/* (--marker whose callback could not be removed: the frames get 0
	 * here and the marker from the callback in tx_burst.) */
	const uint16_t marker = mark ? rte_cpu_to_le_16(SN_GEN_MARKER_MAGIC) : 0;

	static_assert(RTE_PKTMBUF_HEADROOM >= SN_GEN_VNET_HDR_LEN, "marker in the headroom");

	if (mark)
		tx->marker_cb[0] = NULL;
	uint64_t start = rte_rdtsc();
	uint64_t t_meas = start + secs_to_tsc(g, g->warmup_s);
	uint64_t t_end = t_meas + secs_to_tsc(g, g->duration_s);
	uint64_t tx0 = 0, rx0 = 0, meas_start = 0;
	uint64_t loops = 0, tx_calls = 0, tx_zero = 0, rx_empty = 0, loops_all = 0;
	int measuring = 0;
	uint16_t nm = 0;                /* built frames in m[0..nm) not sent yet */

	while (!sn_gen_stop) {
		uint64_t now = rte_rdtsc();
		if (!measuring && now >= t_meas) {
			measuring = 1;
			meas_start = now;
			tx0 = tx->tx_packets;
			rx0 = rx->rx_packets;
		}
		if (now >= t_end) {
			g->bench_tx = tx->tx_packets - tx0;
			g->bench_rx = rx->rx_packets - rx0;
			g->bench_window_s = (double)(now - meas_start) / (double)g->hz;
			g->bench_loops = loops;
			g->bench_tx_calls = tx_calls;
			g->bench_tx_zero = tx_zero;
			g->bench_rx_empty = rx_empty;
			g->completed = 1;
			break;
		}
		/* Frames the ring did not take stay ready for the next
		 * round: a full TX ring (a switch holding descriptors, or
		 * slower than us) costs one tx_burst call, not an allocation,
		 * a copy and a free of every frame it refused. */
		if (nm < g->burst) {
			uint16_t k = (uint16_t)(g->burst - nm);

			if (rte_pktmbuf_alloc_bulk(g->mp, m + nm, k) == 0) {
				for (uint16_t i = nm; i < g->burst; i++) {
					rte_memcpy(rte_pktmbuf_mtod(m[i], void *), tmpl, g->size);
					if (store)
						memcpy(rte_pktmbuf_mtod_offset(m[i], uint8_t *, -2),
						       &marker, sizeof(marker));
					m[i]->data_len = g->size;
					m[i]->pkt_len = g->size;
				}
				if (store)
					g->bench_hdr_stores += k;
				nm = g->burst;
			} else {
				g->alloc_fail++;
			}
		}
		if (nm > 0) {
			/* Multiqueue (--queues N): the TX queues in turn, one
			 * burst each, so the switch sees N busy RX queues. */
			const uint16_t q = tx->nq > 1 ? (uint16_t)(loops_all++ % tx->nq) : 0;
			uint16_t s = rte_eth_tx_burst(tx->id, q, m, nm);

			tx_calls += measuring;
			tx_zero += measuring && s == 0;
			tx->tx_packets += s;
			tx->tx_bytes += (uint64_t)s * g->size;
			if (s > 0 && s < nm)
				memmove(m, m + s, (size_t)(nm - s) * sizeof(m[0]));
			nm = (uint16_t)(nm - s);
		}
		uint64_t rx_before = rx->rx_packets;

		poll_rx(g);
		loops += measuring;
		rx_empty += measuring && rx->rx_packets == rx_before;
	}
	if (nm > 0)
		rte_pktmbuf_free_bulk(m, nm);
	return 0;
}

static int run_echo(struct sn_gen *g)
{
	uint64_t end = g->duration_s > 0 ? rte_rdtsc() + secs_to_tsc(g, g->duration_s) : UINT64_MAX;

	sync_mark(g, "done");
	while (!sn_gen_stop && rte_rdtsc() < end)
		poll_rx(g);
	drain_idle(g);
	g->completed = 1;
	return 0;
}

int sn_gen_run(struct sn_gen *g)
{
	uint64_t t0 = rte_rdtsc();
	int rc;

	if (g->sample_ms != 0) {
		g->sample_out = g->sample_path ? fopen(g->sample_path, "we") : stderr;
		if (g->sample_out == NULL)
			return -errno;
		g->next_sample = t0;
	}
	rc = wait_links(g);

	if (rc == 0) {
		drain_for(g, g->settle_s);
		sync_mark(g, "ready");
		switch (g->mode) {
		case SN_GEN_BENCH: rc = run_bench(g); break;
		case SN_GEN_COUNT: rc = run_count(g); break;
		case SN_GEN_ECHO:  rc = run_echo(g); break;
		}
		if (rc == -EINTR)
			rc = 0;
	}
	g->elapsed_s = (double)(rte_rdtsc() - t0) / (double)g->hz;
	if (g->sample_out != NULL && g->sample_out != stderr)
		fclose(g->sample_out);
	g->sample_out = NULL;
	return rc;
}
