/* sn_twheel.h — Carousel timing wheel with a global node pool and cFFS.
 *
 * A time-indexed queue of opaque items (packet references). Time is
 * integer nanoseconds on one monotonic clock, below 2^63. The wheel has
 * `slots` (pow2) slots of `granularity_ns` each; slot number s (absolute,
 * = time / granularity) covers [s*g, (s+1)*g) and lives at array index
 * s % slots. Design and paper references: sn_twheel.c.
 *
 * Release rule (precise):
 *   - An item inserted with timestamp ts goes to absolute slot
 *     S = ceil(ts / g), the first slot boundary at or after ts, so it is
 *     never released before ts: extract(now) releases it only once
 *     now >= S*g >= ts.
 *   - If S < front (ts in the past, or not later than the slot being
 *     drained) it goes to the front slot and is released by the next
 *     extract.
 *   - If S > front + slots - 1 (beyond the horizon), the insert either
 *     clamps it to the last slot or fails with -ERANGE, per call.
 *   - Called "on time" (extract at every next_due() value), an item is
 *     released at S*g < ts + g: within one slot of its timestamp. Polled
 *     at least once per granularity instead, before ts + 2g. Items of one
 *     slot come out FIFO; slots come out in time order.
 *
 * Concurrency: single-threaded. A wheel belongs to one worker core; only
 * that thread may call any function on it. No locks, no barriers.
 *
 * Errors: constructors return NULL + errno; others 0 / -errno; burst
 * functions return a count. Insert fails with -ERANGE (beyond horizon,
 * reject mode) or -ENOBUFS (global pool exhausted): the caller keeps the
 * item and counts the drop; the wheel counts it too (stats).
 */
#ifndef SN_TWHEEL_H
#define SN_TWHEEL_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sn_cffs.h"
#include "sn_common.h"

/* Item references per pool node: node_items in the params; the node is
 * (node_items + 1) pointers wide (a link word, then the items), a power of
 * two from 64 B to 8 KiB. */
#define SN_TWHEEL_NODE_ITEMS     63     /* default: 512 B nodes */
#define SN_TWHEEL_NODE_ITEMS_MIN 7      /* 64 B: one cache line */
#define SN_TWHEEL_NODE_ITEMS_MAX 1023   /* 8 KiB */
#define SN_TWHEEL_MAX_SLOTS  SN_CFFS_MAX_BITS
#define SN_TWHEEL_NIL        UINT32_MAX

/* Per-insert horizon policy (Carousel §5.1.2: clamp for pacing, drop for
 * hard rate limits). */
enum sn_twheel_horizon {
	SN_TWHEEL_CLAMP = 0,    /* beyond horizon -> last slot */
	SN_TWHEEL_REJECT = 1,   /* beyond horizon -> -ERANGE */
};

struct sn_twheel_params {
	uint64_t granularity_ns;  /* slot width, >= 1 */
	uint32_t slots;           /* pow2, 2 .. SN_TWHEEL_MAX_SLOTS; horizon = slots * g */
	uint32_t pool_nodes;      /* global pool size, 1 .. 2^31; each node holds
				   * node_items items of one slot */
	uint64_t start_ns;        /* initial "now" */
	uint32_t node_items;      /* items per pool node: 0 = SN_TWHEEL_NODE_ITEMS,
				   * else 2^k - 1 in [NODE_ITEMS_MIN, NODE_ITEMS_MAX].
				   * Dense wheels (many items per slot) want big nodes:
				   * one pointer chase per node on extract. Sparse ones
				   * (about one item per slot) want small ones: every
				   * non-empty slot holds at least one node. */
};

struct sn_twheel_stats {
	uint64_t inserted;        /* accepted inserts (incl. past and clamped) */
	uint64_t extracted;
	uint64_t past;            /* accepted into the front slot: ts already due */
	uint64_t clamped;         /* accepted into the last slot: ts beyond horizon */
	uint64_t drop_range;      /* -ERANGE */
	uint64_t drop_nobufs;     /* -ENOBUFS */
};

/* ---- private layout (public only for the inline hot path) ---- */

/* A pool node: link + node_items item references (flexible array; nodes
 * are node_bytes apart in the pool). Only the slot knows how much of its
 * head and tail nodes is in use, so an insert writes just the item's line
 * and extract reads just the item lines and the link. */
struct sn_twheel_node {
	uint32_t next;            /* pool index of the next node of the slot / free list */
	uint32_t pad_;
	void *items[];
};

/* Empty slot: head = tail = NIL, rd = 0, wr = node_items ("tail full"), so
 * the insert fast path is one compare: wr < node_items. */
struct sn_twheel_slot {
	uint32_t head, tail;      /* pool indices, SN_TWHEEL_NIL when empty */
	uint16_t rd;              /* next item to read in the head node */
	uint16_t wr;              /* next free item in the tail node */
	uint32_t pad_;
};
static_assert(sizeof(struct sn_twheel_slot) == 16, "slot is 16 bytes");

struct sn_twheel {
	/* First cache line: read on every insert / extract. */
	uint64_t front;           /* absolute slot being drained; all items lie in
				   * [front, front + slots - 1] */
	uint64_t gran;            /* ns per slot */
	uint64_t recip;           /* floor((2^64-1) / gran): division by multiply */
	uint32_t mask;            /* slots - 1 */
	uint32_t free_head;       /* pool free list (LIFO: hot nodes reused first) */
	uint64_t count;           /* items queued */
	struct sn_twheel_slot *slot;
	char *node;               /* pool base; node i at node + (i << node_shift) */
	struct sn_cffs *occ;      /* bit per non-empty slot */
	/* Second cache line: counters. */
	struct sn_twheel_stats st SN_CACHE_ALIGNED;
	/* Node geometry (read on every insert / extract) and pool use. */
	uint32_t node_items;
	uint32_t node_shift;      /* log2(node bytes) */
	uint32_t pool_nodes;
	uint32_t pool_free;
};

struct sn_twheel *sn_twheel_create(const struct sn_twheel_params *p);
/* Frees the wheel; queued items are not touched. */
void sn_twheel_free(struct sn_twheel *w);

/* Items queued. */
static inline uint64_t sn_twheel_count(const struct sn_twheel *w) { return w->count; }
/* Horizon in ns (slots * granularity). */
uint64_t sn_twheel_horizon_ns(const struct sn_twheel *w);
/* Move the front of an EMPTY wheel to the slot of `now` (forwards or
 * backwards): after every item was extracted with a far-future now (which
 * advances the front there), the wheel can take items relative to the real
 * now again. 0, or -EBUSY if items are queued. */
int sn_twheel_rewind(struct sn_twheel *w, uint64_t now);
/* Pool nodes currently free. */
uint32_t sn_twheel_pool_free(const struct sn_twheel *w);
void sn_twheel_stats_get(const struct sn_twheel *w, struct sn_twheel_stats *out);
/* Print geometry, front, occupancy and pool use to stderr. */
void sn_twheel_dump(const struct sn_twheel *w);

/* floor(t / gran) with one multiply: q = mulhi(t, recip) is floor(t/gran)
 * or one less (recip >= 2^64/gran - 1), fixed by one compare. */
static inline uint64_t sn_twheel_slot_of(const struct sn_twheel *w, uint64_t t)
{
	uint64_t q = (uint64_t)(((unsigned __int128)t * w->recip) >> 64);

	if (t - q * w->gran >= w->gran)
		q++;
	return q;
}

/* ceil(t / gran), the same way: one multiply for the quotient, one for
 * the remainder that both corrects it and rounds it up. */
static inline uint64_t sn_twheel_slot_ceil_(const struct sn_twheel *w, uint64_t t)
{
	uint64_t q = (uint64_t)(((unsigned __int128)t * w->recip) >> 64);
	uint64_t r = t - q * w->gran;

	if (r >= w->gran) {
		q++;
		r -= w->gran;
	}
	return q + (r != 0);
}

static inline struct sn_twheel_node *sn_twheel_node_(const struct sn_twheel *w, uint32_t idx)
{
	return (struct sn_twheel_node *)(w->node + ((size_t)idx << w->node_shift));
}

/* Insert `item` (any value, never dereferenced) due at `ts`; mode is one
 * of enum sn_twheel_horizon. O(1): the slot, one item line of its tail
 * node, and only when the tail node is full a pool node and (slot turning
 * non-empty) the cFFS levels whose words turn non-zero. 0, -ERANGE or
 * -ENOBUFS. */
static inline __attribute__((always_inline))
int sn_twheel_insert(struct sn_twheel *w, void *item, uint64_t ts, int mode)
{
	uint64_t s = sn_twheel_slot_ceil_(w, ts);   /* never release early */
	struct sn_twheel_slot *sl;
	struct sn_twheel_node *n;
	uint32_t pos, idx;

	if (s <= w->front) {
		s = w->front;
		w->st.past++;
	} else if (sn_unlikely(s - w->front > w->mask)) {
		if (mode == SN_TWHEEL_REJECT) {
			w->st.drop_range++;
			return -ERANGE;
		}
		s = w->front + w->mask;
		w->st.clamped++;
	}
	pos = (uint32_t)s & w->mask;
	sl = &w->slot[pos];
	if (sn_likely(sl->wr < w->node_items)) {
		sn_twheel_node_(w, sl->tail)->items[sl->wr++] = item;
		goto done;
	}
	idx = w->free_head;
	if (sn_unlikely(idx == SN_TWHEEL_NIL)) {
		w->st.drop_nobufs++;
		return -ENOBUFS;
	}
	n = sn_twheel_node_(w, idx);
	w->free_head = n->next;
	w->pool_free--;
	n->next = SN_TWHEEL_NIL;
	n->items[0] = item;
	if (sl->tail == SN_TWHEEL_NIL) {
		sl->head = idx;
		sl->rd = 0;
		sn_cffs_set(w->occ, pos);
	} else {
		sn_twheel_node_(w, sl->tail)->next = idx;
	}
	sl->tail = idx;
	sl->wr = 1;
done:
	w->count++;
	w->st.inserted++;
	return 0;
}

/* Start loading a whole node (all its lines): nodes are reached by
 * pointer chasing through a pool far larger than the caches. */
static inline void sn_twheel_prefetch_node_(const struct sn_twheel *w, uint32_t idx)
{
	const char *p = (const char *)sn_twheel_node_(w, idx);
	size_t bytes = (size_t)1 << w->node_shift;

	for (size_t off = 0; off < bytes && off < 1024; off += SN_CACHE_LINE)
		__builtin_prefetch(p + off);
}

/* Move up to max items of slot array index pos into out[]; frees drained
 * nodes, clears the occupancy bit when the slot empties. */
static inline unsigned sn_twheel_drain_slot_(struct sn_twheel *w, uint32_t pos,
					     void **out, unsigned max)
{
	struct sn_twheel_slot *sl = &w->slot[pos];
	unsigned got = 0;

	while (got < max) {
		uint32_t idx = sl->head;
		struct sn_twheel_node *n = sn_twheel_node_(w, idx);
		unsigned end = idx == sl->tail ? sl->wr : w->node_items;
		unsigned k = SN_MIN(end - sl->rd, max - got);
		uint32_t next = n->next;

		/* Start the next node's misses before copying this one. */
		if (next != SN_TWHEEL_NIL)
			sn_twheel_prefetch_node_(w, next);
		memcpy(out + got, &n->items[sl->rd], k * sizeof(void *));
		got += k;
		sl->rd = (uint16_t)(sl->rd + k);
		if (sl->rd < end)
			break;
		n->next = w->free_head;
		w->free_head = idx;
		w->pool_free++;
		sl->rd = 0;
		if (idx == sl->tail) {
			sl->head = sl->tail = SN_TWHEEL_NIL;
			sl->wr = (uint16_t)w->node_items;
			sn_cffs_clear(w->occ, pos);
			break;
		}
		sl->head = next;
	}
	w->count -= got;
	w->st.extracted += got;
	return got;
}

/* Release up to max items due at `now` (slot start <= now) into out[], in
 * slot order, FIFO within a slot; returns how many. Advances the front to
 * now's slot (never backwards), skipping empty slots via the cFFS. Items
 * left because max was reached stay at the front for the next call. */
static inline unsigned sn_twheel_extract(struct sn_twheel *w, uint64_t now,
					 void **out, unsigned max)
{
	uint64_t ns = sn_twheel_slot_of(w, now);
	unsigned got = 0;

	if (ns <= w->front) {
		/* Fast path: only the front slot can be due. */
		uint32_t pos = (uint32_t)w->front & w->mask;

		if (w->slot[pos].head == SN_TWHEEL_NIL || max == 0)
			return 0;
		return sn_twheel_drain_slot_(w, pos, out, max);
	}
	while (got < max) {
		uint32_t fpos = (uint32_t)w->front & w->mask;
		uint32_t pos = sn_cffs_find_next(w->occ, fpos);
		uint64_t s;

		if (pos == SN_CFFS_NONE)
			break;
		s = w->front + ((pos - fpos) & w->mask);
		if (s > ns)
			break;
		w->front = s;
		got += sn_twheel_drain_slot_(w, pos, out + got, max - got);
		/* The next slot is usually the next one due: warm its head. */
		{
			const struct sn_twheel_slot *nx = &w->slot[(pos + 1) & w->mask];

			if (nx->head != SN_TWHEEL_NIL)
				sn_twheel_prefetch_node_(w, nx->head);
		}
	}
	/* Stopped by max: later due slots may remain, so the front stays. */
	if (got < max)
		w->front = SN_MAX(w->front, ns);
	return got;
}

/* Start time (ns) of the earliest non-empty slot, UINT64_MAX if empty.
 * May be <= the last `now` passed to extract (items are due already). */
static inline uint64_t sn_twheel_next_due(const struct sn_twheel *w)
{
	uint32_t fpos = (uint32_t)w->front & w->mask;
	uint32_t pos;

	if (w->count == 0)
		return UINT64_MAX;
	pos = sn_cffs_find_next(w->occ, fpos);
	return (w->front + ((pos - fpos) & w->mask)) * w->gran;
}

#endif /* SN_TWHEEL_H */
