# SPDX-License-Identifier: BSD-3-Clause
"""Isolation / T-WFI (PSPAT §6.6 experiment, bound of PSPAT eq. 1).

A low-rate VICTIM port (vm0, weight 50) sends 200 B frames at 50 frames/s
(18 % of the link) while three interfering ports (vm1..vm3, weight 1 each,
three flows each at 50 frames/s: 450 frames/s, 1.6 x the link) saturate an
uplink emulated at B = 500 kbit/s (+24 B per frame). sn-gen records each
victim frame's one-way latency (`--flow ...,lat=1`: TSC when its driver
accepted the frame, TSC when the sink on the uplink's net_vhost peer
received it; one process, one clock), over a 6 s window in which the
daemon kept up with the link (PSPAT's assumption (i): no link-emulation
reset, link >= 95 % busy; up to 4 windows are tried, else the test fails
as "machine too loaded"). The same daemon then switches the
arbiter to FIFO live (policy.set) and the victim's latency is measured
again: reported, not asserted.

Bound (also in doc/policy.md "Weighted sharing and isolation"). PSPAT eq. 1:
  T-WFI = T-WFI_SA + Delta_A + (2 + k) Delta_D,
and a victim frame arriving to an empty victim queue completes in the
fluid system after L_v / (phi_v B), so its latency is at most that plus
T-WFI plus the client's own hop into the arbiter (PSPAT's T-WFI starts at
the client mailbox; ours at the guest's TX ring). With
  phi_v = 50 / 53 (weights of all classes), B = 5e5 bit/s,
  L_k = L = (lmax 1518 + 24) * 8 = 12336 bit: QFQ's approximation depends
        on the class lmax, not on the frames sent (classes start at
        1518 B and have not grown: asserted, arbiter.lmax_raises == 0),
  L_v = (200 + 24) * 8 = 1792 bit (the victim's frame on the wire):
  fluid      L_v / (phi_v B)                 =   3.80 ms
  T-WFI_QFQ  6 L_k / (phi_v B) + (L - L_k)/B = 156.92 ms + 0   (PSPAT eq. 2)
  in flight  L / B                           =  24.67 ms: QFQ charges V for
        a whole packet at dequeue, so one max-size packet more can precede
        (measured necessary on exact traces: tests/core/ref_sched.py
        bound_qfq)
and the loop terms, all in units of one datapath loop iteration
  D = nap + slack + work = 50 us + 50 us + 0.5 ms = 0.6 ms:
        nap: datapath.idle_sleep_us (set to 50 here), the longest an idle
        worker or arbiter lcore sleeps per iteration (the arbiter's
        sleep until the link is free is capped by it too); slack: Linux's
        default timer slack on that sleep; work: one iteration handles at
        most MAX_BATCHES x BATCH = 1024 wheel frames (+ one RX burst) at
        ~1600 instructions per frame (daemon README "Per-frame cost of
        the scheduled path") = 1.6 M instructions, 0.5 ms at 3.2 G/s;
  Delta_D terms: the dispatcher is the arbiter itself (release ->
        rte_eth_tx_burst in the same call, one TX queue), so a block is
        sent at the scan that decides it, in decision order: no
        reordering within the block (PSPAT's second Delta_D: 0) and the
        device (net_vhost) takes the whole block at once, the emulated
        link being the bottleneck (k Delta_D: 0); what remains is the
        service delay, a frame leaving at the scan after its emulated
        start: <= one arbiter scan interval, Delta_A;
  the receiver's poll: removed from the asserted latency (the sink's
        poll gap is subtracted, see below): 0.
  layout 1core: the worker polls the guest ring, enqueues into the
        scheduler (no mailbox) and scans in one iteration, and scans
        again after every wheel batch:
        client hop + Delta_A = D, service delay = D          -> 2 D = 1.2 ms
  layouts 2core / ncore: the worker owning the victim's TX queue polls
        it and pushes the frame into the port's client mailbox within
        one worker iteration (client hop D); the arbiter lcore reads
        its mailboxes once per scan (Delta_A = D, its own loop, naps
        capped at idle_sleep_us) and its release is <= one scan late (D):
                                                             -> 3 D = 1.8 ms
  total: 1core 186.58 ms, 2core / ncore 187.18 ms.
Not modelled (PSPAT §6.6 says the same of its PCIe bus): the OS keeping the
daemon's worker or sn-gen off the CPU on this shared 2-core host (load
10-16: median latencies of 20+ ms come from there; the test prints the
largest runqueue wait of any thread). B is chosen low so that the bound
stays well above those stalls; the FIFO run shows what the bound excludes
(seconds: the victim waits behind the interferers' whole queue).
The measuring instrument's own stalls are taken out: sn-gen is one busy
loop, so a frame it reads after not polling for g ms (it was descheduled)
arrived some time in those g ms; the asserted p99 is over
latency - g (a lower bound of the true latency; the daemon's stalls stay
in), the raw p99 is printed beside (one 200 ms sink stall at load 16 can
make it exceed the bound while the corrected one stays far below).

Layouts: 1core, 2core (worker | arbiter on CPU 1 with the worker) and
ncore (2 workers + the arbiter, all on CPU 1; the victim's queue on
worker 0, the interferers' queues on both). 2core / ncore transmit on
uplink TX queues 1..W, so every port (the net_vhost uplink, the VM ports,
sn-gen's drivers) gets W + 1 queue pairs (conformance.Schednic queues=):
DPDK 22.11's virtio-user cannot mix multiqueue and one-queue backends in
one sn-gen, and the sink on the uplink's peer must drain every queue.
"""
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402
from benchutil import stop  # noqa: E402

pytestmark = pytest.mark.accuracy

LINK = 500_000
OVH = 24
FRAME = 200
LMAX = 1518                       # CLASS_LMAX_INIT, pipeline/sn_pl_internal.h
W_VICTIM, W_OTHER, N_OTHER = 50, 1, 3
PER_FLOW_PPS = 50                 # sn-gen --rate is shared round-robin by all flows
FLOWS_PER_OTHER = 3
WINDOW = 6                        # seconds per measured window
TRIES = 4                         # QFQ windows until one meets PSPAT's assumption (i)
SKIP = 2.0                        # seconds after a start / change not measured (backlogs build up)
IDLE_US = 50                      # datapath.idle_sleep_us: the longest nap per loop iteration
SLACK_S = 50e-6                   # Linux default timer slack on that nap
ITER_S = 0.5e-3                   # one iteration's work: 1024 frames x ~1600 instructions
LAYOUTS = {"1core": ({"layout": "1core"}, 1),        # datapath, queue pairs per port
           "2core": ({"layout": "2core"}, 2),
           "ncore": ({"layout": "ncore", "workers": 2}, 3)}


def bound_ms(layout):
    """PSPAT eq. 1 for the victim in this layout, in ms (see the module
    docstring): fluid + T-WFI_QFQ + in flight + n D, n = 2 (1core) or 3."""
    wsum = W_VICTIM + N_OTHER * W_OTHER
    phi = W_VICTIM / wsum
    lk = (LMAX + OVH) * 8
    lv = (FRAME + OVH) * 8
    twfi_qfq = 6 * lk / (phi * LINK) + 0.0          # (L - L_k) / B = 0: equal lmax
    inflight = lk / LINK
    fluid = lv / (phi * LINK)
    d = IDLE_US * 1e-6 + SLACK_S + ITER_S           # one datapath loop iteration
    # 1core: client hop + Delta_A in one iteration, + the service delay;
    # 2core / ncore: worker iteration (to the mailbox) + arbiter scan
    # interval (Delta_A) + the service delay (<= one scan)
    loops = 2 if layout == "1core" else 3
    return (fluid + twfi_qfq + inflight + loops * d) * 1e3


def check_layout(s, layout, timeout=10.0):
    """The daemon runs the layout asked for (as tests/policy/conftest.py
    check_layout): 1core has no arbiter lcore; 2core one worker and a
    looping arbiter lcore; ncore every worker lcore and the arbiter loop.
    Returns {port: owner worker of each TX queue}."""
    deadline = time.monotonic() + timeout
    while True:
        st = s.stats()
        a = st["arbiter"]
        loops = a["arbiter_thread"]["loops"]
        want_workers = LAYOUTS[layout][0].get("workers", 1)
        assert len(a["workers"]) == want_workers, a["workers"]
        if layout == "1core":
            assert loops == 0, f"1core daemon runs an arbiter lcore ({loops} loops)"
            break
        if loops > 0 and all(w["loops"] > 0 for w in a["workers"]):
            break
        assert time.monotonic() < deadline, f"{layout} daemon: an lcore never ran: {a}"
        time.sleep(0.1)
    return {p["name"]: [q["worker"] for q in p.get("queues", [])] for p in st["ports"]}


def pct(v, p):
    """Nearest-rank percentile."""
    s = sorted(v)
    return s[max(0, -(-len(s) * p // 100) - 1)]


@pytest.mark.parametrize("layout", [pytest.param(x, marks=pytest.mark.extended)
                                    if x == "2core" else x for x in LAYOUTS])
def test_victim_p99_under_pspat_bound(build_dir, layout, measured):
    dp, queues = LAYOUTS[layout]
    ports = ["vm0"] + [f"vm{i + 1}" for i in range(N_OTHER)]
    weights = {"vm0": W_VICTIM, **{p: W_OTHER for p in ports[1:]}}
    pol = {"uplink": {"rate_bps": LINK, "algorithm": "qfq", "overhead_bytes": OVH},
           "ports": {p: {"weight": w} for p, w in weights.items()}}
    victim_frames = PER_FLOW_PPS * (SKIP * 2 + WINDOW * (TRIES + 1) + 20)
    flows = [(0, int(victim_frames), "lat=1")] + \
        [i + 1 for i in range(N_OTHER) for _ in range(FLOWS_PER_OTHER)]
    pps = PER_FLOW_PPS * len(flows)

    def window(s):
        st0, w0, g0 = s.stats(), conf.thread_waits(s.daemon.pid), conf.thread_waits(s.gen.pid)
        t0 = time.monotonic()
        time.sleep(WINDOW)
        st1 = s.stats()
        p0 = {p["name"]: p for p in st0["ports"]}
        p1 = {p["name"]: p for p in st1["ports"]}
        dt = (st1["arbiter"]["arbiter_clock_ns"] - st0["arbiter"]["arbiter_clock_ns"]) / 1e9
        up = {n: (p1[n]["policy"]["uplink_packets"] - p0[n]["policy"]["uplink_packets"]) / dt
              for n in ports}
        return {"t": (t0, time.monotonic()),
                "link_util": round(sum(up.values()) * (FRAME + OVH) * 8 / LINK, 3),
                "victim_pps": round(up["vm0"], 1),
                "victim_drops": {k: v - p0["vm0"]["policy"]["drops"][k]
                                 for k, v in p1["vm0"]["policy"]["drops"].items()
                                 if v != p0["vm0"]["policy"]["drops"][k]},
                "resets": st1["arbiter"]["link_resets"] - st0["arbiter"]["link_resets"],
                "lmax_raises": st1["arbiter"]["lmax_raises"],
                "wait_ms_daemon_sngen": (conf.busiest_wait_ms(s.daemon.pid, w0),
                                         conf.busiest_wait_ms(s.gen.pid, g0))}

    def valid(w):
        """PSPAT eq. 1 assumes (i): the arbiter keeps up with B. A window in
        which the daemon was off its CPU longer than the link emulation's
        100 ms slack (link_resets) or could not keep the link busy does
        not meet it: the bound says nothing about it."""
        return w["resets"] == 0 and w["link_util"] > 0.95

    with conf.Schednic(build_dir, ports, pol, FRAME, pps, sample_ms=100, flows=flows,
                       datapath={**dp, "idle_sleep_us": IDLE_US}, queues=queues) as s:
        s.wait_flowing()
        lcores = check_layout(s, layout)
        if layout == "ncore":    # the frames meet at the arbiter from both workers
            assert {w for p in ports for w in lcores[p]} == {0, 1}, lcores
        time.sleep(SKIP)
        tried = []
        for _ in range(TRIES):
            tried.append(window(s))
            if valid(tried[-1]):
                break
        pol["uplink"]["algorithm"] = "fifo"      # same run, live change
        s.rpc("policy.set", {"policy": pol})
        time.sleep(SKIP)
        fifo = window(s)
        stop(s.gen)                              # sn-gen writes the latency file at exit
        lat = [json.loads(x) for x in Path(s.lat_file).read_text().splitlines()]
        samples = conf.read_samples(s.samples, 0)
    assert len(lat) == 1 and lat[0]["flow"] == 0, lat

    # Victim frames of a window: the sink samples (CLOCK_MONOTONIC, like
    # time.monotonic) map it to victim sequence numbers through the
    # victim's received bytes (the victim is never backlogged beyond a few
    # frames). Latency minus the sink's own poll gap (see above).
    def latency(w):
        inside = [b for t, b in samples if w["t"][0] <= t <= w["t"][1]]
        a, b = inside[0] // FRAME, inside[-1] // FRAME
        lv, gv = lat[0]["lat_us"][a:b], lat[0]["gap_us"][a:b]
        raw = [x for x in lv if x is not None]
        got = [max(0.0, x - g) for x, g in zip(lv, gv) if x is not None]
        w.update({"samples": len(got), "lost": len(lv) - len(raw),
                  "p50_ms": round(pct(got, 50) / 1e3, 2) if got else None,
                  "p99_ms": round(pct(got, 99) / 1e3, 2) if got else None,
                  "max_ms": round(max(got) / 1e3, 2) if got else None,
                  "raw_p99_ms": round(pct(raw, 99) / 1e3, 2) if raw else None,
                  "max_sink_gap_ms": round(max((g or 0) for g in gv) / 1e3, 2) if gv else None})
        del w["t"]
        return w

    res = {"qfq": [latency(w) for w in tried], "fifo": latency(fifo)}
    bound = bound_ms(layout)
    print(f"\nisolation {layout}: bound {bound:.2f} ms; queue owners {lcores}; "
          f"{json.dumps(res)}")
    q = res["qfq"][-1]
    measured("isolation / T-WFI: victim (weight 50, 50 fps) latency vs PSPAT eq. 1, "
             "uplink 500 kbit/s saturated", layout=layout, **{
                 "p99 ms": q["p99_ms"], "bound ms": round(bound, 2), "p50 ms": q["p50_ms"],
                 "max ms": q["max_ms"], "raw p99 ms": q["raw_p99_ms"],
                 "lost": q["lost"], "link util": q["link_util"], "util bound": "> 0.95",
                 "samples": q["samples"], "windows": len(res["qfq"]),
                 "FIFO p99 ms": res["fifo"]["p99_ms"]})
    if not valid(res["qfq"][-1]):
        pytest.fail(f"no {WINDOW} s window in {TRIES} in which the daemon kept up with the "
                    f"link (PSPAT eq. 1 assumption (i); machine too loaded): {res}")
    # the experiment's premises: the victim sent (and was served) at its
    # offered rate, below its share; every class kept lmax 1518
    # (sn-gen, starved of CPU too, offers a little less than asked)
    share_pps = W_VICTIM / (W_VICTIM + N_OTHER * W_OTHER) * LINK / ((FRAME + OVH) * 8)
    assert 0.7 * PER_FLOW_PPS < q["victim_pps"] < share_pps, res
    assert q["lmax_raises"] == 0, res
    assert q["samples"] >= 0.7 * PER_FLOW_PPS * WINDOW, res
    # isolation: no victim frame lost or dropped, p99 under PSPAT eq. 1
    assert q["lost"] == 0 and not q["victim_drops"], res
    assert q["p99_ms"] < bound, res
    # FIFO is reported only; its victim waits behind the interferers' queue
    assert res["fifo"]["samples"] + res["fifo"]["lost"] > 0, res
