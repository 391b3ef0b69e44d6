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
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

FLOWS = [(0, 10**10, ",size=1500"), (1, 10**10, ",size=64")]


def run(build_dir, pct, window=3.0):
    extra = {"cpu_fair_pct": pct} if pct else {}
    with conf.Schednic(build_dir, ["vm0", "vm1"], {}, 64, 0, flows=FLOWS,
                       datapath_extra=extra) as s:
        time.sleep(2.0)
        a, ta = s.stats(), time.monotonic()
        time.sleep(window)
        b, tb = s.stats(), time.monotonic()
        assert s.daemon.poll() is None
    pa = {p["name"]: p for p in a["ports"]}
    pb = {p["name"]: p for p in b["ports"]}
    out = {"cpu_fair": b.get("cpu_fair")}
    for n in ("vm0", "vm1"):
        d = {"fwd_pps": (pb[n]["rx_packets"] - pa[n]["rx_packets"]) / (tb - ta)}
        if pct:
            for k in ("cpu_ns", "kept", "dropped"):
                d[k] = (pb[n]["cpu_fair"][k] - pa[n]["cpu_fair"][k]) / (tb - ta)
        out[n] = d
    return out


def test_cpu_fair_drop(build_dir):
    tail = run(build_dir, 0)
    fair = run(build_dir, 100)
    print(f"\ntail drop: {tail}\nfair (cpu_fair_pct 100): {fair}")
    f0, f1 = fair["vm0"], fair["vm1"]
    st = fair["cpu_fair"]
    assert st["budget_pct"] == 100 and st["drops"]["fair"] > 0, st
    assert st["drops"]["table_full"] == 0 and st["drops"]["invalid"] == 0, st
    assert f0["kept"] > 100 and f1["kept"] > 100, fair
    # the expensive flow is the one cut
    assert f0["dropped"] > 0.10 * (f0["kept"] + f0["dropped"]), fair
    assert f1["dropped"] < 0.05 * (f1["kept"] + f1["dropped"]), fair
    # cycle-fair, not packet-fair: the cheap port forwards clearly more
    # frames than with tail drop (where the ratio is 0.8-1.25, below)
    assert f1["kept"] > 1.35 * f0["kept"], fair
    # max-min fair CPU time: within 50 % of equal, or the port below its
    # share is demand-bound (hardly dropped: it keeps all it could take in
    # one burst per poll round) and the other one gets the rest (CI on
    # 2 cores: vm0/vm1 CPU 1.48 with vm1 dropping 0.2 %)
    lo, hi = sorted((f0, f1), key=lambda f: f["cpu_ns"])
    assert (hi["cpu_ns"] <= 1.5 * lo["cpu_ns"]
            or lo["dropped"] < 0.01 * (lo["kept"] + lo["dropped"])), fair
    # tail drop (same run): packet-fair, no CPU fair counters
    assert tail["cpu_fair"] is None
    t0, t1 = tail["vm0"]["fwd_pps"], tail["vm1"]["fwd_pps"]
    assert 0.8 < t0 / t1 < 1.25, tail
    print(f"forwarded frames vm1/vm0: tail drop {t1 / t0:.2f}, fair {f1['kept'] / f0['kept']:.2f}; "
          f"CPU time vm0/vm1 with fair dropping {f0['cpu_ns'] / f1['cpu_ns']:.2f}")
