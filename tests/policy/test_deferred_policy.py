# SPDX-License-Identifier: BSD-3-Clause
"""A deferred-completion port that is also shaped.

Its frames go through the policy pipeline as zero-copy guest buffers; each
descriptor must complete exactly once, when the frame is finally sent or
dropped, and a device stop must get every held frame back even while the
pipeline holds some (wheel, mailbox, scheduler). Traffic: one sn-gen
virtio-user peer floods 1000-byte frames to an unknown MAC; the only other
port is the uplink, a net_null ethdev, so each frame has one destination
and the pipeline's counters add up per frame.
"""
import os
import signal
import time

import pytest

from snlib.ports import ports, wait_drained
from snlib.wait import wait_for

pytestmark = pytest.mark.functional

LAYOUTS = ["1core", "2core", "ncore"]   # lcore layouts, see conftest.py

FRAME = 1000
SINK_MAC = "02:00:00:00:00:99"
UPLINK = "net_null0,no-rx=1"
QSIZE = 256          # guest TX ring: at most this many frames in flight


def setup(schednicd, sngen, sn_tmpdir, rate_bps, n, policy=None, port=None, marker=True):
    """vm0 limited to rate_bps (or the given policy; port: more port
    options), sn-gen ready to send n frames, marked (opted in) or not."""
    d = schednicd(ports=[{"name": "vm0", "type": "vhost-user", "mode": "server",
                          "path": str(sn_tmpdir / "vm0.sock"), "completion": "deferred",
                          **(port or {})}],
                  uplink=UPLINK, policy=policy or {"ports": {"vm0": {"rate_bps": rate_bps}}},
                  datapath={"mbufs": 16383})
    g = sngen([d.vhost_path("vm0")], *(["--marker"] if marker else []), "--no-learn",
              "--size", str(FRAME), "--queue-size", str(QSIZE),
              "--flow", f"src=0,dst={SINK_MAC},count={n}")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")
    return d, g


def uplink_policy(rate_bps):
    """vm0 unshaped, the uplink emulated at rate_bps: frames wait in QFQ."""
    return {"uplink": {"rate_bps": rate_bps, "algorithm": "qfq"},
            "ports": {"vm0": {"weight": 1}}}


def accounted(p):
    """Every frame the shaper took is sent, dropped or still held."""
    pol = p["policy"]
    return pol["offered_packets"] == (pol["sent_packets"] + sum(pol["drops"].values())
                                      + pol["wheel_depth"] + pol["qfq_backlog"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shaped_deferred_port_completes_each_frame_once(schednicd, sngen, sn_tmpdir, layout):
    """20 Mbit/s limit: the uplink rate never exceeds it, descriptors are
    held while frames wait in the shaper, and at rest popped == completed
    == offered == sent + drops, nothing held, no mbuf leaked. The guest
    ring (256 frames = 102 ms at the limit) is shorter than the wheel
    horizon (262 ms): the shaper backpressures the guest and drops nothing
    (Carousel §5.2), where an immediate port loses the excess."""
    rate, n = 20_000_000, 10000        # 10 Mbyte: 4 s at the limit
    d, g = setup(schednicd, sngen, sn_tmpdir, rate, n)
    base = d.stats()["mempool"]["in_use"]
    (g.sync / "go-0").touch()
    wait_for(lambda: ports(d)["vm0"]["policy"]["uplink_packets"] > 200, "traffic shaped")
    a, ta = ports(d), d.stats()["uptime_s"]
    time.sleep(1.5)
    b, tb = ports(d), d.stats()["uptime_s"]
    r = (b["vm0"]["policy"]["uplink_bytes"] - a["vm0"]["policy"]["uplink_bytes"]) * 8 / (tb - ta)
    assert rate * 0.5 < r < rate * 1.05, r          # the limit holds
    c = b["vm0"]["completion"]
    # held in the shaper: held_max, not held_now — a sender descheduled on a
    # loaded host can leave the shaper empty at the instant of the snapshot
    assert c["mode"] == "deferred" and c["held_max"] > 0, c
    g.wait("sent-0", timeout=120)
    t = wait_drained(d, "vm0", n, "everything sent or dropped")
    c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
    assert c["popped"] == c["completed"] == n, c
    assert c["forced"] == 0 and c["late_free"] == 0 and c["no_mbuf"] == 0, c
    assert c["hold_us"]["max"] > 1000, c           # waited for the shaper, not copied
    assert pol["offered_packets"] == n, pol
    assert accounted(t["vm0"]), pol
    assert pol["uplink_packets"] == pol["sent_packets"] > 0, pol
    assert not any(pol["drops"].values()), pol     # backpressure, no loss
    assert t["uplink"]["tx_packets"] >= pol["uplink_packets"]
    r = g.finish()
    assert r["flows"][0]["tx"] == n, r["flows"]
    wait_for(lambda: d.stats()["mempool"]["in_use"] <= base, "mempool back at baseline")
    assert d.alive()


@pytest.mark.parametrize("how", ["kill-peer", "del-port"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_stop_of_shaped_deferred_port_with_frames_in_the_pipeline(schednicd, sngen,
                                                                 sn_tmpdir, how, layout):
    """1 Mbit/s: the wheel and the guest ring hold frames when the device
    stops; every one is completed (dropped), the stop finishes, nothing
    leaks, and the daemon goes on (a new driver's frames flow)."""
    rate, n = 1_000_000, 5000            # 40 s at the limit: still sending at stop
    d, g = setup(schednicd, sngen, sn_tmpdir, rate, n)
    base = d.stats()["mempool"]["in_use"]
    (g.sync / "go-0").touch()
    wait_for(lambda: (lambda p: p["policy"]["wheel_depth"] > 0
                      and p["completion"]["held_now"] > 0)(ports(d)["vm0"]),
             "frames held in the wheel")
    if how == "kill-peer":
        g.proc.send_signal(signal.SIGKILL)
        g.proc.wait(10)
        d.wait_port_state("vm0", "down")
        t = wait_for(lambda: (lambda t: t if t["vm0"]["completion"]["held_now"] == 0
                              and t["vm0"]["policy"]["wheel_depth"] == 0
                              and t["vm0"]["policy"]["qfq_backlog"] == 0
                              else None)(ports(d)), "held frames completed")
        c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
        assert c["completed"] == c["popped"], c
        assert pol["drops"]["src_stopped"] > 0, pol     # dropped in the pipeline
        assert c["forced"] >= pol["drops"]["src_stopped"], (c, pol)
        assert accounted(t["vm0"]), pol
    else:
        d.rpc("port.del", {"name": "vm0"})
        assert "vm0" not in ports(d)
        g.proc.send_signal(signal.SIGKILL)
        g.proc.wait(10)
    assert d.alive()
    assert "did not release the ring" not in d.log_tail()
    wait_for(lambda: d.stats()["mempool"]["in_use"] <= base, "mempool back at baseline")
    if how == "del-port":
        return
    # A new driver on the same port: frames flow through the shaper again
    # (100 frames exceed the horizon at 1 Mbit/s: the excess is dropped).
    g2 = sngen([d.vhost_path("vm0")], "--marker", "--no-learn", "--size", str(FRAME),
               "--flow", f"src=0,dst={SINK_MAC},count=100")
    g2.wait("ready")
    d.wait_port_state("vm0", "up")
    b = ports(d)["vm0"]
    g2.go(0)
    t = wait_for(lambda: (lambda t: t if t["vm0"]["rx_packets"] == b["rx_packets"] + 100
                          and t["vm0"]["completion"]["held_now"] == 0
                          and t["vm0"]["policy"]["wheel_depth"] == 0
                          and t["vm0"]["policy"]["qfq_backlog"] == 0 else None)(ports(d)),
                 "new driver's frames sent or dropped")
    g2.finish()
    c = t["vm0"]["completion"]
    assert c["completed"] == c["popped"] == b["completion"]["popped"] + 100, c
    assert t["vm0"]["policy"]["uplink_packets"] > b["policy"]["uplink_packets"]
    assert accounted(t["vm0"]), t["vm0"]["policy"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_opted_in_guest_waits_in_its_ring_not_dropped_at_the_horizon(schednicd, sngen,
                                                                     sn_tmpdir, layout):
    """At 2 Mbit/s the wheel horizon (262 ms) holds 65 KB, the guest's ring
    256 KB: the opted-in guest's excess waits in its ring
    (completion.horizon_waits, waiting_now) instead of being dropped at the
    horizon (~190 of the first 256 frames would be, as `horizon`); the rate
    stays a hard limit and every frame is sent."""
    rate, n = 2_000_000, 1000          # 1 Mbyte: 4 s at the limit
    d, g = setup(schednicd, sngen, sn_tmpdir, rate, n)
    (g.sync / "go-0").touch()
    wait_for(lambda: ports(d)["vm0"]["completion"]["horizon_waits"] > 0, "ring left unpolled")
    waiting = []
    a, ta = ports(d), d.stats()["uptime_s"]
    for _ in range(15):
        time.sleep(0.1)
        waiting.append(ports(d)["vm0"]["completion"]["waiting_now"])
    b, tb = ports(d), d.stats()["uptime_s"]
    r = (b["vm0"]["policy"]["uplink_bytes"] - a["vm0"]["policy"]["uplink_bytes"]) * 8 / (tb - ta)
    assert r < rate * 1.05, r
    assert max(waiting) > 0, waiting               # frames waited in the ring
    # what the shaper took stays inside the horizon: < 65.5 KB of 1000 B frames
    assert b["vm0"]["policy"]["wheel_depth"] <= 66, b["vm0"]["policy"]
    g.wait("sent-0", timeout=120)
    t = wait_drained(d, "vm0", n, "everything sent")
    c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
    assert not any(pol["drops"].values()), pol     # no horizon drop
    assert pol["sent_packets"] == pol["uplink_packets"] == n, pol
    assert c["popped"] == c["completed"] == n and c["waiting_now"] == 0, c
    assert c["hold_timeouts"] == 0 and c["forced"] == 0, c
    g.finish()
    assert d.alive()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unmarked_frames_past_their_hold_limit_are_copied_at_release(schednicd, sngen,
                                                                    sn_tmpdir, layout):
    """A guest that did not opt in (no marker) has its frames held at
    most unmarked_max_hold_us (1000 us by default). On an uplink emulated
    at 2 Mbit/s a 1000-byte frame leaves every 4 ms, so all but the first
    frames of a 50-frame burst wait in the arbiter (QFQ) longer than that:
    when the arbiter releases one past its limit, it is copied out
    (completion.copied_out; a remote arbiter copies and hands the original
    back to its worker) and its descriptor completed, exactly once, and
    the copy is sent: nothing is dropped. In layout 1core the release
    path's hold check for a whole burst (sn_vqtx_keep_all; 2core releases
    on a remote arbiter, ncore has several workers: both check per frame)
    must see every one of them: a bound that let them through would send
    them zero-copy (with the bound 1000x too late, 1core copies none)."""
    rate, n = 2_000_000, 50      # 200 ms at the link rate
    d, g = setup(schednicd, sngen, sn_tmpdir, None, n, marker=False, policy=uplink_policy(rate))
    (g.sync / "go-0").touch()
    g.wait("sent-0", timeout=120)
    t = wait_drained(d, "vm0", n, "everything sent")
    c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
    assert c["popped"] == c["completed"] == n, c
    assert c["unmarked"] == n and c["marked"] == 0, c
    assert pol["offered_packets"] == n and accounted(t["vm0"]), pol
    assert not any(pol["drops"].values()), pol
    assert c["hold_timeouts"] == 0 and c["copy_no_mbuf"] == 0, c
    assert pol["released_packets"] == pol["sent_packets"] == n, pol
    assert c["copied_out"] >= n // 2, c           # all but the first few waited > 1 ms
    g.finish()
    assert d.alive()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stop_drops_the_frames_waiting_in_the_arbiter(schednicd, sngen, sn_tmpdir, layout):
    """An opted-in guest (marker, no hold limit) fills the arbiter of
    an uplink emulated at 2 Mbit/s (a 1000-byte frame every 4 ms), then its
    driver dies. Every frame still waiting in QFQ is dropped when released
    (src_stopped) and completed, not sent: the uplink sees only the few
    released before the stop was requested. The release path's hold check
    for a whole burst (sn_vqtx_keep_all, layout 1core) must give way while
    the stop is open (with the open-stop count ignored, 1core sends them
    all at the link rate)."""
    rate, n = 2_000_000, 400
    # unmarked_max_hold_us 10 s: the burst check's bound (the oldest
    # frame's pop + the shortest limit) stays ahead, so only the stop
    # can make it give way to the per-frame check
    d, g = setup(schednicd, sngen, sn_tmpdir, None, n, policy=uplink_policy(rate),
                 port={"unmarked_max_hold_us": 10_000_000})
    (g.sync / "go-0").touch()
    wait_for(lambda: ports(d)["vm0"]["policy"]["qfq_backlog"] > 100, "frames waiting in QFQ")
    g.proc.send_signal(signal.SIGKILL)
    g.proc.wait(10)
    d.wait_port_state("vm0", "down")
    t = wait_for(lambda: (lambda t: t if t["vm0"]["completion"]["held_now"] == 0
                          and t["vm0"]["policy"]["wheel_depth"] == 0
                          and t["vm0"]["policy"]["qfq_backlog"] == 0 else None)(ports(d)),
                 "held frames completed")
    c, pol = t["vm0"]["completion"], t["vm0"]["policy"]
    assert c["completed"] == c["popped"], c
    assert c["hold_timeouts"] == 0, c             # opted in, no limit
    assert accounted(t["vm0"]), pol
    # QFQ held > 100 at the kill; at 250 frames/s only a few left before
    # the stop (the kill, the disconnect and the stop take ms)
    assert pol["drops"]["src_stopped"] > 50, pol
    assert pol["sent_packets"] + pol["drops"]["src_stopped"] == pol["offered_packets"], pol
    assert "did not release the ring" not in d.log_tail(100000)
    assert d.alive()
