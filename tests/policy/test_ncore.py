# SPDX-License-Identifier: BSD-3-Clause
"""Layout ncore: W worker lcores, each owning the VM TX queues mapped to it
(every TX queue of a multiqueue port is owned by exactly one worker), one
arbiter lcore.

- the queue -> worker map: explicit (ports[i].workers) and balanced by
  default, shown in port.list / stats.get, bad maps rejected naming the
  field;
- two ports on two workers both forward and are shaped at their own rates
  (the two workers' frames meet in the one arbiter);
- aggregate + NBA across two real workers with unequal demand: the total
  is the aggregate within 1 % and the split is what water-filling max-min
  predicts from the workers' demands, after one update period.

Traffic as in test_policy.py / test_classes.py: sn-gen virtio-user peers
flood UDP frames to an unknown MAC, i.e. to the uplink (net_null).
"""
import json
import subprocess
import time
from pathlib import Path

import pytest

from test_classes import gen, go, wait_class
from test_policy import UPLINK, measure_backlogged, start, wait_flowing

CTL = Path(__file__).resolve().parents[2] / "scripts" / "schednicctl"
NCORE = {"layout": "ncore", "workers": 2}
EAL = {"arbiter_cpu": 1}


def ncore(schednicd, **extra):
    """The schednicd factory with layout ncore (2 workers) added."""
    def factory(*args, **kw):
        kw["datapath"] = {**(kw.get("datapath") or {}), **NCORE}
        kw["eal"] = {**(kw.get("eal") or {}), **EAL}
        return schednicd(*args, **kw, **extra)
    return factory


def queues_by_port(d):
    listed = {p["name"]: [q["worker"] for q in p.get("queues", [])]
              for p in d.rpc("port.list")["ports"]}
    st = {p["name"]: [q["worker"] for q in p.get("queues", [])] for p in d.stats()["ports"]}
    assert listed == st, (listed, st)
    return listed


@pytest.mark.functional
def test_queue_map_explicit_and_balanced(schednicd, sn_tmpdir):
    """Explicit maps are applied; without one every queue goes to the
    worker owning the fewest (round-robin in config order, then port.add);
    each worker lcore runs its own loop."""
    ports = [{"name": "a", "type": "vhost-user", "path": str(sn_tmpdir / "a.sock"),
              "queues": 3, "workers": [2, 2, 0]},
             {"name": "b", "type": "vhost-user", "path": str(sn_tmpdir / "b.sock"), "queues": 2},
             {"name": "c", "type": "vhost-user", "path": str(sn_tmpdir / "c.sock")}]
    d = schednicd(ports=ports, datapath={"layout": "ncore", "workers": 3}, eal=EAL)
    q = queues_by_port(d)
    # a: as given (load 0:1, 1:0, 2:2); b: worker 1, then 0 (0 and 1 tie at 1);
    # c: worker 1 (loads 2, 1, 2)
    assert q == {"a": [2, 2, 0], "b": [1, 0], "c": [1]}, q
    d.rpc("port.add", {"name": "e", "path": str(sn_tmpdir / "e.sock"), "queues": 2})
    # loads 2, 2, 2: q0 -> 0 (3, 2, 2), q1 -> 1 (lowest of the tie)
    assert queues_by_port(d)["e"] == [0, 1], queues_by_port(d)
    # port.add with an explicit map; bad maps rejected naming the field
    d.rpc("port.add", {"name": "f", "path": str(sn_tmpdir / "f.sock"), "queues": 2,
                       "workers": [2, 1]})
    assert queues_by_port(d)["f"] == [2, 1]
    for bad, field in (([0], "workers"), ([0, 3], "workers[1]"), ([0, "1"], "workers[1]"),
                       ({}, "workers")):
        with d.client() as c:
            r = c.call_raw("port.add", {"name": "g", "path": str(sn_tmpdir / "g.sock"),
                                        "queues": 2, "workers": bad})
        assert r["error"]["code"] == -32602 and field in r["error"]["message"], (bad, r)
    # the CLI: --workers, and the WORKERS column of port-list
    ctl = [str(CTL), "-s", str(d.socket)]
    subprocess.run(ctl + ["port-add", "h", str(sn_tmpdir / "h.sock"), "--queues", "3",
                          "--workers", "1,1,2"], check=True, capture_output=True, timeout=30)
    assert queues_by_port(d)["h"] == [1, 1, 2]
    out = subprocess.run(ctl + ["port-list"], check=True, capture_output=True, text=True,
                         timeout=30).stdout.splitlines()
    col = out[0].split().index("WORKERS")
    assert {ln.split()[0]: ln.split()[col] for ln in out[1:]}["h"] == "1,1,2", out
    a = d.stats()["arbiter"]
    assert [w["worker"] for w in a["workers"]] == [0, 1, 2], a["workers"]
    deadline = time.monotonic() + 10
    while not all(w["loops"] > 0 for w in d.stats()["arbiter"]["workers"]):
        assert time.monotonic() < deadline, d.stats()["arbiter"]
        time.sleep(0.1)
    assert d.stats()["arbiter"]["arbiter_thread"]["loops"] > 0


@pytest.mark.parametrize("cfg, msg", [
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "queues": 2, "workers": [0]}],
      "datapath": NCORE}, "ports[0].workers"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "queues": 2, "workers": [0, 2]}],
      "datapath": NCORE}, "ports[0].workers[1]"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "workers": ["0"]}],
      "datapath": NCORE}, "ports[0].workers[0]"),
    ({"ports": [{"name": "a", "path": "/tmp/sn-n-a.sock", "workers": [1]}]},
     "ports[0].workers[0]"),                                   # 1core: worker 0 only
    ({"datapath": {"layout": "ncore", "workers": 1}}, "datapath.workers"),
    ({"datapath": {"layout": "ncore", "workers": 9}}, "datapath.workers"),
    ({"datapath": {"layout": "2core", "workers": 2}}, "datapath.workers"),
    ({"datapath": NCORE, "eal": {"worker_cpus": [1, 1, 1]}}, "eal.worker_cpus"),
    ({"eal": {"worker_cpus": [1]}}, "eal.worker_cpus"),        # not ncore
    ({"datapath": NCORE, "eal": {"worker_cpus": [1, -1]}}, "eal.worker_cpus[1]"),
])
@pytest.mark.functional
def test_bad_layout_or_map_rejected_naming_the_field(schednicd_bin, sn_tmpdir, cfg, msg):
    f = sn_tmpdir / "bad.json"
    f.write_text(json.dumps(cfg))
    r = subprocess.run([str(schednicd_bin), "--config", str(f), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    assert f"config: {msg}:" in r.stderr, r.stderr


@pytest.mark.functional
def test_worker_cpus_sets_the_worker_count(schednicd_bin, sn_tmpdir):
    f = sn_tmpdir / "ok.json"
    f.write_text(json.dumps({"datapath": {"layout": "ncore"}, "eal": {"worker_cpus": [1, 1, 0]},
                             "ports": [{"name": "a", "path": "/tmp/sn-n-a.sock",
                                        "workers": [2]}]}))
    r = subprocess.run([str(schednicd_bin), "--config", str(f), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def worker_rate(d, port, key="released_bytes", window=3.0, tries=10):
    """bits/s of policy counter `key` of `port` over a window timed by the
    clock of the worker owning the port (policy.clock_ns, read with the
    counters: clock_consistent pairs only), without shaper underruns."""
    def snap():
        for _ in range(100):
            p = {q["name"]: q for q in d.stats()["ports"]}[port]["policy"]
            if p["clock_consistent"]:
                return p
            time.sleep(0.01)
        pytest.fail(f"{port}: no consistent policy counters")
    for _ in range(tries):
        a = snap()
        time.sleep(window)
        b = snap()
        if a["underruns"] == b["underruns"]:
            return (b[key] - a[key]) * 8 / ((b["clock_ns"] - a["clock_ns"]) / 1e9)
    pytest.fail(f"{port}: no {window}s window without shaper underruns in {tries} tries")


@pytest.mark.accuracy
def test_two_ports_on_two_workers_forward_and_are_shaped(schednicd, sngen):
    """vm0's queue on worker 0 at 20 Mbit/s, vm1's on worker 1 at 10 Mbit/s,
    both offered 64 Mbit/s: each port's uplink rate within 1 % of its own
    limit, through the one arbiter (weights 1:1, link unlimited)."""
    pol = {"ports": {"vm0": {"rate_bps": 20_000_000}, "vm1": {"rate_bps": 10_000_000}}}
    d, g = start(ncore(schednicd), sngen, ["vm0", "vm1"], pol)
    # balanced by default: vm0 -> worker 0, vm1 -> worker 1
    assert queues_by_port(d) == {"vm0": [0], "vm1": [1], "uplink": []}
    wait_flowing(d, ["vm0", "vm1"])
    # The shaper's output on its own worker's clock (exact pairs), then
    # the uplink (the arbiter lcore's counters and clock: it shares the
    # CPU with both workers here, so its lag at a window's edges differs;
    # checked over the whole run instead).
    r0 = worker_rate(d, "vm0")
    r1 = worker_rate(d, "vm1")
    assert abs(r0 - 20e6) / 20e6 < 0.01, r0
    assert abs(r1 - 10e6) / 10e6 < 0.01, r1
    r0 = measure_backlogged(d, "uplink_bytes", "vm0", gens=g)
    assert abs(r0 - 20e6) / 20e6 < 0.03, r0
    st = d.stats()
    t = {p["name"]: p for p in st["ports"]}
    for n in ("vm0", "vm1"):
        p = t[n]["policy"]
        assert p["drops"]["horizon"] > 0 and p["uplink_packets"] > 0, p   # shaped
        assert sum(v for k, v in p["drops"].items() if k != "horizon") == 0, p
    # both workers' frames went through the arbiter lcore
    assert st["arbiter"]["released"] >= t["vm0"]["policy"]["uplink_packets"] + \
        t["vm1"]["policy"]["uplink_packets"] - 64, st["arbiter"]
    assert all(w["loops"] > 0 for w in st["arbiter"]["workers"])
    assert d.alive()


AGG = 100_000_000
AGG_SIZE = 1400


def nba_row(measured, case, total, sent, want, note):
    """One row of the aggregate + NBA table of the terminal summary."""
    measured("aggregate 100 Mbit/s over 2 workers: total and NBA split vs water-filling "
             "(Mbit/s, 2 s windows)", case=case, **{
                 "total": total / 1e6 if total else None, "total bound": "100 +-1 %",
                 "vm0 sent/water-fill": [sent[n] / 1e6 for n in ("vm0",) if n in sent] +
                 [want[n] / 1e6 for n in ("vm0",) if n in want],
                 "vm1 sent/water-fill": [sent[n] / 1e6 for n in ("vm1",) if n in sent] +
                 [want[n] / 1e6 for n in ("vm1",) if n in want],
                 "split err % agg": max((abs(sent[n] - want[n]) / AGG * 100 for n in sent),
                                        default=None),
                 "split bound": "< 2 % agg", "note": note})


def water_fill(total, demands):
    """Max-min split of `total` over `demands` (Carousel §5.3 NBA)."""
    out, left, rest = {}, total, sorted(demands.items(), key=lambda kv: kv[1])
    while rest:
        k, dmd = rest[0]
        share = left / len(rest)
        if dmd > share:
            for kk, _ in rest:
                out[kk] = share
            return out
        out[k] = dmd
        left -= dmd
        rest = rest[1:]
    return out


def agg_window(d, window=2.0):
    """(aggregate sent bit/s, {port: class sent bit/s}, {port: offered
    bit/s}, stats) over one window. Each port's counters are timed by the
    clock of the worker that owns its queue (policy.clock_ns): the two
    workers time-share one CPU here, so one worker's counters may lag the
    other's by a time slice when stats.get reads them; against its own
    clock each is exact if read as a consistent pair (clock_consistent: a
    worker descheduled in the middle of its loop for over 2 s, seen at a
    load average of 12, moved its counters but not its clock). The
    aggregate's total is the sum over the ports."""
    def snap():
        out, st = {}, None
        for _ in range(200):
            st = d.stats()
            for p in st["ports"]:
                if "policy" in p and p["name"] not in out and p["policy"]["clock_consistent"]:
                    out[p["name"]] = (p["policy"]["clock_ns"] / 1e9, p["policy"]["classes"][0])
            if len(out) == 2:
                return out, st
            time.sleep(0.01)
        pytest.fail(f"no consistent policy counters: {out}")
    ca, _ = snap()
    time.sleep(window)
    cb, sb = snap()
    sent, offered = {}, {}
    for n in cb:
        dt = cb[n][0] - ca[n][0]
        if dt <= 0:                # the worker never ran: measure again
            return None
        sent[n] = (cb[n][1]["sent_bytes"] - ca[n][1]["sent_bytes"]) * 8 / dt
        offered[n] = (cb[n][1]["offered_bytes"] - ca[n][1]["offered_bytes"]) * 8 / dt
    return sum(sent.values()), sent, offered, sb


@pytest.mark.accuracy
@pytest.mark.parametrize("pps", [(6000, 11000)], ids=["60M+123M"])
def test_aggregate_nba_over_two_workers_unequal_demand(schednicd, sngen, pps, measured):
    """One aggregate of 100 Mbit/s over a class of vm0 (worker 0, offering
    ~67 Mbit/s) and one of vm1 (worker 1, offering ~123 Mbit/s): both
    workers are real NBA cores. After one update period the aggregate's
    total is within 1 % of 100 Mbit/s and each worker's share is what
    water-filling max-min predicts from the offered loads (here 50/50:
    both offer more than half), within 2 % of the aggregate; the NBA shows
    two saturated workers whose grants sum to the aggregate."""
    pol = {"aggregates": {"agg": {"rate_bps": AGG, "update_ms": 100}},
           "ports": {n: {"classes": [{"name": "bulk", "proto": "udp", "aggregate": "agg"}]}
                     for n in ("vm0", "vm1")}}
    d = ncore(schednicd)(ports=["vm0", "vm1"], uplink=UPLINK, policy=pol,
                         datapath={"mbufs": 16383})
    assert queues_by_port(d) == {"vm0": [0], "vm1": [1], "uplink": []}
    gens = [gen(sngen, d, n, [f"10.0.{i}.1:7-10.9.0.1:9"], pps=r, idx=i + 1, size=AGG_SIZE)
            for i, (n, r) in enumerate(zip(("vm0", "vm1"), pps))]
    go(d, ["vm0", "vm1"], gens)
    wait_class(d, "vm0", ["bulk"])
    wait_class(d, "vm1", ["bulk"])
    time.sleep(0.3)                       # > one update period
    got = []
    for _ in range(10):
        w = agg_window(d)
        if w is None:
            continue
        total, sent, offered, st = w
        want = water_fill(AGG, offered)
        got.append((round(total), {n: round(v) for n, v in sent.items()},
                    {n: round(v) for n, v in offered.items()}))
        assert total < AGG * 1.01, got
        # a window in which a generator was descheduled offers less than
        # it should; measure again
        if min(offered.values()) < AGG / 2 * 1.05:
            continue
        ag = st["aggregates"]["agg"]
        assert [w["worker"] for w in ag["nba"]] == [0, 1], ag
        assert sum(w["grant_bps"] for w in ag["nba"]) >= AGG * 0.999, ag
        # The NBA's demand estimates come from 100 ms of each worker's
        # counts; on this loaded host (two workers and the arbiter share
        # one CPU) they are noisy, and a worker whose estimate dips under
        # its grant is treated as below its share for one period: such
        # windows are measured again.
        if abs(total - AGG) / AGG < 0.01 and \
                all(abs(sent[n] - want[n]) < 0.02 * AGG for n in sent) and \
                all(w["state"] == "saturated" and abs(w["grant_bps"] - AGG / 2) < 0.02 * AGG
                    for w in ag["nba"]):
            break
    else:
        nba_row(measured, "2 workers, both above half", got[-1][0] if got else None,
                sent if got else {}, want if got else {}, f"none of {len(got)} windows")
        pytest.fail(f"no window with total within 1 % and the max-min split: {got}")
    nba_row(measured, "2 workers, both above half", total, sent, want,
            f"window {len(got)}; grants {[w['grant_bps'] / 1e6 for w in ag['nba']]}")
    assert ag["drops"]["horizon"] > 0, ag          # the excess of each worker
    assert d.alive()


@pytest.mark.accuracy
def test_aggregate_nba_worker_below_its_share(schednicd, sngen, measured):
    """vm0 (worker 0) offers ~28 Mbit/s, below its fair share of the 100
    Mbit/s aggregate; vm1 (worker 1) ~123 Mbit/s. Water-filling max-min
    predicts 28 / 72. Per 2 s window: the total never exceeds the
    aggregate (+1 %) and the grants always sum to it. Over the windows in
    which both generators offered their nominal load (within 5 %; median,
    the host is loaded): worker 1 never more than the max-min rest (+1 %),
    the total within 1 % of the aggregate, worker 0's demand met (within
    3 % of its offer) and worker 1 within 2 % of the aggregate of the
    water-filling rest. This failed (84-97 Mbit/s) with the first NBA
    rule, which treated a worker whose 100 ms estimate reached 95 % of its
    1.1 x demand grant as unbounded (equal split for a period), and under
    CPU contention with the second, which granted a worker below its
    share its last 100 ms arrival sample + 1 % with nothing queued (every
    over-estimate lost to the aggregate) and called a worker descheduled
    for 200 ms idle. The
    NBA now keeps a reserve of half a period of such a worker's traffic
    queued and measures its rate over 4 periods (sn_nba.h rule 1,
    doc/threads.md "Layouts"; the contention case in the
    model: tests/core/test_ref_nba.py)."""
    pol = {"aggregates": {"agg": {"rate_bps": AGG, "update_ms": 100}},
           "ports": {n: {"classes": [{"name": "bulk", "proto": "udp", "aggregate": "agg"}]}
                     for n in ("vm0", "vm1")}}
    d = ncore(schednicd)(ports=["vm0", "vm1"], uplink=UPLINK, policy=pol,
                         datapath={"mbufs": 16383})
    gens = [gen(sngen, d, n, [f"10.0.{i}.1:7-10.9.0.1:9"], pps=r, idx=i + 1, size=AGG_SIZE)
            for i, (n, r) in enumerate(zip(("vm0", "vm1"), (2500, 11000)))]
    go(d, ["vm0", "vm1"], gens)
    wait_class(d, "vm0", ["bulk"])
    wait_class(d, "vm1", ["bulk"])
    time.sleep(0.3)
    got, ratio0, totals, dev1, split = [], [], [], [], []
    nominal = {"vm0": 2500 * AGG_SIZE * 8, "vm1": 11000 * AGG_SIZE * 8}
    for _ in range(14):
        w = agg_window(d)
        if w is None:
            continue
        total, sent, offered, st = w
        nba = {w["worker"]: w for w in st["aggregates"]["agg"]["nba"]}
        got.append((round(total), {n: round(v) for n, v in sent.items()},
                    {n: round(v) for n, v in offered.items()},
                    {k: (w["state"], w["grant_bps"], w["backlog_bytes"]) for k, w in nba.items()}))
        want = water_fill(AGG, offered)
        assert total < AGG * 1.01, got
        assert nba[0]["grant_bps"] + nba[1]["grant_bps"] >= AGG * 0.999, got
        # A window in which a generator (or a worker) was descheduled for
        # a while offers other loads than the test sets up (seen under a
        # load average of 5: vm1 offering 18 Mbit/s for 2 s; at 18, vm0
        # offering 127 Mbit/s for 2 s catching up after a stall): not this
        # test's case, measured again. The split follows the offers of
        # the last 4 NBA periods, so a window's own offers only predict it
        # while they are steady.
        if any(abs(offered[n] - nominal[n]) > 0.05 * nominal[n] for n in nominal):
            continue
        assert sent["vm1"] < want["vm1"] + 0.01 * AGG, got
        ratio0.append(sent["vm0"] / offered["vm0"])
        totals.append(total)
        dev1.append(abs(sent["vm1"] - want["vm1"]) / AGG)
        split.append((total, sent, want))
        if len(totals) == 6:
            break
    assert len(totals) >= 3, f"too few windows with the intended offered loads: {got}"
    ratio0.sort()
    totals.sort()
    dev1.sort()
    print(f"worker below its share: totals {[round(t / 1e6, 2) for t in totals]} Mbit/s "
          f"of {AGG / 1e6:.0f}; windows: {got}")
    med = len(totals) // 2
    if split:        # the window of the median total (the medians asserted below)
        mt, ms, mw = sorted(split, key=lambda x: x[0])[med]
        nba_row(measured, "vm0 below its share", mt, ms, mw,
                f"window of median total ({len(totals)}); median vm0 sent/offered "
                f"{ratio0[med]:.4f} (bound 1 +-3 %), median vm1 err {dev1[med] * 100:.2f} % agg")
    assert abs(totals[med] - AGG) < 0.01 * AGG, got
    assert abs(ratio0[med] - 1) < 0.03, got
    assert dev1[med] < 0.02, got
    assert d.alive()
