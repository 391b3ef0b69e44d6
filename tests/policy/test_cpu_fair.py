# SPDX-License-Identifier: BSD-3-Clause
"""CPU fair dropping in the worker (Addanki et al., fair packet dropping, §III-E:
Algorithm 1 on CPU time + Algorithm 2's per-burst cost apportioning;
config datapath.cpu_fair_pct, backend/daemon/classify/sn_cpufair.h).

Two VM ports send to the uplink as fast as sn-gen can: vm0 1500 B frames
(expensive: two 1500 B copies per frame in the daemon), vm1 64 B frames
(cheap). sn-gen serves its flows round-robin and a full virtio ring
pushes back, so both offer the same frame rate: the worker's CPU is the
bottleneck (its polled bursts come back full).

 - cpu_fair_pct 0 (tail drop: the guests' rings fill): the worker takes
   the same number of frames from each port (packet-fair), so the
   expensive port gets its cost ratio more CPU (reported).
 - cpu_fair_pct 100: frames of the flow whose virtual queue of CPU time
   is above θ are dropped right after the dequeue. Asserted: the
   expensive port is the one dropped (some of its frames, a larger share
   than of the cheap one's) and the cheap one hardly (< 5 %), so the
   cheap port forwards at least as many frames (tail drop: within
   0.8-1.25x, asserted too); CPU time per port (Algorithm 2's apportioned
   cost, stats.get ports[].cpu_fair.cpu_ns) is max-min fair: within 50 %
   of equal, or the cheap port stays below its share because one burst
   per queue per poll round bounds what it can take, and then it keeps
   (> 99 %) everything and the expensive one gets the rest. How much of
   the expensive flow must go depends on how short of CPU the worker is
   on the host (over 10 % on a loaded host, 0.45-9.6 % on a fast one), so
   it is not bounded; the printed line reports it.
Per-frame costs on a loaded shared host are noisy, hence the loose bounds
(at load 13: forwarded frames vm1/vm0 1.00 with tail drop, 2.48 with fair
dropping; CPU time vm0/vm1 1.22).

Layout ncore: each worker lcore has its own instance (its own
CPU time, the flows of the queues it owns). Two such pairs, vm0 (1500 B)
+ vm1 (64 B) on worker 0 and vm2 (1500 B) + vm3 (64 B) on worker 1, both
workers and the arbiter on CPU 1 as in test_ncore.py: the same
assertions hold for each pair and each worker's instance drops.

Counter cross-check against an independent source (not "totals == sum of
arbiter.workers[k].cpu_fair", which stats.get computes from one snapshot,
so it could not fail): over the window, the frames
each instance kept (arbiter.workers[k].cpu_fair.kept), the totals' kept
and each port's ports[].cpu_fair.kept equal the frames the switch took
from those ports after the filter (ports[].rx_packets, counted by the
port, not by sn_cpufair), within a few bursts (the counters are read
while the workers run); and the totals' drops equal the ports' dropped.
"""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

pytestmark = pytest.mark.accuracy

# (ports, flows, port_extra, datapath, sn-gen queue pairs) per layout; the
# pairs (expensive, cheap) whose CPU share is asserted
BIG, SMALL = ",size=1500", ",size=64"
LAYOUTS = {
    "1core": (["vm0", "vm1"], [(0, 10**10, BIG), (1, 10**10, SMALL)], {}, {}, 1),
    # ncore transmits on uplink TX queues 0..W (3 pairs, conformance.py);
    # sn-gen sends flow i on TX queue i mod 3: one busy queue per port
    "ncore": (["vm0", "vm1", "vm2", "vm3"],
              [(0, 10**10, BIG), (1, 10**10, SMALL), (2, 10**10, BIG), (3, 10**10, SMALL)],
              {"vm0": {"workers": [0, 0, 0]}, "vm1": {"workers": [0, 0, 0]},
               "vm2": {"workers": [1, 1, 1]}, "vm3": {"workers": [1, 1, 1]}},
              {"layout": "ncore", "workers": 2}, 3),
}
PAIRS = {"1core": [("vm0", "vm1")], "ncore": [("vm0", "vm1"), ("vm2", "vm3")]}   # per worker
SLACK = 256        # frames: counters of other code points read mid-burst


def cf_drops(c):
    return sum(c["drops"].values())


def run(build_dir, pct, layout, window=3.0):
    ports, flows, port_extra, dp, queues = LAYOUTS[layout]
    extra = {"cpu_fair_pct": pct} if pct else {}
    with conf.Schednic(build_dir, ports, {}, 64, 0, flows=flows, port_extra=port_extra,
                       datapath=dp, datapath_extra=extra, queues=queues) as s:
        time.sleep(2.0)
        a, ta = s.stats(), time.monotonic()
        time.sleep(window)
        b, tb = s.stats(), time.monotonic()
        assert s.daemon.poll() is None
    pa = {p["name"]: p for p in a["ports"]}
    pb = {p["name"]: p for p in b["ports"]}
    out = {"cpu_fair": b.get("cpu_fair"),
           "workers": [w.get("cpu_fair") for w in b["arbiter"]["workers"]]}
    if pct:
        # window deltas (frames) for the counter cross-check
        wa = [w["cpu_fair"] for w in a["arbiter"]["workers"]]
        out["d_workers"] = [w["kept"] - v["kept"] for w, v in zip(out["workers"], wa)]
        out["d_total"] = {"kept": b["cpu_fair"]["kept"] - a["cpu_fair"]["kept"],
                          "dropped": cf_drops(b["cpu_fair"]) - cf_drops(a["cpu_fair"])}
    for n in ports:
        d = {"fwd_pps": (pb[n]["rx_packets"] - pa[n]["rx_packets"]) / (tb - ta),
             "rx_n": pb[n]["rx_packets"] - pa[n]["rx_packets"]}
        if pct:
            for k in ("cpu_ns", "kept", "dropped"):
                d[k] = (pb[n]["cpu_fair"][k] - pa[n]["cpu_fair"][k]) / (tb - ta)
                d[k + "_n"] = pb[n]["cpu_fair"][k] - pa[n]["cpu_fair"][k]
        out[n] = d
    return out


def near(x, y):
    return abs(x - y) <= max(SLACK, 0.002 * max(x, y))


def drop_frac(f):
    return f["dropped"] / (f["kept"] + f["dropped"])


def check_counters(fair, layout, pct):
    st = fair["cpu_fair"]
    assert st["budget_pct"] == pct and st["drops"]["fair"] > 0, st
    assert st["drops"]["table_full"] == 0 and st["drops"]["invalid"] == 0, st
    # one instance per worker lcore, each counting its own ports' frames:
    # checked against the ports' own RX counters (see the docstring)
    ws = fair["workers"]
    assert len(ws) == (2 if layout == "ncore" else 1) and all(ws), ws
    assert all(w["drops"]["fair"] > 0 for w in ws), ws     # each worker's instance acts
    ports = [n for pair in PAIRS[layout] for n in pair]
    for k, pair in enumerate(PAIRS[layout]):
        assert near(fair["d_workers"][k], sum(fair[n]["rx_n"] for n in pair)), (k, pair, fair)
    for n in ports:
        assert near(fair[n]["kept_n"], fair[n]["rx_n"]), (n, fair)
    assert near(fair["d_total"]["kept"], sum(fair[n]["rx_n"] for n in ports)), fair
    assert near(fair["d_total"]["dropped"], sum(fair[n]["dropped_n"] for n in ports)), fair


@pytest.mark.parametrize("layout", ["1core", "ncore"])
def test_cpu_fair_drop(build_dir, layout):
    tail = run(build_dir, 0, layout)
    fair = run(build_dir, 100, layout)
    print(f"\n{layout} tail drop: {tail}\nfair (cpu_fair_pct 100): {fair}")
    check_counters(fair, layout, 100)
    for big, small in PAIRS[layout]:
        # tail drop (same run): packet-fair, no CPU fair counters
        t0, t1 = tail[big]["fwd_pps"], tail[small]["fwd_pps"]
        assert 0.8 < t0 / t1 < 1.25, (big, small, tail)

        # cpu_fair_pct 100 (work-conserving: drops only while the worker's
        # CPU is the bottleneck). How much must go depends on how short of
        # CPU the worker is on this host (0.45-9.6 % of the expensive flow
        # on a fast host, over 10 % on a loaded one), so what is asserted
        # is who pays: the expensive flow is the one cut, the
        # cheap one hardly, and CPU time is max-min fair.
        f0, f1 = fair[big], fair[small]
        assert f0["kept"] > 100 and f1["kept"] > 100, fair
        assert f0["dropped"] > 0 and drop_frac(f0) > drop_frac(f1), (big, fair)
        assert drop_frac(f1) < 0.05, (small, fair)
        assert f1["kept"] > 0.97 * f0["kept"], (big, small, fair)   # offered alike
        # max-min fair CPU time: within 50 % of equal, or the port below its
        # share is demand-bound (hardly dropped: it keeps all it could take in
        # one burst per poll round) and the other one gets the rest (CI on
        # 2 cores: vm0/vm1 CPU 1.48 with vm1 dropping 0.2 %)
        lo, hi = sorted((f0, f1), key=lambda f: f["cpu_ns"])
        assert (hi["cpu_ns"] <= 1.5 * lo["cpu_ns"]
                or drop_frac(lo) < 0.01), (big, small, fair)

        print(f"{big}/{small}: forwarded frames cheap/expensive: tail drop {t1 / t0:.2f}, "
              f"fair {f1['kept'] / f0['kept']:.2f} (expensive dropped "
              f"{drop_frac(f0) * 100:.1f} %, cheap {drop_frac(f1) * 100:.1f} %); CPU time "
              f"expensive/cheap with fair dropping {f0['cpu_ns'] / f1['cpu_ns']:.2f}")
    assert tail["cpu_fair"] is None and not any(tail["workers"]), tail
