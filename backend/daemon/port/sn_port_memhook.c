/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_memhook.c — the vhost library's message hooks of every
 * vhost-user port and their vid -> port table: memory tables the library
 * would fail on after dropping the current one are refused first (pre
 * hook), and the deferred ports follow a guest's memory-table changes
 * (memory hotplug, post hook).
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

/* A memory table the library would take apart and then fail on. DPDK
 * 22.11 (lib/vhost/vhost_user.c, vhost_user_set_mem_table) unmaps the
 * current table before it maps the new regions one by one; a region it
 * cannot map (size 0, or mmap_offset + memory_size wrapping: "overflow")
 * fails the message with the old table gone and the vrings' addresses
 * still pointing into it, and the next message that touches a ring
 * (SET_VRING_KICK re-enabling guest notifications) writes to unmapped
 * memory: the daemon dies of a front-end's message. The pre-message hook
 * sees the message first (the vhost-user wire format: request, flags,
 * size, then VhostUserMemory: nregions, padding, regions of
 * guest_phys_addr, memory_size, userspace_addr, mmap_offset) and turns
 * such a table into one the library refuses before it unmaps anything:
 * nregions set to UINT32_MAX, so its fd count check fails (it closes the
 * message's fds) and the message is answered as failed or the
 * connection closed, as for any invalid message; the current table
 * stays. Counted in mem_table_rejected (a port that has one) and logged
 * with the field. Tables of more than 8 regions are the library's to
 * refuse (it does, before unmapping). */
#define VHOST_USER_MAX_REGIONS 8u
#define MSG_HDR 12u

static const char *mem_table_bad(const uint8_t *msg, uint32_t *region)
{
	uint32_t size, n;

	memcpy(&size, msg + 8, sizeof(size));
	memcpy(&n, msg + MSG_HDR, sizeof(n));
	if (n > VHOST_USER_MAX_REGIONS)
		return NULL;
	if (size < 8 + 32 * n)
		return "size";               /* regions the message does not carry */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t r[4];   /* guest_phys_addr, memory_size, userspace_addr, mmap_offset */

		memcpy(r, msg + MSG_HDR + 8 + 32 * i, sizeof(r));
		*region = i;
		if (r[1] == 0)
			return "memory_size";
		if (r[3] >= -r[1])
			return "mmap_offset";    /* mmap_offset + memory_size wraps */
		if (r[0] + r[1] < r[0])
			return "guest_phys_addr";
		if (r[2] + r[1] < r[2])
			return "userspace_addr";
	}
	return NULL;
}

static enum rte_vhost_msg_result ext_pre(int vid, void *msg)
{
	struct sn_ports *reg = sn_ports_global;
	uint32_t req, region = 0, bad_n = UINT32_MAX;
	const char *field;

	memcpy(&req, msg, sizeof(req));
	if (req == VHOST_USER_SET_MEM_TABLE_REQ && (field = mem_table_bad(msg, &region))) {
		struct sn_port *p = NULL;
		char name[SN_CONFIG_NAME_MAX + 1] = "?";

		memcpy((uint8_t *)msg + MSG_HDR, &bad_n, sizeof(bad_n));
		if (reg) {
			pthread_mutex_lock(&reg->hook_lock);
			for (unsigned i = 0; i < sn_config_port_slots && !p; i++)
				if (reg->hook[i].p && reg->hook[i].vid == vid)
					p = reg->hook[i].p;
			if (p) {
				__atomic_store_n(&p->mem_table_rejected,
						 __atomic_load_n(&p->mem_table_rejected,
								 __ATOMIC_RELAXED) + 1,
						 __ATOMIC_RELAXED);
				memcpy(name, p->name, sizeof(name));
			}
			pthread_mutex_unlock(&reg->hook_lock);
		}
		sn_log("port %s: vid %d: SET_MEM_TABLE rejected: region %u: bad %s (the "
		       "current table stays)", name, vid, region, field);
		return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
	}
	return sn_port_migrate_pre(vid, msg);   /* sn_port_migrate.c */
}

const struct rte_vhost_user_extern_ops sn_port_memhook_ops = {
	.pre_msg_handle = ext_pre,
	.post_msg_handle = ext_post,
};
