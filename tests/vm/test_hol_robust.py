# SPDX-License-Identifier: BSD-3-Clause
"""No head-of-line blocking, and robustness of held descriptors, with real
TCG guests (Carousel, SIGCOMM 2017, §5.2 and §7.1.2).

HOL: one VM, one TX queue, deferred port, two TCP flows to the uplink host
sharing that queue: SLOW (dst port 5202) paced at 5 Mbit/s by a flow class,
FAST (dst port 5201) limited to 100 Mbit/s by another class (both scaled,
see below). The slow flow's
buffers wait in the shaper (descriptors held); with the patched driver the
guest reaps the fast flow's completions at once (interrupt on the next used
entry, hunk C) and TSQ throttles only the slow socket, so the fast flow
gets >= 90 % of its limit. The stock guest on the same kind of port (no
marker: frames held at most unmarked_max_hold_us, then dropped and
completed) is measured in the same run and only reported. A run where the
patched guest could not offer its load in any attempt is an xfail with
the numbers, only if its QEMU waited for a CPU >= 20 % of the window or
the fast flow alone (control, no slow flow: no HOL possible) missed the
limit too.

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

Rates: the nominal 100 Mbit/s (fast) and 5 Mbit/s (slow) by default. The
test first measures the patched guest's unshaped TCP through the unpaced
fast class (best of up to 3 probes); only when the guest cannot reach 2x
the fast limit right now (a TCG guest on a loaded host: 5-302 Mbit/s
measured at load 8-23; 604-788 Mbit/s on a quieter host) does it fall
back to scaling both rates by one factor, min(SN_HOL_SCALE (default 1),
CAP_FRACTION x capacity / 100 Mbit/s), floor 0.01, and it prints why
(SN_HOL_FALLBACK=0: never); the rates used are recorded with the results
("HOL rates used"). Documented with the numbers in
guest-driver-patch/README.md ("Head-of-line and robustness experiments").
The robustness test uses fixed 10 / 0.5 Mbit/s.
"""
import os
import re
import subprocess
import signal
import time

import pytest

from guest import UPLINK_HOST_IP, iperf_mbps, quiet_stats, sched_ns
# Shared fixtures/helpers of the guest-driver tests (patched image, guests).
from test_guest_patch import (  # noqa: F401
    assert_clean_kernel_log, ethtool_stats, guests, patched_image, patched_ko, reload_module)

pytestmark = pytest.mark.vm

SCALE = float(os.environ.get("SN_HOL_SCALE", "1"))   # at most; see hol_rates()
CAP_FRACTION = 0.5        # fast limit <= this share of the guest's unshaped rate
HOL_FAST_BPS, HOL_SLOW_BPS = 100_000_000, 5_000_000   # the nominal rates
PROBE_TRIES = 3           # capacity probes before falling back
# SN_HOL_FALLBACK=0: the nominal rates whatever the probe says (to measure
# what a guest below 2x the fast limit gets; the probe is still recorded)
FALLBACK = os.environ.get("SN_HOL_FALLBACK", "1") != "0"
# Robustness: fixed rates well inside what a loaded TCG guest reaches.
SLOW_BPS = 500_000
FAST_BPS = 10_000_000
FAST_PORT, SLOW_PORT, FLOOD_PORT = 5201, 5202, 5203
MAX_HOLD_US = 2_000_000          # far below the patched guest's 10 s watchdog
HOL_S = 5
HOL_TRIES = 3
STARVED = 0.2    # guest QEMU runnable without a CPU >= 20 % of a window
WATCHDOG_RE = re.compile(r"WARNING|BUG|Call Trace|TX timeout|transmit queue \d+ timed out")


def policy(ports, fast_bps=FAST_BPS, slow_bps=SLOW_BPS, flood=False):
    classes = [
        {"name": "slow", "proto": "tcp", "dst_port": SLOW_PORT, "rate_bps": slow_bps,
         "scope": "class"},
        {"name": "fast", "proto": "tcp", "dst_port": FAST_PORT, "rate_bps": fast_bps,
         "scope": "class"},
    ]
    if flood:
        classes.append({"name": "flood", "proto": "udp", "dst_port": FLOOD_PORT,
                        "rate_bps": slow_bps, "scope": "class", "horizon": "clamp"})
    return {"ports": {p: {"rate_bps": 0, "classes": classes} for p in ports}}


# Hold limit of the stock guest's frames (no marker). 1000 = the daemon's
# default (a stock guest is never held long); setting it to MAX_HOLD_US
# lets the shaper hold the stock guest as long as the patched one, which
# shows the stock driver's 3/4-threshold stall itself (README numbers).
STOCK_UNMARKED_US = int(os.environ.get("SN_HOL_STOCK_UNMARKED_US", "1000"))


def dport(sn_tmpdir, name, unmarked_us=1000):
    return {"name": name, "type": "vhost-user", "path": str(sn_tmpdir / f"{name}.sock"),
            "mode": "server", "completion": "deferred", "max_hold_us": MAX_HOLD_US,
            "unmarked_max_hold_us": unmarked_us}


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
    """(worker clock s, classes, port) from one consistent stats.get.
    Polled for up to 10 s: a worker descheduled inside a release batch on
    a loaded host can keep the pair inconsistent for over 1 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        p = port_of(d, name)
        if p["policy"]["clock_consistent"]:
            return p["policy"]["clock_ns"] / 1e9, classes_of(p), p
        time.sleep(0.01)
    raise AssertionError(f"{name}: no consistent policy sample in 10 s")


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


def class_frames(d, port):
    return {n: c["offered_packets"] for n, c in classes_of(port_of(d, port)).items()}


def wait_class_active(d, g, port, cls, since=None, timeout=30):
    """Until class `cls` of `port` got a frame (after the counts `since`)."""
    base = (since or {}).get(cls, 0)
    deadline = time.monotonic() + timeout
    while class_frames(d, port)[cls] <= base:
        assert time.monotonic() < deadline, \
            f"{port}: class {cls} never saw a frame\n" + g.run("ps; cat /tmp/*.out*").out
        time.sleep(0.2)


def delta(a, b):
    return {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0)}


def hol_run(d, g, port, record_result, label, fast_bps, slow_bps, with_slow=True):
    """Slow flow in the background; the fast flow for HOL_S + 2 s; schednic's
    class counters over a HOL_S - 1 s window inside the fast flow's steady
    state (worker clock), held_now sampled every 0.2 s meanwhile; iperf3
    receiver rate with the first second omitted (-O 1)."""
    g.run("rm -f /tmp/slow.* /tmp/fast.*")
    since = class_frames(d, port)
    if with_slow:
        iperf_bg(g, SLOW_PORT, HOL_S + 12, "/tmp/slow.out")
        wait_class_active(d, g, port, "slow", since)
        time.sleep(1)
    iperf_bg(g, FAST_PORT, HOL_S + 2, "/tmp/fast.json", "-J -O 1")
    # iperf3's control connection matches the class too: wait for data
    # (64 KiB), since a loaded guest may take seconds to start the stream.
    b0 = classes_of(port_of(d, port))["fast"]["offered_bytes"]
    deadline = time.monotonic() + 30
    while classes_of(port_of(d, port))["fast"]["offered_bytes"] < b0 + 65536:
        assert time.monotonic() < deadline, f"{port}: fast flow never started"
        time.sleep(0.1)
    time.sleep(1)
    t0, c0, p0 = class_sample(d, port)
    q0, w0 = sched_ns(g.proc.pid), time.monotonic()
    held, t_end = [], time.monotonic() + HOL_S - 1
    while time.monotonic() < t_end:
        held.append(port_of(d, port)["completion"]["held_now"])
        time.sleep(0.2)
    t1, c1, p1 = class_sample(d, port)
    q1, w1 = sched_ns(g.proc.pid), time.monotonic()
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
        # host CPU the guest's QEMU got / was runnable without, per second
        "guest_cpu": (q1[0] - q0[0]) / 1e9 / (w1 - w0),
        "guest_wait": (q1[1] - q0[1]) / 1e9 / (w1 - w0),
        "load": os.getloadavg()[0],
    }
    print(label, r, "\nslow flow:", g.run("tail -4 /tmp/slow.out").out if with_slow else "-")
    record_result(f"HOL {label}: fast flow iperf3 (limit {fast_bps / 1e6:g})",
                  r["fast_iperf_mbps"], "Mbit/s")
    record_result(f"HOL {label}: fast class sent (schednic)", r["fast_sched_mbps"], "Mbit/s")
    record_result(f"HOL {label}: slow class sent (limit {slow_bps / 1e6:g})",
                  r["slow_sched_mbps"], "Mbit/s")
    record_result(f"HOL {label}: held_now max sampled", r["held_max_sampled"], "frames")
    record_result(f"HOL {label}: held_now > 0 in samples", 100 * r["held_nonzero_frac"], "%")
    record_result(f"HOL {label}: hold-timeout drops", r["hold_timeouts"], "frames")
    record_result(f"HOL {label}: all policy drops", sum(r["policy_drops"].values()), "frames")
    record_result(f"HOL {label}: guest QEMU runnable, waiting for a CPU",
                  100 * r["guest_wait"], "%")
    return r


def hol_rates(d, g, record_result):
    """The nominal 100 / 5 Mbit/s when this guest's unpaced TCP through the
    fast class alone reaches 1 / CAP_FRACTION times the fast limit right
    now (best of up to PROBE_TRIES 3 s probes); else (fallback, printed
    with the reason) both times the same factor, at most SCALE and at
    most CAP_FRACTION of that capacity."""
    # First second omitted: a guest's first TCP stream after boot can
    # stall for a while (a 2 s probe once read 0.0 Mbit/s). The best of up
    # to PROBE_TRIES probes: one probe read 26.9 Mbit/s during a burst of
    # other load where the run before had read 788.5.
    cap = 0.0
    for _ in range(PROBE_TRIES):
        r = g.run(f"timeout 40 iperf3 -c {UPLINK_HOST_IP} -p {FAST_PORT} -t 3 -O 1 -J "
                  f"--connect-timeout 5000", timeout=80)
        cap = max(cap, iperf_mbps(r.out))
        if CAP_FRACTION * cap >= HOL_FAST_BPS / 1e6:
            break
    scale = max(0.01, min(SCALE, CAP_FRACTION * cap / (HOL_FAST_BPS / 1e6)))
    if not FALLBACK:
        scale = SCALE
    fast, slow = int(HOL_FAST_BPS * scale), int(HOL_SLOW_BPS * scale)
    if scale < 1:
        why = (f"SN_HOL_SCALE={SCALE:g}" if scale == SCALE or not FALLBACK else
               f"the guest's unshaped TCP reached {cap:.1f} Mbit/s < "
               f"{HOL_FAST_BPS / CAP_FRACTION / 1e6:g} Mbit/s (2x the fast limit)")
        print(f"HOL fallback: {why}: rates scaled by {scale:.3f} to "
              f"{fast / 1e6:g} / {slow / 1e6:g} Mbit/s (nominal: 100 / 5)")
    else:
        print(f"HOL at the nominal rates 100 / 5 Mbit/s (capacity probe {cap:.1f} Mbit/s"
              f"{'' if FALLBACK else ', SN_HOL_FALLBACK=0'})")
    record_result("HOL patched guest alone, unpaced (capacity probe)", cap, "Mbit/s")
    record_result("HOL scale factor x1000", 1000 * scale, "")
    record_result("HOL rates used: fast limit", fast / 1e6, "Mbit/s")
    record_result("HOL rates used: slow limit", slow / 1e6, "Mbit/s")
    return fast, slow


def test_no_head_of_line_blocking(schednicd, guests, guest_image, patched_image, uplink_host,
                                  servers, sn_tmpdir, record_result):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0"), dport(sn_tmpdir, "vm1", STOCK_UNMARKED_US)],
                  uplink=uplink_host.devargs, policy=policy(["vm0", "vm1"], fast_bps=0))
    uplink_host.attach()
    servers(SLOW_PORT)
    a = guests("patched0", d.vhost_path("vm0"), patched_image, 10, "idle")
    b = guests("stock1", d.vhost_path("vm1"), guest_image, 11, "idle")
    a.wait_ready(timeout=180)
    b.wait_ready(timeout=180)
    d.wait_port_state("vm0", "up")
    d.wait_port_state("vm1", "up")
    # The backend counts a queue as opted in after SN_VQTX_OPTIN_AFTER (8)
    # marked frames: 10 echo requests make that certain (with 2, whether
    # the guest has sent 8 frames depends on its other traffic).
    a.check(f"ping -c 10 -W 5 {UPLINK_HOST_IP}", timeout=90)
    b.check(f"ping -c 2 -W 5 {UPLINK_HOST_IP}", timeout=60)
    modes = {p["name"]: p.get("completion_mode") for p in d.rpc("port.list")["ports"]}
    assert modes["vm0"] == "deferred" and modes["vm1"] == "immediate", modes
    fast, slow = hol_rates(d, a, record_result)
    d.rpc("policy.set", {"policy": policy(["vm0", "vm1"], fast, slow)})
    # Control (recorded, not asserted): the fast flow alone at its limit,
    # what this guest offers without a slow flow on its queue right now.
    cr = hol_run(d, a, "vm0", record_result, "patched control (fast flow alone)", fast, slow,
                 with_slow=False)

    # A TCG guest descheduled by the loaded host cannot offer its load;
    # such a window is measured again (at most HOL_TRIES, every attempt
    # recorded), as tests/policy does for its rate windows.
    for attempt in range(HOL_TRIES):
        pr = hol_run(d, a, "vm0", record_result, f"patched#{attempt}", fast, slow)
        if min(pr["fast_sched_mbps"], pr["fast_iperf_mbps"]) >= 0.9 * fast / 1e6:
            break
    sr = hol_run(d, b, "vm1", record_result, f"stock (unmarked hold {STOCK_UNMARKED_US} us)",
                 fast, slow)

    def reached(r):
        return min(r["fast_sched_mbps"], r["fast_iperf_mbps"]) >= 0.9 * fast / 1e6

    if not reached(pr) and (pr["guest_wait"] >= STARVED or not reached(cr)):
        # The guest could not offer its load in any attempt, and either its
        # QEMU was runnable without a CPU >= STARVED of the last window or
        # the same guest missed the limit with the fast flow alone too (no
        # slow flow, so no head-of-line blocking possible): the loaded host,
        # not the mechanism (at load 11-14 both can read 0 frames through
        # schednic for whole windows). Stated, never passed.
        pytest.xfail(f"guest starved on the loaded host: fast flow {pr['fast_sched_mbps']:.1f}"
                     f" / {pr['fast_iperf_mbps']:.1f} Mbit/s (schednic / iperf3) of "
                     f"{fast / 1e6:g}, alone {cr['fast_sched_mbps']:.1f} / "
                     f"{cr['fast_iperf_mbps']:.1f}; guest QEMU waited for a CPU "
                     f"{100 * pr['guest_wait']:.0f} % of the window, load {pr['load']:.1f}")
    # Patched: the slow flow held descriptors while the fast flow ran ...
    assert pr["held_max_sampled"] > 0, pr
    # ... and the fast flow reached >= 90 % of its limit, by schednic's
    # class counters and by the receiver (iperf3, payload only).
    assert pr["fast_rc"] == 0, pr
    assert pr["fast_sched_mbps"] >= 0.9 * fast / 1e6, pr
    assert pr["fast_iperf_mbps"] >= 0.9 * fast / 1e6, pr
    # Never above the limit (beyond rounding of the window edges).
    assert pr["fast_sched_mbps"] <= 1.02 * fast / 1e6, pr
    assert pr["slow_sched_mbps"] <= 1.05 * slow / 1e6, pr
    assert pr["hold_timeouts"] == 0, pr
    # Stock guest: sanity only (numbers are recorded above).
    assert 0 <= sr["fast_sched_mbps"] <= 1.02 * fast / 1e6, sr
    ethtool = ethtool_stats(a)
    assert ethtool["tx_queue_0_tx_timeouts"] == 0, ethtool
    assert_clean_kernel_log(a, "HOL run")
    assert d.alive()


# ------------------------------------------------------------- robustness
# Drops that are allowed in the robustness test: every one is counted where
# it happened and is what a device stop / hold limit / shaper must do.
ALLOWED_POLICY_DROPS = {"hold_timeout", "src_stopped", "horizon"}
# Egress drops towards the guest while its driver is gone (ACKs from the
# uplink host) and floods nobody receives.
ALLOWED_PORT_DROPS = {"port_down", "unknown_dst", "ring_full"}
HELD_TARGET = 200          # of 256 TX descriptors (the queue stops at < 19 free)


def reload_with_modprobe(g):
    """rmmod virtio_net; modprobe virtio_net (the patched module in
    updates/ wins), then configure the NIC as the guest's /init does."""
    reload_module(g, "modprobe virtio_net", down_first=False, tries=100, timeout=90)


def wait_daemon_idle(d, port, baseline, timeout=30):
    """held_now == 0, extbuf_in_use == 0 and mempool.in_use == baseline."""
    deadline = time.monotonic() + timeout
    while True:
        st = d.stats()
        c = next(p for p in st["ports"] if p["name"] == port)["completion"]
        got = (c["held_now"], c["extbuf_in_use"], st["mempool"]["in_use"])
        if got == (0, 0, baseline):
            return st
        if time.monotonic() > deadline:
            pytest.fail(f"{port}: (held_now, extbuf_in_use, mempool.in_use) = {got}, "
                        f"want (0, 0, {baseline}); completion {c}")
        time.sleep(0.5)


def start_held_traffic(d, g):
    """Slow TCP flow + a UDP flood through the clamped class (8 sockets:
    more skbs than the 256-entry TX ring, so the ring fills and the queue
    stops/wakes); returns the largest held_now seen, once it reached
    HELD_TARGET (the ring is then nearly full) or after 20 s."""
    since = class_frames(d, "vm0")
    iperf_bg(g, SLOW_PORT, 120, "/tmp/slow.out")
    iperf_bg(g, FLOOD_PORT, 120, "/tmp/flood.out", f"-u -b {20 * SLOW_BPS} -l 1200 -P 8")
    wait_class_active(d, g, "vm0", "slow", since)
    wait_class_active(d, g, "vm0", "flood", since)
    held, t_end = 0, time.monotonic() + 20
    while time.monotonic() < t_end and held < HELD_TARGET:
        held = max(held, port_of(d, "vm0")["completion"]["held_now"])
        time.sleep(0.1)
    return held


def test_robust_reload_and_reboot_while_held(schednicd, guests, patched_image, uplink_host,
                                             servers, sn_tmpdir, record_result):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0")], uplink=uplink_host.devargs,
                  policy=policy(["vm0"], flood=True))
    uplink_host.attach()
    a = guests("patched0", d.vhost_path("vm0"), patched_image, 10, "idle")
    a.wait_ready(timeout=180)
    d.wait_port_state("vm0", "up")
    a.check(f"ping -c 2 -W 5 {UPLINK_HOST_IP}", timeout=60)
    baseline = quiet_stats(d)["mempool"]["in_use"]
    assert port_of(d, "vm0")["completion"]["extbuf_in_use"] == 0

    for action in ("reload", "reboot"):
        srv = servers(SLOW_PORT, FLOOD_PORT)
        held = start_held_traffic(d, a)
        c0 = port_of(d, "vm0")["completion"]
        es = ethtool_stats(a)
        print(action, "before: held", held, "completion", c0, "\nethtool",
              {k: v for k, v in es.items() if k.startswith("tx_queue_0_")})
        record_result(f"robustness {action}: held_now max before", held, "frames")
        record_result(f"robustness {action}: guest tx wakes before", es["tx_queue_0_wakes"],
                      "wakes")
        assert held > 0, "no descriptors held before the " + action
        record_result(f"robustness {action}: guest inflight_max before",
                      es["tx_queue_0_inflight_max"], "skbs")
        assert es["tx_queue_0_tx_timeouts"] == 0, es
        if action == "reload":
            reload_with_modprobe(a)
            assert a.check("cat /sys/module/virtio_net/parameters/deferred").out.strip() == "Y"
            a.run("killall iperf3")
        else:
            a.reboot()
            a.wait_ready(timeout=180)
        d.wait_port_state("vm0", "up")
        srv.close()
        st = wait_daemon_idle(d, "vm0", baseline)
        c1 = next(p for p in st["ports"] if p["name"] == "vm0")["completion"]
        print(action, "after: completion", c1)
        record_result(f"robustness {action}: drained at device stop (forced)",
                      c1["forced"] - c0["forced"], "frames")

        # Traffic works again (through the fast class), and the guest's
        # driver is the patched one, opted in again on the new connection.
        a.check(f"ping -c 3 -W 5 {UPLINK_HOST_IP}", timeout=60)
        # A second try: a guest's first TCP stream after boot can stall on
        # a loaded host (0.94 Mbit/s at load 12 after the reboot, against
        # 5.9-9.8 Mbit/s otherwise).
        mbps = a.iperf(UPLINK_HOST_IP, 2)
        if mbps <= 1:
            print(f"{action}: iperf3 after gave {mbps:.2f} Mbit/s, trying again")
            mbps = a.iperf(UPLINK_HOST_IP, 2)
        record_result(f"robustness {action}: iperf3 after", mbps, "Mbit/s")
        assert mbps > 1, "no traffic after the " + action
        assert port_of(d, "vm0")["completion_mode"] == "deferred"
        wait_daemon_idle(d, "vm0", baseline)

        es = ethtool_stats(a)
        assert es["tx_queue_0_tx_timeouts"] == 0, es
        assert_clean_kernel_log(a, action)
        console = a.console_path.read_text(errors="replace")
        bad = [ln for ln in console.splitlines() if WATCHDOG_RE.search(ln)]
        assert not bad, f"guest console after {action}:\n" + "\n".join(bad)
        assert d.alive()

    # The guest keeps sending now and then (ARP, neighbour discovery), so a
    # single snapshot can catch a frame in flight: wait for the port to be
    # idle, which fails if a descriptor or an extbuf stays held.
    st = wait_daemon_idle(d, "vm0", baseline)
    p = next(q for q in st["ports"] if q["name"] == "vm0")
    c = p["completion"]
    print("final", p)
    assert c["slots_leaked"] == 0 and c["extbuf_in_use"] == 0 and c["held_now"] == 0, c
    assert c["no_mbuf"] == 0 and c["offload"] == 0, c
    assert not any(c["vring_errors"].values()), c
    assert c["forced"] + c["hold_timeouts"] > 0, "nothing was held at the device stops"
    bad = {k: v for k, v in p["policy"]["drops"].items() if v and k not in ALLOWED_POLICY_DROPS}
    assert not bad, p["policy"]["drops"]
    bad = {k: v for k, v in p["drops"].items() if v and k not in ALLOWED_PORT_DROPS}
    assert not bad, p["drops"]
    for k in ("hold_timeouts", "forced", "late_free"):
        record_result(f"robustness total completion.{k}", c[k], "frames")
    for k in sorted(ALLOWED_POLICY_DROPS | ALLOWED_PORT_DROPS):
        record_result(f"robustness total drops.{k}",
                      p["policy"]["drops"].get(k, 0) + p["drops"].get(k, 0), "frames")
