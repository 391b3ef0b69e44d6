/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_mbox.h — PSPAT mailboxes: lock-free SPSC pointer queues, client lists
 * and the consumer->producer backpressure flag.
 *
 * Follows L. Rizzo, P. Valente, G. Lettieri, V. Maffione, "PSPAT: software
 * packet scheduling at hardware speed", Computer Communications 2018:
 * §4.1 ("improved FastForward"), §3.1 (client lists and backpressure).
 * Producer and consumer share only the slot array: `tail` and `head` are
 * private, so the only cache lines that bounce are the ones both threads
 * are really using.
 *
 *  - Each slot holds `item | lap`, where lap = (index >> log2(size)) & 1 is
 *    the parity of the lap the entry was written in; items are non-NULL and
 *    at least 2-aligned, so bit 0 is free. The consumer accepts a slot only
 *    if it is non-zero and carries the parity of its own lap, so an entry
 *    left over from the previous lap is never mistaken for a new one.
 *  - Because the lap tag, not a NULL, tells the consumer what is new, the
 *    consumer never clears slots one by one. It "releases" a cache line of
 *    slots only once it has consumed the whole line, by zeroing the line's
 *    first slot: one store per line, never a write into a line the
 *    producer may still be filling (PSPAT Fig. 6b, consumer write arrow).
 *  - The producer looks for room only when it crosses into a new line: it
 *    reads the first slot of the line *after* the one it is entering (one
 *    line of look-ahead, Fig. 6b producer read arrow) and enters only if
 *    that slot is zero. The consumer releases lines in order, so a released
 *    line ahead implies the line being entered is released too, and the
 *    producer never writes into the line the consumer is reading.
 *    Consequence: usable capacity is size - SN_MBOX_LINE_SLOTS, and a
 *    mailbox has at least two lines.
 *
 * Client lists (PSPAT §3.1) are mailboxes whose items are client mailboxes.
 * The producer (a core's client) appends its mailbox only if it is not the
 * last entry it appended there, so a busy client touches the list once. The
 * consumer side keeps the last entry it extracted (the "trim leaving the
 * last entry" of Fig. 5) for the arbiter to keep rescanning. A producer
 * whose append finds the list full raises the list's overflow flag; the
 * consumer then scans all its clients once, so no mailbox is ever
 * forgotten (PSPAT does not say what happens when a list fills; a worker
 * that serves many queues round-robin appends A,B,A,B... and can fill it).
 *
 * Concurrency contract, per mailbox (a client list is a mailbox too):
 *
 *   calls                            caller      mutual exclusion needed
 *   -------------------------------  ----------  ----------------------------
 *   sn_mbox_create, sn_mbox_free     setup       with every other call
 *   sn_mbox_insert, _insert_burst,   producer    among themselves (a single
 *   _cl_append, _bp_take                         producer thread)
 *   sn_mbox_extract, _extract_burst, consumer    among themselves (a single
 *   _cl_next, _cl_last,                          consumer thread)
 *   _cl_overflowed, _bp_set,
 *   _prefetch_consumer
 *   sn_mbox_capacity, _udata         any thread  none (read-only after create)
 *
 * Producer calls and consumer calls run concurrently without locks. The
 * producer (or consumer) thread may change only with an external
 * happens-before between the old and the new one (e.g. a thread join).
 *
 *   release store (by)              acquire load (by)         orders
 *   ------------------------------  ------------------------  ---------------
 *   insert*: the slot (producer)    extract*: the slot        item contents
 *                                   (consumer)                before the item
 *   __release_line: zero the first  __room: that slot, on     consumer's reads
 *   slot of a consumed line         entering a new line       of a line before
 *   (consumer)                      (producer)                it is rewritten
 *   cl_append: the ovf flag         cl_overflowed: exchange   inserts into the
 *   (list's producer)               (list's consumer)         client mailbox
 *                                                             before the flag
 *   bp_set / bp_take: relaxed both ways (the flag carries no data)
 */
#ifndef SN_MBOX_H
#define SN_MBOX_H

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sn_common.h"

/* Slots per cache line: the unit of room checks and of lazy release. */
#define SN_MBOX_LINE_SLOTS ((uint32_t)(SN_CACHE_LINE / sizeof(uintptr_t)))
#define SN_MBOX_MIN_SIZE   (2u * SN_MBOX_LINE_SLOTS)
#define SN_MBOX_MAX_SIZE   (1u << 28)

struct sn_mbox {
	/* Line 0: read-only after create. */
	uintptr_t mask;           /* size - 1 */
	uint32_t size;
	uint32_t shift;           /* log2(size): lap parity = (idx >> shift) & 1 */
	void *udata;              /* owner's cookie (e.g. the arbiter's client) */

	/* Line 1: producer-private. */
	alignas(SN_CACHE_LINE) uint64_t prod_tail; /* next index to write */
	uint64_t prod_lim;        /* may write up to here without a room check */
	const struct sn_mbox *prod_last; /* client list: last mailbox appended */

	/* Line 2: consumer-private. */
	alignas(SN_CACHE_LINE) uint64_t cons_head; /* next index to read */
	struct sn_mbox *cons_last; /* client list: last mailbox extracted */

	/* Line 3: rarely written flags. */
	alignas(SN_CACHE_LINE) atomic_uint bp; /* consumer -> producer (PSPAT §3.1 "Backpressure") */
	atomic_uint ovf;          /* client list: producer -> consumer, an append was lost */

	/* Lines 4..: the slots. */
	alignas(SN_CACHE_LINE) _Atomic uintptr_t slots[];
};

static_assert(offsetof(struct sn_mbox, prod_tail) == 1 * SN_CACHE_LINE, "producer line");
static_assert(offsetof(struct sn_mbox, cons_head) == 2 * SN_CACHE_LINE, "consumer line");
static_assert(offsetof(struct sn_mbox, bp) == 3 * SN_CACHE_LINE, "flag line");
static_assert(offsetof(struct sn_mbox, slots) == 4 * SN_CACHE_LINE, "slots line");
static_assert(sizeof(uintptr_t) == 8 || sizeof(uintptr_t) == 4, "pointer size");

/* Create a mailbox of `size` slots (power of two, SN_MBOX_MIN_SIZE ..
 * SN_MBOX_MAX_SIZE); it holds up to size - SN_MBOX_LINE_SLOTS items.
 * NULL + errno (EINVAL, ENOMEM). Setup only. */
struct sn_mbox *sn_mbox_create(uint32_t size, void *udata);
/* Free; items still inside are not touched. Setup only. */
void sn_mbox_free(struct sn_mbox *mb);
/* Items the mailbox can hold at most. Any thread. */
static inline uint32_t sn_mbox_capacity(const struct sn_mbox *mb)
{
	return mb->size - SN_MBOX_LINE_SLOTS;
}
static inline void *sn_mbox_udata(const struct sn_mbox *mb) { return mb->udata; }

/* ---- producer side ---------------------------------------------------- */

/* Room check on entering the line that starts at index t: the first slot
 * of the next line must have been released. Acquire pairs with the
 * consumer's release store in sn_mbox__release_line(): every read the
 * consumer made of that line (and, by program order, of all earlier lines)
 * happens before we overwrite it. */
static inline int sn_mbox__room(const struct sn_mbox *mb, uint64_t t)
{
	return atomic_load_explicit(&mb->slots[(t + SN_MBOX_LINE_SLOTS) & mb->mask],
				    memory_order_acquire) == 0;
}

static inline int sn_mbox__valid_item(const void *item)
{
	return item != NULL && ((uintptr_t)item & 1u) == 0;
}

/* Insert one item (non-NULL, 2-aligned). 0, -ENOBUFS when full, -EINVAL
 * for a NULL or odd pointer. Producer only. */
static inline int sn_mbox_insert(struct sn_mbox *mb, void *item)
{
	uint64_t t = mb->prod_tail;

	if (sn_unlikely(!sn_mbox__valid_item(item)))
		return -EINVAL;
	if (t == mb->prod_lim) {
		if (!sn_mbox__room(mb, t))
			return -ENOBUFS;
		mb->prod_lim = t + SN_MBOX_LINE_SLOTS;
	}
	/* Release pairs with the consumer's acquire load in sn_mbox_extract*:
	 * the item's contents are visible before the consumer can see it. */
	atomic_store_explicit(&mb->slots[t & mb->mask],
			      (uintptr_t)item | ((t >> mb->shift) & 1u),
			      memory_order_release);
	mb->prod_tail = t + 1;
	return 0;
}

/* Insert up to n items in order; returns how many went in. Stops when the
 * mailbox is full or at the first NULL/odd pointer. Producer only. */
static inline uint32_t sn_mbox_insert_burst(struct sn_mbox *mb, void *const *items,
					    uint32_t n)
{
	uint64_t t = mb->prod_tail, lim = mb->prod_lim;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (sn_unlikely(!sn_mbox__valid_item(items[i])))
			break;
		if (t == lim) {
			if (!sn_mbox__room(mb, t))
				break;
			lim = t + SN_MBOX_LINE_SLOTS;
		}
		/* Release: pairs with the acquire in sn_mbox_extract*. */
		atomic_store_explicit(&mb->slots[t & mb->mask],
				      (uintptr_t)items[i] | ((t >> mb->shift) & 1u),
				      memory_order_release);
		t++;
	}
	mb->prod_tail = t;
	mb->prod_lim = lim;
	return i;
}

/* ---- consumer side ---------------------------------------------------- */

/* The consumer finished the whole line that ends just before index h:
 * zero its first slot. Release pairs with the producer's acquire in
 * sn_mbox__room(): our reads of the line happen before its rewrites. */
static inline void sn_mbox__release_line(struct sn_mbox *mb, uint64_t h)
{
	atomic_store_explicit(&mb->slots[(h - SN_MBOX_LINE_SLOTS) & mb->mask], 0,
			      memory_order_release);
}

/* Read the slot at h; 0 if it holds no entry of h's lap. Acquire pairs with
 * the producer's release store in sn_mbox_insert*. */
static inline uintptr_t sn_mbox__read(const struct sn_mbox *mb, uint64_t h)
{
	uintptr_t v = atomic_load_explicit(&mb->slots[h & mb->mask], memory_order_acquire);
	uintptr_t lap = (h >> mb->shift) & 1u;

	if (v == 0 || ((v ^ lap) & 1u))
		return 0;
	return v & ~(uintptr_t)1;
}

/* Extract the oldest item, or NULL when empty. Consumer only. */
static inline void *sn_mbox_extract(struct sn_mbox *mb)
{
	uint64_t h = mb->cons_head;
	uintptr_t v = sn_mbox__read(mb, h);

	if (v == 0)
		return NULL;
	mb->cons_head = ++h;
	if ((h & (SN_MBOX_LINE_SLOTS - 1)) == 0)
		sn_mbox__release_line(mb, h);
	return (void *)v;
}

/* Extract up to n items into out[]; returns how many. Consumer only.
 * Walks a cache line at a time: within a line the lap parity and the slot
 * base are fixed (size is a multiple of the line), and the line is
 * released once, when the walk leaves it. */
static inline uint32_t sn_mbox_extract_burst(struct sn_mbox *mb, void **out, uint32_t n)
{
	uint64_t h = mb->cons_head;
	uint32_t i = 0;

	while (i < n) {
		uint32_t off = (uint32_t)h & (SN_MBOX_LINE_SLOTS - 1);
		uint32_t m = SN_MIN(n - i, SN_MBOX_LINE_SLOTS - off), j;
		const _Atomic uintptr_t *sl = &mb->slots[h & mb->mask];
		uintptr_t lap = (h >> mb->shift) & 1u;

		for (j = 0; j < m; j++) {
			/* Acquire pairs with the producer's release store in
			 * sn_mbox_insert*. */
			uintptr_t v = atomic_load_explicit(&sl[j], memory_order_acquire);

			if (v == 0 || ((v ^ lap) & 1u))
				break;
			out[i + j] = (void *)(v & ~(uintptr_t)1);
		}
		i += j;
		h += j;
		if (j < m)
			break;
		if ((h & (SN_MBOX_LINE_SLOTS - 1)) == 0)
			sn_mbox__release_line(mb, h);
	}
	mb->cons_head = h;
	return i;
}

/* Consumer: start loading the slot line the next extract will read (a
 * hint; no effect on the contents). For a consumer that polls many
 * mailboxes: overlap the miss on the next one with work on this one. */
static inline void sn_mbox_prefetch_consumer(const struct sn_mbox *mb)
{
	__builtin_prefetch((const void *)&mb->slots[mb->cons_head & mb->mask]);
}

/* ---- client lists (PSPAT §3.1) ---------------------------------------- */

/* Producer of client list `cl` (the client running on that list's core),
 * after inserting into its own mailbox `client`: append `client` unless it
 * is already the last entry appended. 0 (appended or already last) or
 * -ENOBUFS (list full: the overflow flag is raised instead, the next call
 * tries again). */
static inline int sn_mbox_cl_append(struct sn_mbox *cl, struct sn_mbox *client)
{
	int r;

	if (cl->prod_last == client)
		return 0;
	r = sn_mbox_insert(cl, client);
	if (r == 0) {
		cl->prod_last = client;
	} else if (!atomic_load_explicit(&cl->ovf, memory_order_relaxed)) {
		/* Release pairs with the acquire exchange in
		 * sn_mbox_cl_overflowed(): our earlier inserts into `client`
		 * are visible to a consumer that sees the flag. */
		atomic_store_explicit(&cl->ovf, 1u, memory_order_release);
	}
	return r;
}

/* Consumer of client list `cl`: next appended client mailbox, or NULL. The
 * last one returned stays available through sn_mbox_cl_last(). */
static inline struct sn_mbox *sn_mbox_cl_next(struct sn_mbox *cl)
{
	struct sn_mbox *m = (struct sn_mbox *)sn_mbox_extract(cl);

	if (m != NULL)
		cl->cons_last = m;
	return m;
}

/* Consumer: the last entry extracted (the one PSPAT's trim leaves in the
 * list); NULL before the first. */
static inline struct sn_mbox *sn_mbox_cl_last(const struct sn_mbox *cl)
{
	return cl->cons_last;
}

/* Consumer: 1 if an append was lost since the last call (and clear the
 * flag): the caller must then scan every client this list may name. Clear
 * before scanning, so a loss during the scan shows up next time. */
static inline int sn_mbox_cl_overflowed(struct sn_mbox *cl)
{
	if (!atomic_load_explicit(&cl->ovf, memory_order_relaxed))
		return 0;
	/* Acquire pairs with the release store in sn_mbox_cl_append(). */
	return atomic_exchange_explicit(&cl->ovf, 0u, memory_order_acquire) != 0;
}

/* ---- backpressure flag (PSPAT §3.1) ----------------------------------- */
/* The flag carries no data, only "something of yours was dropped", so both
 * sides use relaxed atomics: there is nothing to order it with. */

/* Consumer: tell the producer one of its items was dropped downstream. */
static inline void sn_mbox_bp_set(struct sn_mbox *mb)
{
	/* Read first so a set flag does not dirty the producer's line again. */
	if (!atomic_load_explicit(&mb->bp, memory_order_relaxed))
		atomic_store_explicit(&mb->bp, 1u, memory_order_relaxed);
}

/* Producer: 1 if the flag was set since the last call (and clear it). */
static inline int sn_mbox_bp_take(struct sn_mbox *mb)
{
	if (!atomic_load_explicit(&mb->bp, memory_order_relaxed))
		return 0;
	return atomic_exchange_explicit(&mb->bp, 0u, memory_order_relaxed) != 0;
}

#endif /* SN_MBOX_H */
