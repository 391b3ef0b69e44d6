/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_internal.h — the registry object shared by the port module's
 * files: sn_port.c (registry, RCU publication, add/del, counters),
 * sn_port_vhost.c (the vhost-user device callbacks), sn_port_memhook.c
 * (the guest memory-table hook) and sn_port_migrate.c (the live-migration hooks).
 * Not for other modules: they see sn_port.h.
 *
 * struct sn_ports, field by field (MAIN = the control thread, VHOST =
 * DPDK's vhost-events thread):
 *
 *   field       written by             read by              synchronization
 *   ----------  ---------------------  -------------------  ---------------------------
 *   slot[]      MAIN, under lock       MAIN; VHOST under    lock (VHOST finds a port
 *                                      lock                 by socket path)
 *   table       MAIN (publish)         workers (RCU), MAIN  rcu_assign_pointer /
 *                                                           rcu_dereference; old table
 *                                                           freed after synchronize_rcu
 *   hook[]      VHOST (new_/destroy_   VHOST (hooks, with   hook_lock; taken inside
 *               connection, new_/      the library's        lock or alone; nothing
 *               destroy_device),       queue locks held)    waits while holding it but
 *               MAIN (port free)                            the log pause's spin on a
 *                                                           lock-free write
 *                                                           (sn_vqtx_log_pause)
 *   announce,   MAIN                   VHOST (SEND_RARP     hook_lock
 *   announce_arg                       hook)
 *   mac_hooks,  MAIN                   MAIN                 none (one thread)
 *   next_gen,   MAIN                   MAIN                 none (one thread)
 *   n_workers,
 *   state_dir,
 *   mbufq (the  MAIN (setup, fini)     any thread (takes,   sn_quota.h; set before any
 *   pointer),                          gives)               port exists, freed after
 *   qenv, qpol                                              every port is gone
 *
 * Lock order: lock, then hook_lock. The memory-table hook takes hook_lock
 * only, never lock: it runs with the library's queue locks held, and a
 * holder of lock may wait for a worker that spins on those queue locks
 * (destroy_device's grace period).
 */
#ifndef SN_PORT_INTERNAL_H
#define SN_PORT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <rte_vhost.h>

#include "sn_port.h"
#include "sn_port_quota.h"

struct sn_ports {
	pthread_mutex_t lock;                   /* slot[] vs the vhost thread */
	struct sn_port **slot;                  /* [sn_config_port_slots]:
	                                         * authoritative, main writes */
	/* vid -> vhost-user port, for the message hooks: from new_connection
 * (a second connection while the port runs is not added) or new_device
 * to destroy_device or destroy_connection. */
	pthread_mutex_t hook_lock;
	struct { int vid; struct sn_port *p; } *hook; /* [sn_config_port_slots] */
	struct sn_port_table *table;            /* RCU-published snapshot */
	uint32_t next_gen;
	unsigned n_workers;                     /* TX queue owners 0..n-1 (main) */
	/* sn_ports_set_announce() (under hook_lock; called under it too). */
	sn_port_announce_fn announce;
	void *announce_arg;
	/* sn_ports_set_mac_hooks(). */
	const struct sn_port_mac_hooks *mac_hooks;
	void *mac_hooks_arg;
	char state_dir[SN_PORT_STATE_DIR_MAX + 1]; /* records of deferred TX queues
	                                         * ("": none; main) */
	/* Budgets (sn_port_quota.c): the mbuf quota over the port slots
	 * (NULL: none), what "auto" derives from, the policy lookup. */
	struct sn_quota *mbufq;
	struct sn_port_quota_env qenv;
	sn_port_quota_policy_fn qpol;
	void *qpol_arg;
};

/* The vhost callbacks only get a vid; they reach the registry here. Set by
 * sn_ports_create() before any driver is registered, cleared by destroy. */
extern struct sn_ports *sn_ports_global;

/* sn_port_vhost.c: the device callbacks every vhost-user port registers. */
extern const struct rte_vhost_device_ops sn_port_vhost_ops;

/* sn_port_memhook.c. hook[] maintenance (takes hook_lock): vid >= 0: drop
 * the entries of vid and of p, then add (vid, p) unless p is NULL; vid <
 * 0: drop every entry of p (port going away). */
void sn_port_memhook_set(struct sn_ports *reg, int vid, struct sn_port *p);
/* The message hooks of every vhost-user port's device (passed to
 * rte_vhost_extern_callback_register() in new_connection and new_device):
 * pre, the memory-table check (sn_port_memhook.c), then SET_LOG_BASE and
 * SEND_RARP (sn_port_migrate.c, deferred ports); post, the memory table
 * (sn_port_memhook.c, deferred ports). */
extern const struct rte_vhost_user_extern_ops sn_port_memhook_ops;
/* sn_port_migrate.c: the pre-message hook of the same devices
 * (SET_LOG_BASE, SEND_RARP), and its part of the post hook (ext_post
 * calls it with every request code). */
enum rte_vhost_msg_result sn_port_migrate_pre(int vid, void *msg);
void sn_port_migrate_post(int vid, uint32_t req);

#endif /* SN_PORT_INTERNAL_H */
