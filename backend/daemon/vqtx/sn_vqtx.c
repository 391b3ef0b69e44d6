/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx.c — deferred, out-of-order TX completions on top of rte_vhost
 * (Carousel §5.2; the way SPDK's lib/vhost drives virtqueues itself).
 *
 * Design. A descriptor chain the guest posts on its TX ring (vring 1) is
 * parsed by sn_vring (hardened: every malformed cause counted, bad chains
 * completed with length 0). Each payload segment becomes one mbuf whose
 * external buffer is the guest buffer itself; all segments of a chain share
 * one rte_mbuf_ext_shared_info (refcnt = segments) that lives in a per-head
 * slot, so the free callback fires exactly once, when the last segment of
 * the frame is freed, whatever path the frame took (delivered by a copying
 * vhost enqueue, sent by a PMD, dropped, timed out). The callback writes
 * the used entry {head, 0} in whatever order frames finish; the worker
 * publishes the used index once per loop iteration (sn_vqtx_service).
 *
 * Recycling (s11-D, issue 5 throughput): the common end of a deferred
 * frame is a copy into a peer VM's RX ring, after which the worker frees
 * it in switch_burst(). rte_pktmbuf_free() of an extbuf mbuf detaches it
 * (restores the mbuf's own buffer, looks up the pool's private sizes and
 * the object's IOVA) and returns it to the mempool, and the next burst
 * allocates it again only to attach another guest buffer: ~100
 * instructions per frame that the immediate path does not pay.
 * sn_vqtx_free_bulk() completes such a frame directly (the same code as
 * the free callback) and keeps the mbuf, still external, in a small
 * per-worker stash that the next sn_vqtx_recv() re-attaches first. A
 * stashed mbuf holds no guest reference: its shinfo is a per-worker
 * dummy whose callback does nothing, so freeing it the ordinary way (stash
 * overflow, worker exit) detaches it harmlessly.
 *
 * Device stop (GET_VRING_BASE -> destroy_device, or port deletion through
 * rte_vhost_driver_unregister): the worker frees every frame of the queue
 * it still holds, drop-completes anything else still held, publishes and
 * bumps the queue's epoch so that a later free of a stale frame writes
 * nothing; then the stopping thread sets the vring base. Slots are freed
 * only when no frame references them any more (otherwise leaked, logged).
 */
#include "sn_vqtx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_vhost.h>

#include "sn_common.h"
#include "sn_config.h"
#include "sn_log.h"
#include "sn_vnethdr.h"

#define STOP_WAIT_MS 10000

/* Feature bit numbers (virtio 1.1 §5.1.3, §6; linux/virtio_*.h). */
#define F_HOST_TSO4   11
#define F_HOST_TSO6   12
#define F_HOST_ECN    13
#define F_HOST_UFO    14
#define F_MRG_RXBUF   15
#define F_EVENT_IDX   29
#define F_VERSION_1   32
#define F_RING_PACKED 34
#define F_IN_ORDER    35

static_assert(SN_VQTX_UNMARKED_HOLD_US_DEFAULT == SN_CONFIG_UNMARKED_HOLD_US_DEF,
	      "one default for unmarked_max_hold_us");

enum { WORKER_NONE, WORKER_RUNNING, WORKER_GONE };

/* sn_vqtx_service() publishes counters at most this often (plus always at
 * teardown): readers (stats.get, ~ms apart) see them at most this late. */
#define PUB_EVERY_US 100u
/* Recycle stash (see the design note): completed single-segment frames'
 * mbufs, still external, kept for the worker's next sn_vqtx_recv(). */
#define STASH_MAX (2 * SN_CONFIG_BURST_MAX)
/* Loop iterations since a frame was last stashed; at STASH_IDLE_ITERS the
 * stash goes back to the pool (sn_vqtx_set_now), so an idle worker holds
 * no mbufs and mempool in_use returns to its baseline (leak checks). */
#define STASH_IDLE_ITERS 1024u

/* The state of one worker index (sn_vqtx.h "Threads"). The first group is
 * the worker's own (its lcore only, between sn_vqtx_worker_enter and
 * sn_vqtx_worker_exit); the second, on its own cache line, is shared with
 * MAIN and the VHOST thread. */
struct sn_vqtx_worker {
	/* Iteration clock (TSC), set by sn_vqtx_set_now() at the start of
	 * each loop iteration: the time base of hold times recorded by the
	 * free callback, of the worker's hold-limit checks (one rdtsc per
	 * iteration instead of one per frame) and of counter publication. */
	uint64_t now;
	uint64_t pub_tsc;             /* PUB_EVERY_US in TSC */
	/* Burst hold bound (sn_vqtx_keep_all): the earliest TSC at which a
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
	/* This worker's queues with a stop request open (sn_vqtx_stop counts,
	 * stop_uncount uncounts; seq_cst, read by sn_vqtx_keep_all). */
	uint32_t stops_open;
	/* The smallest hold limit (TSC) of any queue assigned to this worker:
	 * its unmarked_hold_tsc, which sn_vqtx_set_unmarked_hold caps at
	 * max_hold_tsc. MAIN lowers it before the queue's port is published,
	 * the worker reads it (relaxed) at each bound scan. */
	uint64_t min_hold_tsc;
	unsigned lcore;               /* set at enter (relaxed: read to log only) */
	unsigned idx;                 /* constant */
};

/* The contexts of all worker indexes. Process-wide because a queue names
 * its worker by index before any worker runs (sn_vqtx_set_worker, from
 * MAIN) and the VHOST thread must reach the owner's state from the queue
 * (q->w) whether the worker runs, has not started or is gone. */
#define W(i) [i] = { .idx = i, .lcore = LCORE_ID_ANY, .min_hold_tsc = UINT64_MAX }
static struct sn_vqtx_worker g_workers[SN_VQTX_WORKERS_MAX] = {
	W(0), W(1), W(2), W(3), W(4), W(5), W(6), W(7) };
#undef W
static_assert(SN_VQTX_WORKERS_MAX == 8, "one initializer per worker index");

/* The calling thread's worker context (set by sn_vqtx_worker_enter), NULL
 * on any other thread. Thread-local because it is the identity of the
 * caller, which no argument can give: the mbuf free callback has only the
 * slot, and the verdict functions run on workers (judged by their
 * iteration clock) and on other datapath lcores (rte_rdtsc). Our own
 * initial-exec variable: one %fs load, where rte_lcore_id() costs a
 * __tls_get_addr call per frame from here. */
static __thread struct sn_vqtx_worker *t_self __attribute__((tls_model("initial-exec")));

struct slot {
	struct rte_mbuf_ext_shared_info shinfo;  /* fcb_opaque = this slot */
	struct sn_vqtx *q;
	uint64_t pop_tsc;
	uint32_t epoch;
	uint16_t head;
	uint16_t mgen;                /* s15-L: q->mgen when popped */
};

struct sn_vqtx {
	/* Read-mostly. */
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
	/* s15-L: our mapping of the guest memory the ring translates with
	 * (map), and the ones it used before (older list: still mapped for
	 * the rings and frames in flight); both WORKER while live. next_map:
	 * a newer table handed over by sn_vqtx_remap(); exchanged atomically
	 * by both sides, so each map is taken by exactly one of them
	 * (VHOST xchg release -> WORKER xchg acquire). */
	struct sn_vqtx_gmap *map;
	struct sn_vqtx_gmap *next_map;
	/* The newest map the VHOST thread made (start or remap): VHOST only;
	 * it stays mapped until stop or until the worker retires it, which
	 * happens only after it took a newer one (made later by this thread),
	 * so its table can be compared. */
	const struct sn_vqtx_gmap *last_map;
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
	const struct vring_avail *avail;  /* s11-V3: the guest's avail ring (waiting_now) */
	struct slot *slots;
	uint32_t size;
	uint64_t used_bytes;          /* used ring size, for dirty logging */
	uint32_t epoch;
	uint32_t outstanding;         /* frames popped and not yet freed (all epochs) */
	uint32_t late_out;            /* s21: of them, popped before the last teardown
	                               * (owner; VHOST when no worker runs) */
	uint32_t stop_counted;        /* s21: counted in w->stops_open (exchanged by
	                               * VHOST and WORKER, seq_cst) */
	bool dirty;
	bool stats_pending;           /* counters changed since publish_stats() */
	uint64_t next_pub;            /* TSC: publish_stats() not before */
	bool opted_out;               /* an unmarked frame on this connection */
	uint32_t marked_run;          /* marked frames since start (capped) */
	uint64_t occ_tsc;             /* occupancy accounted up to here (0: ring not
	                               * live or not sampled yet); owner (teardown) only */
	uint64_t occ_period;          /* account at least this often (1 ms) */
	uint32_t occ_held;            /* held count since occ_tsc */
	struct sn_vring_pkt *scratch; /* [SN_CONFIG_BURST_MAX] */

	/* Exported counters: WORKER stores (relaxed), anyone loads. The ring's
	 * own counters restart with each connection; acc keeps the sums of
	 * the connections before (owner only). */
	struct sn_vqtx_stats st;
	struct sn_vqtx_stats acc;
};

static void extbuf_free_cb(void *addr, void *opaque);
static void stop_uncount(struct sn_vqtx *q);
static void stash_flush(struct sn_vqtx_worker *w);
static void gmap_free_list(struct sn_vqtx_gmap *g);

uint64_t sn_vqtx_features_off(void)
{
	return (1ULL << F_HOST_TSO6) |
	       (1ULL << F_HOST_ECN) | (1ULL << F_HOST_UFO) |
	       (1ULL << F_EVENT_IDX) | (1ULL << F_RING_PACKED) | (1ULL << F_IN_ORDER);
}

static inline void ctr_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

static inline void ctr_inc(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* MAIN: a queue's short hold limit joins its worker's min_hold_tsc
 * (sn_vqtx_keep_bound_begin). */
static void note_min_hold(struct sn_vqtx_worker *w, uint64_t t)
{
	if (t < __atomic_load_n(&w->min_hold_tsc, __ATOMIC_RELAXED))
		__atomic_store_n(&w->min_hold_tsc, t, __ATOMIC_RELAXED);
}

static struct sn_vqtx_worker *worker_of(unsigned worker)
{
	SN_VERIFY(worker < SN_VQTX_WORKERS_MAX);
	return &g_workers[worker];
}

struct sn_vqtx *sn_vqtx_create(uint32_t max_hold_us, uint16_t txq)
{
	struct sn_vqtx *q = rte_zmalloc("sn_vqtx", sizeof(*q), RTE_CACHE_LINE_SIZE);

	if (!q)
		goto err;
	q->scratch = rte_zmalloc("sn_vqtx_scratch",
				 sizeof(*q->scratch) * SN_CONFIG_BURST_MAX, RTE_CACHE_LINE_SIZE);
	if (!q->scratch)
		goto err_q;
	q->max_hold_tsc = (uint64_t)max_hold_us * rte_get_tsc_hz() / 1000000u;
	if (max_hold_us && !q->max_hold_tsc)
		q->max_hold_tsc = 1;
	q->vid = -1;
	q->w = &g_workers[0];
	q->occ_period = rte_get_tsc_hz() / 1000u;
	sn_vqtx_set_unmarked_hold(q, SN_VQTX_UNMARKED_HOLD_US_DEFAULT);
	q->vring = (uint16_t)(2 * txq + 1);
	return q;

err_q:
	rte_free(q);
err:
	errno = ENOMEM;
	return NULL;
}

void sn_vqtx_set_unmarked_hold(struct sn_vqtx *q, uint32_t unmarked_max_hold_us)
{
	uint64_t t = (uint64_t)unmarked_max_hold_us * rte_get_tsc_hz() / 1000000u;

	if (t == 0)
		t = 1;
	if (q->max_hold_tsc && q->max_hold_tsc < t)
		t = q->max_hold_tsc;
	q->unmarked_hold_tsc = t;
	note_min_hold(q->w, t);
}

void sn_vqtx_free(struct sn_vqtx *q)
{
	if (!q)
		return;
	if (q->vr || q->outstanding) {
		sn_log("vqtx: freed with %u frames outstanding (slots leaked)", q->outstanding);
		ctr_set(&q->st.slots_leaked, q->st.slots_leaked + q->outstanding);
	} else {
		free(q->slots);
		gmap_free_list(q->map);
		gmap_free_list(q->grave);
		sn_vqtx_gmap_free(q->next_map);
	}
	sn_vring_free(q->vr);
	rte_free(q->scratch);
	rte_free(q);
}

/* s15-L, sn_vqtx.h "Guest memory mapped by us". older links retired maps
 * of one queue (owner's list). */
struct sn_vqtx_gmap {
	struct sn_vqtx_gmap *older;
	uint32_t nmap;                           /* mappings made (free: unmap these) */
	void *addr[SN_VRING_MAX_REGIONS];
	uint64_t len[SN_VRING_MAX_REGIONS];
	uint64_t lib_hva[SN_VRING_MAX_REGIONS];  /* the library's host_user_addr */
	uint64_t uaddr[SN_VRING_MAX_REGIONS];    /* the front-end's (guest_user_addr) */
	struct sn_vring_mem mem;                 /* regions at our addresses */
};

/* At most this many maps per queue (current + retained): a remap beyond
 * it is refused (sn_vqtx_remap -EBUSY) until older ones drain. */
#define SN_VQTX_MAPS_MAX 8u

void sn_vqtx_gmap_free(struct sn_vqtx_gmap *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->nmap; i++)
		munmap(g->addr[i], g->len[i]);
	free(g);
}

/* Every map of a list (older links), newest first. */
static void gmap_free_list(struct sn_vqtx_gmap *g)
{
	while (g) {
		struct sn_vqtx_gmap *o = g->older;

		sn_vqtx_gmap_free(g);
		g = o;
	}
}

struct sn_vqtx_gmap *sn_vqtx_gmap_new(int vid)
{
	struct rte_vhost_memory *mem = NULL;
	struct sn_vqtx_gmap *g = calloc(1, sizeof(*g));
	int err = EINVAL;

	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	if (rte_vhost_get_mem_table(vid, &mem) || mem->nregions > SN_VRING_MAX_REGIONS)
		goto fail;
	for (uint32_t i = 0; i < mem->nregions; i++) {
		const struct rte_vhost_mem_region *r = &mem->regions[i];
		uint64_t base = (uint64_t)(uintptr_t)r->mmap_addr, off;
		void *a;

		/* The library maps each region's file from offset 0 and puts
		 * the region at host_user_addr inside that mapping. */
		if (r->fd < 0 || base == 0 || r->host_user_addr < base)
			goto fail;
		off = r->host_user_addr - base;
		if (off > r->mmap_size || r->size > r->mmap_size - off)
			goto fail;
		a = mmap(NULL, r->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (a == MAP_FAILED) {
			err = errno;
			goto fail;
		}
		/* Guest RAM stays out of our core dumps (as the library's own
		 * mappings in later DPDK versions); advisory. */
		(void)madvise(a, r->mmap_size, MADV_DONTDUMP);
		g->addr[g->nmap] = a;
		g->len[g->nmap] = r->mmap_size;
		g->nmap++;
		g->lib_hva[i] = r->host_user_addr;
		g->uaddr[i] = r->guest_user_addr;
		g->mem.regions[i].guest_phys_addr = r->guest_phys_addr;
		g->mem.regions[i].size = r->size;
		g->mem.regions[i].host_user_addr = (uint64_t)(uintptr_t)a + off;
	}
	g->mem.nregions = mem->nregions;
	free(mem);
	return g;
fail:
	free(mem);
	sn_vqtx_gmap_free(g);
	errno = err;
	return NULL;
}

const struct sn_vring_mem *sn_vqtx_gmap_mem(const struct sn_vqtx_gmap *g)
{
	return &g->mem;
}

void sn_vqtx_gmap_lib_mem(const struct sn_vqtx_gmap *g, struct sn_vring_mem *out)
{
	*out = g->mem;
	for (uint32_t i = 0; i < g->mem.nregions; i++)
		out->regions[i].host_user_addr = g->lib_hva[i];
}

/* The guest-physical address of the library's host address p (len bytes
 * inside one region of g), or UINT64_MAX. */
static uint64_t gmap_lib_gpa(const struct sn_vqtx_gmap *g, const void *p, uint64_t len)
{
	uint64_t a = (uint64_t)(uintptr_t)p;

	for (uint32_t i = 0; i < g->mem.nregions; i++) {
		uint64_t lo = g->lib_hva[i], sz = g->mem.regions[i].size;

		if (a >= lo && a - lo <= sz && len <= sz - (a - lo))
			return g->mem.regions[i].guest_phys_addr + (a - lo);
	}
	return UINT64_MAX;
}

/* [gpa, gpa + len) in our mapping g, or NULL. */
static void *gmap_gpa(const struct sn_vqtx_gmap *g, uint64_t gpa, uint64_t len)
{
	return gpa == UINT64_MAX ? NULL : sn_vring_mem_hva(&g->mem, gpa, len);
}

/* Our regions are the library's (same guest-physical address and size),
 * mapped elsewhere: through the guest-physical address. */
void *sn_vqtx_gmap_xlate(const struct sn_vqtx_gmap *g, const void *p, uint64_t len)
{
	return gmap_gpa(g, gmap_lib_gpa(g, p, len), len);
}

/* The library's current table of vid is the one g was made from (the
 * library skips a SET_MEM_TABLE whose regions keep guest-physical address,
 * size and front-end address; the hook still runs). */
static bool gmap_current(const struct sn_vqtx_gmap *g, int vid)
{
	struct rte_vhost_memory *mem = NULL;
	bool same = false;

	if (rte_vhost_get_mem_table(vid, &mem) == 0 && mem->nregions == g->mem.nregions) {
		same = true;
		for (uint32_t i = 0; i < mem->nregions; i++)
			if (mem->regions[i].guest_phys_addr != g->mem.regions[i].guest_phys_addr ||
			    mem->regions[i].size != g->mem.regions[i].size ||
			    mem->regions[i].host_user_addr != g->lib_hva[i] ||
			    mem->regions[i].guest_user_addr != g->uaddr[i])
				same = false;
	}
	free(mem);
	return same;
}

int sn_vqtx_remap(struct sn_vqtx *q, int vid)
{
	struct sn_vqtx_gmap *g, *old;

	if (!q->vr || q->vid != vid)
		return -ENODEV;
	if (q->last_map && gmap_current(q->last_map, vid))
		return 1;
	if (__atomic_load_n(&q->nmaps, __ATOMIC_RELAXED) >= SN_VQTX_MAPS_MAX)
		return -EBUSY;
	g = sn_vqtx_gmap_new(vid);
	if (!g)
		return -errno;
	__atomic_fetch_add(&q->nmaps, 1, __ATOMIC_RELAXED);
	q->last_map = g;
	/* Release pairs with the worker's acquire exchange in take_map(): it
	 * sees the map's contents. A map the worker had not taken yet is
	 * ours again (the exchange gives each pointer to one side only). */
	old = __atomic_exchange_n(&q->next_map, g, __ATOMIC_ACQ_REL);
	if (old) {
		sn_vqtx_gmap_free(old);    /* never last_map: that is g now */
		__atomic_fetch_sub(&q->nmaps, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* Worker: unmap every older map but the rings' (no frame of an older
 * generation is outstanding any more). */
static void retire(struct sn_vqtx *q)
{
	struct sn_vqtx_gmap *g = q->map->older;
	uint32_t freed = 0;

	q->map->older = NULL;
	while (g) {
		struct sn_vqtx_gmap *o = g->older;

		if (g == q->ring_map) {
			g->older = NULL;
			q->map->older = g;
		} else {
			sn_vqtx_gmap_free(g);
			freed++;
		}
		g = o;
	}
	__atomic_fetch_sub(&q->nmaps, freed, __ATOMIC_RELAXED);
}

/* Worker, ring live: switch to a newer table handed over by sn_vqtx_remap().
 * The rings move to it when they lie inside it (the driver does not move
 * them while the device runs; the library re-translates its own copies).
 * The current map joins the older ones until the frames popped through
 * them are all freed. A table the ring refuses (sn_vring_set_mem:
 * overlapping regions) is kept on the older list, unused, and the queue
 * goes on with its current table. */
static void take_map(struct sn_vqtx *q)
{
	struct sn_vqtx_gmap *g = __atomic_exchange_n(&q->next_map, NULL, __ATOMIC_ACQ_REL);
	void *desc, *avail, *used;

	if (!g)
		return;
	if (sn_vring_set_mem(q->vr, &g->mem) != 0) {
		sn_log("vqtx: vid %d: new guest memory table refused (kept the current one)", q->vid);
		g->older = q->map->older;
		q->map->older = g;
		return;
	}
	desc = gmap_gpa(g, q->ring_gpa[0], 16ULL * q->size);
	avail = gmap_gpa(g, q->ring_gpa[1], 6ULL + 2ULL * q->size);
	used = gmap_gpa(g, q->ring_gpa[2], 6ULL + 8ULL * q->size);
	if (desc && avail && used && sn_vring_set_rings(q->vr, desc, avail, used) == 0) {
		q->ring_map = g;
		q->avail = avail;
	}
	g->older = q->map;
	q->map = g;
	q->mgen++;
	q->old_out = q->outstanding;  /* every frame out now came through an older map */
	if (q->old_out == 0)
		retire(q);
	ctr_inc(&q->st.mem_remaps);
}

/* Worker, frame_done() of a frame popped through an older map. */
static void old_frame_done(struct sn_vqtx *q)
{
	if (q->old_out && --q->old_out == 0)
		retire(q);
}

int sn_vqtx_start(struct sn_vqtx *q, int vid)
{
	struct rte_vhost_vring vring;
	struct sn_vring_config cfg = { 0 };
	struct sn_vqtx_gmap *map = NULL;
	uint64_t features = 0;
	uint16_t avail_idx, used_idx;
	int rc = -EINVAL;

	if (q->vr)
		sn_vqtx_stop(q);  /* new_device without destroy_device: be safe */
	if (rte_vhost_get_negotiated_features(vid, &features) ||
	    rte_vhost_get_vhost_vring(vid, q->vring, &vring) ||
	    rte_vhost_get_vring_base(vid, q->vring, &avail_idx, &used_idx))
		goto out;
	if (features & ((1ULL << F_IN_ORDER) | (1ULL << F_RING_PACKED) | (1ULL << F_EVENT_IDX))) {
		sn_log("vqtx: vid %d negotiated features we did not offer (%#llx)",
		       vid, (unsigned long long)features);
		goto out;
	}
	/* s15-L: the rings and frames through our own mapping (sn_vqtx.h). */
	map = sn_vqtx_gmap_new(vid);
	if (!map) {
		rc = -errno;
		sn_log("vqtx: vid %d: cannot map the guest memory: %s", vid, strerror(errno));
		goto out;
	}
	cfg.desc = sn_vqtx_gmap_xlate(map, vring.desc, 16ULL * vring.size);
	cfg.avail = sn_vqtx_gmap_xlate(map, vring.avail, 6ULL + 2ULL * vring.size);
	cfg.used = sn_vqtx_gmap_xlate(map, vring.used, 6ULL + 8ULL * vring.size);
	if (!cfg.desc || !cfg.avail || !cfg.used) {
		sn_log("vqtx: vid %d: a ring of vring %u is not inside one memory region",
		       vid, q->vring);
		goto out;
	}
	q->ring_gpa[0] = gmap_lib_gpa(map, vring.desc, 16ULL * vring.size);
	q->ring_gpa[1] = gmap_lib_gpa(map, vring.avail, 6ULL + 2ULL * vring.size);
	q->ring_gpa[2] = gmap_lib_gpa(map, vring.used, 6ULL + 8ULL * vring.size);
	cfg.size = vring.size;
	cfg.last_avail_idx = avail_idx;
	cfg.last_used_idx = used_idx;
	cfg.hdr_len = (features & ((1ULL << F_VERSION_1) | (1ULL << F_MRG_RXBUF))) ? 12 : 10;
	cfg.event_idx = false;
	cfg.max_pkt_len = UINT16_MAX;   /* one segment must fit an mbuf's buf_len */
	q->slots = calloc(vring.size ? vring.size : 1, sizeof(*q->slots));
	if (!q->slots) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < vring.size; i++) {   /* constant per connection */
		q->slots[i].q = q;
		q->slots[i].head = (uint16_t)i;
		q->slots[i].shinfo.free_cb = extbuf_free_cb;
		q->slots[i].shinfo.fcb_opaque = &q->slots[i];
	}
	q->vr = sn_vring_create(&cfg, sn_vqtx_gmap_mem(map));
	if (!q->vr) {
		rc = -errno;
		free(q->slots);
		q->slots = NULL;
		sn_log("vqtx: vid %d: ring rejected (size %u): %s", vid, vring.size, strerror(-rc));
		goto out;
	}
	sn_vring_kick_enable(q->vr, false);  /* we poll */
	q->vid = vid;
	q->map = map;
	q->last_map = map;
	q->ring_map = map;
	q->old_out = 0;
	__atomic_store_n(&q->nmaps, 1, __ATOMIC_RELAXED);
	map = NULL;
	q->avail = cfg.avail;
	q->size = vring.size;
	q->used_bytes = 4 + 8ULL * vring.size + 2;
	q->dirty = true;
	q->opted_out = false;         /* the opt-in is per connection */
	q->marked_run = 0;
	/* occ_tsc is 0 here (zmalloc, or teardown): the worker reads it
	 * before its acquire of live, so it is written on the worker only. */
	ctr_set(&q->st.opted_in, 0);
	ctr_set(&q->st.opted_out, 0);
	__atomic_store_n(&q->stop_ack, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&q->stop_req, 0, __ATOMIC_RELAXED);
	/* Release: the worker's acquire of live (or of port->up, stored later)
	 * sees the ring state above. */
	__atomic_store_n(&q->live, 1, __ATOMIC_RELEASE);
	rc = 0;
out:
	sn_vqtx_gmap_free(map);   /* NULL unless the start failed */
	return rc;
}

static void publish_stats(struct sn_vqtx *q)
{
	const struct sn_vring_stats *vs = sn_vring_stats(q->vr);
	uint16_t a, u;

	/* s11-V3: the guest writes avail->idx concurrently (a relaxed read of
	 * a 16-bit index; sn_vring_tx_pop() does the ordered read). */
	sn_vring_get_base(q->vr, &a, &u);
	ctr_set(&q->st.waiting_now,
		(uint16_t)(__atomic_load_n(&q->avail->idx, __ATOMIC_RELAXED) - a));

	ctr_set(&q->st.completed, q->acc.completed + vs->completed);
	ctr_set(&q->st.out_of_order, q->acc.out_of_order + vs->out_of_order);
	ctr_set(&q->st.held_now, vs->held);
	ctr_set(&q->st.held_max, RTE_MAX(q->acc.held_max, (uint64_t)vs->held_max));
	for (unsigned i = 0; i < SN_VRING_E__MAX; i++)
		ctr_set(&q->st.err[i], q->acc.err[i] + vs->err[i]);
}

/* Owner, ring retiring: fold its counters into acc. */
static void accumulate(struct sn_vqtx *q)
{
	const struct sn_vring_stats *vs = sn_vring_stats(q->vr);

	q->acc.completed += vs->completed;
	q->acc.out_of_order += vs->out_of_order;
	q->acc.held_max = RTE_MAX(q->acc.held_max, (uint64_t)vs->held_max);
	for (unsigned i = 0; i < SN_VRING_E__MAX; i++)
		q->acc.err[i] += vs->err[i];
}

/* Owner: publish used entries, notify (unless the device is stopping: the
 * library may hold the vring locks then, and the driver resets the queue
 * anyway), dirty-log the used ring. */
static void flush(struct sn_vqtx *q, bool notify)
{
	uint16_t a, before, after;

	sn_vring_get_base(q->vr, &a, &before);
	if (sn_vring_used_flush(q->vr) && notify)
		rte_vhost_vring_call(q->vid, q->vring);
	sn_vring_get_base(q->vr, &a, &after);
	/* No-op unless VHOST_F_LOG_ALL is negotiated (live migration). */
	if (after != before)
		rte_vhost_log_used_vring(q->vid, q->vring, 0, q->used_bytes);
}

static unsigned occ_bucket(uint32_t held)
{
	unsigned j;

	if (held < SN_VQTX_OCC_LINEAR)
		return held;
	j = 31u - (unsigned)__builtin_clz(held);     /* >= 7 */
	j = SN_VQTX_OCC_LINEAR + j - 7u;
	return j < SN_VQTX_OCC_BUCKETS ? j : SN_VQTX_OCC_BUCKETS - 1;
}

/* Owner, ring live: the queue held occ_held chains from occ_tsc to now
 * (held changes only on this lcore, in pops and completions, both of which
 * mark the queue dirty, so sn_vqtx_service() samples every change). */
static void occ_account(struct sn_vqtx *q, uint64_t now)
{
	if (q->occ_tsc && now > q->occ_tsc) {
		uint64_t *c = &q->st.occ_cycles[occ_bucket(q->occ_held)];

		ctr_set(c, *c + (now - q->occ_tsc));
	}
	q->occ_tsc = now;
	q->occ_held = sn_vring_stats(q->vr)->held;
}

/* Owner: drop-complete everything still held, publish, retire the epoch. */
static void teardown(struct sn_vqtx *q)
{
	int id;

	occ_account(q, rte_rdtsc());
	q->occ_tsc = 0;
	while ((id = sn_vring_oldest_held(q->vr)) >= 0) {
		sn_vring_used_put(q->vr, (uint32_t)id, 0);
		ctr_inc(&q->st.forced);
	}
	flush(q, false);
	publish_stats(q);
	ctr_set(&q->st.waiting_now, 0);   /* s11-V3: the ring is handed back */
	q->stats_pending = false;
	accumulate(q);
	q->epoch++;
	q->late_out = q->outstanding;   /* s21: each is a late_free to come */
	q->dirty = false;
	ctr_set(&q->st.opted_in, 0);
	ctr_set(&q->st.opted_out, 0);
	__atomic_store_n(&q->live, 0, __ATOMIC_RELAXED);
}

void sn_vqtx_stop(struct sn_vqtx *q)
{
	uint16_t a, u;
	int waited = 0;

	if (!q->vr)
		return;
	/* s21: the worker's burst check (sn_vqtx_keep_all) gives way from
	 * here until the acknowledgement (w->stops_open) */
	if (!__atomic_exchange_n(&q->stop_counted, 1, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&q->w->stops_open, 1, __ATOMIC_SEQ_CST);
	/* Release (seq_cst) pairs with the worker's acquire in
	 * sn_vqtx_stop_pending(). */
	__atomic_store_n(&q->stop_req, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		/* Acquire pairs with the release in sn_vqtx_stop_ack(). */
		if (__atomic_load_n(&q->stop_ack, __ATOMIC_ACQUIRE))
			break;
		/* Acquire pairs with the release in sn_vqtx_worker_exit(): a
		 * worker that is gone touches nothing any more. */
		if (__atomic_load_n(&q->w->state, __ATOMIC_ACQUIRE) == WORKER_GONE ||
		    (waited >= STOP_WAIT_MS &&
		     __atomic_load_n(&q->w->state, __ATOMIC_ACQUIRE) == WORKER_NONE)) {
			teardown(q);
			stop_uncount(q);
			break;
		}
		if (waited >= STOP_WAIT_MS) {
			sn_log("vqtx: vid %d: worker did not release the ring; leaving it", q->vid);
			return;
		}
		rte_delay_us_sleep(1000);
		waited++;
	}
	sn_vring_get_base(q->vr, &a, &u);
	if (rte_vhost_set_vring_base(q->vid, q->vring, a, u))
		sn_log("vqtx: vid %d: rte_vhost_set_vring_base failed", q->vid);
	sn_vring_free(q->vr);
	q->vr = NULL;
	/* Acquire: a table handed over and never taken is ours alone. */
	sn_vqtx_gmap_free(__atomic_exchange_n(&q->next_map, NULL, __ATOMIC_ACQUIRE));
	if (q->outstanding == 0) {
		free(q->slots);
		gmap_free_list(q->map);
		gmap_free_list(q->grave);   /* what an earlier stop left is free too */
		q->grave = NULL;
	} else {
		/* Frames still referenced point into the maps: keep them mapped
		 * (the grave) until a later stop or free finds none. */
		struct sn_vqtx_gmap *g = q->map;

		sn_log("vqtx: vid %d: %u frames still referenced at stop (slots leaked, guest "
		       "memory kept mapped until they are freed)", q->vid, q->outstanding);
		ctr_set(&q->st.slots_leaked, q->st.slots_leaked + q->outstanding);
		while (g && g->older)
			g = g->older;
		if (g) {
			g->older = q->grave;
			q->grave = q->map;
		}
	}
	q->map = NULL;
	q->ring_map = NULL;
	q->last_map = NULL;
	__atomic_store_n(&q->nmaps, 0, __ATOMIC_RELAXED);
	q->slots = NULL;
	q->vid = -1;
	__atomic_store_n(&q->stop_req, 0, __ATOMIC_RELAXED);
}

void sn_vqtx_worker_enter(unsigned worker)
{
	struct sn_vqtx_worker *w = worker_of(worker);

	t_self = w;
	w->pub_tsc = rte_get_tsc_hz() / (1000000u / PUB_EVERY_US);
	w->now = rte_rdtsc();
	w->keep_until = 0;   /* no bound before the first scan */
	__atomic_store_n(&w->lcore, rte_lcore_id(), __ATOMIC_RELAXED);
	__atomic_store_n(&w->state, WORKER_RUNNING, __ATOMIC_RELEASE);
}

void sn_vqtx_worker_exit(unsigned worker)
{
	struct sn_vqtx_worker *w = worker_of(worker);

	stash_flush(w);
	/* Release: everything the worker wrote is visible to sn_vqtx_stop(). */
	__atomic_store_n(&w->state, WORKER_GONE, __ATOMIC_RELEASE);
}

void sn_vqtx_set_worker(struct sn_vqtx *q, unsigned worker)
{
	q->w = worker_of(worker);
	note_min_hold(q->w, q->unmarked_hold_tsc);
}

static void complete(struct sn_vqtx *q, uint16_t head)
{
	if (sn_vring_used_put(q->vr, head, 0) == 0)
		q->dirty = true;
}

static void hold_record(struct sn_vqtx *q, uint64_t cycles)
{
	unsigned b = cycles ? 63u - (unsigned)__builtin_clzll(cycles) : 0;

	if (b >= SN_VQTX_HOLD_BUCKETS)
		b = SN_VQTX_HOLD_BUCKETS - 1;
	ctr_inc(&q->st.hold_hist[b]);
	if (cycles > q->st.hold_max)
		ctr_set(&q->st.hold_max, cycles);
}

/* Owner: account a frame's marker; true if it may be held long. */
static bool optin_frame(struct sn_vqtx *q, const struct sn_vring_pkt *p, uint32_t *marked)
{
	if (p->hdr.num_buffers != rte_cpu_to_le_16(SN_VQTX_OPTIN_MAGIC)) {
		ctr_inc(&q->st.unmarked);
		if (!q->opted_out) {
			q->opted_out = true;
			ctr_set(&q->st.opted_in, 0);
			ctr_set(&q->st.opted_out, 1);
		}
		return false;
	}
	(*marked)++;
	if (q->opted_out)
		return false;
	if (q->marked_run < SN_VQTX_OPTIN_AFTER && ++q->marked_run == SN_VQTX_OPTIN_AFTER)
		ctr_set(&q->st.opted_in, 1);
	return true;
}

/* s21: one frame of an earlier connection is done (late_free). Every
 * such frame was out at the last teardown, which set late_out to
 * outstanding. */
static inline void late_done(struct sn_vqtx *q)
{
	SN_VERIFY(q->late_out > 0);
	q->late_out--;
}

/* s21: the queue's stop request is closed (acknowledged, or torn down by
 * the VHOST thread): uncount it once (see struct sn_vqtx_worker). */
static void stop_uncount(struct sn_vqtx *q)
{
	if (__atomic_exchange_n(&q->stop_counted, 0, __ATOMIC_SEQ_CST))
		__atomic_fetch_sub(&q->w->stops_open, 1, __ATOMIC_SEQ_CST);
}

/* The frame of slot s is done (left, or dropped): its guest buffer is no
 * longer referenced. Owner worker only. */
static inline void frame_done(struct slot *s)
{
	struct sn_vqtx *q = s->q;
	struct sn_vqtx_worker *w = q->w;

	if (unlikely(t_self != w)) {
		sn_log("vqtx: fatal: frame freed on lcore %u, owner is worker %u on lcore %u",
		       rte_lcore_id(), w->idx, __atomic_load_n(&w->lcore, __ATOMIC_RELAXED));
		abort();
	}
	q->outstanding--;
	ctr_set(&q->st.extbuf_in_use, q->outstanding);
	hold_record(q, w->now > s->pop_tsc ? w->now - s->pop_tsc : 0);
	if (s->epoch != q->epoch || !q->vr) {
		ctr_inc(&q->st.late_free);
		late_done(q);
		return;
	}
	if (unlikely(s->mgen != q->mgen))
		old_frame_done(q);
	complete(q, s->head);
}

static void extbuf_free_cb(void *addr, void *opaque)
{
	(void)addr;
	frame_done(opaque);
}

static void stash_noop_cb(void *addr, void *opaque)
{
	(void)addr, (void)opaque;
}

/* Owner: the stash back to the pool. Stashed mbufs hold no guest buffer:
 * detached by the no-op callback (the dummy shinfo's count set to 1 before
 * each, as after an attach). */
static void stash_flush(struct sn_vqtx_worker *w)
{
	while (w->nstash) {
		rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
		rte_pktmbuf_free(w->stash[--w->nstash]);
	}
	w->stash_idle = 0;
}

/* Owner: return mbufs that get_mbufs() handed out and wrap_frame() did not
 * use: stashed ones back to the stash, fresh ones to the pool. A stashed
 * mbuf that does not fit is freed alone, its dummy shinfo's count set to
 * 1 first so that the detach finds it exactly as after an attach. */
static void put_back(struct sn_vqtx_worker *w, struct rte_mbuf **m, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!RTE_MBUF_HAS_EXTBUF(m[i])) {
			rte_pktmbuf_free(m[i]);
		} else if (w->nstash < STASH_MAX) {
			w->stash[w->nstash++] = m[i];
		} else {
			rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
			rte_pktmbuf_free(m[i]);
		}
	}
}

/* s15-P5 (issue 6 throughput): frame_done()'s accounting for a run of
 * frames of one queue, added once: the owner check once per run,
 * outstanding and extbuf_in_use once, the hold histogram per run of one
 * bucket, hold_max once (the same sums and maximum as per frame), and the
 * run's completions in order with one sn_vring_used_put0_bulk() (the same
 * used entries as complete() per frame). Everything lives in the caller's
 * registers: the helpers are inlined. */
struct done_run {
	struct sn_vqtx *q;
	uint32_t n;
	unsigned b;            /* current hold bucket, SN_VQTX_HOLD_BUCKETS: none */
	uint64_t bn;           /* frames in it */
	uint64_t max;          /* longest hold of the run */
	uint64_t last_pop;     /* pop_tsc whose bucket is b (valid while bn > 0) */
	uint32_t nh;           /* heads to complete, in order */
	/* s20: q's epoch and map generation and whether its ring exists,
	 * read at run_start (nothing in sn_vqtx_free_bulk changes them) */
	uint32_t epoch;
	uint16_t mgen;
	bool live;
};

#define DONE_INLINE static inline __attribute__((always_inline))

DONE_INLINE void heads_flush(struct done_run *r, const uint16_t *heads)
{
	if (r->nh) {
		if (sn_vring_used_put0_bulk(r->q->vr, heads, r->nh))
			r->q->dirty = true;
		r->nh = 0;
	}
}

DONE_INLINE void hold_flush(struct done_run *r)
{
	if (r->bn) {
		uint64_t *c = &r->q->st.hold_hist[r->b];

		ctr_set(c, *c + r->bn);
		r->bn = 0;
	}
}

DONE_INLINE void run_flush(struct done_run *r, const uint16_t *heads)
{
	struct sn_vqtx *q = r->q;

	if (!q)
		return;
	heads_flush(r, heads);
	hold_flush(r);
	q->outstanding -= r->n;
	ctr_set(&q->st.extbuf_in_use, q->outstanding);
	if (r->max > q->st.hold_max)
		ctr_set(&q->st.hold_max, r->max);
	r->q = NULL;
}

static __rte_noinline void owner_abort(const struct sn_vqtx *q)
{
	sn_log("vqtx: fatal: frame freed on lcore %u, owner is worker %u on lcore %u",
	       rte_lcore_id(), q->w->idx, __atomic_load_n(&q->w->lcore, __ATOMIC_RELAXED));
	abort();
}

DONE_INLINE void run_start(struct done_run *r, const uint16_t *heads, struct sn_vqtx *q)
{
	run_flush(r, heads);
	if (unlikely(t_self != q->w))
		owner_abort(q);
	r->q = q;
	r->n = 0;
	r->b = SN_VQTX_HOLD_BUCKETS;
	r->bn = 0;
	r->max = 0;
	r->nh = 0;
	r->epoch = q->epoch;
	r->mgen = q->mgen;
	r->live = q->vr != NULL;
}

void sn_vqtx_free_bulk(struct rte_mbuf **pkts, unsigned n)
{
	struct rte_mbuf *rest[SN_CONFIG_BURST_MAX];
	uint16_t heads[SN_CONFIG_BURST_MAX];
	struct done_run r = { .q = NULL };
	/* The frames' worker, from the first frame of ours (run_start checks
	 * that every one is of the calling worker), and its stash count, pool
	 * and clock in locals (the loop's stores may alias w for the
	 * compiler). Until then nstash 0 and smp NULL let that frame in. */
	struct sn_vqtx_worker *w = NULL;
	struct rte_mempool *smp = NULL;
	unsigned nrest = 0, nstash = 0;
	uint64_t now = 0;
	bool stashed = false;

	for (unsigned i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		/* Ours, one segment, no other reference to the mbuf or to the
		 * guest buffer: complete here and keep the mbuf. */
		if (RTE_MBUF_HAS_EXTBUF(m) && m->shinfo->free_cb == extbuf_free_cb &&
		    m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1 &&
		    rte_mbuf_ext_refcnt_read(m->shinfo) == 1 &&
		    nstash < STASH_MAX && (smp == NULL || m->pool == smp)) {
			/* frame_done(s), its counters per run (done_run) */
			struct slot *s = m->shinfo->fcb_opaque;
			struct sn_vqtx *q = s->q;
			const uint64_t pop = s->pop_tsc;

			if (q != r.q) {
				run_start(&r, heads, q);
				if (w == NULL) {
					w = q->w;
					nstash = w->nstash;
					smp = w->stash_mp;
					now = w->now;
					if (nstash >= STASH_MAX || (smp != NULL && m->pool != smp))
						goto not_stashed;
				}
			}
			r.n++;
			/* s18: the frames of a burst were mostly popped in one
			 * iteration (one pop_tsc per hold class): a frame with
			 * the previous frame's pop_tsc has its hold, bucket and
			 * max, so only the bucket's count moves */
			if (pop != r.last_pop || r.bn == 0) {
				const uint64_t cycles = now > pop ? now - pop : 0;
				unsigned b = cycles ? 63u - (unsigned)__builtin_clzll(cycles) : 0;

				if (b >= SN_VQTX_HOLD_BUCKETS)
					b = SN_VQTX_HOLD_BUCKETS - 1;
				if (b != r.b) {
					hold_flush(&r);
					r.b = b;
				}
				r.max = RTE_MAX(r.max, cycles);
				r.last_pop = pop;
			}
			r.bn++;
			if (s->epoch != r.epoch || !r.live) {
				ctr_inc(&q->st.late_free);
				late_done(q);
			} else {
				/* s15-L: popped through an older guest memory map */
				if (unlikely(s->mgen != r.mgen))
					old_frame_done(q);
				/* complete(q, s->head), in order */
				if (unlikely(r.nh == RTE_DIM(heads)))
					heads_flush(&r, heads);
				heads[r.nh++] = s->head;
			}
			if (smp == NULL) {
				smp = w->stash_mp = m->pool;
				w->stash_shinfo.free_cb = stash_noop_cb;
			}
			/* the dummy's count is set to 1 once, after the loop
			 * (the state it had after each per-frame store before
			 * s20): only a free of a stashed mbuf reads it, and each
			 * of those sets it first (stash_flush, put_back) */
			m->shinfo = &w->stash_shinfo;
			w->stash[nstash++] = m;
			stashed = true;
			continue;
		}
not_stashed:
		rest[nrest++] = m;
		if (nrest == SN_CONFIG_BURST_MAX) {
			/* its completions come after those before it */
			if (r.q)
				heads_flush(&r, heads);
			if (w)
				w->nstash = nstash;
			rte_pktmbuf_free_bulk(rest, nrest);
			nrest = 0;
		}
	}
	run_flush(&r, heads);
	if (w)
		w->nstash = nstash;
	if (stashed) {
		rte_mbuf_ext_refcnt_set(&w->stash_shinfo, 1);
		w->stash_idle = 0;
	}
	if (nrest)
		rte_pktmbuf_free_bulk(rest, nrest);
}

/* Owner: up to n mbufs of pool mp for sn_vqtx_recv(): stashed ones first
 * (reset like a fresh allocation, still external: wrap_frame re-attaches
 * every field of the buffer), the rest from the pool. Returns how many
 * (n, or the stashed count when the pool is short). */
static uint32_t get_mbufs(struct sn_vqtx_worker *w, struct rte_mempool *mp,
			  struct rte_mbuf **out, uint32_t n)
{
	uint32_t k = 0;

	if (mp == w->stash_mp) {
		uint32_t ns = w->nstash;   /* in a register across the stores */

		while (k < n && ns) {
			struct rte_mbuf *m = w->stash[--ns];

			rte_pktmbuf_reset(m);   /* keeps RTE_MBUF_F_EXTERNAL */
			out[k++] = m;
		}
		w->nstash = ns;
	}
	if (k < n && rte_pktmbuf_alloc_bulk(mp, out + k, n - k) == 0)
		k = n;
	return k;
}

/* Recycled mbuf (get_mbufs): what rte_pktmbuf_attach_extbuf sets, on an
 * mbuf that is external already. */
static inline __attribute__((always_inline)) void
reattach(struct rte_mbuf *m, void *base, uint16_t len, struct rte_mbuf_ext_shared_info *shinfo)
{
	m->buf_addr = base;
	rte_mbuf_iova_set(m, (rte_iova_t)(uintptr_t)base);
	m->buf_len = len;
	m->data_off = 0;
	m->shinfo = shinfo;
}

/* Owner: wrap one good frame's segments (mbufs from *stash, refilled one
 * frame at a time when it runs dry) around its guest buffers. Returns the
 * head mbuf, or NULL when no mbuf could be had (counted by the caller). */
static struct rte_mbuf *wrap_frame(struct sn_vqtx *q, struct rte_mempool *mp,
				   const struct sn_vring_pkt *p, const struct sn_vnethdr_offl *o,
				   struct rte_mbuf **stash, uint32_t *nstash, bool hold_long,
				   uint64_t now)
{
	struct rte_mbuf *own[SN_VRING_MAX_SEGS], **segs;
	struct slot *s;

	if (*nstash >= p->nseg) {
		*nstash -= p->nseg;
		segs = &stash[*nstash];
	} else if (rte_pktmbuf_alloc_bulk(mp, own, p->nseg) == 0) {
		segs = own;
	} else {
		return NULL;
	}
	s = &q->slots[p->head];         /* q, head, free_cb, fcb_opaque: set at start */
	s->epoch = q->epoch;
	s->mgen = q->mgen;
	s->pop_tsc = hold_long ? now & ~1ULL : now | 1;  /* hold class */
	rte_mbuf_ext_refcnt_set(&s->shinfo, p->nseg);
	if (likely(p->nseg == 1 && RTE_MBUF_HAS_EXTBUF(segs[0]))) {
		/* s20: the common frame on a recycled mbuf, the loop below
		 * for j = 0 of 1 without the loop */
		struct rte_mbuf *m = segs[0];
		const uint16_t len = (uint16_t)p->iov[0].iov_len;

		reattach(m, p->iov[0].iov_base, len, &s->shinfo);
		m->data_len = len;
		m->next = NULL;
		m->nb_segs = 1;
		m->pkt_len = p->len;
		goto offl;
	}
	for (uint16_t j = 0; j < p->nseg; j++) {
		struct rte_mbuf *m = segs[j];
		uint16_t len = (uint16_t)p->iov[j].iov_len;

		if (RTE_MBUF_HAS_EXTBUF(m)) {
			reattach(m, p->iov[j].iov_base, len, &s->shinfo);
		} else {
			rte_pktmbuf_attach_extbuf(m, p->iov[j].iov_base,
						  (rte_iova_t)(uintptr_t)p->iov[j].iov_base,
						  len, &s->shinfo);
		}
		m->data_len = len;
		m->next = j + 1 < p->nseg ? segs[j + 1] : NULL;
	}
	segs[0]->nb_segs = p->nseg;
	segs[0]->pkt_len = p->len;
offl:
	if (o->ol_flags) {
		segs[0]->ol_flags |= o->ol_flags;
		segs[0]->l2_len = o->l2;
		segs[0]->l3_len = o->l3;
		segs[0]->l4_len = o->l4;
		segs[0]->tso_segsz = o->segsz;
		ctr_inc(o->segsz ? &q->st.gso_requests : &q->st.csum_requests);
	}
	return segs[0];
}

uint16_t sn_vqtx_recv(struct sn_vqtx *q, struct rte_mempool *mp,
		      struct rte_mbuf **pkts, uint16_t max, uint64_t now, uint64_t *bytes)
{
	struct sn_vring_pkt *vp = q->scratch;
	struct rte_mbuf *stash[SN_CONFIG_BURST_MAX];
	uint32_t n, nstash = 0, good = 0, marked = 0;
	uint64_t by = 0;
	uint16_t out = 0;

	if (max > SN_CONFIG_BURST_MAX)
		max = SN_CONFIG_BURST_MAX;
	/* s9-C: a pop that returns nothing may still have counted (heads
	 * skipped as head_oob/head_busy, or the ring broken by avail_jump):
	 * mark dirty whenever the avail index moved or the ring broke, so
	 * sn_vqtx_service() publishes those counters while the guest is
	 * still connected (before, they showed only at device stop). */
	uint16_t a0, a1, u;
	bool was_broken;

	/* s15-L: a new guest memory table (memory hotplug), rare. */
	if (unlikely(__atomic_load_n(&q->next_map, __ATOMIC_RELAXED) != NULL))
		take_map(q);
	was_broken = sn_vring_is_broken(q->vr);

	sn_vring_get_base(q->vr, &a0, &u);
	n = sn_vring_tx_pop(q->vr, vp, max);
	sn_vring_get_base(q->vr, &a1, &u);
	if (n || a1 != a0 || sn_vring_is_broken(q->vr) != was_broken)
		q->dirty = true;
	*bytes = 0;
	if (n == 0)
		return 0;
	/* One mempool access per burst (the common frame is one segment);
	 * frames that need more, or a pool too low for the whole burst, fall
	 * back to one allocation per frame. Left-overs go back at the end. */
	nstash = get_mbufs(q->w, mp, stash, n);
	for (uint32_t i = 0; i < n; i++) {
		struct sn_vring_pkt *p = &vp[i];
		struct sn_vnethdr_offl o;
		struct rte_mbuf *m;
		bool hold_long;

		if (p->err) {  /* counted by sn_vring under its cause */
			complete(q, p->head);
			continue;
		}
		hold_long = optin_frame(q, p, &marked);
		/* s12-D2: a header asking for nothing (every frame of the
		 * benchmark) skips the parser call and its memset. */
		if (sn_vnethdr_none(p)) {
			o.ol_flags = 0;
		} else if (sn_vnethdr_parse(p, &o)) {
			ctr_inc(&q->st.offload);
			complete(q, p->head);
			continue;
		}
		m = wrap_frame(q, mp, p, &o, stash, &nstash, hold_long, now);
		if (m == NULL) {
			ctr_inc(&q->st.no_mbuf);
			complete(q, p->head);
			continue;
		}
		q->outstanding++;
		good++;
		by += p->len;
		pkts[out++] = m;
	}
	*bytes = by;
	if (nstash)
		put_back(q->w, stash, nstash);
	/* Per-frame counters once per burst (one writer: this worker). */
	if (marked)
		ctr_set(&q->st.marked, q->st.marked + marked);
	if (good)
		ctr_set(&q->st.popped, q->st.popped + good);
	ctr_set(&q->st.extbuf_in_use, q->outstanding);
	return out;
}

void sn_vqtx_service(struct sn_vqtx *q, uint64_t now)
{
	if (!q->dirty && !q->stats_pending && now - q->occ_tsc < q->occ_period)
		return;
	/* Acquire pairs with the release in sn_vqtx_start(). */
	if (!__atomic_load_n(&q->live, __ATOMIC_ACQUIRE))
		return;
	occ_account(q, now);
	if (!(q->dirty || q->stats_pending))
		return;
	if (q->dirty) {
		q->dirty = false;
		flush(q, true);
		q->stats_pending = true;
	}
	/* Counters: at most every PUB_EVERY_US (about 40 stores each time;
	 * once per loop iteration they cost as much as a frame). */
	if (q->w->now >= q->next_pub) {
		publish_stats(q);
		q->stats_pending = false;
		q->next_pub = q->w->now + q->w->pub_tsc;
	}
}

void sn_vqtx_set_now(unsigned worker, uint64_t now)
{
	struct sn_vqtx_worker *w = &g_workers[worker];

	w->now = now;
	if (unlikely(w->nstash != 0) && ++w->stash_idle >= STASH_IDLE_ITERS)
		stash_flush(w);
}

bool sn_vqtx_stop_pending(const struct sn_vqtx *q)
{
	return __atomic_load_n(&q->stop_req, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&q->stop_ack, __ATOMIC_RELAXED);
}

void sn_vqtx_stop_ack(struct sn_vqtx *q)
{
	if (__atomic_load_n(&q->live, __ATOMIC_ACQUIRE))
		teardown(q);
	/* Release pairs with the acquire in sn_vqtx_stop(). */
	__atomic_store_n(&q->stop_ack, 1, __ATOMIC_RELEASE);
	stop_uncount(q);   /* s21: after the frames left (src_held) */
}

struct sn_vqtx *sn_vqtx_of(const struct rte_mbuf *m, uint64_t *pop_tsc)
{
	const struct slot *s;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != extbuf_free_cb)
		return NULL;
	s = m->shinfo->fcb_opaque;
	*pop_tsc = s->pop_tsc;
	return s->q;
}

uint64_t sn_vqtx_deadline(const struct sn_vqtx *q, uint64_t pop_tsc)
{
	if (pop_tsc & 1)
		return pop_tsc + q->unmarked_hold_tsc;
	return q->max_hold_tsc ? pop_tsc + q->max_hold_tsc : UINT64_MAX;
}

enum sn_vqtx_verdict sn_vqtx_verdict(const struct rte_mbuf *m, struct sn_vqtx **q)
{
	const struct slot *s;
	uint64_t now;

	if (!RTE_MBUF_HAS_EXTBUF(m) || m->shinfo->free_cb != extbuf_free_cb) {
		*q = NULL;
		return SN_VQTX_KEEP;
	}
	s = m->shinfo->fcb_opaque;
	*q = s->q;
	if (sn_vqtx_stop_pending(s->q))
		return SN_VQTX_STOPPING;
	now = t_self ? t_self->now : rte_rdtsc();
	return sn_vqtx_deadline(s->q, s->pop_tsc) <= now ? SN_VQTX_EXPIRED : SN_VQTX_KEEP;
}

/* s15-P5 (issue 6 throughput): sn_vqtx_verdict() over a burst, the queue's
 * stop flag and hold limits read once per run of frames of one queue and
 * the clock once per call (see the header). */
uint16_t sn_vqtx_keep_run(struct rte_mbuf *const *pkts, uint16_t n, uint64_t *ol_or)
{
	const struct sn_vqtx_worker *self = t_self;
	const uint64_t now = self ? self->now : rte_rdtsc();
	const struct sn_vqtx *lq = NULL;
	uint64_t unmarked = 0, maxh = 0, fl = 0;
	uint16_t i;

	for (i = 0; i < n; i++) {
		const struct rte_mbuf *m = pkts[i];
		const uint64_t f = m->ol_flags;
		const struct slot *s;
		uint64_t pop;

		if (!(f & RTE_MBUF_F_EXTERNAL) || m->shinfo->free_cb != extbuf_free_cb) {
			fl |= f;
			continue;
		}
		s = m->shinfo->fcb_opaque;
		if (s->q != lq) {
			lq = s->q;
			if (sn_vqtx_stop_pending(lq))
				break;
			unmarked = lq->unmarked_hold_tsc;
			maxh = lq->max_hold_tsc;
		}
		/* sn_vqtx_deadline(lq, pop) <= now */
		pop = s->pop_tsc;
		if (pop & 1 ? pop + unmarked <= now : maxh && pop + maxh <= now)
			break;
		fl |= f;
	}
	*ol_or = fl;
	return i;
}

void sn_vqtx_keep_bound_begin(unsigned worker)
{
	struct sn_vqtx_worker *w = &g_workers[worker];

	w->kb_min = __atomic_load_n(&w->min_hold_tsc, __ATOMIC_RELAXED) >= 2 ? UINT64_MAX : 0;
}

void sn_vqtx_keep_bound_add(const struct sn_vqtx *q)
{
	struct sn_vqtx_worker *w = q->w;
	int id;

	if (!w->kb_min || !q->outstanding)
		return;
	/* Every frame out is of the current connection, so its descriptor is
	 * held and it was popped no earlier than the oldest held one, whose
	 * slot has that pop's stamp (slots are zeroed at each start and a
	 * stamp is written only at a pop: never later than the pop it
	 * belongs to). Acquire pairs with the release in sn_vqtx_start(). */
	if (q->late_out || !__atomic_load_n(&q->live, __ATOMIC_ACQUIRE) ||
	    (id = sn_vring_oldest_held(q->vr)) < 0) {
		w->kb_min = 0;
		return;
	}
	w->kb_min = RTE_MIN(w->kb_min, (q->slots[id].pop_tsc & ~1ULL) + q->unmarked_hold_tsc);
}

void sn_vqtx_keep_bound_end(unsigned worker)
{
	struct sn_vqtx_worker *w = &g_workers[worker];

	if (t_self == w)
		w->keep_until = w->kb_min;
}

bool sn_vqtx_keep_all(unsigned worker)
{
	const struct sn_vqtx_worker *w = &g_workers[worker];

	/* seq_cst load: pairs with sn_vqtx_stop()'s increment (stops_open) */
	return t_self == w && w->now < w->keep_until &&
	       __atomic_load_n(&w->stops_open, __ATOMIC_SEQ_CST) == 0;
}

void sn_vqtx_count_timeout(struct sn_vqtx *q)
{
	ctr_inc(&q->st.hold_timeouts);
}

bool sn_vqtx_opted_in(const struct sn_vqtx *q)
{
	return !q->opted_out && q->marked_run >= SN_VQTX_OPTIN_AFTER;
}

void sn_vqtx_count_horizon_wait(struct sn_vqtx *q)
{
	ctr_inc(&q->st.horizon_waits);
	q->stats_pending = true;   /* waiting_now changes without a pop */
}

void sn_vqtx_count_forced(struct sn_vqtx *q)
{
	ctr_inc(&q->st.forced);
}

void sn_vqtx_count_dest_deleted(struct sn_vqtx *q)
{
	ctr_inc(&q->st.dest_deleted);
}

void sn_vqtx_stats_read(const struct sn_vqtx *q, struct sn_vqtx_stats *out)
{
	const uint64_t *src = (const uint64_t *)&q->st;
	uint64_t *dst = (uint64_t *)out;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "sn_vqtx_stats: all u64");
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->mem_maps = __atomic_load_n(&q->nmaps, __ATOMIC_RELAXED);
}

double sn_vqtx_hold_pct_us(const struct sn_vqtx_stats *st, double pct)
{
	uint64_t total = 0, want, run = 0;

	for (unsigned i = 0; i < SN_VQTX_HOLD_BUCKETS; i++)
		total += st->hold_hist[i];
	if (!total)
		return 0;
	want = (uint64_t)((double)total * pct / 100.0 + 0.999999);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < SN_VQTX_HOLD_BUCKETS; i++) {
		run += st->hold_hist[i];
		if (run >= want) {
			double edge = (double)(i + 1 < 64 ? (1ULL << (i + 1)) : UINT64_MAX);

			return RTE_MIN(edge, (double)st->hold_max) * 1e6 / (double)rte_get_tsc_hz();
		}
	}
	return sn_vqtx_hold_max_us(st);
}

double sn_vqtx_hold_max_us(const struct sn_vqtx_stats *st)
{
	return (double)st->hold_max * 1e6 / (double)rte_get_tsc_hz();
}

void sn_vqtx_occ_range(unsigned b, uint32_t *lo, uint32_t *hi)
{
	if (b < SN_VQTX_OCC_LINEAR) {
		*lo = *hi = b;
		return;
	}
	*lo = SN_VQTX_OCC_LINEAR << (b - SN_VQTX_OCC_LINEAR);
	*hi = 2 * *lo - 1;
}

uint32_t sn_vqtx_occ_pct(const struct sn_vqtx_stats *st, double pct)
{
	double total = 0, want, run = 0;
	uint32_t lo, hi = 0;

	for (unsigned i = 0; i < SN_VQTX_OCC_BUCKETS; i++)
		total += (double)st->occ_cycles[i];
	if (total <= 0)
		return 0;
	want = total * pct / 100.0;
	for (unsigned i = 0; i < SN_VQTX_OCC_BUCKETS; i++) {
		if (!st->occ_cycles[i])
			continue;
		run += (double)st->occ_cycles[i];
		sn_vqtx_occ_range(i, &lo, &hi);
		if (run >= want)
			return hi;
	}
	return hi;   /* rounding: the last non-empty bucket */
}
