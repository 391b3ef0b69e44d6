#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Idle-port benchmark: switching of 2 busy ports with N idle connected ports.

A cloud host runs hundreds of small VMs, most of them idle at any moment:
their cost to the worker must be close to nothing. This measures the
switch's rate between two busy ports (sn-gen, the datapath benchmark's
harness: one single-threaded generator and sink on CPU 0, the switch alone
on CPU 1, 64 B frames, scripts/bench/datapath.py) while N more ports are
connected by one `sn-vufront many` process with nothing posted on their
rings. N goes over --idle (default 0, 64, 256 and the maximum: the
daemon's port limit, tests/snlib/limits.py PORTS_MAX, less the two busy
ports; counts above the maximum are left out and listed).

Every round measures each N once (the order reversed every other round),
for this build and, with --baseline-build DIR, for that build too (e.g.
the poll loop without the idle-port sweep), so each N = 0 run has its
pairs in the same round. A run's ratio is its Mpps over the N = 0 Mpps of
the same build in the same round; "ratio" is the median over rounds,
"mpps" the median Mpps. Done means ratio >= 0.9 at the maximum.

Each run also records "other_cpus" (CPU time other processes took from the
machine per second during the run, datapath.py's CpuMeter): compare only
runs with a quiet machine.

Everything started here is stopped by PID, its sockets and DPDK runtime
directories removed, even on Ctrl-C.

Output: one JSON object on stdout:
  {"idle": [N, ...], "skipped": [N over the maximum], "builds": {"this":
   {"N": {"mpps": M, "ratio": R, "ratios": [...], "runs_mpps": [...]}}, ...,
   "baseline": {...}}, "runs": [...raw...], "command": "..."}
and a table of ratios on stderr.
"""
import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datapath import (REPO, Bench, CpuMeter, add_gen_args, check_gen_args,  # noqa: E402
                      find_binary, wait_for)
from benchutil import rpc, wait_control  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from snlib.limits import PORTS_MAX, ports_max_config  # noqa: E402

BUSY = 2


def log(msg):
    print(f"idle_ports: {msg}", file=sys.stderr, flush=True)


class IdleBench(Bench):
    def __init__(self, args):
        super().__init__(args)
        self.vufront = find_binary(self.build, ["backend/sn-vufront"])

    def run_idle(self, schednicd, n_idle):
        """One run: schednicd `schednicd` with the two busy ports and n_idle
        idle ones, all connected; sn-gen's result plus the drop counters."""
        a = self.args
        prefix = self.prefix("d")
        overlay = {"_port": {"completion": a.completion}}
        if a.completion == "deferred":
            overlay["_gen"] = ["--marker"]
        cfg, socks, ctl = self.daemon_config(overlay, prefix)
        for k, v in ports_max_config().items():
            cfg.setdefault(k, {}).update(v)
        idle_dir = self.tmp / f"idle-{self.seq}"
        idle_dir.mkdir()
        cfg["ports"] += [{"name": f"idle{i}", "type": "vhost-user",
                          "path": str(idle_dir / f"idle{i}.sock"), "mode": "server",
                          "completion": a.completion} for i in range(n_idle)]
        cfg_path = self.tmp / f"schednicd-{self.seq}.json"
        cfg_path.write_text(json.dumps(cfg))
        d = self.spawn([schednicd, "--config", cfg_path], "schednicd", prefix,
                       stdin=subprocess.DEVNULL)
        many = None
        try:
            wait_control(ctl, d)
            if n_idle:
                ready = idle_dir / "ready"
                many = self.spawn([self.vufront, "many", "--pattern",
                                   str(idle_dir / "idle%u.sock"), "--count", n_idle,
                                   "--queue-size", a.idle_queue_size, "--timeout", 30,
                                   "--ready-file", ready], "vufront-many", self.prefix("vu"))
                wait_for(ready.exists, 120, "sn-vufront many", many, many.logfile)

                def all_up():
                    ps = rpc(ctl, "port.list")["ports"]
                    return sum(1 for p in ps if p["name"].startswith("idle")
                               and p["state"] == "up") == n_idle
                wait_for(all_up, 60, "idle ports up", d, d.logfile)
            res = self.run_gen(socks, d.pid, overlay.get("_gen", ()))
            stats = rpc(ctl, "stats.get")
            up = sum(1 for p in rpc(ctl, "port.list")["ports"]
                     if p["name"].startswith("idle") and p["state"] == "up")
            try:
                rpc(ctl, "shutdown")
                d.wait(15)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                pass
        finally:
            if many is not None:
                self.reap(many)
            self.reap(d)
            for s in socks + [ctl]:
                Path(s).unlink(missing_ok=True)
        busy_drops = {p["name"]: {k: v for k, v in p["drops"].items() if v}
                      for p in stats["ports"] if not p["name"].startswith("idle")}
        return {"mpps": res["bench"]["rx_mpps"], "tx_mpps": res["bench"]["tx_mpps"],
                "window_s": res["bench"]["window_s"], "idle_up": up, "drops": busy_drops}


def order(counts, rounds):
    out = []
    for r in range(rounds):
        out.append((r, counts if r % 2 == 0 else counts[::-1]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--baseline-build", default=None, metavar="DIR",
                    help="also measure DIR's schednicd (same configuration, same rounds), "
                         "e.g. a build without the idle-port sweep")
    ap.add_argument("--idle", default="0,64,256,max",
                    help="comma-separated idle port counts; 'max' = the port limit less the "
                         f"2 busy ports ({PORTS_MAX - BUSY} here); 0 is always measured")
    ap.add_argument("--runs", type=int, default=5, help="rounds (median; default 5)")
    ap.add_argument("--duration", type=float, default=3.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0, help="warmup seconds per run")
    ap.add_argument("--size", type=int, default=64, help="frame size without FCS")
    ap.add_argument("--queue-size", type=int, default=1024,
                    help="virtqueue size of sn-gen's ports (default 1024)")
    ap.add_argument("--idle-queue-size", type=int, default=256,
                    help="ring size of the idle ports (default 256)")
    ap.add_argument("--completion", choices=("immediate", "deferred"), default="immediate",
                    help="completion mode of every port (default immediate)")
    add_gen_args(ap)
    args = ap.parse_args()
    if args.runs < 1 or args.duration <= 0 or not 60 <= args.size <= 1514:
        ap.error("need --runs >= 1, --duration > 0, 60 <= --size <= 1514")
    check_gen_args(ap, args)
    mx = PORTS_MAX - BUSY
    counts, skipped = [0], []
    for s in args.idle.split(","):
        n = mx if s.strip() == "max" else int(s)
        if n > mx:
            skipped.append(n)
        elif n not in counts:
            counts.append(n)
    counts.sort()
    b = IdleBench(args)
    builds = {"this": str(b.schednicd)}
    if args.baseline_build:
        builds["baseline"] = str(find_binary(Path(args.baseline_build).resolve(),
                                             ["backend/schednicd"]))

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    runs = []
    try:
        for r, seq in order(counts, args.runs):
            for name in (builds if r % 2 == 0 else list(builds)[::-1]):
                for n in seq:
                    with CpuMeter() as cpu:
                        res = b.run_idle(builds[name], n)
                    res.update(build=name, idle=n, round=r, other_cpus=cpu.other_cpus,
                               loadavg=os.getloadavg()[0])
                    runs.append(res)
                    log(f"round {r} {name} N={n}: {res['mpps']:.3f} Mpps, idle up "
                        f"{res['idle_up']}/{n} (other processes used {cpu.other_cpus} CPUs)")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        b.cleanup()
    out_b = {}
    for name in builds:
        base = {x["round"]: x["mpps"] for x in runs if x["build"] == name and x["idle"] == 0}
        out_b[name] = {}
        for n in counts:
            rs = [x for x in runs if x["build"] == name and x["idle"] == n]
            ratios = [round(x["mpps"] / base[x["round"]], 3) for x in rs if base.get(x["round"])]
            out_b[name][str(n)] = {
                "mpps": round(statistics.median(x["mpps"] for x in rs), 3),
                "ratio": round(statistics.median(ratios), 3) if ratios else None,
                "ratios": ratios, "runs_mpps": [round(x["mpps"], 3) for x in rs]}
    out = {"idle": counts, "skipped": skipped, "ports_max": PORTS_MAX, "size": args.size,
           "completion": args.completion, "builds": out_b, "runs": runs,
           "other_cpus_max": max(x["other_cpus"] for x in runs),
           "command": " ".join(shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:])}
    for name in builds:
        log(f"{name}: " + ", ".join(f"N={n}: {out_b[name][str(n)]['mpps']} Mpps "
                                    f"ratio {out_b[name][str(n)]['ratio']}" for n in counts))
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
