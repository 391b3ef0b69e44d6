/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vring_impl.h — the state of one ring, shared by the pop side
 * (sn_vring.c) and the completion side (sn_vring_used.c). Internal: not
 * part of the library's interface.
 *
 * Held heads sit on a doubly linked list in pop order (held_first ..
 * held_last through next[] / prev[], SN_VRING_NIL-terminated), with held[id] set
 * while an id is on it. The pop side only appends to the list; the
 * completion side only removes from it.
 */
#ifndef SN_VRING_IMPL_H
#define SN_VRING_IMPL_H

#include <assert.h>
#include <stddef.h>

#include "sn_vring.h"

#define SN_VRING_NIL 0xffffu     /* end of the held list */
#define SN_VRING_ALIGNED64 __attribute__((aligned(64)))

struct sn_vring {
	/* First cache line: read on every pop/put/flush. */
	const struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	uint32_t size, mask;
	uint32_t max_pkt_len;
	uint16_t last_avail;     /* next avail slot to take */
	uint16_t used_shadow;    /* next used slot to write */
	uint16_t used_pub;       /* used idx last published */
	uint16_t hdr_len;
	uint16_t held_first, held_last; /* pop-order list of held ids, NIL if empty */
	bool event_idx, broken, kick_on;

	/* Second cache line: per-id and per-walk state, sized by the queue
	 * and allocated behind the struct; notification fields. */
	uint16_t *prev SN_VRING_ALIGNED64, *next; /* held list links */
	uint8_t *held;
	uint64_t *visit_direct, *visit_ind; /* bitmaps, all-zero between walks */
	uint16_t *used_event;    /* &avail->ring[size] */
	uint16_t *avail_event;   /* (uint16_t *)&used->ring[size] */

	/* Cold: memory table (read per descriptor, but small), counters. */
	uint32_t hot_region;     /* region of the last translated buffer */
	struct sn_vring_mem mem;
	struct sn_vring_stats st;
};
static_assert(offsetof(struct sn_vring, kick_on) < 64, "hot fields in line 0");
static_assert(offsetof(struct sn_vring, prev) == 64, "per-id state in line 1");

#endif /* SN_VRING_IMPL_H */
