/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_nba.c — NIC-level Bandwidth Allocator.
 *
 * Follows the NBA of A. Saeed, N. Dukkipati, V. Valancius, V. The Lam,
 * C. Contavalli, A. Vahdat, "Carousel: Scalable Traffic Shaping at End
 * Hosts", ACM SIGCOMM 2017, §5.3. Carousel runs one shaper per core; an
 * aggregate limit whose connections hash to several cores is enforced by
 * splitting it into per-core rates. The NBA receives usage as (byte count,
 * timestamp) pairs from every core's timestamper and periodically
 * ("lazily", ~100 ms, so the datapath never takes a lock) redistributes
 * the aggregate by water-filling: cores using less than their fair share
 * keep what they use, the rest is shared equally among the others
 * (max-min fairness, work conservation), and a core with zero demand
 * still gets 1 % of the aggregate as headroom to ramp up.
 *
 * What the paper leaves open, and the rule used here (sn_nba.h, rule 1):
 *  - Demand is not usage. A core limited by its grant measures usage ==
 *    grant, which says nothing about its real demand, and the split
 *    would freeze. The worker therefore reports, with its byte count, its
 *    backlog: what its share has accepted but not yet released (its
 *    pacing debt). Demand is the arrival rate plus what brings the
 *    backlog to a reserve of half a period of that rate within two
 *    periods. A core whose grant binds keeps a growing backlog and asks
 *    for more every period until the split is max-min; a core below its
 *    share settles with its reserve queued and is granted its rate.
 *  - The reserve. A grant a core does not use is lost to the aggregate,
 *    a grant below its arrivals only delays its frames; where workers
 *    and their sources time-share CPUs, arrivals come in bursts and gaps
 *    of tens of ms. With half a period queued a core keeps sending at its
 *    grant through such a gap, and an over-grant drains the reserve
 *    instead of being lost.
 *  - The rate is measured over the last four intervals between updates:
 *    frames counted a time slice late move bytes between 100 ms samples
 *    (+-40 %), not between 400 ms windows. Growth is not delayed by it:
 *    arrivals that grow queue, and the backlog term raises demand within
 *    a period.
 *  - A core without a new report did not run (a running worker reports
 *    every millisecond): its estimate stands. Only a core silent for
 *    stale_ns (default 10 periods) is idle, so a worker descheduled for
 *    hundreds of ms does not wake up to the 1 % headroom.
 *  - No "usage reached the grant means unbounded demand" flag: with
 *    workers time-sharing a CPU, a core just below its share would trip
 *    it on a few percent of jitter and be handed a split it cannot use.
 *    The margin of an active core is growth_ppm (1 %) of its demand, so
 *    the total stays within 1 % of the aggregate while others are
 *    backlogged.
 *  - When total demand is below the aggregate, the surplus is spread over
 *    the active cores rather than kept back, so a growing core is not
 *    capped at last period's usage.
 *
 * Publication: each core's report is a (bytes, ts, backlog) triple read
 * consistently through a per-slot sequence lock with a single writer (the
 * core). Grants are single 64-bit words, published with one atomic store
 * each. Report slots and grants live on separate cache lines since they
 * have different writers. The contract table is in sn_nba.h.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_nba.h"

#define NBA_DEFAULT_PERIOD_NS    100000000ULL /* Carousel: ~100 ms */
#define NBA_DEFAULT_HEADROOM_PPM 10000u       /* Carousel: 1 % */
#define NBA_DEFAULT_SAT_PPM      10000u
#define NBA_DEFAULT_GROWTH_PPM   10000u
#define NBA_SEQ_RETRIES          1024
#define NBA_WINDOW               4    /* rate: over the last 4 measured intervals */
#define NBA_RESERVE              0.5  /* backlog target: this many periods of the rate */
#define NBA_GAIN                 2.0  /* a backlog off target is cleared over 2 periods */
#define NBA_DEFAULT_STALE        10   /* periods without a report: gone (idle) */

/* Written by the owning core only (seqlock writer), read by the control
 * thread (seqlock reader). */
struct nba_slot {
	_Atomic uint64_t seq;   /* odd while a write is in progress */
	_Atomic uint64_t bytes;
	_Atomic uint64_t ts;
	_Atomic uint64_t backlog;
} SN_CACHE_ALIGNED;
static_assert(sizeof(struct nba_slot) == SN_CACHE_LINE, "one report per line");

/* Written by the control thread, read by the core. */
struct nba_grant {
	_Atomic uint64_t bps;
} SN_CACHE_ALIGNED;
static_assert(sizeof(struct nba_grant) == SN_CACHE_LINE, "one grant per line");

struct nba_key {
	double demand;
	uint32_t core;
};

/* Control-thread private state per core. */
struct nba_ctl {
	/* Reports consumed at the last NBA_WINDOW + 1 updates that brought a
	 * new one: hist[head] is the latest, n_hist how many are valid. */
	uint64_t hist_bytes[NBA_WINDOW + 1];
	uint64_t hist_ts[NBA_WINDOW + 1];
	uint32_t head, n_hist;
	double rate;          /* r_i, bytes/s: over the window */
	uint64_t backlog;     /* q_i, bytes */
	double demand;        /* d_i = r_i + q_i/period, bytes/s */
	enum sn_nba_state state;
};

struct sn_nba {
	/* Read mostly */
	uint32_t n;
	uint64_t period_ns;
	uint64_t stale_ns;
	uint32_t headroom_ppm;
	uint32_t sat_ppm;
	double growth;        /* demand multiplier of active cores */
	struct nba_slot *slots;
	struct nba_grant *grants;

	/* Control thread only */
	uint64_t aggregate;
	uint64_t last_update;
	int updated_once;
	int dirty;
	struct nba_ctl *ctl;
	struct nba_key *order; /* scratch: active cores sorted by demand */
	double *alloc;         /* scratch: real-valued grants */
	uint64_t *gint;        /* scratch: rounded grants */

	/* Any thread reads; control thread writes (release, pairs with the
	 * acquire in sn_nba_epoch). */
	_Atomic uint64_t epoch SN_CACHE_ALIGNED;
};

struct sn_nba *sn_nba_create(const struct sn_nba_cfg *cfg)
{
	struct sn_nba *nba;

	if (!cfg || cfg->n_cores == 0 || cfg->n_cores > SN_NBA_MAX_CORES ||
	    cfg->aggregate_bps == 0 ||
	    (cfg->headroom_ppm > 1000000u) ||
	    (cfg->saturation_ppm != SN_NBA_SAT_OFF && cfg->saturation_ppm >= 1000000u) ||
	    cfg->growth_ppm > 1000000u) {
		errno = EINVAL;
		return NULL;
	}
	nba = aligned_alloc(SN_CACHE_LINE, sizeof(*nba));
	if (!nba)
		goto err_nba;
	memset(nba, 0, sizeof(*nba));
	nba->n = cfg->n_cores;
	nba->period_ns = cfg->period_ns ? cfg->period_ns : NBA_DEFAULT_PERIOD_NS;
	nba->stale_ns = cfg->stale_ns ? cfg->stale_ns : NBA_DEFAULT_STALE * nba->period_ns;
	if (cfg->flags & SN_NBA_F_NO_HEADROOM)
		nba->headroom_ppm = 0;
	else
		nba->headroom_ppm = cfg->headroom_ppm ? cfg->headroom_ppm : NBA_DEFAULT_HEADROOM_PPM;
	nba->sat_ppm = cfg->saturation_ppm ? cfg->saturation_ppm : NBA_DEFAULT_SAT_PPM;
	nba->growth = 1.0;
	if (nba->sat_ppm != SN_NBA_SAT_OFF)
		nba->growth += (cfg->growth_ppm ? cfg->growth_ppm : NBA_DEFAULT_GROWTH_PPM) / 1e6;
	nba->aggregate = cfg->aggregate_bps;

	nba->slots = aligned_alloc(SN_CACHE_LINE, sizeof(*nba->slots) * nba->n);
	if (!nba->slots)
		goto err_slots;
	nba->grants = aligned_alloc(SN_CACHE_LINE, sizeof(*nba->grants) * nba->n);
	if (!nba->grants)
		goto err_grants;
	nba->ctl = calloc(nba->n, sizeof(*nba->ctl));
	if (!nba->ctl)
		goto err_ctl;
	nba->order = calloc(nba->n, sizeof(*nba->order));
	if (!nba->order)
		goto err_order;
	nba->alloc = calloc(nba->n, sizeof(*nba->alloc));
	if (!nba->alloc)
		goto err_alloc;
	nba->gint = calloc(nba->n, sizeof(*nba->gint));
	if (!nba->gint)
		goto err_gint;
	for (uint32_t i = 0; i < nba->n; i++) {
		atomic_init(&nba->slots[i].seq, 0);
		atomic_init(&nba->slots[i].bytes, 0);
		atomic_init(&nba->slots[i].ts, 0);
		atomic_init(&nba->slots[i].backlog, 0);
		atomic_init(&nba->grants[i].bps, nba->aggregate / nba->n);
	}
	atomic_init(&nba->epoch, 0);
	return nba;

err_gint:
	free(nba->alloc);
err_alloc:
	free(nba->order);
err_order:
	free(nba->ctl);
err_ctl:
	free(nba->grants);
err_grants:
	free(nba->slots);
err_slots:
	free(nba);
err_nba:
	errno = ENOMEM;
	return NULL;
}

void sn_nba_free(struct sn_nba *nba)
{
	if (!nba)
		return;
	free(nba->gint);
	free(nba->alloc);
	free(nba->order);
	free(nba->ctl);
	free(nba->grants);
	free(nba->slots);
	free(nba);
}

int sn_nba_report(struct sn_nba *nba, uint32_t core, uint64_t bytes, uint64_t backlog,
		  uint64_t now_ns)
{
	struct nba_slot *s;
	uint64_t seq;

	if (sn_unlikely(core >= nba->n))
		return -EINVAL;
	s = &nba->slots[core];
	/* Single writer: a relaxed read of our own counter is exact. */
	seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
	/* Release data stores: the odd seq is ordered before them; a reader
	 * whose acquire load (read_slot) sees either new value therefore
	 * sees seq >= odd on its second seq load. No fence, so ThreadSanitizer
	 * models it too. */
	atomic_store_explicit(&s->bytes, bytes, memory_order_release);
	atomic_store_explicit(&s->ts, now_ns, memory_order_release);
	atomic_store_explicit(&s->backlog, backlog, memory_order_release);
	/* Release: the data stores happen before the even seq; pairs with the
	 * reader's acquire load of seq in read_slot(). */
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
	return 0;
}

uint64_t sn_nba_grant(const struct sn_nba *nba, uint32_t core)
{
	if (sn_unlikely(core >= nba->n))
		return 0;
	/* Acquire pairs with the release store in publish(). */
	return atomic_load_explicit(&((struct sn_nba *)nba)->grants[core].bps,
				    memory_order_acquire);
}

uint64_t sn_nba_epoch(const struct sn_nba *nba)
{
	/* Acquire pairs with the release increment at the end of recompute():
	 * a reader seeing epoch e sees every grant of that update. */
	return atomic_load_explicit(&((struct sn_nba *)nba)->epoch, memory_order_acquire);
}

/* Seqlock reader. Returns 0 with a consistent pair, -EAGAIN if the writer
 * kept the slot busy for NBA_SEQ_RETRIES attempts (a preempted or dead
 * writer must not hang the control thread). */
static int read_slot(struct nba_slot *s, uint64_t *bytes, uint64_t *ts, uint64_t *backlog)
{
	for (int i = 0; i < NBA_SEQ_RETRIES; i++) {
		/* Acquire pairs with the writer's final release store. */
		uint64_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		/* Acquire pairs with the writer's release data stores and keeps
		 * the second seq load below after them. */
		*bytes = atomic_load_explicit(&s->bytes, memory_order_acquire);
		*ts = atomic_load_explicit(&s->ts, memory_order_acquire);
		*backlog = atomic_load_explicit(&s->backlog, memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == s1)
			return s1 ? 0 : -ENOENT;
	}
	return -EAGAIN;
}

/* d_i (sn_nba.h rule 1): the rate, plus what brings the backlog to its
 * reserve (NBA_RESERVE periods of the rate) over NBA_GAIN periods. */
static double demand_of(const struct sn_nba *nba, double rate, uint64_t backlog)
{
	double T = (double)nba->period_ns / 1e9;

	return rate + ((double)backlog - NBA_RESERVE * rate * T) / (NBA_GAIN * T);
}

static void forget(struct nba_ctl *c)
{
	c->rate = 0;
	c->backlog = 0;
	c->demand = 0;
}

static void estimate(struct sn_nba *nba, uint32_t i, uint64_t now)
{
	struct nba_ctl *c = &nba->ctl[i];
	uint64_t bytes, ts, backlog;
	int rc = read_slot(&nba->slots[i], &bytes, &ts, &backlog);

	if (rc == -ENOENT) {            /* never reported */
		c->n_hist = 0;
		forget(c);
		return;
	}
	if (rc == -EAGAIN)              /* writer busy: keep last estimate */
		return;
	if (c->n_hist == 0) {
		/* First report: no interval yet; the grant it already holds
		 * is its best rate guess until the next report. */
		c->head = 0;
		c->hist_bytes[0] = bytes;
		c->hist_ts[0] = ts;
		c->n_hist = 1;
		c->rate = (double)atomic_load_explicit(&nba->grants[i].bps,
						       memory_order_relaxed);
	} else if (sn_time_after(ts, c->hist_ts[c->head])) {
		uint32_t old;

		c->head = (c->head + 1) % (NBA_WINDOW + 1);
		c->hist_bytes[c->head] = bytes;
		c->hist_ts[c->head] = ts;
		if (c->n_hist < NBA_WINDOW + 1)
			c->n_hist++;
		/* the oldest kept report: up to NBA_WINDOW intervals back */
		old = (c->head + NBA_WINDOW + 1 - (c->n_hist - 1)) % (NBA_WINDOW + 1);
		c->rate = (double)(bytes - c->hist_bytes[old]) * 1e9 /
			  (double)(ts - c->hist_ts[old]);
	}
	/* else: no new report (the core did not run): its estimate stands */
	c->backlog = backlog;
	c->demand = demand_of(nba, c->rate, backlog);
	if (sn_time_after(now, ts) && now - ts > nba->stale_ns)
		forget(c);
}

/* Active cores sorted by demand. */
static int cmp_key(const void *a, const void *b)
{
	const struct nba_key *x = a, *y = b;

	if (x->demand != y->demand)
		return x->demand < y->demand ? -1 : 1;
	return (x->core > y->core) - (x->core < y->core);
}

static void recompute(struct sn_nba *nba, uint64_t now)
{
	const double A = (double)nba->aggregate;
	uint32_t n = nba->n, n_active = 0, n_idle = 0;
	uint64_t *gi = nba->gint, sum = 0;
	uint32_t big = 0;
	double h, C;

	for (uint32_t i = 0; i < n; i++) {
		struct nba_ctl *c = &nba->ctl[i];
		double g = (double)atomic_load_explicit(&nba->grants[i].bps,
							memory_order_relaxed);
		estimate(nba, i, now);
		if (c->demand <= 0) {
			c->state = SN_NBA_IDLE;
			n_idle++;
			continue;
		}
		c->state = SN_NBA_ACTIVE;
		if (nba->sat_ppm != SN_NBA_SAT_OFF &&
		    c->demand > g * (1.0 + nba->sat_ppm / 1e6))
			c->state = SN_NBA_SATURATED;
		nba->order[n_active].demand = c->demand * nba->growth;
		nba->order[n_active].core = i;
		n_active++;
	}

	if (n_active == 0) {
		for (uint32_t i = 0; i < n; i++)
			nba->alloc[i] = A / n;
	} else {
		h = SN_MIN(A * nba->headroom_ppm / 1e6, A / n);
		C = A - h * n_idle;
		for (uint32_t i = 0; i < n; i++)
			nba->alloc[i] = nba->ctl[i].state == SN_NBA_IDLE ? h : 0;
		qsort(nba->order, n_active, sizeof(*nba->order), cmp_key);
		/* Water-filling: raise the level until the capacity is used;
		 * cores below the level keep their demand. */
		double rem = C;
		uint32_t k = n_active, j = 0;
		for (; j < n_active; j++) {
			const struct nba_key *key = &nba->order[j];
			if (key->demand > rem / k)
				break;
			nba->alloc[key->core] = key->demand;
			rem -= key->demand;
			k--;
		}
		if (j < n_active) {
			for (; j < n_active; j++)
				nba->alloc[nba->order[j].core] = rem / k;
		} else if (rem > 0) {
			/* every demand met: spread the surplus */
			for (j = 0; j < n_active; j++)
				nba->alloc[nba->order[j].core] += rem / n_active;
		}
	}

	/* Round down; floating error may still leave the sum one or two
	 * above A: take it back from the largest grant. */
	for (uint32_t i = 0; i < n; i++) {
		double a = nba->alloc[i];
		gi[i] = a <= 0 ? 0 : a >= A ? nba->aggregate : (uint64_t)a;
		sum += gi[i];
		if (gi[i] > gi[big])
			big = i;
	}
	if (sum > nba->aggregate)
		gi[big] -= SN_MIN(gi[big], sum - nba->aggregate);
	for (uint32_t i = 0; i < n; i++)
		/* Release pairs with the acquire load in sn_nba_grant(). */
		atomic_store_explicit(&nba->grants[i].bps, gi[i], memory_order_release);
	/* Release pairs with the acquire load in sn_nba_epoch(). */
	atomic_fetch_add_explicit(&nba->epoch, 1, memory_order_release);
}

int sn_nba_update(struct sn_nba *nba, uint64_t now_ns)
{
	if (nba->updated_once && !nba->dirty &&
	    sn_time_before(now_ns, nba->last_update + nba->period_ns))
		return 0;
	recompute(nba, now_ns);
	nba->last_update = now_ns;
	nba->updated_once = 1;
	nba->dirty = 0;
	return 1;
}

int sn_nba_set_aggregate(struct sn_nba *nba, uint64_t aggregate_bps)
{
	if (aggregate_bps == 0)
		return -EINVAL;
	nba->aggregate = aggregate_bps;
	nba->dirty = 1;
	return 0;
}

int sn_nba_core_stats(const struct sn_nba *nba, uint32_t core, struct sn_nba_core_stats *out)
{
	if (core >= nba->n || !out)
		return -EINVAL;
	out->demand_bps = nba->ctl[core].demand;
	out->backlog_bytes = nba->ctl[core].backlog;
	out->grant_bps = sn_nba_grant(nba, core);
	out->state = nba->ctl[core].state;
	return 0;
}
