/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_vumsg.h — the vhost library's message as its extern hooks see
 * it, and the memory-table check of the pre-message hook.
 *
 * rte_vhost hands pre_msg_handle / post_msg_handle a void pointer to its
 * private struct vhu_msg_context (DPDK lib/vhost/vhost_user.h, "can't be
 * changed carelessly as external message handlers rely on them"): the
 * packed VhostUserMsg (12-byte header, then the payload union, whose
 * largest member, VhostUserCryptoSessionParam, makes it 632 bytes), then
 * the message's fds[VHOST_MEMORY_MAX_NREGIONS] and fd_num. The layout is
 * mirrored here and pinned to DPDK 22.11, the version it was checked
 * against: another DPDK fails the build until it is checked again.
 */
#ifndef SN_PORT_VUMSG_H
#define SN_PORT_VUMSG_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_version.h>

#if RTE_VERSION < RTE_VERSION_NUM(22, 11, 0, 0) || RTE_VERSION >= RTE_VERSION_NUM(22, 12, 0, 0)
#error "struct sn_vumsg mirrors DPDK 22.11's struct vhu_msg_context: check lib/vhost/vhost_user.h"
#endif

#define SN_VUMSG_SET_MEM_TABLE 5u
#define SN_VUMSG_SET_LOG_BASE  6u
#define SN_VUMSG_GET_INFLIGHT_FD 31u
#define SN_VUMSG_SET_INFLIGHT_FD 32u
/* GET_INFLIGHT_FD limits: the vrings of a port's largest offer (8 queue
 * pairs, SN_CONFIG_QUEUES_MAX) and virtio's largest ring. */
#define SN_VUMSG_INFLIGHT_QUEUES_MAX 16u
#define SN_VUMSG_INFLIGHT_QSIZE_MAX  32768u
#define SN_VUMSG_MAX_REGIONS   8u    /* VHOST_MEMORY_MAX_NREGIONS */
#define SN_VUMSG_PAYLOAD       632u  /* sizeof(VhostUserMsg.payload), DPDK 22.11 */

struct sn_vumsg_region {
	uint64_t guest_phys_addr, memory_size, userspace_addr, mmap_offset;
};

struct sn_vumsg {
	uint32_t request, flags, size;   /* size: payload bytes received */
	union {
		uint64_t u64;
		struct {
			uint32_t nregions, padding;
			struct sn_vumsg_region regions[SN_VUMSG_MAX_REGIONS];
		} memory;
		struct {                  /* VhostUserLog */
			uint64_t mmap_size, mmap_offset;
		} log;
		struct {                  /* VhostUserInflight (not packed: 24 bytes) */
			uint64_t mmap_size, mmap_offset;
			uint16_t num_queues, queue_size;
			uint32_t pad;
		} inflight;
		uint8_t bytes[SN_VUMSG_PAYLOAD];
	} payload;
	int fds[SN_VUMSG_MAX_REGIONS];   /* received with the message */
	int fd_num;
} __attribute__((packed));

static_assert(offsetof(struct sn_vumsg, payload) == 12, "VhostUserMsg header");
static_assert(offsetof(struct sn_vumsg, fds) == 644, "vhu_msg_context.fds, DPDK 22.11");
static_assert(offsetof(struct sn_vumsg, fd_num) == 676, "vhu_msg_context.fd_num, DPDK 22.11");
static_assert(sizeof(((struct sn_vumsg *)0)->payload.log) == 16, "VhostUserLog, DPDK 22.11");
static_assert(sizeof(((struct sn_vumsg *)0)->payload.inflight) == 24, "VhostUserInflight, DPDK 22.11");
static_assert(sizeof(struct sn_vumsg) == 680, "sizeof(struct vhu_msg_context), DPDK 22.11");

/* Why the SET_MEM_TABLE m must not reach the library, or NULL if it may;
 * *region: the region at fault (0 for a message-level reason). Reads m
 * and fstat()s its fds, changes nothing. Any thread. */
const char *sn_vumsg_mem_table_bad(const struct sn_vumsg *m, uint32_t *region);

/* Why the SET_LOG_BASE or SET_INFLIGHT_FD m must not reach the library,
 * or NULL if it may (sn_port_vumsg.c); NULL for any other request.
 * packed: the device negotiated VIRTIO_F_RING_PACKED (the inflight
 * area's layout). Reads m and fstat()s its fd, changes nothing. Any
 * thread. */
const char *sn_vumsg_fd_msg_bad(const struct sn_vumsg *m, bool packed);

/* Why the GET_INFLIGHT_FD m must not reach the library, or NULL if it may
 * (sn_port_vumsg.c); NULL for any other request. Pure. */
const char *sn_vumsg_get_inflight_bad(const struct sn_vumsg *m);

/* The bytes of one queue's inflight area in DPDK 22.11
 * (get_pervq_shm_size_split / _packed): queue_size descriptors of 16
 * (split) or 32 (packed) bytes after a 16- or 32-byte header, rounded
 * up to 64. */
static inline uint64_t sn_vumsg_inflight_pervq(uint16_t queue_size, bool packed)
{
	uint64_t n = packed ? 32u * queue_size + 8 + 12 + 9 : 16u * queue_size + 8 + 8;

	return (n + 63) / 64 * 64;
}

#endif /* SN_PORT_VUMSG_H */
