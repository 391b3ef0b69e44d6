# SPDX-License-Identifier: BSD-3-Clause
"""Reference tests for fair dropping (sn-trace fdrop): the fair
dropping of Addanki et al.

  - Table I of the paper: three Poisson flows at 1 / 0.6 / 0.1 packets per
    packet time on a unit link, buffer 30, θ = 10 packets, per-packet
    updates: fair dropping must give 0.45 / 0.45 / 0.10 within 2 %
    (relative), and tail drop alone the paper's unfair 0.59 / 0.35 / 0.06.
  - Algorithm 1 verdicts equal the paper's loop written literally in
    Python with exact fractions (ref_fdrop.Algorithm1), per packet and in
    batches.
  - Randomized flow mixes (2-10 flows, loads 1.3-4, Poisson and CBR, 64 to
    1500 B, batches of 1-32): every flow's delivered rate within
    0.01 C + (θ + 1500 B)/span of its max-min fair share (the second term
    is the backlog a flow may still hold in the shadow queue when the
    trace ends).
  - CPU sharing (Algorithm 2, §III-E): 3 flows with equal packet rates
    and costs 5 / 3 / 1, adaptive θ: cycle/s shares are max-min fair
    within 0.02 C; with a drop overhead the bottlenecked flows stay equal;
    when Algorithm 1 charges a flat cost, Algorithm 2's correction is what
    restores cycle fairness.
The binary is found via SN_BUILD_DIR (default <repo>/build).
"""
import functools
import random
from collections import Counter

import pytest

import ref_fdrop as ref

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def sn_trace():
    b = ref.sn_trace_bin()
    if not b.exists():
        pytest.fail(f"{b} missing: build sn-trace (set SN_BUILD_DIR to your build dir)")
    return b


# ---- Table I ----------------------------------------------------------------

PKT = 1000                     # bytes; capacity 1e9 B/s -> one packet per us
CAP = 10**9
TABLE1_SPAN = 300_000_000      # 0.3 s = 300k packet times


@functools.lru_cache(maxsize=1)
def table1_trace(seed=1):
    rng = random.Random(seed)
    return tuple(ref.merge(*(ref.poisson(rng, f, rate * 1e6, TABLE1_SPAN, PKT)
                             for f, rate in enumerate((1.0, 0.6, 0.1)))))


def link_shares(res):
    span = res["end_ns"] - res["start_ns"]
    return [f["delivered_units"] / (CAP * span / 1e9) for f in res["flows"]]


def test_table1_fair_drop(sn_trace):
    pk = table1_trace()
    res = ref.run(f"config mode=link capacity={CAP} theta={10 * PKT} buffer=30", pk)
    got = link_shares(res)
    print(f"\nTable I FD (FIFO, θ=10, buffer 30): {' / '.join(f'{x:.4f}' for x in got)}"
          f"  (paper 0.45 / 0.45 / 0.10)")
    for g, want in zip(got, (0.45, 0.45, 0.10)):
        assert abs(g / want - 1) <= 0.02, f"share {g:.4f} vs paper {want}"
    # against max-min of the rates this trace really offered
    span = (res["end_ns"] - res["start_ns"]) / 1e9
    offered = [f["offered_units"] / span for f in res["flows"]]
    for g, mm in zip(got, ref.max_min(offered, CAP)):
        assert abs(g - mm / CAP) <= 0.01 * mm / CAP + 0.001
    assert res["flows"][2]["drop_fair"] == 0          # the 0.1 flow is never cut
    assert sum(f["drop_tail"] for f in res["flows"]) <= 0.001 * len(pk)
    assert res["fdrop"]["active_max"] <= 3


def test_table1_tail_drop_baseline(sn_trace):
    res = ref.run(f"config mode=link capacity={CAP} theta={10 * PKT} buffer=30 fair=0",
                  table1_trace())
    got = link_shares(res)
    print(f"\nTable I TD (FIFO, buffer 30): {' / '.join(f'{x:.4f}' for x in got)}"
          f"  (paper 0.59 / 0.35 / 0.06)")
    for g, want in zip(got, (0.59, 0.35, 0.06)):
        assert abs(g - want) <= 0.02
    assert sum(f["drop_fair"] for f in res["flows"]) == 0


# ---- Algorithm 1 against the literal paper loop -------------------------------

@pytest.mark.parametrize("batch", [1, 4, 16])
@pytest.mark.parametrize("seed", range(3))
def test_algorithm1_matches_literal_model(sn_trace, seed, batch):
    rng = random.Random(100 + seed)
    cap = 10**9
    span = 2_000_000
    flows = [ref.poisson(rng, f, r * 1e6, span, lambda g: g.randint(64, 1500))
             for f, r in enumerate(rng.uniform(0.05, 2.0) for _ in range(5))]
    pk = ref.merge(*flows)
    theta = rng.choice([3000, 8000, 20000])
    res = ref.run(f"config mode=link capacity={cap} theta={theta} batch={batch}", pk)

    model = ref.Algorithm1(cap, theta)
    kept = Counter()
    for i in range(0, len(pk), batch):
        grp = pk[i:i + batch]
        model.advance(grp[-1][0])
        for _, f, ln in grp:
            if model.admit(f, ln):
                kept[f] += 1
    got = {f["flow"]: f["delivered_pkts"] for f in res["flows"]}
    drops = {f["flow"]: f["drop_fair"] for f in res["flows"]}
    assert sum(drops.values()) > 0, "trace too light to exercise dropping"
    assert got == {f: kept[f] for f in got}, (got, dict(kept))


# ---- randomized flow mixes vs max-min ------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_random_mix_max_min(sn_trace, seed):
    cfg, pk, cap, offered, meta = ref.random_mix(seed)
    res = ref.run(cfg, pk)
    span = meta["span_ns"] / 1e9
    got = {f["flow"]: f["delivered_units"] / span for f in res["flows"]}
    allow = 0.01 * cap + (meta["theta"] + 1500) / span
    for f, mm in enumerate(ref.max_min(offered, cap)):
        assert abs(got.get(f, 0) - mm) <= allow, \
            f"flow {f}: {got.get(f, 0) / cap:.4f} C vs max-min {mm / cap:.4f} C ({meta})"
    assert res["fdrop"]["drop_table_full"] == 0


# ---- CPU sharing: Algorithm 1 on cycles + Algorithm 2 ----------------------------

CPU_CAP = 10**9                  # cycles/s: one cycle per ns
COSTS = (500, 300, 100)          # cycles per packet (the paper's 5 / 3 / 1 units)
CPU_SPAN = 20_000_000


@functools.lru_cache(maxsize=4)
def cpu_trace(load, seed=7):
    """Equal packet rates, total cycle demand = load x capacity."""
    rng = random.Random(seed)
    pps = load * CPU_CAP / sum(COSTS)
    return tuple(ref.merge(*(ref.poisson(rng, f, pps, CPU_SPAN, 64, cycles=c)
                             for f, c in enumerate(COSTS))))


def cpu_run(pk, extra=""):
    cfg = (f"config mode=cpu capacity={CPU_CAP} theta=100000 theta_min=2000 "
           f"theta_max=200000 buffer=512 batch=256 {extra}")
    res = ref.run(cfg, pk)
    span = (res["end_ns"] - res["start_ns"]) / 1e9
    offered = [f["offered_pkts"] * c / span for f, c in zip(res["flows"], COSTS)]
    got = [f["delivered_cycles"] / span for f in res["flows"]]
    return res, offered, got


@pytest.mark.parametrize("load", [1.2, 2.0, 4.0])
def test_cpu_max_min_cycles(sn_trace, load):
    res, offered, got = cpu_run(cpu_trace(load), "drop_cost=0")
    mm = ref.max_min(offered, CPU_CAP)
    print(f"\nCPU load {load}: cycle shares {[round(g / CPU_CAP, 4) for g in got]} "
          f"max-min {[round(m / CPU_CAP, 4) for m in mm]}")
    for g, m in zip(got, mm):
        assert abs(g - m) <= 0.02 * CPU_CAP
    assert res["fdrop"]["theta_down"] > 0 and res["fdrop"]["corrections"] > 0


def test_cpu_drop_overhead_stays_fair(sn_trace):
    """Dropped packets cost 0.5 units (50 cycles): capacity left for
    service shrinks, but the two bottlenecked flows stay equal and the
    light flow keeps (nearly) all it offers; tail drop is unfair."""
    pk = cpu_trace(2.0)
    _, offered, fd = cpu_run(pk, "drop_cost=50")
    _, _, td = cpu_run(pk, "drop_cost=50 fair=0")
    print(f"\nCPU load 2, drop cost 0.5: FD {[round(g / CPU_CAP, 4) for g in fd]} "
          f"TD {[round(g / CPU_CAP, 4) for g in td]}")
    assert abs(fd[0] - fd[1]) <= 0.03 * fd[1]
    assert fd[2] >= 0.95 * offered[2]
    assert fd[0] > fd[2]
    assert td[0] > 2.5 * td[2]             # TD: cycles follow cost, 5:1 ideal


def test_cpu_algorithm2_corrects_flat_charge(sn_trace):
    """Algorithm 1 charges every packet a flat 300 cycles; only Algorithm
    2's per-batch apportioning of measured cycles makes the sharing
    cycle-fair. Without it the sharing is packet-fair instead."""
    pk = cpu_trace(2.0)
    res, offered, with2 = cpu_run(pk, "drop_cost=0 charge=300")
    _, _, without = cpu_run(pk, "drop_cost=0 charge=300 account=0")
    mm = ref.max_min(offered, CPU_CAP)
    print(f"\nCPU flat charge: with Alg. 2 {[round(g / CPU_CAP, 4) for g in with2]} "
          f"without {[round(g / CPU_CAP, 4) for g in without]} "
          f"max-min {[round(m / CPU_CAP, 4) for m in mm]}")
    for g, m in zip(with2, mm):
        assert abs(g - m) <= 0.02 * CPU_CAP
    assert max(abs(g - m) for g, m in zip(without, mm)) > 0.1 * CPU_CAP
    assert res["fdrop"]["corrections"] > 0


def test_bad_input_rejected(sn_trace):
    for cfg, pk in (("config mode=link capacity=0 theta=10", []),
                    ("config mode=bogus capacity=1 theta=10", []),
                    ("config mode=link capacity=1 theta=10", [(5, 0, 10), (4, 0, 10)]),
                    ("config mode=link capacity=1 theta=10", [(5, 1 << 21, 10)]),
                    ("config mode=cpu capacity=1 theta=10 buffer=0", [])):
        with pytest.raises(RuntimeError):
            ref.run(cfg, pk)
