#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Regime trace: is the deferred datapath's bimodal
throughput decided per run or does it flip within a run?

Runs each named mode (a datapath.py mode or "testpmd") ALONE, --runs times,
in the same setup as datapath.py (one sn-gen on CPU 0 owning both
virtio-user ports, the switch under test on CPU 1; --swap-cpus exchanges
them), with sn-gen's sampling sink on: every run reports its received Mpps
per --sample-ms interval, warmup included. No baseline, no ratio: this is a
diagnostic of the time structure of one mode's throughput, not a benchmark.

Output: one JSON object: {"runs": [{"what", "mpps", "samples_mpps",
"gen", "daemon", "other_cpus", "loadavg"}, ...], "command"}; a one-line
summary per run (mean, min, median, max of the samples) goes to stderr.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import sys

from datapath import (MODES, Bench, CpuMeter, REPO, add_gen_args, check_gen_args,  # noqa: E402
                      log)  # noqa: E402 (this directory)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--what", default="deferred",
                    help="comma-separated: testpmd and/or datapath.py modes, run in this order")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--sample-ms", type=int, default=250)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--queue-size", type=int, default=1024)
    add_gen_args(ap)
    ap.add_argument("--swap-cpus", action="store_true",
                    help="sn-gen on CPU 1, the switch on CPU 0")
    ap.add_argument("--keep-logs", metavar="DIR",
                    help="copy every run's process logs (stderr) into DIR")
    args = ap.parse_args()
    check_gen_args(ap, args)
    whats = args.what.split(",")
    for w in whats:
        if w != "testpmd" and w not in MODES:
            ap.error(f"unknown mode {w!r}")
    b = Bench(args)
    if args.swap_cpus:
        b.gen_cpu, b.sw_cpu = 1, 0
    runs = []
    try:
        for i in range(args.runs):
            for w in whats:
                with CpuMeter() as cpu:
                    r = b.run_testpmd() if w == "testpmd" else b.run_switch(MODES[w])
                r["what"], r["other_cpus"], r["loadavg"] = w, cpu.other_cpus, os.getloadavg()[0]
                runs.append(r)
                if args.keep_logs:
                    os.makedirs(args.keep_logs, exist_ok=True)
                    for f in b.tmp.glob("*.log"):
                        shutil.move(str(f), os.path.join(args.keep_logs, f"{len(runs) - 1:02d}-{w}-{f.name}"))
                s = r.get("samples_mpps") or [0]
                log(f"{w} run {i}: {r['mpps']:.3f} Mpps; samples min {min(s):.2f} "
                    f"med {statistics.median(s):.2f} max {max(s):.2f}; "
                    f"gen {r.get('gen')}; daemon {r.get('daemon')}; other {cpu.other_cpus}")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        b.cleanup()
    print(json.dumps({"runs": runs, "command": " ".join(
        shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:])}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
