/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_vqtx.c — libFuzzer target for the deferred TX queue's lifecycle
 * (daemon/vqtx: sn_vqtx_start, recv, the free callback and free_bulk,
 * copy_out, hold verdicts, remap, stop and its worker acknowledgement).
 *
 * The seam. sn_vqtx_start() and sn_vqtx_remap() learn the ring and the
 * guest memory from rte_vhost (a vid): this target links the fake device
 * API of fz_vhost.c instead of librte_vhost, so start, remap and stop run
 * unchanged against a fake device whose guest memory is four memfds that
 * the "library" maps itself (sn_vqtx_gmap maps them once more, as in the
 * daemon). The internals (sn_vqtx_impl.h) are used to read a frame's head
 * from its slot and to return the worker's recycle stash to the pool.
 * DPDK's EAL runs once (no hugepages, no shared files); the fuzz thread is
 * worker 0 on lcore 0.
 *
 * The fake guest, which builds the chains and reads the used ring, is
 * fz_vqtx_guest.c; this file interprets the program and checks the
 * worker's and the VHOST side.
 *
 * Input: one config byte (ring size 2..256, 10/12-byte header, hold limits,
 * a pool of 8 or 512 mbufs, LOG_ALL, the port's mbuf quota and the queue's
 * held cap), then a program: the guest posts direct and indirect chains of
 * up to 64 segments (well-formed, or bad: out of memory, zero length,
 * device-writable, across regions, bad next, loops, oversized, bad
 * indirect tables), duplicate and out-of-range heads, publishes, rewrites
 * descriptors; the worker pops, frees frames in any order (one by one or
 * in bulk, with extra references, or the tail of a chain freed apart),
 * copies them out, services the queue, lets time pass (frames past their
 * hold limit are dropped as the pipeline does); MAIN changes the quota's reserve and cap and the held
 * cap, and another port draws from and returns to the shared part; the
 * VHOST side stops the device (from a second thread while the worker holds
 * frames: it frees some and acknowledges; or with the worker gone), starts
 * it again, sometimes with features it must refuse or rings outside guest
 * memory, and applies new memory tables while frames are held (region
 * added, moved, re-backed, overlapping, or the rings' region dropped).
 *
 * Invariants (abort on failure): no crash, no hang; every popped frame of
 * a well-formed chain has the chain's segments, lengths and bytes (unless
 * its descriptors or the memory table changed since it was posted); every
 * used entry the guest sees names a head it posted more often than it was
 * completed, and never one the worker still holds in the live connection;
 * every head the device consumed is completed by the end (stop
 * drop-completes what is held); nothing is written to the used ring
 * between a stop and the next start, whatever is freed then; after every
 * step the quota's in-use equals the segments of the frames still out and
 * the other port's units, the queue's held count equals the frames still
 * out, and a pop never takes the queue past its held cap; the quota back
 * at 0 when every frame is completed; counters add up (popped = frames
 * returned, completed = used entries seen, forced = frames held at stop,
 * late_free = frames freed after their connection, hold_timeouts,
 * copies); extbuf_in_use and held_now 0 at the end; the mempool's in-use
 * count back to its start value; the queue's memory freed (ASan).
 *
 * A stop that gives up waiting for the worker's ack leaves by design the
 * chains held then uncompleted: that input's completion, forced, held_now
 * and late_free checks become bounds. In one stop of four the stop waits
 * only 30 us (sn_vqtx_set_stop_wait_us) and the fuzz thread answers only
 * after it gave up, as a stalled worker would: that path is driven on any
 * machine, not only when the fuzz thread is descheduled for
 * SN_VQTX_STOP_WAIT_US. Such inputs are counted and reported at exit.
 *
 * Not driven: the durable record (sn_vqtx_set_record), and a stop the
 * worker does not answer on purpose (20 ms per input is too slow to fuzz;
 * tests/datapath covers it).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/lsan_interface.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "fz_vhost.h"
#include "fz_vqtx.h"

#define F_LOG_ALL 26
#define F_VERSION_1 32
#define F_EVENT_IDX 29

struct fz F;

/* Inputs run, and those whose stop gave up waiting (F.abandoned). */
static uint64_t fz_inputs, fz_abandoned;

static struct rte_mempool *pool_big, *pool_small;

static unsigned in_use(struct rte_mempool *mp)
{
	return rte_mempool_in_use_count(mp);
}

/* The abandoned state is rare (a loaded machine) and weakens the checks of
 * its input: say how often it happened. */
static void report_abandoned(void)
{
	if (fz_abandoned)
		fprintf(stderr, "fuzz_vqtx: %llu of %llu inputs had a stop give up waiting for "
			"the worker: their completion checks were bounds only\n",
			(unsigned long long)fz_abandoned, (unsigned long long)fz_inputs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char prefix[64];
	char *eal[] = { "fuzz_vqtx", "--no-huge", "-m", "64", "--no-pci", "--no-shconf",
			"--no-telemetry", "-l", "0", "--log-level=error", "--file-prefix", prefix };
	cpu_set_t cpus;

	(void)argc;
	(void)argv;
	snprintf(prefix, sizeof(prefix), "sn-fuzz-%d", (int)getpid());
	CPU_ZERO(&cpus);
	sched_getaffinity(0, sizeof(cpus), &cpus);
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])), eal) < 0)
		FAIL("rte_eal_init failed\n");
	/* Lcore 0 by name, any CPU: libFuzzer's -jobs share the machine. */
	sched_setaffinity(0, sizeof(cpus), &cpus);
	pool_big = rte_pktmbuf_pool_create("fz_big", 512, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	pool_small = rte_pktmbuf_pool_create("fz_small", 8, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	if (!pool_big || !pool_small)
		FAIL("mempool: %s\n", rte_strerror(rte_errno));
	if (fz_vhost_dev_init(VID, "/fuzz/vqtx.sock"))
		FAIL("fake device\n");
	sn_vqtx_worker_enter(0);
	atexit(report_abandoned);
	return 0;
}

/* ---- Worker ---- */

static uint16_t head_of(const struct rte_mbuf *m)
{
	const struct slot *s = container_of(m->shinfo, struct slot, shinfo);

	return s->head;
}

static void drop_held(uint32_t i)
{
	F.h[i] = F.h[--F.nh];
}

/* Our last reference of a deferred frame goes: late if its connection is over. */
static void account_free(const struct held *x)
{
	if (F.q && !x->copy && x->refs == 1 && (x->epoch != F.q->epoch || !F.started))
		F.late++;
}

static void free_one(uint32_t i, bool bulk)
{
	struct held *x = &F.h[i];

	account_free(x);
	if (bulk)
		sn_vqtx_free_bulk(&x->m, 1);
	else
		rte_pktmbuf_free(x->m);
	if (--x->refs == 0)
		drop_held(i);
}

/* The pipeline keeps only the head segment of a frame (its tail freed on
 * its own): the frame stays charged for every segment it was popped with
 * until its last reference goes. */
static void split_tail(uint32_t i)
{
	struct rte_mbuf *m = F.h[i].m, *tail = m->next;

	if (F.h[i].copy || F.h[i].refs != 1 || !tail || rte_mbuf_refcnt_read(m) != 1)
		return;
	m->next = NULL;
	m->nb_segs = 1;
	m->pkt_len = m->data_len;
	rte_pktmbuf_free(tail);
}

static void recv(struct input *in)
{
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
	uint16_t n, want = (uint16_t)(1 + take(in) % SN_CONFIG_BURST_MAX);
	uint64_t bytes = 0, sum = 0;

	uint32_t out0;

	if (!F.started)
		return;
	out0 = F.q->outstanding;
	sn_vqtx_set_now(0, F.now);
	n = sn_vqtx_recv(F.q, F.mp, pkts, want, F.now, &bytes);
	if (n > want)
		FAIL("recv %u > %u\n", n, want);
	if (n && F.q->outstanding > F.held_cap)
		FAIL("%u descriptors held (%u before the pop), held cap %u\n", F.q->outstanding,
		     out0, F.held_cap);
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint32_t segs = 0, len = 0;
		uint16_t h;

		for (struct rte_mbuf *s = m; s; s = s->next) {
			segs++;
			len += s->data_len;
		}
		if (segs != m->nb_segs || segs > SN_VRING_MAX_SEGS || len != m->pkt_len)
			FAIL("frame: %u segments (nb_segs %u), %u bytes (pkt_len %u)\n", segs,
			     m->nb_segs, len, m->pkt_len);
		uint64_t pop;

		if (sn_vqtx_of(m, &pop) != F.q)
			FAIL("frame not of its queue\n");
		h = head_of(m);
		if (h >= F.size || F.posts[h] <= F.done[h])
			FAIL("popped head %u not outstanding\n", h);
		for (uint32_t k = 0; k < F.nh; k++)
			if (!F.h[k].copy && F.h[k].head == h && F.h[k].epoch == F.q->epoch)
				FAIL("head %u popped twice\n", h);
		fzg_check_frame(h, m);
		sum += m->pkt_len;
		if (F.nh == MAXHELD) {
			rte_pktmbuf_free(m);
		} else {
			F.h[F.nh++] = (struct held){ m, 1, F.q->epoch, h, (uint16_t)segs, false };
		}
	}
	if (sum != bytes)
		FAIL("recv bytes %llu, frames hold %llu\n", (unsigned long long)bytes,
		     (unsigned long long)sum);
	F.popped += n;
}

static void service(void)
{
	if (!F.started)
		return;
	sn_vqtx_set_now(0, F.now);
	sn_vqtx_service(F.q, F.now);
	fzg_collect();
}

/* Time passes; frames past their limit are dropped, as the pipeline does. */
static void tick(struct input *in)
{
	uint64_t us = (uint64_t)take(in) * (take(in) & 1 ? 100u : 3u);

	F.now += us * rte_get_tsc_hz() / 1000000u;
	sn_vqtx_set_now(0, F.now);
	for (uint32_t i = 0; i < F.nh;) {
		struct sn_vqtx *q = NULL;
		uint64_t pop;
		enum sn_vqtx_verdict v;

		if (F.h[i].copy) {
			i++;
			continue;
		}
		v = sn_vqtx_verdict(F.h[i].m, &q);
		sn_vqtx_of(F.h[i].m, &pop);
		if (q != F.q)
			FAIL("verdict names another queue\n");
		if (v == SN_VQTX_KEEP && F.now >= sn_vqtx_deadline(q, pop) && !sn_vqtx_stop_pending(q))
			FAIL("kept past its deadline\n");
		if (v == SN_VQTX_EXPIRED) {
			sn_vqtx_count_timeout(q);
			F.timeouts++;
			while (F.h[i].refs > 1)
				free_one(i, false);
			free_one(i, false);
			continue;
		}
		i++;
	}
}

static void copy_out(struct input *in)
{
	uint32_t i;
	struct rte_mbuf *c;

	if (!F.nh)
		return;
	i = take(in) % F.nh;
	if (F.h[i].copy || F.h[i].refs != 1 || F.h[i].epoch != F.q->epoch || !F.started)
		return;
	c = sn_vqtx_copy_out(F.h[i].m);
	F.copies++;
	if (c)
		F.h[i] = (struct held){ c, 1, 0, 0, 0, true };
	else
		drop_held(i);
}

/* ---- VHOST ---- */

static void snap_used(void)
{
	memcpy(F.used_snap, F.g0 + USED_OFF, 6 + 8 * F.size);
	F.snap = true;
}

static void check_snap(const char *when)
{
	if (F.snap && memcmp(F.used_snap, F.g0 + USED_OFF, 6 + 8 * F.size))
		FAIL("used ring written after the stop (%s)\n", when);
}

static bool stop_done;   /* stop_thread's sn_vqtx_stop() returned */

static void *stop_thread(void *arg)
{
	sn_vqtx_stop(arg);
	__atomic_store_n(&stop_done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Frames of the live connection still held by us. */
static uint32_t live_held(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < F.nh; i++)
		n += !F.h[i].copy && F.h[i].epoch == F.q->epoch;
	return n;
}

static void after_stop(uint64_t forced0)
{
	struct sn_vqtx_stats st;
	struct fz_vhost_dev *d = &fz_vhost_devs[VID];

	fzg_collect();
	sn_vqtx_stats_read(F.q, &st);
	if (st.stop_timeouts)
		F.abandoned = true;
	if (!F.abandoned && st.forced - forced0 != F.forced)
		FAIL("forced %llu, expected %llu\n", (unsigned long long)(st.forced - forced0),
		     (unsigned long long)F.forced);
	F.consumed += (uint16_t)(d->vr[VRING].last_avail - (uint16_t)F.consumed);
	F.started = false;
	snap_used();
}

static void stop(struct input *in, bool worker_gone)
{
	struct sn_vqtx_stats st;
	uint8_t keep = take(in);
	uint64_t leaked;
	struct slot *slots;
	uint32_t held;
	bool late;

	if (!F.started)
		return;
	slots = F.q->slots;
	sn_vqtx_stats_read(F.q, &st);
	/* A stalled worker: the stop waits 30 us and the worker answers only
	 * after it gave up. */
	late = (keep & 0x60) == 0x60;
	sn_vqtx_set_stop_wait_us(late ? 30u : SN_VQTX_STOP_WAIT_US);
	if (worker_gone) {
		sn_vqtx_worker_exit(0);
		F.forced += live_held();
		sn_vqtx_stop(F.q);
		sn_vqtx_worker_enter(0);
	} else {
		pthread_t t;
		uint64_t t0 = rte_get_timer_cycles();

		__atomic_store_n(&stop_done, false, __ATOMIC_RELAXED);
		if (pthread_create(&t, NULL, stop_thread, F.q))
			FAIL("pthread_create\n");
		/* Late (or descheduled past the wait), this thread looks only
		 * after the stop gave up on the worker (counted in
		 * stop_timeouts; after_stop marks the input abandoned). The
		 * request stays pending then, and the worker answers it on its
		 * next iteration all the same, as the daemon's does. */
		while (!__atomic_load_n(&stop_done, __ATOMIC_ACQUIRE) &&
		       (late || !sn_vqtx_stop_pending(F.q))) {
			if (rte_get_timer_cycles() - t0 > rte_get_timer_hz())
				FAIL("stop never requested\n");
			rte_pause();
		}
		if (!sn_vqtx_stop_pending(F.q))
			FAIL("stop returned without a pending request\n");
		/* The worker purges what it holds; keep selects frames held
		 * elsewhere (late frees). */
		for (uint32_t i = 0; i < F.nh;) {
			if (!F.h[i].copy && F.h[i].epoch == F.q->epoch && !((keep >> (i & 7)) & 1)) {
				sn_vqtx_count_forced(F.q);
				F.forced++;
				while (F.h[i].refs > 1)
					free_one(i, false);
				free_one(i, (keep & 0x80) != 0);
				continue;
			}
			i++;
		}
		held = live_held();
		F.forced += held;
		sn_vqtx_stop_ack(F.q);
		pthread_join(t, NULL);
	}
	after_stop(st.forced);
	F.forced = 0;
	/* A slot array kept for frames still out leaks only without memory
	 * for its list (counted, sn_vqtx.h slots_leaked). */
	leaked = st.slots_leaked;
	sn_vqtx_stats_read(F.q, &st);
	if (st.slots_leaked != leaked)
		__lsan_ignore_object(slots);
}

static int start(struct input *in)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[VID];
	uint8_t c = take(in);
	struct sn_vqtx_stats st;
	struct slot *slots;
	uint64_t leaked;
	int rc;

	if (F.started)
		return 0;
	check_snap("before start");
	d->features = F.features;
	d->vr[VRING].wild = false;
	if (c >= 0xf0) {
		d->features |= 1ULL << F_EVENT_IDX;         /* not offered: refused */
	} else if (c >= 0xe8) {
		d->vr[VRING].wild = true;                   /* rings outside guest memory */
	}
	/* A start after a stop that gave up releases that ring first (its
	 * slot array kept while frames of it are out; slots_leaked as in
	 * stop() below). */
	slots = F.q->slots;
	sn_vqtx_stats_read(F.q, &st);
	leaked = st.slots_leaked;
	rc = sn_vqtx_start(F.q, VID);
	sn_vqtx_stats_read(F.q, &st);
	if (st.slots_leaked != leaked)
		__lsan_ignore_object(slots);
	if (F.table_bad) {
		F.started = rc == 0;
		F.snap = F.snap && rc != 0;
		return rc;
	}
	if (c >= 0xe8) {
		if (rc == 0)
			FAIL("start accepted %s\n", c >= 0xf0 ? "EVENT_IDX" : "rings outside memory");
		return rc;
	}
	if (rc)
		FAIL("start failed: %d\n", rc);
	F.started = true;
	F.map_stale = false;
	F.snap = false;
	return 0;
}

static void remap(struct input *in)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[VID];
	uint8_t c = take(in) % 6;
	int rc;

	fzg_table_a(d);
	F.table_bad = c == 3 || c == 4;
	switch (c) {
	case 0:   /* a region added (memory hotplug) */
		d->reg[d->nregions++] = (struct fz_vhost_region){ 0x20000, 0x10000, 0x7f0000020000,
								  2, 0 };
		break;
	case 1:   /* the frames region moved */
		d->reg[1].gpa = 0x40000;
		d->reg[1].uaddr = 0x7f0000040000;
		F.frames_gpa = 0x40000;
		break;
	case 2:   /* the frames region backed by another file */
		d->reg[1].file = 3;
		break;
	case 3:   /* overlapping regions: the ring refuses the table */
		d->reg[d->nregions++] = (struct fz_vhost_region){ 0x18000, 0x10000, 0x7f0000050000,
								  2, 0 };
		break;
	case 4:   /* the rings' region gone: rings stay on the old map */
		d->reg[0] = (struct fz_vhost_region){ 0x60000, 0x8000, 0x7f0000060000, 2, 0x8000 };
		break;
	default:  /* the same table */
		break;
	}
	/* every table starts from table A: the frames of chains posted
	 * under the one before may have moved */
	fzg_forget_expect();
	if (fz_vhost_set_mem(VID))
		FAIL("fake table rejected\n");
	rc = F.started ? sn_vqtx_remap(F.q, VID) : 0;
	if (rc < 0 && rc != -EBUSY)
		FAIL("remap: %d\n", rc);
	/* The queue kept its table (refused, or one it deems the same: the
	 * fake library may map a re-backed file where the old one was,
	 * which rte_vhost skips): the guest's view may differ from the
	 * device's until a table is taken or a start. */
	F.map_stale = rc != 0;
}

/* ---- Budgets ---- */

/* The port's mbuf quota and the queue's held cap move under the queue
 * (MAIN's sn_quota_set and cap store), and another port (owner 1) draws
 * from and returns to the shared part. */
static void budget_op(struct input *in)
{
	const uint32_t t = F.mq_total;
	uint8_t c = take(in);
	uint32_t min, max, k;
	int rc;

	switch (c & 3) {
	case 0:
		min = take(in) % (t + 1);
		max = take(in) % (t + 1);
		rc = sn_quota_set(F.mq, 0, min, max);
		if (rc && rc != -EINVAL && rc != -ENOSPC)
			FAIL("sn_quota_set: %d\n", rc);
		break;
	case 1:
		k = take(in);
		__atomic_store_n(&F.held_cap, k == 0xff ? 4096u : 1u + k % 64u, __ATOMIC_RELAXED);
		break;
	case 2:
		F.other += sn_quota_take(F.mq, 1, take(in) % (t + 1));
		break;
	default:
		k = take(in) % (F.other + 1);
		sn_quota_give(F.mq, 1, k);
		F.other -= k;
		break;
	}
}

/* After every step: the quota holds exactly the mbufs of the frames still
 * out (one unit per segment, charged at the pop, given at completion) and
 * the other port's units; the queue holds exactly the frames still out. */
static void check_budgets(const char *when)
{
	uint32_t units = 0, frames = 0;

	for (uint32_t i = 0; i < F.nh; i++)
		if (!F.h[i].copy) {
			units += F.h[i].nseg;
			frames++;
		}
	if (sn_quota_used(F.mq, 0) != units || sn_quota_used(F.mq, 1) != F.other)
		FAIL("%s: quota in use %u/%u, frames out hold %u, other port %u\n", when,
		     sn_quota_used(F.mq, 0), sn_quota_used(F.mq, 1), units, F.other);
	if (F.q && F.q->outstanding != frames)
		FAIL("%s: %u descriptors held, %u frames out\n", when, F.q->outstanding, frames);
}

/* ---- One input ---- */

static void drain_and_check(bool free_queue_first)
{
	struct sn_vqtx_stats st;

	if (F.started) {
		struct input none = { NULL, 0 };

		stop(&none, false);
	}
	fzg_collect();
	check_snap("at the end");
	sn_vqtx_stats_read(F.q, &st);
	if (getenv("FUZZ_VQTX_VERBOSE"))   /* what one input did (seed checks) */
		fprintf(stderr, "fuzz_vqtx: popped %llu completed %llu forced %llu no_mbuf %llu "
			"timeouts %llu copies %llu remaps %llu late %llu addr_oob %llu loop %llu "
			"bad_indirect %llu quota_held %llu quota_mbufs %llu quota_dropped %llu\n",
			(unsigned long long)st.popped, (unsigned long long)st.completed,
			(unsigned long long)st.forced, (unsigned long long)st.no_mbuf,
			(unsigned long long)st.hold_timeouts, (unsigned long long)st.copied_out,
			(unsigned long long)st.mem_remaps, (unsigned long long)F.late,
			(unsigned long long)st.err[SN_VRING_E_ADDR_OOB],
			(unsigned long long)st.err[SN_VRING_E_LOOP],
			(unsigned long long)st.err[SN_VRING_E_BAD_INDIRECT],
			(unsigned long long)st.quota_held, (unsigned long long)st.quota_mbufs,
			(unsigned long long)st.quota_mbufs_dropped);
	/* After a stop that gave up, entries written and not yet published
	 * stay unpublished: the guest sees fewer, never more. */
	if (st.popped != F.popped || st.completed < F.used_total ||
	    (!F.abandoned && st.completed != F.used_total))
		FAIL("popped %llu/%llu completed %llu/%llu\n", (unsigned long long)st.popped,
		     (unsigned long long)F.popped, (unsigned long long)st.completed,
		     (unsigned long long)F.used_total);
	if (st.hold_timeouts != F.timeouts || st.copied_out + st.copy_no_mbuf != F.copies)
		FAIL("timeouts %llu/%llu copies %llu/%llu\n", (unsigned long long)st.hold_timeouts,
		     (unsigned long long)F.timeouts,
		     (unsigned long long)(st.copied_out + st.copy_no_mbuf),
		     (unsigned long long)F.copies);
	if (!F.abandoned && st.held_now != 0)
		FAIL("held_now %llu after the stop\n", (unsigned long long)st.held_now);
	if (!F.broken && !F.abandoned)
		for (uint32_t h = 0; h < F.size; h++)
			if (!F.dup[h] && F.posts[h] > F.done[h] && F.pos[h] < F.consumed)
				FAIL("head %u consumed (pos %u < %u) and never completed (posts %u done %u skipped %llu+%llu)\n", h,
				     F.pos[h], F.consumed, F.posts[h], F.done[h], (unsigned long long)st.err[SN_VRING_E_HEAD_OOB], (unsigned long long)st.err[SN_VRING_E_HEAD_BUSY]);
	if (free_queue_first) {
		/* The queue goes with its last frame (reap on the worker). */
		sn_vqtx_free(F.q);
		F.q = NULL;
		while (F.nh)
			free_one(F.nh - 1, false);
		return;
	}
	while (F.nh)
		free_one(F.nh - 1, F.nh & 1);
	check_snap("after late frees");
	sn_vqtx_stats_read(F.q, &st);
	if ((!F.abandoned && st.late_free != F.late) || st.extbuf_in_use != 0)
		FAIL("late_free %llu/%llu extbuf_in_use %llu\n", (unsigned long long)st.late_free,
		     (unsigned long long)F.late, (unsigned long long)st.extbuf_in_use);
	sn_vqtx_free(F.q);
	F.q = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct fz_vhost_dev *d = &fz_vhost_devs[VID];
	uint8_t cfg = take(&in);
	static const uint32_t holds[4] = { 0, 50, 1000, 5 };
	static const uint32_t mq_totals[4] = { 6, 24, 80, 400 };
	static const uint32_t held_caps[4] = { 3, 16, 64, 4096 };
	unsigned base_big, base_small;
	bool free_first;
	uint32_t ops = 0;

	memset(&F, 0, sizeof(F));
	F.size = 2u << (cfg & 7);
	F.hdr_len = cfg & 8 ? 12 : 10;
	F.mp = cfg & 0x10 ? pool_small : pool_big;
	F.features = (cfg & 8 ? 1ULL << F_VERSION_1 : 0) | (cfg & 0x20 ? 1ULL << F_LOG_ALL : 0);
	free_first = (cfg & 0xc0) == 0xc0;
	base_big = in_use(pool_big);
	base_small = in_use(pool_small);
	for (uint32_t i = 0; i < MAXQ; i++)
		F.desc_owner[i] = -1;
	for (uint32_t i = 0; i < IND_N; i++)
		F.table_owner[i] = -1;
	/* Fresh guest memory and device. */
	for (int i = 0; i < FZ_VHOST_FDS; i++)
		memset(d->guest[i], 0, FZ_VHOST_FD_SIZE);
	F.g0 = d->guest[0];
	F.desc = (void *)(F.g0 + DESC_OFF);
	F.avail = (void *)(F.g0 + AVAIL_OFF);
	F.used = (void *)(F.g0 + USED_OFF);
	fzg_table_a(d);
	if (fz_vhost_set_mem(VID))
		FAIL("table A\n");
	d->nvrings = 2;
	memset(d->vr, 0, sizeof(d->vr));
	for (int v = 0; v < 2; v++) {
		d->vr[v].desc = DESC_OFF;
		d->vr[v].avail = AVAIL_OFF;
		d->vr[v].used = USED_OFF;
		d->vr[v].size = F.size;
	}
	d->log_writes = 0;
	F.now = rte_rdtsc();
	F.q = sn_vqtx_create(holds[(cfg >> 6) & 3], 0);
	if (!F.q)
		FAIL("create\n");
	sn_vqtx_set_unmarked_hold(F.q, 1 + (cfg >> 6) * 300u);
	/* Budgets small enough that pops are held back and frames dropped. */
	F.mq_total = mq_totals[(cfg >> 4) & 3];
	F.mq = sn_quota_create(2, F.mq_total);
	if (!F.mq || sn_quota_set(F.mq, 0, F.mq_total / 4, F.mq_total * 3 / 4) ||
	    sn_quota_set(F.mq, 1, F.mq_total / 4, F.mq_total))
		FAIL("quota\n");
	F.held_cap = held_caps[(cfg >> 5) & 3];
	sn_vqtx_set_quota(F.q, F.mq, 0, &F.held_cap);
	if (start(&(struct input){ (const uint8_t[]){ 0 }, 1 }))
		FAIL("first start\n");
	while (in.n && ops++ < 512) {
		uint8_t op = take(&in);
		
		switch (op % 16) {
		case 0: case 1: case 2: fzg_post(&in, false); break;
		case 3: fzg_post(&in, true); break;
		case 4: fzg_publish(); break;
		case 5: case 6: recv(&in); break;
		case 7:
			if (F.nh)
				free_one(take(&in) % F.nh, op & 0x10);
			break;
		case 8: {   /* free a run in bulk, from index i on */
			uint32_t i = F.nh ? take(&in) % F.nh : 0, k = take(&in) % 8;

			while (F.nh && k--) {
				if (i >= F.nh)
					i = 0;
				free_one(i, true);
			}
			break;
		}
		case 9:
			if (F.nh && (op & 0x10)) {
				split_tail(take(&in) % F.nh);
			} else if (F.nh && F.nh < MAXHELD) {   /* another reference (a clone's) */
				uint32_t i = take(&in) % F.nh;

				rte_pktmbuf_refcnt_update(F.h[i].m, 1);
				F.h[i].refs++;
			}
			break;
		case 10: service(); break;
		case 11: tick(&in); break;
		case 12: copy_out(&in); break;
		case 13:
			if (F.started)
				stop(&in, op & 0x10);
			else
				start(&in);
			break;
		case 14: remap(&in); break;
		default:
			if (op & 0x10) {   /* the guest rewrites a descriptor */
				uint32_t i = take(&in) % F.size;

				F.desc[i].addr = take16(&in) | (uint64_t)take(&in) << 16;
				F.desc[i].len = take16(&in);
				F.desc[i].flags = take(&in) & 7;
				F.desc[i].next = (uint16_t)take(&in);
				fzg_forget_expect();
			} else if ((op & 0x60) == 0x60) {
				if (take(&in) == 0xa5) {
					F.broken = true;          /* avail index jump */
					F.avail_pos += F.size + 1;
					fzg_publish();
				} else {
					F.avail->flags ^= SN_VRING_AVAIL_F_NO_INTERRUPT;
				}
			} else if (op & 0x40) {
				budget_op(&in);
			} else {
				F.avail->flags ^= SN_VRING_AVAIL_F_NO_INTERRUPT;
			}
			break;
		}
		check_budgets("step");
	}
	fzg_publish();
	recv(&(struct input){ (const uint8_t[]){ 63 }, 1 });
	service();
	drain_and_check(free_first);
	check_budgets("end");
	if (sn_quota_used(F.mq, 0) != 0)
		FAIL("quota in use %u with every frame completed\n", sn_quota_used(F.mq, 0));
	sn_quota_give(F.mq, 1, F.other);
	sn_quota_free(F.mq);
	fz_inputs++;
	if (F.abandoned) {
		fz_abandoned++;
	}
	if (!free_first && (F.features >> F_LOG_ALL & 1) == 0 && d->log_writes)
		FAIL("dirty log written without LOG_ALL\n");
	sn_vqtx_stash_flush(&sn_vqtx_workers[0]);
	if (in_use(pool_big) != base_big || in_use(pool_small) != base_small)
		FAIL("mbuf leak: in use %u/%u, at start %u/%u\n", in_use(pool_big),
		     in_use(pool_small), base_big, base_small);
	return 0;
}
