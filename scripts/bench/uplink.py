#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Uplink benchmark: VM -> kernel throughput through an AF_XDP uplink
(uplink.af_xdp on a veth) against a net_tap uplink, in the same run.

Method: sn-gen (bench mode, one virtio-user port, CPU 0) sends 64 B frames
as fast as it can from vm0 to a MAC behind the uplink; schednicd (layout
1core, worker lcore on CPU 1) forwards them to its uplink, which is either
  af_xdp  net_af_xdp on the host end of a veth pair whose other end is in a
          network namespace this script creates (native XDP, the PMD's
          default program, busy_budget as --busy-budget), or
  tap     net_tap, the tap interface schednicd creates.
The throughput is what the kernel received on the far side, over the
--duration window after --warmup: the veth's namespace end, or the tap
interface, rx_packets per second (frames the kernel then drops as not for
it). schednicd's uplink tx_packets over the same window and sn-gen's
offered rate are reported with it. The kinds alternate run after run
(af_xdp, tap, tap, af_xdp, ...), so a shared machine's load hits both;
"ratio" is the median over runs of af_xdp Mpps / the mean of the tap runs
around it. Each run records "other_cpus", the CPU time other processes
took per second meanwhile (datapath.py's CpuMeter; meaningful results
need it near 0).

Everything started here (processes by PID, the namespace, the veth, DPDK
runtime directories, sockets) is removed at exit, Ctrl-C included.

Usage: scripts/bench/uplink.py [--build-dir build] [--runs 3]
       [--duration 8] [--warmup 2] [--size 64] [--busy-budget 64]
Output: one JSON object on stdout: {"af_xdp": {"mpps": median, "runs":
[...]}, "tap": {...}, "ratio": R, "ratios": [...], "command": "..."}.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import remove_runtime, rpc, stop, wait_control  # noqa: E402 (this directory)
from datapath import CpuMeter  # noqa: E402 (this directory)

REPO = Path(__file__).resolve().parents[2]
DST_MAC = "02:99:00:00:00:42"     # behind the uplink, learned nowhere


def log(msg):
    print(f"uplink: {msg}", file=sys.stderr, flush=True)


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


class Bench:
    def __init__(self, args):
        self.args = args
        build = Path(args.build_dir).resolve()
        self.schednicd = build / "backend" / "schednicd"
        self.sn_gen = build / "backend" / "sn-gen"
        for b in (self.schednicd, self.sn_gen):
            if not b.exists():
                raise SystemExit(f"uplink: {b} missing: build first (scripts/build.sh)")
        self.tmp = Path(tempfile.mkdtemp(prefix="sn-upb-", dir="/tmp"))
        tag = os.getpid() % 100000
        self.ns, self.host, self.peer = f"snub{tag}", f"snubh{tag}", f"snubn{tag}"
        self.tap = f"snubt{tag}"
        self.procs = []
        self.seq = 0
        self.veth = False

    def make_veth(self):
        sh("ip", "netns", "add", self.ns)
        self.veth = True        # cleanup() deletes the namespace from here on
        sh("ip", "link", "add", self.host, "type", "veth", "peer", "name", self.peer,
           "netns", self.ns)
        sh("sysctl", "-qw", f"net.ipv6.conf.{self.host}.disable_ipv6=1")
        sh("ip", "netns", "exec", self.ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        sh("ip", "netns", "exec", self.ns, "ip", "link", "set", self.peer, "up")
        sh("ip", "link", "set", self.host, "up")

    def cleanup(self):
        for p, prefix in reversed(self.procs):
            stop(p)
            remove_runtime(prefix)
        self.procs.clear()
        if self.veth:
            sh("ip", "link", "del", self.host, check=False)
            sh("ip", "netns", "del", self.ns, check=False)
            self.veth = False
        shutil.rmtree(self.tmp, ignore_errors=True)

    def spawn(self, argv, name, prefix, **kw):
        logf = self.tmp / f"{name}-{self.seq}.log"
        with open(logf, "wb") as out:
            p = subprocess.Popen([str(a) for a in argv], stdout=kw.pop("stdout", out),
                                 stderr=out, stdin=subprocess.DEVNULL, **kw)
        p.logfile = logf
        self.procs.append((p, prefix))
        return p

    def reap(self, proc):
        for i, (p, prefix) in enumerate(self.procs):
            if p is proc:
                stop(p)
                remove_runtime(prefix)
                del self.procs[i]
                return

    def kernel_rx(self, kind):
        if kind == "af_xdp":
            out = sh("ip", "netns", "exec", self.ns, "cat",
                     f"/sys/class/net/{self.peer}/statistics/rx_packets").stdout
        else:
            out = Path(f"/sys/class/net/{self.tap}/statistics/rx_packets").read_text()
        return int(out)

    def run(self, kind):
        a = self.args
        self.seq += 1
        prefix = f"sn-upb-d-{os.getpid()}-{self.seq}"
        ctl, vm0 = str(self.tmp / "ctl.sock"), str(self.tmp / "vm0.sock")
        uplink = ({"name": "uplink", "af_xdp": self.host, "af_xdp_busy_budget": a.busy_budget}
                  if kind == "af_xdp" else
                  {"name": "uplink", "devargs": f"net_tap0,iface={self.tap}"})
        cfg = {"eal": {"memory_mb": 512, "file_prefix": prefix, "main_cpu": 0, "worker_cpu": 1},
               "control": {"socket": ctl, "state_dir": ""},
               "datapath": {"mbufs": 16383},
               "uplink": uplink,
               "ports": [{"name": "vm0", "path": vm0, "mode": "server"}]}
        cfg_path = self.tmp / "schednicd.json"
        cfg_path.write_text(json.dumps(cfg))
        d = self.spawn([self.schednicd, "--config", cfg_path], "schednicd", prefix)
        g = None
        try:
            wait_control(ctl, d)
            gprefix = f"sn-upb-g-{os.getpid()}-{self.seq}"
            g = self.spawn([self.sn_gen, "bench", "--cpu", 0, "--file-prefix", gprefix,
                            "--size", a.size, "--duration", a.duration, "--warmup", a.warmup,
                            "--log-level", "warning", "--port", vm0,
                            "--flow", f"src=0,dst={DST_MAC}"], "sn-gen", gprefix,
                           stdout=subprocess.PIPE)
            time.sleep(a.warmup + 0.5)
            t0 = time.monotonic()
            k0, s0 = self.kernel_rx(kind), rpc(ctl, "stats.get", {"port": "uplink"})
            time.sleep(max(1.0, a.duration - 1.0))
            k1, s1 = self.kernel_rx(kind), rpc(ctl, "stats.get", {"port": "uplink"})
            t1 = time.monotonic()
            out, _ = g.communicate(timeout=a.duration + a.warmup + 60)
            if g.returncode != 0:
                raise RuntimeError(f"sn-gen exited {g.returncode}: "
                                   f"{g.logfile.read_text(errors='replace')[-2000:]}")
            res = json.loads(out)
        finally:
            if g is not None:
                self.reap(g)
            self.reap(d)
            for s in (ctl, vm0):
                Path(s).unlink(missing_ok=True)
        dt = t1 - t0
        up0, up1 = s0["ports"][0], s1["ports"][0]
        return {"mpps": round((k1 - k0) / dt / 1e6, 4),
                "uplink_tx_mpps": round((up1["tx_packets"] - up0["tx_packets"]) / dt / 1e6, 4),
                "offered_mpps": round(res["bench"]["tx_mpps"], 4),
                "uplink_drops": {k: v for k, v in up1["drops"].items() if v}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--runs", type=int, default=3, help="runs per uplink kind (default 3)")
    ap.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0, help="warmup seconds per run")
    ap.add_argument("--size", type=int, default=64, help="frame size without FCS")
    ap.add_argument("--busy-budget", type=int, default=64,
                    help="uplink.af_xdp_busy_budget (default 64; 0 = no busy polling)")
    args = ap.parse_args()
    if args.runs < 1 or args.duration < 2 or not 60 <= args.size <= 1514:
        ap.error("need --runs >= 1, --duration >= 2, 60 <= --size <= 1514")
    b = Bench(args)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    order = []
    for r in range(args.runs):
        order += ["af_xdp", "tap"] if r % 2 == 0 else ["tap", "af_xdp"]
    seq = []
    try:
        b.make_veth()
        for i, kind in enumerate(order):
            with CpuMeter() as cpu:
                r = b.run(kind)
            r["other_cpus"] = cpu.other_cpus
            seq.append((kind, r))
            log(f"[{i + 1}/{len(order)}] {kind}: {r['mpps']} Mpps at the kernel (uplink tx "
                f"{r['uplink_tx_mpps']}, offered {r['offered_mpps']}; other processes used "
                f"{r['other_cpus']} CPUs)")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        b.cleanup()
    ratios = []
    for i, (kind, r) in enumerate(seq):
        if kind != "af_xdp":
            continue
        near = [seq[j][1]["mpps"] for j in (i - 1, i + 1)
                if 0 <= j < len(seq) and seq[j][0] == "tap"]
        if near and statistics.mean(near) > 0:
            ratios.append(round(r["mpps"] / statistics.mean(near), 3))
    out = {k: {"mpps": statistics.median(r["mpps"] for w, r in seq if w == k),
               "runs": [r for w, r in seq if w == k]} for k in ("af_xdp", "tap")}
    out.update({"packet_size": args.size, "busy_budget": args.busy_budget,
                "ratio": round(statistics.median(ratios), 3) if ratios else None, "ratios": ratios,
                "order": order,
                "command": " ".join(shlex.quote(x) for x in [sys.argv[0]] + sys.argv[1:])})
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
