/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_nba.h — NIC-level Bandwidth Allocator (Carousel, SIGCOMM 2017, §5.3;
 * see sn_nba.c).
 *
 * One aggregate rate limit whose flows land on several worker cores is
 * split among those cores. Each core periodically publishes its cumulative
 * byte count for the aggregate with the time of the measurement; a control
 * thread turns consecutive reports into a per-core demand rate, computes a
 * water-filling max-min split of the aggregate and publishes one grant per
 * core (bytes per second), lazily, at most once per period (~100 ms).
 *
 * Concurrency contract. Three roles: the owner thread of core slot i (one
 * per slot), the control thread (one per instance), any reader.
 *
 *   call                        caller             mutual exclusion needed
 *   --------------------------  -----------------  ---------------------------
 *   sn_nba_create, sn_nba_free  setup              with every other call
 *   sn_nba_report(core i)       owner of slot i    with other report(i) calls
 *   sn_nba_update               control thread     with update, set_aggregate,
 *   sn_nba_set_aggregate                           core_stats (shared control
 *   sn_nba_core_stats                              state, not atomic)
 *   sn_nba_grant, sn_nba_epoch  any thread         none (one atomic load)
 *
 * report() never blocks and never waits for the control thread; update()
 * never waits for a writer (a slot busy for 1024 reads keeps its last
 * estimate).
 *
 *   writer (release)              reader (acquire)              pairs for
 *   ----------------------------  ----------------------------  -------------
 *   sn_nba_report: seq + 1        read_slot (sn_nba_update):    a consistent
 *     (relaxed), data stores        seq, data, then seq again   (bytes, ts,
 *     (release), seq + 2 (release)  (relaxed): even and equal   backlog)
 *   update: grant store           sn_nba_grant                  one grant
 *   update: epoch increment       sn_nba_epoch                  every grant of
 *     (after all grant stores)                                  that update
 *
 * Allocation rule (what sn_nba_update computes, in this order):
 *  1. demand d_i = r_i + (q_i - R_i) / (2 * period), where r_i = the rate
 *     the core's traffic arrives at its shaper (frames it queued or
 *     dropped included) over a window: bytes reported since the report
 *     consumed NBA_WINDOW (4) updates ago (fewer at first) / time between
 *     the two reports; q_i = the backlog of its latest report (bytes its
 *     share still owes: queued behind its grant); R_i = its reserve, half
 *     a period of r_i. A core below its share settles with half a period
 *     of its traffic queued (its frames wait about half a period in its
 *     wheel); a core whose grant binds asks for more in proportion to
 *     what it could not send (its excess cleared over two periods). No
 *     new report (the core did not run): its previous r_i and q_i stand,
 *     unless the last report is older than stale_ns (default 10 periods:
 *     the core is gone), then d_i = 0. A core's first report gives no
 *     interval yet: its current grant stands in for r_i until the next
 *     one. Never reported: d_i = 0.
 *  2. every active core's demand is raised by growth_ppm (default 1 %;
 *     none with SN_NBA_SAT_OFF, which means plain water-filling of d_i):
 *     a little room to grow before the backlog term has to do it.
 *  3. idle cores (d_i = 0) get headroom h = min(A*headroom_ppm/1e6, A/n)
 *     each, so they can ramp up (Carousel: 1 %).
 *  4. the rest C = A - n_idle*h is split max-min over the active cores:
 *     grant_i = min(d_i, L) with sum = C when demand exceeds C; when it
 *     does not, grant_i = d_i + (C - sum d)/n_active (work conservation).
 *     No active core at all: every core gets A/n.
 *  5. grants are rounded down to whole bytes/s, so their sum is <= A.
 *  State (stats only, does not change the split): SATURATED when the
 *  core's demand d_i exceeds its previous grant by more than
 *  saturation_ppm (the grant was binding), else ACTIVE; SN_NBA_SAT_OFF:
 *  never SATURATED.
 * Before the first update every core holds A/n.
 */
#ifndef SN_NBA_H
#define SN_NBA_H

#include <stdint.h>

#define SN_NBA_MAX_CORES 1024

struct sn_nba_cfg {
	uint32_t n_cores;        /* 1..SN_NBA_MAX_CORES */
	uint64_t aggregate_bps;  /* aggregate limit in BYTES per second, > 0 */
	uint64_t period_ns;      /* lazy update period (0 = default 100 ms) */
	uint64_t stale_ns;       /* report age meaning gone, idle (0 = 10 periods);
				    younger: the previous estimate stands */
	uint32_t headroom_ppm;   /* per idle core, of the aggregate (default 10000 = 1 %) */
	uint32_t saturation_ppm; /* state only: demand > grant*(1 + ppm/1e6) is
				    SATURATED; 0 = default 10000 = 1 %;
				    SN_NBA_SAT_OFF: never SATURATED and no
				    growth margin (plain water-filling) */
	uint32_t growth_ppm;     /* demand margin of every active core
				    (0 = default 10000 = 1 %), <= 1e6 */
	uint32_t flags;          /* SN_NBA_F_* */
};

#define SN_NBA_SAT_OFF      UINT32_MAX
#define SN_NBA_F_NO_HEADROOM 0x1 /* headroom_ppm really 0 (else 0 = default) */

/* Per-core view of the last update (control thread only). */
enum sn_nba_state {
	SN_NBA_IDLE = 0,   /* zero demand: holds the headroom */
	SN_NBA_ACTIVE,     /* measured demand */
	SN_NBA_SATURATED,  /* demand reached its grant: the grant was binding */
};

struct sn_nba_core_stats {
	double demand_bps;         /* estimated demand d_i (rate + backlog/period), bytes/s */
	uint64_t backlog_bytes;    /* q_i: backlog of the latest report used */
	uint64_t grant_bps;        /* current grant */
	enum sn_nba_state state;
};

struct sn_nba;

/* Constructor: NULL + errno (EINVAL bad cfg, ENOMEM). */
struct sn_nba *sn_nba_create(const struct sn_nba_cfg *cfg);
void sn_nba_free(struct sn_nba *nba);

/* Core `core` publishes, measured at now_ns, its cumulative byte count
 * for the aggregate (bytes offered to its share: monotone, wraps modulo
 * 2^64) and its backlog: bytes accepted but not yet due under its grant
 * (0 when its share is not behind). Owner thread of the slot only.
 * -EINVAL for a bad core id. */
int sn_nba_report(struct sn_nba *nba, uint32_t core, uint64_t bytes, uint64_t backlog,
		  uint64_t now_ns);

/* Current grant of `core` in bytes/s (0 for a bad core id). Any thread. */
uint64_t sn_nba_grant(const struct sn_nba *nba, uint32_t core);

/* Grant generation: incremented after every recomputation, so a core can
 * see cheaply that its grant may have changed. Any thread. */
uint64_t sn_nba_epoch(const struct sn_nba *nba);

/* Control thread. Recompute if at least one period elapsed since the last
 * recomputation (or if none happened yet): returns 1 if recomputed, 0 if
 * not due. */
int sn_nba_update(struct sn_nba *nba, uint64_t now_ns);

/* Control thread. New aggregate (> 0, else -EINVAL), used from the next
 * recomputation; sn_nba_update(nba, now) right after applies it. */
int sn_nba_set_aggregate(struct sn_nba *nba, uint64_t aggregate_bps);

/* Control thread. Copy the last update's view of `core`. -EINVAL bad core. */
int sn_nba_core_stats(const struct sn_nba *nba, uint32_t core, struct sn_nba_core_stats *out);

#endif /* SN_NBA_H */
