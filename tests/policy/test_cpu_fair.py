"""CPU fair dropping in the worker (issue 6 deliverable 5, seed 003 §III-E:
Algorithm 1 on CPU time + Algorithm 2's per-burst cost apportioning;
config datapath.cpu_fair_pct, backend/daemon/sn_cpufair.h).

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
   expensive port is dropped (> 10 % of its frames) and the cheap one
   hardly (< 5 %); the cheap port forwards > 1.35x the frames of the
   expensive one (tail drop: within 0.8-1.25x, asserted too); CPU time per
   port (Algorithm 2's apportioned cost, stats.get ports[].cpu_fair.cpu_ns)
   is max-min fair: within 50 % of equal, or the cheap port stays below
   its share because one burst per queue per poll round bounds what it
   can take, and then it keeps (> 99 %) everything and the expensive one
   gets the rest.
Per-frame costs on a loaded shared host are noisy, hence the loose bounds
(measured at load 13: forwarded frames vm1/vm0 1.00 with tail drop, 2.48
with fair dropping; CPU time vm0/vm1 1.22).

Layout ncore (s13-P3): each worker lcore has its own instance (its own
CPU time, the flows of the queues it owns). Two such pairs, vm0 (1500 B)
+ vm1 (64 B) on worker 0 and vm2 (1500 B) + vm3 (64 B) on worker 1, both
workers and the arbiter on CPU 1 as in test_ncore.py: the same
assertions hold for each pair, each worker's instance drops, and
stats.get's cpu_fair totals are the sums of arbiter.workers[k].cpu_fair.
"""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

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
PAIRS = {"1core": [("vm0", "vm1")], "ncore": [("vm0", "vm1"), ("vm2", "vm3")]}


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
    for n in ports:
        d = {"fwd_pps": (pb[n]["rx_packets"] - pa[n]["rx_packets"]) / (tb - ta)}
        if pct:
            for k in ("cpu_ns", "kept", "dropped"):
                d[k] = (pb[n]["cpu_fair"][k] - pa[n]["cpu_fair"][k]) / (tb - ta)
        out[n] = d
    return out


@pytest.mark.parametrize("layout", ["1core", "ncore"])
def test_cpu_fair_drop(build_dir, layout):
    tail = run(build_dir, 0, layout)
    fair = run(build_dir, 100, layout)
    print(f"\n{layout} tail drop: {tail}\nfair (cpu_fair_pct 100): {fair}")
    st = fair["cpu_fair"]
    assert st["budget_pct"] == 100 and st["drops"]["fair"] > 0, st
    assert st["drops"]["table_full"] == 0 and st["drops"]["invalid"] == 0, st
    # one instance per worker lcore; the totals are their sums
    ws = fair["workers"]
    assert len(ws) == (2 if layout == "ncore" else 1) and all(ws), ws
    for k in ("kept", "bursts", "active_max"):
        assert st[k] == sum(w[k] for w in ws), (k, st, ws)
    for k in ("fair", "table_full", "invalid"):
        assert st["drops"][k] == sum(w["drops"][k] for w in ws), (k, st, ws)
    assert all(w["drops"]["fair"] > 0 for w in ws), ws     # each worker's instance acts
    for big, small in PAIRS[layout]:
        f0, f1 = fair[big], fair[small]
        assert f0["kept"] > 100 and f1["kept"] > 100, fair
        # the expensive flow is the one cut
        assert f0["dropped"] > 0.10 * (f0["kept"] + f0["dropped"]), (big, fair)
        assert f1["dropped"] < 0.05 * (f1["kept"] + f1["dropped"]), (small, fair)
        # cycle-fair, not packet-fair: the cheap port forwards clearly more
        # frames than with tail drop (where the ratio is 0.8-1.25, below),
        # or, max-min, it is demand-bound (keeps all it offers, < 1 %
        # dropped) and still forwards more: since s13-M3 made switching
        # cheaper the expensive port's leftover share grew (CI 01:50 UTC:
        # cheap 944 k/s kept, 0 dropped, vs 727 k/s: 1.30)
        cheap_bound = f1["dropped"] < 0.01 * (f1["kept"] + f1["dropped"])
        assert (f1["kept"] > 1.35 * f0["kept"]
                or (cheap_bound and f1["kept"] > 1.1 * f0["kept"])), (big, small, fair)
        # max-min fair CPU time: within 50 % of equal, or the port below its
        # share is demand-bound (hardly dropped: it keeps all it could take in
        # one burst per poll round) and the other one gets the rest (CI on
        # 2 cores: vm0/vm1 CPU 1.48 with vm1 dropping 0.2 %)
        lo, hi = sorted((f0, f1), key=lambda f: f["cpu_ns"])
        assert (hi["cpu_ns"] <= 1.5 * lo["cpu_ns"]
                or lo["dropped"] < 0.01 * (lo["kept"] + lo["dropped"])), (big, small, fair)
        # tail drop (same run): packet-fair, no CPU fair counters
        t0, t1 = tail[big]["fwd_pps"], tail[small]["fwd_pps"]
        assert 0.8 < t0 / t1 < 1.25, (big, small, tail)
        print(f"{big}/{small}: forwarded frames cheap/expensive: tail drop {t1 / t0:.2f}, "
              f"fair {f1['kept'] / f0['kept']:.2f}; CPU time expensive/cheap with fair "
              f"dropping {f0['cpu_ns'] / f1['cpu_ns']:.2f}")
    assert tail["cpu_fair"] is None and not any(tail["workers"]), tail
