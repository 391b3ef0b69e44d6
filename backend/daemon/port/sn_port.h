/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port.h — the port registry: vhost-user ports and the uplink.
 *
 * Three parties touch ports: MAIN (the control thread, the only one that
 * adds and deletes ports), VHOST (DPDK's vhost-events thread: the device
 * callbacks, sn_port_vhost.c, and for a net_vhost uplink the PMD's
 * link-state callback) and the datapath lcores (WORKER, and for the
 * uplink's direct enqueue the arbiter). MAIN publishes an immutable
 * snapshot, struct sn_port_table, with rcu_assign_pointer() and frees the
 * old snapshot (and a deleted port) only after synchronize_rcu() (liburcu
 * QSBR: each datapath lcore announces a quiescent state once per loop
 * iteration).
 *
 * struct sn_port, field by field:
 *
 *   field                 written by                 read by              synchronization
 *   --------------------  -------------------------  -------------------  -----------------------------
 *   name, path, type,     MAIN, before publication   anyone               immutable once published
 *   owner, client, slot,                                                  (rcu_assign_pointer: release)
 *   eth_port, tx_sync,
 *   gen, nq, vq, bound,
 *   bind, q[].owner,
 *   q[].vq (pointer)
 *   registered,           MAIN                       MAIN                 none (one thread)
 *   max_hold_us,          (hold limits: also at run
 *   unmarked_max_hold_us  time, sn_ports_set_holds)
 *   vid                   VHOST under reg->lock      WORKER after up,     stored before up; up's
 *                         (uplink: MAIN, before      MAIN                 release / acquire pair
 *                         publication)
 *   up                    VHOST under reg->lock      WORKER, MAIN         release store; acquire load
 *                                                                         (sn_port_is_up), then vid
 *   running, txq_started  VHOST under reg->lock      VHOST, memory hook   reg->lock; the hook runs on
 *                                                                         the same thread (see
 *                                                                         sn_port_memhook.c)
 *   vring_on              VHOST under reg->lock      WORKER, MAIN         relaxed (the library checks
 *                                                                         a vring's state under its
 *                                                                         own lock)
 *   txq_ready             VHOST under reg->lock      WORKER               release once queue i is
 *                                                                         enabled (and its sn_vqtx
 *                                                                         started); acquire in
 *                                                                         sn_port_txq_ready()
 *   uplink_vid            link-state callback        datapath lcores,     release exchange; acquire
 *                         (VHOST) and MAIN's first   between quiescent    load (sn_port_uplink_vid);
 *                         call, under                states               a withdrawal waits
 *                         uplink_lsc_lock                                 synchronize_rcu() before
 *                                                                         the callback returns
 *   rxview, rxmap,        VHOST: new_device while    WORKER (queue 0      published by up's release;
 *   rxview_on             down; cleared in           delivery)            rxview_on relaxed, cleared
 *                         destroy_device                                  after the grace period,
 *                                                                         before the library unmaps
 *   st (port totals)      datapath lcores:           anyone:              relaxed atomics: a set may be
 *                         sn_port_ctr_add()          sn_port_stats_read   torn between fields, never
 *                         (fetch-add)                                     a field
 *   q[i].st.rx_*,         the owner of TX queue i
 *   quota_mbufs_dropped    anyone               relaxed store, sole writer
 *                         (uplink: of RX queue i)
 *   q[i].st.tx_*,         any worker delivering to   anyone               relaxed fetch-add
 *   ring_full             RX queue i
 *
 * struct sn_port_table: built and published by MAIN, immutable; datapath
 * lcores read it with sn_ports_table_rcu() between quiescent states, MAIN
 * with sn_ports_table_main() (its only writer).
 *
 * destroy_device clears up (release) and then waits synchronize_rcu(), so
 * that when it returns to the vhost library no worker iteration can still
 * be using the vid being destroyed; for a deferred port it then takes the
 * TX ring back from the worker (sn_vqtx_stop: handshake, every held
 * descriptor completed, vring base set) before returning.
 *
 * Queues (VIRTIO_NET_F_MQ, config "queues" = nq, 1..SN_PORT_QMAX). Queue
 * pair i of a vhost-user port is vring 2i (VM RX: we enqueue) and vring
 * 2i+1 (VM TX: we take). struct sn_portq is the unit of ownership:
 *  - Every TX queue is owned by exactly one worker lcore, q[i].owner (a
 *    worker index: 0 in layouts 1core/2core; in ncore from the config's
 *    ports[].workers, else balanced). Only the owner polls the queue, owns
 *    its sn_vqtx ring state (deferred: held descriptors, completions, the
 *    stop handshake; sn_vqtx.h contracts hold per queue) and counts the
 *    port's ingress (rx_*, ingress drops). The owner is fixed while the
 *    port exists.
 *  - RX queue i is written (rte_vhost_enqueue_burst, which takes the
 *    library's per-vring lock, vq->access_lock in DPDK 22.11) by whatever
 *    worker delivers to the port: in layout ncore several workers may
 *    enqueue into one RX ring at once, serialized by that lock (PSPAT's
 *    "dispatch" done by the producer); hence the fetch-adds above.
 *  - The uplink: its queue q (nq = its RX queue count, sn_uplink.h) is
 *    ethdev RX queue q, polled by its owner q[q].owner = q mod W only,
 *    which alone writes q[q].st.rx_*; worker k transmits on uplink TX
 *    queue k, the arbiter lcore on queue W (sn_pipeline.h).
 *  - The RX queue of a frame is a stable flow hash (sn_port_flow_hash)
 *    over the enabled RX queues, so a flow stays in order on one queue
 *    while the set of enabled queues does not change.
 * Port totals (st) are the sums of the queues'.
 */
#ifndef SN_PORT_H
#define SN_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>

#include "sn_bind.h"
#include "sn_config.h"
#include "sn_log.h"
#include "sn_vring.h"

/* Port slots (vhost-user ports and the uplink): sn_config_port_slots at
 * run time, every per-port table sized from it; at most this. */
#define SN_PORT_SLOTS_MAX (SN_CONFIG_PORTS_MAX + 1)
#define SN_PORT_QMAX 8   /* queue pairs per vhost-user port (config "queues") */
#define SN_PORT_WORKERS_MAX 8   /* worker lcores (layout ncore), == SN_VQTX_WORKERS_MAX */

struct sn_vqtx;
struct sn_vqtx_gmap;
struct rte_mbuf;

enum sn_port_type { SN_PORT_VHOST, SN_PORT_UPLINK };

/* Who a port belongs to (doc/configuration.md, "Reload"): the config file
 * (its ports[] and the uplink: config.reload adds, changes and removes
 * these) or a run-time client (port.add, the libvirt hook: a reload
 * leaves these alone). Named by sn_port_owner_names ("file", "rpc"). */
enum sn_port_owner { SN_PORT_OWNER_RPC = 0, SN_PORT_OWNER_FILE, SN_PORT_OWNER_MAX };
extern const char *const sn_port_owner_names[SN_PORT_OWNER_MAX];

enum sn_drop {
	SN_DROP_NO_MBUF,      /* ingress: mempool empty (uplink PMD; a guest's
	                       * frames wait in its TX ring instead) */
	SN_DROP_RING_FULL,    /* egress: destination ring full (partial enqueue/tx) */
	SN_DROP_UNKNOWN_DST,  /* ingress: flooded frame with no port up to take it */
	SN_DROP_MALFORMED,    /* ingress: runt frame, multicast source MAC */
	SN_DROP_PORT_DOWN,    /* egress: learned destination not ready */
	SN_DROP_HAIRPIN,      /* ingress: destination is the ingress port */
	SN_DROP_GSO_FAILED,   /* egress: GSO frame an ethdev can't take that we
	                       * could not segment (not TCP/IPv4, bad headers,
	                       * out of mbufs); see sn_switch.c */
	SN_DROP_SPOOFED,      /* ingress: source MAC or IP outside the port's
	                       * binding (sn_bind.h) */
	SN_DROP_SPOOFED_ARP,  /* ingress: ARP with a foreign sender address */
	SN_DROP_SPOOFED_ND,   /* ingress: neighbour discovery with a foreign
	                       * address or link-layer option */
	SN_DROP_QUOTA_BACKLOG, /* ingress: deferred frame whose destination was
	                       * full, its port holding its backlog quota */
	SN_DROP_MAX
};

extern const char *const sn_drop_names[SN_DROP_MAX];

struct sn_port_stats {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	uint64_t drop[SN_DROP_MAX];
	/* Frames whose source MAC was not learned (still forwarded): the
	 * port's MAC-entry quota or bucket share was used up (quota_macs), or
	 * the move policy kept the MAC on another port (move_refused). */
	uint64_t quota_macs, move_refused;
};

/* Per queue pair counters (see "Queues" above for the writers). */
struct sn_portq_stats {
	uint64_t rx_packets, rx_bytes;   /* TX queue: frames taken from the guest */
	uint64_t rx_bursts;              /* TX queue: polls that took >= 1 frame
	                                  * (rx_packets / rx_bursts = mean burst) */
	uint64_t tx_packets, tx_bytes;   /* RX queue: frames delivered to the guest */
	uint64_t ring_full;              /* RX queue: dropped, its ring was full */
	uint64_t quota_mbufs_dropped;    /* TX queue of an immediate port: frames
	                                  * dequeued beyond its mbuf quota, freed */
};

struct sn_portq {
	/* Read-mostly: set by main before publication. */
	unsigned owner;       /* worker index polling the TX queue (config
	                       * ports[].workers, else balanced; 0 in 1core/2core) */
	struct sn_vqtx *vq;   /* deferred: this TX queue's ring state; else NULL */
	/* Counters: see the contract above. */
	struct sn_portq_stats st __rte_cache_aligned;
} __rte_cache_aligned;

/* A port's budgets on the shared pools (doc/isolation.md): at most this
 * many units of each pool at once, counted per port (mbufs and extbuf
 * wrappers of its frames; held descriptors per TX queue; switch backlog
 * entries; timing-wheel nodes; flow-table entries; MAC entries). Resolved
 * (never 0) from the config section "quota" and policy.ports.<name>.quota
 * when the port is created and at each policy publication: MAIN stores
 * each field (relaxed), the datapath lcores load it (relaxed) once per
 * burst, so a change takes effect within a loop iteration. */
struct sn_port_quota {
	uint32_t mbufs;     /* mbufs its frames hold, all queues */
	uint32_t held;      /* deferred: descriptors held, per TX queue */
	uint32_t backlog;   /* switch backlog entries, all destinations */
	uint32_t wheel;     /* timing-wheel nodes, per worker */
	uint32_t flows;     /* flow-table entries, per worker */
	uint32_t macs;      /* MAC table entries */
};

struct sn_port {
	/* Read-mostly: set by main before publication, immutable after. */
	char name[SN_CONFIG_NAME_MAX + 1];
	char path[SN_CONFIG_PATH_MAX + 1];
	enum sn_port_type type;
	enum sn_port_owner owner;
	bool client;
	uint16_t slot;        /* index in sn_port_table.by_slot */
	uint16_t eth_port;    /* uplink: ethdev port id */
	bool tx_sync;         /* uplink: its PMD is done with every mbuf when
	                       * rte_eth_tx_burst() returns (sn_port_tx_sync());
	                       * frames of deferred ports then go out
	                       * zero-copy from the worker */
	uint32_t gen;         /* unique per port object; MAC entries check it */
	bool registered;      /* vhost driver registered (main only) */
	struct sn_vqtx *vq;   /* "completion": "deferred": == q[0].vq, our own
	                       * TX ring of queue 0 (sn_vqtx.h); NULL =
	                       * immediate (builtin rte_vhost_dequeue_burst).
	                       * Each queue's own ring is q[i].vq. */
	uint16_t nq;          /* queue pairs offered ("queues"); uplink: RX queues */
	uint32_t max_hold_us; /* deferred: as configured (reported only; MAIN) */
	uint32_t unmarked_max_hold_us; /* deferred: as in force (reported only; MAIN) */
	struct sn_port_quota quota;    /* budgets (see its struct) */
	bool bound;                    /* sn_bind_active(&bind): checked per frame */
	struct sn_bind bind;           /* allowed_macs / allowed_ips (VM ports) */

	/* Link state: written by the vhost thread under reg->lock (uplink: by
	 * main before publication); read by the worker and main (atomics). */
	int vid;              /* valid while up; store before up (release) */
	uint32_t up;          /* 1 = peer driver ready and vrings enabled */
	uint32_t running;     /* new_device seen, destroy_device not yet */
	uint32_t vring_on;    /* bit v set = vring v enabled by the driver */
	uint32_t txq_ready;   /* bit i: TX queue i may be polled (release) */
	uint32_t txq_started; /* deferred: bit i = q[i].vq started (vhost thread) */
	int uplink_vid;       /* uplink on net_vhost: its peer's vid while
	                       * connected, else -1 (any other PMD: always -1);
	                       * see the table above. */
	/* Deferred ports: queue 0's RX ring, for the worker's
	 * sn_vring_rx_prefetch() before each enqueue into it (lifetime: the
	 * table above). The view reads the rings through rxmap, our own
	 * mapping of the guest memory (sn_vqtx.h), made and unmapped with
	 * it, and prefetches buffers at the library's addresses (hints:
	 * never a fault); after a memory table change it keeps the table it
	 * was made with (buffers in new regions are not prefetched). */
	uint32_t rxview_on;
	struct sn_vring_rxview rxview;
	struct sn_vqtx_gmap *rxmap;

	/* Live migration, deferred ports (sn_port_migrate.c): SEND_RARP
	 * messages the port's device received, and of them those whose MAC
	 * the switch learned on this port. VHOST stores (relaxed), any
	 * thread loads. */
	uint64_t rarp_received, rarp_learned;
	/* vhost-user ports: SET_MEM_TABLE messages refused before the
	 * library applied them (a region it would fail to map after
	 * dropping the current table, sn_port_memhook.c). VHOST stores
	 * (relaxed), any thread loads. */
	uint64_t mem_table_rejected;
	/* vhost-user ports: the rate limit of this port's connection and
	 * link lines (sn_log.h), its own so that a front-end reconnecting in
	 * a loop does not hide another port's events. VHOST thread. */
	struct sn_log_rl log_rl;

	/* Counters: datapath lcores, sn_port_ctr_add() (see the table). */
	struct sn_port_stats st __rte_cache_aligned;

	struct sn_portq q[SN_PORT_QMAX];   /* [0, nq) in use */
} __rte_cache_aligned;

/* Immutable snapshot read by the worker (RCU). Both arrays have
 * sn_config_port_slots entries and live in the same allocation (mem). */
struct sn_port_table {
	uint64_t seq;                          /* publication number, from 1:
	                                        * a new table never repeats
	                                        * one (a freed table's address
	                                        * may come back) */
	unsigned n;
	struct sn_port **list;                 /* dense, poll order, [0, n) */
	struct sn_port **by_slot;              /* NULL = free slot */
	struct sn_port *mem[];
};

struct sn_ports;

/* Main thread. One registry per process (the vhost callbacks carry only a
 * vid, so they reach it through a process-wide pointer). NULL + errno. */
struct sn_ports *sn_ports_create(void);
/* Main thread: delete every port (uplink included), free the registry. */
void sn_ports_destroy(struct sn_ports *reg);

/* What makes the switch learn a migrated guest's MAC on port p (its
 * deferred port got VHOST_USER_SEND_RARP, sn_port_migrate.c): called on the
 * VHOST thread with the library's queue locks held, so it must not wait
 * for a worker. 0 = learned, else -errno. */
typedef int (*sn_port_announce_fn)(void *arg, const struct sn_port *p, const uint8_t mac[6]);
/* Main thread, any time (serialised with the hook; NULL fn: none, the
 * message is only counted). */
void sn_ports_set_announce(struct sn_ports *reg, sn_port_announce_fn fn, void *arg);

/* The MAC table's view of port lifetimes (MAIN): added(p) once a port is
 * published (install its allowed_macs as static entries, set its entry
 * quota); deleted(slot) once a deleted port is out of the workers' sight
 * (its entries go). Neither may fail the port operation. */
struct sn_port_mac_hooks {
	void (*added)(void *arg, const struct sn_port *p);
	void (*deleted)(void *arg, uint16_t slot);
};
/* Main thread, before any port is added (NULL h: none). `added` also
 * runs for every port after each policy publication (its quota.macs may
 * have changed: sn_ports_quota_apply). */
void sn_ports_set_mac_hooks(struct sn_ports *reg, const struct sn_port_mac_hooks *h, void *arg);

struct sn_vhost_opts {
	bool client;          /* mode "client" */
	bool deferred;        /* completion "deferred" */
	uint32_t max_hold_us; /* deferred: hold limit, 0 = none */
	uint32_t unmarked_max_hold_us; /* deferred: limit without the guest's
	                       * opt-in (sn_vqtx.h); 0 = the default */
	uint16_t queues;      /* queue pairs 1..SN_PORT_QMAX (0 = 1) */
	const uint8_t *workers; /* [queues]: owner worker of each TX queue, each
	                       * < sn_ports_workers(); NULL = balanced (the worker
	                       * owning the fewest TX queues, lowest first) */
	const struct sn_bind *bind; /* allowed_macs / allowed_ips; NULL = none */
	enum sn_port_owner owner;   /* zero: SN_PORT_OWNER_RPC */
};

/* Main thread, before any vhost-user port is added: the number of worker
 * lcores TX queues are assigned to (1..SN_PORT_WORKERS_MAX; default 1).
 * 0, -EINVAL, -EBUSY (ports exist). */
int sn_ports_set_workers(struct sn_ports *reg, unsigned n);
unsigned sn_ports_workers(const struct sn_ports *reg);
/* Main thread, before any vhost-user port is added: the directory of the
 * durable records of deferred TX queues (dir/<port>.txq<i>.rec, created
 * with the directory if absent; sn_vqtx_set_record). "" or NULL: no
 * records. 0, -EINVAL (longer than SN_PORT_STATE_DIR_MAX), -EBUSY. */
#define SN_PORT_STATE_DIR_MAX 64
int sn_ports_set_state_dir(struct sn_ports *reg, const char *dir);

/* Main thread. 0, or -EEXIST (name or path in use), -ENOSPC (already
 * datapath.max_ports vhost-user ports, or no free slot),
 * -EINVAL, -ENOMEM, server mode: -ENOTSOCK (path exists, not a socket),
 * -EADDRINUSE (a live socket is there; neither is ever removed), or the
 * vhost library's failure (-EIO) with a log line. */
int sn_ports_add_vhost(struct sn_ports *reg, const char *name, const char *path,
		       const struct sn_vhost_opts *opts);
/* Main thread: the uplink is an already started ethdev with n_rxq RX
 * queues (1..SN_PORT_QMAX): its q[q] is RX queue q, owned by worker
 * q mod the registry's worker count. */
/* True for the PMDs known to copy (or write) a frame and free its mbufs
 * inside rte_eth_tx_burst(), keeping no reference after it returns:
 * net_vhost (rte_vhost_enqueue_burst copies into the peer's ring) and
 * net_null (net_tap also writev()s and frees, but its 22.11 TX crashed on
 * guest external buffers with offload requests, so it is left out). Their frames may be guest buffers of a deferred
 * port (zero-copy): the descriptor completes before tx_burst returns, on
 * the calling lcore. Any other PMD (hardware DMA, net_ring) may keep the
 * mbuf until a later TX completion, beyond a device stop: it gets a copy.
 * MAIN, before the uplink is published. */
bool sn_port_tx_sync(uint16_t eth_port);
/* A datapath lcore registered with QSBR,
 * between quiescent states: the vid to enqueue to when the uplink is a
 * net_vhost ethdev whose peer is connected (-1: transmit through the PMD).
 * Acquire: pairs with the release store of the link-state callback. */
static inline int sn_port_uplink_vid(const struct sn_port *up)
{
	return __atomic_load_n(&up->uplink_vid, __ATOMIC_ACQUIRE);
}
/* Same caller, vid from sn_port_uplink_vid() in the same interval
 * between quiescent states: copy n frames into the peer's RX ring of TX
 * queue txq (vring 2 txq, as net_vhost maps it) with the vhost library,
 * as the PMD's tx_burst would (32-frame calls, stop at the first short
 * one), without the PMD's per-frame statistics and its per-mbuf free.
 * Returns how many were copied; every mbuf stays the caller's (sent and
 * unsent: free them). Not for frames asking for VLAN insertion (the PMD
 * does that in software). */
uint16_t sn_port_uplink_enqueue(int vid, uint16_t txq, struct rte_mbuf **pkts, uint16_t n);
int sn_ports_add_uplink(struct sn_ports *reg, const char *name, uint16_t eth_port,
			uint16_t n_rxq);
/* Main thread: -ENOENT, -EBUSY for the uplink unless force. A deferred
 * port's driver is unregistered while the port is still published, so its
 * destroy_device finds it and drains the held descriptors with the worker. */
int sn_ports_del(struct sn_ports *reg, const char *name, bool force);
/* Main thread: sn_ports_del() (not forced) of a port deleted for good
 * (port.del, config.reload): its durable records go too. A daemon that
 * exits keeps them for its next start. Same returns. */
int sn_ports_remove(struct sn_ports *reg, const char *name);
/* Main thread, a deferred vhost-user port while it runs (config.reload):
 * its hold limits in place on every TX queue (sn_vqtx_set_holds; 0
 * unmarked = the default), in force for every held frame once this
 * returns (it waits a grace period). 0, -ENOENT, -EINVAL (the uplink, an
 * immediate port, out of range). */
int sn_ports_set_holds(struct sn_ports *reg, const char *name, uint32_t max_hold_us,
		       uint32_t unmarked_max_hold_us);

/* Main thread: the current snapshot (main is its only writer, so it may
 * read it without a read-side section). */
const struct sn_port_table *sn_ports_table_main(const struct sn_ports *reg);
struct sn_port *sn_ports_find(const struct sn_ports *reg, const char *name);

/* Worker: the snapshot pointer (QSBR read side; valid until the caller's
 * next quiescent state). */
struct sn_port_table *sn_ports_table_rcu(struct sn_ports *reg);

/* Any datapath worker: add to a port or queue counter that several
 * workers may write (layout ncore); readers use relaxed loads. */
static inline void sn_port_ctr_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static inline bool sn_port_is_up(const struct sn_port *p)
{
	return __atomic_load_n(&p->up, __ATOMIC_ACQUIRE) != 0;
}

/* Any thread: mkdir -p of the parent directory of path (new dirs 0700).
 * 0 or -errno. */
int sn_ports_mkdir_parents(const char *path);

/* Any thread: a consistent-per-field copy of the counters. */
void sn_port_stats_read(const struct sn_port *p, struct sn_port_stats *out);
void sn_portq_stats_read(const struct sn_port *p, unsigned qi, struct sn_portq_stats *out);

/* WORKER: TX queue i of a vhost-user port may be polled (acquire; pairs
 * with the release in sn_port_vhost.c when the queue was enabled/started). */
static inline uint32_t sn_port_txq_ready(const struct sn_port *p)
{
	return __atomic_load_n(&p->txq_ready, __ATOMIC_ACQUIRE);
}

/* WORKER: count n frames of `bytes` bytes in total taken from TX queue qi. */
void sn_port_count_txq(struct sn_port *p, unsigned qi, uint16_t n, uint64_t bytes);
/* WORKER, owner of TX queue qi of immediate port p: count n frames it
 * freed as beyond the port's mbuf quota (quota.mbufs.dropped). */
void sn_port_count_txq_quota_dropped(struct sn_port *p, unsigned qi, uint16_t n);

/* Any thread, pure: stable flow hash of a frame (IPv4/IPv6 5-tuple for
 * TCP/UDP/SCTP non-fragments, addresses + protocol for other IP, MAC
 * pair + EtherType otherwise; one 802.1Q tag skipped). */
uint32_t sn_port_flow_hash(const struct rte_mbuf *m);

/* WORKER, port up: deliver pkts to the VM (vhost-user port p), each frame
 * to the enabled RX queue its flow hash picks. Like
 * rte_vhost_enqueue_burst it copies and returns k, the number taken;
 * pkts is reordered so the taken frames are pkts[0, k) and the rest
 * pkts[k, n), each queue's frames in their original order. Counts the
 * RX queues' tx_* counters (not the port's: the caller does). */
uint16_t sn_port_vhost_enqueue(struct sn_port *p, struct rte_mbuf **pkts, uint16_t n);
/* WORKER: sn_port_vhost_enqueue() that also adds the bytes of the
 * taken frames to *bytes (the RX queues' own sum, so the caller's port
 * counters need no second pass over the frames). */
uint16_t sn_port_vhost_enqueue_bytes(struct sn_port *p, struct rte_mbuf **pkts, uint16_t n,
				     uint64_t *bytes);
/* WORKER: count one frame the caller drops as ring_full on p's RX queue
 * that sn_port_vhost_enqueue() picked for it. */
void sn_port_count_rxq_full(struct sn_port *p, const struct rte_mbuf *m);

#endif /* SN_PORT_H */
