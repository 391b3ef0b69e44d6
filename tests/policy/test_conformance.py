# SPDX-License-Identifier: BSD-3-Clause
"""Rate conformance (Carousel §7.1.1): a port limited to R for
R in {1, 10, 100, 1000} Mbit/s, mean absolute deviation of 100 ms samples
from R <= 1 %.

Setup and method: scripts/bench/conformance.py (shared with the
benchmark, which adds the Linux HTB baseline). sn-gen offers 1.2 R on vm0;
the shaped frames leave through the uplink, a net_vhost ethdev whose peer
is sn-gen's sampling sink (--sample-ms 100, CLOCK_MONOTONIC timestamps).

What is asserted, and why: on this shared 2-core machine the daemon's
worker and sn-gen are each kept off their CPU for a large part of every
window by other busy pollers (measured: runqueue wait 60-80 % of the
window). A stalled worker releases the frames that fell due during the
stall at once, and a stalled sink reads late, so receiver-side 100 ms
samples wobble by the OS time slice (several %) whatever the shaper does.
The shaper's own conformance is therefore asserted on its output counter
(released_bytes: what left the rate limiter) sampled every 100 ms against
the worker's clock (clock_ns, exact pairs only): <= 1 % at every rate, in
a window where the machine let every stage keep up (no underrun, no link
reset, sink ring never full, exact pairs all along; up to 5 windows).
The receiver-side deviation is asserted too when the daemon ran the
whole window (no thread of it waited more than 1 % of the window), and
printed otherwise: the sink's own stalls do not matter (sn-gen takes
each sample's time before the pass that finds its rings empty, so a late
sink moves a sample's time, not its bytes), but a stalled worker releases
late, which is real output error at the receiver and is not hidden.

Each window first waits (bounded, snlib.hostwait.wait_quiet) for a host
whose other processes leave the CPUs to the daemon and sn-gen. 1 Gbit/s
needs sn-gen to offer 100 kframes/s of 1500 B and the daemon to shape and
forward them: a host that keeps either off its CPU for more than half of
every window (conf.starved, runqueue wait from schedstat) makes the test
fail, and the message says so, with the waits and the load it saw.

Linux HTB (scripts/bench/conformance.py run_htb: veth between two
namespaces, iperf3 -u -b 0, receiver rx_bytes every 100 ms) runs at the
same R after schednic's window, in the same test: its deviation is shown
beside ours in the terminal summary ("schednic policy measurements"),
not asserted.
"""
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402
from snlib.hostwait import loadavg, wait_quiet  # noqa: E402

pytestmark = pytest.mark.accuracy

RATES = [1_000_000, 10_000_000, 100_000_000, 1_000_000_000]


CONFORMANCE = "rate conformance: mean abs. deviation of 100 ms samples from R (Carousel 7.1.1)"


@pytest.mark.parametrize("rate", RATES, ids=lambda r: f"{r // 1_000_000}M")
def test_rate_conformance(build_dir, rate, measured):
    with conf.conformance_port(build_dir, rate) as s:
        s.wait_flowing()
        time.sleep(0.5)
        tries, hosts = [], []
        for _ in range(5):
            hosts.append(wait_quiet(pids=[s.daemon.pid, s.gen.pid]))
            m = conf.measure(s, "vm0", 0, rate, 3.0)
            tries.append(m)
            if conf.clean(m):
                break
        alive = s.daemon.poll() is None
        vm0 = {p["name"]: p for p in s.stats()["ports"]}["vm0"]
    # Linux HTB at the same R in the same run, by the same metric
    # (scripts/bench/conformance.py run_htb): reported beside ours, not
    # asserted; a failed baseline shows as its error
    try:
        htb = conf.run_htb(rate, 3.0)["dev_pct"]
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"\nHTB baseline at {rate} bit/s failed: {e!r}")
        htb = f"failed: {type(e).__name__}"
    sink_asserted = m["daemon_wait_ms"] < 0.01 * m["window_s"] * 1000
    measured(CONFORMANCE, R=f"{rate // 1_000_000}M", **{
        "shaper dev %": m["worker_dev_pct"], "bound %": "<= 1",
        "sink dev %": m["sink_dev_pct"], "sink bound %": "<= 1" if sink_asserted else "(shown)",
        "HTB dev %": htb,
        "mean err %": abs(m["worker_mean_bps"] - rate) / rate * 100
        if m["worker_mean_bps"] else None, "mean bound %": "< 0.5",
        "window": "clean" if conf.clean(m) else
        "starved: fail" if all(conf.starved(t) for t in tries) else "unclean: fail",
        "tries": len(tries)})
    print(f"\n{rate} bit/s: HTB dev {htb} %")
    if not conf.clean(m):
        why = ("the host kept the daemon or sn-gen off its CPU for > 50 % of every window"
               if all(conf.starved(t) for t in tries) else "not explained by runqueue waits")
        pytest.fail(f"no clean 3 s window at {rate} bit/s in {len(tries)} tries ({why}); "
                    f"runqueue waits ms (daemon, sn-gen) per try: "
                    f"{[(t['daemon_wait_ms'], t['sngen_wait_ms']) for t in tries]}; "
                    f"host before each try: {hosts}; load now {loadavg()}; last window: {m}")
    print(f"\n{rate} bit/s: {m}")
    assert m["worker_samples"] >= 20, m
    assert m["worker_dev_pct"] <= 1.0, m
    # the whole window's mean is exact: the shaper is deterministic
    assert abs(m["worker_mean_bps"] - rate) / rate < 0.005, m
    # offered > R: the excess is dropped at the horizon, or held back in
    # the guest's ring once the port's frames reach its mbuf quota
    held_back = vm0["quota"]["mbufs"]["hits"]
    assert m["drops"].get("horizon", 0) > 0 or held_back > 0, (m, vm0["quota"])
    assert set(m["drops"]) <= {"horizon"}, m             # nothing else lost inside
    if sink_asserted:
        assert m["sink_dev_pct"] <= 1.0, m
    assert alive


def test_top_shows_the_shaped_rate(build_dir):
    """schednicctl top under traffic: vm0 limited to 10 Mbit/s, offered 12:
    SENT_MBPS ~ 10, OFFERED_MBPS ~ 12, arbiter decisions/s ~ the frame rate,
    horizon drops/s shown (rates over the worker's clock)."""
    rate = 10_000_000
    ctl = Path(__file__).resolve().parents[2] / "scripts" / "schednicctl"
    with conf.conformance_port(build_dir, rate) as s:
        s.wait_flowing()
        time.sleep(0.5)
        hosts = []
        for _ in range(5):
            hosts.append(wait_quiet(pids=[s.daemon.pid, s.gen.pid]))
            p0 = s.port_policy()["vm0"]
            r = subprocess.run([sys.executable, str(ctl), "-s", s.ctl, "top", "--once", "-d", "2"],
                               capture_output=True, text=True, timeout=30)
            p1 = s.port_policy()["vm0"]
            hosts[-1]["underruns"] = p1["underruns"] - p0["underruns"]
            if p1["underruns"] == p0["underruns"]:
                break
        assert r.returncode == 0, r.stderr
    print(r.stdout)
    lines = r.stdout.splitlines()
    head = next(ln for ln in lines if ln.startswith("PORT")).split()
    row = dict(zip(head, next(ln for ln in lines if ln.startswith("vm0")).split()))
    # on a miss: the row, and per try the host's load and the underruns
    assert abs(float(row["SENT_MBPS"]) - 10) / 10 < 0.02, (row, hosts)
    assert float(row["OFFERED_MBPS"]) > 10.5, (row, hosts)
    pps = rate / 8 / s.size
    assert abs(float(row["SENT_PPS"]) - pps) / pps < 0.02, (row, hosts)
    arb = next(ln for ln in lines if ln.startswith("arbiter:"))
    dec = float(arb.split("decisions/s=")[1].split()[0])
    assert abs(dec - pps) / pps < 0.05, (arb, hosts)
    assert "policy.horizon=" in r.stdout
