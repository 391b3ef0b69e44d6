/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_vhost.c — the vhost-user device callbacks of every port:
 * new_connection and destroy_connection (deferred ports: the message
 * hooks), new_device, destroy_device, vring_state_changed.
 *
 * They run on the VHOST thread (DPDK's vhost-events thread; a deferred
 * port's destroy_device also on MAIN, inside rte_vhost_driver_unregister)
 * with a vid only: the port is found by socket path in the registry under
 * reg->lock, and only its link state (vid, running, up, the vring and TX
 * queue masks, the RX prefetch view) changes, with the barriers sn_port.h
 * lists. destroy_device returns only after a grace period and, on a
 * deferred port, after every held descriptor of every queue completed
 * (purged from the switch and the pipeline at once, so within
 * SN_VQTX_STOP_WAIT_US per queue), so the library can unmap the guest
 * memory behind it; it waits without the registry lock.
 */
#include "sn_port_internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <linux/virtio_net.h>

#include <rte_vhost.h>
#include <urcu-qsbr.h>

#include "sn_log.h"
#include "sn_vqtx.h"

static struct sn_port *find_by_path_locked(struct sn_ports *reg, const char *path)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->slot[i] && reg->slot[i]->type == SN_PORT_VHOST &&
		    !strcmp(reg->slot[i]->path, path))
			return reg->slot[i];
	return NULL;
}

/* Caller holds reg->lock. up = running and vrings 0 (VM RX) and 1 (VM TX)
 * enabled. Release: the worker's acquire load then sees vid. */
static void update_up_locked(struct sn_port *p)
{
	uint32_t running = __atomic_load_n(&p->running, __ATOMIC_RELAXED);
	uint32_t on = __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED);
	uint32_t up = running && (on & 3u) == 3u;

	if (up != __atomic_load_n(&p->up, __ATOMIC_RELAXED)) {
		__atomic_store_n(&p->up, up, __ATOMIC_RELEASE);
		SN_LOG_RL_ON(&p->log_rl, SN_LOG_INFO, "port %s: %s", p->name, up ? "up" : "down");
	}
}

/* Caller holds reg->lock: recompute which TX queues the worker may poll.
 * A deferred queue is started the first time its vring is enabled while
 * the device runs and stays started (completions keep flowing while the
 * guest has it disabled) until destroy_device. */
static void update_txq_locked(struct sn_port *p)
{
	uint32_t on = __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED), ready = 0;
	int vid = __atomic_load_n(&p->vid, __ATOMIC_RELAXED);

	if (__atomic_load_n(&p->running, __ATOMIC_RELAXED)) {
		for (unsigned i = 0; i < p->nq; i++) {
			if (!(on & (1u << (2 * i + 1))))
				continue;
			if (p->q[i].vq && !(p->txq_started & (1u << i))) {
				if (sn_vqtx_start(p->q[i].vq, vid)) {
					SN_LOG_RL(SN_LOG_WARNING, "port %s: cannot take over TX queue %u of vid %d",
					       p->name, i, vid);
					continue;
				}
				p->txq_started |= 1u << i;
			}
			ready |= 1u << i;
		}
	}
	/* Release pairs with the worker's acquire in sn_port_txq_ready(): it
	 * sees the started ring state of every queue whose bit it sees. */
	__atomic_store_n(&p->txq_ready, ready, __ATOMIC_RELEASE);
}

/* A deferred port's RX ring 0 as a prefetch view (sn_vring.h).
 * Deferred ports already read guest memory outside the library for the
 * same lifetime (new_device .. destroy_device, sn_vqtx_start()); immediate
 * ports keep all guest-memory access inside rte_vhost. A second
 * connection on a port that still runs gets no view (the worker may be
 * reading the first one's). */
static void rxview_setup_locked(struct sn_port *p, int vid)
{
	struct rte_vhost_vring vr;
	struct sn_vqtx_gmap *map;
	struct sn_vring_mem lib;
	uint64_t features = 0;
	uint16_t hdr_len;
	void *desc, *avail;

	__atomic_store_n(&p->rxview_on, 0, __ATOMIC_RELAXED);
	if (!p->vq || __atomic_load_n(&p->running, __ATOMIC_RELAXED))
		return;
	/* Not running: no worker uses the view (destroy_device's grace
	 * period), so a map left from before can go. */
	sn_vqtx_gmap_free(p->rxmap);
	p->rxmap = NULL;
	if (rte_vhost_get_negotiated_features(vid, &features) ||
	    rte_vhost_get_vhost_vring(vid, 0, &vr) || !(map = sn_vqtx_gmap_new(vid)))
		return;
	hdr_len = (features & ((1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_NET_F_MRG_RXBUF))) ?
		  12 : 10;
	desc = sn_vqtx_gmap_xlate(map, vr.desc, 16ULL * vr.size);
	avail = sn_vqtx_gmap_xlate(map, vr.avail, 6ULL + 2ULL * vr.size);
	/* The rings are read through our mapping (safe across a remap); the
	 * buffers are prefetched at the library's addresses, where its
	 * enqueue writes them: one TLB entry per page, not two (with the
	 * prefetch targets in our mapping deferred ports run ~30 % slower on
	 * 4 KiB pages), and a prefetch of an address the library has since
	 * unmapped is a no-op, never a fault. */
	sn_vqtx_gmap_lib_mem(map, &lib);
	if (desc && avail &&
	    sn_vring_rxview_init(&p->rxview, desc, avail, vr.size, hdr_len, &lib) == 0) {
		p->rxmap = map;
		__atomic_store_n(&p->rxview_on, 1, __ATOMIC_RELAXED);
	} else {
		sn_vqtx_gmap_free(map);
	}
}

static void device_down(struct sn_ports *reg, const char *path, int vid);

static int cb_new_device(int vid)
{
	char path[PATH_MAX];
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p;
	int old = -1;

	if (!reg || rte_vhost_get_ifname(vid, path, sizeof(path)) < 0)
		return -1;
	/* A second connection's device starts while the first one's still
	 * runs (a front-end reconnected before the library saw the first
	 * connection close): the first device goes down first, as its
	 * destroy_device would take it (grace period, every TX queue
	 * stopped), so the worker never polls a queue being restarted. The
	 * library's later destroy_device of that vid finds another vid on
	 * the port and does nothing. */
	pthread_mutex_lock(&reg->lock);
	p = find_by_path_locked(reg, path);
	if (p && __atomic_load_n(&p->running, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&p->vid, __ATOMIC_RELAXED) != vid)
		old = __atomic_load_n(&p->vid, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&reg->lock);
	if (old >= 0) {
		SN_LOG_RL(SN_LOG_WARNING,
			  "port %s: vid %d starts while vid %d still runs: taking vid %d down first",
		       p->name, vid, old, old);
		device_down(reg, path, old);
	}
	pthread_mutex_lock(&reg->lock);
	p = find_by_path_locked(reg, path);
	if (p) {
		/* We poll; the guest need not kick us on TX. */
		for (uint16_t q = 0; q < rte_vhost_get_vring_num(vid); q++)
			rte_vhost_enable_guest_notification(vid, q, 0);
		/* Deferred: the worker takes the TX ring of queue 0 over when it
		 * sees up; the other queues when they get enabled. */
		if (p->vq && sn_vqtx_start(p->vq, vid)) {
			SN_LOG_RL(SN_LOG_WARNING, "port %s: cannot take over the TX ring of vid %d", p->name, vid);
			pthread_mutex_unlock(&reg->lock);
			return -1;
		}
		p->txq_started = p->vq ? 1u : 0u;
		rxview_setup_locked(p, vid);   /* before running and up */
		/* Check memory tables and, deferred ports, follow their
		 * changes (sn_port_memhook.c) and a migrated guest's announce
		 * (sn_port_migrate.c). */
		sn_port_memhook_set(reg, vid, p);
		if (rte_vhost_extern_callback_register(vid, &sn_port_memhook_ops, NULL))
			SN_LOG_RL(SN_LOG_ERR, "port %s: cannot hook SET_MEM_TABLE and SEND_RARP (memory "
			       "hotplug and migrations are not followed)", p->name);
		__atomic_store_n(&p->vid, vid, __ATOMIC_RELAXED);
		__atomic_store_n(&p->running, 1, __ATOMIC_RELAXED);
		/* Queue pair 0 is ready by definition of new_device. */
		__atomic_store_n(&p->vring_on, __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED) | 3u,
				 __ATOMIC_RELAXED);
		SN_LOG_RL_ON(&p->log_rl, SN_LOG_INFO, "port %s: connected (vid %d, %u vrings)", p->name, vid,
		       rte_vhost_get_vring_num(vid));
		update_txq_locked(p);
		update_up_locked(p);
	}
	pthread_mutex_unlock(&reg->lock);
	return p ? 0 : -1;
}

/* A front-end connected to a port: its message hooks from now on, not
 * only once the device runs (every port: the memory-table check of
 * sn_port_memhook.c; deferred ports: the destination QEMU of a migration
 * may announce the guest, SEND_RARP, sn_port_migrate.c, before it starts
 * the device); new_device registers them again, destroy_device drops the
 * port's entry in hook[] (the memory-table hook checks that the port runs
 * anyway). A connection to a port that runs another device gets the
 * hooks too, so its memory tables are checked like any other, but no
 * hook[] entry: that stays the running device's. A connection that gets
 * no hooks (its port is being deleted, or registering them failed) is
 * refused (-1: the library closes it), so no memory table reaches the
 * library unchecked. */
static int cb_new_connection(int vid)
{
	char path[PATH_MAX];
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p;

	int rc = -1;

	if (!reg || rte_vhost_get_ifname(vid, path, sizeof(path)) < 0)
		return -1;
	pthread_mutex_lock(&reg->lock);
	p = find_by_path_locked(reg, path);
	if (p) {
		if (!__atomic_load_n(&p->running, __ATOMIC_RELAXED))
			sn_port_memhook_set(reg, vid, p);
		if (rte_vhost_extern_callback_register(vid, &sn_port_memhook_ops, NULL))
			SN_LOG_RL(SN_LOG_ERR, "port %s: cannot hook the messages of vid %d: connection refused",
			       p->name, vid);
		else
			rc = 0;
	}
	pthread_mutex_unlock(&reg->lock);
	return rc;
}

/* The connection closed (after destroy_device, if the device ran): its
 * hook[] entry goes, if new_connection made one that new_device did not
 * replace. */
static void cb_destroy_connection(int vid)
{
	if (sn_ports_global)
		sn_port_memhook_set(sn_ports_global, vid, NULL);
}

static void cb_destroy_device(int vid)
{
	char path[PATH_MAX];
	struct sn_ports *reg = sn_ports_global;

	if (!reg || rte_vhost_get_ifname(vid, path, sizeof(path)) < 0)
		return;
	device_down(reg, path, vid);
}

/* The device vid of the port at path goes down (destroy_device, or a
 * newer device of the same port starting). */
static void device_down(struct sn_ports *reg, const char *path, int vid)
{
	struct sn_port *p;
	uint32_t started;

	pthread_mutex_lock(&reg->lock);
	p = find_by_path_locked(reg, path);
	if (!p || __atomic_load_n(&p->vid, __ATOMIC_RELAXED) != vid) {
		pthread_mutex_unlock(&reg->lock);
		return;
	}
	sn_port_memhook_set(reg, vid, NULL);
	__atomic_store_n(&p->running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&p->vring_on, 0, __ATOMIC_RELAXED);
	update_txq_locked(p);
	update_up_locked(p);
	started = p->txq_started;
	p->txq_started = 0;
	/* The waits below run without the registry lock (port.add/del and
	 * stats stay served). p stays: port.del unregisters the driver,
	 * which cannot finish while this callback runs, before it frees p;
	 * every other callback of p runs on this thread. */
	pthread_mutex_unlock(&reg->lock);
	/* Pairs with the worker's quiescent state: after this, no
	 * iteration that saw up == 1 is still using vid. */
	synchronize_rcu();
	__atomic_store_n(&p->rxview_on, 0, __ATOMIC_RELAXED);
	sn_vqtx_gmap_free(p->rxmap);   /* nobody reads the view now */
	p->rxmap = NULL;
	/* Deferred: every held descriptor of every queue completed (the
	 * worker purges the queue's frames from the switch and the pipeline)
	 * and the vring bases set before the library answers GET_VRING_BASE
	 * / unmaps; at most SN_VQTX_STOP_WAIT_US per queue. */
	for (unsigned i = 0; i < p->nq; i++)
		if (started & (1u << i))
			sn_vqtx_stop(p->q[i].vq);
	pthread_mutex_lock(&reg->lock);
	if (__atomic_load_n(&p->vid, __ATOMIC_RELAXED) == vid)
		__atomic_store_n(&p->vid, -1, __ATOMIC_RELAXED);
	SN_LOG_RL_ON(&p->log_rl, SN_LOG_INFO, "port %s: disconnected (vid %d)", p->name, vid);
	pthread_mutex_unlock(&reg->lock);
}

static int cb_vring_state_changed(int vid, uint16_t queue_id, int enable)
{
	char path[PATH_MAX];
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p;

	if (!reg || queue_id >= 32 || rte_vhost_get_ifname(vid, path, sizeof(path)) < 0)
		return 0;
	pthread_mutex_lock(&reg->lock);
	p = find_by_path_locked(reg, path);
	/* While the port runs, only its device's vrings count: another
	 * connection on the same socket (the library accepts more than one)
	 * must not change the running device's mask (it would take the
	 * port down, or up, at the running device's next change). Before
	 * the port runs, the enables of any connection are kept for the
	 * device that starts. */
	if (p && __atomic_load_n(&p->running, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&p->vid, __ATOMIC_RELAXED) != vid)
		p = NULL;
	if (p) {
		uint32_t on = __atomic_load_n(&p->vring_on, __ATOMIC_RELAXED);

		on = enable ? on | (1u << queue_id) : on & ~(1u << queue_id);
		__atomic_store_n(&p->vring_on, on, __ATOMIC_RELAXED);
		if (enable && queue_id >= 2 * p->nq)
			SN_LOG_RL(SN_LOG_WARNING, "port %s: the driver enabled vring %u, beyond queues=%u: not served",
			       p->name, queue_id, p->nq);
		if (__atomic_load_n(&p->running, __ATOMIC_RELAXED) &&
		    __atomic_load_n(&p->vid, __ATOMIC_RELAXED) == vid) {
			update_txq_locked(p);
			update_up_locked(p);
		}
		/* No grace period here: the library may call this with the
		 * vrings' access locks held (SET_VRING_ENABLE), which the worker
		 * may be waiting for; a disabled vring is safe to call into (the
		 * burst functions check vq->enabled under that lock). A deferred
		 * queue the driver disables stays started: the worker stops
		 * taking frames from it but keeps completing what it holds. */
	}
	pthread_mutex_unlock(&reg->lock);
	return 0;
}

const struct rte_vhost_device_ops sn_port_vhost_ops = {
	.new_connection = cb_new_connection,
	.destroy_connection = cb_destroy_connection,
	.new_device = cb_new_device,
	.destroy_device = cb_destroy_device,
	.vring_state_changed = cb_vring_state_changed,
};
