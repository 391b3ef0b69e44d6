# SPDX-License-Identifier: BSD-3-Clause
"""Carousel backpressure with real guest TCP: bounded shaper occupancy,
and the same traffic with immediate completions (Carousel §5.2, §7.1.2,
Fig. 14-15).

One schednicd, one uplink host (netns, iperf3 -s), two TCG guests running
the patched virtio_net (guest-driver-patch/), booted once for the module:
- g_def on port vm0, "completion": "deferred" (the guest opts in: marker);
- g_imm on port vm1, "completion": "immediate" (descriptors completed at
  once: the guest never feels the shaper);
both ports rate-limited to R by the policy (Carousel timestamps + timing
wheel). For N in {1, 4, 16}, `iperf3 -P N` from each guest in turn to the
uplink host. Measured over a window after the flows' ramp (8..15 s of a
16 s run: while the flows' GSO frames still grow, TSQ admits a 3rd or
4th skb per flow more often; held_per_s shows it per second):
- held_occupancy of vm0's TX queue (stats.get completion.held_occupancy,
  snapshot diff: time-weighted held descriptor chains, i.e. GSO frames);
- the wheel depth sampled every 100 ms, drops of every cause on the port,
  its policy, the arbiter and the uplink over the whole run;
- schednic's sent rate (policy.sent_bytes over the worker clock, exact
  clock_consistent pairs) and the receiver's iperf3 goodput beside it;
- the guest's ethtool -S inflight_max / flow_inflight_max (running maxima
  since the driver was probed).
Deferred: asserted zero drops of any cause, sent rate <= 1.02 R, p99 held
<= 3 N (Carousel: TSQ keeps about 2 segments of each flow in the shaper),
the median of held + waiting (posted on the TX ring, not yet taken:
completion.waiting_now, sampled every 100 ms) <= 3 N, and sent rate >=
0.98 R, with two documented exceptions that turn the case into an xfail
(reason printed with the numbers) instead of a pass:
- the host starved the guest's QEMU (runnable but waiting for a CPU
  >= 20 % of the window) or schednicd's worker lcore (>= 2 %; both from
  /proc/PID/task/*/schedstat): with backpressure the shaper holds only a
  few ms of R, so a guest that cannot answer a completion within that
  time, or a worker descheduled that long, idles it (underruns) — a
  property of the loaded host, not of the mechanism; with both getting
  their CPU the rate must be within 2 %;
- p99 = 3 N + 1 (seen with N = 1, and with N = 4 in a window of 2.5..7 s
  of an 8 s run, i.e. inside the ramp). What the extra frame is
  (SN_BP_PERFLOW=1, N = 4): always a data flow's own 4th GSO
  frame, never the iperf3 control connection, an ACK or ARP (per-source-
  port classes: every frame held beyond 3 N belonged to one of the 4 data
  connections; each held 2 frames 26-80 % of the samples, 3 frames
  6-48 %, 4 frames 0-16 %). Linux 6.1 TSQ (tcp_small_queue_check) bounds
  a flow's bytes, not its skbs: the next skb goes out while sk_wmem_alloc
  <= max(2 x its own truesize, pacing_rate >> sk_pacing_shift). The
  pacing term almost never binds here (guest ss: pacing_rate >> 10 p50
  0.5-3.3 KB, above sk_wmem_alloc in 5 of 360 samples), so
  sk_pacing_shift (the lever wifi drivers use) is not the cause; a flow's
  frames vary in size (cwnd-quota splits, TSO autosizing), and when the
  frames in flight are smaller than the next one it is admitted as the
  3rd or 4th: the most bytes a flow held with 4 frames never exceeded the
  most it held with 3 by more than one MSS frame, at most ~2.9 of its
  largest frames. Numbers:
  guest-driver-patch/README.md, "N = 4: what the 13th held frame is".
Horizon (N = 16): TSQ bounds a flow's frames in number, not in bytes, and
Linux sizes GSO frames from the flow's minimum RTT (tcp_tso_autosize,
tcp_tso_rtt_log): on a quiet host (guest and worker getting their CPU)
the 16 flows keep 12-22 KB frames, 0.5-1 MB in all, more than the
wheel's 262 ms horizon at 20 Mbit/s (655 KB); horizon drops would make
TCP retransmit (~500 per run) and leave its small-queue bound (held p99
62-255). schednicd leaves an opted-in guest's frames in its ring while
the port's rate limit is a horizon ahead (completion.horizon_waits), and
a frame longer than its room estimate assumed is put at the horizon
(policy.room_clamped, reported), so no drop is tolerated.
Immediate: reported (the shaper then buffers what TCP's congestion window
puts there, up to the wheel horizon, and drops beyond it); only sanity is
asserted.

R = 20 Mbit/s (override: SN_BP_RATE_MBPS). A TCG guest sends 30-50
Mbit/s to the uplink host unshaped at load 10 on the 2 shared cores, and
at load 15-25 its QEMU gets 10-20 % of a CPU: 50 Mbit/s is out of reach.
10 Mbit/s is too low for the wheel: the frames a deferred guest keeps in
the shaper are TSO frames of several KB (mean size recorded), and at N =
1 and 16 their sum passes the 262 ms horizon at 10 Mbit/s (327 KB):
horizon drops of a backpressured guest.
Results and the command: guest-driver-patch/README.md, "Backpressure
experiment".
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from guest import Guest, REPO, UPLINK_HOST_IP, iperf_mbps, sched_ns
from snlib.occupancy import occ_diff, occ_summary
from test_guest_patch import patched_image, patched_ko  # noqa: F401 (fixtures)

pytestmark = pytest.mark.vm

R_BPS = int(float(os.environ.get("SN_BP_RATE_MBPS", "20")) * 1e6)
NS = (1, 4, 16)
# Experiment: SN_BP_HORIZON=clamp adds a catch-all class with horizon clamp
VM0_POLICY = {"rate_bps": R_BPS}
if os.environ.get("SN_BP_HORIZON") == "clamp":
    VM0_POLICY = {"rate_bps": R_BPS, "classes": [
        {"name": "all", "rate_bps": R_BPS, "scope": "class", "horizon": "clamp"}]}
# Per-flow classification of the held frames (what the frame beyond 3 N
# is when p99 = 3 N + 1): SN_BP_PERFLOW=1 gives vm0 16 TCP classes,
# one per guest source port 40000..40015 (the deferred guest's ephemeral
# port range is narrowed to them, tcp_tw_reuse on), each without a rate of
# its own (the port's R still shapes every frame exactly as without
# classes); a class's frames in the shaper = offered - sent - drops,
# sampled with held_now. Only for N <= 4 (N + 1 connections per case).
PERFLOW = os.environ.get("SN_BP_PERFLOW") == "1"
PF_PORT0, PF_PORTS = 40000, 16
if PERFLOW:
    VM0_POLICY = {"rate_bps": R_BPS, "classes": [
        {"name": f"sp{PF_PORT0 + i}", "proto": "tcp", "src_port": PF_PORT0 + i}
        for i in range(PF_PORTS)]}
# The window starts after the flows' ramp. Per second (held_per_s),
# the held distribution drifts for the first ~5-8 s while the flows' GSO
# frames keep growing (N = 4: mean sent frame 18 -> 34 KB and held p99
# 12-13 -> 10 between 2.5 and 6.5 s; N = 16: 15 -> 29 KB, held p50 40 ->
# 21 by 8 s) and is flat afterwards (20 s runs). A window of 2.5..7 s of
# an 8 s run measures that ramp: N = 4 p99 12 (max 12-13), against 10-11
# from 8 s on. Carousel's Fig. 14-15 report the flows' steady state. Costs 8 s a case.
# SN_BP_IPERF_S / SN_BP_WARM_S override (experiments).
IPERF_S = float(os.environ.get("SN_BP_IPERF_S", "16"))   # per case
WARM_S = float(os.environ.get("SN_BP_WARM_S", "8"))      # slow start and the flows' ramp, not measured
TAIL_S = 1.0         # the window ends this long before iperf3 does
GUEST_CPU = 0
STARVED = 0.2        # guest QEMU runnable without a CPU for >= 20 % of the window
WORKER_STARVED = 0.02  # schednicd's worker: 2 % of the window is the whole rate margin
RESULTS = {}         # (mode, n) -> measurements, for the summary table
DUMPS = []           # SN_BP_PERFLOW tcpdump processes, killed by PID at teardown
RX_RING_ARGS = ("-global", "virtio-net-pci.rx_queue_size=1024")


def _load(path, name):
    """tests/conftest.py helpers (Schednicd, ...) under a private module
    name: pytest's own conftest modules are all called "conftest"."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_root = _load(REPO / "tests" / "conftest.py", "sn_root_conftest_bp")
_vmc = _load(REPO / "tests" / "vm" / "conftest.py", "sn_vm_conftest_bp")


def ports(d):
    return {p["name"]: p for p in d.stats()["ports"]}


def consistent_stats(d, timeout=5.0):
    """stats.get whose shaped ports carry exact (clock_ns, counters) pairs
    (polled back to back: the worker is inside a release batch for a small
    fraction of the time, more often under load)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = d.stats()
        if all(p["policy"]["clock_consistent"] for p in s["ports"] if "policy" in p):
            return s
    raise AssertionError("stats.get never returned clock_consistent policy counters")


def drop_counts(s, name):
    """Every drop counter that concerns traffic from port `name` to the
    uplink, flattened: the port's, its policy's, its completion's, the
    uplink port's and the arbiter's."""
    p = {x["name"]: x for x in s["ports"]}
    v, u = p[name], p["uplink"]
    out = {f"{name}.{k}": c for k, c in v["drops"].items()}
    out.update({f"{name}.policy.{k}": c for k, c in v["policy"]["drops"].items()})
    c = v["completion"]
    for k in ("hold_timeouts", "no_mbuf", "offload", "forced"):
        out[f"{name}.completion.{k}"] = c[k]
    out.update({f"{name}.completion.vring.{k}": e for k, e in c["vring_errors"].items()})
    out.update({f"uplink.{k}": c for k, c in u["drops"].items()})
    out.update({f"arbiter.{k}": c for k, c in s["arbiter"]["drops"].items()})
    out["arbiter.fair.dropped"] = s["arbiter"]["fair"]["dropped"]
    return out


def ethtool_stats(g):
    out = g.check(f"ethtool -S {g.ifname}").out
    return {k: int(v) for k, v in re.findall(r"^\s*([\w]+):\s+(\d+)\s*$", out, re.M)}


class Rig:
    def __init__(self, d, up, g_def, g_imm):
        self.d, self.up = d, up
        self.guest = {"deferred": g_def, "immediate": g_imm}
        self.port = {"deferred": "vm0", "immediate": "vm1"}


@pytest.fixture(scope="module")
def rig(schednicd_bin, patched_image):  # noqa: F811
    _vmc.require_tool("qemu-system-x86_64")
    tmp = Path(tempfile.mkdtemp(prefix="sn-bp-", dir="/tmp"))
    ns = f"snbp{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    up = _vmc.UplinkHost(ns)
    guests, d = [], None
    try:
        cfg = {
            "eal": {"memory_mb": 512, "file_prefix": _root.unique_prefix("bpV1"),
                    "main_cpu": 0, "worker_cpu": 1 if (os.cpu_count() or 1) > 1 else 0},
            "control": {"socket": str(tmp / "ctl.sock"), "state_dir": str(tmp / "state")},
            "datapath": {"mbufs": 8191},
            "uplink": {"name": "uplink", "devargs": up.devargs},
            "ports": [
                {"name": "vm0", "type": "vhost-user", "path": str(tmp / "vm0.sock"),
                 "mode": "server", "completion": "deferred", "max_hold_us": 2_000_000},
                {"name": "vm1", "type": "vhost-user", "path": str(tmp / "vm1.sock"),
                 "mode": "server", "completion": "immediate"}],
            "policy": {"ports": {"vm0": VM0_POLICY, "vm1": {"rate_bps": R_BPS}}},
        }
        d = _root.Schednicd(schednicd_bin, tmp, cfg)
        d.start()
        up.attach()
        for name, port, host in (("bp-def", "vm0", 10), ("bp-imm", "vm1", 11)):
            # RX ring 1024 (QEMU's maximum, default 256): the ACKs of 16
            # flows fill a 256-entry ring while the TCG guest is busy
            # sending (ring_full drops of ACKs).
            g = Guest(name, d.vhost_path(port), tmp, patched_image,
                      mac=f"52:54:00:77:00:{host:02x}", ip=f"10.77.0.{host}/24", role="client",
                      extra_args=RX_RING_ARGS)
            guests.append(g)
            g.start(cpu=GUEST_CPU)
        for g in guests:
            g.wait_ready(timeout=180)
        for port in ("vm0", "vm1"):
            d.wait_port_state(port, "up")
        for g in guests:
            g.check(f"ping -c 3 -W 5 {UPLINK_HOST_IP}", timeout=60)
        if PERFLOW:
            guests[0].check(f"echo {PF_PORT0} {PF_PORT0 + PF_PORTS - 1} > "
                            "/proc/sys/net/ipv4/ip_local_port_range && "
                            "echo 1 > /proc/sys/net/ipv4/tcp_tw_reuse")
        modes = {p["name"]: p["completion_mode"] for p in d.rpc("port.list")["ports"]
                 if p["type"] == "vhost-user"}
        assert modes == {"vm0": "deferred", "vm1": "immediate"}, modes
        yield Rig(d, up, *guests)
        assert d.alive(), d.log_tail()
        for g in guests:
            log = g.check("dmesg").out
            bad = [ln for ln in log.splitlines()
                   if re.search(r"WARNING|BUG|Call Trace|TX timeout", ln)]
            assert not bad, f"{g.name} kernel log:\n" + "\n".join(bad)
    finally:
        for p in DUMPS:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        for g in guests:
            g.kill()
        if d is not None:
            d.stop()
        up.close()
        subprocess.run(["ip", "netns", "del", ns], check=False)
        _print_table()
        shutil.rmtree(tmp, ignore_errors=True)


def run_case(rig, mode, n):
    """iperf3 -P n from the guest of `mode` to the uplink host; returns the
    measurements (and prints them)."""
    d, g, port = rig.d, rig.guest[mode], rig.port[mode]
    before = consistent_stats(d)
    eth0 = ethtool_stats(g)
    res = {}

    def client():
        cmd = (f"timeout {IPERF_S + 30} iperf3 -c {UPLINK_HOST_IP} -P {n} -t {IPERF_S} -J "
               f"--connect-timeout 5000")
        res["r"] = g.run(cmd, timeout=IPERF_S + 90)

    pf = PERFLOW and mode == "deferred"
    if pf:
        # guest-side TSQ inputs per socket (ss -tmi: skmem t = sk_wmem_alloc,
        # pacing_rate, cwnd), every ~0.1 s into a file read after the run
        g.check("rm -f /tmp/ss.log; setsid sh -c 'while :; do echo @; "
                "ss -tmiHn state established dport = :5201; sleep 0.1; done' "
                "> /tmp/ss.log 2>&1 < /dev/null & echo $! > /tmp/ss.pid")
    dump = None
    if pf:
        # zero-payload TCP segments (no SYN/FIN) from the deferred guest to
        # the iperf3 port, as they reach the uplink host: TSQ does not
        # throttle those (a 4-frame flow holds 66 B more than its largest
        # 3-frame state)
        flt = ("src host 10.77.0.10 and tcp dst port 5201 and "
               "tcp[tcpflags] & (tcp-syn|tcp-fin) == 0 and "
               "(ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2)) == 0")
        dump = subprocess.Popen(["ip", "netns", "exec", rig.up.ns, "tcpdump", "-i",
                                 rig.up.ifname, "-nn", "-l", "-tt", flt],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        DUMPS.append(dump)
    th = threading.Thread(target=client)
    t_start = time.monotonic()
    th.start()
    time.sleep(WARM_S)
    s0 = consistent_stats(d)
    c0, k0, w0 = sched_ns(g.proc.pid), sched_ns(d.proc.pid, "rte-worker"), time.monotonic()
    wheel, held, outst, perflow = [], [], [], []
    # held_occupancy snapshots about once a second, for the held
    # distribution per second of the window (is the excess over 3 N a
    # transient of the flows' ramp or steady?)
    ps0 = {x["name"]: x for x in s0["ports"]}[port]
    occ_snaps = [(0.0, ps0["completion"]["held_occupancy"], ps0["policy"])]
    while time.monotonic() < t_start + IPERF_S - TAIL_S and th.is_alive():
        p = d.port_stats(port)
        wheel.append(p["policy"]["wheel_depth"])
        held.append(p["completion"]["held_now"])
        if time.monotonic() - w0 >= occ_snaps[-1][0] + 1.0:
            occ_snaps.append((time.monotonic() - w0, p["completion"]["held_occupancy"],
                              p["policy"]))
        # held in schednic + posted on the TX ring but not taken yet (the
        # frames the guest has outstanding at the device)
        outst.append(p["completion"]["held_now"] + p["completion"]["waiting_now"])
        if pf:
            perflow.append((p["completion"]["held_now"], p["completion"]["waiting_now"],
                            p["policy"]["wheel_depth"], class_queued(p),
                            class_queued(p, "bytes")))
        time.sleep(0.02 if pf else 0.1)
    s1 = consistent_stats(d)
    c1, k1, w1 = sched_ns(g.proc.pid), sched_ns(d.proc.pid, "rte-worker"), time.monotonic()
    th.join(IPERF_S + 120)
    assert not th.is_alive(), "iperf3 client did not return"
    r = res["r"]
    assert r.rc == 0, f"iperf3 -P {n} failed rc={r.rc}:\n{r.out[-3000:]}"
    goodput = iperf_mbps(r.out)
    retrans = json.loads(r.out)["end"].get("sum_sent", {}).get("retransmits", 0)
    time.sleep(0.5)
    after = consistent_stats(d)
    eth1 = ethtool_stats(g)

    after_p = {x["name"]: x for x in after["ports"]}[port]
    p0 = {x["name"]: x for x in s0["ports"]}[port]
    p1 = {x["name"]: x for x in s1["ports"]}[port]
    dt = (p1["policy"]["clock_ns"] - p0["policy"]["clock_ns"]) / 1e9
    rate = (p1["policy"]["sent_bytes"] - p0["policy"]["sent_bytes"]) * 8 / dt
    uplink_rate = (p1["policy"]["uplink_bytes"] - p0["policy"]["uplink_bytes"]) * 8 / dt
    hist = occ_diff(p0["completion"]["held_occupancy"], p1["completion"]["held_occupancy"])
    occ = occ_summary(hist)
    total = sum(hist.values()) or 1
    occ["over_3n"] = sum(ns for (lo, _), ns in hist.items() if lo > 3 * n) / total
    occ["hist_ms"] = {lo if lo == hi else f"{lo}-{hi}": round(ns / 1e6, 1)
                      for (lo, hi), ns in sorted(hist.items())}
    per_s = []
    for (ta, oa, pa), (tb, ob, pb) in zip(occ_snaps, occ_snaps[1:]):
        hs = occ_diff(oa, ob)
        dpk = pb["sent_packets"] - pa["sent_packets"]
        sm = occ_summary(hs)
        tot = sum(hs.values()) or 1
        per_s.append({"t": round(WARM_S + ta, 1), "p50": sm["p50"], "p99": sm["p99"],
                      "max": sm["max"], "mean": round(sm["mean"], 2),
                      "over_3n": round(sum(ns for (lo, _), ns in hs.items() if lo > 3 * n)
                                       / tot, 4),
                      "frame": (pb["sent_bytes"] - pa["sent_bytes"]) // max(1, dpk)})
    db, da = drop_counts(before, port), drop_counts(after, port)
    drops = {k: da[k] - db[k] for k in da if da[k] != db[k]}
    wheel_s, outst_s = sorted(wheel), sorted(outst)
    m = {
        "n": n, "mode": mode, "window_s": dt, "rate_mbps": rate / 1e6,
        "uplink_mbps": uplink_rate / 1e6, "goodput_mbps": goodput, "retransmits": retrans,
        "held": occ, "held_now_max": max(held, default=0), "held_per_s": per_s,
        "wheel_p50": wheel_s[len(wheel_s) // 2] if wheel_s else 0,
        "wheel_max": wheel_s[-1] if wheel_s else 0, "drops": drops,
        "outstanding_p50": outst_s[len(outst_s) // 2] if outst_s else 0,
        "outstanding_max": outst_s[-1] if outst_s else 0,
        "horizon_waits": after_p["completion"]["horizon_waits"]
        - {x["name"]: x for x in before["ports"]}[port]["completion"]["horizon_waits"],
        "underruns": p1["policy"]["underruns"] - p0["policy"]["underruns"],
        "room_clamped": p1["policy"]["room_clamped"] - p0["policy"]["room_clamped"],
        "frame_bytes": (p1["policy"]["sent_bytes"] - p0["policy"]["sent_bytes"])
        / max(1, p1["policy"]["sent_packets"] - p0["policy"]["sent_packets"]),
        # schednicd's longest hold so far (cumulative) vs the guest's
        # longest post-to-reap time (running max since probe)
        "sn_hold_max_us": after_p["completion"]["hold_us"]["max"],
        "inflight_max": eth1.get("tx_queue_0_inflight_max", -1),
        "flow_inflight_max": eth1.get("tx_queue_0_flow_inflight_max", -1),
        "compl_lat_max_us": eth1.get("tx_queue_0_compl_lat_max_us", -1),
        "wakes": eth1.get("tx_queue_0_wakes", 0) - eth0.get("tx_queue_0_wakes", 0),
        "load": os.getloadavg()[0],
        # host CPU the guest's QEMU got / waited for, per second of window
        "guest_cpu": (c1[0] - c0[0]) / 1e9 / (w1 - w0),
        "guest_wait": (c1[1] - c0[1]) / 1e9 / (w1 - w0),
        # the same for schednicd's worker lcore (busy-polls CPU 1, shared
        # with every other session's workers)
        "worker_wait": (k1[1] - k0[1]) / 1e9 / (w1 - w0),
    }
    if pf:
        m["perflow"] = perflow_summary(perflow, p0, p1, n)
        g.run("kill $(cat /tmp/ss.pid)")
        m["guest_tsq"] = tsq_summary(g.check("cat /tmp/ss.log", timeout=120).out)
        dump.terminate()
        try:
            out = dump.communicate(timeout=10)[0]
        except subprocess.TimeoutExpired:
            dump.kill()
            out = dump.communicate()[0]
        pure = {}
        for ln in out.splitlines():
            mm = re.search(r"10\.77\.0\.10\.(\d+) > ", ln)
            if mm:
                pure.setdefault(mm.group(1), []).append(ln)
        m["pure_acks"] = {k: {"count": len(v), "first": v[:3]} for k, v in pure.items()}
    RESULTS[(mode, n)] = m
    print(f"[{mode} N={n}] {json.dumps(m)}")
    return m


def class_queued(p, unit="packets"):
    """{class: frames (or bytes) in the shaper} of a port's classes
    (offered - sent - drops; drops are counted in frames only, and the
    diagnosis runs without drops), non-zero only."""
    out = {}
    for c in p["policy"]["classes"]:
        q = c[f"offered_{unit}"] - c[f"sent_{unit}"]
        if unit == "packets":
            q -= sum(c["drops"].values())
        if q:
            out[c["name"]] = q
    return out


def tsq_summary(log):
    """Per guest socket (local port) over the ss samples: sk_wmem_alloc
    (skmem t, the truesize sum TSQ compares) and pacing_rate >> 10 (TSQ's
    other term, bytes), p50/max, and how often the pacing term exceeded t."""
    per = {}
    sock = None
    for ln in log.splitlines():
        if ln and not ln[0].isspace() and ln != "@":
            f = ln.split()
            a = [i for i, x in enumerate(f) if re.fullmatch(r"[\d.]+:\d+", x)]
            if len(a) < 2:
                sock = None
                continue
            sock = f[a[0]].rsplit(":", 1)[1]     # local port (ss: local, then peer)
            if len(f) > a[1] + 1:               # ss printed the info on the same line
                ln = " ".join(f[a[1] + 1:])
            else:
                continue
        if sock is None:
            continue
        t = re.search(r"skmem:\(r\d+,rb\d+,t(\d+)", ln)
        pr = re.search(r"pacing_rate ([\d.]+)([KMG]?)bps", ln)
        cw = re.search(r"cwnd:(\d+)", ln)
        if not t:
            continue
        mult = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
        pace = float(pr.group(1)) * mult[pr.group(2)] / 8 if pr else 0.0
        per.setdefault(sock, []).append((int(t.group(1)), int(pace) >> 10,
                                         int(cw.group(1)) if cw else 0))
        sock = None
    out = {}
    for k, v in per.items():
        ts, ps, cws = sorted(x[0] for x in v), sorted(x[1] for x in v), sorted(x[2] for x in v)
        out[k] = {"samples": len(v), "wmem_p50": ts[len(ts) // 2], "wmem_max": ts[-1],
                  "pacing_shr10_p50": ps[len(ps) // 2], "pacing_shr10_max": ps[-1],
                  "cwnd_p50": cws[len(cws) // 2],
                  "pacing_term_above_wmem": sum(x[1] > x[0] for x in v)}
    return out


def perflow_summary(samples, p0, p1, n):
    """Per-connection view of the held frames (SN_BP_PERFLOW): which
    classes (source ports) carried data in the window, the distribution of
    each one's frames in the shaper, and the samples where held_now > 3 N
    broken down by connection."""
    c0 = {c["name"]: c for c in p0["policy"]["classes"]}
    bytes_ = {c["name"]: c["offered_bytes"] - c0[c["name"]]["offered_bytes"]
              for c in p1["policy"]["classes"]}
    data = sorted(k for k, b in bytes_.items() if b > 100_000)
    dist, kb_max = {}, {}
    for _, _, _, q, qb in samples:
        for k in data:
            v = q.get(k, 0)
            dist.setdefault(k, {}).setdefault(v, 0)
            dist[k][v] += 1
            # largest bytes this flow had in the shaper, by frame count
            kb = kb_max.setdefault(k, {})
            kb[v] = max(kb.get(v, 0), qb.get(k, 0))
    pkts = {c["name"]: c["sent_packets"] - c0[c["name"]]["sent_packets"]
            for c in p1["policy"]["classes"]}
    over = [{"held_now": h, "waiting_now": w, "wheel": wd, "flows": q,
             "flows_sum": sum(q.get(k, 0) for k in data),
             "other_classes": sum(v for k, v in q.items() if k not in data)}
            for h, w, wd, q, _ in samples if h > 3 * n]
    flow_max = {k: max((x[3].get(k, 0) for x in samples), default=0) for k in data}
    sum_s = sorted(sum(x[3].get(k, 0) for k in data) for x in samples)
    return {"samples": len(samples), "window_bytes": {k: v for k, v in bytes_.items() if v},
            "data_flows": data, "per_flow_dist": dist, "per_flow_max": flow_max,
            "bytes_max_by_frames": kb_max,
            "mean_frame": {k: bytes_[k] // max(1, pkts[k]) for k in data},
            "data_sum_p50": sum_s[len(sum_s) // 2] if sum_s else 0,
            "data_sum_p99": sum_s[min(len(sum_s) - 1, int(0.99 * len(sum_s)))] if sum_s else 0,
            "data_sum_max": sum_s[-1] if sum_s else 0,
            "held_over_3n_samples": len(over), "held_over_3n": over[:40]}


def record(record_result, m):
    tag = f"backpressure {m['mode']} N={m['n']}"
    record_result(f"{tag}: schednic sent rate (R={R_BPS / 1e6:.0f})", m["rate_mbps"], "Mbit/s")
    record_result(f"{tag}: receiver iperf3 goodput", m["goodput_mbps"], "Mbit/s")
    record_result(f"{tag}: mean frame (GSO) size sent", m["frame_bytes"], "bytes")
    record_result(f"{tag}: held chains p50", m["held"]["p50"], "chains")
    record_result(f"{tag}: held chains p99", m["held"]["p99"], "chains")
    record_result(f"{tag}: held chains max", m["held"]["max"], "chains")
    record_result(f"{tag}: wheel depth p50 (100 ms samples)", m["wheel_p50"], "frames")
    record_result(f"{tag}: wheel depth max (100 ms samples)", m["wheel_max"], "frames")
    record_result(f"{tag}: drops (all causes)", sum(m["drops"].values()), "frames")
    record_result(f"{tag}: frames put at the horizon (room_clamped)", m["room_clamped"], "frames")
    record_result(f"{tag}: TCP retransmits", m["retransmits"], "segments")
    record_result(f"{tag}: guest QEMU on CPU", 100 * m["guest_cpu"], "%")
    record_result(f"{tag}: guest QEMU runnable, waiting for a CPU", 100 * m["guest_wait"], "%")
    record_result(f"{tag}: schednicd worker runnable, waiting for a CPU",
                  100 * m["worker_wait"], "%")
    record_result(f"{tag}: schednicd hold max (cumulative)", m["sn_hold_max_us"] / 1e3, "ms")
    record_result(f"{tag}: guest completion latency max (since probe)",
                  m["compl_lat_max_us"] / 1e3, "ms")
    record_result(f"{tag}: guest inflight_max (since probe)", m["inflight_max"], "skbs")
    record_result(f"{tag}: guest flow_inflight_max (since probe)", m["flow_inflight_max"],
                  "skbs")


@pytest.mark.parametrize("n", [pytest.param(n, marks=pytest.mark.extended) if n == 4 else n
                               for n in NS])
def test_deferred_bounded_occupancy(rig, n, record_result):
    m = run_case(rig, "deferred", n)
    record(record_result, m)
    # no drop of any cause, the horizon included: an opted-in
    # guest's frames wait in its ring while the port's rate limit is a
    # horizon ahead (sn_pipeline_src_room(); completion.horizon_waits).
    assert m["drops"] == {}, f"drops in schednic: {m['drops']}"
    assert m["held"]["sampled_s"] > 0.5 * m["window_s"], m["held"]
    # The shaper never exceeds R.
    assert m["rate_mbps"] * 1e6 <= 1.02 * R_BPS, m
    # What the guest has at the device (held + posted, not taken yet;
    # median of the 100 ms samples) is TSQ's bound too, not only what
    # schednic took: frames waiting in the ring are not hidden.
    assert m["outstanding_p50"] <= 3 * n, m
    xfails = []
    if m["rate_mbps"] * 1e6 < 0.98 * R_BPS:
        # Backpressure leaves ~2 frames per flow in the shaper: a few ms of
        # R. A guest that cannot answer a completion that fast, or a
        # worker descheduled that long, starves it (underruns; the shaper
        # cannot catch up, the guest has nothing more posted). Tolerated
        # only when the host starved the guest's QEMU (runnable but waiting
        # for a CPU >= STARVED of the window) or schednicd's worker (>=
        # WORKER_STARVED), which says nothing about schednic's mechanism;
        # with both getting their CPU the shaper must be kept fed.
        why = (f"sent {m['rate_mbps']:.2f} Mbit/s < 0.98 R (R {R_BPS / 1e6:.0f}), "
               f"underruns {m['underruns']}, guest QEMU waited for a CPU "
               f"{100 * m['guest_wait']:.0f} % / ran {100 * m['guest_cpu']:.0f} % of the "
               f"window, schednicd worker waited {100 * m['worker_wait']:.1f} %, "
               f"schednicd hold max {m['sn_hold_max_us'] / 1e3:.0f} ms, guest completion "
               f"latency max {m['compl_lat_max_us'] / 1e3:.0f} ms, load {m['load']:.1f}")
        assert m["guest_wait"] >= STARVED or m["worker_wait"] >= WORKER_STARVED, (
            "shaper starved by a guest and a worker that had their CPU: " + why)
        xfails.append("CPU-starved on the loaded host: " + why)
    if m["held"]["p99"] > 3 * n:
        # The frame beyond 3 N (per-flow diagnosis, module docstring) is
        # a data flow's own 4th GSO frame. Linux 6.1 TSQ bounds a flow's
        # bytes (sk_wmem_alloc <= 2 x truesize of its next skb; the
        # pacing_rate >> 10 term hardly binds here), not its skbs, and a
        # flow's GSO frames vary in size, so a flow with small frames in
        # flight admits a 3rd or 4th (guest flow_inflight_max 4-5):
        # p99 = 3 N + 1 is tolerated as an xfail (seen with N = 1, and with
        # N = 4 in a window inside the ramp), anything above fails.
        assert m["held"]["p99"] <= 3 * n + 1, (
            f"held p99 {m['held']['p99']} > 3 x {n} + 1 GSO frames: {m['held']}")
        xfails.append(f"held p99 {m['held']['p99']} = 3 x {n} + 1: a data flow's 4th GSO "
                      f"frame (TSQ bounds a flow's bytes at 2 x the truesize of its next "
                      f"skb, not its skb count, and frame sizes vary; SN_BP_PERFLOW=1 "
                      f"shows it per flow); "
                      f"{100 * m['held']['over_3n']:.1f} % of the time over 3 N")
    # The receiver's view agrees: at most R (headers not counted).
    assert m["goodput_mbps"] < 1.02 * R_BPS / 1e6, m
    if xfails:
        pytest.xfail("; ".join(xfails))


@pytest.mark.parametrize("n", [n if n == 16 else pytest.param(n, marks=pytest.mark.extended)
                               for n in NS])
def test_immediate_comparison(rig, n, record_result):
    m = run_case(rig, "immediate", n)
    record(record_result, m)
    # Sanity only: nothing is held in schednic (descriptors completed at
    # once), the shaper still limits the rate.
    assert m["held"]["max"] == 0 and m["held_now_max"] == 0, m
    assert m["rate_mbps"] * 1e6 <= 1.02 * R_BPS, m
    assert m["goodput_mbps"] > 0.3 * R_BPS / 1e6, m


def _print_table():
    if not RESULTS:
        return
    print(f"\nbackpressure results, R = {R_BPS / 1e6:.0f} Mbit/s, {IPERF_S} s iperf3 -P N, "
          f"window {WARM_S}..{IPERF_S - TAIL_S} s")
    print("| completion | N | sent Mbit/s | goodput Mbit/s | mean frame B | held p50/p99/max | "
          "wheel p50/max | outstanding p50/max | horizon waits | drops | retrans | underruns "
          "| inflight_max | flow_inflight_max | guest CPU / wait | worker wait | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (mode, n), m in sorted(RESULTS.items()):
        h = m["held"]
        drops = ", ".join(f"{k} {v}" for k, v in m["drops"].items()) or "0"
        print(f"| {mode} | {n} | {m['rate_mbps']:.2f} | {m['goodput_mbps']:.2f} | "
              f"{m['frame_bytes']:.0f} | "
              f"{h['p50']}/{h['p99']}/{h['max']} | {m['wheel_p50']}/{m['wheel_max']} | "
              f"{m['outstanding_p50']}/{m['outstanding_max']} | {m['horizon_waits']} | "
              f"{drops} | {m['retransmits']} | {m['underruns']} | {m['inflight_max']} | "
              f"{m['flow_inflight_max']} | {100 * m['guest_cpu']:.0f} % / "
              f"{100 * m['guest_wait']:.0f} % | {100 * m['worker_wait']:.1f} % | "
              f"{m['load']:.1f} |")
    for (mode, n), m in sorted(RESULTS.items()):
        if mode == "deferred" and m.get("held_per_s"):
            # the window second by second (t = seconds since the
            # iperf3 start at the second's beginning)
            print(f"held per second, {mode} N={n} (t: p50/p99/max, % of the second over 3 N, "
                  f"mean frame sent): "
                  + ", ".join(f"{x['t']}: {x['p50']}/{x['p99']}/{x['max']} "
                              f"{100 * x['over_3n']:.1f}% {x['frame'] / 1e3:.1f}KB"
                              for x in m["held_per_s"]))
    for (mode, n), m in sorted(RESULTS.items()):
        pf = m.get("perflow")
        if not pf:
            continue
        # SN_BP_PERFLOW: frames each data connection had in the shaper
        # (samples per count), its largest bytes by count, and the frames
        # of anything else (control connection, non-TCP) beyond 3 N
        over = pf["held_over_3n"]
        other = sum(o["other_classes"] for o in over)
        unclassed = sum(o["held_now"] - o["flows_sum"] - o["other_classes"] for o in over)
        print(f"per flow, {mode} N={n} ({pf['samples']} samples; data flows' sum p50/p99/max "
              f"{pf['data_sum_p50']}/{pf['data_sum_p99']}/{pf['data_sum_max']}; samples with "
              f"held_now > 3 N: {pf['held_over_3n_samples']}, other classes' frames in them: "
              f"{other}, held_now beyond the classes' sum: {unclassed})")
        print(f"  zero-payload segments to the uplink host by source port: "
              f"{ {k: v['count'] for k, v in m.get('pure_acks', {}).items()} }")
        for k in pf["data_flows"]:
            print(f"  {k}: frames {dict(sorted(pf['per_flow_dist'][k].items()))}, bytes max by "
                  f"frames {dict(sorted(pf['bytes_max_by_frames'][k].items()))}, mean frame "
                  f"{pf['mean_frame'][k]} B; guest TSQ {m.get('guest_tsq', {}).get(k[2:], '-')}")
