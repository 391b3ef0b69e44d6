/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vring.h — hardened split-virtqueue TX parser and out-of-order used-ring
 * writer (virtio 1.1 §2.7), DPDK-free. Pop side: sn_vring.c; used side:
 * sn_vring_used.c.
 *
 * The daemon feeds it what rte_vhost hands out: the ring addresses of
 * rte_vhost_get_vhost_vring() (already host pointers), the base indexes of
 * rte_vhost_get_vring_base(), and the guest memory regions of
 * rte_vhost_get_mem_table() (copy guest_phys_addr, size, host_user_addr of
 * each struct rte_vhost_mem_region into struct sn_vring_region).
 *
 * Everything in guest memory is untrusted: descriptors, rings, indirect
 * tables and packet bytes may be rewritten by the guest at any time. Every
 * malformed case is detected, counted under its own cause, and either the
 * chain is returned as a "bad" entry (caller completes it with length 0) or,
 * when there is no valid head to complete, skipped and counted.
 *
 * Threading contract: one struct sn_vring is owned by exactly one thread
 * (the lcore that owns the queue). No function may be called concurrently on
 * the same ring; different rings are independent. A struct sn_vring_rxview
 * is read-only and may be used by any thread while its mapping lives. The
 * only concurrent party is the guest driver, which writes the descriptor
 * table and avail ring and reads the used ring:
 *
 *   ours (sn_vring_*)                  the driver's (Linux virtio_ring.c)
 *   ---------------------------------  ----------------------------------
 *   tx_pop: avail->idx load (acquire)  virtio_wmb before the avail->idx
 *                                      store (virtqueue_add_split)
 *   used_flush: used->idx store        virtio_rmb after the used->idx
 *   (release)                          load (virtqueue_get_buf_ctx_split)
 *   used_flush: seq_cst fence between  mb() between writing used_event /
 *   the used->idx store and the load   clearing NO_INTERRUPT and reading
 *   of used_event / avail->flags       used->idx (virtqueue_enable_cb_*)
 *   kick_enable(true): seq_cst fence   mb() between the avail->idx store
 *   after the avail_event / flags      and the read of avail_event /
 *   store, before re-polling           used->flags (kick_prepare_split)
 *
 * Guest-written fields are read once into locals before use (no TOCTOU);
 * descriptors and ring entries carry no ordering of their own beyond the
 * avail->idx acquire.
 */
#ifndef SN_VRING_H
#define SN_VRING_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define SN_VRING_MAX_SIZE     32768u /* virtio 1.1 §2.6: max Queue Size */
#define SN_VRING_MAX_SEGS     64u    /* payload segments per packet */
#define SN_VRING_MAX_REGIONS  8u     /* vhost-user VHOST_MEMORY_MAX_NREGIONS */
#define SN_VRING_DEF_MAX_PKT  65536u /* payload bound, virtio-net header excluded */

/* ---- Guest-visible layout (virtio 1.1 §2.7.5, §2.7.6, §2.7.8). ---- */
#define SN_VRING_DESC_F_NEXT      1u
#define SN_VRING_DESC_F_WRITE     2u
#define SN_VRING_DESC_F_INDIRECT  4u
#define SN_VRING_AVAIL_F_NO_INTERRUPT 1u
#define SN_VRING_USED_F_NO_NOTIFY     1u

struct sn_vring_desc {
	uint64_t addr;   /* guest-physical */
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
static_assert(sizeof(struct sn_vring_desc) == 16, "virtq_desc is 16 bytes");

struct sn_vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];  /* [size], then uint16_t used_event */
};

struct sn_vring_used_elem {
	uint32_t id;
	uint32_t len;
};
static_assert(sizeof(struct sn_vring_used_elem) == 8, "virtq_used_elem is 8 bytes");

struct sn_vring_used {
	uint16_t flags;
	uint16_t idx;
	struct sn_vring_used_elem ring[]; /* [size], then uint16_t avail_event */
};

/* struct virtio_net_hdr_v1 (virtio 1.1 §5.1.6); with hdr_len 10 the last
 * field is not present in the guest and reads as 0. */
struct sn_virtio_net_hdr {
	uint8_t  flags;
	uint8_t  gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
};
static_assert(sizeof(struct sn_virtio_net_hdr) == 12, "virtio_net_hdr_v1 is 12 bytes");

/* ---- Guest memory. ---- */
/* Same meaning as the fields of struct rte_vhost_mem_region. */
struct sn_vring_region {
	uint64_t guest_phys_addr;
	uint64_t size;
	uint64_t host_user_addr;
};

struct sn_vring_mem {
	uint32_t nregions;
	struct sn_vring_region regions[SN_VRING_MAX_REGIONS];
};

/* ---- Errors: one counter per cause. ---- */
enum sn_vring_err {
	SN_VRING_OK = 0,
	/* Chain-level: the head is returned as a bad entry (complete with 0). */
	SN_VRING_E_DESC_OOB,       /* next index >= table size (direct or indirect) */
	SN_VRING_E_LOOP,           /* a chain revisits one of its descriptors */
	SN_VRING_E_CHAIN_TOO_LONG, /* more descriptors than the queue size */
	SN_VRING_E_TOO_MANY_SEGS,  /* more payload segments than SN_VRING_MAX_SEGS */
	SN_VRING_E_ADDR_OOB,       /* buffer not inside guest memory */
	SN_VRING_E_CROSS_REGION,   /* one buffer spans two memory regions */
	SN_VRING_E_ZERO_LEN,       /* descriptor with length 0 */
	SN_VRING_E_OVERSIZED,      /* payload longer than max_pkt_len */
	SN_VRING_E_TOO_SHORT,      /* chain no longer than the virtio-net header */
	SN_VRING_E_BAD_INDIRECT,   /* indirect: len%16, too long, nested, +NEXT, outside memory */
	SN_VRING_E_WRITE_ONLY,     /* device-writable descriptor in a TX chain */
	SN_VRING_E__CHAIN_MAX,
	/* Ring-level: nothing to complete. */
	SN_VRING_E_HEAD_OOB = SN_VRING_E__CHAIN_MAX, /* avail head >= size: skipped */
	SN_VRING_E_HEAD_BUSY,      /* avail head already held by us: skipped */
	SN_VRING_E_AVAIL_JUMP,     /* avail idx moved by > size: ring broken */
	SN_VRING_E_BAD_COMPLETION, /* used_put of an id not held: ignored */
	SN_VRING_E__MAX,
};

/* Stable short name of a cause ("desc_oob", ...), for counters export. */
const char *sn_vring_err_name(enum sn_vring_err e);

struct sn_vring_stats {
	uint64_t popped;         /* well-formed packets returned */
	uint64_t bad;            /* bad entries returned (sum of chain-level err[]) */
	uint64_t completed;      /* used entries written */
	uint64_t out_of_order;   /* completions of an id that was not the oldest held */
	uint64_t flushes;        /* used idx publications */
	uint64_t notify;         /* flushes that asked for a guest notification */
	uint64_t err[SN_VRING_E__MAX];
	uint32_t held;           /* popped (good or bad) and not yet completed */
	uint32_t held_max;
};

/* ---- Packets. ---- */
struct sn_vring_pkt {
	uint16_t head;           /* id to pass to sn_vring_used_put() */
	uint16_t nseg;           /* valid entries of iov[] (0 when err != 0) */
	uint32_t len;            /* payload bytes (virtio-net header excluded) */
	enum sn_vring_err err;   /* SN_VRING_OK, or the chain-level cause */
	struct sn_virtio_net_hdr hdr; /* copied out of guest memory */
	struct iovec iov[SN_VRING_MAX_SEGS]; /* host pointers into guest memory */
};

struct sn_vring_config {
	void *desc;              /* rte_vhost_vring.desc (16-byte aligned) */
	void *avail;             /* rte_vhost_vring.avail (2-byte aligned) */
	void *used;              /* rte_vhost_vring.used (4-byte aligned) */
	uint32_t size;           /* power of two, 1..SN_VRING_MAX_SIZE */
	uint16_t last_avail_idx; /* rte_vhost_get_vring_base() */
	uint16_t last_used_idx;
	uint16_t hdr_len;        /* 10, or 12 with VERSION_1 / MRG_RXBUF */
	bool event_idx;          /* VIRTIO_RING_F_EVENT_IDX negotiated */
	uint32_t max_pkt_len;    /* payload bound; 0 = SN_VRING_DEF_MAX_PKT */
};

struct sn_vring;

/* Create the parser state for one ring. mem is copied. Returns NULL with
 * errno EINVAL (bad config or memory table) or ENOMEM. Does not touch guest
 * memory. */
struct sn_vring *sn_vring_create(const struct sn_vring_config *cfg,
				 const struct sn_vring_mem *mem);
void sn_vring_free(struct sn_vring *vr);

/* Replace the guest memory table (vhost-user SET_MEM_TABLE). Regions must
 * be non-empty, non-overlapping in guest-physical space and not wrap.
 * Returns 0 or -EINVAL (table unchanged). Owner thread only. */
int sn_vring_set_mem(struct sn_vring *vr, const struct sn_vring_mem *mem);

/* Read and write the same rings at other host addresses (the guest memory
 * mapped again elsewhere): ring state and held chains are kept;
 * alignment as in sn_vring_config. 0 or -EINVAL (unchanged). Owner thread
 * only. */
int sn_vring_set_rings(struct sn_vring *vr, void *desc, void *avail, void *used);

/* [gpa, gpa+len) of a memory table (not a ring's) to a host pointer if it
 * lies in one region, else NULL (no cause: sn_vring_gpa_to_hva below). */
void *sn_vring_mem_hva(const struct sn_vring_mem *mem, uint64_t gpa, uint64_t len);

/* Translate [gpa, gpa+len) to a host pointer if it lies in one region.
 * Returns NULL and sets *err to SN_VRING_E_ADDR_OOB / _CROSS_REGION (not
 * counted: the counting callers are pop and its walkers). len must be > 0. */
void *sn_vring_gpa_to_hva(const struct sn_vring *vr, uint64_t gpa,
			  uint64_t len, enum sn_vring_err *err);

/* Take up to max new avail heads, walk each chain and fill out[] in avail
 * order. Returns the number of entries filled; each has either err == 0 (a
 * packet) or err != 0 (a bad chain); both are held until completed with
 * sn_vring_used_put() — bad ones with len 0. Heads that cannot be completed
 * (out of range, already held) are skipped and counted. On an avail idx jump
 * the ring is marked broken and this returns 0 from then on. Reads
 * avail->idx with acquire (see sn_vring.c). Owner thread only. */
uint32_t sn_vring_tx_pop(struct sn_vring *vr, struct sn_vring_pkt *out,
			 uint32_t max);

/* Write the used entry {id, len} (not yet visible to the guest). Any held id
 * in any order. Returns 0, or -EINVAL for an id not held (double completion,
 * never popped, out of range): counted as SN_VRING_E_BAD_COMPLETION, the ring
 * is not touched. Allowed on a broken ring. Owner thread only. */
int sn_vring_used_put(struct sn_vring *vr, uint32_t id, uint32_t len);
/* sn_vring_used_put(vr, ids[i], 0) for i = 0 .. n - 1 in order (the
 * same entries, checks and counters); returns how many were written. Owner
 * thread only. */
uint32_t sn_vring_used_put0_bulk(struct sn_vring *vr, const uint16_t *ids, uint32_t n);

/* Publish the used entries written since the last flush (used->idx store
 * release). Returns 1 if the guest must be notified (EVENT_IDX used_event
 * check, or avail->flags NO_INTERRUPT clear without EVENT_IDX), else 0.
 * Owner thread only. */
int sn_vring_used_flush(struct sn_vring *vr);

/* Hold id as if popped now (a head an earlier back-end took and did not
 * complete, known from its own record): appended to the held list, so
 * that sn_vring_used_put() accepts it once. 0, or -EINVAL (out of range,
 * already held). Owner thread only. */
int sn_vring_hold(struct sn_vring *vr, uint32_t id);

/* Oldest held id (popped earliest, not yet completed), or -ENOENT. For
 * drop-completing everything on device stop, or the held-time limit. */
int sn_vring_oldest_held(const struct sn_vring *vr);
bool sn_vring_is_held(const struct sn_vring *vr, uint32_t id);

/* Ask the guest to kick (enable) or not to kick (disable) on new avail
 * entries: used->flags NO_NOTIFY, or avail_event with EVENT_IDX. A polling
 * owner disables. Owner thread only. */
void sn_vring_kick_enable(struct sn_vring *vr, bool enable);

/* Indexes for rte_vhost_set_vring_base(): next avail to take, and the used
 * idx as published (unflushed puts are not included: flush first). */
void sn_vring_get_base(const struct sn_vring *vr, uint16_t *last_avail_idx,
		       uint16_t *last_used_idx);

/* ---- RX-ring prefetch. ----
 * A read-only view of a guest RX ring that the library's builtin
 * rte_vhost_enqueue_burst() fills, for one purpose: before an enqueue of n
 * frames, ask for the first lines of the next n receive buffers at once
 * (the enqueue then writes them one frame after another, each a
 * cross-core miss taken in series otherwise). Nothing is written and
 * nothing read here is used except as a prefetch address: the ring
 * entries and descriptors are untrusted and may be stale, which costs at
 * most a useless prefetch. The view must only be used while the rings and
 * guest memory it was made from are mapped (the daemon: between
 * new_device and destroy_device, like struct sn_vring). */
struct sn_vring_rxview {
	const struct sn_vring_desc *desc;
	const struct sn_vring_avail *avail;
	uint32_t mask;            /* queue size - 1 */
	uint16_t hdr_len;         /* virtio-net header the device writes first */
	struct sn_vring_mem mem;
};

/* Fill *v; returns 0, or -EINVAL (size not a power of two, misaligned
 * ring, bad memory table: *v unusable). */
int sn_vring_rxview_init(struct sn_vring_rxview *v, const void *desc, const void *avail,
			 uint32_t size, uint16_t hdr_len, const struct sn_vring_mem *mem);

/* Prefetch (for writing) the header line and first frame line of the
 * receive buffers of avail entries next_avail .. next_avail + n - 1 (at
 * most 64). Any thread that may touch the mapping; no ordering implied. */
void sn_vring_rx_prefetch(const struct sn_vring_rxview *v, uint16_t next_avail, uint32_t n);

/* The used ring at the address the ring writes it now (moves with
 * sn_vring_set_rings). Owner thread only. */
const struct sn_vring_used *sn_vring_used_ring(const struct sn_vring *vr);
bool sn_vring_is_broken(const struct sn_vring *vr);
uint32_t sn_vring_size(const struct sn_vring *vr);
const struct sn_vring_stats *sn_vring_stats(const struct sn_vring *vr);

#endif /* SN_VRING_H */
