/* sn_switch.h — the L2 learning switch and the worker lcore's poll loop.
 *
 * One worker lcore runs sn_switch_worker(): it busy-polls every port of the
 * RCU-published port table, learns source MACs, forwards known unicast,
 * floods broadcast/multicast/unknown unicast to every other up port (never
 * back out of the ingress port) and counts every packet once.
 *
 * Concurrency contract:
 *  - The MAC table and the staging buffers belong to the worker alone
 *    (learning, lookup and aging all run there, so the table needs no
 *    synchronization at all).
 *  - Counters (per port in sn_port.st, MAC table stats here) have the
 *    worker as sole writer; sn_switch_mac_stats() may be called from any
 *    thread and reads them with relaxed atomic loads.
 *  - sn_switch_stop() (main) sets a flag the worker reads each iteration
 *    (release/acquire); the main thread then waits with
 *    rte_eal_wait_lcore() before destroying anything.
 */
#ifndef SN_SWITCH_H
#define SN_SWITCH_H

#include <stdint.h>

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
	struct sn_pipeline *pipeline; /* policy enforcement (issue 6); NULL = none */
	struct sn_cpufair *cpufair;   /* CPU fair dropping (issue 6); NULL = off;
	                               * the worker owns it while it runs */
};

struct sn_mac_stats {
	uint64_t entries;  /* currently valid */
	uint64_t learned;  /* new entries */
	uint64_t aged;     /* removed by aging */
	uint64_t moves;    /* MAC seen on another port */
	uint64_t full;     /* could not learn: bucket full */
};

/* Main thread, before the worker starts. NULL + errno. */
struct sn_switch *sn_switch_create(const struct sn_switch_config *cfg,
				   struct sn_ports *reg, struct rte_mempool *mp);
/* lcore_function_t for rte_eal_remote_launch(); returns 0 after stop. */
int sn_switch_worker(void *sw);
/* Main thread: ask the worker to return (then rte_eal_wait_lcore()). */
void sn_switch_stop(struct sn_switch *sw);
/* Main thread, after the worker returned (or never started). */
void sn_switch_destroy(struct sn_switch *sw);

void sn_switch_mac_stats(const struct sn_switch *sw, struct sn_mac_stats *out);

#endif /* SN_SWITCH_H */
