/* SPDX-License-Identifier: BSD-3-Clause */
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
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sn_cffs.h"
#include "sn_common.h"

/* Item references per pool node: node_items in the params, 2^k - 1. A
 * node is node_items + 1 pointer-sized words (64 B to 8 KiB); word 0 is
 * not used for items (the node's link lives in a separate array), so a
 * read position inside the pool is one 32-bit word index. */
#define SN_TWHEEL_NODE_ITEMS     127    /* default: 1 KiB nodes */
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
	uint32_t pool_nodes;      /* global pool size, >= 1 and
				   * pool_nodes * (node_items + 1) < 2^32; each node
				   * holds node_items items of one slot */
	uint64_t start_ns;        /* initial "now" */
	uint32_t node_items;      /* items per pool node: 0 = SN_TWHEEL_NODE_ITEMS,
				   * else 2^k - 1 in [NODE_ITEMS_MIN, NODE_ITEMS_MAX].
				   * Dense wheels (many items per slot) want big nodes:
				   * one link per node on extract. Sparse ones
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

/* ---- private layout (public only for the inline hot path) ----
 *
 * The pool is one array of item words, `1 << shift` words per node; node
 * i owns words [i << shift, (i + 1) << shift) and stores items in all but
 * its word 0; the pool is aligned to the node size. A slot has two
 * cursors into that array:
 *   write cursor (in wp[], see below): address of the word the next item
 *             of the slot goes to (in its tail node). Its low bits (bmask)
 *             are 0 when the tail node is full (the cursor ran onto the
 *             next node's word 0) and for an empty slot (NULL), so the
 *             insert fast path is one test and one store through it: no
 *             index to scale, no pool base.
 *   rd[slot]: word index of the next item to extract (in its head node);
 *             never a word 0, so 0 means "slot empty".
 * A slot is empty iff rd = 0 and its write cursor is NULL. Links
 * (next node of a slot, and the LIFO free list) live in next[], apart from
 * the items: allocation and extract touch no cold node header, and the
 * chain of a slot can be followed (for prefetching) without its items.
 *
 * rd[] and the cFFS are circular (index = absolute slot & mask). The write
 * cursors are not: wp[] has 2 * slots entries and absolute slot s lives at
 * wp[s - wbase], wbase a multiple of slots with wbase <= front < wbase +
 * slots, so every live slot [front, front + slots - 1] has an entry and no
 * index wraps. Insert's fast path then indexes wpf = &wp[front + 1 -
 * wbase] with the quotient directly (no front, no add, no mask). When the
 * front crosses wbase + slots, sn_twheel_rebase_ moves the live cursors
 * (all in the upper half then) down by slots: O(non-empty slots) once per
 * revolution. Entries of slots that are not live are NULL. */
struct sn_twheel {
	/* First cache line: insert's fast path reads only base1, fspan, mulc,
	 * wpf and bmask; extract's fast path front and mask. */
	uint64_t base1;           /* front * gran + 1: start (ns) of the front slot, + 1 */
	uint64_t fspan;           /* insert fast path takes base1 <= ts < base1 + fspan:
				   * (slots - 1) * gran, or 0 when the one-multiply
				   * division below is not exact for the wheel */
	uint64_t mulc;            /* ceil(2^64 / gran): floor(d / gran) = mulhi(d, mulc)
				   * for every d < fspan (checked at create) */
	void ***wpf;              /* &wp[front + 1 - wbase]: write cursor of slot
				   * front + 1 + k is wpf[k], k < slots - 1 */
	uint64_t bmask;           /* node bytes - 1 */
	uint64_t front;           /* absolute slot being drained; all items lie in
				   * [front, front + slots - 1] */
	uint64_t mask;            /* slots - 1 */
	void ***wp;               /* 2 * slots write cursors, slot s at wp[s - wbase] */
	/* Second cache line: extract, counters, slow path. */
	uint32_t *rd;             /* per slot: read cursor */
	uint32_t *next;           /* per node: next node of its slot / free list */
	void **item;              /* pool, as item words */
	uint64_t base_next;       /* base + gran (saturated): extract's fast path bound */
	uint64_t extracted;       /* items released; no insert counter: see sn_twheel_count */
	uint64_t gran;            /* ns per slot */
	uint32_t free_head;       /* pool free list (LIFO: hot nodes reused first) */
	uint32_t warm;            /* next word of slot front + 1 to prefetch while
				   * idle: 0 = not started, SN_TWHEEL_NIL = done */
	uint32_t wmask;           /* node words - 1 */
	uint32_t shift;           /* log2(node words) */
	/* Third cache line: rare counters, general division, geometry. */
	struct sn_twheel_stats st SN_CACHE_ALIGNED;   /* past, clamped, drops */
	struct sn_cffs *occ;      /* bit per non-empty slot */
	uint64_t recip;           /* floor((2^64-1) / gran): general division, corrected */
	uint64_t wbase;           /* absolute slot of wp[0], a multiple of slots */
	uint32_t node_items;
	uint32_t pool_nodes;
	uint32_t pool_free;
};
static_assert(offsetof(struct sn_twheel, rd) == SN_CACHE_LINE, "insert fields in line 0");
static_assert(offsetof(struct sn_twheel, st) == 2 * SN_CACHE_LINE, "hot fields in 2 lines");

struct sn_twheel *sn_twheel_create(const struct sn_twheel_params *p);
/* Frees the wheel; queued items are not touched. */
void sn_twheel_free(struct sn_twheel *w);

/* Items queued. O(non-empty slots): derived from the pool's use and the
 * slots' cursors, so that insert's fast path updates no counter (a
 * read-modify-write of one memory word per insert is a dependency chain
 * through store forwarding, ~10 % of the insert+extract time). Callers
 * that only need "anything queued?" use sn_twheel_empty(), O(1). */
uint64_t sn_twheel_count(const struct sn_twheel *w);
/* No item queued? O(1). */
static inline int sn_twheel_empty(const struct sn_twheel *w)
{
	return sn_cffs_empty(w->occ);
}
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
/* Is slot array index pos non-empty? (Scans and tests; O(1).) */
static inline int sn_twheel_slot_busy(const struct sn_twheel *w, uint32_t pos)
{
	return w->rd[pos] != 0;
}

/* Word index in the pool of a write cursor (wp[slot] != NULL). */
static inline uint32_t sn_twheel_wr_idx_(const struct sn_twheel *w, void **const p)
{
	return (uint32_t)(p - w->item);
}

/* floor(t / gran) for any t with one multiply: q = mulhi(t, recip) is
 * floor(t/gran) or one less (recip >= 2^64/gran - 1), fixed by one compare. */
static inline uint64_t sn_twheel_slot_of(const struct sn_twheel *w, uint64_t t)
{
	uint64_t q = (uint64_t)(((unsigned __int128)t * w->recip) >> 64);

	if (t - q * w->gran >= w->gran)
		q++;
	return q;
}

/* Every case the fast path below does not take: past, beyond the horizon,
 * an inexact fast division. */
int sn_twheel_insert_slow_(struct sn_twheel *w, void *item, uint64_t ts, int mode);
/* Append to the slot whose write cursor is *wp (a live slot) when its tail
 * node is full or absent: takes a pool node. 0 or -ENOBUFS. */
int sn_twheel_insert_node_(struct sn_twheel *w, void ***wp, void *item);

/* Insert `item` (any value, never dereferenced) due at `ts`; mode is one
 * of enum sn_twheel_horizon. O(1). The fast path (ts within the horizon,
 * the slot's tail node has room) is one multiply, the slot's write cursor
 * (wpf[quotient]: no wrap-around) and one item store. A full or absent
 * tail node takes a pool node (insert_node_: and, slot turning non-empty,
 * sets the cFFS bits whose words turn non-zero); past and beyond-horizon
 * timestamps go through insert_slow_. 0, -ERANGE or -ENOBUFS. */
static inline __attribute__((always_inline))
int sn_twheel_insert(struct sn_twheel *w, void *item, uint64_t ts, int mode)
{
	/* ts in (base, base + fspan] goes to slot front + 1 + floor(d / g),
	 * d = ts - base - 1, i.e. ceil(ts / g): never released early. */
	uint64_t d = ts - w->base1;

	if (sn_likely(d < w->fspan)) {
		uint64_t k = (uint64_t)(((unsigned __int128)d * w->mulc) >> 64);
		void ***wp = w->wpf + k;
		void **c = *wp;

		if (sn_likely((uintptr_t)c & w->bmask)) {
			*wp = c + 1;
			*c = item;
			/* The slot's next line: its first store then hits. */
			__builtin_prefetch(c + 8, 1);
			return 0;
		}
		return sn_twheel_insert_node_(w, wp, item);
	}
	return sn_twheel_insert_slow_(w, item, ts, mode);
}

/* Start loading a node's item lines (at most 1 KiB of them): nodes are
 * reached through links into a pool far larger than the caches. */
static inline void sn_twheel_prefetch_node_(const struct sn_twheel *w, uint32_t node)
{
	const char *p = (const char *)(w->item + ((size_t)node << w->shift));
	size_t bytes = ((size_t)w->wmask + 1) * sizeof(void *);

	for (size_t off = 0; off < bytes && off < 1024; off += SN_CACHE_LINE)
		__builtin_prefetch(p + off);
}

/* Move up to max items of the front slot (array index pos) into out[];
 * frees drained nodes, clears the occupancy bit when the slot empties. */
static inline unsigned sn_twheel_drain_slot_(struct sn_twheel *w, uint32_t pos,
					     void **out, unsigned max)
{
	void ***const wp = w->wpf - 1;   /* the front's write cursor */
	uint32_t r = w->rd[pos];
	const uint32_t c = sn_twheel_wr_idx_(w, *wp), last = (c - 1) >> w->shift;
	unsigned got = 0;

	for (;;) {
		uint32_t node = r >> w->shift;
		uint32_t end = node == last ? c : (r | w->wmask) + 1;
		unsigned k = SN_MIN(end - r, max - got);
		uint32_t nx;

		/* Start the next node's misses before copying this one. */
		if (node != last && r == (node << w->shift) + 1)
			sn_twheel_prefetch_node_(w, w->next[node]);
		memcpy(out + got, w->item + r, k * sizeof(void *));
		got += k;
		r += k;
		if (r != end)
			break;                  /* stopped by max */
		nx = w->next[node];
		w->next[node] = w->free_head;   /* node drained: back to the pool */
		w->free_head = node;
		w->pool_free++;
		if (node == last) {
			w->rd[pos] = 0;
			*wp = NULL;
			sn_cffs_clear(w->occ, pos);
			goto out;
		}
		r = (nx << w->shift) + 1;
		if (got == max)
			break;
	}
	w->rd[pos] = r;
out:
	w->extracted += got;
	return got;
}

/* Move the live write cursors down when the front leaves [wbase, wbase +
 * slots) (see the layout above); called by set_front_ only. */
void sn_twheel_rebase_(struct sn_twheel *w, uint64_t s);

/* Front moves to absolute slot s (every path that moves it comes here). */
static inline void sn_twheel_set_front_(struct sn_twheel *w, uint64_t s)
{
	uint64_t base = s * w->gran;

	if (sn_unlikely(s - w->wbase > w->mask))
		sn_twheel_rebase_(w, s);
	w->wpf = w->wp + (s + 1 - w->wbase);
	w->front = s;
	w->warm = 0;
	w->base1 = base + 1;
	w->base_next = base + w->gran < base ? UINT64_MAX : base + w->gran;
}

/* Called by an extract that found nothing due: prefetch the next few
 * lines (SN_TWHEEL_WARM_LINES) of slot front + 1, the next to be drained,
 * walking its chain through next[]. A caller that polls (Carousel's
 * shaper, the daemon's worker) thus has the slot's items in cache when it
 * comes due, instead of paying one miss per line during the drain, where
 * prefetching one node ahead hides only the time of copying one node.
 * Only the nodes of slot front + 1 are read; they cannot be freed before
 * the front moves, which restarts the walk (set_front_). */
#define SN_TWHEEL_WARM_LINES 8
static inline void sn_twheel_warm_next_(struct sn_twheel *w)
{
	uint32_t p = w->warm, npos, c, node, end, lines;
	const char *line;

	if (p == SN_TWHEEL_NIL)
		return;
	npos = (uint32_t)((w->front + 1) & w->mask);
	if (p == 0 && (p = w->rd[npos]) == 0)
		return;                         /* next slot empty (so far) */
	c = sn_twheel_wr_idx_(w, w->wpf[0]);
	node = p >> w->shift;
	/* This call: the lines of words [p, end) of p's node, at most
	 * SN_TWHEEL_WARM_LINES of them; end = the tail's write cursor. */
	end = (c - 1) >> w->shift == node ? c : (node + 1) << w->shift;
	lines = SN_MIN(((end - 1) >> 3) - (p >> 3) + 1, (uint32_t)SN_TWHEEL_WARM_LINES);
	line = (const char *)(w->item + (p & ~7u));
	for (uint32_t i = 0; i < lines; i++)
		__builtin_prefetch(line + i * SN_CACHE_LINE);
	p = ((p >> 3) + lines) << 3;            /* first word of the next line */
	if (p >= end)                           /* node done: next node, or all */
		p = end == c ? SN_TWHEEL_NIL : (w->next[node] << w->shift) + 1;
	w->warm = p;
}

/* Release up to max items due at `now` (slot start <= now) into out[], in
 * slot order, FIFO within a slot; returns how many. Advances the front to
 * now's slot (never backwards), skipping empty slots via the cFFS. Items
 * left because max was reached stay at the front for the next call. */
static inline unsigned sn_twheel_extract(struct sn_twheel *w, uint64_t now,
					 void **out, unsigned max)
{
	uint64_t ns;
	unsigned got = 0;

	if (now < w->base_next) {
		/* Fast path: only the front slot can be due. */
		uint32_t pos = (uint32_t)(w->front & w->mask);

		if (w->rd[pos] == 0) {
			sn_twheel_warm_next_(w);
			return 0;
		}
		if (max == 0)
			return 0;
		return sn_twheel_drain_slot_(w, pos, out, max);
	}
	ns = sn_twheel_slot_of(w, now);
	while (got < max) {
		uint32_t fpos = (uint32_t)(w->front & w->mask);
		uint32_t pos = sn_cffs_find_next(w->occ, fpos);
		uint64_t s;

		if (pos == SN_CFFS_NONE)
			break;
		s = w->front + ((pos - fpos) & w->mask);
		if (s > ns)
			break;
		if (s != w->front)
			sn_twheel_set_front_(w, s);
		got += sn_twheel_drain_slot_(w, pos, out + got, max - got);
		/* The next slot is usually the next one due: warm its head. */
		{
			uint32_t nr = w->rd[(pos + 1) & w->mask];

			if (nr)
				sn_twheel_prefetch_node_(w, nr >> w->shift);
		}
	}
	/* Stopped by max: later due slots may remain, so the front stays. */
	if (got < max && ns > w->front)
		sn_twheel_set_front_(w, ns);
	return got;
}

/* Start time (ns) of the earliest non-empty slot, UINT64_MAX if empty.
 * May be <= the last `now` passed to extract (items are due already). */
static inline uint64_t sn_twheel_next_due(const struct sn_twheel *w)
{
	uint32_t fpos = (uint32_t)(w->front & w->mask);
	uint32_t pos;

	if (sn_twheel_empty(w))
		return UINT64_MAX;
	pos = sn_cffs_find_next(w->occ, fpos);
	return (w->front + ((pos - fpos) & w->mask)) * w->gran;
}

#endif /* SN_TWHEEL_H */
