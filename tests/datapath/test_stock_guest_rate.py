# SPDX-License-Identifier: BSD-3-Clause
"""A stock guest on a rate-limited deferred port gets its rate.

A guest that did not opt in (sn-gen without --marker, as a stock Linux
driver) may have its frames held at most unmarked_max_hold_us (1000 us by
default). Its 256-entry TX ring at 100 Mbit/s takes longer than that to
drain (64 B: 1.3 ms; 1500 B: 31 ms), so frames whose release time from the
port's rate limit is past that limit are copied out at submit
(completion.copied_out) and their descriptors completed at once, instead
of being held and dropped at the limit. Offered at line rate, the port
must deliver >= 99 % of its limit, drop nothing for its hold limit, and
hold no descriptor longer than the limit (plus the time the OS kept the
daemon's busiest thread off its CPU in the run, measured); where the ring
drains well within the limit (64 B at 1 Gbit/s: 0.13 ms) nothing is copied.
Topology as in tests/policy/test_deferred_policy.py: frames to an unknown
MAC go to a net_null uplink only.
"""
import time

import pytest

from snlib.hostwait import RunqueueWaits, load_seen, wait_quiet
from snlib.ports import ports
from snlib.wait import wait_for

pytestmark = pytest.mark.accuracy

SINK_MAC = "02:00:00:00:00:99"
QSIZE = 256
UNMARKED_US = 1000
WINDOW_S = 1.5
TRIES = 3


def run(schednicd, sngen, sn_tmpdir, rate, size):
    """One daemon and one stock peer at line rate: the rate delivered over
    WINDOW_S, the frames copied out and popped in it, the final completion
    counters and port stats, and the host's load before."""
    host = wait_quiet()
    d = schednicd(ports=[{"name": "vm0", "type": "vhost-user", "mode": "server",
                          "path": str(sn_tmpdir / f"vm0-{time.monotonic_ns()}.sock"),
                          "completion": "deferred", "unmarked_max_hold_us": UNMARKED_US}],
                  uplink="net_null0,no-rx=1",
                  policy={"ports": {"vm0": {"rate_bps": rate}}},
                  datapath={"mbufs": 16383})
    g = sngen([d.config["ports"][0]["path"]], "--no-learn", "--size", str(size),
              "--queue-size", str(QSIZE), "--flow", f"src=0,dst={SINK_MAC},count=1000000000")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")
    rq = RunqueueWaits(d.proc.pid)
    (g.sync / "go-0").touch()
    wait_for(lambda: ports(d)["vm0"]["policy"]["uplink_packets"] > 100, "traffic shaped")
    time.sleep(0.3)
    a, ta = ports(d)["vm0"], d.stats()["uptime_s"]
    time.sleep(WINDOW_S)
    b, tb = ports(d)["vm0"], d.stats()["uptime_s"]
    delivered = (b["policy"]["uplink_bytes"] - a["policy"]["uplink_bytes"]) * 8 / (tb - ta)
    g.finish(timeout=60)
    t = wait_for(lambda: (lambda v: v if v["completion"]["held_now"] == 0
                          and v["policy"]["wheel_depth"] == 0 else None)(ports(d)["vm0"]),
                 "everything sent")
    c = t["completion"]
    r = {"delivered": delivered, "ratio": round(delivered / rate, 4),
         "copied": b["completion"]["copied_out"] - a["completion"]["copied_out"],
         "popped": b["completion"]["popped"] - a["completion"]["popped"],
         "hold_timeouts": c["hold_timeouts"], "copy_no_mbuf": c["copy_no_mbuf"],
         "hold_max_us": c["hold_us"]["max"],
         # a hold can pass the limit only while the OS keeps a daemon
         # thread off its CPU: the longest such wait of the run, in us
         "host_stall_us": rq.ms()["daemon_wait_ms"] * 1000, "drops": {k: v for k, v in
                                                      t["policy"]["drops"].items() if v},
         "host": host}
    print(f"rate {rate / 1e6:g} Mbit/s, {size} B: {r}")
    assert c["unmarked"] > 0 and c["marked"] == 0, c
    assert c["popped"] == c["completed"], c
    assert d.alive()
    d.stop()
    return r


def measure(schednicd, sngen, sn_tmpdir, rate, size, good):
    """run() until good(result) holds, TRIES times at most (a loaded host
    can keep the worker off its CPU for longer than the hold limit, and
    the hold maximum covers the whole run: runs are kept short); the
    failure lists every try with the load seen."""
    tries = []
    for _ in range(TRIES):
        r = run(schednicd, sngen, sn_tmpdir, rate, size)
        tries.append(r)
        if good(r):
            return r
    pytest.fail(f"{rate / 1e6:g} Mbit/s {size} B: no good try in {TRIES}; "
                f"load {load_seen()}; tries: {tries}")


@pytest.mark.parametrize("size", [64, 1500])
def test_stock_guest_gets_its_rate_limit(schednicd, sngen, sn_tmpdir, size):
    """100 Mbit/s: the ring cannot drain within the hold limit (64 B:
    1.3 ms, 1500 B: 31 ms); the frames that would overstay it are copied
    out, and the port still delivers its limit."""
    rate = 100_000_000
    measure(schednicd, sngen, sn_tmpdir, rate, size,
            lambda r: (0.99 * rate <= r["delivered"] <= 1.02 * rate
                       and r["hold_timeouts"] == 0 and not r["drops"]
                       and r["copied"] > r["popped"] // 2 and r["copy_no_mbuf"] == 0
                       and r["hold_max_us"] <= UNMARKED_US + r["host_stall_us"]))


def test_stock_guest_not_copied_where_its_ring_drains(schednicd, sngen, sn_tmpdir):
    """64 B at 1 Gbit/s: 256 frames leave in 0.13 ms, well inside the
    limit less its margin: zero-copy but for the frames a worker
    descheduled past the limit finds late (at most 2 %)."""
    measure(schednicd, sngen, sn_tmpdir, 1_000_000_000, 64,
            lambda r: (r["popped"] > 1000 and r["copied"] <= r["popped"] // 50
                       and r["hold_timeouts"] == 0))
