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
 * Input: one config byte (ring size 2..256, 10/12-byte header, hold limits,
 * a pool of 8 or 512 mbufs, LOG_ALL), then a program: the guest posts
 * direct and indirect chains of up to 64 segments (well-formed, or bad:
 * out of memory, zero length, device-writable, across regions, bad next,
 * loops, oversized, bad indirect tables), duplicate and out-of-range
 * heads, publishes, rewrites descriptors; the worker pops, frees frames in
 * any order (one by one or in bulk, with extra references), copies them
 * out, services the queue, lets time pass (frames past their hold limit
 * are dropped as the pipeline does); the VHOST side stops the device
 * (from a second thread while the worker holds frames: it frees some and
 * acknowledges; or with the worker gone), starts it again, sometimes with
 * features it must refuse or rings outside guest memory, and applies new
 * memory tables while frames are held (region added, moved, re-backed,
 * overlapping, or the rings' region dropped).
 *
 * Invariants (abort on failure): no crash, no hang; every used entry the
 * guest sees names a head it posted more often than it was completed, and
 * never one the worker still holds in the live connection; every head the
 * device consumed is completed by the end (stop drop-completes what is
 * held); nothing is written to the used ring between a stop and the next
 * start, whatever is freed then; counters add up (popped = frames
 * returned, completed = used entries seen, forced = frames held at stop,
 * late_free = frames freed after their connection, hold_timeouts,
 * copies); extbuf_in_use and held_now 0 at the end; the mempool's in-use
 * count back to its start value; the queue's memory freed (ASan).
 *
 * Not driven: the durable record (sn_vqtx_set_record), and a stop the
 * worker does not answer within SN_VQTX_STOP_WAIT_US (20 ms per input is
 * too slow to fuzz; tests/datapath covers it).
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
#include "sn_vqtx_impl.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_vqtx: " __VA_ARGS__); abort(); } while (0)

#define VID      0
#define VRING    1                 /* TX queue 0 */
#define MAXQ     256u
#define MAXHELD  512u
#define DESC_OFF  0x0000u          /* file 0: rings, tables, headers */
#define AVAIL_OFF 0x1000u
#define USED_OFF  0x2000u
#define IND_OFF   0x4000u          /* 16 indirect tables of 64 entries */
#define IND_N     16u
#define HDR_OFF   0x8000u          /* 16 bytes per head */
#define R1_GPA    0x10000u         /* frames region, contiguous with region 0 */
#define F_LOG_ALL 26
#define F_VERSION_1 32
#define F_EVENT_IDX 29

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static uint32_t take16(struct input *in)
{
	return take(in) | (uint32_t)take(in) << 8;
}

struct held {
	struct rte_mbuf *m;
	uint32_t refs;             /* our references */
	uint32_t epoch;            /* q->epoch when popped */
	uint16_t head;
	bool copy;                 /* a plain copy (copy_out): no guest buffer */
};

static struct rte_mempool *pool_big, *pool_small;

static struct fz {
	struct sn_vqtx *q;
	struct rte_mempool *mp;
	unsigned char *g0;         /* guest view of file 0 */
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	uint32_t size;
	uint16_t hdr_len;
	uint64_t features;
	bool started;
	uint64_t now;
	uint64_t frames_gpa;       /* where the guest puts payloads now */
	uint32_t buf_ctr;
	/* Guest model. */
	uint32_t avail_pos;        /* entries written (32-bit) */
	uint32_t consumed;         /* entries the device took, as of the last base */
	uint16_t used_seen;
	uint32_t posts[MAXQ], done[MAXQ], pos[MAXQ];
	bool dup[MAXQ];
	int16_t desc_owner[MAXQ];  /* head owning descriptor i, -1 free */
	int16_t table_owner[IND_N];
	bool broken;               /* avail jump: the end check is off */
	bool table_bad;            /* the table has no ring region or overlaps */
	/* A stop gave up waiting for the worker's ack (the fuzz thread was
	 * descheduled for SN_VQTX_STOP_WAIT_US on a loaded machine): by
	 * design the chains still held then are never completed (and
	 * entries written but not published stay so), so the completion,
	 * forced and late counts are checked as bounds only or not at all. */
	bool abandoned;
	/* Worker's frames. */
	struct held h[MAXHELD];
	uint32_t nh;
	/* Stop snapshot of the used ring. */
	bool snap;
	unsigned char used_snap[6 + 8 * MAXQ];
	/* Expected counters. */
	uint64_t popped, used_total, forced, late, timeouts, copies;
} F;

static unsigned in_use(struct rte_mempool *mp)
{
	return rte_mempool_in_use_count(mp);
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
	return 0;
}

/* ---- Guest ---- */

static void table_a(struct fz_vhost_dev *d)
{
	d->nregions = 2;
	d->reg[0] = (struct fz_vhost_region){ .gpa = 0, .size = 0x10000, .uaddr = 0x7f0000000000,
					      .file = 0, .off = 0 };
	d->reg[1] = (struct fz_vhost_region){ .gpa = R1_GPA, .size = 0x10000,
					      .uaddr = 0x7f0000010000, .file = 1, .off = 0 };
	F.frames_gpa = R1_GPA;
}

static int16_t free_desc(uint32_t from)
{
	for (uint32_t k = 0; k < F.size; k++) {
		uint32_t i = (from + k) & (F.size - 1);

		if (F.desc_owner[i] < 0)
			return (int16_t)i;
	}
	return -1;
}

/* A payload buffer of len bytes in the frames region, with a pattern. */
static uint64_t payload(uint32_t len)
{
	uint32_t off = (F.buf_ctr++ * 192u) % (0x10000u - 4096u);
	unsigned char *p = fz_vhost_guest(VID, F.frames_gpa + off, len);

	if (p)
		memset(p, (int)(F.buf_ctr & 0xff), len);
	return F.frames_gpa + off;
}

/* One segment descriptor: good, or bad as variant v (1..7). */
static void seg(struct sn_vring_desc *d, uint8_t v, uint32_t len)
{
	d->flags = 0;
	switch (v) {
	case 1: d->addr = 0x7f000000; d->len = len; break;            /* outside memory */
	case 2: d->addr = payload(16); d->len = 0; break;              /* zero length */
	case 3: d->addr = payload(len); d->len = len; d->flags = SN_VRING_DESC_F_WRITE; break;
	case 4: d->addr = R1_GPA - 8; d->len = 64; break;              /* across regions */
	case 7: d->addr = payload(64); d->len = 70000; break;          /* oversized */
	default: d->addr = payload(len); d->len = len; break;
	}
}

static void header(uint16_t head, uint64_t *gpa)
{
	struct sn_virtio_net_hdr *h = (void *)(F.g0 + HDR_OFF + 16u * head);

	memset(h, 0, 16);
	h->num_buffers = SN_VQTX_OPTIN_MAGIC;  /* marked: the opt-in (12-byte header) */
	*gpa = HDR_OFF + 16u * head;
}

/* Room in the avail ring: entries not yet taken by the device stay fewer
 * than the ring size (the guest model peeks at the device's avail index;
 * a driver knows it from its free descriptors, which the hostile
 * out-of-range and duplicate entries below do not use). */
static bool avail_room(void)
{
	uint16_t a = (uint16_t)F.consumed, u;

	if (F.started)
		sn_vring_get_base(F.q->vr, &a, &u);
	return (uint16_t)(F.avail_pos - a) < F.size;
}

static void avail_put(uint16_t head)
{
	F.avail->ring[F.avail_pos & (F.size - 1)] = head;
	F.avail_pos++;
}

static void post(struct input *in, bool indirect)
{
	uint8_t c = take(in);
	uint32_t nseg = 1 + take(in) % 64u;
	uint8_t badsel = take(in);
	uint8_t bad = badsel < 24 ? (uint8_t)(1 + badsel % 9) : 0;   /* 8, 9: next, loop */
	int16_t head = free_desc(c);
	uint64_t hgpa;

	if (!avail_room())
		return;
	if (c >= 0xf8) {   /* hostile: a head held already, or out of range */
		uint16_t h = c & 1 ? (uint16_t)(F.size + (c & 7)) : (uint16_t)(take(in) % F.size);

		if (h < F.size) {
			F.dup[h] = true;
			F.posts[h]++;
		}
		avail_put(h);
		return;
	}
	if (head < 0 || F.dup[head])
		return;
	header((uint16_t)head, &hgpa);
	if (indirect) {
		int t = -1;
		struct sn_vring_desc *tab;

		for (uint32_t i = 0; i < IND_N && t < 0; i++)
			if (F.table_owner[i] < 0)
				t = (int)i;
		if (t < 0)
			return;
		tab = (void *)(F.g0 + IND_OFF + 0x400u * (uint32_t)t);
		tab[0] = (struct sn_vring_desc){ hgpa, F.hdr_len, SN_VRING_DESC_F_NEXT, 1 };
		for (uint32_t i = 1; i <= nseg && i < 64; i++) {
			seg(&tab[i], bad && i == nseg / 2 + 1 && bad < 8 ? bad : 0,
			    1 + take16(in) % 1500u);
			tab[i].flags |= i < nseg && i < 63 ? SN_VRING_DESC_F_NEXT : 0;
			tab[i].next = (uint16_t)(i + 1);
		}
		F.desc[head] = (struct sn_vring_desc){ IND_OFF + 0x400u * (uint32_t)t,
						       16u * (nseg + 1 < 64 ? nseg + 1 : 64),
						       SN_VRING_DESC_F_INDIRECT, 0 };
		if (bad == 8)
			F.desc[head].len += 3;                          /* len % 16 */
		else if (bad == 9)
			tab[1].flags |= SN_VRING_DESC_F_INDIRECT;       /* nested */
		F.table_owner[t] = head;
		F.desc_owner[head] = head;
	} else {
		int16_t prev = head, d;

		F.desc[head] = (struct sn_vring_desc){ hgpa, F.hdr_len, 0, 0 };
		F.desc_owner[head] = head;
		for (uint32_t i = 0; i < nseg; i++) {
			d = free_desc((uint32_t)prev + 1);
			if (d < 0)
				break;
			F.desc_owner[d] = head;
			seg(&F.desc[d], bad && i == nseg / 2 && bad < 8 ? bad : 0,
			    1 + take16(in) % 1500u);
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)d;
			prev = d;
		}
		if (bad == 8) {                                          /* next out of range */
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)(F.size + 1);
		} else if (bad == 9) {                                   /* loop */
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)head;
		}
	}
	F.posts[head]++;
	F.pos[head] = F.avail_pos;
	avail_put((uint16_t)head);
}

static void publish(void)
{
	__atomic_store_n(&F.avail->idx, (uint16_t)F.avail_pos, __ATOMIC_RELEASE);
}

static void release_head(uint16_t h)
{
	for (uint32_t i = 0; i < F.size; i++)
		if (F.desc_owner[i] == (int16_t)h)
			F.desc_owner[i] = -1;
	for (uint32_t i = 0; i < IND_N; i++)
		if (F.table_owner[i] == (int16_t)h)
			F.table_owner[i] = -1;
}

/* The guest reads the used ring (acquire on idx, as a driver). */
static void collect(void)
{
	uint16_t u = __atomic_load_n(&F.used->idx, __ATOMIC_ACQUIRE);

	while (F.used_seen != u) {
		uint32_t id = F.used->ring[F.used_seen & (F.size - 1)].id;

		F.used_seen++;
		F.used_total++;
		if (id >= F.size)
			FAIL("used id %u >= size %u\n", id, F.size);
		if (F.done[id] >= F.posts[id])
			FAIL("head %u completed %u times, posted %u\n", id, F.done[id] + 1,
			     F.posts[id]);
		if (!F.dup[id] && F.started)
			for (uint32_t i = 0; i < F.nh; i++)
				if (!F.h[i].copy && F.h[i].head == id && F.h[i].epoch == F.q->epoch)
					FAIL("head %u completed while the worker holds it\n", id);
		F.done[id]++;
		if (F.done[id] == F.posts[id]) {
			F.dup[id] = false;
			release_head((uint16_t)id);
		}
	}
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

static void recv(struct input *in)
{
	struct rte_mbuf *pkts[SN_CONFIG_BURST_MAX];
	uint16_t n, want = (uint16_t)(1 + take(in) % SN_CONFIG_BURST_MAX);
	uint64_t bytes = 0, sum = 0;

	if (!F.started)
		return;
	sn_vqtx_set_now(0, F.now);
	n = sn_vqtx_recv(F.q, F.mp, pkts, want, F.now, &bytes);
	if (n > want)
		FAIL("recv %u > %u\n", n, want);
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
		sum += m->pkt_len;
		if (F.nh == MAXHELD) {
			rte_pktmbuf_free(m);
		} else {
			F.h[F.nh++] = (struct held){ m, 1, F.q->epoch, h, false };
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
	collect();
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
		F.h[i] = (struct held){ c, 1, 0, 0, true };
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

static void *stop_thread(void *arg)
{
	sn_vqtx_stop(arg);
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

	collect();
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

	if (!F.started)
		return;
	slots = F.q->slots;
	sn_vqtx_stats_read(F.q, &st);
	if (worker_gone) {
		sn_vqtx_worker_exit(0);
		F.forced += live_held();
		sn_vqtx_stop(F.q);
		sn_vqtx_worker_enter(0);
	} else {
		pthread_t t;
		uint64_t t0 = rte_get_timer_cycles();

		if (pthread_create(&t, NULL, stop_thread, F.q))
			FAIL("pthread_create\n");
		while (!sn_vqtx_stop_pending(F.q)) {
			if (rte_get_timer_cycles() - t0 > rte_get_timer_hz())
				FAIL("stop never requested\n");
			rte_pause();
		}
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
	/* A second connection stopped with frames out while the first's slot
	 * array is still referenced: its array is leaked on purpose, and
	 * counted (sn_vqtx.h slots_leaked). */
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
	/* A start after a stop that gave up releases that ring first, and
	 * leaks its slot array on purpose if frames of it are out while an
	 * older array is kept (slots_leaked, as in stop() below). */
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
	F.snap = false;
	return 0;
}

static void remap(struct input *in)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[VID];
	uint8_t c = take(in) % 6;
	int rc;

	table_a(d);
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
	if (fz_vhost_set_mem(VID))
		FAIL("fake table rejected\n");
	rc = F.started ? sn_vqtx_remap(F.q, VID) : 0;
	if (rc < 0 && rc != -EBUSY)
		FAIL("remap: %d\n", rc);
}

/* ---- One input ---- */

static void drain_and_check(bool free_queue_first)
{
	struct sn_vqtx_stats st;

	if (F.started) {
		struct input none = { NULL, 0 };

		stop(&none, false);
	}
	collect();
	check_snap("at the end");
	sn_vqtx_stats_read(F.q, &st);
	if (getenv("FUZZ_VQTX_VERBOSE"))   /* what one input did (seed checks) */
		fprintf(stderr, "fuzz_vqtx: popped %llu completed %llu forced %llu no_mbuf %llu "
			"timeouts %llu copies %llu remaps %llu late %llu addr_oob %llu loop %llu "
			"bad_indirect %llu\n",
			(unsigned long long)st.popped, (unsigned long long)st.completed,
			(unsigned long long)st.forced, (unsigned long long)st.no_mbuf,
			(unsigned long long)st.hold_timeouts, (unsigned long long)st.copied_out,
			(unsigned long long)st.mem_remaps, (unsigned long long)F.late,
			(unsigned long long)st.err[SN_VRING_E_ADDR_OOB],
			(unsigned long long)st.err[SN_VRING_E_LOOP],
			(unsigned long long)st.err[SN_VRING_E_BAD_INDIRECT]);
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
	table_a(d);
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
	if (start(&(struct input){ (const uint8_t[]){ 0 }, 1 }))
		FAIL("first start\n");
	while (in.n && ops++ < 512) {
		uint8_t op = take(&in);

		switch (op % 16) {
		case 0: case 1: case 2: post(&in, false); break;
		case 3: post(&in, true); break;
		case 4: publish(); break;
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
			if (F.nh && F.nh < MAXHELD) {   /* another reference (a clone's) */
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
			} else if ((op & 0x60) == 0x60 && take(&in) == 0xa5) {
				F.broken = true;          /* avail index jump */
				F.avail_pos += F.size + 1;
				publish();
			} else {
				F.avail->flags ^= SN_VRING_AVAIL_F_NO_INTERRUPT;
			}
			break;
		}
	}
	publish();
	recv(&(struct input){ (const uint8_t[]){ 63 }, 1 });
	service();
	drain_and_check(free_first);
	if (!free_first && (F.features >> F_LOG_ALL & 1) == 0 && d->log_writes)
		FAIL("dirty log written without LOG_ALL\n");
	sn_vqtx_stash_flush(&sn_vqtx_workers[0]);
	if (in_use(pool_big) != base_big || in_use(pool_small) != base_small)
		FAIL("mbuf leak: in use %u/%u, at start %u/%u\n", in_use(pool_big),
		     in_use(pool_small), base_big, base_small);
	return 0;
}
