#!/usr/bin/env python3
"""Instructions per frame of schednicd's worker in one datapath.py mode.

Runs the same setup as `datapath.py --modes MODE` (sn-gen on CPU 0 as
generator and sink, the daemon configured exactly as that mode) with the
daemon under `valgrind --tool=callgrind --toggle-collect=sn_switch_worker`
(the worker lcore's loop and everything it calls; the main lcore's RPC
thread is not counted). After --warmup seconds the counters are zeroed
(`callgrind_control -z`); after --window seconds `callgrind_control -d`
dumps the window.
Frames = calls of --frame-fn in the window (default sn_vring_used_put:
one completion per frame). Prints a JSON object: frames, total
worker instructions, instructions per frame, and the inclusive
instructions per frame of the --top functions (callgrind_annotate
--inclusive=yes), plus the dump's path for further annotation.

Under callgrind the daemon runs ~50x slower, so on a quiet host sn-gen
keeps its ring full and every iteration polls a full burst (`loops` ==
`bursts`: the per-frame cost at full bursts). On a loaded host sn-gen is
starved and some iterations find the ring empty (`empty_polls`; each
costs ~960 instructions in the scheduled mode, more than under real time
since the wheel sweeps more slots per iteration): compare runs without
empty polls, or the inclusive costs of the burst-path functions
(`arb_round`, `burst_in`, `submit_chunk`), which they do not change.

Everything started is stopped by PID; its sockets and DPDK runtime dir are
removed (datapath.py's Bench does it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datapath  # noqa: E402 (this directory)


def slow_wait_for(pred, timeout, what, proc=None, logfile=None):
    """datapath.wait_for with 5x the timeout (the daemon starts under
    valgrind)."""
    return _wait_for(pred, timeout * 5, what, proc, logfile)


_wait_for = datapath.wait_for
datapath.wait_for = slow_wait_for


class CgBench(datapath.Bench):
    """datapath.Bench with the daemon under callgrind and a measured window
    driven from run_gen (which runs while the daemon serves sn-gen)."""

    def __init__(self, args, out_file):
        super().__init__(args)
        self.out_file = out_file
        self.result = {}
        self.ctl = str(self.tmp / "ctl.sock")

    def spawn(self, argv, name, prefix, **kw):
        if name == "schednicd":
            argv = ["valgrind", "--tool=callgrind", "--toggle-collect=sn_switch_worker",
                    f"--callgrind-out-file={self.out_file}", "--dump-instr=no",
                    *argv]
            self.daemon_start = time.monotonic()
        return super().spawn(argv, name, prefix, **kw)

    def run_gen(self, socks, sw_pid, extra=()):
        a = self.args
        if sw_pid is None:
            return super().run_gen(socks, sw_pid, extra)

        def window():
            time.sleep(a.warmup)
            subprocess.run(["callgrind_control", "-z", str(sw_pid)], check=True,
                           stdout=subprocess.DEVNULL)
            time.sleep(a.window)
            subprocess.run(["callgrind_control", "-d", str(sw_pid)], check=True,
                           stdout=subprocess.DEVNULL)
            self.result["dumped"] = True
        th = threading.Thread(target=window, daemon=True)
        th.start()
        res = super().run_gen(socks, sw_pid, extra)
        th.join(60)
        return res


def annotate(path, top):
    """From callgrind_annotate: the total, [(function, inclusive Ir)] of the
    top functions, and {function: calls} (summed over its callers)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling",
                          "--threshold=100", path],
                         check=True, capture_output=True, text=True).stdout
    total = None
    incl, calls = {}, {}
    num = r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?"
    for line in out.splitlines():
        m = re.match(num + r"PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(num + r">\s+(\S+):(\S+) \(([\d,]+)x\)", line)
        if m:
            fn = m.group(3)
            calls[fn] = calls.get(fn, 0) + int(m.group(4).replace(",", ""))
            continue
        m = re.match(num + r"\*\s+(\S+):(\S+)", line)
        if m and total is not None:
            # a function inlined in several files has one entry per file:
            # the largest is the function's own inclusive cost
            fn, ir = m.group(3), int(m.group(1).replace(",", ""))
            incl[fn] = max(incl.get(fn, 0), ir)
    funcs = sorted(incl.items(), key=lambda kv: -kv[1])
    return total, funcs[:top], calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR",
                                                          str(datapath.REPO / "build")))
    ap.add_argument("--mode", default="scheduled", choices=list(datapath.MODES))
    ap.add_argument("--warmup", type=float, default=40.0,
                    help="seconds after sn-gen starts before the window (valgrind start-up)")
    ap.add_argument("--window", type=float, default=20.0, help="measured seconds")
    ap.add_argument("--top", type=int, default=40, help="functions to list")
    ap.add_argument("--out", default=None, help="callgrind output file (kept)")
    ap.add_argument("--frame-fn", default="sn_vring_used_put",
                    help="function called once per frame (frames = its calls in the window)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--queue-size", type=int, default=1024)
    args = ap.parse_args()
    # datapath.Bench reads these: sn-gen runs warmup + duration
    args.duration = args.window + 10.0
    out_file = args.out or f"/tmp/callgrind.sn-{os.getpid()}.out"
    b = CgBench(args, out_file)
    # The daemon's control socket path is the one run_switch picks.
    try:
        b.run_switch(datapath.MODES[args.mode])
    finally:
        b.cleanup()
    if "dumped" not in b.result:
        raise SystemExit("datapath_callgrind: the window did not complete")
    dump = out_file + ".1"     # the -d dump (out_file itself: the rest, at exit)
    total, funcs, calls = annotate(dump, args.top)
    # Counted inside the window itself (the stats.get snapshots of the
    # RPC thread are not synchronous with callgrind_control under valgrind):
    # frames = completions written (one per frame of a one-descriptor
    # chain), loops = worker iterations, bursts = non-empty TX-ring polls.
    frames = calls.get(args.frame_fn, 0)
    loops = calls.get("sn_vqtx_set_now", 0)
    bursts = calls.get("burst_in", 0)
    print(json.dumps({
        "mode": args.mode, "frames": frames, "bursts": bursts, "loops": loops,
        "frames_per_burst": round(frames / bursts, 2) if bursts else None,
        "empty_polls": loops - bursts if loops else None,
        "worker_ir": total, "ir_per_frame": round(total / frames, 1) if frames else None,
        "inclusive_per_frame": {f: round(v / frames, 1) for f, v in funcs} if frames else {},
        "dump": dump,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
