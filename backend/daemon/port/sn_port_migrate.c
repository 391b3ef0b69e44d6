/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_migrate.c — live migration on the deferred ports: the library's
 * message hooks for VHOST_USER_SET_LOG_BASE and VHOST_USER_SEND_RARP.
 *
 * Dirty-log bitmap. A deferred port's worker logs its TX used-ring writes
 * through the library (sn_vqtx.c flush()) without the library's queue
 * locks. A SET_LOG_BASE (QEMU sends one at the start of a migration and
 * again when guest memory grows during it; any front-end may send more)
 * makes the library map the new bitmap and unmap the old one under those
 * locks: around it, every started TX queue's log writes are paused
 * (sn_vqtx_log_pause: returns once none is in progress) and resumed after
 * (post hook, or the next message's pre hook when the library rejected
 * this one and skips the post hook).
 *
 * The MAC follows the guest. When a migration completes, the destination
 * QEMU announces the guest (qemu_announce_self). A guest that did not
 * negotiate VIRTIO_NET_F_GUEST_ANNOUNCE cannot announce itself, so QEMU
 * asks the back-end with VHOST_USER_SEND_RARP (protocol feature RARP) to
 * send a RARP broadcast from the guest's MAC, once per announce round.
 * DPDK 22.11 records the MAC and injects that frame in the next
 * rte_vhost_dequeue_burst(), which a deferred port never calls (its TX
 * ring is ours, sn_vqtx.h): the switch would keep the MAC on the source
 * port, and frames for the guest would go there, until the guest sends a
 * frame of its own. The pre hook makes the switch learn the MAC on the
 * port at once (the registry's announce callback, sn_ports_set_announce)
 * and leaves the message to the library as well; also before the device
 * runs (QEMU may announce before it starts the device: the hooks are in
 * place from the connection on, sn_port_vhost.c new_connection), so the
 * entry is on the right port when it comes up. Immediate ports do not
 * need it: their dequeue injects the RARP, which the switch learns and
 * floods like any frame.
 *
 * Thread: VHOST, with the library's queue locks held (it takes them for
 * both messages): like the memory-table hook, this takes hook_lock only
 * and never waits for a worker's progress (the log pause waits for a
 * lock-free write in progress only). The announce callback must not wait
 * either (sn_switch_learn takes one MAC-table bucket lock).
 */
#include "sn_port_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <rte_vhost.h>

#include "sn_log.h"
#include "sn_vqtx.h"

/* vhost-user wire format: request, flags, size (u32 each), then the
 * payload; SEND_RARP's is a u64 whose first 6 bytes are the MAC. */
#define VHOST_USER_SET_LOG_BASE_REQ 6u
#define VHOST_USER_SEND_RARP_REQ 19u
#define MSG_HDR 12u

void sn_ports_set_announce(struct sn_ports *reg, sn_port_announce_fn fn, void *arg)
{
	pthread_mutex_lock(&reg->hook_lock);
	reg->announce = fn;
	reg->announce_arg = arg;
	pthread_mutex_unlock(&reg->hook_lock);
}

static void ctr_bump(uint64_t *c)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Caller holds hook_lock: the deferred port of vid (connected; running
 * or not yet), or NULL. */
static struct sn_port *port_of_vid_locked(struct sn_ports *reg, int vid)
{
	for (unsigned i = 0; i < sn_config_port_slots; i++)
		if (reg->hook[i].p && reg->hook[i].vid == vid)
			return reg->hook[i].p;
	return NULL;
}

/* Pause (or resume) the dirty-log writes of p's started TX queues.
 * txq_started is written on this thread only (see ext_post in
 * sn_port_memhook.c). */
static void log_pause(struct sn_port *p, bool pause)
{
	for (unsigned i = 0; i < p->nq; i++) {
		if (!(p->txq_started & (1u << i)))
			continue;
		if (pause)
			sn_vqtx_log_pause(p->q[i].vq);
		else
			sn_vqtx_log_resume(p->q[i].vq);
	}
}

void sn_port_migrate_post(int vid, uint32_t req)
{
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p;

	if (req != VHOST_USER_SET_LOG_BASE_REQ || !reg)
		return;
	pthread_mutex_lock(&reg->hook_lock);
	p = port_of_vid_locked(reg, vid);
	if (p)
		log_pause(p, false);
	pthread_mutex_unlock(&reg->hook_lock);
}

static void announce(struct sn_ports *reg, struct sn_port *p, const void *msg);

enum rte_vhost_msg_result sn_port_migrate_pre(int vid, void *msg)
{
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p;
	uint32_t req;

	memcpy(&req, msg, sizeof(req));
	if (!reg)
		return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
	pthread_mutex_lock(&reg->hook_lock);
	p = port_of_vid_locked(reg, vid);
	if (p) {
		/* Paused for this SET_LOG_BASE; any other message means the
		 * one before is over (resumed also if the library failed it). */
		log_pause(p, req == VHOST_USER_SET_LOG_BASE_REQ);
		if (req == VHOST_USER_SEND_RARP_REQ && p->vq)
			announce(reg, p, msg);   /* immediate ports: the library's dequeue */
	}
	pthread_mutex_unlock(&reg->hook_lock);
	return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
}

/* Caller holds hook_lock: SEND_RARP for p. */
static void announce(struct sn_ports *reg, struct sn_port *p, const void *msg)
{
	uint32_t size;
	uint8_t mac[6];
	int rc;

	memcpy(&size, (const uint8_t *)msg + 8, sizeof(size));
	ctr_bump(&p->rarp_received);
	/* Untrusted: the front-end chooses the size and the bytes. The
	 * library reads the payload as a u64 whatever the size says: only
	 * a well-formed message is learned. */
	memcpy(mac, (const uint8_t *)msg + MSG_HDR, sizeof(mac));
	if (size != 8 || (mac[0] & 1) || !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5])) {
		SN_LOG_RL(SN_LOG_WARNING, "port %s: SEND_RARP with a bad size (%u) or MAC ignored",
			  p->name, size);
		return;
	}
	rc = reg->announce ? reg->announce(reg->announce_arg, p, mac) : -ENOTSUP;
	if (rc == 0)
		ctr_bump(&p->rarp_learned);
	SN_LOG_RL(SN_LOG_INFO, "port %s: SEND_RARP %02x:%02x:%02x:%02x:%02x:%02x (migrated guest): %s",
		  p->name,
	       mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
	       rc == 0 ? "learned on this port" : strerror(-rc));
}
