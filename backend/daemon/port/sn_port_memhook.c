/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_memhook.c — following a guest's memory-table changes on the
 * deferred ports (memory hotplug): the vhost library's post-message hook
 * and its vid -> port table.
 *
 * Deferred ports read the TX rings and frames through their own mapping
 * of guest memory (sn_vqtx.h), so when the library applies a new
 * SET_MEM_TABLE on a running device each started TX queue is handed the
 * new table too (sn_vqtx_remap()). The hook finds the port by vid in
 * reg->hook[] under hook_lock, never reg->lock (sn_port_internal.h).
 */
#include "sn_port_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <rte_vhost.h>

#include "sn_log.h"
#include "sn_vqtx.h"

/* The library's post-message hook (rte_vhost_extern_callback_register in
 * new_device, deferred ports). VHOST thread, with the library's queue
 * locks held: nothing here may wait for a worker (one may be blocked on
 * those locks in rte_vhost_enqueue_burst). After a SET_MEM_TABLE on a
 * running device (memory hotplug) the library has unmapped the regions it
 * had and mapped the new table; our rings and frames are on our own
 * mappings (sn_vqtx.h), and each started TX queue is handed the new table
 * (sn_vqtx_remap: buffers in new regions are translated from the worker's
 * next pop on). Every request is also shown to sn_port_migrate_post()
 * (the end of a SET_LOG_BASE). The request code is the first 32-bit field of the message
 * (vhost-user wire format; the library passes its message first). */
#define VHOST_USER_SET_MEM_TABLE_REQ 5u

/* See sn_port_internal.h. */
void sn_port_memhook_set(struct sn_ports *reg, int vid, struct sn_port *p)
{
	pthread_mutex_lock(&reg->hook_lock);
	for (unsigned i = 0; i < sn_config_port_slots; i++) {
		if (reg->hook[i].p &&
		    ((vid >= 0 && reg->hook[i].vid == vid) || (p && reg->hook[i].p == p)))
			reg->hook[i].p = NULL;
	}
	for (unsigned i = 0; vid >= 0 && p && i < sn_config_port_slots; i++) {
		if (!reg->hook[i].p) {
			reg->hook[i].vid = vid;
			reg->hook[i].p = p;
			break;
		}
	}
	pthread_mutex_unlock(&reg->hook_lock);
}

static enum rte_vhost_msg_result ext_post(int vid, void *msg)
{
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p = NULL;
	uint32_t req;

	memcpy(&req, msg, sizeof(req));
	sn_port_migrate_post(vid, req);   /* SET_LOG_BASE (sn_port_migrate.c) */
	if (req != VHOST_USER_SET_MEM_TABLE_REQ || !reg)
		return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
	/* Not reg->lock (see hook_lock). The port's own callbacks, the only
	 * writers of its queue state (txq_started, sn_vqtx_start/stop), run
	 * on this thread or, for its destroy_device, on MAIN inside
	 * rte_vhost_driver_unregister(), which waits until this message's
	 * handling is over: none runs concurrently with this hook. */
	pthread_mutex_lock(&reg->hook_lock);
	for (unsigned i = 0; i < sn_config_port_slots && !p; i++)
		if (reg->hook[i].p && reg->hook[i].vid == vid)
			p = reg->hook[i].p;
	if (p && p->vq && __atomic_load_n(&p->running, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&p->vid, __ATOMIC_RELAXED) == vid) {
		unsigned moved = 0;

		for (unsigned i = 0; i < p->nq; i++) {
			int rc;

			if (!(p->txq_started & (1u << i)))
				continue;
			rc = sn_vqtx_remap(p->q[i].vq, vid);
			if (rc < 0)
				sn_log("port %s: TX queue %u keeps its guest memory table: %s",
				       p->name, i, strerror(-rc));
			else if (rc == 0)
				moved++;
		}
		if (moved)
			sn_log("port %s: the guest memory table changed while running (memory "
			       "hotplug?): %u TX queue%s follow it", p->name, moved,
			       moved == 1 ? "" : "s");
	}
	pthread_mutex_unlock(&reg->hook_lock);
	return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
}

const struct rte_vhost_user_extern_ops sn_port_memhook_ops = {
	.pre_msg_handle = sn_port_migrate_pre,   /* sn_port_migrate.c */
	.post_msg_handle = ext_post,
};
