/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch.h — the L2 learning switch and a worker lcore's poll loop.
 *
 * Each worker lcore runs sn_switch_worker() on its own struct sn_switch
 * (layouts 1core/2core: one; ncore: W, sharing one MAC table): it
 * busy-polls the VM TX queues and the uplink RX queues it owns (sn_port.h
 * "Queues", sn_uplink.h: uplink RX queue q is worker q mod W's) of the
 * RCU-published port table, learns source
 * MACs, forwards known unicast, floods broadcast/multicast/unknown unicast
 * to every other up port (never back out of the ingress port) and counts
 * every packet once.
 *
 * Concurrency contract:
 *  - Staging buffers and backlogs belong to their worker alone. The MAC
 *    table is shared by the workers: per-bucket rte_seqlock, lock-free
 *    readers, locked writers (contract in sn_mac.h); aging runs on
 *    worker 0.
 *  - Counters (per port in sn_port.st: sn_port_ctr_add; the MAC table's:
 *    fetch-add) may have several writers; sn_switch_mac_stats()
 *    may be called from any thread and reads them with relaxed loads.
 *  - sn_switch_stop() (main) sets a flag the worker reads each iteration
 *    (release/acquire); the main thread then waits with
 *    rte_eal_wait_lcore() before destroying anything.
 */
#ifndef SN_SWITCH_H
#define SN_SWITCH_H

#include <stdint.h>

#include "sn_mac.h"

struct rte_mempool;
struct sn_cpufair;
struct sn_pipeline;
struct sn_ports;
struct sn_switch;

struct sn_switch_config {
	unsigned burst;            /* <= SN_CONFIG_BURST_MAX */
	unsigned mac_table_size;   /* entries, power of two >= 16 */
	unsigned mac_aging_s;
	unsigned idle_sleep_us;    /* nap after IDLE_SPINS empty polls; 0 = busy poll */
	struct sn_pipeline *pipeline; /* policy enforcement: this worker's
	                               * instance; NULL = none */
	unsigned worker;           /* worker index (0..W-1), uplink TX queue */
	struct sn_switch *share;   /* NULL: create the MAC table; else use the
	                            * table of this switch (freed with it, so
	                            * destroy it last) */
	struct sn_cpufair *cpufair;   /* CPU fair dropping; NULL = off; the
	                               * worker owns it while it runs */
	enum sn_mac_move mac_move;    /* datapath.mac_move (table creator only) */
};

/* Main thread, before the worker starts. NULL + errno. */
struct sn_switch *sn_switch_create(const struct sn_switch_config *cfg,
				   struct sn_ports *reg, struct rte_mempool *mp);
/* lcore_function_t for rte_eal_remote_launch(); returns 0 after stop. */
int sn_switch_worker(void *sw);

/* " test-hooks" in a build with the test hooks (meson -Dtest_hooks=true:
 * SCHEDNICD_TEST_STALL, sn_switch.c), else "": for schednicd --version. */
const char *sn_switch_test_hooks(void);
/* Main thread: ask the worker to return (then rte_eal_wait_lcore()). */
void sn_switch_stop(struct sn_switch *sw);
/* Main thread, after the worker returned (or never started). */
void sn_switch_destroy(struct sn_switch *sw);
/* Any thread (the VHOST thread for a migrated guest, sn_port_migrate.c),
 * while sw exists: learn mac on port p now, as a frame from it would
 * (one bucket's write lock at most, never a wait for a worker). 0, or
 * -EINVAL (multicast or zero MAC), -ENOSPC (its bucket is full or the
 * port's MAC quota used up), -EPERM (p's allowed_macs do not hold mac,
 * or the move policy keeps it on another port). */
struct sn_port;
int sn_switch_learn(struct sn_switch *sw, const struct sn_port *p, const uint8_t mac[6]);
/* MAIN, the port registry's MAC hooks (sn_port_mac_hooks), with the
 * workers running: a published VM port p gets its MAC-entry budget
 * (reserve: its allowed_macs; cap: p->quota.macs) and its allowed_macs as
 * static entries (taking learned entries of other ports, never another
 * port's static entry: that one is logged and left, sn_mac.h); a deleted
 * port's slot loses every entry and gets the default budget back (no
 * reserve, no cap: the uplink's). */
void sn_switch_port_added(struct sn_switch *sw, const struct sn_port *p);
void sn_switch_port_deleted(struct sn_switch *sw, uint16_t slot);
/* Any thread: MAC entries port slot holds now. */
uint32_t sn_switch_mac_used(const struct sn_switch *sw, uint16_t slot);

/* Backlog quota. A deferred port's frames that a full vhost destination
 * cannot take wait in that destination's backlog (SN_SWITCH_BACKLOG_MAX
 * frames) on the worker; the port may hold at most sn_port.quota.backlog
 * entries over all backlogs of a worker (0 = no cap; loaded once per
 * burst). Beyond, its frame is dropped, completed and counted on the
 * port (quota_backlog), never another port's. Pure: the default quota
 * for n_slots port slots and the datapath burst: a backlog less a reserve
 * of two bursts, so that one source never fills a destination's backlog
 * alone (several sources at their quotas share it first come first
 * served); the whole backlog with at most two slots. */
uint32_t sn_switch_backlog_quota_auto(unsigned n_slots, unsigned burst);

/* Any thread: the counters of the MAC table sw uses (sn_mac_stats()). */
void sn_switch_mac_stats(const struct sn_switch *sw, struct sn_mac_stats *out);

#endif /* SN_SWITCH_H */
