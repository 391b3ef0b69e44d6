#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Instructions per frame of schednicd's worker in one datapath.py mode.

Runs the same setup as `datapath.py --modes MODE` (sn-gen on CPU 0 as
generator and sink, the daemon configured exactly as that mode) with the
daemon under `valgrind --tool=callgrind --toggle-collect=sn_switch_worker`
(the worker lcore's loop and everything it calls; the main lcore's RPC
thread is not counted). --warmup seconds after vm0's first frame reached
the daemon (counting from sn-gen's start would let a daemon slow to start
under valgrind give a window without frames) the counters are zeroed
(`callgrind_control -z`); after --window seconds `callgrind_control -d`
dumps the window and sn-gen is stopped (SIGINT). `--idle` counts from
sn-gen's start (no frames to wait for: give --warmup the start-up, ~40).
Frames = calls of --frame-fn in the window (default: the frames
delivered, calls of librte_vhost's per-frame copy into the RX ring, see
annotate()). Prints a JSON object: frames, total
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

Frames: besides the calls of --frame-fn, the frames that
entered the forwarder over the window are read from its own counters
around `callgrind_control -z` and `-d` (daemon: vm0's TX queue 0
`rx_packets` by stats.get; testpmd: port 0's RX-packets by `show port
stats 0` at its interactive prompt on a pty), each read bracketing its
callgrind command: `frames_ctr` is the difference of the midpoints,
`frames_ctr_err` half the width of the two brackets. `ir_per_frame_ctr`
uses it; it is the count to use for modes without a per-frame function
(immediate: DPDK's builtin dequeue and enqueue).

`--mode testpmd` runs the baseline of datapath.py, dpdk-testpmd io-forward
between two net_vhost ports (same EAL memory, lcores, mbufs and queue
size), under callgrind. Its binary and the DPDK libraries are stripped,
so there is no function to toggle on: every thread is collected
(`--separate-threads=yes`) and the forwarding lcore's dump (the thread
with the most instructions in the window) is annotated. Exported DPDK
functions (rte_vhost_dequeue_burst, rte_vhost_enqueue_burst, ...) keep
their names; testpmd's and the net_vhost PMD's static functions appear as
addresses. The daemon's worker is compared on the same footing: its
toggled loop is the worker thread's whole work.

Idle loop. Under callgrind the forwarder is ~50x slower than
sn-gen, but on a shared host sn-gen is preempted now and then and the
forwarder polls an empty ring meanwhile (testpmd more often than the
daemon: it is faster). `--idle` runs the same setup with sn-gen in echo
mode (links up, no traffic; the daemon without its idle naps,
`datapath.idle_sleep_us` 0) and prints each function's inclusive
instructions per loop iteration of the forwarder. A loaded run given that
JSON (`--idle-json FILE`) subtracts empty iterations (loops - bursts) at
those costs: `full_burst_per_frame` is the per-frame cost at full bursts,
independent of how often the generator was late. Loops: the daemon's
`sn_vqtx_set_now` calls; testpmd's `rte_vhost_dequeue_burst` calls / 2
(io-forward polls both ports every iteration, as the daemon does). Bursts:
`burst_in` calls; testpmd's `rte_vhost_enqueue_burst` calls (io-forward
transmits only what a poll took).

Everything started is stopped by PID; its sockets and DPDK runtime dir are
removed (datapath.py's Bench does it).
"""
import argparse
import glob
import json
import os
import pty
import re
import signal
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
        self.probe = None        # () -> frames in so far, set by the runner
        self.gen = None          # the running sn-gen (stopped after the window)

    def spawn(self, argv, name, prefix, **kw):
        if name == "schednicd":
            argv = ["valgrind", "--tool=callgrind", "--toggle-collect=sn_switch_worker",
                    f"--callgrind-out-file={self.out_file}", "--dump-instr=no",
                    *argv]
            self.daemon_start = time.monotonic()
        p = super().spawn(argv, name, prefix, **kw)
        if name == "sn-gen":
            self.gen = p
        return p

    def run_gen(self, socks, sw_pid, extra=()):
        a = self.args
        if sw_pid is None:
            return super().run_gen(socks, sw_pid, extra)
        if a.idle:
            return self.run_idle_gen(socks, sw_pid)

        def bracket(cmd):
            """The frame counter read before and after a callgrind command."""
            lo = self.probe() if self.probe else None
            subprocess.run(["callgrind_control", cmd, str(sw_pid)], check=True,
                           stdout=subprocess.DEVNULL)
            hi = self.probe() if self.probe else None
            return lo, hi

        def window():
            # The warmup counts from vm0's first frame, not from sn-gen's
            # start: under valgrind the daemon's vhost set-up can take
            # longer than any fixed warmup (a window with 0 frames).
            try:
                if self.probe:
                    _wait_for(lambda: self.probe() > 0, 300, "vm0's first frame")
                time.sleep(a.warmup)
                self.result["zero"] = bracket("-z")
                time.sleep(a.window)
                self.result["dump"] = bracket("-d")
                self.result["dumped"] = True
            except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as e:
                self.result["error"] = repr(e)     # reported by main()
            finally:
                if self.gen is not None and self.gen.poll() is None:
                    self.gen.send_signal(signal.SIGINT)    # a clean stop, summary printed
        th = threading.Thread(target=window, daemon=True)
        th.start()
        res = super().run_gen(socks, sw_pid, extra)
        th.join(60)
        return res


class Pty:
    """testpmd's interactive prompt on a pseudo-terminal (line-buffered
    output, a real terminal for its cmdline library); a thread keeps
    reading so testpmd never blocks on a full pty."""

    def __init__(self):
        self.master, self.slave = pty.openpty()
        self.buf = b""
        self.lock = threading.Lock()
        self.th = threading.Thread(target=self._read, daemon=True)
        self.th.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.buf += chunk

    def rx_packets(self, port=0, timeout=120.0):
        with self.lock:
            start = len(self.buf)
        os.write(self.master, f"show port stats {port}\n".encode())
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                m = re.search(rb"RX-packets:\s*(\d+)", self.buf[start:])
            if m:
                return int(m.group(1))
            time.sleep(0.05)
        raise RuntimeError("testpmd did not answer 'show port stats'")

    def close(self):
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


def run_testpmd_cg(b, out_file):
    """datapath.Bench.run_testpmd's configuration under callgrind, with the
    interactive prompt for the frame counter."""
    socks = [str(b.tmp / f"tp{i}.sock") for i in range(2)]
    for s in socks:
        Path(s).unlink(missing_ok=True)
    prefix = b.prefix("tp-cg")
    argv = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
            f"--callgrind-out-file={out_file}", "--dump-instr=no",
            b.testpmd, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
            "--lcores", "0@1,1@1", "--log-level", "warning"]
    for i, s in enumerate(socks):
        argv += ["--vdev", f"net_vhost{i},iface={s},queues=1"]
    argv += ["--", "-i", "--forward-mode=io", "--auto-start", "--nb-cores=1",
             "--total-num-mbufs=32768"]
    t = Pty()
    tp = datapath.Bench.spawn(b, argv, "testpmd", prefix, stdin=t.slave, stdout=t.slave)
    b.probe = t.rx_packets
    try:
        datapath.wait_for(lambda: all(os.path.exists(s) for s in socks), 30, "testpmd sockets",
                          tp, tp.logfile)
        b.run_gen(socks, tp.pid)
    finally:
        try:
            os.write(t.master, b"quit\n")
            tp.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        b.reap(tp)
        t.close()
        for s in socks:
            Path(s).unlink(missing_ok=True)


def idle_gen(self, socks, sw_pid):
    """--idle: sn-gen connected in echo mode (sends nothing unasked) for
    the same time as a bench run, the window taken meanwhile."""
    a = self.args
    prefix = self.prefix("gen-idle")
    argv = [self.sn_gen, "echo", "--cpu", "0", "--file-prefix", prefix,
            "--duration", a.duration + a.warmup, "--log-level", "warning",
            "--queue-size", a.queue_size, "--echo-ip", "192.0.2.1"]
    for s in socks:
        argv += ["--port", s]
    p = self.spawn(argv, "sn-gen", prefix, stdout=subprocess.DEVNULL)
    try:
        time.sleep(a.warmup)
        self.result["zero"] = (None, None)
        subprocess.run(["callgrind_control", "-z", str(sw_pid)], check=True,
                       stdout=subprocess.DEVNULL)
        time.sleep(a.window)
        subprocess.run(["callgrind_control", "-d", str(sw_pid)], check=True,
                       stdout=subprocess.DEVNULL)
        self.result["dump"] = (None, None)
        self.result["dumped"] = True
        p.wait(a.duration + 60)
    finally:
        self.reap(p)
    z = dict.fromkeys(("rx_mpps", "tx_mpps", "window_s", "tx_packets", "rx_packets",
                       "loops", "tx_calls", "tx_zero_calls", "rx_empty_polls"), 0)
    return {"bench": z, "sched": {}}


CgBench.run_idle_gen = idle_gen


def annotate(path, top):
    """From callgrind_annotate: the total, [(function, inclusive Ir)] of
    every function, largest first, and {function: calls} (summed over its
    callers; "(vhost per-frame)": see below)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling",
                          "--threshold=100", path],
                         check=True, capture_output=True, text=True).stdout
    total = None
    incl, calls = {}, {}
    callees = {}          # caller -> {callee: calls}
    cur = None
    num = r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?"
    for line in out.splitlines():
        m = re.match(num + r"PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(num + r">\s+(\S+):(\S+) \(([\d,]+)x\)", line)
        if m:
            fn, n = m.group(3), int(m.group(4).replace(",", ""))
            calls[fn] = calls.get(fn, 0) + n
            if cur is not None:
                callees.setdefault(cur, {})
                callees[cur][fn] = callees[cur].get(fn, 0) + n
            continue
        m = re.match(num + r"\*\s+(\S+):(\S+)", line)
        if m and total is not None:
            # a function inlined in several files has one entry per file:
            # the largest is the function's own inclusive cost
            fn, ir = m.group(3), int(m.group(1).replace(",", ""))
            incl[fn] = max(incl.get(fn, 0), ir)
            cur = fn
    funcs = sorted(incl.items(), key=lambda kv: -kv[1])
    # frames delivered, as counted by the vhost library itself: the
    # most-called function under rte_vhost_enqueue_burst (three levels) is
    # its per-frame copy into the guest's RX ring (a static function, an
    # address in Debian's stripped build), called once per frame taken:
    # the same count for the daemon and for testpmd (checked against
    # their own counters, frames_ctr).
    best, level = 0, {"rte_vhost_enqueue_burst"}
    for _ in range(3):
        nxt = set()
        for f in level:
            for c, n in callees.get(f, {}).items():
                best = max(best, n)
                nxt.add(c)
        level = nxt
    calls["(vhost per-frame)"] = best
    return total, funcs, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR",
                                                          str(datapath.REPO / "build")))
    ap.add_argument("--mode", default="scheduled", choices=[*datapath.MODES, "testpmd"],
                    help="a datapath.py mode, or testpmd (the baseline, see above)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds after vm0's first frame before the window (default 10); "
                         "--idle: after sn-gen starts (default 40: valgrind's start-up)")
    ap.add_argument("--window", type=float, default=20.0, help="measured seconds")
    ap.add_argument("--top", type=int, default=40, help="functions to list")
    ap.add_argument("--out", default=None, help="callgrind output file (kept)")
    ap.add_argument("--frame-fn", default=None,
                    help="function called once per frame (frames = its calls in the window); "
                         "default: the vhost library's per-frame copy into the RX ring "
                         "(frames delivered; sn_vring_used_put counts completions)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--queue-size", type=int, default=1024)
    ap.add_argument("--idle", action="store_true",
                    help="no traffic: per-loop costs of the forwarder's empty iterations")
    ap.add_argument("--idle-json", default=None,
                    help="the --idle output of the same mode: subtract empty iterations")
    ap.add_argument("--tx-free-thresh", type=int, default=0,
                    help="sn-gen's TX reclaim threshold (datapath.py's option; 0 = the PMD's)")
    args = ap.parse_args()
    if args.warmup is None:
        args.warmup = 40.0 if args.idle else 10.0
    # datapath.Bench reads these: sn-gen runs warmup + duration. A loaded
    # run's window waits for the first frame and then stops sn-gen itself
    # (SIGINT), so its sn-gen gets time for the daemon's start-up as well.
    args.duration = args.window + (10.0 if args.idle else 300.0)
    out_file = args.out or f"/tmp/callgrind.sn-{os.getpid()}.out"
    b = CgBench(args, out_file)
    try:
        if args.mode == "testpmd":
            run_testpmd_cg(b, out_file)
        else:
            # The daemon's control socket path is the one run_switch picks.
            def vm0_rx():
                st = datapath.rpc(b.ctl, "stats.get", timeout=120)
                return next(p for p in st["ports"] if p["name"] == "vm0")["queues"][0]["rx_packets"]
            b.probe = None if args.idle else vm0_rx
            overlay = dict(datapath.MODES[args.mode])
            if args.idle:
                overlay["datapath"] = {"idle_sleep_us": 0}
            b.run_switch(overlay)
    finally:
        b.cleanup()
    if "dumped" not in b.result:
        raise SystemExit("datapath_callgrind: the window did not complete"
                         + (f": {b.result['error']}" if "error" in b.result else ""))
    if args.mode == "testpmd":
        # one dump per thread: the forwarding lcore's is the busiest
        dumps = [(annotate(d, args.top), d) for d in glob.glob(out_file + ".1-*")]
        (total, funcs, calls), dump = max(dumps, key=lambda x: x[0][0] or 0)
    else:
        dump = out_file + ".1"     # the -d dump (out_file itself: the rest, at exit)
        total, funcs, calls = annotate(dump, args.top)
    if args.mode == "testpmd":
        loops = calls.get("rte_vhost_dequeue_burst", 0) // 2
        bursts = calls.get("rte_vhost_enqueue_burst", 0)
    else:
        loops = calls.get("sn_vqtx_set_now", 0)
        bursts = calls.get("burst_in", 0)
    if args.idle:
        print(json.dumps({
            "mode": args.mode, "idle": True, "loops": loops, "worker_ir": total,
            "ir_per_loop": round(total / loops, 1) if loops else None,
            "inclusive_per_loop": {f: v / loops for f, v in funcs if v} if loops else {},
            "dump": dump}, indent=2))
        return 0
    (z0, z1), (d0, d1) = b.result["zero"], b.result["dump"]
    frames_ctr = (d0 + d1) / 2 - (z0 + z1) / 2 if None not in (z0, z1, d0, d1) else None
    # Counted inside the window itself (the stats.get snapshots of the
    # RPC thread are not synchronous with callgrind_control under valgrind):
    # frames = completions written (one per frame of a one-descriptor
    # chain), loops = worker iterations, bursts = non-empty TX-ring polls.
    frames = calls.get(args.frame_fn, 0) if args.frame_fn else calls["(vhost per-frame)"]
    out = {
        "mode": args.mode, "frames": frames, "bursts": bursts, "loops": loops,
        "frames_per_burst": round(frames / bursts, 2) if bursts and frames else None,
        "empty_polls": loops - bursts if loops else None,
        "worker_ir": total, "ir_per_frame": round(total / frames, 1) if frames else None,
        "frames_ctr": frames_ctr,
        "frames_ctr_err": ((z1 - z0) + (d1 - d0)) / 2 if frames_ctr is not None else None,
        "ir_per_frame_ctr": round(total / frames_ctr, 1) if frames_ctr else None,
        "frames_ctr_per_burst": round(frames_ctr / bursts, 2) if frames_ctr and bursts else None,
        "inclusive_per_frame": ({f: round(v / frames, 1) for f, v in funcs[:args.top]}
                                if frames else {}),
        "inclusive_per_frame_ctr": ({f: round(v / frames_ctr, 1) for f, v in funcs[:args.top]}
                                    if frames_ctr else {}),
        "calls": {f: calls[f] for f in ("rte_vhost_dequeue_burst", "rte_vhost_enqueue_burst",
                                        "rte_pktmbuf_free_bulk", "mac_read") if f in calls},
        "dump": dump,
    }
    n = frames or frames_ctr
    if args.idle_json and n:
        idle = json.loads(Path(args.idle_json).read_text())
        per_loop = idle["inclusive_per_loop"]
        empty = loops - bursts
        full = {"(total)": (total - empty * idle["ir_per_loop"]) / n}
        for f, v in funcs[:args.top]:
            full[f] = (v - empty * per_loop.get(f, 0.0)) / n
        out["idle_ir_per_loop"] = idle["ir_per_loop"]
        out["full_burst_per_frame"] = {f: round(v, 1) for f, v in full.items()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
