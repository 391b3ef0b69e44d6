/* sn_port.h — the port registry: vhost-user ports and the uplink.
 *
 * Three parties touch ports, each with its own contract:
 *  - MAIN (control) thread: the only one that adds/deletes ports. It keeps
 *    the authoritative registry (by slot) under reg->lock and publishes an
 *    immutable snapshot, struct sn_port_table, to the worker with
 *    rcu_assign_pointer(); the old snapshot (and a deleted port) is freed
 *    only after synchronize_rcu() (liburcu QSBR: the worker announces a
 *    quiescent state once per poll-loop iteration).
 *  - VHOST thread (DPDK's vhost-events thread): runs new_device /
 *    destroy_device / vring_state_changed. It finds the port by socket path
 *    under reg->lock and changes only port->vid and port->up/vring state.
 *    destroy_device clears `up` (release) and then waits synchronize_rcu(),
 *    so that when it returns to the vhost library no worker iteration can
 *    still be using the vid being destroyed. For a deferred port it then
 *    takes the TX ring back from the worker (sn_vqtx_stop: handshake, every
 *    held descriptor completed, vring base set) before returning.
 *  - WORKER lcore: reads the snapshot between quiescent states, loads
 *    port->up with acquire (pairs with the release in new_device, which
 *    stored vid before) and only then uses port->vid. It is the only
 *    writer of port->st (relaxed atomic stores; readers use relaxed loads
 *    and may see a counter set torn between fields, never a torn field).
 */
#ifndef SN_PORT_H
#define SN_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>

#include "sn_config.h"

#define SN_PORT_MAX 64

struct sn_vqtx;

enum sn_port_type { SN_PORT_VHOST, SN_PORT_UPLINK };

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
	SN_DROP_MAX
};

extern const char *const sn_drop_names[SN_DROP_MAX];

struct sn_port_stats {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	uint64_t drop[SN_DROP_MAX];
};

struct sn_port {
	/* Read-mostly: set by main before publication, immutable after. */
	char name[SN_CONFIG_NAME_MAX + 1];
	char path[SN_CONFIG_PATH_MAX + 1];
	enum sn_port_type type;
	bool client;
	uint16_t slot;        /* index in sn_port_table.by_slot */
	uint16_t eth_port;    /* uplink: ethdev port id */
	uint32_t gen;         /* unique per port object; MAC entries check it */
	bool registered;      /* vhost driver registered (main only) */
	struct sn_vqtx *vq;   /* "completion": "deferred": our own TX ring
	                       * (sn_vqtx.h); NULL = immediate (builtin
	                       * rte_vhost_dequeue_burst) */
	uint32_t max_hold_us; /* deferred: as configured (reported only) */
	uint32_t unmarked_max_hold_us; /* deferred: as in force (reported only) */

	/* Link state: written by the vhost thread under reg->lock (uplink: by
	 * main before publication); read by the worker and main (atomics). */
	int vid;              /* valid while up; store before up (release) */
	uint32_t up;          /* 1 = peer driver ready and vrings enabled */
	uint32_t running;     /* new_device seen, destroy_device not yet */
	uint32_t vring_off;   /* bit q set = vring q disabled by the driver */

	/* Counters: worker is the only writer. */
	struct sn_port_stats st __rte_cache_aligned;
} __rte_cache_aligned;

/* Immutable snapshot read by the worker (RCU). */
struct sn_port_table {
	unsigned n;
	struct sn_port *list[SN_PORT_MAX];     /* dense, poll order */
	struct sn_port *by_slot[SN_PORT_MAX];  /* NULL = free slot */
};

struct sn_ports;

/* Main thread. One registry per process (the vhost callbacks carry only a
 * vid, so they reach it through a process-wide pointer). NULL + errno. */
struct sn_ports *sn_ports_create(void);
/* Main thread: delete every port (uplink included), free the registry. */
void sn_ports_destroy(struct sn_ports *reg);

struct sn_vhost_opts {
	bool client;          /* mode "client" */
	bool deferred;        /* completion "deferred" */
	uint32_t max_hold_us; /* deferred: hold limit, 0 = none */
	uint32_t unmarked_max_hold_us; /* deferred: limit without the guest's
	                       * opt-in (sn_vqtx.h); 0 = the default */
};

/* Main thread. 0, or -EEXIST (name or path in use), -ENOSPC (64 ports),
 * -EINVAL, -ENOMEM, or the vhost library's failure (-EIO) with a log line. */
int sn_ports_add_vhost(struct sn_ports *reg, const char *name, const char *path,
		       const struct sn_vhost_opts *opts);
/* Main thread: the uplink is an already started ethdev. */
int sn_ports_add_uplink(struct sn_ports *reg, const char *name, uint16_t eth_port);
/* Main thread: -ENOENT, -EBUSY for the uplink unless force. A deferred
 * port's driver is unregistered while the port is still published, so its
 * destroy_device finds it and drains the held descriptors with the worker. */
int sn_ports_del(struct sn_ports *reg, const char *name, bool force);

/* Main thread: the current snapshot (main is its only writer, so it may
 * read it without a read-side section). */
const struct sn_port_table *sn_ports_table_main(const struct sn_ports *reg);
struct sn_port *sn_ports_find(const struct sn_ports *reg, const char *name);

/* Worker: the snapshot pointer (QSBR read side; valid until the caller's
 * next quiescent state). */
struct sn_port_table *sn_ports_table_rcu(struct sn_ports *reg);

static inline bool sn_port_is_up(const struct sn_port *p)
{
	return __atomic_load_n(&p->up, __ATOMIC_ACQUIRE) != 0;
}

/* Any thread: mkdir -p of the parent directory of path (new dirs 0700).
 * 0 or -errno. */
int sn_ports_mkdir_parents(const char *path);

/* Any thread: a consistent-per-field copy of the counters. */
void sn_port_stats_read(const struct sn_port *p, struct sn_port_stats *out);

#endif /* SN_PORT_H */
