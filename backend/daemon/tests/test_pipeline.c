/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pipeline.c — the scheduled pipeline (pipeline/) driven through its
 * public API, without a running daemon: frames of a shaped port are
 * submitted, held in the timing wheel and released at the port's rate by
 * sn_pipeline_run(); a newly published policy is applied by the next
 * run() to the frames already queued. Properties:
 *  - release at rate: after run() at the pipeline's clock C, the frames
 *    released since the stamps' start T are floor((C - T) / P) (P = the
 *    frame's time at the rate), less at most one wheel slot's worth
 *    (tolerance: one slot, 10 us, and 1 us), never more; released_bytes is
 *    that count times the frame length; held() and src_held() count the
 *    rest; offered_* count every submitted frame;
 *  - hard limit: frames stamped beyond the wheel horizon are "horizon"
 *    drops, the others are released at the rate;
 *  - live apply: a rate change published while frames are queued
 *    restamps them from the apply on at the new rate, faster and slower;
 *  - drain: every held frame is freed ("src_stopped"), the mbuf pool is
 *    full again, and so after every case;
 *  - wheel quota: a port at its quota of wheel nodes loses its own frames
 *    ("quota_wheel", on the port and on the class each was offered to)
 *    and gets no room to submit more.
 * The pipeline needs DPDK memory (rte_zmalloc, mbufs), so the test starts
 * the EAL (no hugepages, no PCI, its own file prefix). It runs the 1-core
 * layout with a port table built by hand (no registry, no vhost device):
 * zeroed struct sn_port with the fields submit/run read (name, type,
 * slot, gen, up). The destination port is down, so every released frame
 * ends as a counted dst_gone drop (released_* count it before delivery).
 * Time is real: the checks use the pipeline's own clock
 * (sn_pipeline_clock_ns() of its latest run()), so a descheduled test only
 * samples later, it does not fail. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "sn_classify.h"
#include "sn_pipeline.h"
#include "sn_policy.h"
#include "sn_port.h"

#include "sn_check.h"
#include "sn_test_policy.h"

#define US 1000ull
#define MS 1000000ull

#define GRAN_NS  (10 * US)               /* wheel slot */
#define SLOTS    4096u                   /* horizon 40.96 ms */
#define HORIZON  (SLOTS * GRAN_NS)
#define SLACK_NS (1 * US)
#define NB_MBUF  1023u

static struct rte_mempool *mp;
static unsigned avail0;

/* The hand-built port table: vm0 (slot 0) is the shaped source, vm1
 * (slot 1) the destination, down; vm2 and vm3 are further sources
 * (wheel_reserve). */
#define N_PORTS 4
static struct sn_port ports[N_PORTS];
static struct sn_port_table table;
static uint64_t table_seq;
static struct sn_port *table_mem[2 * SN_PORT_SLOTS_MAX];   /* list, by_slot */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
	const uint64_t end = mono_ns() + ns;

	while (mono_ns() < end)
		;
}

static void ports_init(void)
{
	static const char *const names[N_PORTS] = { "vm0", "vm1", "vm2", "vm3" };

	memset(ports, 0, sizeof(ports));
	memset(&table, 0, sizeof(table));
	memset(table_mem, 0, sizeof(table_mem));
	table.list = table_mem;
	table.by_slot = table_mem + sn_config_port_slots;
	for (unsigned i = 0; i < N_PORTS; i++) {
		snprintf(ports[i].name, sizeof(ports[i].name), "%s", names[i]);
		ports[i].type = SN_PORT_VHOST;
		ports[i].slot = (uint16_t)i;
		ports[i].gen = 100 + i;   /* != 0: a fresh slot has gen 0 */
		ports[i].nq = 1;
		ports[i].uplink_vid = -1;
		table.list[i] = table.by_slot[i] = &ports[i];
	}
	table.n = N_PORTS;
	table.seq = ++table_seq;   /* a new table, as port/ publishes one */
	ports[0].up = ports[2].up = ports[3].up = 1;
	ports[1].up = 0;   /* every released frame: dst_gone */
}

/* The policy: vm0 limited to rate_bps, vm1 unshaped. */
static void pol_of(uint64_t rate, struct sn_policy *p)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "{\"ports\": {\"vm0\": {\"rate_bps\": %" PRIu64
		 ", \"burst_bytes\": 0, \"weight\": 1}}}", rate);
	sn_test_policy_parse(buf, p);
}

struct fix {
	struct sn_policy_store *st;
	struct sn_pipeline *pl;
	uint64_t t_apply;   /* clock of the run that applied the policy */
};

/* Where the chain of a burst submitted at clock t0 to an idle port
 * starts: frame i (from 1) is due at start + i p. The port's LTS starts
 * at the apply (sn_tstamp_init at its clock) and a frame's stamp is
 * max(LTS + p, now) (Carousel §5.1.1), so after an idle time longer than
 * one frame the first one is due at t0 itself. */
static uint64_t chain_start(const struct fix *f, uint64_t t0, uint64_t p)
{
	return RTE_MAX(f->t_apply, t0 - p);
}

static const struct sn_pipeline_config fix_cfg = {
	.granularity_ns = GRAN_NS, .slots = SLOTS, .pool_nodes = 4096,
	.mbox_size = 256, .queue_len = 256, .slack_ns = 10 * MS,
	.idle_credit_ns = 1 * MS,
	.burst = 1,   /* reserves of 2 nodes: one port may fill the pool */
};

/* A store with vm0 at `rate`, a pipeline of cfg, and one run() that
 * applies it. */
static int fix_open_cfg(struct fix *f, uint64_t rate, const struct sn_pipeline_config *cfg)
{
	static struct sn_policy p;
	struct sn_pipeline_port_stats s;

	ports_init();
	pol_of(rate, &p);
	f->st = sn_policy_store_create(&p);
	CHECK(f->st != NULL);
	if (!f->st)
		return -1;
	f->pl = sn_pipeline_create(cfg, f->st);
	CHECK(f->pl != NULL);
	if (!f->pl) {
		sn_policy_store_destroy(f->st);
		return -1;
	}
	sn_pipeline_run(f->pl, &table);
	f->t_apply = sn_pipeline_clock_ns(f->pl);
	CHECK(sn_pipeline_shaped(f->pl, &ports[0]));
	CHECK(!sn_pipeline_shaped(f->pl, &ports[1]));
	CHECK(sn_pipeline_port_stats(f->pl, &ports[1], &s) == -ENOENT);
	CHECK(sn_pipeline_port_stats(f->pl, &ports[0], &s) == 0 && s.rate_bps == rate);
	return 0;
}

static int fix_open(struct fix *f, uint64_t rate)
{
	return fix_open_cfg(f, rate, &fix_cfg);
}

static void fix_close(struct fix *f)
{
	sn_pipeline_destroy(f->pl);
	sn_policy_store_destroy(f->st);
	/* Every frame freed exactly once: the pool is full again. */
	CHECK(rte_mempool_avail_count(mp) == avail0);
}

static struct sn_pipeline_port_stats stats0(const struct fix *f)
{
	struct sn_pipeline_port_stats s;

	CHECK(sn_pipeline_port_stats(f->pl, &ports[0], &s) == 0);
	return s;
}

/* submit() makes IPv4 UDP frames (zeroes but for the headers' type
 * fields: a flow class matches them) instead of zeroed ones. */
static bool submit_ipv4;

/* n frames of len bytes from src to `to`, in one burst, right after a
 * run() (the mbufs are made first): returns that run's clock, the one
 * submit stamps from; *late: the clock after the submit (a frame due by
 * then may have taken the fast path, released at submit). */
static uint64_t submit_burst_to(struct fix *f, struct sn_port *src, struct sn_port *to,
			       unsigned n, uint32_t len, uint64_t *late)
{
	struct rte_mbuf *pkts[256];
	struct sn_port *dst[256];
	uint64_t t;

	CHECK(n <= 256);
	for (unsigned i = 0; i < n; i++) {
		pkts[i] = rte_pktmbuf_alloc(mp);
		CHECK(pkts[i] != NULL);
		if (!pkts[i])
			return 0;
		CHECK(rte_pktmbuf_append(pkts[i], (uint16_t)len) != NULL);
		memset(rte_pktmbuf_mtod(pkts[i], void *), 0, len);
		if (submit_ipv4) {   /* EtherType IPv4, version 4 / IHL 5, UDP */
			uint8_t *b = rte_pktmbuf_mtod(pkts[i], uint8_t *);

			b[12] = 0x08;
			b[14] = 0x45;
			b[23] = 17;
		}
		dst[i] = to;
	}
	sn_pipeline_run(f->pl, &table);
	t = sn_pipeline_clock_ns(f->pl);
	sn_pipeline_submit_burst(f->pl, src, pkts, dst, (uint16_t)n);
	sn_pipeline_flush(f->pl);
	if (late)
		*late = mono_ns();
	return t;
}

static uint64_t submit_from(struct fix *f, struct sn_port *src, unsigned n, uint32_t len,
			    uint64_t *late)
{
	return submit_burst_to(f, src, &ports[1], n, len, late);
}

/* n frames of len bytes from vm0 to vm1 (submit_from). */
static uint64_t submit(struct fix *f, unsigned n, uint32_t len, uint64_t *late)
{
	return submit_from(f, &ports[0], n, len, late);
}

/* The frame's time at rate (exact for the rates used: 8e9 / rate is a
 * whole number of ns per byte). */
static uint64_t frame_ns(uint64_t rate, uint32_t len)
{
	return (uint64_t)len * 8000000000ull / rate;
}

/* Frames released by the pipeline's clock c of a chain of n frames of
 * period p starting at t (frame i due at t + i p, released at the first
 * slot boundary at or after it): [lo, hi]. */
static void due_range(uint64_t t, uint64_t p, unsigned n, uint64_t c, uint64_t *lo, uint64_t *hi)
{
	uint64_t h = c + SLACK_NS > t ? (c + SLACK_NS - t) / p : 0;
	uint64_t l = c > t + GRAN_NS + SLACK_NS ? (c - t - GRAN_NS - SLACK_NS) / p : 0;

	*hi = RTE_MIN(h, (uint64_t)n);
	*lo = RTE_MIN(l, (uint64_t)n);
}

/* run() every step ns until the chain (n frames held, of period p from
 * t, rel0 frames released before it) is out; at each run the released,
 * held and src_held counts are checked against the clock. Returns the
 * number of samples. */
static unsigned follow(struct fix *f, uint64_t t, uint64_t p, unsigned n, uint64_t rel0,
		       uint32_t len, uint64_t step, const char *what)
{
	const uint64_t end = t + n * p + 50 * MS;
	unsigned samples = 0, bad = 0;
	uint64_t rel = 0, c;

	do {
		struct sn_pipeline_port_stats s;
		uint64_t lo, hi;

		spin_ns(step);
		sn_pipeline_run(f->pl, &table);
		c = sn_pipeline_clock_ns(f->pl);
		s = stats0(f);
		rel = s.released_packets - rel0;
		due_range(t, p, n, c, &lo, &hi);
		samples++;
		if (rel < lo || rel > hi || s.released_bytes != s.released_packets * len ||
		    sn_pipeline_held(f->pl) != n - rel ||
		    sn_pipeline_src_held(f->pl, &ports[0]) != n - rel || s.wheel_depth != n - rel) {
			if (bad++ < 5)
				fprintf(stderr, "FAIL %s: at +%.3f ms released %" PRIu64
					" (due %" PRIu64 "..%" PRIu64 "), held %" PRIu64
					", src_held %" PRIu64 ", wheel %" PRIu64 "\n", what,
					(double)(c - t) / MS, rel, lo, hi, sn_pipeline_held(f->pl),
					sn_pipeline_src_held(f->pl, &ports[0]), s.wheel_depth);
			failures++;
		}
	} while (rel < n && c < end);
	CHECK(rel == n);
	return samples;
}

/* ---- release at the port's rate ------------------------------------------ */

static const struct rel_case {
	uint64_t rate;
	uint32_t len;
	unsigned n;        /* n * frame time < horizon: all queued */
} rel_cases[] = {
	{ 10000000, 1000, 40 },    /* 800 us a frame, 32 ms */
	{ 40000000, 1500, 100 },   /* 300 us a frame, 30 ms */
	{ 100000000, 64, 200 },    /* 5.12 us a frame (< one slot), 1 ms */
};

static void release_at_rate(const struct rel_case *rc)
{
	const uint64_t p = frame_ns(rc->rate, rc->len);
	struct sn_pipeline_port_stats s;
	struct fix f;
	uint64_t t0, t, late, rel0, t_end;
	unsigned samples;

	if (fix_open(&f, rc->rate))
		return;
	t0 = submit(&f, rc->n, rc->len, &late);
	t = chain_start(&f, t0, p);
	s = stats0(&f);
	CHECK(s.offered_packets == rc->n && s.offered_bytes == (uint64_t)rc->n * rc->len);
	/* Only frames already due by submit's own clock skip the wheel. */
	rel0 = s.released_packets;
	CHECK(rel0 <= (late - t) / p);
	CHECK(sn_pipeline_held(f.pl) == rc->n - rel0);
	CHECK(sn_pipeline_src_held(f.pl, &ports[0]) == rc->n - rel0);
	samples = follow(&f, t, p, rc->n, 0, rc->len, RTE_MAX(p / 3, 20 * US), "release");
	t_end = sn_pipeline_clock_ns(f.pl);
	s = stats0(&f);
	CHECK(s.released_packets == rc->n && s.released_bytes == (uint64_t)rc->n * rc->len);
	CHECK(s.drop[SN_PL_DROP_DST_GONE] == rc->n);
	for (unsigned d = 0; d < SN_PL_DROP_MAX; d++)
		if (d != SN_PL_DROP_DST_GONE)
			CHECK(s.drop[d] == 0);
	CHECK(sn_pipeline_held(f.pl) == 0 && sn_pipeline_src_held(f.pl, &ports[0]) == 0);
	/* The last frame is due at t + n p: released no earlier. */
	CHECK(t_end + SLACK_NS >= t + rc->n * p);
	printf("release %3" PRIu64 " Mbit/s x %4u B: %3u frames in %6.3f ms (due %6.3f ms), "
	       "%.2f Mbit/s, %u samples\n", rc->rate / 1000000, rc->len, rc->n,
	       (double)(t_end - t) / MS, (double)(rc->n * p) / MS,
	       (double)s.released_bytes * 8 * 1000 / (double)(t_end - t), samples);
	fix_close(&f);
}

/* ---- horizon drops ------------------------------------------------------- */

static void horizon(void)
{
	const uint64_t rate = 1000000;   /* 8 ms a 1000-byte frame */
	const uint32_t len = 1000;
	const unsigned n = 12;
	const uint64_t p = frame_ns(rate, len);
	struct sn_pipeline_port_stats s;
	struct fix f;
	uint64_t t0, t, kept, keep_lo, keep_hi;

	if (fix_open(&f, rate))
		return;
	t0 = submit(&f, n, len, NULL);
	/* frame i, due at t + i p, goes in while its slot is within the
	 * horizon of the wheel's front (at t0, possibly one slot behind) */
	t = chain_start(&f, t0, p);
	keep_lo = (t0 + HORIZON - 2 * GRAN_NS - t) / p;
	keep_hi = (t0 + HORIZON - t) / p;
	s = stats0(&f);
	kept = sn_pipeline_held(f.pl);
	CHECK(s.offered_packets == n && s.released_packets == 0);
	CHECK(kept >= keep_lo && kept <= keep_hi);
	CHECK(s.drop[SN_PL_DROP_HORIZON] == n - kept);
	CHECK(sn_pipeline_src_held(f.pl, &ports[0]) == kept && s.wheel_depth == kept);
	/* A dropped frame commits no stamp: the kept ones leave at the rate. */
	follow(&f, t, p, (unsigned)kept, 0, len, 2 * MS, "horizon");
	s = stats0(&f);
	CHECK(s.drop[SN_PL_DROP_HORIZON] == n - kept && s.drop[SN_PL_DROP_DST_GONE] == kept);
	printf("horizon %.2f ms at 1 Mbit/s x %u B: %u offered, %" PRIu64 " queued, %" PRIu64
	       " horizon drops\n", (double)HORIZON / MS, len, n, kept,
	       s.drop[SN_PL_DROP_HORIZON]);
	fix_close(&f);
}

/* ---- room at the horizon ------------------------------------------------- */

/* At 0.1 Mbit/s a 1000-byte frame takes 80 ms, more than the 40.96 ms
 * horizon: the idle port's room is one frame, which alone ends beyond the
 * horizon. Let through by the room, it is put at the horizon
 * (room_clamped), not dropped; a frame submitted without a room call is a
 * horizon drop. A rate change of another port, which re-lays the wheel,
 * keeps it. The clamped frame leaves at the horizon, never earlier,
 * and its stamp is kept: the port gets room again only once the frame's
 * full 80 ms (from where its chain starts, chain_start) have passed. */
static void room_clamp(void)
{
	static struct sn_policy p1, p2;
	const uint64_t rate = 100000;
	const uint32_t len = 1000;
	const uint64_t p = frame_ns(rate, len);
	struct sn_pipeline_port_stats s;
	uint64_t t0, t_rel = 0, t_room = 0, dl;
	uint16_t room0, room1;
	struct fix f;

	if (fix_open(&f, rate))
		return;
	/* vm2 limited too: its rate changes below, which restamps the wheel */
	sn_test_policy_parse("{\"ports\": {\"vm0\": {\"rate_bps\": 100000, \"burst_bytes\": 0}, "
			     "\"vm2\": {\"rate_bps\": 1000000}}}", &p1);
	sn_test_policy_parse("{\"ports\": {\"vm0\": {\"rate_bps\": 100000, \"burst_bytes\": 0}, "
			     "\"vm2\": {\"rate_bps\": 2000000}}}", &p2);
	CHECK(sn_policy_publish(f.st, &p1) == 0);
	sn_pipeline_run(f.pl, &table);
	room0 = sn_pipeline_src_room(f.pl, &ports[0], 32);
	t0 = submit(&f, 1, len, NULL);
	s = stats0(&f);
	CHECK(room0 == 1);
	CHECK(s.room_clamped == 1 && s.drop[SN_PL_DROP_HORIZON] == 0 && s.wheel_depth == 1);
	/* another port's rate change re-lays the wheel: the clamped frame,
	 * its stamp unchanged, keeps its place */
	CHECK(sn_policy_publish(f.st, &p2) == 0);
	sn_pipeline_run(f.pl, &table);
	s = stats0(&f);
	CHECK(s.drop[SN_PL_DROP_HORIZON] == 0 && s.wheel_depth == 1);
	room1 = sn_pipeline_src_room(f.pl, &ports[0], 32);
	if (sn_pipeline_clock_ns(f.pl) < chain_start(&f, t0, p) + p)
		CHECK(room1 == 0);
	submit(&f, 1, len, NULL);   /* no room call: beyond the horizon, dropped */
	s = stats0(&f);
	CHECK(s.room_clamped == 1 && s.drop[SN_PL_DROP_HORIZON] == 1 && s.wheel_depth == 1);
	dl = mono_ns() + 10 * p;
	while (mono_ns() < dl && (!t_rel || !t_room)) {
		sn_pipeline_run(f.pl, &table);
		sn_pipeline_flush(f.pl);
		s = stats0(&f);
		if (!t_rel && s.released_packets == 1)
			t_rel = sn_pipeline_clock_ns(f.pl);
		if (!t_room && sn_pipeline_src_room(f.pl, &ports[0], 32) > 0)
			t_room = sn_pipeline_clock_ns(f.pl);
		usleep(200);
	}
	printf("room clamp at 0.1 Mbit/s x %u B (%.0f ms, horizon %.2f ms): clamped %" PRIu64
	       ", horizon drops %" PRIu64 ", released after %.2f ms, room again after %.2f ms\n",
	       len, (double)p / MS, (double)HORIZON / MS, s.room_clamped,
	       s.drop[SN_PL_DROP_HORIZON], t_rel ? (double)(t_rel - t0) / MS : -1.0,
	       t_room ? (double)(t_room - t0) / MS : -1.0);
	CHECK(t_rel != 0 && t_rel + 2 * GRAN_NS >= t0 + HORIZON);
	CHECK(t_room != 0 && t_room >= chain_start(&f, t0, p) + p);
	CHECK(s.released_packets == 1 && s.wheel_depth == 0 && sn_pipeline_held(f.pl) == 0);
	fix_close(&f);
}

/* A store with policy `json` and a pipeline that applied it. */
static int fix_open_json(struct fix *f, const char *json)
{
	static struct sn_policy p;

	ports_init();
	sn_test_policy_parse(json, &p);
	f->st = sn_policy_store_create(&p);
	CHECK(f->st != NULL);
	if (!f->st)
		return -1;
	f->pl = sn_pipeline_create(&fix_cfg, f->st);
	CHECK(f->pl != NULL);
	if (!f->pl) {
		sn_policy_store_destroy(f->st);
		return -1;
	}
	sn_pipeline_run(f->pl, &table);
	f->t_apply = sn_pipeline_clock_ns(f->pl);
	return 0;
}

/* n frames of len bytes from src to dst in one burst after a run();
 * returns that run's clock. */
static uint64_t submit_to(struct fix *f, struct sn_port *src, struct sn_port *dst, unsigned n,
			  uint32_t len)
{
	return submit_burst_to(f, src, dst, n, len, NULL);
}

/* ---- two-rate shaper: peak_bps ------------------------------------------- */

/* Frames of a chain submitted at t0 due by t0 + T (T may be < 0): with
 * period p from t0 (floor(T / p) + 1), and at most `ahead` frames earlier
 * than that (a burst allowance of ahead * p). */
static uint64_t due_by(int64_t t, uint64_t p, uint64_t ahead)
{
	return t < 0 ? 0 : (uint64_t)t / p + 1 + ahead;
}

/* vm0 at 10 Mbit/s with a 10,000-byte burst and a 40 Mbit/s peak, idle
 * long enough to hold its whole burst: 30 frames of 1000 B submitted at
 * t0 leave at the peak (one each 200 us from t0) while the burst lasts,
 * then at the rate (the 11th frame of the rate's chain is due at t0 and
 * one each 800 us after it): by t0 + T, min(T / 200 us + 1, 11 + T /
 * 800 us) frames. Without the peak the first 11 would leave at once. */
static void peak(void)
{
	const uint64_t rate = 10000000, peak_bps = 40000000;
	const uint32_t len = 1000, burst = 10000;
	const unsigned n = 30;
	const uint64_t pr = frame_ns(rate, len), pp = frame_ns(peak_bps, len);
	struct sn_pipeline_port_stats s;
	uint64_t t0, c, rel = 0, first = 0, bad = 0, samples = 0;
	struct fix f;

	if (fix_open_json(&f, "{\"ports\": {\"vm0\": {\"rate_bps\": 10000000, "
			  "\"burst_bytes\": 10000, \"peak_bps\": 40000000}}}"))
		return;
	spin_ns(2 * MS);   /* longer than a frame at the peak or the rate */
	t0 = submit(&f, n, len, NULL);
	s = stats0(&f);
	first = s.released_packets;
	CHECK(first >= 1 && first <= due_by((int64_t)(mono_ns() - t0 + SLACK_NS), pp, 0));
	do {
		uint64_t lo, hi;

		spin_ns(50 * US);
		sn_pipeline_run(f.pl, &table);
		c = sn_pipeline_clock_ns(f.pl);
		rel = stats0(&f).released_packets;
		lo = RTE_MIN(RTE_MIN(due_by((int64_t)(c - t0) - (int64_t)(GRAN_NS + SLACK_NS), pp, 0),
				     due_by((int64_t)(c - t0) - (int64_t)(GRAN_NS + SLACK_NS), pr,
					    burst / len)), (uint64_t)n);
		hi = RTE_MIN(RTE_MIN(due_by((int64_t)(c - t0 + SLACK_NS), pp, 0),
				     due_by((int64_t)(c - t0 + SLACK_NS), pr, burst / len)),
			     (uint64_t)n);
		samples++;
		if (rel < lo || rel > hi) {
			if (bad++ < 5)
				fprintf(stderr, "FAIL peak: at +%.3f ms released %" PRIu64
					" (due %" PRIu64 "..%" PRIu64 ")\n", (double)(c - t0) / MS,
					rel, lo, hi);
			failures++;
		}
	} while (rel < n && c < t0 + 100 * MS);
	CHECK(rel == n);
	/* the last frame is the rate's 30th: t0 + 19 frame times */
	CHECK(c + SLACK_NS >= t0 + (n - 1 - burst / len) * pr);
	printf("peak: 10 Mbit/s, burst %u B, peak 40 Mbit/s: %u x %u B out in %.3f ms "
	       "(rate alone %.3f ms), %" PRIu64 " samples\n", burst, n, len,
	       (double)(c - t0) / MS, (double)((n - 1 - burst / len) * pr) / MS, samples);
	fix_close(&f);
}

/* ---- inbound limit ------------------------------------------------------- */

/* vm2 with an inbound limit of 10 Mbit/s (no burst): 60 frames of 1000 B
 * from vm3, which has no policy entry, leave at 800 us each from the
 * submit (the first at once); those beyond the 40.96 ms horizon are
 * dropped and counted on vm2's inbound. vm0, without an inbound limit,
 * is not limited. */
static void inbound(void)
{
	const uint64_t rate = 10000000;
	const uint32_t len = 1000;
	const unsigned n = 60;
	const uint64_t pr = frame_ns(rate, len);
	struct sn_pipeline_port_stats s;
	uint64_t t0, c, kept, rel = 0, bad = 0;
	struct fix f;

	if (fix_open_json(&f, "{\"ports\": {\"vm2\": {\"inbound\": {\"rate_bps\": 10000000}}}}"))
		return;
	CHECK(sn_pipeline_in_limited(f.pl, &ports[2]) && !sn_pipeline_in_limited(f.pl, &ports[0]));
	CHECK(sn_pipeline_shaped(f.pl, &ports[2]) && !sn_pipeline_shaped(f.pl, &ports[3]));
	spin_ns(2 * MS);
	t0 = submit_to(&f, &ports[3], &ports[2], n, len);
	CHECK(sn_pipeline_port_stats(f.pl, &ports[2], &s) == 0);
	kept = sn_pipeline_held(f.pl);
	CHECK(s.in_rate_bps == rate && s.in_offered_packets == n &&
	      s.in_offered_bytes == (uint64_t)n * len);
	/* frame i (from 0) is due at t0 + i pr: those within the horizon of
	 * the wheel's front (at t0, possibly a slot behind) are kept */
	CHECK(kept + 1 >= (HORIZON - 2 * GRAN_NS) / pr && kept + 1 <= HORIZON / pr + 1);
	CHECK(s.in_horizon == n - kept - 1);   /* and one left at once */
	do {
		uint64_t lo, hi;

		spin_ns(200 * US);
		sn_pipeline_run(f.pl, &table);
		sn_pipeline_flush(f.pl);
		c = sn_pipeline_clock_ns(f.pl);
		rel = (kept + 1) - sn_pipeline_held(f.pl);
		lo = RTE_MIN(due_by((int64_t)(c - t0) - (int64_t)(GRAN_NS + SLACK_NS), pr, 0), kept + 1);
		hi = RTE_MIN(due_by((int64_t)(c - t0 + SLACK_NS), pr, 0), kept + 1);
		if (rel < lo || rel > hi) {
			if (bad++ < 5)
				fprintf(stderr, "FAIL inbound: at +%.3f ms released %" PRIu64
					" (due %" PRIu64 "..%" PRIu64 ")\n", (double)(c - t0) / MS,
					rel, lo, hi);
			failures++;
		}
	} while (rel < kept + 1 && c < t0 + 200 * MS);
	CHECK(rel == kept + 1);
	printf("inbound 10 Mbit/s to vm2 from an unshaped port: %u x %u B, %" PRIu64
	       " released in %.3f ms, %" PRIu64 " horizon drops\n", n, len, rel,
	       (double)(c - t0) / MS, s.in_horizon);
	fix_close(&f);
}

/* Frames queued for an inbound limit keep their place when policies
 * change. (1) vm0 (100 Mbit/s of its own) sends 20 frames of 1000 B to
 * vm2 (inbound 10 Mbit/s: one each 800 us); vm0's rate changes, which
 * lays its queued frames again from now at vm0's new rate: they must
 * still leave no faster than vm2's limit. (2) vm2's inbound rate is raised
 * while 3 frames wait on it (1 Mbit/s: 8 ms each): a frame submitted
 * after the change goes after them, not before. */
static void inbound_change(void)
{
	static struct sn_policy p2, p3;
	const uint64_t pr = frame_ns(10000000, 1000);
	uint64_t t0, c, rel, held0, bad = 0;
	struct fix f;

	if (fix_open_json(&f, "{\"ports\": {\"vm0\": {\"rate_bps\": 100000000}, "
			  "\"vm2\": {\"inbound\": {\"rate_bps\": 10000000}}}}"))
		return;
	spin_ns(2 * MS);
	t0 = submit_to(&f, &ports[0], &ports[2], 20, 1000);
	held0 = sn_pipeline_held(f.pl);
	sn_test_policy_parse("{\"ports\": {\"vm0\": {\"rate_bps\": 200000000}, "
			     "\"vm2\": {\"inbound\": {\"rate_bps\": 10000000}}}}", &p2);
	CHECK(sn_policy_publish(f.st, &p2) == 0);
	do {
		spin_ns(100 * US);
		sn_pipeline_run(f.pl, &table);
		sn_pipeline_flush(f.pl);
		c = sn_pipeline_clock_ns(f.pl);
		rel = 20 - sn_pipeline_held(f.pl);
		if (rel > due_by((int64_t)(c - t0 + SLACK_NS), pr, 0) && bad++ < 5) {
			fprintf(stderr, "FAIL inbound restamp: at +%.3f ms released %" PRIu64
				" (due at most %" PRIu64 ")\n", (double)(c - t0) / MS, rel,
				due_by((int64_t)(c - t0 + SLACK_NS), pr, 0));
			failures++;
		}
	} while (rel < 20 && c < t0 + 100 * MS);
	CHECK(held0 == 19 && rel == 20);
	fix_close(&f);

	if (fix_open_json(&f, "{\"ports\": {\"vm2\": {\"inbound\": {\"rate_bps\": 1000000}}}}"))
		return;
	spin_ns(10 * MS);
	t0 = submit_to(&f, &ports[3], &ports[2], 3, 1000);   /* t0, +8, +16 ms */
	sn_test_policy_parse("{\"ports\": {\"vm2\": {\"inbound\": {\"rate_bps\": 10000000}}}}", &p3);
	CHECK(sn_policy_publish(f.st, &p3) == 0);
	sn_pipeline_run(f.pl, &table);
	submit_to(&f, &ports[3], &ports[2], 1, 1000);
	while ((c = sn_pipeline_clock_ns(f.pl)) < t0 + 6 * MS) {
		spin_ns(100 * US);
		sn_pipeline_run(f.pl, &table);
		sn_pipeline_flush(f.pl);
	}
	/* nothing but the first frame out before the second is due */
	printf("inbound change: %" PRIu64 " of 4 frames held %.3f ms after the submit\n",
	       sn_pipeline_held(f.pl), (double)(c - t0) / MS);
	CHECK(sn_pipeline_held(f.pl) == 3);
	fix_close(&f);
}

/* ---- live policy apply --------------------------------------------------- */

static const struct live_case {
	uint64_t rate0, rate1;
	uint32_t len;
	unsigned n;        /* n frames at either rate fit the horizon */
} live_cases[] = {
	{ 4000000, 100000000, 1000, 16 },   /* 2 ms -> 80 us a frame */
	{ 100000000, 4000000, 1000, 16 },   /* 80 us -> 2 ms a frame */
};

static void live_apply(const struct live_case *lc)
{
	const uint64_t p1 = frame_ns(lc->rate1, lc->len);
	struct sn_pipeline_port_stats s;
	struct sn_policy p;
	struct fix f;
	uint64_t t0, t1, late, rel0, held1;
	unsigned samples;

	if (fix_open(&f, lc->rate0))
		return;
	t0 = submit(&f, lc->n, lc->len, &late);
	pol_of(lc->rate1, &p);
	CHECK(sn_policy_publish(f.st, &p) == 0);
	/* The apply: every queued frame of vm0 is laid again on a chain of
	 * the new rate starting at this run's clock t1, before it extracts. */
	sn_pipeline_run(f.pl, &table);
	t1 = sn_pipeline_clock_ns(f.pl);
	s = stats0(&f);
	rel0 = s.released_packets;
	held1 = sn_pipeline_held(f.pl);
	CHECK(s.rate_bps == lc->rate1);
	/* none by the apply's run: only fast-path frames at submit */
	CHECK(rel0 <= (late - chain_start(&f, t0, frame_ns(lc->rate0, lc->len))) /
		      frame_ns(lc->rate0, lc->len));
	CHECK(held1 == lc->n - rel0);
	CHECK(s.drop[SN_PL_DROP_HORIZON] == 0);
	samples = follow(&f, t1, p1, (unsigned)held1, rel0, lc->len,
			 RTE_MAX(p1 / 3, 20 * US), "live apply");
	s = stats0(&f);
	CHECK(s.released_packets == lc->n && s.drop[SN_PL_DROP_DST_GONE] == lc->n);
	printf("live apply %3" PRIu64 " -> %3" PRIu64 " Mbit/s: %" PRIu64 " queued frames out "
	       "%6.3f ms after the apply (due %6.3f ms; old stamps to %6.3f ms after submit, "
	       "apply at %.3f ms), %u samples\n",
	       lc->rate0 / 1000000, lc->rate1 / 1000000, held1,
	       (double)(sn_pipeline_clock_ns(f.pl) - t1) / MS, (double)(held1 * p1) / MS,
	       (double)(lc->n * frame_ns(lc->rate0, lc->len)) / MS, (double)(t1 - t0) / MS,
	       samples);
	fix_close(&f);
}

/* ---- drain ---------------------------------------------------------------- */

static void drain(void)
{
	const unsigned n = 10;   /* at 4 Mbit/s x 1000 B: 20 ms, all queued */
	struct sn_pipeline_port_stats s;
	struct fix f;

	if (fix_open(&f, 4000000))
		return;
	submit(&f, n, 1000, NULL);
	CHECK(sn_pipeline_held(f.pl) == n);
	CHECK(rte_mempool_avail_count(mp) == avail0 - n);
	sn_pipeline_drain(f.pl);
	s = stats0(&f);
	CHECK(sn_pipeline_held(f.pl) == 0 && sn_pipeline_src_held(f.pl, &ports[0]) == 0);
	CHECK(s.drop[SN_PL_DROP_SRC_STOP] == n && s.wheel_depth == 0 && s.released_packets == 0);
	CHECK(rte_mempool_avail_count(mp) == avail0);
	printf("drain: %u held frames freed (src_stopped %" PRIu64 "), pool %u/%u free\n", n,
	       s.drop[SN_PL_DROP_SRC_STOP], rte_mempool_avail_count(mp), avail0);
	fix_close(&f);
}

/* ---- wheel quota ---------------------------------------------------------- */

/* vm0 with a wheel quota of 6 nodes submits 10 frames that all fit the
 * horizon: 6 are queued, 4 dropped as quota_wheel (no horizon drop), and
 * the room a backpressured guest gets falls from 6 to 0; the queued ones
 * leave at the rate. */
static void wheel_quota(void)
{
	const uint64_t rate = 4000000;   /* 2 ms a 1000-byte frame */
	const uint32_t len = 1000;
	const unsigned n = 10, q = 6;
	const uint64_t p = frame_ns(rate, len);
	struct sn_pipeline_port_stats s;
	uint16_t room0, room1;
	struct fix f;
	uint64_t t0;

	if (fix_open(&f, rate))
		return;
	ports[0].quota.wheel = q;
	room0 = sn_pipeline_src_room(f.pl, &ports[0], 32);
	t0 = submit(&f, n, len, NULL);
	room1 = sn_pipeline_src_room(f.pl, &ports[0], 32);
	s = stats0(&f);
	printf("wheel quota %u: %u offered, %" PRIu64 " queued, %" PRIu64 " quota_wheel, %" PRIu64
	       " horizon; room %u -> %u\n", q, n, s.wheel_depth, s.drop[SN_PL_DROP_QUOTA_WHEEL],
	       s.drop[SN_PL_DROP_HORIZON], room0, room1);
	CHECK(s.offered_packets == n && s.wheel_depth == q && sn_pipeline_held(f.pl) == q);
	CHECK(s.drop[SN_PL_DROP_QUOTA_WHEEL] == n - q && s.drop[SN_PL_DROP_HORIZON] == 0);
	CHECK(room0 == q && room1 == 0);
	CHECK(rte_mempool_avail_count(mp) == avail0 - q);
	follow(&f, chain_start(&f, t0, p), p, q, 0, len, 2 * MS, "wheel quota");
	s = stats0(&f);
	CHECK(s.drop[SN_PL_DROP_DST_GONE] == q && s.wheel_depth == 0);
	CHECK(sn_pipeline_src_room(f.pl, &ports[0], 32) > 0);
	fix_close(&f);
	CHECK(sn_pipeline_wheel_quota_auto(16383, 65, 32) == 16383 - 64 * 64);
	CHECK(sn_pipeline_wheel_quota_auto(16383, 513, 32) == 16383 / 513);
	CHECK(sn_pipeline_wheel_quota_auto(16383, 1, 32) == 16383);
}

/* vm0's frames all match its one class "all", paced at 4 Mbit/s; with a
 * wheel quota of 6 nodes, 4 of 10 frames are quota_wheel drops, counted
 * on the port and on the class alike. */
static void wheel_quota_class(void)
{
	static struct sn_policy p;
	const unsigned n = 10, q = 6;
	struct sn_classify_class_stats cs;
	struct sn_pipeline_port_stats s;
	struct fix f;

	if (fix_open(&f, 4000000))
		return;
	sn_test_policy_parse("{\"ports\": {\"vm0\": {\"classes\": [{\"name\": \"all\", "
			     "\"rate_bps\": 4000000, \"scope\": \"class\"}]}}}", &p);
	CHECK(sn_policy_publish(f.st, &p) == 0);
	sn_pipeline_run(f.pl, &table);
	ports[0].quota.wheel = q;
	submit_ipv4 = true;
	submit(&f, n, 1000, NULL);
	submit_ipv4 = false;
	s = stats0(&f);
	CHECK(sn_classify_class_stats(sn_pipeline_classify(f.pl), 0, 0, &cs) == 0);
	printf("wheel quota %u, class \"all\": %u offered, class offered %" PRIu64
	       ", quota_wheel %" PRIu64 " on the port, %" PRIu64 " on the class\n", q, n,
	       cs.offered_packets, s.drop[SN_PL_DROP_QUOTA_WHEEL],
	       cs.drop[SN_CL_DROP_QUOTA_WHEEL]);
	/* The first frame is due 2 ms after the run's clock: a submit that
	 * ran that late released it at once (the fast path), not a drop. */
	CHECK(s.released_packets <= 1);
	CHECK(cs.offered_packets == n && s.wheel_depth == q);
	CHECK(s.drop[SN_PL_DROP_QUOTA_WHEEL] == n - q - s.released_packets);
	CHECK(cs.drop[SN_CL_DROP_QUOTA_WHEEL] == n - q - s.released_packets);
	CHECK(cs.drop[SN_CL_DROP_HORIZON] == 0 && cs.drop[SN_CL_DROP_POOL] == 0);
	/* the queued ones leave at the class's rate (2 ms each) */
	for (uint64_t end = mono_ns() + 500 * MS; sn_pipeline_held(f.pl) && mono_ns() < end;)
		sn_pipeline_run(f.pl, &table);
	CHECK(sn_pipeline_held(f.pl) == 0);
	fix_close(&f);
}

/* Two ports at their auto wheel quota cannot take a third's reserve. A
 * node pool of 2 (S - 1) R nodes, S port slots with a reserve of R = 2
 * bursts each, gives every slot a quota of (S - 1) R, so two quotas are
 * the whole pool. vm0 then vm2 submit more than their quota: together
 * they hold at most the pool less the S - 2 other reserves (vm0 takes the
 * shared part, vm2 gets its reserve), and vm3 still queues its reserve
 * without a quota_wheel drop. 2 ms frames on a 655 ms wheel: the
 * horizon holds every one. */
static void wheel_reserve(void)
{
	const unsigned burst = 1, slots = sn_config_port_slots;
	const uint32_t r = sn_pipeline_wheel_reserve(UINT32_MAX, slots, burst);
	const uint32_t pool = 2 * (slots - 1) * r;
	const uint32_t q = sn_pipeline_wheel_quota_auto(pool, slots, burst);
	struct sn_pipeline_config cfg = fix_cfg;
	struct sn_pipeline_port_stats a, b, c;
	static struct sn_policy p;
	struct fix f;

	cfg.pool_nodes = pool;
	cfg.slots = 65536;
	cfg.burst = burst;
	CHECK(r == 2 * burst && q == (slots - 1) * r && q + r <= 256);
	CHECK(sn_pipeline_wheel_reserve(pool, slots, burst) == r);
	CHECK(sn_pipeline_wheel_reserve(10, 4, 32) == 2);
	if (fix_open_cfg(&f, 4000000, &cfg))
		return;
	sn_test_policy_parse("{\"ports\": {"
			     "\"vm0\": {\"rate_bps\": 4000000, \"burst_bytes\": 0, \"weight\": 1}, "
			     "\"vm2\": {\"rate_bps\": 4000000, \"burst_bytes\": 0, \"weight\": 1}, "
			     "\"vm3\": {\"rate_bps\": 4000000, \"burst_bytes\": 0, \"weight\": 1}}}",
			     &p);
	CHECK(sn_policy_publish(f.st, &p) == 0);
	sn_pipeline_run(f.pl, &table);
	ports[0].quota.wheel = ports[2].quota.wheel = ports[3].quota.wheel = q;
	submit_from(&f, &ports[0], q + r, 1000, NULL);
	submit_from(&f, &ports[2], q + r, 1000, NULL);
	submit_from(&f, &ports[3], r, 1000, NULL);
	CHECK(sn_pipeline_port_stats(f.pl, &ports[0], &a) == 0);
	CHECK(sn_pipeline_port_stats(f.pl, &ports[2], &b) == 0);
	CHECK(sn_pipeline_port_stats(f.pl, &ports[3], &c) == 0);
	printf("wheel reserve %u of pool %u, quota %u: vm0 %" PRIu64 ", vm2 %" PRIu64
	       ", vm3 %" PRIu64 " queued; quota_wheel %" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
	       r, pool, q, a.wheel_depth, b.wheel_depth, c.wheel_depth,
	       a.drop[SN_PL_DROP_QUOTA_WHEEL], b.drop[SN_PL_DROP_QUOTA_WHEEL],
	       c.drop[SN_PL_DROP_QUOTA_WHEEL]);
	CHECK(a.wheel_depth <= q && b.wheel_depth <= q);
	CHECK(a.wheel_depth + b.wheel_depth <= pool - (slots - 2) * r);
	CHECK(b.drop[SN_PL_DROP_QUOTA_WHEEL] > 0);
	/* vm3's frames queue (its first one may be due at once: fast path) */
	CHECK(c.offered_packets == r && c.drop[SN_PL_DROP_QUOTA_WHEEL] == 0);
	CHECK(c.wheel_depth + c.released_packets == r);
	CHECK(c.drop[SN_PL_DROP_HORIZON] == 0 && a.drop[SN_PL_DROP_HORIZON] == 0);
	sn_pipeline_drain(f.pl);
	CHECK(sn_pipeline_held(f.pl) == 0);
	fix_close(&f);
}

/* ---- EAL ------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static int eal_start(void)
{
	static char prefix[64], lcores[32];
	char *argv[] = { "test_pipeline", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry",
			 "--file-prefix", prefix, "--lcores", lcores, "--log-level=error", NULL };
	cpu_set_t cpus;
	int cpu = 0;

	/* The main lcore on a CPU this process may run on. */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
		while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &cpus))
			cpu++;
	snprintf(prefix, sizeof(prefix), "sn-ut-%d", (int)getpid());
	snprintf(lcores, sizeof(lcores), "0@%d", cpu);
	if (rte_eal_init((int)RTE_DIM(argv) - 1, argv) < 0) {
		fprintf(stderr, "FAIL rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	return 0;
}

int main(void)
{
	char runtime_dir[PATH_MAX];

	if (eal_start())
		return 1;
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	mp = rte_pktmbuf_pool_create("sn_ut_pl", NB_MBUF, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				     SOCKET_ID_ANY);
	CHECK(mp != NULL);
	if (mp) {
		avail0 = rte_mempool_avail_count(mp);
		CHECK(avail0 == NB_MBUF);
		for (size_t i = 0; i < RTE_DIM(rel_cases); i++)
			release_at_rate(&rel_cases[i]);
		horizon();
		room_clamp();
		peak();
		inbound();
		inbound_change();
		for (size_t i = 0; i < RTE_DIM(live_cases); i++)
			live_apply(&live_cases[i]);
		drain();
		wheel_quota();
		wheel_quota_class();
		wheel_reserve();
		rte_mempool_free(mp);
	}
	rte_eal_cleanup();
	nftw(runtime_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	return sn_check_exit("test_pipeline");
}
