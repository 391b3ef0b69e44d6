/* sn_switch.c — transparent L2 learning switch (IEEE 802.1D style) on one
 * worker lcore.
 *
 * Design. Per ingress burst: (1) learn each source MAC -> ingress port;
 * (2) pick the destination: a learned, unexpired unicast MAC whose port
 * still exists (slot + generation match) gives one port, anything else is
 * flooded to every other up port; (3) stage the packet on each destination;
 * (4) flush each destination with one burst call; (5) free the input
 * mbufs. vhost-user enqueue copies the packet into the guest, so one mbuf
 * serves every vhost destination of a flood; the uplink's tx_burst takes
 * ownership, so the uplink gets its own reference (refcnt + 1). Every mbuf
 * is freed on every path: what a destination did not take is freed here and
 * counted as ring_full on that destination.
 *
 * MAC table: 4-way set-associative hash (mac_table_size entries), owned by
 * the worker only. Aging is lazy on lookup (an expired entry is a miss) and
 * a scan once a second, AGE_SLICE entries per loop iteration, frees expired
 * entries. (The shared spec puts aging on the main lcore; doing it on the
 * worker keeps the table single-writer, with no atomics or locks.)
 *
 * This is the issue-2 datapath (rte_vhost_dequeue/enqueue_burst); the
 * scheduled datapath of DESIGN.md replaces the VM TX side later.
 */
#define _LGPL_SOURCE
#include "sn_switch.h"

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

#include "sn_config.h"
#include "sn_pipeline.h"
#include "sn_port.h"

#define MAC_WAYS   4
#define MAC_VALID  (1ULL << 63)
#define VIRTIO_RXQ 0   /* VM RX: we enqueue */
#define VIRTIO_TXQ 1   /* VM TX: we dequeue */
#define AGE_SLICE  256 /* MAC entries aged per loop iteration */
#define IDLE_SPINS 20000 /* empty polls before napping */
#define IDLE_NAP_US 50
#define SN_MIN_U(a, b) ((a) < (b) ? (a) : (b))

struct mac_entry {
	uint64_t key;    /* MAC | MAC_VALID, 0 = empty */
	uint64_t seen;   /* TSC of the last frame from it */
	uint32_t gen;    /* port generation */
	uint16_t slot;   /* port slot */
	uint16_t pad;
};

struct stage {
	struct sn_port *port;
	uint16_t n;
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
};

struct sn_switch {
	/* Read-mostly, set at create. */
	struct sn_ports *reg;
	struct rte_mempool *mp;
	struct sn_pipeline *pl;      /* NULL: no policy enforcement */
	unsigned burst;
	unsigned bucket_shift;       /* 64 - log2(buckets) */
	uint64_t aging_tsc;
	uint64_t scan_tsc;
	struct mac_entry *mac;       /* buckets * MAC_WAYS */
	unsigned mac_n;

	/* Main -> worker. */
	uint32_t stop __rte_cache_aligned;

	/* Worker only. */
	uint64_t next_scan __rte_cache_aligned;
	unsigned scan_pos;           /* == mac_n: no scan in progress */
	unsigned n_touched;
	uint16_t touched[SN_PORT_MAX];
	struct sn_mac_stats ms;      /* sole writer: worker */
	struct stage stage[SN_PORT_MAX];
};

/* Sole-writer counter update; readers use relaxed atomic loads. */
static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
}

static inline uint64_t mac_key(const struct rte_ether_addr *a)
{
	uint64_t k = 0;

	memcpy(&k, a->addr_bytes, RTE_ETHER_ADDR_LEN);
	return k | MAC_VALID;
}

static inline struct mac_entry *mac_bucket(struct sn_switch *sw, uint64_t key)
{
	return &sw->mac[((key * 0x9E3779B97F4A7C15ULL) >> sw->bucket_shift) * MAC_WAYS];
}

static inline bool expired(const struct sn_switch *sw, const struct mac_entry *e, uint64_t now)
{
	return now - e->seen > sw->aging_tsc;
}

static void mac_learn(struct sn_switch *sw, uint64_t key, const struct sn_port *in, uint64_t now)
{
	struct mac_entry *b = mac_bucket(sw, key), *free_e = NULL;

	for (unsigned w = 0; w < MAC_WAYS; w++) {
		struct mac_entry *e = &b[w];

		if (e->key == key) {
			if (e->slot != in->slot || e->gen != in->gen) {
				e->slot = in->slot;
				e->gen = in->gen;
				ctr_add(&sw->ms.moves, 1);
			}
			e->seen = now;
			return;
		}
		if (!free_e && (!e->key || expired(sw, e, now)))
			free_e = &b[w];
	}
	if (!free_e) {
		ctr_add(&sw->ms.full, 1);
		return;
	}
	if (free_e->key) {
		ctr_add(&sw->ms.aged, 1);
		ctr_add(&sw->ms.entries, -1ULL);
	}
	free_e->key = key;
	free_e->seen = now;
	free_e->slot = in->slot;
	free_e->gen = in->gen;
	ctr_add(&sw->ms.entries, 1);
	ctr_add(&sw->ms.learned, 1);
}

/* The destination port of a unicast MAC, or NULL (unknown: flood). */
static struct sn_port *mac_lookup(struct sn_switch *sw, const struct sn_port_table *t,
				  uint64_t key, uint64_t now)
{
	struct mac_entry *b = mac_bucket(sw, key);

	for (unsigned w = 0; w < MAC_WAYS; w++) {
		struct mac_entry *e = &b[w];

		if (e->key == key) {
			struct sn_port *p = t->by_slot[e->slot];

			if (expired(sw, e, now) || !p || p->gen != e->gen)
				return NULL;
			return p;
		}
	}
	return NULL;
}

/* One slice of the aging scan, so a large table never stalls the loop. */
static void mac_age_slice(struct sn_switch *sw, uint64_t now)
{
	unsigned end = SN_MIN_U(sw->scan_pos + AGE_SLICE, sw->mac_n);

	for (unsigned i = sw->scan_pos; i < end; i++) {
		struct mac_entry *e = &sw->mac[i];

		if (e->key && expired(sw, e, now)) {
			e->key = 0;
			ctr_add(&sw->ms.aged, 1);
			ctr_add(&sw->ms.entries, -1ULL);
		}
	}
	sw->scan_pos = end;
}

static inline void stage_add(struct sn_switch *sw, struct sn_port *p, struct rte_mbuf *m)
{
	struct stage *s = &sw->stage[p->slot];

	if (s->n == 0) {
		s->port = p;
		sw->touched[sw->n_touched++] = p->slot;
	}
	if (p->type == SN_PORT_UPLINK)
		rte_mbuf_refcnt_update(m, 1);
	s->pkts[s->n++] = m;
}

static void flush(struct sn_switch *sw)
{
	for (unsigned i = 0; i < sw->n_touched; i++) {
		struct stage *s = &sw->stage[sw->touched[i]];
		struct sn_port *p = s->port;
		uint64_t bytes = 0;
		uint16_t k;

		if (p->type == SN_PORT_VHOST) {
			k = rte_vhost_enqueue_burst(p->vid, VIRTIO_RXQ, s->pkts, s->n);
		} else {
			/* tx_prepare fixes offload headers (no-op for most
			 * PMDs); frames it rejects are dropped like unsent ones. */
			k = rte_eth_tx_prepare(p->eth_port, 0, s->pkts, s->n);
			k = rte_eth_tx_burst(p->eth_port, 0, s->pkts, k);
			/* Unsent: drop the reference stage_add() took. */
			for (uint16_t j = k; j < s->n; j++)
				rte_pktmbuf_free(s->pkts[j]);
		}
		for (uint16_t j = 0; j < k; j++)
			bytes += s->pkts[j]->pkt_len;
		ctr_add(&p->st.tx_packets, k);
		ctr_add(&p->st.tx_bytes, bytes);
		if (k < s->n)
			ctr_add(&p->st.drop[SN_DROP_RING_FULL], s->n - k);
		s->n = 0;
	}
	sw->n_touched = 0;
}

static void switch_burst(struct sn_switch *sw, const struct sn_port_table *t,
			 struct sn_port *in, struct rte_mbuf **pkts, uint16_t n, uint64_t now)
{
	uint64_t bytes = 0;
	uint16_t keep = 0;
	/* issue 6: frames of a port with a policy go through the shaper. */
	const bool shaped = sw->pl && sn_pipeline_shaped(sw->pl, in);

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ether_hdr *eth;
		struct sn_port *dp = NULL;

		bytes += m->pkt_len;
		if (m->data_len < RTE_ETHER_HDR_LEN) {
			ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
		if (rte_is_multicast_ether_addr(&eth->src_addr)) {
			ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		mac_learn(sw, mac_key(&eth->src_addr), in, now);
		if (!rte_is_multicast_ether_addr(&eth->dst_addr))
			dp = mac_lookup(sw, t, mac_key(&eth->dst_addr), now);
		if (dp) {
			if (dp == in) {
				ctr_add(&in->st.drop[SN_DROP_HAIRPIN], 1);
				rte_pktmbuf_free(m);
				continue;
			}
			if (!sn_port_is_up(dp)) {
				ctr_add(&dp->st.drop[SN_DROP_PORT_DOWN], 1);
				rte_pktmbuf_free(m);
				continue;
			}
			if (shaped) {
				sn_pipeline_submit(sw->pl, in, m, dp);
				continue;
			}
			stage_add(sw, dp, m);
		} else if (shaped) {
			sn_pipeline_submit(sw->pl, in, m, NULL);
			continue;
		} else {
			for (unsigned j = 0; j < t->n; j++) {
				struct sn_port *p = t->list[j];

				if (p != in && sn_port_is_up(p))
					stage_add(sw, p, m);
			}
		}
		pkts[keep++] = m;
	}
	ctr_add(&in->st.rx_packets, n);
	ctr_add(&in->st.rx_bytes, bytes);
	flush(sw);
	rte_pktmbuf_free_bulk(pkts, keep);
}

int sn_switch_worker(void *arg)
{
	struct sn_switch *sw = arg;
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
	const uint16_t burst = (uint16_t)sw->burst;

	unsigned idle = 0;

	rcu_register_thread();
	sw->next_scan = rte_rdtsc() + sw->scan_tsc;
	/* Acquire pairs with the release store in sn_switch_stop(). */
	while (!__atomic_load_n(&sw->stop, __ATOMIC_ACQUIRE)) {
		struct sn_port_table *t = sn_ports_table_rcu(sw->reg);
		uint64_t now = rte_rdtsc();
		unsigned got = 0;

		if (sw->pl)
			sn_pipeline_run(sw->pl, t);   /* issue 6: due frames, arbiter */
		for (unsigned i = 0; i < t->n; i++) {
			struct sn_port *p = t->list[i];
			uint16_t n;

			if (!sn_port_is_up(p))
				continue;
			if (p->type == SN_PORT_VHOST)
				n = rte_vhost_dequeue_burst(p->vid, VIRTIO_TXQ, sw->mp, pkts, burst);
			else
				n = rte_eth_rx_burst(p->eth_port, 0, pkts, burst);
			if (n)
				switch_burst(sw, t, p, pkts, n, now);
			got += n;
		}
		if (sw->pl)
			sn_pipeline_flush(sw->pl);    /* issue 6: before t goes stale */
		/* Ends the read-side use of t and of every port's vid: pairs
		 * with synchronize_rcu() in sn_port.c (publish, destroy). */
		rcu_quiescent_state();
		if (sw->scan_pos < sw->mac_n) {
			mac_age_slice(sw, now);
		} else if ((int64_t)(now - sw->next_scan) > 0) {
			sw->scan_pos = 0;     /* a full scan once a second */
			sw->next_scan = now + sw->scan_tsc;
		}
		/* Idle back-off: after IDLE_SPINS empty polls, nap between polls
		 * so an idle daemon leaves its CPU to others (2-core hosts); any
		 * packet brings back pure busy polling. */
		if (got)
			idle = 0;
		else if (++idle > IDLE_SPINS)
			rte_delay_us_sleep(IDLE_NAP_US);
	}
	rcu_unregister_thread();
	return 0;
}

struct sn_switch *sn_switch_create(const struct sn_switch_config *cfg,
				   struct sn_ports *reg, struct rte_mempool *mp)
{
	struct sn_switch *sw;
	unsigned buckets;

	if (cfg->burst == 0 || cfg->burst > SN_CONFIG_BURST_MAX || cfg->mac_table_size < 16 ||
	    (cfg->mac_table_size & (cfg->mac_table_size - 1))) {
		errno = EINVAL;
		return NULL;
	}
	sw = rte_zmalloc("sn_switch", sizeof(*sw), RTE_CACHE_LINE_SIZE);
	if (!sw) {
		errno = ENOMEM;
		return NULL;
	}
	sw->mac = rte_zmalloc("sn_mac", sizeof(*sw->mac) * cfg->mac_table_size, RTE_CACHE_LINE_SIZE);
	if (!sw->mac) {
		rte_free(sw);
		errno = ENOMEM;
		return NULL;
	}
	sw->reg = reg;
	sw->mp = mp;
	sw->pl = cfg->pipeline;
	sw->burst = cfg->burst;
	sw->mac_n = cfg->mac_table_size;
	buckets = cfg->mac_table_size / MAC_WAYS;
	sw->bucket_shift = 64 - (unsigned)__builtin_ctz(buckets);
	sw->aging_tsc = (uint64_t)cfg->mac_aging_s * rte_get_tsc_hz();
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
	rte_free(sw->mac);
	rte_free(sw);
}

void sn_switch_mac_stats(const struct sn_switch *sw, struct sn_mac_stats *out)
{
	out->entries = __atomic_load_n(&sw->ms.entries, __ATOMIC_RELAXED);
	out->learned = __atomic_load_n(&sw->ms.learned, __ATOMIC_RELAXED);
	out->aged = __atomic_load_n(&sw->ms.aged, __ATOMIC_RELAXED);
	out->moves = __atomic_load_n(&sw->ms.moves, __ATOMIC_RELAXED);
	out->full = __atomic_load_n(&sw->ms.full, __ATOMIC_RELAXED);
}
