#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Uplink RX benchmark: frames/s schednicd takes from its uplink with 1
worker (layout 2core) against 2 workers (layout ncore), the uplink's RX
queues spread over the workers.

--uplink vhost (default): the harness of datapath.py (generator and sink
ONE single-threaded sn-gen on CPU 0, the switch's workers on
--worker-cpu). The uplink is a net_vhost ethdev with 4 queue pairs
(rx_queues auto: mode "device", all 4 polled, RX queue q by worker
q mod W); sn-gen port 0 is its virtio-user peer and sends 64 B frames on
its 4 TX queues in turn, to sn-gen port 1 behind VM port vm0 (4 queue
pairs too). The
rate is what sn-gen's sink received per second over --duration after
--warmup; the daemon's per-RX-queue split comes from stats.get.

--uplink tap: a net_tap uplink (mode "rss") moved into a network
namespace made here, where dpdk-testpmd (txonly, --txonly-multi-flow: a
new source IP per frame, so the kernel's tun driver spreads the frames
over the tap's queues by flow hash) writes frames to an unknown MAC into
the tap through net_af_packet; every frame is received, switched and
counted as an unknown_dst drop. The rate is the uplink's rx_packets per
second. On a loaded host testpmd and the kernel's tap path are the limit:
a run whose rate equals "gen_mpps" (what the tap took from the kernel)
measured the generator, not schednicd.

On a 2-CPU machine neither can show a multi-core gain: the generator runs
on CPU 0 with schednicd's main lcore and arbiter, and both workers share
--worker-cpu; the comparison shows what the spreading costs on one CPU.
Each run's "other_cpus" (CPU time other processes took per second:
/proc/stat minus what our own processes used) says how quiet the machine
was. The worker counts alternate run after run (order reversed every
other round) so that background load hits both.

Everything started here is stopped by PID, the namespace deleted and the
DPDK runtime directories removed, even on Ctrl-C.

Output: one JSON object on stdout: {"uplink", "size", "duration",
"modes": {"1": {"mpps": median, "runs": [...]}, "2": {...}},
"ratio_2_to_1": R, "command": "..."}; each run has "mpps", "rx_queues"
(frames per queue, with its worker), "rx_mode", "gen_mpps" and
"other_cpus".
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import remove_runtime, rpc, stop  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
UNKNOWN_MAC = "02:99:00:00:00:01"


def cpu_busy():
    """Busy jiffies of the whole machine (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def procs_cpu(*procs):
    """CPU seconds (user + system, every thread) of our live children."""
    hz = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in procs:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            total += int(v[11]) + int(v[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / hz


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def uplink(sock):
    return {p["name"]: p for p in rpc(sock, "stats.get")["ports"]}["uplink"]


def tap_run(args, workers, tag, tmp):
    sock = str(tmp / f"ctl-{tag}.sock")
    ifname = f"snbr{os.getpid() % 10000}{tag}"
    dprefix, gprefix = f"sn-bur-{os.getpid()}-{tag}", f"sn-bug-{os.getpid()}-{tag}"
    ns = f"snbr{os.getpid() % 100000}-{tag}"
    datapath = {"layout": "2core"} if workers == 1 else {"layout": "ncore", "workers": workers}
    cfg = {"eal": {"file_prefix": dprefix, "main_cpu": 0, "worker_cpu": args.worker_cpu,
                   "arbiter_cpu": 0},
           "control": {"socket": sock, "state_dir": ""},
           "datapath": {**datapath, "idle_sleep_us": 50},
           "uplink": {"name": "uplink", "devargs": f"net_tap0,iface={ifname}"},
           "ports": []}
    cfg_path = tmp / f"cfg-{tag}.json"
    cfg_path.write_text(json.dumps(cfg))
    log = open(tmp / f"schednicd-{tag}.log", "wb")
    d = g = None
    ns_made = False
    try:
        d = subprocess.Popen([str(args.build / "backend" / "schednicd"), "--config", str(cfg_path)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(sock) and os.path.exists(f"/sys/class/net/{ifname}"),
                 30, "schednicd did not start")
        subprocess.run(["ip", "netns", "add", ns], check=True)
        ns_made = True
        subprocess.run(["ip", "link", "set", ifname, "netns", ns], check=True)
        for c in (["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
                  ["ip", "link", "set", "lo", "up"], ["ip", "link", "set", ifname, "up"]):
            subprocess.run(["ip", "netns", "exec", ns, *c], check=True)
        glog = open(tmp / f"testpmd-{tag}.log", "wb")
        g = subprocess.Popen(
            ["ip", "netns", "exec", ns, "dpdk-testpmd", "--no-huge", "-m", "512", "--no-pci",
             "--file-prefix", gprefix, "--lcores", "0@0,1@0", "--log-level", "warning",
             "--vdev", f"net_af_packet0,iface={ifname}", "--",
             "--forward-mode=txonly", "--txonly-multi-flow", f"--txpkts={args.size}",
             f"--eth-peer=0,{UNKNOWN_MAC}", "--total-num-mbufs=8192", "--no-lsc-interrupt"],
            stdin=subprocess.PIPE, stdout=glog, stderr=subprocess.STDOUT)
        time.sleep(args.warmup)
        if g.poll() is not None:
            raise RuntimeError(f"testpmd exited {g.returncode}: "
                               f"{(tmp / f'testpmd-{tag}.log').read_text()[-2000:]}")
        k0 = int(open_ns(ns, ifname, "tx_packets"))
        u0, t0, b0, c0 = uplink(sock), time.monotonic(), cpu_busy(), procs_cpu(d, g)
        time.sleep(args.duration)
        u1, t1, b1, c1 = uplink(sock), time.monotonic(), cpu_busy(), procs_cpu(d, g)
        k1 = int(open_ns(ns, ifname, "tx_packets"))
        dt = t1 - t0
        hz = os.sysconf("SC_CLK_TCK")
        return {"mpps": (u1["rx_packets"] - u0["rx_packets"]) / dt / 1e6,
                "gen_mpps": (k1 - k0) / dt / 1e6,
                "rx_mode": u1["rx_mode"],
                "rx_queues": [{"worker": b["worker"], "frames": b["rx_packets"] - a["rx_packets"]}
                              for a, b in zip(u0["rx_queues"], u1["rx_queues"])],
                "other_cpus": round(max(0.0, (b1 - b0) / hz - (c1 - c0)) / dt, 2)}
    finally:
        if g is not None and g.poll() is None:
            try:
                g.communicate(b"\n", timeout=10)
            except subprocess.TimeoutExpired:
                stop(g)
        stop(d)
        if ns_made:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        remove_runtime(dprefix)
        remove_runtime(gprefix)
        log.close()


VHOST_QUEUES = 4


def vhost_run(args, workers, tag, tmp):
    sock = str(tmp / f"ctl-{tag}.sock")
    up, vm0 = str(tmp / f"up-{tag}.sock"), str(tmp / f"vm0-{tag}.sock")
    dprefix, gprefix = f"sn-buv-{os.getpid()}-{tag}", f"sn-bug-{os.getpid()}-{tag}"
    datapath = {"layout": "2core"} if workers == 1 else {"layout": "ncore", "workers": workers}
    cfg = {"eal": {"file_prefix": dprefix, "main_cpu": 0, "worker_cpu": args.worker_cpu,
                   "arbiter_cpu": 0},
           "control": {"socket": sock, "state_dir": ""},
           "datapath": {**datapath, "mbufs": 32767},
           "uplink": {"name": "uplink",
                      "devargs": f"net_vhost0,iface={up},queues={VHOST_QUEUES}"},
           "ports": [{"name": "vm0", "path": vm0, "queues": VHOST_QUEUES}]}
    cfg_path = tmp / f"cfg-{tag}.json"
    cfg_path.write_text(json.dumps(cfg))
    log = open(tmp / f"schednicd-{tag}.log", "wb")
    d = g = None
    try:
        d = subprocess.Popen([str(args.build / "backend" / "schednicd"), "--config", str(cfg_path)],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(sock) and os.path.exists(up), 30,
                 "schednicd did not start")
        glog = open(tmp / f"sn-gen-{tag}.log", "wb")
        g = subprocess.Popen(
            [str(args.build / "backend" / "sn-gen"), "bench", "--cpu", "0",
             "--file-prefix", gprefix, "--queues", str(VHOST_QUEUES), "--size", str(args.size),
             "--duration", str(args.duration), "--warmup", str(args.warmup),
             "--log-level", "warning", "--port", up, "--port", vm0, "--flow", "src=0,dst=1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=glog)
        wait_for(lambda: g.poll() is not None or uplink(sock)["rx_packets"] > 0, 60,
                 "no frames from sn-gen")
        # the daemon's window: from sn-gen's warmup end to its window end
        time.sleep(max(0.0, args.warmup - 0.2))
        u0, t0, b0, c0 = uplink(sock), time.monotonic(), cpu_busy(), procs_cpu(d, g)
        time.sleep(max(0.5, args.duration - 0.5))
        u1, t1, b1, c1 = uplink(sock), time.monotonic(), cpu_busy(), procs_cpu(d, g)
        out, _ = g.communicate(timeout=args.duration + args.warmup + 60)
        if g.returncode != 0:
            raise RuntimeError(f"sn-gen exited {g.returncode}: "
                               f"{(tmp / f'sn-gen-{tag}.log').read_text()[-2000:]}")
        r = json.loads(out)["bench"]
        dt = t1 - t0
        hz = os.sysconf("SC_CLK_TCK")
        return {"mpps": r["rx_mpps"], "gen_mpps": r["tx_mpps"], "rx_mode": u1["rx_mode"],
                "rx_queues": [{"worker": b["worker"], "frames": b["rx_packets"] - a["rx_packets"]}
                              for a, b in zip(u0["rx_queues"], u1["rx_queues"])],
                "other_cpus": round(max(0.0, (b1 - b0) / hz - (c1 - c0)) / dt, 2)}
    finally:
        stop(g)
        stop(d)
        remove_runtime(dprefix)
        remove_runtime(gprefix)
        log.close()


def open_ns(ns, ifname, key):
    """A counter of the tap as the namespace's kernel sees it (its tx = our rx)."""
    return subprocess.run(["ip", "netns", "exec", ns, "cat",
                           f"/sys/class/net/{ifname}/statistics/{key}"],
                          check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=REPO / "build", help="build directory")
    ap.add_argument("--runs", type=int, default=3, help="rounds over the worker counts")
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds before measuring")
    ap.add_argument("--size", type=int, default=64, help="frame size in bytes")
    ap.add_argument("--worker-cpu", type=int, default=1, help="CPU of every worker lcore")
    ap.add_argument("--uplink", choices=("vhost", "tap"), default="vhost",
                    help="the uplink and its generator (see above)")
    args = ap.parse_args()
    one_run = vhost_run if args.uplink == "vhost" else tap_run
    if args.uplink == "tap" and not shutil.which("dpdk-testpmd"):
        sys.exit("uplink_rx: dpdk-testpmd not found (package dpdk)")
    tmp = Path(tempfile.mkdtemp(prefix="sn-bench-uprx-"))
    modes = {1: [], 2: []}
    order = []
    try:
        for r in range(args.runs):
            for w in ((1, 2) if r % 2 == 0 else (2, 1)):
                res = one_run(args, w, f"{r}{w}", tmp)
                modes[w].append(res)
                order.append(w)
                print(f"run {r} workers {w}: {res['mpps']:.3f} Mpps "
                      f"(gen {res['gen_mpps']:.3f}, {res['rx_mode']}, "
                      f"queues {[q['frames'] for q in res['rx_queues']]}, "
                      f"other_cpus {res['other_cpus']})", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {w: statistics.median(x["mpps"] for x in v) for w, v in modes.items()}
    print(json.dumps({"uplink": args.uplink, "size": args.size, "duration": args.duration,
                      "modes": {str(w): {"mpps": round(med[w], 4), "runs": v}
                                for w, v in modes.items()},
                      "ratio_2_to_1": round(med[2] / med[1], 3) if med[1] else None,
                      "order": order, "command": " ".join(sys.argv)}, indent=1))


if __name__ == "__main__":
    main()
