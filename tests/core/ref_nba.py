# SPDX-License-Identifier: BSD-3-Clause
"""Independent Python model of the NIC-level bandwidth allocator (sn_nba).

Follows the allocation rule stated in backend/core/sn_nba.h (Carousel
§5.3), but computes the max-min split differently from the C code: the C
code sorts demands and fills progressively; this model finds the water
level by bisection on L in sum(min(d_i, L)) = C, and checks the result
against the max-min definition itself (max_min_violations).

Also: helpers to run `sn-trace nba` (format in tools/trace_nba.c).
"""
import json
import math
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

DEF_PERIOD = 100_000_000
DEF_HEADROOM_PPM = 10_000
DEF_SAT_PPM = 10_000
DEF_GROWTH_PPM = 10_000
WINDOW = 4           # the rate: over the last 4 measured intervals
RESERVE = 0.5        # backlog target: this many periods of the rate
GAIN = 2             # a backlog off its target is cleared over this many periods
DEF_STALE = 10       # periods without a report: the core is gone (idle)


def sn_trace_bin() -> Path:
    build = Path(os.environ.get("SN_BUILD_DIR", REPO / "build")).resolve()
    return build / "backend" / "core" / "sn-trace"


def run(lines, timeout=60):
    r = subprocess.run([str(sn_trace_bin()), "nba"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"sn-trace nba exit {r.returncode}: {r.stderr}")
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def water_level(demands, capacity):
    """Max-min split of `capacity` over `demands` (math.inf = unbounded).
    Returns the allocations. Surplus when every demand fits is spread
    equally (sn_nba.h rule 4)."""
    k = len(demands)
    if k == 0:
        return []
    finite = [d for d in demands if d != math.inf]
    if len(finite) == k and sum(finite) <= capacity:
        extra = (capacity - sum(finite)) / k
        return [d + extra for d in demands]
    lo, hi = 0.0, capacity
    for _ in range(200):                       # bisection on the level
        mid = (lo + hi) / 2
        if sum(min(d, mid) for d in demands) > capacity:
            hi = mid
        else:
            lo = mid
    return [min(d, lo) for d in demands]


def max_min_violations(demands, alloc, capacity, tol):
    """Check the definition: feasible, and no core can get more without
    taking from a core that has no more than it (bottleneck property)."""
    bad = []
    if sum(alloc) > capacity + tol * len(alloc):
        bad.append(f"sum {sum(alloc)} > capacity {capacity}")
    for i, (d, a) in enumerate(zip(demands, alloc)):
        if a > d + tol and sum(1 for x in demands if x != math.inf) == len(demands) \
                and sum(demands) > capacity:
            bad.append(f"core {i} gets {a} above demand {d}")
        if a < d - tol:
            for j, b in enumerate(alloc):
                if b > a + tol:
                    bad.append(f"core {i} below demand with {a} while core {j} has {b}")
                    break
    return bad


class Model:
    """The allocator, re-derived from the rules in sn_nba.h."""

    def __init__(self, cores, aggregate, period=0, stale=0, headroom_ppm=None,
                 saturation_ppm=None, growth_ppm=None):
        self.n = cores
        self.agg = aggregate
        self.period = period or DEF_PERIOD
        self.stale = stale or DEF_STALE * self.period
        self.headroom = (DEF_HEADROOM_PPM if headroom_ppm is None else headroom_ppm) / 1e6
        if saturation_ppm == "off":
            self.sat = None
            self.growth = 1.0
        else:
            self.sat = (saturation_ppm or DEF_SAT_PPM) / 1e6
            # growth margin of every active core (none with saturation off)
            self.growth = 1 + (growth_ppm or DEF_GROWTH_PPM) / 1e6
        self.grant = [aggregate // cores] * cores
        self.latest = [None] * cores          # (bytes, ts, backlog) last reported
        self.hist = [[] for _ in range(cores)]  # consumed (bytes, ts), newest last
        self.rate = [0.0] * cores             # r_i: arrival rate over the window
        self.demand = [0.0] * cores           # d_i = r_i + (q_i - reserve) / (GAIN periods)
        self.state = ["idle"] * cores
        self.last_update = None
        self.dirty = False

    def report(self, core, nbytes, ts, backlog=0):
        self.latest[core] = (nbytes, ts, backlog)

    def set_aggregate(self, agg):
        self.agg = agg
        self.dirty = True

    def _demand(self, r, q):
        T = float(self.period) / 1e9
        return r + (float(q) - RESERVE * r * T) / (GAIN * T)

    def _estimate(self, i, now):
        if self.latest[i] is None:
            self.rate[i] = self.demand[i] = 0.0
            self.hist[i] = []
            return
        b, ts, q = self.latest[i]
        h = self.hist[i]
        if not h:
            h.append((b, ts))
            self.rate[i] = float(self.grant[i])   # first report: its grant
        elif ts > h[-1][1]:
            h.append((b, ts))
            del h[:-(WINDOW + 1)]
            ob, ots = h[0]
            self.rate[i] = float((b - ob) % (1 << 64)) * 1e9 / float(ts - ots)
        # no new report: the core did not run; its estimate stands
        self.demand[i] = self._demand(self.rate[i], q)
        if now > ts and now - ts > self.stale:
            self.rate[i] = self.demand[i] = 0.0

    def update(self, now):
        if self.last_update is not None and not self.dirty and now < self.last_update + self.period:
            return False
        self.last_update = now
        self.dirty = False
        A = float(self.agg)
        active, dem = [], []
        for i in range(self.n):
            self._estimate(i, now)
            d = self.demand[i]
            if d <= 0:
                self.state[i] = "idle"
                continue
            if self.sat is not None and d > self.grant[i] * (1 + self.sat):
                self.state[i] = "saturated"       # informational: the grant binds
            else:
                self.state[i] = "active"
            dem.append(d * self.growth)
            active.append(i)
        alloc = [0.0] * self.n
        if not active:
            alloc = [A / self.n] * self.n
        else:
            h = min(A * self.headroom, A / self.n)
            for i in range(self.n):
                if self.state[i] == "idle":
                    alloc[i] = h
            n_idle = self.n - len(active)
            for i, a in zip(active, water_level(dem, A - h * n_idle)):
                alloc[i] = a
        self.grant = [max(0, min(self.agg, math.floor(a))) for a in alloc]
        self.last_alloc = alloc
        self.last_active = active
        self.last_dem = dem
        return True
