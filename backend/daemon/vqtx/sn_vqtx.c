/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx.c — deferred, out-of-order TX completions on top of rte_vhost
 * (Carousel §5.2 "Deferred Completions"; the ring driven by the backend
 * itself, as SPDK's lib/vhost does): the life of a queue.
 *
 * A descriptor chain the guest posts on its TX ring is parsed by sn_vring
 * (every malformed cause counted, bad chains completed with length 0).
 * Each payload segment becomes one mbuf whose external buffer is the guest
 * buffer itself; all segments of a chain share one
 * rte_mbuf_ext_shared_info (refcnt = segments) in a per-head slot, so the
 * free callback fires exactly once, when the last segment is freed,
 * whatever path the frame took (sn_vqtx_pop.c, sn_vqtx_done.c). The
 * callback writes the used entry {head, 0} in whatever order frames
 * finish; sn_vqtx_service() publishes the used index once per loop
 * iteration.
 *
 * This file: create and free, start (ring state built while the port is
 * down, then handed to the worker), the stop handshake (sn_vqtx.h), the
 * worker contexts, service and the counters. At a device stop
 * (GET_VRING_BASE -> destroy_device, or rte_vhost_driver_unregister) the
 * worker frees every frame of the queue it holds, drop-completes what is
 * still held, publishes and bumps the queue's epoch, so a later free of a
 * stale frame writes nothing; then the stopping thread sets the vring
 * base. The stop never waits on the link (the worker purges the queue's
 * frames from the switch and the pipeline) and at most
 * SN_VQTX_STOP_WAIT_US in all. The queue, its slots and maps are freed only
 * once no frame references them: by free, or by the last frame's
 * completion on the worker (reap).
 */
#include "sn_vqtx_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_vhost.h>

#include "sn_log.h"

/* sn_vqtx_stop() polls the acknowledgement this often. */
#define STOP_POLL_US 50

/* The queue state in sanitizer builds comes from malloc, which ASan
 * watches (a frame freed after its queue would be reported), else from
 * rte_zmalloc. */
#if defined(__SANITIZE_ADDRESS__)
#define SN_VQTX_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SN_VQTX_MALLOC 1
#endif
#endif

static void *q_zalloc(const char *what, size_t size)
{
#ifdef SN_VQTX_MALLOC
	void *p = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL(size, RTE_CACHE_LINE_SIZE));

	(void)what;
	if (p)
		memset(p, 0, size);
	return p;
#else
	return rte_zmalloc(what, size, RTE_CACHE_LINE_SIZE);
#endif
}

static void q_release(void *p)
{
#ifdef SN_VQTX_MALLOC
	free(p);
#else
	rte_free(p);
#endif
}

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

/* The contexts of all worker indexes. Process-wide because a queue names
 * its worker by index before any worker runs (sn_vqtx_set_worker, from
 * MAIN) and the VHOST thread must reach the owner's state from the queue
 * (q->w) whether the worker runs, has not started or is gone. */
#define W(i) [i] = { .idx = i, .lcore = LCORE_ID_ANY, .min_hold_tsc = UINT64_MAX }
struct sn_vqtx_worker sn_vqtx_workers[SN_VQTX_WORKERS_MAX] = {
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
__thread struct sn_vqtx_worker *sn_vqtx_self __attribute__((tls_model("initial-exec")));

static void stop_uncount(struct sn_vqtx *q);

uint64_t sn_vqtx_features_off(void)
{
	return (1ULL << F_HOST_TSO6) |
	       (1ULL << F_HOST_ECN) | (1ULL << F_HOST_UFO) |
	       (1ULL << F_EVENT_IDX) | (1ULL << F_RING_PACKED) | (1ULL << F_IN_ORDER);
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
	return &sn_vqtx_workers[worker];
}

struct sn_vqtx *sn_vqtx_create(uint32_t max_hold_us, uint16_t txq)
{
	struct sn_vqtx *q = q_zalloc("sn_vqtx", sizeof(*q));

	if (!q)
		goto err;
	q->scratch = q_zalloc("sn_vqtx_scratch", sizeof(*q->scratch) * SN_CONFIG_BURST_MAX);
	if (!q->scratch)
		goto err_q;
	q->max_hold_tsc = (uint64_t)max_hold_us * rte_get_tsc_hz() / 1000000u;
	if (max_hold_us && !q->max_hold_tsc)
		q->max_hold_tsc = 1;
	q->vid = -1;
	q->w = &sn_vqtx_workers[0];
	q->occ_period = rte_get_tsc_hz() / 1000u;
	sn_vqtx_set_unmarked_hold(q, SN_VQTX_UNMARKED_HOLD_US_DEFAULT);
	q->vring = (uint16_t)(2 * txq + 1);
	return q;

err_q:
	q_release(q);
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

/* VHOST/MAIN: the slot arrays of stopped connections, once no frame of
 * theirs is out. */
static void free_dead_slots(struct sn_vqtx *q)
{
	for (uint32_t i = 0; i < q->ndead; i++)
		free(q->dead_slots[i]);
	q->ndead = 0;
}

/* VHOST/MAIN: keep the slot array s of a stopped connection while frames
 * of it are out. Without memory for the list, s is leaked (counted in
 * slots_leaked, logged): a leak, never a fault. */
static void bury_slots(struct sn_vqtx *q, struct slot *s)
{
	if (q->ndead == q->dead_cap) {
		uint32_t cap = q->dead_cap ? 2 * q->dead_cap : 4;
		struct slot **d = realloc(q->dead_slots, cap * sizeof(*d));

		if (!d) {
			sn_log_err("vqtx: vid %d: no memory to keep a stopped ring's slot array "
			       "(leaked)", q->vid);
			ctr_set(&q->st.slots_leaked, q->st.slots_leaked + q->outstanding);
			return;
		}
		q->dead_slots = d;
		q->dead_cap = cap;
	}
	q->dead_slots[q->ndead++] = s;
}

void sn_vqtx_set_holds(struct sn_vqtx *q, uint32_t max_hold_us, uint32_t unmarked_max_hold_us)
{
	const uint64_t hz = rte_get_tsc_hz();
	uint64_t m = (uint64_t)max_hold_us * hz / 1000000u;
	uint64_t u = (uint64_t)unmarked_max_hold_us * hz / 1000000u;
	uint64_t was = __atomic_load_n(&q->unmarked_hold_tsc, __ATOMIC_RELAXED);

	if (max_hold_us && !m)
		m = 1;
	if (u == 0)
		u = 1;
	if (m && m < u)
		u = m;
	/* Each state a reader may see keeps unmarked <= max (max set): the
	 * smaller short limit first, then the new max, then the new short. */
	__atomic_store_n(&q->unmarked_hold_tsc, RTE_MIN(u, was), __ATOMIC_RELAXED);
	__atomic_store_n(&q->max_hold_tsc, m, __ATOMIC_RELAXED);
	__atomic_store_n(&q->unmarked_hold_tsc, u, __ATOMIC_RELAXED);
	note_min_hold(q->w, u);
}

/* Everything of q, once nothing references it. */
static void reap(struct sn_vqtx *q)
{
	free(q->slots);
	free_dead_slots(q);
	free(q->dead_slots);
	sn_vqtx_gmap_free_list(q->map);
	sn_vqtx_gmap_free_list(q->grave);
	sn_vqtx_gmap_free(q->next_map);
	sn_vring_free(q->vr);
	sn_vqtx_rec_close(q);
	q_release(q->scratch);
	q_release(q);
}

/* Frames still out reference q (their slot's q), its slots and the guest
 * memory maps: q goes with the last of them, whatever the path. MAIN adds
 * SN_VQTX_DEAD to outstanding, the worker subtracts each late frame (both
 * read-modify-writes, seq_cst): the side whose result is exactly
 * SN_VQTX_DEAD frees q, and the other touches q no more after its write.
 * Once q is stopped for good every frame out is late, so no plain store
 * to outstanding races with MAIN's. */
void sn_vqtx_free(struct sn_vqtx *q)
{
	if (!q)
		return;
	if (q->vr && !__atomic_load_n(&q->stop_ack, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&q->w->state, __ATOMIC_ACQUIRE) == WORKER_RUNNING) {
		/* A stop that was abandoned and never answered: the worker may
		 * still own the ring. Never freed (a leak, not a fault). */
		sn_log_err("vqtx: freed while its worker still owns the ring (queue leaked)");
		ctr_set(&q->st.slots_leaked, q->st.slots_leaked + q->outstanding);
		return;
	}
	if (q->slots && q->vr) {   /* an abandoned stop, answered since */
		bury_slots(q, q->slots);
		q->slots = NULL;
	}
	if (__atomic_add_fetch(&q->outstanding, SN_VQTX_DEAD, __ATOMIC_SEQ_CST) == SN_VQTX_DEAD)
		reap(q);   /* else the last frame frees it (none: leaked at exit) */
}

void sn_vqtx_late_put(struct sn_vqtx *q, uint32_t n)
{
	if (__atomic_sub_fetch(&q->outstanding, n, __ATOMIC_SEQ_CST) == SN_VQTX_DEAD)
		reap(q);
}

int sn_vqtx_start(struct sn_vqtx *q, int vid)
{
	struct rte_vhost_vring vring;
	struct sn_vring_config cfg = { 0 };
	struct sn_vqtx_gmap *map = NULL;
	uint64_t features = 0;
	uint16_t avail_idx, used_idx, rec_avail = 0;
	struct sn_vqtx_rec_ring rr = { 0 };
	uint32_t nrec = 0;
	bool recovered;
	int rc = -EINVAL;

	if (q->vr)
		sn_vqtx_stop(q);  /* new_device without destroy_device: be safe */
	if (q->vr)
		return -EBUSY;    /* an abandoned stop the worker has not answered */
	if (rte_vhost_get_negotiated_features(vid, &features) ||
	    rte_vhost_get_vhost_vring(vid, q->vring, &vring) ||
	    rte_vhost_get_vring_base(vid, q->vring, &avail_idx, &used_idx))
		goto out;
	if (features & ((1ULL << F_IN_ORDER) | (1ULL << F_RING_PACKED) | (1ULL << F_EVENT_IDX))) {
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d negotiated features we did not offer (%#llx)",
		       vid, (unsigned long long)features);
		goto out;
	}
	/* The rings and frames through our own mapping (sn_vqtx.h). */
	map = sn_vqtx_gmap_new(vid);
	if (!map) {
		rc = -errno;
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d: cannot map the guest memory: %s", vid, strerror(errno));
		goto out;
	}
	cfg.desc = sn_vqtx_gmap_xlate(map, vring.desc, 16ULL * vring.size);
	cfg.avail = sn_vqtx_gmap_xlate(map, vring.avail, 6ULL + 2ULL * vring.size);
	cfg.used = sn_vqtx_gmap_xlate(map, vring.used, 6ULL + 8ULL * vring.size);
	if (!cfg.desc || !cfg.avail || !cfg.used) {
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d: a ring of vring %u is not inside one memory region",
		       vid, q->vring);
		goto out;
	}
	q->ring_gpa[0] = sn_vqtx_gmap_lib_gpa(map, vring.desc, 16ULL * vring.size);
	q->ring_gpa[1] = sn_vqtx_gmap_lib_gpa(map, vring.avail, 6ULL + 2ULL * vring.size);
	q->ring_gpa[2] = sn_vqtx_gmap_lib_gpa(map, vring.used, 6ULL + 8ULL * vring.size);
	cfg.size = vring.size;
	cfg.last_avail_idx = avail_idx;
	cfg.last_used_idx = used_idx;
	/* A record of an earlier run names the heads still out: resume at
	 * its avail index, not at the front-end's base (sn_vqtx_rec.c). */
	rr.size = vring.size;
	memcpy(rr.gpa, q->ring_gpa, sizeof(rr.gpa));
	rr.used = cfg.used;
	rr.used_idx = __atomic_load_n(&((const struct sn_vring_used *)cfg.used)->idx,
				      __ATOMIC_ACQUIRE);
	rr.avail_idx = __atomic_load_n(&((const struct sn_vring_avail *)cfg.avail)->idx,
				       __ATOMIC_RELAXED);
	rr.base = avail_idx;
	recovered = sn_vqtx_rec_recover(q, &rr, &rec_avail, &nrec) == 1;
	if (recovered) {
		cfg.last_avail_idx = rec_avail;
		cfg.last_used_idx = rr.used_idx;
	}
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
		q->slots[i].shinfo.free_cb = sn_vqtx_extbuf_free_cb;
		q->slots[i].shinfo.fcb_opaque = &q->slots[i];
	}
	q->vr = sn_vring_create(&cfg, sn_vqtx_gmap_mem(map));
	if (!q->vr) {
		rc = -errno;
		free(q->slots);
		q->slots = NULL;
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d: ring rejected (size %u): %s", vid, vring.size,
			  strerror(-rc));
		goto out;
	}
	sn_vring_kick_enable(q->vr, false);  /* we poll */
	sn_vqtx_rec_begin(q, &rr, cfg.last_avail_idx, cfg.last_used_idx, recovered);
	if (recovered) {
		nrec = sn_vqtx_rec_complete_all(q);
		/* The library's view, for a GET_VRING_BASE before our stop. */
		if (rte_vhost_set_vring_base(vid, q->vring, cfg.last_avail_idx, cfg.last_used_idx))
			sn_log_err("vqtx: vid %d: rte_vhost_set_vring_base failed", vid);
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d vring %u: %u heads outstanding before the "
			  "restart completed "
		       "as dropped; resuming at avail %u (front-end base %u)", vid, q->vring, nrec,
		       cfg.last_avail_idx, avail_idx);
	}
	q->vid = vid;
	q->map = map;
	sn_vqtx_note_table(q, map);
	q->ring_map = map;
	q->old_out = 0;
	__atomic_store_n(&q->nmaps, 1, __ATOMIC_RELAXED);
	map = NULL;
	q->avail = cfg.avail;
	q->size = vring.size;
	q->used_bytes = 4 + 8ULL * vring.size + 2;
	q->dirty = true;
	q->log_owed = false;
	__atomic_store_n(&q->log_paused, 0, __ATOMIC_RELAXED);
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

	/* The guest writes avail->idx concurrently (a relaxed read of
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

/* VHOST_F_LOG_ALL negotiated now (the front-end turns it on and off while
 * the device runs; the library's features word, read without its lock as
 * rte_vhost_log_used_vring() itself does). */
static bool log_all(const struct sn_vqtx *q)
{
	uint64_t f = 0;

	return rte_vhost_get_negotiated_features(q->vid, &f) == 0 &&
	       (f & (1ULL << VHOST_F_LOG_ALL));
}

/* Owner: publish used entries, notify (unless the device is stopping: the
 * library may hold the vring locks then, and the driver resets the queue
 * anyway), dirty-log the used ring.
 *
 * Live migration (VHOST_F_LOG_ALL): the library logs what it writes
 * itself (the RX path); the TX used ring is ours. Every used entry since
 * the last publication and the index are written before this call (entries
 * by completions, the index by sn_vring_used_flush() here), so logging the
 * whole used ring after the index store covers them all, whatever order
 * they were written in; the library's fence orders the stores before the
 * bitmap update, so a page the front-end syncs clean was copied after the
 * store. Also on the teardown path: drop-completions at a device stop are
 * logged before GET_VRING_BASE is answered, which is when QEMU takes its
 * last bitmap. The flags word (NO_NOTIFY, written once at start) is in the
 * same pages. Nothing else of guest memory is written here: frames are
 * only read. A second SET_LOG_BASE (QEMU resizes the log when guest
 * memory grows during a migration; any front-end may send one) makes the
 * library unmap the bitmap under its queue locks, which this thread does
 * not hold: log_used() and sn_vqtx_log_pause() keep the write off the
 * bitmap while it is replaced, and the skipped write is done after. */
static void log_used(struct sn_vqtx *q)
{
	/* seq_cst store then load, paired with sn_vqtx_log_pause(): if we
	 * see paused == 0, the pauser sees busy == 1 and waits for the 0 */
	__atomic_store_n(&q->log_busy, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q->log_paused, __ATOMIC_SEQ_CST)) {
		q->log_owed = true;
		q->dirty = true;              /* retried at the next service */
	} else {
		/* offset 0 = used->flags; used_bytes covers idx, ring[] and
		 * avail_event */
		rte_vhost_log_used_vring(q->vid, q->vring, 0, q->used_bytes);
		ctr_inc(&q->st.log_writes);
		q->log_owed = false;
	}
	/* Release: the pauser's acquire load of 0 sees the write done. */
	__atomic_store_n(&q->log_busy, 0, __ATOMIC_RELEASE);
}

static void flush(struct sn_vqtx *q, bool notify)
{
	uint16_t a, before, after;

	sn_vring_get_base(q->vr, &a, &before);
	if (sn_vring_used_flush(q->vr) && notify)
		rte_vhost_vring_call(q->vid, q->vring);
	sn_vring_get_base(q->vr, &a, &after);
	if ((after != before || q->log_owed) && log_all(q))
		log_used(q);
	/* The durable record follows the guest-visible used index. */
	if (after != before && q->rec)
		sn_vqtx_rec_published(q, before, after);
}

void sn_vqtx_log_pause(struct sn_vqtx *q)
{
	__atomic_store_n(&q->log_paused, 1, __ATOMIC_SEQ_CST);
	/* A log write takes no lock and is a few stores: the wait lasts as
	 * long as the worker is descheduled inside it, at most. */
	while (__atomic_load_n(&q->log_busy, __ATOMIC_SEQ_CST))
		rte_pause();
}

void sn_vqtx_log_resume(struct sn_vqtx *q)
{
	__atomic_store_n(&q->log_paused, 0, __ATOMIC_RELEASE);
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
	/* An abandoned stop handed the ring back to the front-end: nothing
	 * more is written to it. */
	while (!__atomic_load_n(&q->abandoned, __ATOMIC_SEQ_CST) &&
	       (id = sn_vring_oldest_held(q->vr)) >= 0) {
		sn_vring_used_put(q->vr, (uint32_t)id, 0);
		ctr_inc(&q->st.forced);
	}
	if (!__atomic_load_n(&q->abandoned, __ATOMIC_SEQ_CST))
		flush(q, false);
	publish_stats(q);
	ctr_set(&q->st.waiting_now, 0);   /* the ring is handed back */
	q->stats_pending = false;
	accumulate(q);
	q->epoch++;
	q->late_out = q->outstanding;   /* each is a late_free to come */
	q->dirty = false;
	ctr_set(&q->st.opted_in, 0);
	ctr_set(&q->st.opted_out, 0);
	__atomic_store_n(&q->live, 0, __ATOMIC_RELAXED);
}

/* Process-wide (the stop wait is a property of the build, not of a queue):
 * written by the fuzz harness only, read relaxed at each stop. */
static uint32_t stop_wait_us = SN_VQTX_STOP_WAIT_US;

void sn_vqtx_set_stop_wait_us(uint32_t us)
{
	__atomic_store_n(&stop_wait_us, us, __ATOMIC_RELAXED);
}

void sn_vqtx_stop(struct sn_vqtx *q)
{
	const uint64_t t0 = rte_get_timer_cycles();
	const uint32_t wait_us = __atomic_load_n(&stop_wait_us, __ATOMIC_RELAXED);
	uint64_t waited_us;
	uint16_t a, u;

	if (!q->vr)
		return;
	if (__atomic_load_n(&q->abandoned, __ATOMIC_SEQ_CST)) {
		/* A stop given up earlier: done only once the worker answered
		 * (its teardown wrote nothing); the base was set then. */
		if (!__atomic_load_n(&q->stop_ack, __ATOMIC_ACQUIRE))
			return;
		goto release;
	}
	/* The worker's burst check (sn_vqtx_keep_all) gives way from here
	 * until the acknowledgement: counted once per queue (stop_counted). */
	if (!__atomic_exchange_n(&q->stop_counted, 1, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&q->w->stops_open, 1, __ATOMIC_SEQ_CST);
	/* Release (seq_cst) pairs with the worker's acquire in
	 * sn_vqtx_stop_pending(). */
	__atomic_store_n(&q->stop_req, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t st;

		/* Acquire pairs with the release in sn_vqtx_stop_ack(). */
		if (__atomic_load_n(&q->stop_ack, __ATOMIC_ACQUIRE))
			break;
		waited_us = (rte_get_timer_cycles() - t0) * 1000000u / rte_get_timer_hz();
		/* Acquire pairs with the release in sn_vqtx_worker_exit(): a
		 * worker that is gone touches nothing any more. */
		st = __atomic_load_n(&q->w->state, __ATOMIC_ACQUIRE);
		if (st == WORKER_GONE || (waited_us >= wait_us && st == WORKER_NONE)) {
			teardown(q);
			stop_uncount(q);
			break;
		}
		if (waited_us >= wait_us) {
			/* The worker purges the queue's frames within an
			 * iteration and an arbiter round: one that does not
			 * answer is stalled. Hand the ring back as it is: the
			 * worker writes nothing more to it and tears down
			 * without completing when it answers. It pops no more
			 * (the port is down since the grace period), so the
			 * avail index is final: the front-end resumes after
			 * the chains taken, never pops them again; the ones
			 * still held stay uncompleted (counted, logged). */
			__atomic_store_n(&q->abandoned, 1, __ATOMIC_SEQ_CST);
			ctr_inc(&q->st.stop_timeouts);
			sn_vring_get_base(q->vr, &a, &u);
			if (rte_vhost_set_vring_base(q->vid, q->vring, a, u))
				sn_log_err("vqtx: vid %d: rte_vhost_set_vring_base failed", q->vid);
			sn_log_err("vqtx: vid %d: worker did not release the ring within %u us; "
			       "handed back with %u chains uncompleted", q->vid,
			       wait_us, sn_vring_stats(q->vr)->held);
			return;
		}
		rte_delay_us_sleep(STOP_POLL_US);
	}
	waited_us = (rte_get_timer_cycles() - t0) * 1000000u / rte_get_timer_hz();
	if (waited_us > q->st.stop_wait_us_max)
		ctr_set(&q->st.stop_wait_us_max, waited_us);
	sn_vring_get_base(q->vr, &a, &u);
	if (rte_vhost_set_vring_base(q->vid, q->vring, a, u))
		sn_log_err("vqtx: vid %d: rte_vhost_set_vring_base failed", q->vid);
release:
	sn_vring_free(q->vr);
	q->vr = NULL;
	/* Acquire: a table handed over and never taken is ours alone. */
	sn_vqtx_gmap_free(__atomic_exchange_n(&q->next_map, NULL, __ATOMIC_ACQUIRE));
	if (q->outstanding == 0) {
		free(q->slots);
		free_dead_slots(q);
		sn_vqtx_gmap_free_list(q->map);
		sn_vqtx_gmap_free_list(q->grave);   /* what an earlier stop left is free too */
		q->grave = NULL;
	} else {
		/* Frames still referenced point into the maps: keep them mapped
		 * (the grave) until a later stop or free finds none. */
		struct sn_vqtx_gmap *g = q->map;

		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d: %u frames still referenced at stop (slots and guest "
		       "memory kept until they are freed)", q->vid, q->outstanding);
		bury_slots(q, q->slots);
		while (g && g->older)
			g = g->older;
		if (g) {
			g->older = q->grave;
			q->grave = q->map;
		}
	}
	q->map = NULL;
	q->ring_map = NULL;
	sn_vqtx_note_table(q, NULL);
	__atomic_store_n(&q->nmaps, 0, __ATOMIC_RELAXED);
	q->slots = NULL;
	q->vid = -1;
	__atomic_store_n(&q->abandoned, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&q->stop_req, 0, __ATOMIC_RELAXED);
}

void sn_vqtx_worker_enter(unsigned worker)
{
	struct sn_vqtx_worker *w = worker_of(worker);

	sn_vqtx_self = w;
	w->pub_tsc = rte_get_tsc_hz() / (1000000u / PUB_EVERY_US);
	w->now = rte_rdtsc();
	w->keep_until = 0;   /* no bound before the first scan */
	__atomic_store_n(&w->lcore, rte_lcore_id(), __ATOMIC_RELAXED);
	__atomic_store_n(&w->state, WORKER_RUNNING, __ATOMIC_RELEASE);
}

void sn_vqtx_worker_exit(unsigned worker)
{
	struct sn_vqtx_worker *w = worker_of(worker);

	sn_vqtx_stash_flush(w);
	/* Release: everything the worker wrote is visible to sn_vqtx_stop(). */
	__atomic_store_n(&w->state, WORKER_GONE, __ATOMIC_RELEASE);
}

void sn_vqtx_set_quota(struct sn_vqtx *q, struct sn_quota *mq, uint32_t owner,
		       const uint32_t *held_cap)
{
	q->mq = mq;
	q->mq_owner = owner;
	q->held_cap = held_cap;
}

void sn_vqtx_set_worker(struct sn_vqtx *q, unsigned worker)
{
	q->w = worker_of(worker);
	note_min_hold(q->w, __atomic_load_n(&q->unmarked_hold_tsc, __ATOMIC_RELAXED));
}

/* The queue's stop request is closed (acknowledged, or torn down by the
 * VHOST thread): uncount it once (stop_counted). */
static void stop_uncount(struct sn_vqtx *q)
{
	if (__atomic_exchange_n(&q->stop_counted, 0, __ATOMIC_SEQ_CST))
		__atomic_fetch_sub(&q->w->stops_open, 1, __ATOMIC_SEQ_CST);
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

bool sn_vqtx_quiet(const struct sn_vqtx *q)
{
	return q->outstanding == 0 && !q->dirty && !q->stats_pending;
}

bool sn_vqtx_stop_pending(const struct sn_vqtx *q)
{
	return stop_pending(q);
}

uint32_t sn_vqtx_frames_out(const struct sn_vqtx *q)
{
	return q->outstanding - q->late_out;
}

void sn_vqtx_stop_ack(struct sn_vqtx *q)
{
	if (__atomic_load_n(&q->live, __ATOMIC_ACQUIRE))
		teardown(q);
	/* Release pairs with the acquire in sn_vqtx_stop(). */
	__atomic_store_n(&q->stop_ack, 1, __ATOMIC_RELEASE);
	stop_uncount(q);   /* after the frames left (src_held) */
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

void sn_vqtx_count_purged(struct sn_vqtx *q, enum sn_vqtx_purged where)
{
	ctr_inc(&q->st.purged[where]);
}

void sn_vqtx_count_dest_deleted(struct sn_vqtx *q)
{
	ctr_inc(&q->st.dest_deleted);
}
