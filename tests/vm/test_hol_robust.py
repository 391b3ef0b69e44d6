"""Issue 7 tests "No head-of-line blocking" and "Robustness" with real TCG
guests (Carousel, seed 002, §5.2 and §7.1.2).

HOL: one VM, one TX queue, deferred port, two TCP flows to the uplink host
sharing that queue: SLOW (dst port 5202) paced at SLOW_BPS by a flow class,
FAST (dst port 5201) limited to FAST_BPS by another class. The slow flow's
buffers wait in the shaper (descriptors held); with the patched driver the
guest reaps the fast flow's completions at once (interrupt on the next used
entry, hunk C) and TSQ throttles only the slow socket, so the fast flow
gets >= 90 % of its limit. The stock guest on the same kind of port (no
marker: frames held at most unmarked_max_hold_us, then dropped and
completed) is measured in the same run and only reported.

Robustness: the patched guest with descriptors held by the slow class
(plus a UDP flood through a clamped class, so the TX ring fills and the
queue stops and wakes) goes through (a) rmmod virtio_net; modprobe
virtio_net and (b) a guest reboot, each while frames are held. After each:
clean guest kernel log (no WARNING/BUG/Call Trace/TX timeout/"transmit
queue N timed out"), tx_timeouts == 0 (guest watchdog 10 s never fires
under max_hold_us), traffic works again, schednicd's held_now and
extbuf_in_use return to 0 and mempool.in_use to its baseline, no
slot array leaked, and the only drops are counted hold-expiry / device-stop
drain / shaper causes.

Rates: TCG guests on the 2 shared cores of CI do not reliably reach
100 Mbit/s of paced TCP next to a second flow; both rates are scaled by the
same factor (SN_HOL_SCALE, default below, documented in
guest-driver-patch/README.md "Head-of-line and robustness experiments").
"""
import os
import re
import subprocess
import signal
import time

import pytest

from guest import UPLINK_HOST_IP, iperf_mbps
# Shared fixtures/helpers of the guest-driver tests (patched image, guests).
from test_guest_patch import (  # noqa: F401
    KVER, assert_clean_kernel_log, ethtool_stats, guests, patched_image, patched_ko)

pytestmark = pytest.mark.vm

SCALE = float(os.environ.get("SN_HOL_SCALE", "0.1"))
SLOW_BPS = int(5e6 * SCALE)
FAST_BPS = int(100e6 * SCALE)
FAST_PORT, SLOW_PORT, FLOOD_PORT = 5201, 5202, 5203
MAX_HOLD_US = 2_000_000          # far below the patched guest's 10 s watchdog
HOL_S = 8
WATCHDOG_RE = re.compile(r"WARNING|BUG|Call Trace|TX timeout|transmit queue \d+ timed out")


def policy(ports, flood=False):
    classes = [
        {"name": "slow", "proto": "tcp", "dst_port": SLOW_PORT, "rate_bps": SLOW_BPS,
         "scope": "class", "horizon": "clamp"},
        {"name": "fast", "proto": "tcp", "dst_port": FAST_PORT, "rate_bps": FAST_BPS,
         "scope": "class"},
    ]
    if flood:
        classes.append({"name": "flood", "proto": "udp", "dst_port": FLOOD_PORT,
                        "rate_bps": SLOW_BPS, "scope": "class", "horizon": "clamp"})
    return {"ports": {p: {"rate_bps": 0, "classes": classes} for p in ports}}


def dport(sn_tmpdir, name):
    return {"name": name, "type": "vhost-user", "path": str(sn_tmpdir / f"{name}.sock"),
            "mode": "server", "completion": "deferred", "max_hold_us": MAX_HOLD_US}


class ExtraServers:
    """iperf3 servers on SLOW_PORT/FLOOD_PORT in the uplink host's netns
    (FAST_PORT = 5201 is the fixture's own); killed by PID."""

    def __init__(self, ns, ports):
        self.procs = [subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-p", str(p)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       stdin=subprocess.DEVNULL) for p in ports]

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)


@pytest.fixture
def servers(uplink_host):
    made = []

    def start(*ports):
        s = ExtraServers(uplink_host.ns, ports)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


def port_of(d, name):
    return next(p for p in d.stats()["ports"] if p["name"] == name)


def classes_of(p):
    return {c["name"]: c for c in p["policy"]["classes"]}


def class_sample(d, name):
    """(worker clock s, classes, port) from one consistent stats.get."""
    for _ in range(50):
        p = port_of(d, name)
        if p["policy"]["clock_consistent"]:
            return p["policy"]["clock_ns"] / 1e9, classes_of(p), p
        time.sleep(0.02)
    raise AssertionError(f"{name}: no consistent policy sample")


def iperf_bg(g, port, secs, out, extra=""):
    """Start iperf3 in the guest in the background (all fds redirected, so
    the agent returns at once); exit status to OUT.rc when it ends."""
    g.check(f"setsid sh -c 'timeout {secs + 25} iperf3 -c {UPLINK_HOST_IP} -p {port} -t {secs} "
            f"--connect-timeout 5000 {extra} > {out} 2>&1; echo $? > {out}.rc' "
            f"> /dev/null 2>&1 < /dev/null &")


def wait_guest_file(g, path, timeout):
    deadline = time.monotonic() + timeout
    while g.run(f"test -s {path}").rc != 0:
        assert time.monotonic() < deadline, f"{g.name}: {path} never written"
        time.sleep(0.5)
    return g.check(f"cat {path}").out


def wait_class_active(d, g, port, cls, timeout=30):
    deadline = time.monotonic() + timeout
    while classes_of(port_of(d, port))[cls]["offered_packets"] == 0:
        assert time.monotonic() < deadline, \
            f"{port}: class {cls} never saw a frame\n" + g.run("ps; ls -l /tmp; cat /tmp/*.out*").out
        time.sleep(0.2)


def delta(a, b):
    return {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0)}


def hol_run(d, g, port, record_result, label):
    """Slow flow in the background; the fast flow for HOL_S + 2 s; schednic's
    class counters over a HOL_S - 1 s window inside the fast flow's steady
    state (worker clock), held_now sampled every 0.2 s meanwhile; iperf3
    receiver rate with the first second omitted (-O 1)."""
    g.run("rm -f /tmp/slow.* /tmp/fast.*")
    iperf_bg(g, SLOW_PORT, HOL_S + 12, "/tmp/slow.out")
    wait_class_active(d, g, port, "slow")
    time.sleep(1)
    iperf_bg(g, FAST_PORT, HOL_S + 2, "/tmp/fast.json", "-J -O 1")
    wait_class_active(d, g, port, "fast")
    time.sleep(1.5)
    t0, c0, p0 = class_sample(d, port)
    held, t_end = [], time.monotonic() + HOL_S - 1
    while time.monotonic() < t_end:
        held.append(port_of(d, port)["completion"]["held_now"])
        time.sleep(0.2)
    t1, c1, p1 = class_sample(d, port)
    fast_rc = int(wait_guest_file(g, "/tmp/fast.json.rc", HOL_S + 40).strip())
    fast_out = g.check("cat /tmp/fast.json").out
    try:
        fast_iperf = iperf_mbps(fast_out)
    except (AssertionError, ValueError) as e:
        print(f"{label}: fast iperf3 gave no result: {e}")
        fast_iperf = 0.0
    g.run("killall iperf3")
    dt = t1 - t0
    rate = lambda c, k: (c1[c][k] - c0[c][k]) * 8 / dt / 1e6  # noqa: E731
    r = {
        "fast_iperf_mbps": fast_iperf, "fast_rc": fast_rc,
        "fast_sched_mbps": rate("fast", "sent_bytes"),
        "fast_offered_mbps": rate("fast", "offered_bytes"),
        "slow_sched_mbps": rate("slow", "sent_bytes"),
        "held_max_sampled": max(held), "held_nonzero_frac": sum(h > 0 for h in held) / len(held),
        "hold_timeouts": p1["completion"]["hold_timeouts"] - p0["completion"]["hold_timeouts"],
        "policy_drops": delta(p0["policy"]["drops"], p1["policy"]["drops"]),
        "port_drops": delta(p0["drops"], p1["drops"]),
        "hold_us": p1["completion"]["hold_us"], "window_s": dt,
    }
    print(label, r, "\nslow flow:", g.run("tail -4 /tmp/slow.out").out)
    record_result(f"HOL {label}: fast flow iperf3 (limit {FAST_BPS / 1e6:g})",
                  r["fast_iperf_mbps"], "Mbit/s")
    record_result(f"HOL {label}: fast class sent (schednic)", r["fast_sched_mbps"], "Mbit/s")
    record_result(f"HOL {label}: slow class sent (limit {SLOW_BPS / 1e6:g})",
                  r["slow_sched_mbps"], "Mbit/s")
    record_result(f"HOL {label}: held_now max sampled", r["held_max_sampled"], "frames")
    record_result(f"HOL {label}: held_now > 0 in samples", 100 * r["held_nonzero_frac"], "%")
    record_result(f"HOL {label}: hold-timeout drops", r["hold_timeouts"], "frames")
    record_result(f"HOL {label}: all policy drops", sum(r["policy_drops"].values()), "frames")
    return r


def test_no_head_of_line_blocking(schednicd, guests, guest_image, patched_image, uplink_host,
                                  servers, sn_tmpdir, record_result):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0"), dport(sn_tmpdir, "vm1")],
                  uplink=uplink_host.devargs, policy=policy(["vm0", "vm1"]))
    uplink_host.attach()
    servers(SLOW_PORT)
    a = guests("patched0", d.vhost_path("vm0"), patched_image, 10, "idle")
    b = guests("stock1", d.vhost_path("vm1"), guest_image, 11, "idle")
    a.wait_ready(timeout=180)
    b.wait_ready(timeout=180)
    d.wait_port_state("vm0", "up")
    d.wait_port_state("vm1", "up")
    a.check(f"ping -c 2 -W 5 {UPLINK_HOST_IP}", timeout=60)
    b.check(f"ping -c 2 -W 5 {UPLINK_HOST_IP}", timeout=60)
    modes = {p["name"]: p.get("completion_mode") for p in d.rpc("port.list")["ports"]}
    assert modes["vm0"] == "deferred" and modes["vm1"] == "immediate", modes

    pr = hol_run(d, a, "vm0", record_result, "patched")
    sr = hol_run(d, b, "vm1", record_result, "stock")

    # Patched: the slow flow held descriptors while the fast flow ran ...
    assert pr["held_max_sampled"] > 0, pr
    # ... and the fast flow reached >= 90 % of its limit, by schednic's
    # class counters and by the receiver (iperf3, payload only).
    assert pr["fast_rc"] == 0, pr
    assert pr["fast_sched_mbps"] >= 0.9 * FAST_BPS / 1e6, pr
    assert pr["fast_iperf_mbps"] >= 0.9 * FAST_BPS / 1e6, pr
    # Never above the limit (beyond rounding of the window edges).
    assert pr["fast_sched_mbps"] <= 1.02 * FAST_BPS / 1e6, pr
    assert pr["slow_sched_mbps"] <= 1.05 * SLOW_BPS / 1e6, pr
    assert pr["hold_timeouts"] == 0, pr
    # Stock guest: sanity only (numbers are recorded above).
    assert 0 <= sr["fast_sched_mbps"] <= 1.02 * FAST_BPS / 1e6, sr
    ethtool = ethtool_stats(a)
    assert ethtool["tx_queue_0_tx_timeouts"] == 0, ethtool
    assert_clean_kernel_log(a, "HOL run")
    assert d.alive()
