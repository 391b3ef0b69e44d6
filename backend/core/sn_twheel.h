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

/* Item references per pool node: 7 pointers + link + cursors = 64 bytes. */
#define SN_TWHEEL_NODE_ITEMS 7
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
				   * SN_TWHEEL_NODE_ITEMS items of one slot */
	uint64_t start_ns;        /* initial "now" */
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
struct sn_twheel_node {
	uint32_t next;            /* pool index of the next node of the slot / free list */
	uint16_t rd, wr;          /* items[rd..wr) are queued */
	void *items[SN_TWHEEL_NODE_ITEMS];
} SN_CACHE_ALIGNED;
static_assert(sizeof(struct sn_twheel_node) == SN_CACHE_LINE, "node is one cache line");

struct sn_twheel_slot {
	uint32_t head, tail;      /* pool indices, SN_TWHEEL_NIL when empty */
};

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
	struct sn_twheel_node *node;
	struct sn_cffs *occ;      /* bit per non-empty slot */
	/* Second cache line: counters. */
	struct sn_twheel_stats st SN_CACHE_ALIGNED;
	/* Read mostly. */
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

/* Insert `item` (any value, never dereferenced) due at `ts`; mode is one
 * of enum sn_twheel_horizon. O(1): one slot, at most one pool node and the
 * cFFS levels whose words turn non-zero. 0, -ERANGE or -ENOBUFS. */
static inline __attribute__((always_inline))
int sn_twheel_insert(struct sn_twheel *w, void *item, uint64_t ts, int mode)
{
	uint64_t s = sn_twheel_slot_of(w, ts);
	struct sn_twheel_slot *sl;
	struct sn_twheel_node *n;
	uint32_t pos, idx;

	s += (s * w->gran != ts);                  /* ceil: never release early */
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
	if (sl->tail != SN_TWHEEL_NIL) {
		n = &w->node[sl->tail];
		if (n->wr < SN_TWHEEL_NODE_ITEMS) {
			n->items[n->wr++] = item;
			goto done;
		}
	}
	idx = w->free_head;
	if (sn_unlikely(idx == SN_TWHEEL_NIL)) {
		w->st.drop_nobufs++;
		return -ENOBUFS;
	}
	n = &w->node[idx];
	w->free_head = n->next;
	w->pool_free--;
	n->next = SN_TWHEEL_NIL;
	n->rd = 0;
	n->wr = 1;
	n->items[0] = item;
	if (sl->tail == SN_TWHEEL_NIL) {
		sl->head = idx;
		sn_cffs_set(w->occ, pos);
	} else {
		w->node[sl->tail].next = idx;
	}
	sl->tail = idx;
done:
	w->count++;
	w->st.inserted++;
	return 0;
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
		struct sn_twheel_node *n = &w->node[idx];
		unsigned k = SN_MIN((unsigned)(n->wr - n->rd), max - got);

		/* Slot lists are pointer chains through a pool far larger than
		 * the caches: start the next node's miss before copying. */
		if (n->next != SN_TWHEEL_NIL)
			__builtin_prefetch(&w->node[n->next]);
		memcpy(out + got, &n->items[n->rd], k * sizeof(void *));
		got += k;
		n->rd = (uint16_t)(n->rd + k);
		if (n->rd < n->wr)
			break;
		sl->head = n->next;
		n->next = w->free_head;
		w->free_head = idx;
		w->pool_free++;
		if (sl->head == SN_TWHEEL_NIL) {
			sl->tail = SN_TWHEEL_NIL;
			sn_cffs_clear(w->occ, pos);
			break;
		}
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
