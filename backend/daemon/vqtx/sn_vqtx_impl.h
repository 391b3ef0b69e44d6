/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_impl.h — internals of the deferred TX virtqueue (sn_vqtx*.c):
 * the queue, slot, guest-map and per-worker structures, and the helpers
 * the per-frame paths inline. Not for use outside vqtx/.
 */
#ifndef SN_VQTX_IMPL_H
#define SN_VQTX_IMPL_H

#include "sn_vqtx.h"

#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include "sn_common.h"
#include "sn_config.h"
#include "sn_quota.h"
#include "sn_vring.h"

/* Symbols shared by the sn_vqtx*.c files only: hidden, so that the
 * per-frame paths take the free callback's address rip-relative instead of
 * loading it from the GOT on every frame. */
#define SN_VQTX_INTERNAL __attribute__((visibility("hidden")))

enum { WORKER_NONE, WORKER_RUNNING, WORKER_GONE };

/* sn_vqtx_service() publishes counters at most this often (plus always at
 * teardown): readers (stats.get, ~ms apart) see them at most this late. */
#define PUB_EVERY_US 100u
/* Recycle stash (sn_vqtx_done.c): completed single-segment frames' mbufs,
 * still external, kept for the worker's next sn_vqtx_recv(). */
#define STASH_MAX (2 * SN_CONFIG_BURST_MAX)
/* Loop iterations since a frame was last stashed; at STASH_IDLE_ITERS the
 * stash goes back to the pool (sn_vqtx_set_now), so an idle worker holds
 * no mbufs and mempool in_use returns to its baseline (leak checks). */
#define STASH_IDLE_ITERS 1024u

/* The context of one worker index (sn_vqtx.h "Threads"): everything the
 * worker-side calls read besides their queue. The first group is the
 * worker's own (its lcore only, between sn_vqtx_worker_enter and
 * sn_vqtx_worker_exit); the second, on its own cache line, is shared with
 * MAIN and the VHOST thread. */
struct sn_vqtx_worker {
	/* Iteration clock (TSC), set by sn_vqtx_set_now() at the start of
	 * each loop iteration: the time base of hold times recorded by the
	 * free callback, of the worker's hold-limit checks (one rdtsc per
	 * iteration instead of one per frame) and of counter publication. */
	uint64_t now;
	uint64_t pub_tsc;             /* PUB_EVERY_US in TSC */
	/* Burst hold bound (sn_vqtx_hold.c): the earliest TSC at which a
	 * frame popped so far from one of this worker's queues can reach its
	 * deadline, from the last scan (0: no bound); kb_min is the running
	 * minimum of a scan in progress (0: none). */
	uint64_t keep_until;
	uint64_t kb_min;
	/* Recycle stash: mbufs of pool stash_mp, external, shinfo =
	 * &stash_shinfo (a dummy whose callback does nothing). */
	unsigned nstash;
	unsigned stash_idle;
	struct rte_mempool *stash_mp;
	struct rte_mbuf_ext_shared_info stash_shinfo;
	struct rte_mbuf *stash[STASH_MAX];

	/* WORKER_*: released by the worker at enter and exit, acquired by
	 * sn_vqtx_stop() to decide who tears a queue down. */
	uint32_t state __rte_cache_aligned;
	/* This worker's queues with a stop request open: sn_vqtx_stop counts
	 * a queue before its stop_req store, sn_vqtx_stop_ack (or the VHOST
	 * thread's own teardown) uncounts it; seq_cst, so sn_vqtx_keep_all
	 * sees the count whenever it could see stop_req. */
	uint32_t stops_open;
	/* The smallest hold limit (TSC) of any queue assigned to this worker:
	 * its unmarked_hold_tsc, which sn_vqtx_set_unmarked_hold caps at
	 * max_hold_tsc. MAIN lowers it (before the port is published, or
	 * when config.reload lowers a limit),
	 * the worker reads it (relaxed) at each bound scan. */
	uint64_t min_hold_tsc;
	unsigned lcore;               /* set at enter (relaxed: read to log only) */
	unsigned idx;                 /* constant */
};

/* The table of worker contexts and the caller's own (sn_vqtx.c). */
extern SN_VQTX_INTERNAL struct sn_vqtx_worker sn_vqtx_workers[SN_VQTX_WORKERS_MAX];
extern SN_VQTX_INTERNAL __thread struct sn_vqtx_worker *sn_vqtx_self
	__attribute__((tls_model("initial-exec")));

/* One per descriptor head: the shared info of the frame popped at that
 * head (q, head, free_cb and fcb_opaque set at start, constant per
 * connection), its pop stamp (TSC; lowest bit 1: not opted in, the short
 * hold limit), the epoch and map generation it was popped in. */
struct slot {
	struct rte_mbuf_ext_shared_info shinfo;  /* fcb_opaque = this slot */
	struct sn_vqtx *q;
	uint64_t pop_tsc;
	uint32_t epoch;
	uint16_t head;
	uint16_t mgen;                /* q->mgen when popped */
	uint8_t nseg;                 /* units charged to q->mq (its segments) */
};

struct sn_vqtx {
	/* Read-mostly. */
	/* Budgets (sn_vqtx_set_quota): the port's mbuf quota and its owner
	 * there (NULL: none), and the held-descriptor cap of this queue
	 * (MAIN stores, the owner loads relaxed once per burst; NULL: none). */
	struct sn_quota *mq;
	uint32_t mq_owner;
	const uint32_t *held_cap;
	/* Owner: segments per frame to expect (the most of the last burst,
	 * halving over bursts of smaller frames; 0 = 1): a poll pops only
	 * as many frames as the port's mbuf room holds at that size, so
	 * chains wait in the ring rather than being dropped for want of
	 * mbufs. */
	uint32_t seg_hint;
	/* Owner: the budgets that limited the last poll (HELD_BACK_*): a
	 * hit is counted when a budget starts limiting, not per poll. */
	uint8_t held_back;
	/* Hold limits: MAIN stores (sn_vqtx_set_holds), readers load, relaxed. */
	uint64_t max_hold_tsc;        /* 0 = no limit */
	uint64_t unmarked_hold_tsc;   /* > 0 */
	uint16_t vring;               /* 2 * TX queue + 1 (multiqueue: one
	                               * struct sn_vqtx per TX queue) */
	struct sn_vqtx_worker *w;     /* owning worker (sn_vqtx_set_worker) */

	/* Handshake VHOST <-> WORKER. */
	uint32_t stop_req;            /* release by stop, acquire by worker */
	uint32_t stop_ack;            /* release by worker, acquire by stop */
	uint32_t live;                /* ring owned by the worker: release in start */

	/* Ring state: written by start/stop while not live, else WORKER only. */
	int vid;
	struct sn_vring *vr;
	/* Our mapping of the guest memory the ring translates with
	 * (map), and the ones it used before (older list: still mapped for
	 * the rings and frames in flight); both WORKER while live. next_map:
	 * a newer table handed over by sn_vqtx_remap(); exchanged atomically
	 * by both sides, so each map is taken by exactly one of them
	 * (VHOST xchg release -> WORKER xchg acquire). */
	struct sn_vqtx_gmap *map;
	struct sn_vqtx_gmap *next_map;
	/* The table of the newest map the VHOST thread made (start or
	 * remap), copied: VHOST only. A copy, not the map: the worker may
	 * unmap that map at any time (a table sn_vring_set_mem refused is
	 * retired with the older maps). */
	struct sn_vqtx_gmap_id {
		uint32_t n;                          /* 0: none */
		uint64_t gpa[SN_VRING_MAX_REGIONS], size[SN_VRING_MAX_REGIONS];
		uint64_t lib_hva[SN_VRING_MAX_REGIONS], uaddr[SN_VRING_MAX_REGIONS];
	} last_tab;
	/* WORKER while live: the map the rings are read through (moved to the
	 * newest map when the rings lie inside it), the rings' guest-physical
	 * addresses (set at start), the map generation (slot.mgen) and the
	 * frames still outstanding from older generations: at 0, every older
	 * map but ring_map is unmapped (retire()). */
	struct sn_vqtx_gmap *ring_map;
	uint64_t ring_gpa[3];
	uint16_t mgen;
	uint32_t old_out;
	/* Maps alive for this queue (VHOST adds, WORKER/VHOST subtract):
	 * sn_vqtx_remap() refuses beyond SN_VQTX_MAPS_MAX (a front-end
	 * alternating tables must not grow the daemon's mappings). */
	uint32_t nmaps;
	/* Maps abandoned at a stop with frames still outstanding (VHOST only):
	 * unmapped at a later stop or free once nothing references them. */
	struct sn_vqtx_gmap *grave;
	const struct vring_avail *avail;  /* the guest's avail ring (waiting_now) */
	struct slot *slots;
	uint32_t size;
	uint64_t used_bytes;          /* used ring size, for dirty logging */
	uint32_t epoch;
	/* Frames popped and not yet freed (all epochs); plus SN_VQTX_DEAD once
	 * sn_vqtx_free() ran (read-modify-writes from then on, sn_vqtx.c). */
#define SN_VQTX_DEAD (1u << 31)
	uint32_t outstanding;
	uint32_t late_out;            /* of them, popped before the last teardown
	                               * (owner; VHOST when no worker runs) */
	uint32_t stop_counted;        /* counted in w->stops_open (exchanged by
	                               * VHOST and WORKER, seq_cst) */
	/* A stop that gave up waiting (SN_VQTX_STOP_WAIT_US): VHOST stores 1
	 * (seq_cst); the worker then writes nothing more to the ring, and its
	 * teardown completes nothing (the vring base was not set). */
	uint32_t abandoned;
	/* dead_slots: the slot arrays
	 * of earlier connections whose frames were still out when they
	 * stopped (VHOST/MAIN append at stop and free; freed with the last
	 * frame: at a stop that finds none out, or at the reap). */
	struct slot **dead_slots;
	uint32_t ndead, dead_cap;
	bool dirty;
	/* Dirty log vs a bitmap replacement (sn_vqtx_log_pause): log_busy
	 * WORKER, 1 around its log write; log_paused VHOST, 1 while the
	 * library replaces the bitmap; both seq_cst (each side stores its
	 * flag, then loads the other's). log_owed (owner): a log write was
	 * skipped while paused, done at the next flush. */
	uint32_t log_busy;
	uint32_t log_paused;
	bool log_owed;
	bool stats_pending;           /* counters changed since publish_stats() */
	uint64_t next_pub;            /* TSC: publish_stats() not before */
	bool opted_out;               /* an unmarked frame on this connection */
	uint32_t marked_run;          /* marked frames since start (capped) */
	uint64_t occ_tsc;             /* occupancy accounted up to here (0: ring not
	                               * live or not sampled yet); owner (teardown) only */
	uint64_t occ_period;          /* account at least this often (1 ms) */
	uint32_t occ_held;            /* held count since occ_tsc */
	struct sn_vring_pkt *scratch; /* [SN_CONFIG_BURST_MAX] */
	/* Durable record (sn_vqtx_rec.c): the mapped file (NULL: none), its
	 * path, and the ring size - 1 (written at start, read by the owner). */
	struct sn_vqtx_rec *rec;
	char *rec_path;
	uint32_t rec_mask;

	/* Exported counters: WORKER stores (relaxed), anyone loads. The ring's
	 * own counters restart with each connection; acc keeps the sums of
	 * the connections before (owner only). */
	struct sn_vqtx_stats st;
	struct sn_vqtx_stats acc;
};

/* sn_vqtx.h "Guest memory mapped by us". older links retired maps of one
 * queue (owner's list). */
struct sn_vqtx_gmap {
	struct sn_vqtx_gmap *older;
	uint32_t nmap;                           /* mappings made (free: unmap these) */
	void *addr[SN_VRING_MAX_REGIONS];
	uint64_t len[SN_VRING_MAX_REGIONS];
	uint64_t lib_hva[SN_VRING_MAX_REGIONS];  /* the library's host_user_addr */
	uint64_t uaddr[SN_VRING_MAX_REGIONS];    /* the front-end's (guest_user_addr) */
	struct sn_vring_mem mem;                 /* regions at our addresses */
};

/* Counters the worker stores and any thread loads (relaxed). */
static inline void ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

static inline void ctr_inc(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* Owner: complete a descriptor with length 0 (ring state marked dirty). */
static inline void complete(struct sn_vqtx *q, uint16_t head)
{
	if (sn_vring_used_put(q->vr, head, 0) == 0)
		q->dirty = true;
}

/* One frame of an earlier connection is done (late_free). Every such
 * frame was out at the last teardown, which set late_out to outstanding
 * (a frame done between an abandoned stop and its teardown is not). */
static inline void late_done(struct sn_vqtx *q)
{
	if (__atomic_load_n(&q->abandoned, __ATOMIC_RELAXED) && q->live)
		return;
	SN_VERIFY(q->late_out > 0);
	q->late_out--;
}

/* sn_vqtx.c, WORKER: n late frames of q are done; the last access to q
 * unless they were the last frames of a queue sn_vqtx_free() left to
 * them, which it then frees. */
SN_VQTX_INTERNAL void sn_vqtx_late_put(struct sn_vqtx *q, uint32_t n);

/* A stop is requested and not yet acknowledged (acquire; pairs with
 * sn_vqtx_stop()). */
static inline bool stop_pending(const struct sn_vqtx *q)
{
	return __atomic_load_n(&q->stop_req, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&q->stop_ack, __ATOMIC_RELAXED);
}

/* sn_vqtx_gmap.c */
struct sn_vqtx_gmap;
SN_VQTX_INTERNAL void sn_vqtx_gmap_free_list(struct sn_vqtx_gmap *g);
SN_VQTX_INTERNAL uint64_t sn_vqtx_gmap_lib_gpa(const struct sn_vqtx_gmap *g, const void *p,
					       uint64_t len);
SN_VQTX_INTERNAL void sn_vqtx_take_map(struct sn_vqtx *q);
/* VHOST: q->last_tab = g's table (NULL: none). */
SN_VQTX_INTERNAL void sn_vqtx_note_table(struct sn_vqtx *q, const struct sn_vqtx_gmap *g);
SN_VQTX_INTERNAL void sn_vqtx_retire(struct sn_vqtx *q);

/* Worker, frame_done() of a frame popped through an older map. */
static inline void old_frame_done(struct sn_vqtx *q)
{
	if (q->old_out && --q->old_out == 0)
		sn_vqtx_retire(q);
}

/* sn_vqtx_rec.c: the durable record of a queue's outstanding heads, one
 * file per TX queue, mapped shared (layout below, version 1). */
#define SN_VQTX_REC_BYTES 8192
struct sn_vqtx_rec {
	uint32_t magic;               /* 0 while the header is being written */
	uint16_t version;
	uint16_t vring;               /* q->vring */
	uint32_t size;                /* ring size */
	uint16_t last_avail;          /* the next avail index to take */
	uint16_t used_pub;            /* completions up to here are folded in bits */
	uint64_t gpa[3];              /* desc, avail, used (guest-physical) */
	uint64_t bits[SN_VRING_MAX_SIZE / 64]; /* outstanding heads */
};
/* The ring a record is checked against, as the front-end described it. */
struct sn_vqtx_rec_ring {
	uint32_t size;
	uint64_t gpa[3];
	uint16_t used_idx;            /* the guest's used->idx now */
	uint16_t avail_idx;           /* the guest's avail->idx now */
	uint16_t base;                /* the front-end's SET_VRING_BASE */
	const struct sn_vring_used *used;
};
/* VHOST, in start: 1 = the record is valid and names *n outstanding heads
 * (resume at *last_avail), 0 = nothing to recover, -EINVAL = rejected
 * (logged, counted). */
SN_VQTX_INTERNAL int sn_vqtx_rec_recover(struct sn_vqtx *q, const struct sn_vqtx_rec_ring *ring,
					 uint16_t *last_avail, uint32_t *n);
/* VHOST, in start, ring built: the record now describes this connection
 * (keep_bits: the recovered outstanding set stays). */
SN_VQTX_INTERNAL void sn_vqtx_rec_begin(struct sn_vqtx *q, const struct sn_vqtx_rec_ring *ring,
					uint16_t last_avail, uint16_t used_pub, bool keep_bits);
/* VHOST, in start after a recovery: write a used entry of length 0 for
 * every recorded head (the worker's first flush publishes them). */
SN_VQTX_INTERNAL uint32_t sn_vqtx_rec_complete_all(struct sn_vqtx *q);
/* Owner: used entries [from, to) were just published. */
SN_VQTX_INTERNAL void sn_vqtx_rec_published(struct sn_vqtx *q, uint16_t from, uint16_t to);
SN_VQTX_INTERNAL void sn_vqtx_rec_close(struct sn_vqtx *q);

/* Owner, after a pop: the popped heads are outstanding, then the avail
 * index moves (release: a crash in between leaves a record that fails
 * its count check, never one that misses a head). Plain stores into the
 * mapped file. */
static inline void rec_popped(struct sn_vqtx *q, const struct sn_vring_pkt *vp, uint32_t n,
			      uint16_t last_avail)
{
	struct sn_vqtx_rec *r = q->rec;

	if (!r)
		return;
	for (uint32_t i = 0; i < n; i++)
		r->bits[vp[i].head / 64] |= 1ULL << (vp[i].head % 64);
	__atomic_store_n(&r->last_avail, last_avail, __ATOMIC_RELEASE);
}

/* sn_vqtx_pop.c */
#define HELD_BACK_HELD  1u
#define HELD_BACK_MBUFS 2u
/* Owner: the descriptors a poll may take under the queue's budgets (at
 * most max): the held cap's room, and the frames of seg_hint segments the
 * port's mbuf room holds (a relaxed read: an empty poll costs no atomic
 * write; the pop's frames are taken from the quota after it), at least
 * one while there is any room. 0 = not polled. quota_held / quota_mbufs
 * count the polls that start a run of polls that budget limited (fewer
 * than max, or none): once per transition into the held-back state. */
static inline uint16_t vqtx_budget(struct sn_vqtx *q, uint16_t max)
{
	if (q->held_cap) {
		const uint32_t cap = __atomic_load_n(q->held_cap, __ATOMIC_RELAXED);

		if (q->outstanding + max > cap) {
			if (!(q->held_back & HELD_BACK_HELD)) {
				q->held_back |= HELD_BACK_HELD;
				ctr_inc(&q->st.quota_held);
			}
			q->stats_pending = true;   /* waiting_now changes without a pop */
			if (q->outstanding >= cap)
				return 0;
			max = (uint16_t)(cap - q->outstanding);
		} else {
			q->held_back &= (uint8_t)~HELD_BACK_HELD;
		}
	}
	if (q->mq) {
		const uint32_t room = sn_quota_room(q->mq, q->mq_owner);
		uint32_t fit = q->seg_hint > 1 ? room / q->seg_hint : room;

		/* Room for less than a frame of the hint: pop one all the
		 * same, as the hint is learnt only from pops (a queue kept
		 * from popping would keep a stale hint, and stall, for
		 * ever); a frame larger than the room is then dropped and
		 * counted (quota_mbufs_dropped). */
		if (fit == 0 && room > 0) {
			fit = 1;
			q->seg_hint /= 2;
		}

		if (fit < max) {
			if (!(q->held_back & HELD_BACK_MBUFS)) {
				q->held_back |= HELD_BACK_MBUFS;
				ctr_inc(&q->st.quota_mbufs);
			}
			q->stats_pending = true;
			max = (uint16_t)fit;
		} else {
			q->held_back &= (uint8_t)~HELD_BACK_MBUFS;
		}
	}
	return max;
}

/* sn_vqtx_done.c */
SN_VQTX_INTERNAL void sn_vqtx_extbuf_free_cb(void *addr, void *opaque);
SN_VQTX_INTERNAL void sn_vqtx_stash_flush(struct sn_vqtx_worker *w);

#endif /* SN_VQTX_IMPL_H */
