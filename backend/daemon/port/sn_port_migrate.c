/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_rarp.c — a live-migrated guest's MAC follows it to its new
 * deferred port: VHOST_USER_SEND_RARP.
 *
 * When a migration completes, the destination QEMU announces the guest
 * (qemu_announce_self). A guest that did not negotiate
 * VIRTIO_NET_F_GUEST_ANNOUNCE cannot announce itself, so QEMU asks the
 * back-end with VHOST_USER_SEND_RARP (protocol feature RARP) to send a
 * RARP broadcast from the guest's MAC, once per announce round. DPDK
 * 22.11 records the MAC and injects that frame in the next
 * rte_vhost_dequeue_burst(), which a deferred port never calls (its TX
 * ring is ours, sn_vqtx.h): the switch would keep the MAC on the source
 * port, and frames for the guest would go there, until the guest sends a
 * frame of its own. This pre-message hook makes the switch learn the MAC
 * on the port at once (the registry's announce callback,
 * sn_ports_set_announce) and leaves the message to the library as well.
 * Immediate ports do not need it: their dequeue injects the RARP, which
 * the switch learns and floods like any frame.
 *
 * Thread: VHOST, with the library's queue locks held (it takes them for
 * SEND_RARP): like the memory-table hook, it takes hook_lock only and
 * never waits for a worker. The announce callback must not either
 * (sn_switch_learn takes one MAC-table bucket lock).
 */
#include "sn_port_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <rte_vhost.h>

#include "sn_log.h"

/* vhost-user wire format: request, flags, size (u32 each), then the
 * payload; SEND_RARP's is a u64 whose first 6 bytes are the MAC. */
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

enum rte_vhost_msg_result sn_port_rarp_pre(int vid, void *msg)
{
	struct sn_ports *reg = sn_ports_global;
	struct sn_port *p = NULL;
	uint32_t req, size;
	uint8_t mac[6];
	int rc;

	memcpy(&req, msg, sizeof(req));
	if (req != VHOST_USER_SEND_RARP_REQ || !reg)
		return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
	memcpy(&size, (const uint8_t *)msg + 8, sizeof(size));
	pthread_mutex_lock(&reg->hook_lock);
	for (unsigned i = 0; i < SN_PORT_MAX && !p; i++)
		if (reg->hook[i].p && reg->hook[i].vid == vid)
			p = reg->hook[i].p;
	if (!p)
		goto unlock;
	ctr_bump(&p->rarp_received);
	/* Untrusted: the front-end chooses the size and the bytes. The
	 * library reads the payload as a u64 whatever the size says: only
	 * a well-formed message is learned. */
	memcpy(mac, (const uint8_t *)msg + MSG_HDR, sizeof(mac));
	if (size != 8 || (mac[0] & 1) || !(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5])) {
		sn_log("port %s: SEND_RARP with a bad size (%u) or MAC ignored", p->name, size);
		goto unlock;
	}
	rc = reg->announce ? reg->announce(reg->announce_arg, p, mac) : -ENOTSUP;
	if (rc == 0)
		ctr_bump(&p->rarp_learned);
	sn_log("port %s: SEND_RARP %02x:%02x:%02x:%02x:%02x:%02x (migrated guest): %s", p->name,
	       mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
	       rc == 0 ? "learned on this port" : strerror(-rc));
unlock:
	pthread_mutex_unlock(&reg->hook_lock);
	return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
}
