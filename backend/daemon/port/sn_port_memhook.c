/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_memhook.c — the vhost library's message hooks of every
 * vhost-user port and their vid -> port table: memory tables the library
 * would fail on after dropping the current one, or fault on later, are
 * refused first (pre hook, sn_port_vumsg.h), and the deferred ports follow a guest's memory-table changes
 * (memory hotplug, post hook).
 *
 * Deferred ports read the TX rings and frames through their own mapping
 * of guest memory (sn_vqtx.h), so when the library applies a new
 * SET_MEM_TABLE on a running device each started TX queue is handed the
 * new table too (sn_vqtx_remap()). The hook finds the port by vid in
 * reg->hook[] under hook_lock, never reg->lock (sn_port_internal.h).
 */
#include "sn_port_internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_vhost.h>

#include "sn_log.h"
#include "sn_port_vumsg.h"
#include "sn_vqtx.h"

static_assert(SN_VUMSG_INFLIGHT_QUEUES_MAX == 2 * SN_CONFIG_QUEUES_MAX,
	      "GET_INFLIGHT_FD: the vrings of a port's largest offer");

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
	if (req != SN_VUMSG_SET_MEM_TABLE || !reg)
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
				SN_LOG_RL(SN_LOG_WARNING, "port %s: TX queue %u keeps its guest memory table: %s",
				       p->name, i, strerror(-rc));
			else if (rc == 0)
				moved++;
		}
		if (moved)
			SN_LOG_RL(SN_LOG_INFO, "port %s: the guest memory table changed while running (memory "
			       "hotplug?): %u TX queue%s follow it", p->name, moved,
			       moved == 1 ? "" : "s");
	}
	pthread_mutex_unlock(&reg->hook_lock);
	return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
}

/* The pre-message hook sees every message before the library (DPDK
 * 22.11 vhost_user_msg_handler, with the queue locks of a SET_MEM_TABLE
 * held) and refuses a SET_MEM_TABLE, SET_LOG_BASE or SET_INFLIGHT_FD that
 * would crash the daemon, or a GET_INFLIGHT_FD that would make the library
 * allocate and zero gigabytes (sn_port_vumsg.c says which and why):
 * RTE_VHOST_MSG_RESULT_ERR, so the
 * library neither handles it nor calls the post hook; it answers a
 * NEED_REPLY message with a failure and goes on reading the connection,
 * or else closes the connection, as for any failed message. The current
 * table (log, inflight area) stays. On that path the library does not close the message's
 * fds: the hook does. Counted (all four) in mem_table_rejected of the port the
 * message came to, logged with the reason at most once a second (a front-end
 * can send the message in a loop). ADD_MEM_REG / REM_MEM_REG need no
 * check: DPDK 22.11 neither offers CONFIGURE_MEM_SLOTS nor handles them
 * (unhandled: failed). */
static void refused_log(const char *name, int vid, const char *msg, uint32_t region,
			const char *why)
{
	/* VHOST thread only (the library's one message thread). */
	static uint64_t last_ns, quiet;
	struct timespec ts;
	uint64_t now;
	char where[32] = "";

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (last_ns && now - last_ns < 1000000000u) {
		quiet++;
		return;
	}
	if (!strcmp(msg, "SET_MEM_TABLE"))
		snprintf(where, sizeof(where), "region %u: ", region);
	if (quiet)
		sn_log_warn("port %s: vid %d: %s refused: %sbad %s (the current state stays; %llu "
		       "more refused in the last second)", name, vid, msg, where, why,
		       (unsigned long long)quiet);
	else
		sn_log_warn("port %s: vid %d: %s refused: %sbad %s (the current state stays)", name,
		       vid, msg, where, why);
	last_ns = now;
	quiet = 0;
}

/* Caller holds hook_lock: the port vid's message came to: its hook[]
 * entry, or else the hooked port on the socket path ifname (a connection
 * to a port that runs another device has no entry, sn_port_vhost.c). A
 * port with an entry is not freed while the hook runs (port.del waits
 * for the library's message handling). NULL: none. */
static struct sn_port *port_of_msg_locked(struct sn_ports *reg, int vid, const char *ifname)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->hook[i].p && reg->hook[i].vid == vid)
			return reg->hook[i].p;
	for (unsigned i = 0; ifname[0] && i < sn_config_port_slots; i++)
		if (reg->hook[i].p && !strcmp(reg->hook[i].p->path, ifname))
			return reg->hook[i].p;
	return NULL;
}

static enum rte_vhost_msg_result ext_pre(int vid, void *msg)
{
	struct sn_ports *reg = sn_ports_global;
	struct sn_vumsg *m = msg;
	uint32_t req, region = 0;
	const char *why;

	memcpy(&req, msg, sizeof(req));
	if (req == SN_VUMSG_SET_MEM_TABLE) {
		why = sn_vumsg_mem_table_bad(m, &region);
	} else if (req == SN_VUMSG_SET_LOG_BASE || req == SN_VUMSG_SET_INFLIGHT_FD) {
		uint64_t features = 0;

		if (rte_vhost_get_negotiated_features(vid, &features) != 0)
			features = 0;
		why = sn_vumsg_fd_msg_bad(m, features & (1ull << 34));   /* RING_PACKED */
	} else if (req == SN_VUMSG_GET_INFLIGHT_FD) {
		why = sn_vumsg_get_inflight_bad(m);
	} else {
		why = NULL;
	}
	if (why) {
		struct sn_port *p = NULL;
		char name[SN_CONFIG_NAME_MAX + 1] = "?";
		int nfd = m->fd_num;

		for (int i = 0; i < nfd && i < (int)SN_VUMSG_MAX_REGIONS; i++) {
			if (m->fds[i] >= 0)
				close(m->fds[i]);
			m->fds[i] = -1;
		}
		m->fd_num = 0;
		if (reg) {
			char ifname[PATH_MAX] = "";

			if (rte_vhost_get_ifname(vid, ifname, sizeof(ifname)) < 0)
				ifname[0] = 0;
			pthread_mutex_lock(&reg->hook_lock);
			p = port_of_msg_locked(reg, vid, ifname);
			if (p) {
				__atomic_store_n(&p->mem_table_rejected,
						 __atomic_load_n(&p->mem_table_rejected,
								 __ATOMIC_RELAXED) + 1,
						 __ATOMIC_RELAXED);
				memcpy(name, p->name, sizeof(name));
			}
			pthread_mutex_unlock(&reg->hook_lock);
		}
		refused_log(name, vid, req == SN_VUMSG_SET_MEM_TABLE ? "SET_MEM_TABLE" :
			    req == SN_VUMSG_SET_LOG_BASE ? "SET_LOG_BASE" :
			    req == SN_VUMSG_GET_INFLIGHT_FD ? "GET_INFLIGHT_FD" : "SET_INFLIGHT_FD",
			    region, why);
		return RTE_VHOST_MSG_RESULT_ERR;
	}
	return sn_port_migrate_pre(vid, msg);   /* sn_port_migrate.c */
}

const struct rte_vhost_user_extern_ops sn_port_memhook_ops = {
	.pre_msg_handle = ext_pre,
	.post_msg_handle = ext_post,
};
