# SPDX-License-Identifier: BSD-3-Clause
"""Held-occupancy histogram of deferred ports (the daemon side of the
backpressure experiment; Carousel §7.1.2 measures packets held in the
shaper per flow).

stats.get completion.held_occupancy is the time-weighted distribution of the
number of descriptor chains a deferred TX queue holds, cumulative; a test
measures an interval by subtracting two snapshots (tests/snlib/occupancy.py).
Checked against a state we control: a paused sink (SIGSTOP of its sn-gen)
makes vm0's frames wait with their descriptors held, a constant count that
the interval's histogram must show at p50/p99/max; resumed, the next
interval sits at 0; an immediate port reports nothing at all.
"""
import os
import signal
import time

import pytest

from snlib.occupancy import occ_diff, occ_hist, occ_pct, occ_summary
from snlib.wait import wait_for
from sngen import peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

SINK_MAC_BASE = 8
PAUSE_S = 1.5


def dport(d, name, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"), "mode": "server"}
    p.update(kw)
    return p


def occ(d, name):
    return d.port_stats(name)["completion"]["held_occupancy"]


def test_paused_sink_held_occupancy(schednicd, sngen, sn_tmpdir):
    n = 1500
    d = schednicd(ports=[dport(sn_tmpdir, "vm0", completion="deferred"),
                         dport(sn_tmpdir, "vm1")])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    gen = sngen([d.vhost_path("vm0")], "--marker",
                "--flow", f"src=0,dst={peer_mac(SINK_MAC_BASE)},count={n},phase=0")
    sink.wait("ready")
    gen.wait("ready")
    for p in ("vm0", "vm1"):
        d.wait_port_state(p, "up")
    sink.go("learn")
    gen.go("learn")
    wait_settled(d, lambda t: all(t[p]["rx_packets"] == 1 for p in ("vm0", "vm1")))

    # Idle, connected: the queue is sampled (time accrues) at held 0.
    a = occ(d, "vm0")
    time.sleep(0.3)
    b = occ(d, "vm0")
    idle = occ_diff(a, b)
    assert set(idle) == {(0, 0)}, idle
    assert 0.1e9 < idle[(0, 0)] < 2e9, idle

    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        gen.go(0)
        t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + n
                         and t["vm0"]["completion"]["held_now"] > 0, timeout=90)
        held = t["vm0"]["completion"]["held_now"]
        s0, w0 = occ(d, "vm0"), time.monotonic()
        time.sleep(PAUSE_S)
        s1, w1 = occ(d, "vm0"), time.monotonic()
        assert d.port_stats("vm0")["completion"]["held_now"] == held
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    h = occ_diff(s0, s1)
    summ = occ_summary(h)
    print("paused interval:", held, "held;", summ, h)
    lo, hi = next(k for k in h if k[0] <= held <= k[1])
    # Only the held count the queue sat at during the whole interval.
    assert set(h) == {(lo, hi)}, h
    assert summ["p50"] == summ["p99"] == summ["max"] == hi >= held > 0, summ
    # Time-weighted: the interval's sampled time is the wall time between
    # the snapshots (reader lag <= ~1 ms plus worker stalls on this host).
    assert 0.5 * (w1 - w0) < summ["sampled_s"] < 1.5 * (w1 - w0) + 0.1, (summ, w1 - w0)
    # The daemon's own percentiles are those of its cumulative histogram.
    cum = occ_hist(s1)
    assert (s1["p50"], s1["p99"], s1["max"]) == (occ_pct(cum, 50), occ_pct(cum, 99),
                                                 occ_pct(cum, 100)), s1
    assert s1["sampled_ns"] == sum(cum.values())
    # queues[0] carries the same histogram (one queue).
    q0 = d.port_stats("vm0")["queues"][0]["completion"]["held_occupancy"]
    assert q0["hist"] and q0["max"] >= s1["max"], (q0, s1)

    wait_for(lambda: d.port_stats("vm0")["completion"]["held_now"] == 0, "held drained", d=d)
    time.sleep(0.05)
    r0 = occ(d, "vm0")
    time.sleep(0.5)
    r1 = occ(d, "vm0")
    after = occ_diff(r0, r1)
    assert set(after) == {(0, 0)}, after
    gen.finish()
    time.sleep(1.0)
    sink.finish()


def test_immediate_port_has_no_occupancy(schednicd, sngen, sn_tmpdir):
    n = 2000
    d = schednicd(ports=[dport(sn_tmpdir, "vm0"), dport(sn_tmpdir, "vm1")])
    g = sngen([d.vhost_path("vm0"), d.vhost_path("vm1")],
              "--flow", f"src=0,dst=1,count={n}")
    g.wait("ready")
    for p in ("vm0", "vm1"):
        d.wait_port_state(p, "up")
    g.go("learn")
    g.go(0)
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + n)
    g.finish()
    o = t["vm0"]["completion"]["held_occupancy"]
    assert o == {"p50": 0, "p99": 0, "max": 0, "sampled_ns": 0, "hist": []}, o
    assert t["vm0"]["queues"][0]["completion"]["held_occupancy"]["hist"] == []
    assert port_table(d.stats())["vm1"]["completion"]["held_occupancy"]["sampled_ns"] == 0
