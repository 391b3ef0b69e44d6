/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_impl.h — the switch's state, shared by its files: sn_switch.c
 * (worker loop, staging), sn_switch_bl.c (backlogs), sn_switch_poll.c
 * (poll set), sn_switch_gso.c (ethdev egress, GSO segmentation) and
 * sn_switch_mac.c (the MAC table's outside view). Not for other modules:
 * their interface is sn_switch.h. Everything below except `stop` belongs
 * to the worker.
 */
#ifndef SN_SWITCH_IMPL_H
#define SN_SWITCH_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_gso.h>
#include <rte_mbuf.h>

#include "sn_config.h"
#include "sn_port.h"
#include "sn_switch.h"

#define SN_SWITCH_GSO_FLAGS (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)
#define SN_SWITCH_DIAG_LINES 16    /* frames logged per cause (bounded) */
#define SN_SWITCH_BACKLOG_MAX 1024u /* frames waiting per vhost destination (pow2) */

/* The worker's poll set (sn_switch_poll.c): one entry per vhost-user TX
 * queue this worker owns, busy ones polled every iteration, quiet ones
 * swept SN_SWITCH_SWEEP per iteration; e[], busy[] and swept[] hold
 * sn_config_port_slots * SN_PORT_QMAX entries, eth[] sn_config_port_slots
 * (allocated at create). */
#define SN_SWITCH_QUIET_AFTER 1024u /* empty polls that make a queue quiet */
#define SN_SWITCH_SWEEP 8u          /* quiet queues polled per iteration */

struct sn_switch_pollq {
	struct sn_port *p;
	uint16_t qi;                 /* TX queue of p */
	bool busy;                   /* in busy[] */
	bool mb_held;                /* immediate: last poll found no mbuf room
	                              * (its hit is counted once per run) */
	uint32_t empty;              /* consecutive empty polls */
};

/* The mbufs an immediate port's frames hold in this worker's pipeline,
 * charged to its slot of the ports' mbuf quota (sn_switch_poll.c,
 * "Immediate ports' mbufs"). */
struct sn_switch_mbc {
	uint32_t lvl;                /* units charged now by this worker */
	uint32_t gen;                /* port generation lvl belongs to */
	uint64_t seen;               /* poll set (sn_port_table.seq) with a queue of it */
	uint16_t hint;               /* segments per frame of recent bursts (>= 1) */
	uint16_t hold;               /* most segments of a frame charged while held */
};

struct sn_switch_pollset {
	uint64_t seq;                /* sn_port_table.seq built from; 0 = none */
	unsigned n;                  /* entries e[0, n), table order */
	unsigned nbusy;              /* busy[0, nbusy): indexes into e */
	unsigned cursor;             /* next entry of the sweep */
	unsigned nswept;             /* swept[]: quiet entries polled this
	                              * iteration (serviced with the busy ones) */
	unsigned neth;               /* ethdev ports of the table */
	struct sn_switch_pollq *e;
	uint32_t *busy;
	uint32_t *swept;
	struct sn_port **eth;
	struct sn_switch_mbc *mb;    /* [sn_config_port_slots] */
};

/* Frames from deferred ports waiting for one vhost destination; src[i]
 * is the source port slot of m[i] (its entry in sn_switch.bl_src). */
struct sn_switch_backlog {
	uint32_t gen;          /* destination port generation */
	uint32_t head, n;      /* ring of SN_SWITCH_BACKLOG_MAX */
	uint64_t next_check;   /* earliest hold deadline inside (TSC) */
	struct rte_mbuf *m[SN_SWITCH_BACKLOG_MAX];
	uint16_t src[SN_SWITCH_BACKLOG_MAX];
};

/* The frames of one burst for one destination port. */
struct sn_switch_stage {
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
	struct sn_cpufair *cf;       /* datapath.cpu_fair_pct; NULL = off */
	unsigned burst;
	unsigned idle_sleep_us;      /* 0 = busy poll (config datapath.idle_sleep_us) */
	unsigned wk;                 /* worker index: polls the TX queues it owns */
	uint16_t txq;                /* uplink TX queue (= wk) */
	uint64_t scan_tsc;
	struct sn_mac *mt;           /* shared (owned by the first switch) */
	struct sn_quota *mq;         /* its entries per port slot (same owner) */
	struct sn_quota *mbq;        /* the ports' mbuf quota (sn_port_quota.h), or NULL;
	                              * set when the worker starts */
	bool mt_owner;
	unsigned mac_n;              /* buckets: the aging scan's range */

	/* Main -> worker. */
	uint32_t stop __rte_cache_aligned;

	/* Worker only. */
	uint64_t next_scan __rte_cache_aligned;
	unsigned scan_pos;           /* == mac_n: no scan in progress (worker 0) */
	unsigned n_touched;
	unsigned diag_malformed, diag_txfail; /* log lines left (SN_SWITCH_DIAG_LINES) */
	/* Per destination slot, sn_config_port_slots entries each, allocated
	 * at create. */
	uint16_t *touched;           /* slots staged in this burst, [n_touched] */
	struct sn_switch_stage *stage;
	struct sn_switch_backlog *bl;
	/* Backlog entries each source slot holds over all destinations of
	 * this worker (at most its sn_port.quota.backlog, loaded once per
	 * burst in flush()). */
	uint32_t *bl_src;
	/* Bitmap of backlogs that may be non-empty: bit i of bl_busy[i / 64]
	 * for bl[i]; bit w of bl_any: bl_busy[w] != 0. An iteration with no
	 * backlog reads bl_any only. */
	uint64_t bl_any;
	uint64_t *bl_busy;
	struct sn_switch_pollset ps;
};

/* Log one frame's metadata while *budget lasts (diagnostics, bounded). */
void sn_switch_diag(unsigned *budget, const char *port, const char *what,
		    const struct rte_mbuf *m);
/* Send the staged frames of an ethdev destination (plain ones in bursts,
 * GSO ones segmented), count them, free every staged reference. */
void sn_switch_flush_eth(struct sn_switch *sw, struct sn_port *p, struct sn_switch_stage *s);
/* Segment a TSO frame m for ethdev p and send it: 1 = every segment sent,
 * 0 = not all sent (ring full), -1 = cannot segment. m stays the
 * caller's. */
int sn_switch_gso_tx(struct sn_switch *sw, const struct sn_port *p, struct rte_mbuf *m);

/* sn_switch_bl.c, worker only. push: queue m (source slot src, hold
 * deadline) on backlog b of vhost destination dst (b->n below
 * SN_SWITCH_BACKLOG_MAX; the caller checked src's quota), taking a
 * reference. drain: hand what p takes to its RX ring, oldest first.
 * service: every iteration, deliver, expire, or drop the backlogs of
 * vanished or down destinations. purge_queue: a deferred queue is
 * stopping: drop its frames from every backlog. drop_all: drop every
 * frame of b (the worker is leaving). */
void sn_switch_bl_push(struct sn_switch *sw, struct sn_switch_backlog *b, const struct sn_port *dst,
		       struct rte_mbuf *m, uint16_t src, uint64_t deadline);
void sn_switch_bl_drain(struct sn_switch *sw, struct sn_switch_backlog *b, struct sn_port *p);
void sn_switch_bl_service(struct sn_switch *sw, const struct sn_port_table *t, uint64_t now);
struct sn_vqtx;
void sn_switch_bl_purge_queue(struct sn_switch *sw, struct sn_vqtx *q);
void sn_switch_bl_drop_all(struct sn_switch *sw, struct sn_switch_backlog *b);

/* sn_switch.c: switch a burst that came in on port in (CPU fair
 * dropping first when configured); t0 = the worker CPU clock at its
 * dequeue. */
void sn_switch_burst_in(struct sn_switch *sw, const struct sn_port_table *t, struct sn_port *in,
			struct rte_mbuf **pkts, uint16_t n, uint64_t now, uint64_t t0);

/* sn_switch_poll.c. Create: allocate the poll set (0 or -ENOMEM);
 * fini frees it. Worker only, every iteration, between quiescent states:
 * sync rebuilds the set when t is a table it was not built from (every
 * entry busy again); poll_vhost polls the busy entries and the sweep's
 * quiet ones, switches what they hold and returns the frames taken. */
int sn_switch_poll_init(struct sn_switch *sw);
void sn_switch_poll_fini(struct sn_switch *sw);
void sn_switch_poll_sync(struct sn_switch *sw, const struct sn_port_table *t);
/* napping: the worker naps between iterations (idle): sweep every entry. */
unsigned sn_switch_poll_vhost(struct sn_switch *sw, const struct sn_port_table *t,
			      struct rte_mbuf **pkts, uint64_t now, bool napping);

#endif /* SN_SWITCH_IMPL_H */
