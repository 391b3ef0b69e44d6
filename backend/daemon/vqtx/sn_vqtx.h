/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx.h — the guest TX virtqueue of a vhost-user port in "completion":
 * "deferred" mode: zero-copy frames, completed out of order when their
 * last mbuf is freed.
 *
 * Follows Carousel (Saeed et al., SIGCOMM 2017) §5.2 "Deferred
 * Completions": the shaper holds a guest's frames without copying them and
 * returns each descriptor only when its frame leaves, so the guest's TX
 * ring, not a queue in the shaper, is what backs the guest off. The
 * builtin rte_vhost_dequeue_burst copies a frame and completes its
 * descriptor at once; a deferred queue walks the split ring itself
 * (sn_vring, backend/virtio), wraps each guest buffer in mbufs with an
 * external buffer and writes the used-ring entry, in whatever order frames
 * finish, from the free of the last mbuf referencing the buffer. The VM RX
 * direction stays on rte_vhost_enqueue_burst; features are trimmed with
 * rte_vhost_driver_disable_features() (sn_vqtx_features_off), never
 * replaced.
 *
 * Notification: VIRTIO_RING_F_EVENT_IDX is not offered (rte_vhost_vring_call
 * would judge our used index by the library's own last_used_idx), so the
 * guest gets at most one interrupt per worker loop iteration per queue with
 * new completions, unless it set VRING_AVAIL_F_NO_INTERRUPT (the Linux
 * driver does while its TX napi polls).
 *
 * Threads. One struct sn_vqtx per TX queue of a deferred port (vring
 * 2 * txq + 1; each queue has its own held descriptors, counters and stop
 * handshake), created and freed by MAIN, alive as long as the port. Each
 * queue belongs to one worker index (sn_vqtx_set_worker); each worker
 * index has one context (struct sn_vqtx_worker: clock, recycle stash,
 * burst hold bound, open stops, smallest hold limit), reached from a queue
 * as q->w. VHOST is the vhost-user message thread (new_device,
 * destroy_device, the SET_MEM_TABLE hook), or MAIN inside
 * rte_vhost_driver_unregister; the library serialises those per device.
 *
 *   call                                 thread                  concurrent with
 *   create, set_unmarked_hold,           MAIN, queue not         nothing on this queue
 *     set_worker, set_record               published yet
 *   rec_remove                           MAIN                    anything (unlink only)
 *   free                                 MAIN, driver            nothing on this queue
 *                                          unregistered
 *   start                                VHOST, port down        readers only
 *   remap                                VHOST, queue started    WORKER (hands a map over)
 *   log_pause, log_resume                VHOST, queue started    WORKER (log_busy/paused)
 *   stop                                 VHOST, port down and    WORKER until its ack
 *                                          a grace period past
 *   worker_enter(w), worker_exit(w)      WORKER w                VHOST stop
 *   set_now(w), keep_bound_begin(w),     WORKER w only           VHOST, other lcores
 *     keep_bound_end(w)
 *   keep_all(w)                          any thread: false off   VHOST, other lcores
 *                                          WORKER w
 *   recv, service, stop_ack,             WORKER owning q only    VHOST, other lcores
 *     keep_bound_add, count_*,
 *     opted_in, free_bulk, any free
 *     of an mbuf from recv, copy_out,
 *     copy_by_ns/_tsc, ring_size, frames_out
 *   of, deadline, verdict, keep_run,     WORKER, or a datapath   everything (read-only)
 *     stop_pending, is_stock               lcore holding the
 *                                          frame (never frees it)
 *   stats_read, hold_*_us, occ_*         any                     everything
 *
 * The free callback writes the used entry directly: the owner is the ring's
 * only writer, so the ring's own shadow used index is the completion list.
 * It checks that it runs on the owner's lcore and aborts otherwise. A
 * datapath lcore other than the owner (the 2-core arbiter, sn_pipeline.h)
 * may hold and copy a deferred frame but hands it back to the owner to be
 * freed (sn_pipeline's return mailbox); the owner counts it as held until
 * then.
 *
 * Durable record (sn_vqtx_set_record, sn_vqtx_rec.c): start reads and
 * rewrites it (VHOST, queue not live); afterwards only the owner writes
 * it, in pops and in the used-index publication.
 *
 * Ordering (release -> acquire):
 *   start: q->live = 1, then the caller's port->up    -> WORKER loads of
 *     live (service, keep_bound_add) or of port->up
 *   stop: stops_open++ then stop_req = 1 (seq_cst)    -> WORKER stop_pending
 *     (acquire); keep_all's seq_cst load of stops_open sees the count
 *     whenever stop_req is visible
 *   stop_ack: stop_ack = 1                            -> stop's acquire load
 *   worker_enter/exit: w->state RUNNING / GONE        -> stop's acquire load
 *   remap: exchange of next_map (acq_rel)             -> WORKER exchange
 *     (each map is taken by exactly one side)
 *   log_pause: log_paused = 1 then load log_busy; the worker's log write:
 *     log_busy = 1 then load log_paused (all seq_cst: one sees the other);
 *     log_busy = 0 (release)                          -> log_pause's load
 *   counters: WORKER relaxed stores                   -> relaxed loads (up to
 *     100 us late, sn_vqtx_service)
 *
 * Stop handshake:
 *   VHOST                                      WORKER (owner of q)
 *   stop_counted 0 -> 1: w->stops_open++
 *   stop_req = 1  ---------------------------> stop_pending(q) true,
 *                                              keep_all(w) false;
 *                                              purges every frame of q from
 *                                              its backlogs and the pipeline
 *                                              (sn_pipeline_src_purge: wheel
 *                                              now, arbiter classes at its
 *                                              next round) and frees them
 *                                              stop_ack(q): drop-complete the
 *                                              rest, flush, epoch++;
 *   wait for stop_ack (50 us polls, <------- stop_ack = 1;
 *     at most SN_VQTX_STOP_WAIT_US)            stop_counted 1 -> 0: stops_open--
 *   set the vring base, free the ring
 * When q's worker is GONE (or still NONE after SN_VQTX_STOP_WAIT_US), VHOST
 * tears down and uncounts itself: nobody else can touch the ring. A
 * RUNNING worker that does not ack within SN_VQTX_STOP_WAIT_US: VHOST sets
 * abandoned (seq_cst), sets the vring base at the ring's final avail index
 * (the port is down: no more pops) and returns (counted in stop_timeouts,
 * logged; the chains still held are never completed); from then on the
 * worker's completions write nothing (late_free) and its ack's teardown
 * completes nothing; the ring is freed by the next start or by free once
 * the ack came. The stop's
 * count stays until the ack, which keeps that worker's burst check off.
 *
 * Lifetime: q, its slots and its guest memory maps outlive every frame
 * popped from q. sn_vqtx_free() frees q at once only when no frame is out;
 * else it marks q dead and the last frame's completion frees it on the
 * worker (one read-modify-write on each side decides which side frees,
 * and the other touches q no more). A queue whose worker owns the ring and never
 * answered is never freed (logged).
 */
#ifndef SN_VQTX_H
#define SN_VQTX_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_vring.h"

struct rte_mbuf;
struct rte_mempool;
struct sn_quota;
struct sn_vqtx;

#define SN_VQTX_HOLD_BUCKETS 48

/* Held-occupancy histogram (Carousel §7.1.2 Fig. 14-15: packets held in
 * the shaper per flow): time, in TSC cycles, during which the queue
 * held exactly k descriptor chains, for k < SN_VQTX_OCC_LINEAR; above, one
 * bucket per power of two [2^j, 2^(j+1)) up to the largest ring (32768). */
#define SN_VQTX_OCC_LINEAR 128
#define SN_VQTX_OCC_BUCKETS (SN_VQTX_OCC_LINEAR + 9)

/* Where a frame of a stopping queue was purged from (stats purged[]). */
enum sn_vqtx_purged {
	SN_VQTX_PURGED_BACKLOG = 0,   /* a switch backlog (sn_switch.c) */
	SN_VQTX_PURGED_WHEEL,         /* the pipeline's timing wheel */
	SN_VQTX_PURGED_SCHED,         /* a scheduler class or mailbox of the arbiter */
	SN_VQTX_PURGED__MAX
};

struct sn_vqtx_stats {
	uint64_t popped;         /* frames wrapped zero-copy in mbufs */
	uint64_t completed;      /* used entries written (good + bad + dropped) */
	uint64_t out_of_order;   /* completions not of the oldest held id */
	uint64_t hold_timeouts;  /* held longer than max_hold_us: dropped */
	uint64_t no_mbuf;        /* no mbuf to wrap the frame: drop-completed */
	uint64_t offload;        /* invalid or unsupported csum/GSO request: dropped */
	uint64_t csum_requests;  /* frames with a valid NEEDS_CSUM request (no GSO) */
	uint64_t gso_requests;   /* frames with a valid GSO (TCPv4) request */
	uint64_t forced;         /* held at device stop: dropped and completed */
	uint64_t dest_deleted;   /* waited in the switch's backlog for a port that
				  * was deleted: dropped and completed */
	uint64_t late_free;      /* freed after its ring was torn down: ignored */
	uint64_t mem_remaps;     /* new guest memory tables taken while
				  * running (memory hotplug, sn_vqtx_remap) */
	uint64_t mem_maps;       /* our mappings of guest memory alive
				  * now (1 per started queue; more while frames
				  * of a replaced table are out) */
	/* Leak checks: frames popped whose guest buffer is still
	 * referenced by an mbuf, all connections (0 when idle, else a leak);
	 * frames still referenced when a ring's slot array was abandoned at
	 * stop or free (the array is leaked on purpose: the free callback
	 * still reads it). */
	uint64_t extbuf_in_use;
	uint64_t slots_leaked;
	/* Worker loop iterations in which this opted-in
	 * queue was not polled because its port's rate limit was already a
	 * wheel horizon ahead (sn_pipeline_src_room(): its frames wait in the
	 * guest's ring instead of being dropped at the horizon). */
	uint64_t horizon_waits;
	/* Budgets (sn_vqtx_set_quota, doc/isolation.md): polls that took
	 * fewer descriptors than asked, or none, because the queue held its
	 * cap of descriptors (quota_held) or its port its cap of mbufs
	 * (quota_mbufs): the guest's frames wait in its ring. Frames whose
	 * segments did not fit the port's mbuf budget once popped:
	 * drop-completed (quota_mbufs_dropped). */
	uint64_t quota_held, quota_mbufs, quota_mbufs_dropped;
	/* Descriptor chains the guest has posted on this ring that
	 * the worker has not taken yet (avail index - last avail index), as
	 * of the latest counter publication: with held_now, what the guest
	 * has outstanding at the device. */
	uint64_t waiting_now;
	uint64_t marked;         /* frames whose header carried the opt-in marker */
	uint64_t unmarked;       /* frames without it (held unmarked_max_hold_us at most) */
	uint64_t opted_in;       /* 1: the guest opted in on this connection (below) */
	uint64_t opted_out;      /* 1: an unmarked frame on this connection (below) */
	uint64_t held_now, held_max;
	uint64_t err[SN_VRING_E__MAX]; /* sn_vring causes, one each */
	/* Hold time (pop -> completion) of frames: bucket i counts holds of
	 * [2^i, 2^(i+1)) TSC cycles; hold_max in cycles. */
	uint64_t hold_hist[SN_VQTX_HOLD_BUCKETS];
	uint64_t hold_max;
	/* Held occupancy (SN_VQTX_OCC_* above): cycles spent at each held
	 * count while the ring was live, sampled by sn_vqtx_service() (at
	 * every change of the count, else at least once per ms), so a reader
	 * lags the worker by at most ~1 ms plus the worker's own stalls (a
	 * quiet queue, which holds nothing, is serviced when the switch's
	 * sweep polls it: add that sweep's period, sn_switch_poll.c).
	 * Cumulative over connections: measure an interval by subtracting two
	 * snapshots. */
	uint64_t occ_cycles[SN_VQTX_OCC_BUCKETS];
	/* Stock-guest fallback (sn_vqtx_copy_out): frames of a guest that
	 * did not opt in copied into an mbuf of their pool and completed
	 * at once because they would have been held past
	 * unmarked_max_hold_us; and frames that had to be copied but found
	 * no mbuf (dropped and completed instead). */
	uint64_t copied_out;
	uint64_t copy_no_mbuf;
	/* Live migration: publications of the used index while
	 * VHOST_F_LOG_ALL was negotiated, each followed by a dirty-log write
	 * of the used ring's pages (sn_vqtx.c flush()). */
	uint64_t log_writes;
	/* Device stop (sn_vqtx_stop): frames of the stopping queue taken out
	 * of a queue of the switch or the pipeline at once, per queue they
	 * sat in (also counted in forced); the longest wait of a stop for the
	 * worker's acknowledgement (us); stops that gave up waiting
	 * (SN_VQTX_STOP_WAIT_US: the ring is left to the worker, which tears
	 * it down when it answers; the vring base is then not set). */
	uint64_t purged[SN_VQTX_PURGED__MAX];
	uint64_t stop_wait_us_max;
	uint64_t stop_timeouts;
	/* Durable record (sn_vqtx_set_record): heads a restarted daemon
	 * found outstanding in the record and completed, as dropped (length
	 * 0); starts whose record failed its checks and was ignored. */
	uint64_t recovered_after_restart;
	uint64_t record_rejected;
};

/* Feature bits a deferred port must not negotiate: IN_ORDER, EVENT_IDX,
 * packed rings, and the TX offloads the switch cannot resolve for the
 * uplink (HOST_TSO6, HOST_ECN, HOST_UFO: librte_gso segments TCP/IPv4 only,
 * sn_switch.c). CSUM and HOST_TSO4 stay offered, as on immediate ports:
 * sn_vqtx_recv() turns their header requests into mbuf offload flags. MQ
 * stays offered (multiqueue: one struct sn_vqtx per TX queue). */
uint64_t sn_vqtx_features_off(void);

/* Guest opt-in (contract in guest-driver-patch/README.md): the
 * patched guest driver writes num_buffers = SN_VQTX_OPTIN_MAGIC in every TX
 * virtio-net header (12-byte header). A TX queue is opted in after
 * SN_VQTX_OPTIN_AFTER marked frames with no unmarked frame before them on
 * that queue; one unmarked frame opts the queue out until the next device
 * start (the reported state, stats opted_in). The state is per TX queue
 * (multiqueue: each queue's struct sn_vqtx sees the marker itself; the port
 * folds them, sn_port.h). A frame may be held up to max_hold_us only if it
 * carries the marker and no unmarked frame came before it on this queue
 * and connection (so the first frames of a patched guest are not dropped
 * while the opt-in is being confirmed); every other frame (stock guests)
 * is held at most unmarked_max_hold_us and then copied out and completed
 * (copied_out, sn_vqtx_copy_out), so a driver that cannot take long holds
 * never sees one. */
#define SN_VQTX_OPTIN_MAGIC 0x5344
#define SN_VQTX_OPTIN_AFTER 8
#define SN_VQTX_UNMARKED_HOLD_US_DEFAULT 1000

/* MAIN: the ring state of TX queue txq (vring 2 * txq + 1). max_hold_us 0 =
 * no limit. NULL + errno (ENOMEM). The unmarked hold limit starts at
 * SN_VQTX_UNMARKED_HOLD_US_DEFAULT. */
struct sn_vqtx *sn_vqtx_create(uint32_t max_hold_us, uint16_t txq);
/* MAIN, before the port is published: hold limit of frames without the
 * opt-in (1..; capped by a non-zero max_hold_us). */
void sn_vqtx_set_unmarked_hold(struct sn_vqtx *q, uint32_t unmarked_max_hold_us);
/* MAIN, any time (config.reload): both hold limits (max_hold_us 0 = no
 * limit; unmarked 1.., capped by a non-zero max), relaxed stores the
 * owner worker loads relaxed; every intermediate state keeps the short
 * limit within the long one. A lowered limit binds within one worker loop
 * iteration after a grace period (the keep bound, sn_vqtx_hold.c): the
 * caller waits for one (synchronize_rcu). */
void sn_vqtx_set_holds(struct sn_vqtx *q, uint32_t max_hold_us, uint32_t unmarked_max_hold_us);
/* MAIN, before the port is published: the budgets of this queue. Every
 * mbuf that wraps a popped frame (one per segment) is charged to owner
 * `owner` of the shared quota mq (sn_quota.h) before the pop and given
 * back when the frame is done (its last free, any thread that may free
 * it: the owner worker, sn_vqtx.h "Lifetime"); a poll takes at most the
 * owner's room. *held_cap (relaxed load once per poll; MAIN may store it
 * at any time) caps the frames the queue holds (popped, not yet done).
 * mq NULL, held_cap NULL: no such budget. */
void sn_vqtx_set_quota(struct sn_vqtx *q, struct sn_quota *mq, uint32_t owner,
		       const uint32_t *held_cap);
/* MAIN, after the port's driver is unregistered (sn_vqtx_stop done): q
 * goes now, or with its last frame still out (freed then on the worker:
 * see Lifetime above). */
void sn_vqtx_free(struct sn_vqtx *q);
/* MAIN, before the port is published: keep the queue's durable record of
 * outstanding heads in the file at path (created 0600 if absent, mapped
 * shared; sn_vqtx_rec.c). A restarted daemon's sn_vqtx_start() completes
 * the heads it names, once, as dropped, and resumes at its avail index,
 * if the record matches the ring. 0, or -errno (logged; the queue runs
 * without a record). */
int sn_vqtx_set_record(struct sn_vqtx *q, const char *path);
/* MAIN, the port deleted for good (port.del): unlink the record file.
 * NULL or no record: no-op. */
void sn_vqtx_rec_remove(struct sn_vqtx *q);

/* VHOST thread, in new_device before the port goes up. 0 or -errno. */
int sn_vqtx_start(struct sn_vqtx *q, int vid);

/* Guest memory mapped by us. The library maps the guest's memory
 * regions itself and, on a SET_MEM_TABLE while the device runs (memory
 * hotplug, or the front-end moving a region), unmaps them under its queue
 * locks without telling the application (DPDK 22.11 tells only async-copy
 * applications, by vring_state_changed). Everything we read or write in
 * guest memory outside the library (the deferred TX ring, the frames it
 * wraps zero-copy, the RX prefetch view of port/sn_port_vhost.c) therefore goes
 * through our own MAP_SHARED mapping of the same region files: the
 * library's remap cannot pull it away. A map is immutable once made; its
 * owner unmaps it when nothing can use it any more (sn_vqtx_stop(), or
 * destroy_device after its grace period for the RX view).
 * sn_vqtx_gmap_new: VHOST thread (the library's table of vid is stable
 * there); NULL + errno (EINVAL: no table, more than SN_VRING_MAX_REGIONS
 * regions or one without a file; or mmap's errno). */
struct sn_vqtx_gmap;
struct sn_vqtx_gmap *sn_vqtx_gmap_new(int vid);
void sn_vqtx_gmap_free(struct sn_vqtx_gmap *g);   /* NULL: no-op */
/* The regions at our addresses (for sn_vring_create). */
const struct sn_vring_mem *sn_vqtx_gmap_mem(const struct sn_vqtx_gmap *g);
/* The same regions at the library's addresses when g was made (prefetch
 * targets only: a prefetch never faults, and these addresses share the
 * TLB entries of the library's own accesses). */
void sn_vqtx_gmap_lib_mem(const struct sn_vqtx_gmap *g, struct sn_vring_mem *out);
/* The library's host address of [p, p + len) at the time the map was made
 * -> the same bytes in our mapping; NULL unless inside one region. */
void *sn_vqtx_gmap_xlate(const struct sn_vqtx_gmap *g, const void *p, uint64_t len);

/* VHOST thread, after the library applied a new guest memory table to vid
 * while q is started (post-message hook of SET_MEM_TABLE): map the new
 * table and hand it to the worker, which translates new descriptors with
 * it from its next pop on (counted in mem_remaps). The maps before stay
 * mapped, for the rings (the driver does not move them while the device
 * runs) and the frames still in flight, until sn_vqtx_stop(). Never waits:
 * callable with the library's queue locks held. 0, 1 when the library's
 * table is the one q has (nothing to do), or -errno (the queue keeps its
 * current table). */
int sn_vqtx_remap(struct sn_vqtx *q, int vid);
/* VHOST thread, in the library's message hooks around a SET_LOG_BASE on
 * a started queue (the library replaces the dirty-log bitmap): pause
 * stops the worker's used-ring log writes and returns once none is in
 * progress (the worker's write takes no lock: a short spin, never a wait
 * on the worker's progress elsewhere; safe with the library's queue
 * locks held); resume lets them go on, the skipped one first. Pause
 * twice, or resume without pause, is harmless. */
void sn_vqtx_log_pause(struct sn_vqtx *q);
void sn_vqtx_log_resume(struct sn_vqtx *q);

/* VHOST thread (or MAIN in unregister), in destroy_device after the port
 * went down and a grace period passed: every held descriptor is completed
 * (by the worker or here), the used index published, and
 * rte_vhost_set_vring_base() called; nothing is written to the ring
 * afterwards. No-op if not started. */
void sn_vqtx_stop(struct sn_vqtx *q);
/* The longest sn_vqtx_stop() waits for the worker's acknowledgement (the
 * worker purges the queue's frames from the switch and the pipeline, so a
 * running worker answers within an iteration and an arbiter round). */
#define SN_VQTX_STOP_WAIT_US 20000u
/* The fuzz harness only (any thread, before the stops it governs): the
 * wait of later stops, SN_VQTX_STOP_WAIT_US unless set; a wait of a few
 * microseconds makes a stop that gives up on the worker common. */
void sn_vqtx_set_stop_wait_us(uint32_t us);

/* WORKER with index `worker` (0 in layouts 1core/2core; 0..W-1 in ncore):
 * bind the calling thread to that worker's context and mark it running /
 * gone (release; sn_vqtx_stop acquires the state of the queue's owner to
 * decide who tears down). exit returns the recycle stash to its pool. */
#define SN_VQTX_WORKERS_MAX 8
void sn_vqtx_worker_enter(unsigned worker);
void sn_vqtx_worker_exit(unsigned worker);
/* MAIN, before the port is published: the worker index that owns this TX
 * queue (sn_port.h "Queues"; default 0) and whose context it uses (q->w).
 * Only that worker's lcore may recv, service, ack a stop and free its
 * mbufs. */
void sn_vqtx_set_worker(struct sn_vqtx *q, unsigned worker);

/* WORKER, port up: take up to max frames as zero-copy mbuf chains into
 * pkts (returns how many). A valid checksum/TSO request in the virtio-net
 * header becomes mbuf offload metadata (ol_flags, l2/l3/l4_len,
 * tso_segsz), as rte_vhost_dequeue_burst sets it. Malformed chains, invalid
 * offload requests and frames without mbufs are completed with length 0
 * and counted here. now = TSC (the frames' pop stamp). Wraps the frames
 * with one mempool allocation per burst. *bytes = the returned frames'
 * pkt_len total (for the port's RX counters, without another pass). */
uint16_t sn_vqtx_recv(struct sn_vqtx *q, struct rte_mempool *mp,
		      struct rte_mbuf **pkts, uint16_t max, uint64_t now, uint64_t *bytes);
/* WORKER: free n mbufs like rte_pktmbuf_free_bulk(); a single-segment
 * frame of sn_vqtx_recv() that nothing else references (mbuf and guest
 * buffer refcnt 1) is completed here and its mbuf kept in the recycle
 * stash of its queue's worker (which must be the caller) for the next
 * sn_vqtx_recv(), instead of being detached and returned to the pool
 * (~100 instructions per delivered frame). Any other mbuf is freed
 * normally. */
void sn_vqtx_free_bulk(struct rte_mbuf **pkts, unsigned n);
/* WORKER, every loop iteration, up or not (a queue that is
 * sn_vqtx_quiet(): whenever the worker polls it): publish new used entries,
 * notify the guest if sn_vring_used_flush() says so, log the used ring for
 * live migration, account the held occupancy up to now (TSC; the loop's
 * time, taken before its pops), refresh the exported counters at most every
 * 100 us (always at teardown), so stats readers see them up to 100 us late. */
void sn_vqtx_service(struct sn_vqtx *q, uint64_t now);
/* WORKER `worker`, once per loop iteration before any other sn_vqtx call:
 * its TSC for this iteration, the clock of hold times (the free callback
 * records pop -> free at this resolution), of its hold checks and of
 * counter publication. Returns an idle worker's stash to the pool. */
void sn_vqtx_set_now(unsigned worker, uint64_t now);
/* WORKER (owner): nothing for sn_vqtx_service() or a hold check to do
 * until the next pop: no frame out (all epochs), no used entry or counter
 * left to publish. The switch then polls the queue less often
 * (sn_switch_poll.c) and services it only when it polls it. */
bool sn_vqtx_quiet(const struct sn_vqtx *q);
/* WORKER: a stop is pending (acquire; pairs with sn_vqtx_stop()). The
 * worker then frees every mbuf of this queue it holds and calls
 * sn_vqtx_stop_ack(), which drop-completes what is still held, flushes,
 * acknowledges (release) and closes the queue's count in the worker's open
 * stops (sn_vqtx_keep_all). */
bool sn_vqtx_stop_pending(const struct sn_vqtx *q);
/* WORKER: some queue of this worker has a stop open (seq_cst load; pairs
 * with sn_vqtx_stop()'s increment): the switch then services every queue
 * it owns each iteration, quiet ones too, so a stop never waits for the
 * sweep. */
bool sn_vqtx_worker_stops_open(unsigned worker);
/* WORKER (owner): frames of the current connection popped and not yet
 * freed, wherever they are in schednic. The copies sn_vqtx_copy_out()
 * makes are not among them: their descriptors are already completed, so
 * a stop does not wait for them. */
uint32_t sn_vqtx_frames_out(const struct sn_vqtx *q);
void sn_vqtx_stop_ack(struct sn_vqtx *q);

/* WORKER: the deferred queue an mbuf came from (NULL for any other mbuf),
 * and the frame's stamp: the TSC when its descriptor was taken, whose
 * lowest bit encodes its hold class (1 = not opted in: short limit). */
struct sn_vqtx *sn_vqtx_of(const struct rte_mbuf *m, uint64_t *pop_tsc);
/* WORKER: TSC at which a frame with stamp pop_tsc exceeds its hold limit
 * (max_hold_us, or unmarked_max_hold_us for its class; UINT64_MAX: no
 * limit). */
uint64_t sn_vqtx_deadline(const struct sn_vqtx *q, uint64_t pop_tsc);
/* WORKER, or another datapath lcore holding the frame (read-only, as
 * sn_vqtx_of): sn_vqtx_of + sn_vqtx_stop_pending + sn_vqtx_deadline in one
 * call, for the per-frame checks of the pipeline. *q = the frame's queue
 * (NULL: not a deferred frame, SN_VQTX_KEEP). The worker judges the
 * deadline by its iteration clock (sn_vqtx_set_now: one rdtsc per
 * iteration, not per frame), any other lcore by rte_rdtsc(). */
enum sn_vqtx_verdict { SN_VQTX_KEEP, SN_VQTX_STOPPING, SN_VQTX_EXPIRED };
enum sn_vqtx_verdict sn_vqtx_verdict(const struct rte_mbuf *m, struct sn_vqtx **q);
/* Same callers as sn_vqtx_verdict: how many leading frames of
 * pkts[0..n) have the verdict SN_VQTX_KEEP (n: all); *ol_or = the OR of
 * those frames' ol_flags. The same checks per frame, with each queue's
 * stop flag (acquire, pairs with sn_vqtx_stop()) read once per run of
 * frames of that queue and the clock once per call: the verdicts of one
 * instant. The caller judges the frame at the returned index with
 * sn_vqtx_verdict(). */
uint16_t sn_vqtx_keep_run(struct rte_mbuf *const *pkts, uint16_t n, uint64_t *ol_or);
/* WORKER `worker` (false on any other thread): true when
 * sn_vqtx_keep_run() would keep every frame of this worker's queues now
 * (its iteration clock): none can be past its deadline and no queue of the
 * worker has a stop request open (read here, each call). The deadline part
 * is a bound the worker computes at the end of each loop iteration, after
 * its last pop, by scanning every TX queue it owns:
 * sn_vqtx_keep_bound_begin(), sn_vqtx_keep_bound_add() for each (q's
 * owner), sn_vqtx_keep_bound_end(). Valid only for frames of this
 * worker's queues (a caller that may hold other workers' frames uses
 * sn_vqtx_keep_run). */
void sn_vqtx_keep_bound_begin(unsigned worker);
void sn_vqtx_keep_bound_add(const struct sn_vqtx *q);
void sn_vqtx_keep_bound_end(unsigned worker);
bool sn_vqtx_keep_all(unsigned worker);
/* WORKER: count one frame dropped for exceeding max_hold_us (the caller
 * frees it; the free completes it). */
void sn_vqtx_count_timeout(struct sn_vqtx *q);
/* WORKER (owner): the guest opted in on this queue and
 * connection (marker confirmed, no unmarked frame): its frames may wait,
 * in the guest's ring or held, as long as completions come back in time
 * (max_hold_us). Count one loop iteration the queue was not polled for
 * that reason (horizon_waits). */
bool sn_vqtx_opted_in(const struct sn_vqtx *q);
void sn_vqtx_count_horizon_wait(struct sn_vqtx *q);
/* WORKER: ns (the pipeline's clock) from now until a frame of a guest
 * that did not opt in must have left schednic to stay zero-copy: the time
 * left to its unmarked hold deadline (judged by the worker's iteration
 * clock) less a margin of a quarter of unmarked_max_hold_us for the
 * stages after the timing wheel (arbiter, QFQ, the uplink's TX).
 * UINT64_MAX for any other frame (not deferred, or opted in: its class
 * is never copied). 0 when the margin is already reached. */
uint64_t sn_vqtx_copy_by_ns(const struct rte_mbuf *m);
/* The same in TSC cycles. */
uint64_t sn_vqtx_copy_by_tsc(const struct rte_mbuf *m);
/* WORKER owning m's queue (m: a frame of sn_vqtx_recv; the caller's
 * reference): the stock-guest fallback. Copies m into an mbuf of
 * its own pool (dynamic fields and offload metadata with it), frees m
 * (the last free completes its descriptor) and returns the copy, counted in
 * copied_out. With no mbuf free, frees m and returns NULL, counted in
 * copy_no_mbuf (the caller counts the drop cause it needs). */
struct rte_mbuf *sn_vqtx_copy_out(struct rte_mbuf *m);
/* Any datapath lcore holding m (read-only, as sn_vqtx_of): m is a frame
 * of a guest that did not opt in (its hold class is the short limit). */
bool sn_vqtx_is_stock(const struct rte_mbuf *m);
/* WORKER owning q: count a copy made (ok) or refused for want of an mbuf
 * (!ok) on another lcore (a remote arbiter copies a stock frame past its
 * deadline and returns the original). */
void sn_vqtx_count_copied(struct sn_vqtx *q, bool ok);
/* WORKER owning q: the ring size of its current connection (0: not
 * started), the stock-guest copy budget per queue (sn_pipeline.h). */
uint32_t sn_vqtx_ring_size(const struct sn_vqtx *q);
/* WORKER: count one frame dropped because its port is stopping. */
void sn_vqtx_count_forced(struct sn_vqtx *q);
/* WORKER (or the arbiter half on the worker's lcore): one frame of a
 * stopping queue taken out of a switch or pipeline queue (purged[where]). */
void sn_vqtx_count_purged(struct sn_vqtx *q, enum sn_vqtx_purged where);
/* WORKER: count one frame dropped because the port it waited for (the
 * switch's backlog of a full RX ring) was deleted (the caller frees it;
 * the free completes it). */
void sn_vqtx_count_dest_deleted(struct sn_vqtx *q);

/* Any thread. */
void sn_vqtx_stats_read(const struct sn_vqtx *q, struct sn_vqtx_stats *out);
/* Any thread: hold time in microseconds at percentile pct (0 < pct <= 100)
 * of a histogram read above (upper edge of its bucket, so within 2x; 0 if
 * empty); sn_vqtx_hold_max_us() is exact. */
double sn_vqtx_hold_pct_us(const struct sn_vqtx_stats *st, double pct);
double sn_vqtx_hold_max_us(const struct sn_vqtx_stats *st);
/* Any thread: [lo, hi] held counts of occupancy bucket b (hi = lo below
 * SN_VQTX_OCC_LINEAR). */
void sn_vqtx_occ_range(unsigned b, uint32_t *lo, uint32_t *hi);
/* Any thread: held count at time-weighted percentile pct (0 < pct <= 100)
 * of the occupancy histogram read above (exact below SN_VQTX_OCC_LINEAR,
 * else the bucket's upper end; 0 if nothing sampled); pct 100 = the largest
 * count held for any time. */
uint32_t sn_vqtx_occ_pct(const struct sn_vqtx_stats *st, double pct);

#endif /* SN_VQTX_H */
