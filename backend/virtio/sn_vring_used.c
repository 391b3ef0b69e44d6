/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vring_used.c — the used-ring side of sn_vring: out-of-order
 * completion, publication and notification (virtio 1.1 §2.7.8, §2.7.10).
 *
 * Completions may come in any order (VIRTIO_F_IN_ORDER is never
 * negotiated). Held heads sit on a doubly linked list in pop order
 * (sn_vring_impl.h), so the oldest is known in O(1) (out-of-order
 * counting, drop-on-stop, hold-time limits) and completion of any held id
 * is O(1). A completion for an id not held is counted and ignored before
 * anything is written to the ring.
 *
 * Notification follows virtio 1.1 §2.7.7/§2.7.10: with EVENT_IDX, notify
 * iff the used idx crossed used_event since the previous flush
 * (vring_need_event on our own used index, never on DPDK's); without it,
 * notify unless avail->flags has NO_INTERRUPT.
 */
#include <errno.h>

#include "sn_vring_impl.h"

static void unhold(struct sn_vring *vr, uint16_t id)
{
	uint16_t p = vr->prev[id], n = vr->next[id];

	if (p == SN_VRING_NIL)
		vr->held_first = n;
	else
		vr->next[p] = n;
	if (n == SN_VRING_NIL)
		vr->held_last = p;
	else
		vr->prev[n] = p;
	vr->held[id] = 0;
	vr->st.held--;
}

int sn_vring_used_put(struct sn_vring *vr, uint32_t id, uint32_t len)
{
	struct sn_vring_used_elem *e;

	if (id >= vr->size || !vr->held[id]) {
		vr->st.err[SN_VRING_E_BAD_COMPLETION]++;
		return -EINVAL;
	}
	if (id != vr->held_first)
		vr->st.out_of_order++;
	unhold(vr, (uint16_t)id);
	e = &vr->used->ring[vr->used_shadow & vr->mask];
	__atomic_store_n(&e->id, id, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, len, __ATOMIC_RELAXED);
	vr->used_shadow++;
	vr->st.completed++;
	return 0;
}

/* sn_vring_used_put(vr, ids[i], 0) for each i in order, with the ring's
 * fields in registers, the held list's head in a local (the in-order
 * case, an id that is the oldest held, only moves it; the new head's prev
 * link and an emptied list's held_last are set once at the end), and the
 * counters added once. */
uint32_t sn_vring_used_put0_bulk(struct sn_vring *vr, const uint16_t *ids, uint32_t n)
{
	struct sn_vring_used_elem *ring = vr->used->ring;
	const uint32_t size = vr->size, mask = vr->mask;
	uint16_t *const next = vr->next, *const prev = vr->prev;
	uint8_t *const held = vr->held;
	uint16_t shadow = vr->used_shadow, hf = vr->held_first;
	uint32_t put = 0, bad = 0, ooo = 0;

	for (uint32_t i = 0; i < n; i++) {
		const uint16_t id = ids[i];
		struct sn_vring_used_elem *e;

		if (id >= size || !held[id]) {
			bad++;
			continue;
		}
		if (id == hf) {
			/* unhold() of the oldest (prev SN_VRING_NIL), the links settled
			 * below */
			hf = next[id];
			held[id] = 0;
		} else {
			/* held and not the oldest: its prev is a held id (a
			 * removal above leaves only the new oldest's prev
			 * stale, and id is not it), so unhold() reads valid
			 * links and writes neither the head nor its prev */
			ooo++;
			unhold(vr, id);
		}
		e = &ring[shadow++ & mask];
		__atomic_store_n(&e->id, id, __ATOMIC_RELAXED);
		__atomic_store_n(&e->len, 0, __ATOMIC_RELAXED);
		put++;
	}
	vr->held_first = hf;
	if (hf == SN_VRING_NIL)
		vr->held_last = SN_VRING_NIL;
	else
		prev[hf] = SN_VRING_NIL;
	vr->used_shadow = shadow;
	vr->st.held -= put - ooo;     /* unhold() counted its own */
	vr->st.out_of_order += ooo;
	vr->st.err[SN_VRING_E_BAD_COMPLETION] += bad;
	vr->st.completed += put;
	return put;
}

/* virtio 1.1 §2.7.10.1 / Linux vring_need_event(): did the used idx move
 * from old to new_idx across event? */
static inline int need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

int sn_vring_used_flush(struct sn_vring *vr)
{
	uint16_t old = vr->used_pub, new_idx = vr->used_shadow;
	int need;

	if (old == new_idx)
		return 0;
	/* Release pairs with the driver's read barrier after loading
	 * used->idx (virtio_rmb in Linux virtqueue_get_buf_ctx_split): the
	 * entries written by sn_vring_used_put() are visible first. */
	__atomic_store_n(&vr->used->idx, new_idx, __ATOMIC_RELEASE);
	vr->used_pub = new_idx;
	vr->st.flushes++;
	/* Full barrier: the used->idx store is ordered before the load of
	 * used_event / avail->flags. Pairs with the driver's mb() between
	 * writing used_event (or clearing NO_INTERRUPT) and re-reading
	 * used->idx (virtqueue_enable_cb_delayed / virtqueue_poll); without
	 * it both sides can miss each other and the guest sleeps forever. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vr->event_idx)
		need = need_event(__atomic_load_n(vr->used_event, __ATOMIC_RELAXED),
				  new_idx, old);
	else
		need = !(__atomic_load_n(&vr->avail->flags, __ATOMIC_RELAXED) &
			 SN_VRING_AVAIL_F_NO_INTERRUPT);
	if (need)
		vr->st.notify++;
	return need;
}

void sn_vring_kick_enable(struct sn_vring *vr, bool enable)
{
	vr->kick_on = enable;
	if (vr->event_idx) {
		/* Disabling = leaving avail_event behind: the driver kicks at
		 * most once more (§2.7.10). */
		if (enable)
			__atomic_store_n(vr->avail_event, vr->last_avail,
					 __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&vr->used->flags,
				 enable ? 0 : SN_VRING_USED_F_NO_NOTIFY,
				 __ATOMIC_RELAXED);
	}
	/* Full barrier: our enable is visible before the caller re-polls
	 * avail->idx. Pairs with the driver's mb() between its avail->idx
	 * store and its read of avail_event / used->flags
	 * (virtqueue_kick_prepare_split). */
	if (enable)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int sn_vring_hold(struct sn_vring *vr, uint32_t id)
{
	if (id >= vr->size || vr->held[id])
		return -EINVAL;
	vr->held[id] = 1;
	vr->next[id] = SN_VRING_NIL;
	vr->prev[id] = vr->held_last;
	if (vr->held_last == SN_VRING_NIL)
		vr->held_first = (uint16_t)id;
	else
		vr->next[vr->held_last] = (uint16_t)id;
	vr->held_last = (uint16_t)id;
	if (++vr->st.held > vr->st.held_max)
		vr->st.held_max = vr->st.held;
	return 0;
}

int sn_vring_oldest_held(const struct sn_vring *vr)
{
	return vr->held_first == SN_VRING_NIL ? -ENOENT : vr->held_first;
}

bool sn_vring_is_held(const struct sn_vring *vr, uint32_t id)
{
	return id < vr->size && vr->held[id];
}

void sn_vring_get_base(const struct sn_vring *vr, uint16_t *last_avail_idx,
		       uint16_t *last_used_idx)
{
	*last_avail_idx = vr->last_avail;
	*last_used_idx = vr->used_pub;
}

const struct sn_vring_used *sn_vring_used_ring(const struct sn_vring *vr)
{
	return vr->used;
}

bool sn_vring_is_broken(const struct sn_vring *vr)
{
	return vr->broken;
}

uint32_t sn_vring_size(const struct sn_vring *vr)
{
	return vr->size;
}

const struct sn_vring_stats *sn_vring_stats(const struct sn_vring *vr)
{
	return &vr->st;
}
