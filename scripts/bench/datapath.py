#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Datapath benchmark: 64 B frames through schednicd vs testpmd io-forward.

Method (benchmarking a switch on 2 cores): the generator and the sink are
ONE single-threaded DPDK process, sn-gen, owning both net_virtio_user
ports on CPU 0; the switch under test is alone on CPU 1. The baseline is
dpdk-testpmd with two net_vhost ports in io-forward mode (one forwarding
lcore on CPU 1); the candidate is schednicd (worker lcore on CPU 1; its
main lcore on CPU 0 sleeps in the RPC poll). The two alternate, run after
run, so background load on a shared machine hits both.

Order and statistics: testpmd brackets every run of a mode,
    testpmd, m1, testpmd, m2, ..., mK, testpmd, mK, ..., m1, testpmd, ...
(--runs rounds over the modes, the order reversed every other round, each
testpmd run shared by its two neighbours), so every mode run has a testpmd
run right before and right after it. A run's ratio is its Mpps over the
mean of those two testpmd runs: the baseline interpolated to the run's own
time, which removes the host's slow (linear) drift exactly and halves the
weight of one unlucky testpmd run. "ratio" is the median of these per-run
ratios; "ratio_of_medians" is the median Mpps of the mode over the median
of all testpmd runs; both are reported. testpmd's configuration and
sn-gen's arguments for it are fixed: it is the neutral baseline.

The throughput of a run is what sn-gen's sink received per second over the
--duration window after --warmup (frames that the switch delivered). Each
run also records "other_cpus": the CPU time other processes took from the
machine during the run, per second (busy time from /proc/stat minus our
children's rusage); results are meaningful only when it is close to 0.

Everything started here is stopped by PID, and its sockets and DPDK
runtime directory (/var/run/dpdk/<prefix>) are removed, even on Ctrl-C.

Output: one JSON object on stdout:
  {"packet_size": 64, "testpmd_mpps": M, "modes": {"switch": {"mpps": M,
   "ratio": R, "ratio_of_medians": Q, "ratios": [per-run ratios]}, ...,
   "scheduled": {"mpps": M, "ratio": R, ..., "arbiter_decisions_per_s": D,
   "arbiter_passed_share": P (share of the releases that passed the empty
   scheduler without its class queue)}},
   "runs": {...raw per-run results, each mode run with its "baseline_mpps"
   and "ratio"...}, "order": [...], "command": "..."}
When the testpmd runs around the mode runs show the host's two speed
states, a mode also gets "by_host_state": {"split_mpps": T, "fast" /
"slow": {"n", "ratio", "testpmd_mpps": [lo, hi]}, "mixed": n}, its
bracketed ratios per state (by_host_state(); most useful with
--interleave, whose many short slots see both states).
Each run in "runs" also carries batching proxies: "gen" (sn-gen frames
per tx_burst call and per loop, shares of calls / sink polls that found
nothing), "daemon" (vm0's mean burst, share of worker iterations whose
poll of it found nothing, held occupancy over the window) and "sched"
(share of the window sn-gen's and the switch's busiest thread spent on a
CPU and waiting for one); see doc/benchmarks.md.

Generator options, the same for every mode and the testpmd baseline:
--queue-size sets sn-gen's virtqueue size, --tx-free-thresh its TX reclaim
threshold (default queue size - 64; 0 = the virtio PMD's own) and
--gen-devargs extra net_virtio_user devargs of its ports (default
mrg_rxbuf=0,vectorized=1,in_order=0: the vectorized RX path without
VIRTIO_F_IN_ORDER on any port, as with a Linux guest); see GEN_DEVARGS.

Schedules: --sample-ms N adds each run's Mpps every N ms ("samples_mpps");
--interleave S replaces the sequential schedule by side-by-side sessions
(run_interleaved: testpmd and the mode alternate every S seconds, the idle
pair SIGSTOPped), per-slot ratios against the two testpmd slots around
each mode slot: the host of these machines changes speed on a scale of
seconds (README "Benchmarks / Datapath"), which runs ~12 s apart cannot
pair; --swap-cpus puts sn-gen on CPU 1 and the switch on CPU 0.
--baseline-build DIR (with --interleave) puts another build's schednicd,
in the same mode and configuration, where testpmd was: the ratios are
then this build's against that one's (e.g. a change against its parent
commit), slot by slot in the same session.

Mode "scheduled" (goal ratio >= 0.9) sends vm0 -> uplink through the
whole shaped path (wheel, mailbox, QFQ, deferred completions) at rates
that never limit; see MODES.

Memory modes: --hugepages adds, for every mode M, a mode "M+huge": the
same schednicd configuration with eal.hugepages (its memory from 2 MB
hugepages), scheduled in the same brackets, so both memory modes are
measured side by side in one run; "hugepages" in the output gives, per
mode, M+huge's ratio over M's (median Mpps and bracketed ratios).
"--hugepages" alone reserves --huge-pages more pages (vm.nr_hugepages)
and mounts a private hugetlbfs in the benchmark's temp dir, both undone
at exit; "--hugepages DIR" uses a hugetlbfs the operator prepared.
testpmd keeps --no-huge: the baseline does not change.
"""
import argparse
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchutil import remove_runtime, rpc, stop, wait_control  # noqa: E402 (this directory)

REPO = Path(__file__).resolve().parents[2]


def log(msg):
    print(f"datapath: {msg}", file=sys.stderr, flush=True)


def find_binary(build_dir: Path, names):
    for n in names:
        p = build_dir / n
        if p.exists():
            return p
    raise SystemExit(f"datapath: none of {names} in {build_dir}: build first (scripts/build.sh)")


def wait_for(pred, timeout, what, proc=None, logfile=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = Path(logfile).read_text(errors="replace")[-2000:] if logfile else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        if pred():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what}: timed out after {timeout}s")


def cpu_busy_seconds():
    """Busy time of all CPUs so far (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """How much CPU others used while we ran: busy time of the machine minus
    the CPU time of our reaped children, per wall second (0 = quiet machine;
    1 = one whole CPU taken by someone else)."""

    def __enter__(self):
        self.t = time.monotonic()
        self.busy = cpu_busy_seconds()
        self.ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def __exit__(self, *exc):
        wall = time.monotonic() - self.t
        busy = cpu_busy_seconds() - self.busy
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = (ru.ru_utime - self.ru.ru_utime) + (ru.ru_stime - self.ru.ru_stime)
        self.other_cpus = round(max(0.0, busy - ours) / wall, 3) if wall > 0 else None


# Modes measured against the testpmd baseline: name -> config sections that
# replace/extend schednicd's config for that mode (they appear under
# "modes" in the output).
# "_port" extends every vhost-user port entry. immediate = the builtin
# rte_vhost_dequeue_burst path (same as "switch"); deferred = our own TX ring
# processing with deferred, out-of-order completions, the generator
# marking its TX headers like the patched guest driver (the guest opt-in).
# "_gen" adds sn-gen arguments.
# scheduled = the whole shaped path: vm0 has a policy entry (timing
# wheel at a rate that never limits, 400 Gbit/s), its frames go to the
# uplink through its client mailbox and the QFQ arbiter (link emulated at
# 400 Gbit/s: never limits either), with deferred completions. The uplink
# is a net_vhost ethdev whose virtio-user peer is sn-gen's second port
# ("_uplink_peer"), so sn-gen measures it exactly like the VM->VM modes and
# like testpmd (vhost <-> vhost forwarding in every case). The daemon's
# arbiter decisions/s (frames released per second of its worker clock) over
# the measured window is reported with it.
SCHED_BPS = 400_000_000_000
MODES = {
    "switch": {},
    "immediate": {"_port": {"completion": "immediate"}},
    "deferred": {"_port": {"completion": "deferred"}, "_gen": ["--marker"]},
    "scheduled": {"_port": {"completion": "deferred"}, "_gen": ["--marker"],
                  "_uplink_peer": True,
                  "policy": {"uplink": {"rate_bps": SCHED_BPS, "algorithm": "qfq"},
                             "ports": {"vm0": {"rate_bps": SCHED_BPS, "weight": 1}}}},
}


# sn-gen's virtio-user settings, the same for every run of an invocation
# (testpmd's included). Against a port without VIRTIO_F_IN_ORDER the
# virtio PMD runs its generic split-ring paths: TX reclaims one descriptor
# per frame once its free count is 0 unless more than size -
# tx_free_thresh are used, and RX takes the mergeable path (sn-gen pays
# 180-280 TSC cycles per sent frame and 120-390 per received one); with
# tx_free_thresh = size - 64 and a non-mergeable, vectorized sink it pays
# 120-200 and 110-140 (doc/benchmarks.md).
# in_order=0: sn-gen stands in for our users' guests, and their Linux 6.1
# virtio-net driver never negotiates VIRTIO_F_IN_ORDER
# (vring_transport_features clears it), so every port of every run
# (testpmd's, which offer it, included) runs the virtio PMD's paths
# without in-order, as every ring of such a guest does. '--gen-devargs
# mrg_rxbuf=0,vectorized=1' lets testpmd's ports negotiate in-order.
GEN_DEVARGS = "mrg_rxbuf=0,vectorized=1,in_order=0"
TX_FREE_BELOW = 64      # default tx_free_thresh = queue size - 64


HUGE_MEMORY_MB = 256    # eal.memory_mb of the +huge modes (-m, preallocated)
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


class HugeDir:
    """The hugetlbfs of the +huge modes: DIR as given, or ("auto") pages
    reserved and a private mount in tmp, both undone by close()."""

    def __init__(self, arg, pages, tmp: Path):
        self.nr_before = None
        self.mounted = None
        if arg != "auto":
            self.dir = str(Path(arg).resolve())
            return
        self.nr_before = int(NR_HUGEPAGES.read_text())
        NR_HUGEPAGES.write_text(str(self.nr_before + pages))
        got = int(NR_HUGEPAGES.read_text()) - self.nr_before
        if got < pages:
            self.close()
            raise SystemExit(f"datapath: the kernel gave {got} of {pages} 2 MB hugepages")
        mnt = tmp / "huge"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode:
            self.close()
            raise SystemExit(f"datapath: mount -t hugetlbfs {mnt}: {r.stderr.strip()}")
        self.mounted = self.dir = str(mnt)

    def close(self):
        if self.mounted:
            if subprocess.run(["umount", self.mounted]).returncode:
                subprocess.run(["umount", "-l", self.mounted])
            self.mounted = None
        if self.nr_before is not None:
            NR_HUGEPAGES.write_text(str(self.nr_before))
            self.nr_before = None


def add_huge_modes(modes, huge_dir):
    """Mode M+huge for each M in modes (MODES gains them); the new mode
    list, each +huge mode right after its M."""
    out = []
    for m in modes:
        over = dict(MODES[m])
        over["eal"] = {**over.get("eal", {}), "hugepages": True, "huge_dir": huge_dir,
                       "memory_mb": HUGE_MEMORY_MB}
        MODES[f"{m}+huge"] = over
        out += [m, f"{m}+huge"]
    return out


def huge_ratios(out_modes, modes):
    """Per mode M with an M+huge: M+huge over M, of the median Mpps and of
    the bracketed (testpmd-relative) ratios."""
    res = {}
    for m in modes:
        h = out_modes.get(f"{m}+huge")
        if h is None or m not in out_modes:
            continue
        a = out_modes[m]
        res[m] = {"nohuge_mpps": a["mpps"], "huge_mpps": h["mpps"],
                  "huge_over_nohuge": round(h["mpps"] / a["mpps"], 3) if a["mpps"] else None,
                  "ratio_nohuge": a["ratio"], "ratio_huge": h["ratio"],
                  "ratio_huge_over_nohuge": round(h["ratio"] / a["ratio"], 3)
                  if a["ratio"] else None}
    return res


def add_gen_args(ap):
    ap.add_argument("--tx-free-thresh", type=int, default=None,
                    help="sn-gen's TX reclaim threshold (virtio PMD tx_free_thresh), the same in "
                         f"every mode and for testpmd (default: queue size - {TX_FREE_BELOW}; "
                         "0 = the PMD's own)")
    ap.add_argument("--gen-devargs", default=GEN_DEVARGS, metavar="K=V[,K=V]",
                    help="extra net_virtio_user devargs of every sn-gen port, the same in every "
                         f"mode and for testpmd (default {GEN_DEVARGS!r}: a non-mergeable, "
                         "vectorized sink, and in_order=0 as with a Linux guest; "
                         "'mrg_rxbuf=0,vectorized=1' lets testpmd's ports negotiate in-order, "
                         "'' = the PMD's defaults)")
    ap.add_argument("--gen-hdr", choices=("written", "pmd"), default="written",
                    help="'written' (default): sn-gen stores num_buffers in every frame's "
                         "TX virtio-net header (0, or the opt-in marker in the modes that "
                         "mark), as a guest kernel writes its header for every frame, in every "
                         "mode and for testpmd alike; 'pmd': the virtio PMD's own behaviour "
                         "(an unchanged header line stays unwritten, so only the marking "
                         "modes dirty it)")


def gen_hdr_args(args):
    """sn-gen's --hdr-write for --gen-hdr written, for every run."""
    return ["--hdr-write"] if getattr(args, "gen_hdr", "pmd") == "written" else []


def gen_settings(args):
    """sn-gen's arguments that every run of an invocation shares, testpmd's
    included: queue size, TX reclaim threshold, header writes."""
    return ["--queue-size", args.queue_size, "--tx-free-thresh", args.tx_free_thresh,
            *gen_hdr_args(args)]


def check_gen_args(ap, args):
    if args.tx_free_thresh is None:
        args.tx_free_thresh = max(0, args.queue_size - TX_FREE_BELOW)
    if not 0 <= args.tx_free_thresh < args.queue_size - 3:
        ap.error("--tx-free-thresh: 0 (the PMD's default) .. queue size - 4")


def gen_port(sock, args):
    """sn-gen's --port argument: the socket plus --gen-devargs,
    the same for every port of every run, testpmd's included."""
    extra = getattr(args, "gen_devargs", "")
    return f"{sock},{extra}" if extra else sock


def thread_sched(pid):
    """{tid: (ns on a CPU, ns runnable but waiting)} from schedstat."""
    out = {}
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                v = (task / "schedstat").read_text().split()
                out[task.name] = (int(v[0]), int(v[1]))
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return out


def sample_sched(args, gen_pid, sw_pid, out):
    """Over sn-gen's measured window, the share of wall time the
    busiest thread of sn-gen and of the switch spent on a CPU and waiting
    for one (a busy poller that is never preempted has oncpu 1, wait 0)."""
    time.sleep(args.warmup + 0.2)
    t0 = time.monotonic()
    a = {"gen": thread_sched(gen_pid), "switch": thread_sched(sw_pid)}
    time.sleep(max(0.5, args.duration - 0.5))
    wall = (time.monotonic() - t0) * 1e9
    b = {"gen": thread_sched(gen_pid), "switch": thread_sched(sw_pid)}
    for k in ("gen", "switch"):
        d = [(b[k][t][0] - a[k][t][0], b[k][t][1] - a[k][t][1]) for t in b[k] if t in a[k]]
        if d and wall > 0:
            cpu, wait = max(d)
            out[k] = {"oncpu": round(cpu / wall, 3), "wait": round(wait / wall, 3)}


def gen_proxies(b):
    """sn-gen's batching over its measured window: frames accepted
    per tx_burst call, share of calls that took nothing (TX ring full),
    share of loop iterations whose sink poll found nothing."""
    calls, loops = b.get("tx_calls", 0), b.get("loops", 0)
    return {"tx_per_call": round(b["tx_packets"] / calls, 2) if calls else None,
            "tx_zero_frac": round(b["tx_zero_calls"] / calls, 3) if calls else None,
            "rx_per_loop": round(b["rx_packets"] / loops, 2) if loops else None,
            "rx_empty_frac": round(b["rx_empty_polls"] / loops, 3) if loops else None}


def daemon_proxies(a, b):
    """The daemon's batching between two stats.get snapshots: vm0's
    TX queue 0 frames per non-empty poll, share of worker iterations whose
    poll of it found nothing, held descriptors (deferred: time-weighted
    occupancy percentiles over the interval)."""
    qa = next(p for p in a["ports"] if p["name"] == "vm0")["queues"][0]
    qb = next(p for p in b["ports"] if p["name"] == "vm0")["queues"][0]
    frames = qb["rx_packets"] - qa["rx_packets"]
    bursts = qb["rx_bursts"] - qa["rx_bursts"]
    loops = b["arbiter"]["worker_thread"]["loops"] - a["arbiter"]["worker_thread"]["loops"]
    out = {"burst": round(frames / bursts, 2) if bursts else None,
           "empty_poll_frac": round(1 - bursts / loops, 3) if loops else None}
    ha = {(lo, hi): ns for lo, hi, ns in qa["completion"]["held_occupancy"]["hist"]}
    hist = [(lo, hi, ns - ha.get((lo, hi), 0))
            for lo, hi, ns in qb["completion"]["held_occupancy"]["hist"]]
    total = sum(ns for _, _, ns in hist)
    if total > 0:
        for pct in (50, 99):
            run = 0
            for lo, hi, ns in hist:
                run += ns
                if run >= total * pct / 100:
                    out[f"held_p{pct}"] = hi
                    break
        out["held_mean"] = round(sum((lo + hi) / 2 * ns for lo, hi, ns in hist) / total, 1)
    return out


def median_proxies(rs):
    """Medians over runs of the batching proxies, None when absent."""
    out = {}
    for part, keys in (("gen", ("tx_per_call", "rx_empty_frac")),
                       ("daemon", ("burst", "empty_poll_frac", "held_p99"))):
        for k in keys:
            v = [r[part][k] for r in rs if r.get(part) and r[part].get(k) is not None]
            out[f"{part}_{k}"] = statistics.median(v) if v else None
    for who in ("gen", "switch"):
        v = [r["sched"][who]["oncpu"] for r in rs if who in r.get("sched", {})]
        out[f"{who}_oncpu"] = statistics.median(v) if v else None
    return out


def sample_rates(path, port, size):
    """sn-gen's --sample-ms lines -> Mpps received on `port` in each
    interval (from each sample's own CLOCK_MONOTONIC time), warmup included."""
    pts = read_samples(path, port)
    return [round((b1 - b0) / size / (t1 - t0) * 1e3, 3)
            for (t0, b0), (t1, b1) in zip(pts, pts[1:]) if t1 > t0]


def run_order(modes, rounds):
    """The schedule: testpmd before and after every mode run,
    consecutive mode runs sharing the testpmd run between them; the mode
    order is reversed every other round so no mode always follows another."""
    order = ["testpmd"]
    for i in range(rounds):
        for m in (modes if i % 2 == 0 else modes[::-1]):
            order += [m, "testpmd"]
    return order


def bracket_ratios(seq):
    """seq: [(what, mpps)] in the order run. For every mode run whose two
    neighbours are testpmd runs: (index, baseline, ratio) with baseline the
    mean of the two neighbours' Mpps (the baseline interpolated to the run's
    time: exact for a linear drift) and ratio its Mpps over that baseline.
    Runs without two testpmd neighbours (an interrupted schedule) or with a
    zero baseline get none."""
    out = []
    for i, (what, mpps) in enumerate(seq):
        if what == "testpmd" or i == 0 or i + 1 >= len(seq):
            continue
        if seq[i - 1][0] != "testpmd" or seq[i + 1][0] != "testpmd":
            continue
        base = (seq[i - 1][1] + seq[i + 1][1]) / 2
        if base > 0:
            out.append((i, base, mpps / base))
    return out


# The host of these machines runs in two speed states (testpmd ~7 and
# ~10.5 Mpps in one session with --gen-hdr pmd, ~5.5 and ~10.5 with
# written, switching on a scale of seconds), and a mode's ratio differs
# between them. A bracket whose two
# testpmd neighbours differ by more than STATE_SAME (the state changed
# inside it) belongs to neither state; the states are told apart at the
# largest gap between the brackets' baselines if it is at least STATE_GAP
# and at least STATE_MIN baselines lie on each side (a lone outlier, or
# a few sequential runs spread over the range, make no state).
STATE_SAME = 0.15
STATE_GAP = 1.2
STATE_MIN = 3


def by_host_state(seq):
    """Per mode: its bracketed ratios split by the host's speed state, or
    {} when the baselines do not show two states (STATE_GAP, STATE_MIN).
    Returns {mode: {"split_mpps": T,
    "fast"/"slow": {"n", "ratio" (median), "testpmd_mpps": [lo, hi]},
    "mixed": n}} with T the testpmd Mpps between the states."""
    br = []
    for i, base, r in bracket_ratios(seq):
        a, b = seq[i - 1][1], seq[i + 1][1]
        br.append((seq[i][0], base, r, abs(a - b) <= STATE_SAME * max(a, b)))
    bases = sorted(base for _, base, _, same in br if same)
    gaps = [(bases[k + 1] / bases[k], k)
            for k in range(STATE_MIN - 1, len(bases) - STATE_MIN)]
    if not gaps or max(gaps)[0] < STATE_GAP:
        return {}
    k = max(gaps)[1]
    split = (bases[k] * bases[k + 1]) ** 0.5
    out = {}
    for m, base, r, same in br:
        o = out.setdefault(m, {"split_mpps": round(split, 3), "mixed": 0})
        if not same:
            o["mixed"] += 1
            continue
        o.setdefault("fast" if base >= split else "slow", []).append((r, base))
    for o in out.values():
        for st in ("fast", "slow"):
            v = o.get(st)
            if v:
                o[st] = {"n": len(v), "ratio": round(statistics.median(r for r, _ in v), 3),
                         "testpmd_mpps": [round(min(b for _, b in v), 3),
                                          round(max(b for _, b in v), 3)]}
    return out


def summarize(seq):
    """Per mode (every name but "testpmd" in seq): median Mpps, "ratio" =
    median of the bracketed per-run ratios, "ratio_of_medians" = median Mpps
    over the median of all testpmd runs, and the per-run ratios in run
    order; with two host speed states among the baselines also
    "by_host_state" (by_host_state()). Returns (testpmd median Mpps,
    {mode: {...}})."""
    tp = statistics.median(m for w, m in seq if w == "testpmd")
    per = {}
    for i, base, r in bracket_ratios(seq):
        per.setdefault(seq[i][0], []).append(r)
    out = {}
    for m in dict.fromkeys(w for w, _ in seq if w != "testpmd"):
        mm = statistics.median(x for w, x in seq if w == m)
        rs = per.get(m, [])
        out[m] = {"mpps": round(mm, 3),
                  "ratio": round(statistics.median(rs), 3) if rs else None,
                  "ratio_of_medians": round(mm / tp, 3) if tp > 0 else None,
                  "ratios": [round(r, 3) for r in rs]}
    for m, o in by_host_state(seq).items():
        out[m]["by_host_state"] = o
    return tp, out


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = Path(args.build_dir).resolve()
        self.sn_gen = find_binary(self.build, ["backend/sn-gen"])
        self.schednicd = find_binary(self.build, ["backend/schednicd", "backend/daemon/schednicd"])
        self.testpmd = shutil.which("dpdk-testpmd") or "/usr/bin/dpdk-testpmd"
        self.tmp = Path(tempfile.mkdtemp(prefix="sn-bench-", dir="/tmp"))
        self.procs = []     # (Popen, dpdk prefix)
        self.seq = 0
        # sn-gen's CPU and the switch's (worker / forwarding lcore); the
        # daemon's main lcore sleeps on the generator's CPU. Swapped only
        # by --swap-cpus.
        self.gen_cpu, self.sw_cpu = 0, 1

    def prefix(self, tag):
        self.seq += 1
        return f"sn-bench-{tag}-{os.getpid()}-{self.seq}"

    def spawn(self, argv, name, prefix, **kw):
        logf = self.tmp / f"{name}-{self.seq}.log"
        with open(logf, "wb") as out:
            p = subprocess.Popen([str(a) for a in argv], stdout=kw.pop("stdout", out),
                                 stderr=out, **kw)
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

    def cleanup(self, before_rmtree=None):
        """Stop every process, call before_rmtree (unmount what lives under
        tmp), remove tmp."""
        for p, prefix in reversed(self.procs):
            stop(p)
            remove_runtime(prefix)
        self.procs.clear()
        if before_rmtree:
            before_rmtree()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_gen(self, socks, sw_pid, extra=()):
        a = self.args
        prefix = self.prefix("gen")
        argv = [self.sn_gen, "bench", "--cpu", self.gen_cpu, "--file-prefix", prefix,
                "--size", a.size, "--duration", a.duration, "--warmup", a.warmup,
                "--log-level", "warning", *gen_settings(a), *extra]
        for s in socks:
            argv += ["--port", gen_port(s, a)]
        sample_file = None
        if getattr(a, "sample_ms", 0):     # per-interval Mpps
            sample_file = self.tmp / f"samples-{self.seq}.jsonl"
            argv += ["--sample-ms", a.sample_ms, "--sample-file", sample_file]
        p = self.spawn(argv, "sn-gen", prefix, stdout=subprocess.PIPE)
        sched = {}
        th = threading.Thread(target=sample_sched, args=(a, p.pid, sw_pid, sched), daemon=True)
        th.start()
        try:
            out, _ = p.communicate(timeout=a.duration + a.warmup + 60)
        finally:
            self.reap(p)
        th.join(5)
        if p.returncode != 0:
            raise RuntimeError(f"sn-gen exited {p.returncode}: "
                               f"{p.logfile.read_text(errors='replace')[-2000:]}")
        res = json.loads(out)
        res["sched"] = sched
        if sample_file is not None:
            res["samples_mpps"] = sample_rates(sample_file, len(socks) - 1, a.size)
            sample_file.unlink(missing_ok=True)
        return res

    def testpmd_argv(self, socks, prefix):
        """The baseline: testpmd io-forwarding between two net_vhost ports
        on the switch's CPU (the same configuration for every run)."""
        argv = [self.testpmd, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
                "--lcores", f"0@{self.sw_cpu},1@{self.sw_cpu}", "--log-level", "warning"]
        for i, s in enumerate(socks):
            argv += ["--vdev", f"net_vhost{i},iface={s},queues=1"]
        return argv + ["--", "--forward-mode=io", "--auto-start", "--nb-cores=1",
                       "--total-num-mbufs=32768"]

    def run_testpmd(self):
        socks = [str(self.tmp / f"tp{i}.sock") for i in range(2)]
        for s in socks:
            Path(s).unlink(missing_ok=True)
        prefix = self.prefix("tp")
        argv = self.testpmd_argv(socks, prefix)
        # testpmd without -i exits when stdin reaches EOF: keep a pipe open.
        tp = self.spawn(argv, "testpmd", prefix, stdin=subprocess.PIPE)
        try:
            wait_for(lambda: all(os.path.exists(s) for s in socks), 30, "testpmd sockets",
                     tp, tp.logfile)
            res = self.run_gen(socks, tp.pid)
        finally:
            self.reap(tp)
            for s in socks:
                Path(s).unlink(missing_ok=True)
        out = {"mpps": res["bench"]["rx_mpps"], "tx_mpps": res["bench"]["tx_mpps"],
               "window_s": res["bench"]["window_s"], "gen": gen_proxies(res["bench"]),
               "sched": res["sched"]}
        if "samples_mpps" in res:
            out["samples_mpps"] = res["samples_mpps"]
        return out

    def daemon_config(self, overlay, prefix, socks=None, ctl=None):
        """schednicd's config for a mode overlay: (config, sn-gen's sockets,
        control socket). socks / ctl: other paths for them (--baseline-build:
        sn-gen's port 0 = vm0, port 1 = vm1 or the uplink's peer)."""
        ctl = ctl or str(self.tmp / "ctl.sock")
        peer = overlay.get("_uplink_peer")
        if socks is None:
            socks = [str(self.tmp / f"vm{i}.sock") for i in range(2)]
            if peer:                   # sn-gen port 1 = the uplink's peer
                socks[1] = str(self.tmp / "up.sock")
        cfg = {
            "eal": {"memory_mb": 1024, "file_prefix": prefix, "main_cpu": self.gen_cpu,
                    "worker_cpu": self.sw_cpu},
            "control": {"socket": ctl, "state_dir": os.path.join(os.path.dirname(ctl), "state")},
            "uplink": {"name": "uplink", "devargs": f"net_vhost0,iface={socks[1]},queues=1"}
            if peer else None,
            "ports": [{"name": f"vm{i}", "type": "vhost-user", "path": s, "mode": "server",
                       **overlay.get("_port", {})}
                      for i, s in enumerate(socks[:1] if peer else socks)],
        }
        if peer:
            cfg["datapath"] = {"mbufs": 32767}
        for k, v in overlay.items():
            if k in ("_port", "_gen", "_uplink_peer"):
                continue
            if isinstance(v, dict) and isinstance(cfg.get(k), dict):
                cfg[k].update(v)
            else:
                cfg[k] = v
        return cfg, socks, ctl

    def build_baseline_argv(self, overlay, socks, prefix):
        """--baseline-build: the command line of the other build's
        schednicd, configured by daemon_config() as this build's for the
        same mode, on sockets `socks` and its own control socket."""
        cfg, _, _ = self.daemon_config(overlay, prefix, socks=list(socks),
                                       ctl=str(self.tmp / "ctl-baseline.sock"))
        path = self.tmp / "schednicd-baseline.json"
        path.write_text(json.dumps(cfg))
        return [self.baseline_schednicd, "--config", path]

    def run_switch(self, overlay):
        prefix = self.prefix("d")
        cfg, socks, ctl = self.daemon_config(overlay, prefix)
        peer = overlay.get("_uplink_peer")
        cfg_path = self.tmp / "schednicd.json"
        cfg_path.write_text(json.dumps(cfg))
        d = self.spawn([self.schednicd, "--config", cfg_path], "schednicd", prefix,
                       stdin=subprocess.DEVNULL)
        try:
            wait_control(ctl, d)
            snap = {}
            # counters at the start and end of sn-gen's window (arbiter
            # decisions, the daemon's batching proxies)
            def sample_window():
                time.sleep(self.args.warmup + 0.2)
                try:
                    snap["a"] = rpc(ctl, "stats.get")
                    time.sleep(max(0.5, self.args.duration - 0.5))
                    snap["b"] = rpc(ctl, "stats.get")
                except (OSError, ValueError, RuntimeError):
                    pass
            th = threading.Thread(target=sample_window, daemon=True)
            th.start()
            res = self.run_gen(socks, d.pid, overlay.get("_gen", ()))
            stats = rpc(ctl, "stats.get")
            th.join(5)
            try:
                rpc(ctl, "shutdown")
                d.wait(15)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                pass
        finally:
            self.reap(d)
            for s in socks + [ctl]:
                Path(s).unlink(missing_ok=True)
        drops = {p["name"]: {k: v for k, v in p["drops"].items() if v}
                 for p in stats["ports"]}
        out = {"mpps": res["bench"]["rx_mpps"], "tx_mpps": res["bench"]["tx_mpps"],
               "window_s": res["bench"]["window_s"], "drops": drops,
               "gen": gen_proxies(res["bench"]), "sched": res["sched"]}
        if "samples_mpps" in res:
            out["samples_mpps"] = res["samples_mpps"]
        if "a" in snap and "b" in snap:
            out["daemon"] = daemon_proxies(snap["a"], snap["b"])
        arb = {k: v["arbiter"] for k, v in snap.items()}
        if peer:
            pol = {p["name"]: p["policy"] for p in stats["ports"] if "policy" in p}
            out["policy_drops"] = {n: {k: v for k, v in q["drops"].items() if v}
                                   for n, q in pol.items()}
            if "a" in arb and "b" in arb and arb["b"]["clock_ns"] > arb["a"]["clock_ns"]:
                dt = (arb["b"]["clock_ns"] - arb["a"]["clock_ns"]) / 1e9
                out["arbiter_decisions_per_s"] = round(
                    (arb["b"]["released"] - arb["a"]["released"]) / dt)
                out["arbiter_scans_per_s"] = round((arb["b"]["scans"] - arb["a"]["scans"]) / dt)
                # the share of those releases that passed through
                # the empty scheduler without its class queue (layout
                # 1core; 0 for a daemon without the counter)
                rel = arb["b"]["released"] - arb["a"]["released"]
                if rel > 0:
                    out["arbiter_passed_share"] = round(
                        (arb["b"].get("passed", 0) - arb["a"].get("passed", 0)) / rel, 4)
        return out


def slot_rates(samples, slots, size, skip):
    """Interleaving: samples = [(t_ns, rx_bytes)] of one sn-gen
    (CLOCK_MONOTONIC); slots = [(t0, t1)] in seconds of the same clock, the
    times its pair ran. Per slot, the Mpps between its first sample at or
    after t0 + skip (caches and rings warm again) and its last sample before
    t1; None when a slot has fewer than two such samples."""
    out = []
    for t0, t1 in slots:
        pts = [(t, b) for t, b in samples if t0 + skip <= t / 1e9 <= t1]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            out.append(None)
            continue
        out.append((pts[-1][1] - pts[0][1]) / size / (pts[-1][0] - pts[0][0]) * 1e3)
    return out


def read_samples(path, port):
    """sn-gen's --sample-file lines -> [(t_ns, rx_bytes of `port`)]."""
    pts = []
    try:
        for line in Path(path).read_text().splitlines():
            try:
                d = json.loads(line)
                pts.append((d["t_ns"], d["rx_bytes"][port]))
            except (ValueError, KeyError, IndexError):
                pass
    except OSError:
        pass
    return pts


def run_interleaved(b, mode, args):
    """testpmd and schednicd (mode) with one sn-gen each, all four
    started; exactly one pair runs at a time (the other pair's two
    processes SIGSTOPped: no CPU), switching every --interleave seconds,
    testpmd first and last. Each sn-gen samples its sink every 50 ms; a
    slot's Mpps counts from --interleave-skip after the resume to the stop.
    The host's speed changes on a scale of seconds (README "Benchmarks /
    Datapath"), far below the ~12 s between two runs of the
    sequential schedule; here a mode slot and its two testpmd neighbours
    are at most one slot apart. Returns [(what, Mpps)] in time order."""
    a = args
    nslots = max(1, int(round(a.duration / a.interleave)))
    total = a.warmup + (2 * nslots + 1) * a.interleave + 30
    tp_socks = [str(b.tmp / f"tp{i}.sock") for i in range(2)]
    for s_ in tp_socks:
        Path(s_).unlink(missing_ok=True)
    pre_tp = b.prefix("tp")
    overlay = MODES[mode]
    if getattr(a, "baseline_build", None):
        # the baseline pair is another build's schednicd in the same
        # mode (its generator as the mode's: the marker too)
        argv = b.build_baseline_argv(overlay, tp_socks, pre_tp)
        tp_gen = overlay.get("_gen", ())
    else:
        argv = b.testpmd_argv(tp_socks, pre_tp)
        tp_gen = ()
    pre_d = b.prefix("d")
    cfg, d_socks, ctl = b.daemon_config(overlay, pre_d)
    cfg_path = b.tmp / "schednicd.json"
    cfg_path.write_text(json.dumps(cfg))
    procs = {}

    def gen(socks, extra, tag):
        prefix = b.prefix("gen")
        sf = b.tmp / f"samples-{tag}.jsonl"
        argv = [b.sn_gen, "bench", "--cpu", b.gen_cpu, "--file-prefix", prefix,
                "--size", a.size, "--duration", total, "--warmup", 0,
                "--log-level", "warning", *gen_settings(a), "--sample-ms", 50,
                "--sample-file", sf, *extra]
        for s_ in socks:
            argv += ["--port", gen_port(s_, a)]
        return b.spawn(argv, f"sn-gen-{tag}", prefix, stdout=subprocess.DEVNULL), sf

    def signal_pair(what, sig):
        for p in procs[what]:
            if p.poll() is None:
                os.kill(p.pid, sig)

    try:
        tp = b.spawn(argv, "testpmd", pre_tp, stdin=subprocess.PIPE)
        d = b.spawn([b.schednicd, "--config", cfg_path], "schednicd", pre_d,
                    stdin=subprocess.DEVNULL)
        wait_for(lambda: all(os.path.exists(s_) for s_ in tp_socks), 30, "testpmd sockets",
                 tp, tp.logfile)
        wait_control(ctl, d)
        g_tp, sf_tp = gen(tp_socks, tp_gen, "tp")
        g_m, sf_m = gen(d_socks, overlay.get("_gen", ()), mode)
        procs["testpmd"], procs[mode] = (tp, g_tp), (d, g_m)
        time.sleep(a.warmup)       # both pairs connect and warm up (sharing the CPUs)
        signal_pair(mode, signal.SIGSTOP)
        slots = {"testpmd": [], mode: []}
        order = ["testpmd" if k % 2 == 0 else mode for k in range(2 * nslots + 1)]
        cur = "testpmd"
        for what in order:
            if what != cur:
                signal_pair(cur, signal.SIGSTOP)
                signal_pair(what, signal.SIGCONT)
                cur = what
            t0 = time.monotonic()
            time.sleep(a.interleave)
            slots[what].append((t0, time.monotonic()))
            for p in procs[what]:
                if p.poll() is not None:
                    raise RuntimeError(f"{what}: a process exited early "
                                       f"({p.logfile.read_text(errors='replace')[-1500:]})")
        for what in procs:
            signal_pair(what, signal.SIGCONT)
    finally:
        for what in list(procs):
            signal_pair(what, signal.SIGCONT)
        for p, _ in list(b.procs):
            if p in procs.get(mode, ()) or p in procs.get("testpmd", ()):
                b.reap(p)
        for s_ in tp_socks + d_socks + [ctl, str(b.tmp / "ctl-baseline.sock")]:
            Path(s_).unlink(missing_ok=True)
    rates = {w: slot_rates(read_samples(sf, 1), slots[w], a.size, a.interleave_skip)
             for w, sf in (("testpmd", sf_tp), (mode, sf_m))}
    seq, it = [], {w: iter(r) for w, r in rates.items()}
    for what in order:
        seq.append((what, next(it[what])))
    return seq


def main_interleaved(b, args, modes, load):
    """--interleave: per run and mode one side-by-side session
    (run_interleaved); the statistics of summarize() over its slots."""
    sessions, flat, other = [], [], []
    try:
        for i in range(args.runs):
            for m in (modes if i % 2 == 0 else modes[::-1]):
                with CpuMeter() as cpu:
                    seq = run_interleaved(b, m, args)
                sessions.append({"mode": m, "run": i, "other_cpus": cpu.other_cpus,
                                 "loadavg": os.getloadavg()[0],
                                 "slots": [[w, None if x is None else round(x, 3)]
                                           for w, x in seq]})
                other.append(cpu.other_cpus)
                flat += [(w, x) for w, x in seq if x is not None]
                got = [x for w, x in seq if w == m and x is not None]
                log(f"{m} run {i}: {len(got)} slots, median "
                    f"{statistics.median(got) if got else 0:.3f} Mpps "
                    f"(other processes used {cpu.other_cpus} CPUs meanwhile)")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        b.cleanup()
    if not flat:
        log("no slot measured")
        return 1
    tp, out_modes = summarize(flat)
    load["after"] = os.getloadavg()
    print(json.dumps({
        "packet_size": args.size, "queue_size": args.queue_size,
        "tx_free_thresh": args.tx_free_thresh, "gen_devargs": args.gen_devargs,
        "gen_hdr": args.gen_hdr,
        "interleave_s": args.interleave,
        "baseline": (f"schednicd of {args.baseline_build}" if args.baseline_build
                     else "testpmd"),
        "testpmd_mpps": round(tp, 3), "modes": out_modes, "sessions": sessions,
        "loadavg": load, "other_cpus_max": max(other),
        "command": " ".join(shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:]),
    }, indent=2))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--runs", type=int, default=3,
                    help="runs per mode (median; default 3); testpmd runs before and after "
                         "every mode run: runs*len(modes)+1 testpmd runs in all")
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=2.0, help="warmup seconds per run")
    ap.add_argument("--size", type=int, default=64, help="frame size without FCS")
    ap.add_argument("--queue-size", type=int, default=1024,
                    help="virtqueue size of sn-gen's virtio-user ports, the same in every mode "
                         "and for testpmd (the driver sets it; default 1024, sn-gen's default)")
    add_gen_args(ap)
    ap.add_argument("--interleave", type=float, default=0, metavar="S",
                    help="instead of the sequential schedule, run testpmd and each "
                         "mode side by side and alternate them every S seconds (the idle pair "
                         "stopped); ratios per slot against its two testpmd neighbours; "
                         "--duration = measured seconds per mode and run (default 0 = off)")
    ap.add_argument("--baseline-build", default=None, metavar="DIR",
                    help="with --interleave: the baseline pair runs DIR's schednicd "
                         "(another build, e.g. of an older commit) in the same mode instead of "
                         "testpmd; 'testpmd_mpps' and every ratio are then against that build "
                         "(it must accept this build's configuration for the mode)")
    ap.add_argument("--interleave-skip", type=float, default=0.25, metavar="S",
                    help="with --interleave: seconds after each resume not counted (default 0.25)")
    ap.add_argument("--swap-cpus", action="store_true",
                    help="sn-gen on CPU 1, the switch on CPU 0 "
                         "(every mode and testpmd alike)")
    ap.add_argument("--sample-ms", type=int, default=0,
                    help="also record sn-gen's received Mpps every N ms of each run "
                         "(runs.<m>[i].samples_mpps, warmup included; default 0 = off)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"comma-separated schednicd modes (default/all: {','.join(MODES)})")
    ap.add_argument("--hugepages", nargs="?", const="auto", default=None, metavar="DIR",
                    help="also run every mode M as M+huge (eal.hugepages) in the same schedule; "
                         "DIR: a prepared hugetlbfs; without DIR the benchmark reserves "
                         "--huge-pages 2 MB pages and mounts its own, undone at exit")
    ap.add_argument("--huge-pages", type=int, default=192,
                    help=f"2 MB pages to reserve for --hugepages without DIR (default 192; the "
                         f"+huge modes preallocate {HUGE_MEMORY_MB} MB)")
    args = ap.parse_args()
    if args.runs < 1 or args.duration <= 0 or not 60 <= args.size <= 1514:
        ap.error("need --runs >= 1, --duration > 0, 60 <= --size <= 1514")
    if args.queue_size not in (64, 128, 256, 512, 1024, 2048, 4096):
        ap.error("--queue-size: a power of two, 64..4096")
    check_gen_args(ap, args)

    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r} (have: {', '.join(MODES)})")
    if args.interleave and args.interleave_skip >= args.interleave:
        ap.error("--interleave-skip must be below --interleave")
    if args.baseline_build and not args.interleave:
        ap.error("--baseline-build needs --interleave")
    if args.hugepages and args.interleave:
        ap.error("--hugepages: with the sequential schedule only")
    b = Bench(args)
    huge = None
    if args.hugepages:
        try:
            huge = HugeDir(args.hugepages, args.huge_pages, b.tmp)
        except SystemExit:
            b.cleanup()
            raise
        base_modes = modes
        modes = add_huge_modes(modes, huge.dir)
        log(f"hugepages from {huge.dir}: modes {', '.join(modes)}")
    if args.baseline_build:
        b.baseline_schednicd = str(Path(args.baseline_build).resolve() / "backend" / "schednicd")
        if not os.access(b.baseline_schednicd, os.X_OK):
            ap.error(f"--baseline-build: no executable {b.baseline_schednicd}")
    if args.swap_cpus:
        b.gen_cpu, b.sw_cpu = 1, 0
    runs = {"testpmd": [], **{m: [] for m in modes}}
    load = {"before": os.getloadavg()}
    if args.interleave:
        return main_interleaved(b, args, modes, load)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    order = run_order(modes, args.runs)
    seq = []                    # (what, result) in run order
    try:
        for k, what in enumerate(order):
            with CpuMeter() as cpu:
                r = b.run_testpmd() if what == "testpmd" else b.run_switch(MODES[what])
            r["run"] = sum(1 for w, _ in seq if w == what)
            r["seq"] = k
            r["other_cpus"] = cpu.other_cpus
            r["loadavg"] = os.getloadavg()[0]
            runs[what].append(r)
            seq.append((what, r))
            log(f"[{k + 1}/{len(order)}] {what} run {r['run']}: {r['mpps']:.3f} Mpps "
                f"(other processes used {cpu.other_cpus} CPUs meanwhile)")
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        # the private hugetlbfs is mounted under b.tmp: unmount it first
        b.cleanup(huge.close if huge else None)
    load["after"] = os.getloadavg()
    flat = [(w, r["mpps"]) for w, r in seq]
    for i, base, ratio in bracket_ratios(flat):
        seq[i][1]["baseline_mpps"] = round(base, 3)
        seq[i][1]["ratio"] = round(ratio, 3)
    tp, out_modes = summarize(flat)
    for m in modes:
        out_modes[m]["proxies"] = median_proxies(runs[m])
        dec = [r["arbiter_decisions_per_s"] for r in runs[m] if "arbiter_decisions_per_s" in r]
        if dec:
            out_modes[m]["arbiter_decisions_per_s"] = round(statistics.median(dec))
        ps = [r["arbiter_passed_share"] for r in runs[m] if "arbiter_passed_share" in r]
        if ps:
            out_modes[m]["arbiter_passed_share"] = round(statistics.median(ps), 4)
    out = {
        "packet_size": args.size,
        "queue_size": args.queue_size,
        "tx_free_thresh": args.tx_free_thresh,
        "gen_devargs": args.gen_devargs,
        "gen_hdr": args.gen_hdr,
        "testpmd_mpps": round(tp, 3),
        "testpmd_proxies": median_proxies(runs["testpmd"]),
        "modes": out_modes,
        **({"hugepages": huge_ratios(out_modes, base_modes)} if huge else {}),
        "runs": runs,
        "order": order,
        "loadavg": load,
        # max over runs of the CPUs other processes used during a run; the
        # numbers are only comparable with a quiet machine (close to 0)
        "other_cpus_max": max(r["other_cpus"] for v in runs.values() for r in v),
        "command": " ".join(shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:]),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
