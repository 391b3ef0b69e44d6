/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch.c — transparent L2 learning switch (IEEE 802.1D style) on one
 * worker lcore.
 *
 * Design. Per ingress burst: (1) learn each source MAC -> ingress port;
 * (2) pick the destination: a learned, unexpired unicast MAC whose port
 * still exists (slot + generation match) gives one port, anything else is
 * flooded to every other up port (s13-M3: (1) and (2) are skipped for a
 * frame that repeats an earlier frame's source / the previous frame's
 * destination within the burst, whose results they would repeat: see the
 * burst memo in switch_burst); (3) stage the packet on each destination;
 * (4) flush each destination with one burst call; (5) free the input
 * mbufs. vhost-user enqueue copies the packet into the guest, so one mbuf
 * serves every vhost destination of a flood; the uplink's tx_burst takes
 * ownership, so the uplink gets its own reference (refcnt + 1). Every mbuf
 * is freed on every path: what a destination did not take is freed here and
 * counted as ring_full on that destination.
 *
 * MAC table: 4-way set-associative hash (mac_table_size entries), shared
 * by every worker (layout ncore: W switch instances, one per worker lcore;
 * the first one creates the table, the others share it). Concurrency
 * contract, per bucket: one rte_seqlock (DPDK's sequence lock: a spinlock
 * for writers + a sequence counter for readers). Readers (lookup, and the
 * fast path of learning: a known MAC on the same port) take no lock: they
 * read the bucket's entries with relaxed atomic loads between
 * rte_seqlock_read_begin() and rte_seqlock_read_retry() (acquire fences
 * inside pair with the writer's release in write_lock/unlock) and retry if
 * a writer was inside. Writers (a new MAC, a move to another port, aging)
 * take the bucket's write lock. `seen` alone is refreshed outside the lock
 * (relaxed store, at most once per SEEN_REFRESH of the aging time): a
 * racing refresh of an entry a writer just replaced only makes that entry
 * look fresh, which is harmless. Entries are values, never freed: no
 * reader holds a pointer into the table past its read section. Aging is
 * lazy on lookup (an expired entry is a miss) and a scan once a second,
 * AGE_SLICE entries per loop iteration, by worker 0 only. MAC stats are
 * updated with relaxed atomic fetch-adds (several writers).
 *
 * GSO frames (fix O). A guest with virtio-net offloads hands us TSO frames
 * (RTE_MBUF_F_TX_TCP_SEG + tso_segsz, up to 64 KiB, multi-segment) with a
 * partial checksum. vhost destinations take them as they are (the enqueue
 * writes a virtio-net GSO header: VM->VM stays fast). An ethdev (the
 * uplink) gets them segmented here in software with librte_gso
 * (TCP/IPv4; both checksums of every segment computed here), because
 * net_tap in DPDK 22.11 advertises TCP_TSO but rejects every TSO frame
 * whose mss + l2/l3/l4 headers exceed its MTU (it compares an L2 size with
 * an L3 MTU: mss 1448 + 66 > 1500), and a rejected frame stops its whole
 * tx burst. vhost ports do not offer TSO6/UFO (sn_port.c), which rte_gso
 * cannot do. A GSO frame we cannot segment (TSO6/UFO anyway, headers not
 * in the first segment, absurd mss, out of mbufs) is dropped and counted
 * as gso_failed on the egress port. See README.md "Counters".
 *
 * This is the issue-2 datapath (rte_vhost_dequeue/enqueue_burst); the
 * scheduled datapath of DESIGN.md replaces the VM TX side later.
 *
 * Deferred-completion ports (sn_vqtx.h, Carousel §5.2): their frames are
 * guest buffers wrapped zero-copy in mbufs, and the guest gets a
 * descriptor back only when the last reference is freed. That turns a full
 * destination ring from a drop into backpressure: a frame from a deferred
 * port that a vhost destination cannot take now waits in that
 * destination's BACKLOG (FIFO, BACKLOG_MAX frames, drained before anything
 * new goes to that destination, so a flow stays in order) until the
 * destination takes it, goes down (port_down) or the frame's hold time
 * passes its port's max_hold_us (dropped, counted as hold_timeouts). Its
 * descriptor stays held meanwhile, so the guest's TX ring, not our
 * mempool, absorbs the queue. Frames to the uplink are copied (a PMD may
 * keep an mbuf past a device stop, and guest memory must not outlive it).
 * Backlogs belong to the worker alone; a port being stopped has every one
 * of its frames purged from them before sn_vqtx_stop_ack().
 */
#define _LGPL_SOURCE
/* rte_ipv4_udptcp_cksum_mbuf() (multi-segment TCP checksum) is still
 * experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_switch.h"
#include "sn_cpufair.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_seqlock.h>
#include <rte_vhost.h>
#include <urcu-qsbr.h>

#include "sn_config.h"
#include "sn_log.h"
#include "sn_pipeline.h"
#include "sn_port.h"
#include "sn_vqtx.h"

#define MAC_WAYS   4
#define MAC_VALID  (1ULL << 63)
#define AGE_SLICE  256 /* MAC entries aged per loop iteration */
#define IDLE_SPINS 20000 /* empty polls before napping */
#define SN_MIN_U(a, b) ((a) < (b) ? (a) : (b))
#define GSO_SEG_MAX 128  /* segments per GSO frame (64 KiB at mss >= 512) */
#define GSO_FLAGS (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)
#define DIAG_LINES 16    /* frames logged per cause (diagnostics, bounded) */
#define BACKLOG_MAX 1024u /* frames waiting per vhost destination (power of 2) */
#define SEEN_REFRESH 64   /* `seen` is refreshed after 1/64 of the aging time */

struct mac_entry {
	uint64_t key;    /* MAC | MAC_VALID, 0 = empty */
	uint64_t seen;   /* TSC of the last frame from it */
	uint32_t gen;    /* port generation */
	uint16_t slot;   /* port slot */
	uint16_t pad;
};

struct mac_bucket {
	rte_seqlock_t lock;
	struct mac_entry e[MAC_WAYS];
} __rte_cache_aligned;

/* The MAC table shared by the workers (contract above). */
struct mactab {
	struct mac_bucket *b;
	unsigned nb;                 /* buckets (pow2) */
	unsigned bucket_shift;       /* 64 - log2(nb) */
	uint64_t aging_tsc;
	struct sn_mac_stats ms;      /* fetch-add by any worker */
};

/* Frames from deferred ports waiting for one vhost destination. */
struct backlog {
	uint32_t gen;          /* destination port generation */
	uint32_t head, n;      /* ring of BACKLOG_MAX */
	uint64_t next_check;   /* earliest hold deadline inside (TSC) */
	struct rte_mbuf *m[BACKLOG_MAX];
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
	struct rte_gso_ctx gso;      /* gso_size set per frame (worker only) */
	struct sn_pipeline *pl;      /* NULL: no policy enforcement; else this
	                              * worker's instance */
	struct sn_cpufair *cf;       /* issue 6: datapath.cpu_fair_pct; NULL = off */
	unsigned burst;
	unsigned idle_sleep_us;       /* 0 = busy poll (config datapath.idle_sleep_us) */
	unsigned wk;                 /* worker index: polls the TX queues it owns */
	uint16_t txq;                /* uplink TX queue (= wk) */
	uint64_t aging_tsc;
	uint64_t scan_tsc;
	struct mactab *mt;           /* shared (owned by worker 0's switch) */
	bool mt_owner;
	unsigned mac_n;              /* buckets: the aging scan's range */

	/* Main -> worker. */
	uint32_t stop __rte_cache_aligned;

	/* Worker only. */
	uint64_t next_scan __rte_cache_aligned;
	unsigned scan_pos;           /* == mac_n: no scan in progress (worker 0) */
	unsigned n_touched;
	uint16_t touched[SN_PORT_MAX];
	unsigned diag_malformed, diag_txfail; /* log lines left (DIAG_LINES) */
	struct stage stage[SN_PORT_MAX];
	struct backlog *bl;          /* [SN_PORT_MAX], by destination slot */
	uint64_t bl_busy;            /* bit i: bl[i] may be non-empty */
};

/* MAC table counter update (several writers); readers use relaxed loads. */
static inline void ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* A MAC's table key: its 6 bytes as the low 48 bits of a little-endian
 * word, | MAC_VALID. s13-M3: both of a frame's keys with one 8-byte load
 * each (the 14-byte header is in the first segment, checked before). */
static inline void eth_keys(const struct rte_ether_hdr *eth, uint64_t *dkey, uint64_t *skey)
{
	const uint8_t *h = (const uint8_t *)eth;
	uint64_t d, s;

	static_assert(sizeof(*eth) >= 6 + sizeof(s), "src MAC + 2 bytes of ethertype");
	memcpy(&d, h, sizeof(d));
	memcpy(&s, h + 6, sizeof(s));
	*dkey = (rte_le_to_cpu_64(d) & 0xffffffffffffULL) | MAC_VALID;
	*skey = (rte_le_to_cpu_64(s) & 0xffffffffffffULL) | MAC_VALID;
}

static inline struct mac_bucket *mac_bucket(const struct mactab *mt, uint64_t key)
{
	return &mt->b[(key * 0x9E3779B97F4A7C15ULL) >> mt->bucket_shift];
}

static inline bool expired(const struct mactab *mt, uint64_t seen, uint64_t now)
{
	return now - seen > mt->aging_tsc;
}

/* A lock-free snapshot of the entry for key in b: its way, or -1. */
static int mac_read(const struct mac_bucket *b, uint64_t key, struct mac_entry *out)
{
	uint32_t sn;
	int hit;

	do {
		sn = rte_seqlock_read_begin(&b->lock);
		hit = -1;
		for (unsigned w = 0; w < MAC_WAYS; w++) {
			if (LD(b->e[w].key) == key) {
				out->seen = LD(b->e[w].seen);
				out->gen = LD(b->e[w].gen);
				out->slot = LD(b->e[w].slot);
				hit = (int)w;
				break;
			}
		}
	} while (rte_seqlock_read_retry(&b->lock, sn));
	return hit;
}

/* mac_learn() results (s13-M3: what the burst memo in switch_burst needs). */
enum learn_res {
	LEARN_KNOWN,  /* key -> in already, nothing but `seen` written */
	LEARN_WROTE,  /* key -> in now, the entry was written (new or moved) */
	LEARN_FULL,   /* not learned: bucket full (counted) */
};

static enum learn_res mac_learn(struct sn_switch *sw, uint64_t key, const struct sn_port *in,
				uint64_t now)
{
	struct mactab *mt = sw->mt;
	struct mac_bucket *b = mac_bucket(mt, key);
	struct mac_entry *free_e = NULL, cur = { 0 };
	int hit = mac_read(b, key, &cur);
	enum learn_res res = LEARN_WROTE;

	if (hit >= 0 && cur.slot == in->slot && cur.gen == in->gen) {
		/* Fast path, no lock (contract above). */
		if (now - cur.seen > mt->aging_tsc / SEEN_REFRESH)
			ST(b->e[hit].seen, now);
		return LEARN_KNOWN;
	}
	rte_seqlock_write_lock(&b->lock);
	for (unsigned w = 0; w < MAC_WAYS; w++) {
		struct mac_entry *e = &b->e[w];

		if (e->key == key) {
			if (e->slot != in->slot || e->gen != in->gen) {
				ST(e->slot, in->slot);
				ST(e->gen, in->gen);
				ctr_add(&mt->ms.moves, 1);
			}
			ST(e->seen, now);
			goto unlock;
		}
		if (!free_e && (!e->key || expired(mt, LD(e->seen), now)))
			free_e = e;
	}
	if (!free_e) {
		ctr_add(&mt->ms.full, 1);
		res = LEARN_FULL;
		goto unlock;
	}
	if (free_e->key) {
		ctr_add(&mt->ms.aged, 1);
		ctr_add(&mt->ms.entries, -1ULL);
	}
	ST(free_e->key, key);
	ST(free_e->seen, now);
	ST(free_e->slot, in->slot);
	ST(free_e->gen, in->gen);
	ctr_add(&mt->ms.entries, 1);
	ctr_add(&mt->ms.learned, 1);
unlock:
	rte_seqlock_write_unlock(&b->lock);
	return res;
}

/* The destination port of a unicast MAC, or NULL (unknown: flood). */
static struct sn_port *mac_lookup(struct sn_switch *sw, const struct sn_port_table *t,
				  uint64_t key, uint64_t now)
{
	struct mac_entry e;
	struct sn_port *p;

	if (mac_read(mac_bucket(sw->mt, key), key, &e) < 0 || expired(sw->mt, e.seen, now))
		return NULL;
	p = t->by_slot[e.slot];
	return p && p->gen == e.gen ? p : NULL;
}

/* One slice of the aging scan (worker 0), so a large table never stalls
 * the loop. A bucket is locked only when it has an expired entry. */
static void mac_age_slice(struct sn_switch *sw, uint64_t now)
{
	struct mactab *mt = sw->mt;
	unsigned end = SN_MIN_U(sw->scan_pos + AGE_SLICE / MAC_WAYS, sw->mac_n);

	for (unsigned i = sw->scan_pos; i < end; i++) {
		struct mac_bucket *b = &mt->b[i];
		bool any = false;

		for (unsigned w = 0; w < MAC_WAYS; w++)
			any |= LD(b->e[w].key) && expired(mt, LD(b->e[w].seen), now);
		if (!any)
			continue;
		rte_seqlock_write_lock(&b->lock);
		for (unsigned w = 0; w < MAC_WAYS; w++) {
			struct mac_entry *e = &b->e[w];

			if (e->key && expired(mt, LD(e->seen), now)) {
				ST(e->key, 0);
				ctr_add(&mt->ms.aged, 1);
				ctr_add(&mt->ms.entries, -1ULL);
			}
		}
		rte_seqlock_write_unlock(&b->lock);
	}
	sw->scan_pos = end;
}

static inline void stage_add(struct sn_switch *sw, struct sn_port *in, struct sn_port *p,
			     struct rte_mbuf *m)
{
	struct stage *s = &sw->stage[p->slot];

	if (p->type == SN_PORT_UPLINK) {
		if (in->vq && !p->tx_sync) {
			/* Guest memory must not outlive a device stop in a PMD
			 * (s10-P: unless the PMD is done with it when tx_burst
			 * returns, sn_port_tx_sync(); the worker's tx_burst
			 * then frees, i.e. completes, the guest frame itself). */
			m = rte_pktmbuf_copy(m, sw->mp, 0, UINT32_MAX);
			if (!m) {
				sn_port_ctr_add(&in->st.drop[SN_DROP_NO_MBUF], 1);
				return;
			}
		} else {
			/* Every segment (fix O): rte_pktmbuf_free() frees each
			 * segment by its own refcnt, so a head-only reference
			 * let the PMD and the final free_bulk free a
			 * multi-segment (TSO) frame's tail twice. */
			rte_pktmbuf_refcnt_update(m, 1);
		}
	}
	if (s->n == 0) {
		s->port = p;
		sw->touched[sw->n_touched++] = p->slot;
	}
	s->pkts[s->n++] = m;
}

static void diag_frame(unsigned *budget, const char *port, const char *what,
		       const struct rte_mbuf *m)
{
	if (*budget == 0)
		return;
	(*budget)--;
	sn_log("port %s: %s: pkt_len %u data_len %u segs %u ol_flags 0x%llx l2/l3/l4 %u/%u/%u tso_segsz %u",
	       port, what, m->pkt_len, m->data_len, m->nb_segs, (unsigned long long)m->ol_flags,
	       (unsigned)m->l2_len, (unsigned)m->l3_len, (unsigned)m->l4_len, (unsigned)m->tso_segsz);
}

/* tx_prepare fixes offload headers (no-op for most PMDs); frames it
 * rejects are dropped like unsent ones. Returns the sent prefix length. */
static uint16_t eth_tx(struct sn_switch *sw, const struct sn_port *p,
		       struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t k = rte_eth_tx_prepare(p->eth_port, sw->txq, pkts, n);

	if (k < n)
		diag_frame(&sw->diag_txfail, p->name, "tx_prepare rejected", pkts[k]);
	k = rte_eth_tx_burst(p->eth_port, sw->txq, pkts, k);
	return k;
}

/* A segment of a TCP/IPv4 frame, headers alone in its first mbuf: compute
 * both checksums (rte_gso leaves them stale) and clear every offload flag
 * so the PMD sends it as is. */
static void tcp4_finish(struct rte_mbuf *seg)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(seg, struct rte_ipv4_hdr *, seg->l2_len);
	struct rte_tcp_hdr *tcp = rte_pktmbuf_mtod_offset(seg, struct rte_tcp_hdr *,
							  seg->l2_len + seg->l3_len);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->cksum = 0;
	tcp->cksum = rte_ipv4_udptcp_cksum_mbuf(seg, ip, seg->l2_len + seg->l3_len);
	seg->ol_flags &= ~(GSO_FLAGS | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IP_CKSUM |
			   RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IPV6);
}

/* Software-segment one guest TSO frame m (shared: other destinations of a
 * flood still read it, so its data and ol_flags are left as they were) and
 * send the segments. Returns 1 = every segment sent, 0 = not all sent
 * (ring full), -1 = cannot segment. Never takes m's reference. */
static int gso_tx(struct sn_switch *sw, const struct sn_port *p, struct rte_mbuf *m)
{
	struct rte_mbuf *segs[GSO_SEG_MAX];
	const struct rte_ipv4_hdr *ip;
	unsigned hdr = (unsigned)m->l2_len + m->l3_len + m->l4_len;
	uint64_t ol = m->ol_flags;
	int n;
	uint16_t k;

	/* Untrusted guest metadata: only TCP/IPv4 with every header in the
	 * first segment (rte_gso copies them from there). */
	if ((ol & GSO_FLAGS) != RTE_MBUF_F_TX_TCP_SEG || !(ol & RTE_MBUF_F_TX_IPV4) ||
	    m->l2_len < RTE_ETHER_HDR_LEN || m->l3_len < sizeof(struct rte_ipv4_hdr) ||
	    m->l4_len < sizeof(struct rte_tcp_hdr) || m->data_len < hdr ||
	    m->tso_segsz == 0 || hdr + m->tso_segsz > UINT16_MAX)
		return -1;
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, m->l2_len);
	if (ip->next_proto_id != IPPROTO_TCP || rte_ipv4_hdr_len(ip) != m->l3_len)
		return -1;
	sw->gso.gso_size = (uint16_t)(hdr + m->tso_segsz);
	n = rte_gso_segment(m, &sw->gso, segs, GSO_SEG_MAX);
	m->ol_flags = ol;   /* rte_gso clears TCP_SEG on its input */
	if (n == 0) {
		/* Fits in one segment (or an IP fragment): a private copy,
		 * since the checksums are written in place. */
		segs[0] = rte_pktmbuf_copy(m, sw->mp, 0, UINT32_MAX);
		if (!segs[0])
			return -1;
		n = 1;
	}
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		tcp4_finish(segs[i]);
	k = eth_tx(sw, p, segs, (uint16_t)n);
	for (int i = k; i < n; i++)
		rte_pktmbuf_free(segs[i]);
	return k == n ? 1 : 0;
}

/* sn_pipeline's GSO hook: shaped ports' TSO frames for the uplink. */
static int pipeline_gso(void *arg, const struct sn_port *p, struct rte_mbuf *m)
{
	return gso_tx(arg, p, m);
}

/* An ethdev destination: plain frames in bursts, GSO frames segmented one
 * at a time. Counters are per switch frame (a GSO frame is one tx packet
 * when every segment went out, else one ring_full drop), so the stats.get
 * conservation rule holds. Frees every staged reference. */
static void flush_eth(struct sn_switch *sw, struct sn_port *p, struct stage *s)
{
	uint64_t sent = 0, bytes = 0, full = 0, gso_failed = 0;
	uint16_t run = 0;
	bool blocked = false;   /* the PMD refused a frame: skip the rest */

	for (uint16_t i = 0; i <= s->n; i++) {
		struct rte_mbuf *m = i < s->n ? s->pkts[i] : NULL;
		int rc;

		if (m && !(m->ol_flags & GSO_FLAGS))
			continue;
		if (i > run) {   /* the run of plain frames [run, i) */
			uint16_t n = i - run;
			uint16_t k = blocked ? 0 : eth_tx(sw, p, &s->pkts[run], n);

			for (uint16_t j = 0; j < k; j++)
				bytes += s->pkts[run + j]->pkt_len;
			for (uint16_t j = k; j < n; j++)
				rte_pktmbuf_free(s->pkts[run + j]);
			if (k < n && !blocked)
				diag_frame(&sw->diag_txfail, p->name, "tx_burst refused", s->pkts[run + k]);
			sent += k;
			full += n - k;
			blocked = blocked || k < n;
		}
		run = i + 1;
		if (!m)
			break;
		rc = blocked ? 0 : gso_tx(sw, p, m);
		if (rc == 1) {
			sent++;
			bytes += m->pkt_len;
		} else if (rc == 0) {
			full++;
			blocked = true;
		} else {
			gso_failed++;
			diag_frame(&sw->diag_txfail, p->name, "cannot segment", m);
		}
		rte_pktmbuf_free(m);    /* segments hold their own references */
	}
	sn_port_ctr_add(&p->st.tx_packets, sent);
	sn_port_ctr_add(&p->st.tx_bytes, bytes);
	if (full)
		sn_port_ctr_add(&p->st.drop[SN_DROP_RING_FULL], full);
	if (gso_failed)
		sn_port_ctr_add(&p->st.drop[SN_DROP_GSO_FAILED], gso_failed);
}

/* ---- Backlogs (deferred frames waiting for a vhost destination). ---- */

static_assert(SN_PORT_MAX <= 64, "bl_busy is one 64-bit mask");

static void bl_push(struct sn_switch *sw, struct backlog *b, const struct sn_port *dst,
		    struct rte_mbuf *m, uint64_t deadline)
{
	sw->bl_busy |= 1ULL << dst->slot;
	if (b->n == 0) {
		b->gen = dst->gen;
		b->head = 0;
		b->next_check = UINT64_MAX;
	}
	rte_pktmbuf_refcnt_update(m, 1);   /* every segment, see stage_add() */
	b->m[(b->head + b->n++) & (BACKLOG_MAX - 1)] = m;
	if (deadline < b->next_check)
		b->next_check = deadline;
}

/* Hand what the destination takes to its RX ring, oldest first. */
static void bl_drain(struct backlog *b, struct sn_port *p)
{
	while (b->n) {
		uint16_t cnt = (uint16_t)SN_MIN_U(SN_MIN_U(b->n, BACKLOG_MAX - b->head),
						  SN_CONFIG_BURST_MAX);
		struct rte_mbuf **a = &b->m[b->head];
		uint64_t bytes = 0;
		uint16_t k = sn_port_vhost_enqueue_bytes(p, a, cnt, &bytes);  /* MQ: reorders a */

		sn_port_ctr_add(&p->st.tx_packets, k);
		sn_port_ctr_add(&p->st.tx_bytes, bytes);
		rte_pktmbuf_free_bulk(a, k);
		b->head = (b->head + k) & (BACKLOG_MAX - 1);
		b->n -= k;
		if (k < cnt)
			break;
	}
}

/* Drop the frames for which drop(m) holds (freeing completes them); the
 * rest keeps its order. Returns how many were dropped. */
static unsigned bl_filter(struct backlog *b, bool (*drop)(struct rte_mbuf *, void *), void *arg)
{
	uint32_t keep = 0, n = b->n, dropped = 0;
	uint64_t next = UINT64_MAX;

	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = b->m[(b->head + i) & (BACKLOG_MAX - 1)];
		uint64_t pop;

		if (drop(m, arg)) {
			rte_pktmbuf_free(m);
			dropped++;
			continue;
		}
		if (sn_vqtx_of(m, &pop)) {
			uint64_t d = sn_vqtx_deadline(sn_vqtx_of(m, &pop), pop);

			next = d < next ? d : next;
		}
		b->m[(b->head + keep++) & (BACKLOG_MAX - 1)] = m;
	}
	b->n = keep;
	b->next_check = next;
	return dropped;
}

static bool drop_all(struct rte_mbuf *m, void *arg)
{
	(void)m, (void)arg;
	return true;
}

/* The destination port was deleted: no port counter is left to count the
 * frame on, so it is counted on its source queue (every backlogged frame is
 * a deferred one: sn_vqtx_of is never NULL here, see flush()). */
static bool drop_dest_deleted(struct rte_mbuf *m, void *arg)
{
	uint64_t pop;
	struct sn_vqtx *q = sn_vqtx_of(m, &pop);

	(void)arg;
	if (q)
		sn_vqtx_count_dest_deleted(q);
	return true;
}

static bool drop_expired(struct rte_mbuf *m, void *arg)
{
	uint64_t pop, now = *(const uint64_t *)arg;
	struct sn_vqtx *q = sn_vqtx_of(m, &pop);

	if (!q || sn_vqtx_deadline(q, pop) > now)
		return false;
	sn_vqtx_count_timeout(q);
	return true;
}

static bool drop_of_queue(struct rte_mbuf *m, void *arg)
{
	uint64_t pop;

	if (sn_vqtx_of(m, &pop) != arg)
		return false;
	sn_vqtx_count_forced(arg);
	return true;
}

/* Every iteration: deliver, expire, or drop backlogs of vanished or down
 * destinations. */
static void bl_service(struct sn_switch *sw, const struct sn_port_table *t, uint64_t now)
{
	for (uint64_t busy = sw->bl_busy; busy; busy &= busy - 1) {
		unsigned i = (unsigned)__builtin_ctzll(busy);
		struct backlog *b = &sw->bl[i];
		struct sn_port *p;

		if (!b->n) {
			sw->bl_busy &= ~(1ULL << i);
			continue;
		}
		p = t->by_slot[i];
		if (!p || p->gen != b->gen) {
			bl_filter(b, drop_dest_deleted, NULL);  /* port deleted */
			continue;
		}
		if (!sn_port_is_up(p)) {
			sn_port_ctr_add(&p->st.drop[SN_DROP_PORT_DOWN], bl_filter(b, drop_all, NULL));
			continue;
		}
		bl_drain(b, p);
		if (b->n && now >= b->next_check)
			bl_filter(b, drop_expired, &now);
	}
}

/* A deferred port is stopping: none of its frames may stay with us. */
static void bl_purge_queue(struct sn_switch *sw, struct sn_vqtx *q)
{
	for (uint64_t busy = sw->bl_busy; busy; busy &= busy - 1) {
		unsigned i = (unsigned)__builtin_ctzll(busy);

		if (sw->bl[i].n)
			bl_filter(&sw->bl[i], drop_of_queue, q);
	}
}

/* Every iteration, after switching: deferred ports publish completions, or
 * hand their ring back when a stop is pending. A shaped deferred port's
 * frames still in the policy pipeline (wheel, mailbox, scheduler) cannot be
 * picked out there: the pipeline drops each as it surfaces (src_stopped,
 * at most a wheel horizon plus the arbiter's backlog later) and the stop
 * is acknowledged once none is left; sn_vqtx_stop() waits for that. */
static void vq_service(struct sn_switch *sw, const struct sn_port_table *t, uint64_t now)
{
	/* s21: the hold-check bound over every queue this worker owns, after
	 * the iteration's last pop (sn_vqtx_keep_all) */
	sn_vqtx_keep_bound_begin();
	for (unsigned i = 0; i < t->n; i++) {
		struct sn_port *p = t->list[i];

		/* Multiqueue: every TX queue is its own unit, served by its
		 * owner (sn_port.h). */
		for (unsigned qi = 0; p->vq && qi < p->nq; qi++) {
			struct sn_vqtx *q = p->q[qi].vq;

			if (p->q[qi].owner != sw->wk)
				continue;
			sn_vqtx_keep_bound_add(q);
			if (sn_vqtx_stop_pending(q)) {
				bl_purge_queue(sw, q);
				if (sw->pl && sn_pipeline_src_held(sw->pl, p))
					continue;
				sn_vqtx_stop_ack(q);
			} else {
				sn_vqtx_service(q, now);
			}
		}
	}
	sn_vqtx_keep_bound_end();
}

static void flush(struct sn_switch *sw)
{
	for (unsigned i = 0; i < sw->n_touched; i++) {
		struct stage *s = &sw->stage[sw->touched[i]];
		struct sn_port *p = s->port;
		struct backlog *b;
		uint64_t bytes = 0;
		uint16_t k;

		if (p->type != SN_PORT_VHOST) {
			flush_eth(sw, p, s);
			s->n = 0;
			continue;
		}
		b = &sw->bl[p->slot];
		if (b->n)
			bl_drain(b, p);
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
			if (q && b->n < BACKLOG_MAX) {
				bl_push(sw, b, p, m, sn_vqtx_deadline(q, pop));
				s->pkts[j] = NULL;
			}
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
}

/* s13-M3: free the frames of a burst that came in by copy (an immediate
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
	/* issue 6: frames of a port with a policy go through the shaper. */
	const bool shaped = sw->pl && sn_pipeline_shaped(sw->pl, in);
	struct rte_mbuf *spkts[SN_CONFIG_BURST_MAX];   /* s11-S: shaped frames, */
	struct sn_port *sdst[SN_CONFIG_BURST_MAX];     /* one submit per burst */

	/* s13-M3: burst memo. A frame with the source MAC of an earlier frame
	 * of this burst that was learned (LEARN_KNOWN/WROTE: the entry maps
	 * it to `in`) skips mac_learn(): with the same port and the same
	 * iteration clock it would find exactly that and write nothing. A
	 * frame with the destination MAC of the previous lookup reuses its
	 * result: the lookup depends on the table (our own writes below clear
	 * the memo), the port snapshot t and `now`, all fixed for the burst.
	 * Another worker's concurrent write (ncore) is ordered as if it came
	 * after the burst. Keys carry MAC_VALID, so 0 matches no frame.
	 * OVS-DPDK groups its batches by flow for the same reason. Counters
	 * keep their meaning: a MAC the table could not take (LEARN_FULL) is
	 * not memoized, so `full` still counts every such frame. */
	uint64_t memo_src = 0, memo_dst = 0;
	struct sn_port *memo_dp = NULL;

	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		const struct rte_ether_hdr *eth;
		struct sn_port *dp = NULL;
		uint64_t skey, dkey;

		bytes += m->pkt_len;
		if (m->data_len < RTE_ETHER_HDR_LEN) {
			diag_frame(&sw->diag_malformed, in->name, "malformed (runt)", m);
			sn_port_ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
		if (rte_is_multicast_ether_addr(&eth->src_addr)) {
			diag_frame(&sw->diag_malformed, in->name, "malformed (multicast source)", m);
			sn_port_ctr_add(&in->st.drop[SN_DROP_MALFORMED], 1);
			rte_pktmbuf_free(m);
			continue;
		}
		eth_keys(eth, &dkey, &skey);
		if (skey != memo_src) {
			enum learn_res r = mac_learn(sw, skey, in, now);

			memo_src = r == LEARN_FULL ? 0 : skey;
			/* A write changes lookups; so does a known entry's
			 * refreshed `seen` if it had expired (not yet aged
			 * out): the memoized lookup of that very MAC. */
			if (r == LEARN_WROTE || skey == memo_dst)
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
			if (shaped) {
				/* s11-S: submitted as one burst below */
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
	flush(sw);
	/* s11-D: deferred frames delivered by copy are completed and their
	 * mbufs recycled without a detach (sn_vqtx.h); s13-M3: frames of a
	 * port without deferred queues are plain copies. */
	if (in->vq)
		sn_vqtx_free_bulk(pkts, keep);
	else
		free_copied_bulk(pkts, keep);
}

/* issue 6 (seed 003 §III-E): with CPU fair dropping, a burst dequeued at
 * worker CPU time t0 (ns) first loses the frames of flows above their CPU
 * share, and its measured CPU time (dequeue included) is apportioned
 * afterwards (sn_cpufair.h). */
static void burst_in(struct sn_switch *sw, const struct sn_port_table *t, struct sn_port *in,
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

int sn_switch_worker(void *arg)
{
	struct sn_switch *sw = arg;
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
	const uint16_t burst = (uint16_t)sw->burst;

	unsigned idle = 0;

	rcu_register_thread();
	sn_vqtx_worker_enter(sw->wk);
	sw->next_scan = rte_rdtsc() + sw->scan_tsc;
	/* Acquire pairs with the release store in sn_switch_stop(). */
	while (!__atomic_load_n(&sw->stop, __ATOMIC_ACQUIRE)) {
		struct sn_port_table *t = sn_ports_table_rcu(sw->reg);
		uint64_t now = rte_rdtsc();
		unsigned got = 0;

		sn_vqtx_set_now(now);       /* s10-P: hold-time clock, one rdtsc per iteration */
		if (sw->pl)
			sn_pipeline_run(sw->pl, t);   /* issue 6: due frames, arbiter */
		for (unsigned i = 0; i < t->n; i++) {
			struct sn_port *p = t->list[i];
			uint64_t bytes;
			uint16_t n;

			if (!sn_port_is_up(p))
				continue;
			if (p->type == SN_PORT_VHOST) {
				/* Multiqueue: every enabled TX queue this worker
				 * owns (sn_port.h). */
				for (uint32_t rdy = sn_port_txq_ready(p); rdy; rdy &= rdy - 1) {
					unsigned qi = (unsigned)__builtin_ctz(rdy);

					if (p->q[qi].owner != sw->wk)
						continue;
					/* after the owner check: no clock read
					 * for other workers' queues (ncore) */
					uint64_t t0 = sw->cf ? sn_cpufair_clock() : now;
					if (p->q[qi].vq) {
						uint16_t mx = burst;

						/* s11-V3 (issue 7): an opted-in guest is
						 * backpressured by its completions; while
						 * its port's rate limit is a wheel horizon
						 * ahead, its frames wait in its ring rather
						 * than being dropped at the horizon. */
						if (sw->pl && sn_vqtx_opted_in(p->q[qi].vq)) {
							mx = sn_pipeline_src_room(sw->pl, p, burst);
							if (!mx) {
								sn_vqtx_count_horizon_wait(p->q[qi].vq);
								continue;
							}
						}
						n = sn_vqtx_recv(p->q[qi].vq, sw->mp, pkts, mx, now,
								 &bytes);
					} else {
						n = rte_vhost_dequeue_burst(p->vid, (uint16_t)(2 * qi + 1),
									    sw->mp, pkts, burst);
						bytes = 0;
						for (uint16_t j = 0; j < n; j++)
							bytes += pkts[j]->pkt_len;
					}
					if (!n)
						continue;
					sn_port_count_txq(p, qi, n, bytes);
					burst_in(sw, t, p, pkts, n, now, t0);
					got += n;
				}
				continue;
			}
			if (sw->wk != 0)
				continue;   /* uplink RX queue 0: worker 0's */
			uint64_t t0 = sw->cf ? sn_cpufair_clock() : now;

			n = rte_eth_rx_burst(p->eth_port, 0, pkts, burst);
			if (n)
				burst_in(sw, t, p, pkts, n, now, t0);
			got += n;
		}
		if (sw->pl)
			sn_pipeline_flush(sw->pl);    /* issue 6: before t goes stale */
		bl_service(sw, t, now);
		vq_service(sw, t, now);
		/* Ends the read-side use of t and of every port's vid: pairs
		 * with synchronize_rcu() in sn_port.c (publish, destroy). */
		rcu_quiescent_state();
		if (sw->wk != 0) {
			/* aging: worker 0 only */
		} else if (sw->scan_pos < sw->mac_n) {
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
		else if (sw->idle_sleep_us && ++idle > IDLE_SPINS) {
			uint64_t t0 = rte_rdtsc();

			rte_delay_us_sleep(sw->idle_sleep_us);
			if (sw->pl)
				sn_pipeline_count_sleep(sw->pl, (rte_rdtsc() - t0) * 1000000000ull /
							rte_get_tsc_hz());
		}
	}
	/* Nothing of a guest stays held by a worker that is gone. */
	{
		struct sn_port_table *t = sn_ports_table_rcu(sw->reg);

		for (unsigned i = 0; i < SN_PORT_MAX; i++)
			if (sw->bl[i].n)
				bl_filter(&sw->bl[i], drop_all, NULL);
		if (sw->pl)
			sn_pipeline_drain(sw->pl);
		vq_service(sw, t, rte_rdtsc());
	}
	sn_vqtx_worker_exit(sw->wk);
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
	buckets = cfg->mac_table_size / MAC_WAYS;
	if (cfg->share) {
		sw->mt = cfg->share->mt;
	} else {
		sw->mt = rte_zmalloc("sn_mactab", sizeof(*sw->mt), RTE_CACHE_LINE_SIZE);
		if (sw->mt)
			sw->mt->b = rte_zmalloc("sn_mac", sizeof(*sw->mt->b) * buckets,
						RTE_CACHE_LINE_SIZE);
		sw->mt_owner = true;
	}
	sw->bl = rte_zmalloc("sn_backlog", sizeof(*sw->bl) * SN_PORT_MAX, RTE_CACHE_LINE_SIZE);
	if (!sw->mt || !sw->mt->b || !sw->bl) {
		if (sw->mt_owner && sw->mt) {
			rte_free(sw->mt->b);
			rte_free(sw->mt);
		}
		rte_free(sw->bl);
		rte_free(sw);
		errno = ENOMEM;
		return NULL;
	}
	if (sw->mt_owner) {
		for (unsigned i = 0; i < buckets; i++)
			rte_seqlock_init(&sw->mt->b[i].lock);
		sw->mt->nb = buckets;
		sw->mt->bucket_shift = 64 - (unsigned)__builtin_ctz(buckets);
		sw->mt->aging_tsc = (uint64_t)cfg->mac_aging_s * rte_get_tsc_hz();
	}
	sw->reg = reg;
	sw->mp = mp;
	sw->wk = cfg->worker;
	sw->txq = (uint16_t)cfg->worker;
	sw->gso.direct_pool = mp;    /* segment headers */
	sw->gso.indirect_pool = mp;  /* segment payloads: attached to the frame */
	sw->gso.gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO;
	sw->gso.flag = 0;            /* incrementing IP ids, like a NIC's TSO */
	sw->diag_malformed = DIAG_LINES;
	sw->diag_txfail = DIAG_LINES;
	sw->pl = cfg->pipeline;
	if (sw->pl)
		sn_pipeline_set_gso(sw->pl, pipeline_gso, sw);
	sw->burst = cfg->burst;
	sw->idle_sleep_us = cfg->idle_sleep_us;
	sw->cf = cfg->cpufair;
	sw->mac_n = sw->mt->nb;
	sw->aging_tsc = sw->mt->aging_tsc;
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
		rte_free(sw->mt->b);
		rte_free(sw->mt);
	}
	rte_free(sw->bl);
	rte_free(sw);
}

void sn_switch_mac_stats(const struct sn_switch *sw, struct sn_mac_stats *out)
{
	const struct sn_mac_stats *ms = &sw->mt->ms;

	out->entries = __atomic_load_n(&ms->entries, __ATOMIC_RELAXED);
	out->learned = __atomic_load_n(&ms->learned, __ATOMIC_RELAXED);
	out->aged = __atomic_load_n(&ms->aged, __ATOMIC_RELAXED);
	out->moves = __atomic_load_n(&ms->moves, __ATOMIC_RELAXED);
	out->full = __atomic_load_n(&ms->full, __ATOMIC_RELAXED);
}
