# SPDX-License-Identifier: BSD-3-Clause
"""Reference-model tests for the NIC-level bandwidth allocator (sn-trace nba).

Randomized demand sequences (1-16 cores, aggregates from 1 MB/s to
100 GB/s, idle cores, hogs that use their whole grant and report a
backlog, missing and stale reports, off-period update calls, aggregate
changes, growth margins) are run through the C
allocator and, in lock-step, through the independent model in ref_nba.py
(water level found by bisection). For every update:
  - recomputed-or-not, per-core state and demand estimate equal the model;
  - every grant equals the model's max-min solution within rounding
    (2 bytes/s + 1e-9 of the aggregate);
  - grants never sum above the aggregate; idle cores hold exactly the
    headroom min(1 % A, A/n) (or the configured ppm) when any core is active;
  - the grants satisfy the max-min definition on the model's demands.
The binary is found via SN_BUILD_DIR (default <repo>/build).
"""
import math
import random

import pytest

import ref_nba as ref

pytestmark = pytest.mark.unit

MS = 1_000_000


@pytest.fixture(scope="module")
def sn_trace():
    b = ref.sn_trace_bin()
    if not b.exists():
        pytest.fail(f"{b} missing: build sn-trace (set SN_BUILD_DIR to your build dir)")
    return b


def config_line(n, agg, sat=None, headroom=None, period=None, growth=None):
    parts = [f"config cores={n} aggregate={agg}"]
    if growth is not None:
        parts.append(f"growth_ppm={growth}")
    if sat is not None:
        parts.append(f"saturation_ppm={sat}")
    if headroom is not None:
        parts.append(f"headroom_ppm={headroom}")
    if period is not None:
        parts.append(f"period={period}")
    return " ".join(parts)


def check_update(out, m, recomputed, tol):
    assert out["recomputed"] == int(recomputed)
    assert out["state"] == m.state, (out, m.state)
    for c, e in zip(out["demand"], m.demand):
        assert math.isclose(c, e, rel_tol=1e-9, abs_tol=1e-6), (out["demand"], m.demand)
    for i, (g, e) in enumerate(zip(out["grant"], m.grant)):
        assert abs(g - e) <= tol, f"core {i}: grant {g}, model {e} ({out})"
    assert sum(out["grant"]) <= m.agg
    if not recomputed:
        return
    if any(s != "idle" for s in m.state):
        h = math.floor(min(m.agg * m.headroom, m.agg / m.n))
        for g, s in zip(out["grant"], m.state):
            if s == "idle":
                assert abs(g - h) <= 1, f"idle core holds {g}, headroom {h}"
        act = m.last_active
        idle_sum = sum(out["grant"][i] for i in range(m.n) if m.state[i] == "idle")
        cap = m.agg - idle_sum
        alloc = [float(out["grant"][i]) for i in act]
        bad = ref.max_min_violations(m.last_dem, alloc, cap, tol + 1)
        assert not bad, bad
    # work conservation: rounding loses at most a few bytes/s per core
    assert sum(out["grant"]) >= m.agg - 2 * m.n - 1


KNOWN = [
    # name, cores, aggregate, rates (bytes/s), sat, expected grants
    ("all_below_share", 4, 10**9, [100e6, 200e6, 50e6, 150e6], "off",
     [225e6, 325e6, 175e6, 275e6]),
    ("one_hog", 4, 10**9, [100e6, 100e6, 2e9, 100e6], "off",
     [100e6, 100e6, 700e6, 100e6]),
    ("idle_get_headroom", 4, 10**9, [0, 500e6, 0, 800e6], "off",
     [10e6, 490e6, 10e6, 490e6]),
    ("all_idle_equal", 3, 3 * 10**9, [0, 0, 0], "off", [1e9, 1e9, 1e9]),
    ("headroom_capped_by_equal_share", 200, 10**9, [5e9] + [0] * 199, "off",
     [5e6] * 200),
]


@pytest.mark.parametrize("name,n,agg,rates,sat,want", KNOWN, ids=[k[0] for k in KNOWN])
def test_known_cases(sn_trace, name, n, agg, rates, sat, want):
    lines = [config_line(n, agg, sat=sat)]
    lines += [f"report {i} 0 0" for i in range(n)] + ["update 0"]
    # each core holds its reserve (half a period of its rate): demand = rate
    lines += [f"report {i} {int(r / 10)} {100 * MS} {int(r / 20)}" for i, r in enumerate(rates)]
    lines += [f"update {100 * MS}"]
    out = ref.run(lines)[-1]
    for i, (g, w) in enumerate(zip(out["grant"], want)):
        assert abs(g - w) <= 2, f"{name}: core {i} grant {g}, want {w}"
    assert sum(out["grant"]) <= agg


def random_case(rng, seed):
    n = rng.randint(1, 16)
    agg = rng.choice([10**6, 10**8, 10**9, 12_500_000_000, 10**11]) * rng.randint(1, 9)
    sat = rng.choice(["off", None, 20000, 80000])
    headroom = rng.choice([None, None, 0, 50000])
    growth = rng.choice([None, None, 30000, 200000])
    period = 100 * MS
    m = ref.Model(n, agg, period=period, headroom_ppm=headroom,
                  saturation_ppm=sat if sat is not None else None, growth_ppm=growth)
    lines = [config_line(n, agg, sat=sat, headroom=headroom, period=period, growth=growth)]
    expect = []                 # (model snapshot) per update line
    nbytes = [rng.randrange(1 << 64) for _ in range(n)]   # exercises wrap
    kind = [rng.choice(["idle", "steady", "hog", "bursty", "silent"]) for _ in range(n)]
    rate = [rng.uniform(0.01, 1.5) * agg / n for _ in range(n)]
    t = 0
    for rnd in range(14):
        t = (rnd + 1) * period + rng.randrange(0, 20 * MS)
        if rng.random() < 0.15:
            new = max(1, int(agg * rng.uniform(0.5, 2)))
            lines.append(f"aggregate {new}")
            m.set_aggregate(new)
        if rng.random() < 0.2:                      # a core changes behaviour
            i = rng.randrange(n)
            kind[i] = rng.choice(["idle", "steady", "hog", "bursty", "silent"])
        for i in range(n):
            if kind[i] == "silent" and rnd > 2:
                continue                            # stops reporting: stale
            if kind[i] == "bursty" and rng.random() < 0.5:
                continue                            # skips a report
            if kind[i] == "idle":
                r = 0
            elif kind[i] == "hog":
                r = m.grant[i] * rng.uniform(0.97, 1.0)   # uses its whole grant
            else:
                r = rate[i] * rng.uniform(0.8, 1.2)
            ts = t - rng.randrange(0, 5 * MS)
            prev_ts = m.latest[i][1] if m.latest[i] else None
            if prev_ts is not None and ts <= prev_ts:
                continue
            dt = (ts - prev_ts) if prev_ts is not None else period
            nbytes[i] = (nbytes[i] + int(r * dt / 1e9)) % (1 << 64)
            # hogs hold a backlog behind their grant; others now and then
            q = 0
            if kind[i] == "hog" or rng.random() < 0.2:
                q = int(m.grant[i] * rng.uniform(0, 0.5) * period / 1e9)
            if q or rng.random() < 0.5:
                lines.append(f"report {i} {nbytes[i]} {ts} {q}")
            else:
                lines.append(f"report {i} {nbytes[i]} {ts}")
            m.report(i, nbytes[i], ts, q)
        for now in sorted({t, t + rng.randrange(0, period)}):   # second call rarely due
            lines.append(f"update {now}")
            rec = m.update(now)
            expect.append((rec, [s for s in m.state], list(m.demand), list(m.grant),
                           m.agg, getattr(m, "last_active", []), getattr(m, "last_dem", [])))
    return lines, expect, m


class Snap:
    def __init__(self, m, snap):
        (self.rec, self.state, self.demand, self.grant, self.agg,
         self.last_active, self.last_dem) = snap
        self.n, self.headroom = m.n, m.headroom


@pytest.mark.parametrize("seed", range(40))
def test_randomized_vs_model(sn_trace, seed):
    rng = random.Random(seed)
    lines, expect, m = random_case(rng, seed)
    outs = ref.run(lines)
    assert len(outs) == len(expect)
    for out, snap in zip(outs, expect):
        s = Snap(m, snap)
        tol = 2 + 1e-9 * s.agg
        check_update(out, s, s.rec, tol)


def test_backlogged_core_takes_the_rest(sn_trace):
    """A core whose source is back-pressured measures exactly its grant;
    its backlog (80 ms at its grant, 30 ms beyond its reserve of half a
    period) makes it ask for more each period, so it converges to
    everything core 0 (100 MB/s + 1 % growth, holding its reserve) leaves,
    and is reported saturated while its grant binds."""
    lines = [config_line(2, 10**9)]
    lines += ["report 0 0 0", "report 1 0 0", "update 0"]
    b1 = 0
    grants = [5 * 10**8, 5 * 10**8]
    model_grants = []
    m = ref.Model(2, 10**9)
    m.report(0, 0, 0)
    m.report(1, 0, 0)
    m.update(0)
    for r in range(1, 7):
        t = r * 100 * MS
        b1 += grants[1] // 10                      # core 1 uses its grant
        q1 = grants[1] * 8 // 100                  # and holds 80 ms of it queued
        q0 = 5 * 10**6                             # core 0 holds its reserve
        lines += [f"report 0 {r * 10**7} {t} {q0}", f"report 1 {b1} {t} {q1}", f"update {t}"]
        m.report(0, r * 10**7, t, q0)
        m.report(1, b1, t, q1)
        m.update(t)
        grants = m.grant
        model_grants.append(list(m.grant))
    outs = ref.run(lines)
    for o, g in zip(outs[1:], model_grants):
        assert all(abs(a - b) <= 2 for a, b in zip(o["grant"], g)), (o, g)
    out = outs[-1]
    assert out["state"] == ["active", "saturated"]
    assert abs(out["grant"][0] - 101 * 10**6) <= 2          # 100 MB/s + 1 % growth
    assert abs(out["grant"][1] - 899 * 10**6) <= 2
    # it took at most three updates after the first measured one (its
    # backlog beyond the reserve is cleared over two periods)
    assert abs(outs[4]["grant"][1] - 899 * 10**6) <= 2, [o["grant"] for o in outs]


def test_worker_below_its_share_jittered(sn_trace):
    """The ncore case of tests/policy/test_ncore.py in the model: 100 Mbit/s aggregate, worker
    0 wants 28 Mbit/s, worker 1 123, arrivals jittered +-5 % per period,
    each worker queueing what its grant does not let out. C allocator and
    model agree on every update; the split is 28 / 72 (+ margin, jitter and
    the reserve being built) from the fourth period on; the aggregate's
    total over 20 s is within 1 % of its rate and never above it."""
    rng = random.Random(6)
    A, M, T = 12_500_000, 125_000, 100 * MS
    m = ref.Model(2, A)
    lines = [config_line(2, A), "report 0 0 0", "report 1 0 0", "update 0"]
    m.report(0, 0, 0)
    m.report(1, 0, 0)
    m.update(0)
    want, q, off, sent = [28 * M, 123 * M], [0.0, 0.0], [0.0, 0.0], []
    for k in range(1, 201):
        t = k * T
        s = 0.0
        for i in range(2):
            g = m.grant[i] * 0.1
            a = want[i] * 0.1 * (1 + rng.uniform(-0.05, 0.05))
            out_i = min(q[i] + a, g)
            q[i] += a - out_i
            off[i] += a
            s += out_i
            lines.append(f"report {i} {int(off[i])} {t} {int(q[i])}")
            m.report(i, int(off[i]), t, int(q[i]))
        lines.append(f"update {t}")
        m.update(t)
        sent.append((k, s, list(m.grant)))
    outs = ref.run(lines)
    for out, (k, _, g) in zip(outs[1:], sent):
        assert all(abs(a - b) <= 2 for a, b in zip(out["grant"], g)), (k, out, g)
        assert sum(out["grant"]) <= A
        if k >= 4:                             # once its reserve is built
            assert 26 * M <= out["grant"][0] <= 33 * M, (k, out)
    total = sum(s for k, s, _ in sent if k >= 5) / (0.1 * sum(1 for k, _, _ in sent if k >= 5))
    print(f"aggregate total {total / M:.2f} Mbit/s of 100")
    assert 0.99 * A <= total <= A


def test_bad_input_rejected(sn_trace):
    for lines in (["report 0 1 1"],                         # no config
                  ["config cores=0 aggregate=5"],
                  ["config cores=2 aggregate=5", "report 2 1 1"],
                  ["config cores=2 aggregate=5", "update x"],
                  ["config cores=2 aggregate=5 bogus=1"]):
        with pytest.raises(RuntimeError):
            ref.run(lines)


def contention_sim(seed, secs=20, stall_p=0.02, stall_max=30, stalls=(), H=262, ring=256,
                   L=1400, pps=(2500, 11000), A=12_500_000, restamp=True):
    """The ncore case (tests/policy/test_ncore.py, worker below its
    share) on a host where every thread time-shares a CPU, in 1 ms steps,
    driven by the model (equal to the C allocator: the tests above).
    Four threads: source i (a guest / sn-gen: sends pps[i] frames of L
    bytes, catching up after a stall, into a ring of `ring` frames) and
    worker i (when it runs: stamps every frame in its ring at its grant,
    LTS' = max(LTS + L/grant, now), dropped beyond the H ms horizon;
    releases every frame due; reports offered bytes and its backlog
    (LTS - now at the grant) to the NBA; a new grant rescales LTS and the
    queued stamps by old / new from now, as the daemon does: sn_pl_restamp_aggs
    in pipeline/sn_pl_apply.c). Each thread, when running,
    stalls with probability stall_p per ms for 1..stall_max ms; `stalls`
    adds (thread, start ms, length ms). The NBA updates every 100 ms.
    Returns the aggregate's total per 2 s window (Mbit/s), per worker the
    offered / sent Mbit/s and frames dropped, and the states seen for
    worker 0."""
    rng = random.Random(seed)
    m = ref.Model(2, A)
    for i in range(2):
        m.report(i, 0, 0)
    m.update(0)
    off = {k: 0 for k in ("s0", "s1", "w0", "w1")}
    forced = {(k, t0): n for k, t0, n in stalls}
    ringq, gen, lts, gprev = [0, 0], [0, 0], [0.0, 0.0], list(m.grant)
    wheel = [[], []]
    offered, sent, drops = [0, 0], [0, 0], [0, 0]
    snaps, states0 = [], set()
    for t in range(1, secs * 1000 + 1):
        for k in off:
            if (k, t) in forced:
                off[k] = t + forced[(k, t)]
            elif t >= off[k] and rng.random() < stall_p:
                off[k] = t + rng.randint(1, stall_max)
        for i in range(2):
            if t >= off[f"s{i}"]:
                n = max(0, min(pps[i] * t // 1000 - gen[i], ring - ringq[i]))
                ringq[i] += n
                gen[i] += n
            if t < off[f"w{i}"]:
                continue
            g = m.grant[i]                       # adopted when the worker runs
            if restamp and g != gprev[i] and lts[i] > t:
                f = gprev[i] / g
                lts[i] = t + (lts[i] - t) * f
                wheel[i] = [t + (x - t) * f if x > t else x for x in wheel[i]]
                drops[i] += sum(1 for x in wheel[i] if x > t + H)
                wheel[i] = [x for x in wheel[i] if x <= t + H]
                lts[i] = min(lts[i], t + H)
            gprev[i] = g
            for _ in range(ringq[i]):
                offered[i] += L
                nl = max(lts[i] + L * 1000 / g, t)
                if nl > t + H:
                    drops[i] += 1                # not charged to the share
                    continue
                lts[i] = nl
                wheel[i].append(nl)
            ringq[i] = 0
            k = 0
            while k < len(wheel[i]) and wheel[i][k] <= t:
                k += 1
            sent[i] += k * L
            del wheel[i][:k]
            m.report(i, offered[i], t * MS, int(max(0.0, lts[i] - t) * g / 1000))
        if t % 100 == 0:
            m.update(t * MS)
            states0.add(m.state[0])
        if t % 2000 == 0:
            snaps.append(sum(sent))
    tots = [(b - a) * 8 / 2.0 / 1e6 for a, b in zip(snaps, snaps[1:])]
    mbit = lambda v: [x * 8 / secs / 1e6 for x in v]
    return tots, mbit(offered), mbit(sent), drops, states0


@pytest.mark.parametrize("seed", range(3))
def test_worker_below_its_share_under_cpu_contention(seed):
    """Every thread (both sources, both workers) off its CPU for 1-30 ms at
    a time (about a third of the time), and worker 0 once for 300 ms: the
    aggregate's median 2 s total within 1 % of 100 Mbit/s, no window above
    it + 1 %; worker 0 sends what it is offered within 1 % (water-filling:
    28, the rest to worker 1) and is never called idle while descheduled.
    Measured, seeds 0-2: medians 99.99-100.11 (99.66-99.87 without the
    restamping of queued frames on a new grant), worker 0 sent 99.5-99.6 %
    of its offer. The previous daemon (last 100 ms sample, jumps taken at
    once, rate + 1 % with nothing queued, idle after two silent periods,
    no restamping) fails all three: medians 98.8-99.3, worker 0 called
    idle during its stall (1 % headroom) and 870-900 of its frames dropped
    beyond the horizon (98 % of its offer sent). With stalls up to 100 ms
    (threads off about 60 % of the time): 94.5-96.2 (91.6-93.2 without
    restamping; previous daemon 84.3-87.4); what is left is lost while a
    source is off for longer than the reserve."""
    tots, off, snt, drops, states0 = contention_sim(seed, stalls=(("w0", 5000, 300),))
    med = sorted(tots)[len(tots) // 2]
    print(f"seed {seed}: totals {[round(x, 2) for x in tots]}, offered {off}, sent {snt}")
    assert abs(med - 100) < 1, tots
    assert max(tots) < 101, tots
    assert abs(snt[0] - off[0]) < 0.01 * off[0], (off, snt, drops)
    assert abs(snt[1] - (100 - off[0])) < 1.5, (off, snt)
    assert "idle" not in states0, states0
