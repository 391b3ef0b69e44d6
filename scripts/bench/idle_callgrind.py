#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Instructions per worker iteration of an idle schednicd with N idle ports.

What an idle connected port costs the worker, independent of the host's
load: schednicd runs under `valgrind --tool=callgrind
--toggle-collect=sn_switch_worker` with N vhost-user ports (immediate, no
idle naps: datapath.idle_sleep_us 0), `sn-vufront many` connects all of
them with nothing posted, and after --settle seconds a --window of the
worker's instructions is collected (callgrind_control -z, then -d). The
iterations are the calls of sn_vqtx_set_now() (once per iteration of
sn_switch_worker). For each N of --idle (0 = one configured port, not
connected) and each build (this one, and --baseline-build DIR if given)
it prints the instructions per iteration; the per-port slope is what
scripts/bench/idle_ports.py sees as lost throughput under load.

Everything started here is stopped by PID and its DPDK runtime directory
and temporary files removed.

Output: one JSON object on stdout: {"builds": {"this": {"N": {"ir": I,
"iterations": K, "ir_per_iteration": R}, ...}, ...}, "command": "..."}.
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import remove_runtime, rpc, stop, wait_control  # noqa: E402
from datapath import REPO, find_binary, wait_for  # noqa: E402


def parse(out):
    """(instructions, iterations) of a callgrind dump."""
    txt = Path(out).read_text()
    ir = int(re.search(r"^summary:\s+(\d+)", txt, re.M).group(1))
    names = dict(re.findall(r"^c?fn=\((\d+)\)[ ]+(\S+)", txt, re.M))
    ids = {k for k, v in names.items() if v == "sn_vqtx_set_now"}
    lines = txt.splitlines()
    calls = 0
    for i, line in enumerate(lines[:-1]):
        m = re.match(r"^cfn=\((\d+)\)", line)
        if m and m.group(1) in ids and lines[i + 1].startswith("calls="):
            calls += int(lines[i + 1].split("=")[1].split()[0])
    return ir, calls


def run(args, tmp, schednicd, vufront, n, tag):
    d = tmp / tag
    d.mkdir()
    prefix = f"sn-idlecg-{os.getpid()}-{tag}"
    ctl = str(d / "ctl.sock")
    cfg = {"eal": {"memory_mb": 512, "file_prefix": prefix, "main_cpu": 0, "worker_cpu": 1},
           "control": {"socket": ctl, "state_dir": str(d / "state")},
           "datapath": {"mbufs": 8191, "idle_sleep_us": 0}, "uplink": None,
           "ports": [{"name": f"idle{i}", "type": "vhost-user", "path": str(d / f"idle{i}.sock"),
                      "mode": "server"} for i in range(max(n, 1))]}
    (d / "cfg.json").write_text(json.dumps(cfg))
    out = d / "cg.out"
    log = open(d / "daemon.log", "wb")
    vg = subprocess.Popen(["valgrind", "--tool=callgrind", "--toggle-collect=sn_switch_worker",
                           f"--callgrind-out-file={out}", "--dump-instr=no", str(schednicd),
                           "--config", str(d / "cfg.json")], stdout=log, stderr=log,
                          stdin=subprocess.DEVNULL)
    many = None
    try:
        wait_control(ctl, vg, 300, "schednicd under callgrind", d / "daemon.log", rpc_timeout=5)
        if n:
            ready = d / "ready"
            many = subprocess.Popen([str(vufront), "many", "--pattern", str(d / "idle%u.sock"),
                                     "--count", str(n), "--timeout", "900", "--ready-file",
                                     str(ready)], stdout=subprocess.DEVNULL)
            wait_for(ready.exists, 1800, "sn-vufront many", many)

            def all_up():
                return sum(p["state"] == "up" for p in rpc(ctl, "port.list", timeout=30)["ports"]) == n
            wait_for(all_up, 300, "idle ports up", vg, d / "daemon.log")
        time.sleep(args.settle)
        subprocess.run(["callgrind_control", "-z", str(vg.pid)], stdout=subprocess.DEVNULL,
                       check=True)
        time.sleep(args.window)
        subprocess.run(["callgrind_control", "-d", str(vg.pid)], stdout=subprocess.DEVNULL,
                       check=True)
    finally:
        stop(many)
        stop(vg, 60)
        log.close()
        remove_runtime(prefix)
    dumps = sorted(glob.glob(f"{out}.*"), key=lambda p: int(p.rsplit(".", 1)[1]))
    ir, it = parse(dumps[0])
    return {"ir": ir, "iterations": it, "ir_per_iteration": round(ir / it, 1) if it else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--baseline-build", default=None, metavar="DIR",
                    help="also measure DIR's schednicd")
    ap.add_argument("--idle", default="0,16,61", help="comma-separated idle port counts")
    ap.add_argument("--vufront", default=None, metavar="PATH",
                    help="the sn-vufront with the many mode (default: --build-dir's)")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds before the window")
    ap.add_argument("--window", type=float, default=10.0, help="collected seconds")
    args = ap.parse_args()
    build = Path(args.build_dir).resolve()
    vufront = Path(args.vufront) if args.vufront else find_binary(build, ["backend/sn-vufront"])
    builds = {"this": find_binary(build, ["backend/schednicd"])}
    if args.baseline_build:
        builds["baseline"] = find_binary(Path(args.baseline_build).resolve(),
                                         ["backend/schednicd"])
    tmp = Path(tempfile.mkdtemp(prefix="sn-idlecg-", dir="/tmp"))
    res = {}
    try:
        for name, binary in builds.items():
            res[name] = {}
            for n in [int(x) for x in args.idle.split(",")]:
                r = run(args, tmp, binary, vufront, n, f"{name}{n}")
                res[name][str(n)] = r
                print(f"idle_callgrind: {name} N={n}: {r['ir_per_iteration']} instructions "
                      f"per iteration", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"builds": res, "command": " ".join(
        shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:])}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
