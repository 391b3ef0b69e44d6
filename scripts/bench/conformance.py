#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Rate conformance: schednic's per-port limit vs Linux HTB.

Metric (Carousel §7.1.1): a flow limited to R is sampled every 100 ms at
the receiver; the result is the mean absolute deviation of the sampled
rates from R, in percent of R.

Sample rates are computed from each sample's own timestamp (rate_i =
delta bytes / delta t), never from the nominal 100 ms: on this loaded
2-core machine a sampler can be descheduled across a boundary, and then
its interval is longer, not its byte count wrong.

schednic: sn-gen (one single-threaded DPDK process on CPU 0) offers
1.2 x R of fixed-size frames on vhost port vm0, which has the policy
{"rate_bps": R}; the daemon (worker on CPU 1) runs the whole shaped path
(Carousel timestamp -> timing wheel -> client mailbox -> QFQ arbiter at
line rate -> uplink). The uplink is a net_vhost ethdev whose virtio-user
peer is another port of the same sn-gen process, i.e. the shaped traffic
leaves through the uplink and is counted by sn-gen's sampling sink
(--sample-ms 100: JSON lines with the TSC time of each sample). Excess is
dropped at the wheel horizon (counted as policy drop "horizon").

HTB: two network namespaces joined by a veth pair; on the sender's end an
HTB root qdisc whose default class has rate = ceil = R; iperf3 -u -b 0
(unlimited; paced by HTB's backpressure on its socket buffer) sends UDP
frames of the same size to an iperf3 server in the other namespace; the
sink samples the receiving veth's rx_bytes counter every 100 ms with
CLOCK_MONOTONIC timestamps (both bytes without FCS, as sn-gen counts).

Frame size per rate: big enough for 1 Gbit/s to be reachable (1500 B =
83 kpps), small enough that a 100 ms sample holds >= ~200 frames (the
quantisation of one frame is then <= 0.5 %): size = clamp(R / 16000, 64,
1500) bytes.

Usage: conformance.py [--json] [--build-dir B] [--seconds S] [--rates ...]
Everything started here is stopped by PID; namespaces, sockets and the
DPDK runtime directories are removed, also on error.
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

from benchutil import remove_runtime, rpc, stop  # noqa: E402 (this directory)

REPO = Path(__file__).resolve().parents[2]
RATES = [1_000_000, 10_000_000, 100_000_000, 1_000_000_000]
TAG = os.environ.get("SN_BENCH_TAG", "G")   # in DPDK file prefixes, netns names


def log(msg):
    print(f"conformance: {msg}", file=sys.stderr, flush=True)


def frame_size(rate_bps):
    return int(min(1500, max(64, rate_bps // 16000)))


def wait_for(pred, timeout, what, proc=None, logfile=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = Path(logfile).read_text(errors="replace")[-2000:] if logfile else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        try:
            if pred():
                return
        except (OSError, ConnectionError, RuntimeError, ValueError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not after {timeout}s")


# -- the metric -------------------------------------------------------------

def sample_rates(samples, key=lambda s: s["bytes"]):
    """[(t_s, cumulative bytes)] -> per-interval bits/s, from the timestamps."""
    out = []
    for a, b in zip(samples, samples[1:]):
        dt = b[0] - a[0]
        if dt > 0:
            out.append((b[1] - a[1]) * 8 / dt)
    return out


def mad_pct(rates, target):
    """Carousel §7.1.1: mean absolute deviation from the target, in %."""
    return 100.0 * statistics.fmean(abs(r - target) for r in rates) / target


def read_samples(path, index, field="flow_rx_bytes"):
    """sn-gen --sample-file lines -> [(t_s, bytes of flow/port `index`)]."""
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue                       # a line cut by the stop
        out.append((d["t_ns"] / 1e9, d[field][index]))
    return out


def thread_waits(pid):
    """{thread id: ns spent runnable but not running} (schedstat field 2;
    keyed by tid, not name: DPDK renames its threads after start):
    how long the OS kept each thread of pid off its CPU so far."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return out


def thread_cpu(pid):
    """{thread id: ns spent on a CPU} (schedstat field 1)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def busiest_cpu_ms(pid, before):
    """The most CPU time (ms) any thread of pid got since `before` (a
    thread_cpu() result): for a busy poller, the time it had to work in."""
    now = thread_cpu(pid)
    return round(max((now[k] - before.get(k, 0)) for k in now) / 1e6, 2) if now else 0.0


def busiest_wait_ms(pid, before):
    """The largest runqueue wait (ms) any thread of pid accumulated since
    `before` (a thread_waits() result): a busy-polling lcore should have ~0."""
    now = thread_waits(pid)
    return round(max((now[k] - before.get(k, 0)) for k in now) / 1e6, 2) if now else 0.0


# -- schednic ---------------------------------------------------------------

class Schednic:
    """schednicd + one sn-gen owning the VM peers and the uplink's peer.

    ports: VM port names; the uplink is net_vhost (server) whose peer is
    sn-gen's last port. Flows go from port i to the uplink peer (learned,
    so unicast: no flood copies)."""

    def __init__(self, build_dir, ports, policy, size, pps, sample_ms=100,
                 flows=None, workdir=None, port_extra=None, queue_size=4096, datapath=None,
                 eal=None, datapath_extra=None, queues=1):
        self.build = Path(build_dir)
        self.dir = Path(workdir or tempfile.mkdtemp(prefix=f"sn-conf{TAG}-", dir="/tmp"))
        self.own_dir = workdir is None
        self.ports, self.policy, self.size, self.pps = ports, policy, size, pps
        self.sample_ms = sample_ms
        self.port_extra = port_extra or {}      # name -> extra port config
        self.queue_size = queue_size            # sn-gen's virtqueues
        self.datapath = {**(datapath or {}), **(datapath_extra or {})}   # merged into the config
        self.eal = eal or {}
        self.flows = flows if flows is not None else list(range(len(ports)))
        # queue pairs of every port (uplink net_vhost, VM ports, sn-gen's
        # drivers): layouts 2core / ncore transmit on uplink TX queues
        # 1..W, which net_vhost enables only for a driver with that many
        # pairs, and DPDK 22.11's virtio-user cannot mix MQ and one-queue
        # backends (tests/datapath/test_multiqueue.py), so all ports get N.
        # sn-gen's mempool holds 8192 mbufs per port: N RX rings of
        # queue_size each must fit in it, or the last rings filled get no
        # buffers and the daemon's TX to them fails silently (ring_full):
        # queue_size is capped at the power of two <= 4096 / N
        self.queues = queues
        self.queue_size = min(queue_size, 1 << (4096 // queues).bit_length() - 1)
        self.daemon = self.gen = None
        n = f"{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        self.dprefix, self.gprefix = f"sn-conf{TAG}-d-{n}", f"sn-conf{TAG}-g-{n}"
        self.ctl = str(self.dir / "ctl.sock")
        self.samples = self.dir / "samples.jsonl"
        self.lat_file = self.dir / "latency.jsonl"     # flows with "lat=1" (isolation test)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def rpc(self, method, params=None):
        return rpc(self.ctl, method, params)

    def start(self):
        up_sock = self.dir / "up.sock"
        cfg = {
            "eal": {"memory_mb": 1024, "file_prefix": self.dprefix, "main_cpu": 0,
                    "worker_cpu": 1, **self.eal},
            "control": {"socket": self.ctl, "state_dir": os.path.join(os.path.dirname(self.ctl), "state")},
            "datapath": {"mbufs": 32767, **self.datapath},
            "uplink": {"name": "uplink",
                       "devargs": f"net_vhost0,iface={up_sock},queues={self.queues}"},
            "ports": [{"name": p, "type": "vhost-user", "path": str(self.dir / f"{p}.sock"),
                       "mode": "server", **({"queues": self.queues} if self.queues > 1 else {}),
                       **self.port_extra.get(p, {})} for p in self.ports],
            "policy": self.policy,
        }
        (self.dir / "schednicd.json").write_text(json.dumps(cfg))
        dlog = open(self.dir / "schednicd.log", "wb")
        self.daemon = subprocess.Popen([str(self.build / "backend" / "schednicd"), "--config",
                                        str(self.dir / "schednicd.json")],
                                       stdout=dlog, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        dlog.close()
        wait_for(lambda: self.rpc("version"), 60, "schednicd", self.daemon,
                 self.dir / "schednicd.log")
        sync = self.dir / "sync"
        sync.mkdir()
        up_idx = len(self.ports)
        argv = [str(self.build / "backend" / "sn-gen"), "count", "--cpu", "0",
                "--file-prefix", self.gprefix, "--sync", str(sync), "--log-level", "warning",
                "--settle", "0", "--size", str(self.size), "--rate", str(self.pps),
                "--queue-size", str(self.queue_size), "--mem", "512",
                "--sample-ms", str(self.sample_ms), "--sample-file", str(self.samples)]
        if self.queues > 1:
            argv += ["--queues", str(self.queues)]
        if any(e.get("completion") == "deferred" for e in self.port_extra.values()):
            # deferred ports hold long only for a guest that opted in:
            # mark TX headers like the patched guest driver
            argv += ["--marker"]
        for i, p in enumerate(self.ports):
            argv += ["--port", f"{self.dir / (p + '.sock')},mac=02:53:47:00:00:{i + 1:02x}"]
        argv += ["--port", f"{up_sock},mac=02:53:47:00:00:99"]
        for f in self.flows:   # port index, or (port index, frames[, extra flow keys])
            i, count, extra = (tuple(f) + ("",))[:3] if isinstance(f, tuple) else (f, 10**10, "")
            dst = "" if "dst=" in extra else f",dst={up_idx}"   # default: the uplink peer
            argv += ["--flow", f"src={i}{dst},count={count},phase=0" +
                     (f",{extra.lstrip(',')}" if extra else "")]
        if any(isinstance(f, tuple) and "lat=1" in f[2:] for f in self.flows):
            argv += ["--lat-file", str(self.lat_file)]   # sn-gen writes it at exit
        glog = open(self.dir / "sn-gen.log", "wb")
        self.gen = subprocess.Popen(argv, stdout=glog, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        glog.close()
        wait_for(lambda: (sync / "ready").exists(), 60, "sn-gen ready", self.gen,
                 self.dir / "sn-gen.log")
        (sync / "go-learn").touch()
        wait_for(lambda: (sync / "sent-learn").exists(), 30, "sn-gen learn", self.gen,
                 self.dir / "sn-gen.log")
        time.sleep(0.2)        # the learn frames are through the switch
        (sync / "go-0").touch()

    def stats(self):
        return self.rpc("stats.get")

    def port_policy(self, st=None):
        st = st or self.stats()
        return {p["name"]: p.get("policy", {}) for p in st["ports"]}

    def wait_flowing(self, timeout=30.0):
        def ok():
            pp = self.port_policy()
            return all(pp[p].get("uplink_packets", 0) > 50 for p in self.ports
                       if p in self.policy.get("ports", {}))
        wait_for(ok, timeout, "shaped traffic on the uplink", self.daemon,
                 self.dir / "schednicd.log")

    def read(self, index):
        return read_samples(self.samples, index)

    def close(self):
        stop(self.gen)
        stop(self.daemon)
        remove_runtime(self.gprefix)
        remove_runtime(self.dprefix)
        if self.own_dir and not os.environ.get("SN_KEEP_TMP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def shaper_samples(s, port, seconds, period=0.1, key="released_bytes"):
    """[(worker clock s, `key` bytes of port)] read through stats.get every
    `period` s for `seconds`. Default released_bytes: what left the rate
    limiter (the timing wheel), i.e. the Carousel shaper's output (the
    line-rate arbiter after it may hold a release batch for a few scans
    after a stall), in the worker's own time
    base (policy.clock_ns, the worker's clock at the start of the loop
    iteration whose releases the counters include; a descheduled worker
    freezes both). A read taken while the worker was inside a release
    batch (clock_consistent false: e.g. preempted mid-batch) is not a
    consistent pair and is not used."""
    out = []
    nxt = time.monotonic()
    end = nxt + seconds
    while True:
        for _ in range(20):              # a consistent pair, read again at once
            st = s.stats()
            pol = {p["name"]: p.get("policy", {}) for p in st["ports"]}[port]
            if pol["clock_consistent"]:
                break
        t = pol["clock_ns"] / 1e9
        ok = pol["clock_consistent"]
        # samples at least 0.9 period apart in the worker's time: a short
        # interval (a late read followed by an on-time one) would weigh a
        # one-frame quantisation error as much as a whole sample
        if ok and (not out or t >= out[-1][0] + 0.9 * period):
            out.append((t, pol[key]))
            nxt = time.monotonic() + period
        elif ok:
            nxt = time.monotonic() + max(0.001, out[-1][0] + period - t)
        else:
            nxt = time.monotonic()
        if time.monotonic() >= end:
            return out
        time.sleep(max(0.0, nxt - time.monotonic()))


def window(samples, t0, t1):
    """The samples taken inside [t0, t1] (seconds, CLOCK_MONOTONIC)."""
    return [x for x in samples if t0 <= x[0] <= t1]


def measure(s, port, index, rate, seconds):
    """One measuring window on a running Schednic: the deviation of port's
    shaped output in 100 ms samples, two ways:
      sink_dev_pct:   at the receiver, sn-gen's sampling sink (flow `index`,
                      its own timestamps): Carousel's metric;
      worker_dev_pct: at the shaper's output (policy released_bytes), in the
                      worker's time base (clock_ns), read every 100 ms.
    plus what can spoil a window on a shared machine: underruns (the
    generator starved the limit), link resets, frames the sink's ring
    refused (uplink ring_full), and the largest runqueue wait of any
    thread of the daemon and of sn-gen (time the OS kept it off its CPU)."""
    st0 = s.stats()
    p0 = s.port_policy(st0)[port]
    up0 = {q["name"]: q for q in st0["ports"]}["uplink"]["drops"]["ring_full"]
    w0, g0 = thread_waits(s.daemon.pid), thread_waits(s.gen.pid)
    c0, cg0 = thread_cpu(s.daemon.pid), thread_cpu(s.gen.pid)
    t0 = time.monotonic()
    wk = shaper_samples(s, port, seconds)
    t1 = time.monotonic()
    wait_d, wait_g = busiest_wait_ms(s.daemon.pid, w0), busiest_wait_ms(s.gen.pid, g0)
    cpu_d, cpu_g = busiest_cpu_ms(s.daemon.pid, c0), busiest_cpu_ms(s.gen.pid, cg0)
    st1 = s.stats()
    p1 = s.port_policy(st1)[port]
    up1 = {q["name"]: q for q in st1["ports"]}["uplink"]["drops"]["ring_full"]
    time.sleep(0.15)                      # the sink's sample after t1 is written
    sink = window(read_samples(s.samples, index), t0, t1 + 0.1)
    srates, wrates = sample_rates(sink), sample_rates(wk)
    frames = (sink[-1][1] - sink[0][1]) / s.size if len(sink) > 1 else 0
    return {
        "rate_bps": rate,
        "sink_dev_pct": round(mad_pct(srates, rate), 4) if srates else None,
        "sink_samples": len(srates),
        "sink_median_bps": round(statistics.median(srates)) if srates else None,
        "worker_dev_pct": round(mad_pct(wrates, rate), 4) if wrates else None,
        "worker_samples": len(wrates),
        "worker_mean_bps": round((wk[-1][1] - wk[0][1]) * 8 / (wk[-1][0] - wk[0][0]))
        if len(wk) > 1 else None,
        "underruns": p1["underruns"] - p0["underruns"],
        "link_resets": st1["arbiter"]["link_resets"] - st0["arbiter"]["link_resets"],
        "sink_ring_full": up1 - up0,
        "drops": {k: v - p0["drops"][k] for k, v in p1["drops"].items() if v != p0["drops"][k]},
        "daemon_wait_ms": wait_d, "sngen_wait_ms": wait_g,
        "daemon_cpu_ms": cpu_d, "sngen_cpu_ms": cpu_g,
        # upper bounds of the per-frame cost (a busy poller spends all
        # the CPU it gets): 1e9 / these = the rate each could sustain alone
        "daemon_cpu_ns_per_frame": round(cpu_d * 1e6 / frames) if frames else None,
        "sngen_cpu_ns_per_frame": round(cpu_g * 1e6 / frames) if frames else None,
        "window_s": round(t1 - t0, 3),
    }


def clean(m):
    """A window in which the machine let every stage keep up: the limit
    stayed backlogged, the link clock never reset, the sink took every
    frame, and the worker ran enough to give exact samples all along."""
    return m["underruns"] == 0 and m["link_resets"] == 0 and m["sink_ring_full"] == 0 and \
        m["worker_samples"] >= 0.6 * m["window_s"] * 10     # the worker ran (exact pairs)


def starved(m):
    """The OS kept the daemon's worker or sn-gen off its CPU for most of
    the window (> 50 %): 1.2 R cannot be offered, shaped and sunk in the
    rest, whatever the code does (a 1 Gbit/s window needs both running)."""
    return max(m["daemon_wait_ms"], m["sngen_wait_ms"]) > 0.5 * m["window_s"] * 1000


def conformance_port(build_dir, rate):
    """Schednic with vm0 limited to `rate`, offered 1.2 x rate."""
    size = frame_size(rate)
    pps = int(rate * 1.2 / (8 * size)) + 1
    return Schednic(build_dir, ["vm0"], {"ports": {"vm0": {"rate_bps": rate}}}, size, pps)


def run_schednic(build_dir, rate, seconds, tries=5, warmup=1.0):
    """The first clean window of `seconds` (of `tries`), else the last one."""
    with conformance_port(build_dir, rate) as s:
        s.wait_flowing()
        time.sleep(warmup)
        for i in range(tries):
            m = measure(s, "vm0", 0, rate, seconds)
            m.update(frame_bytes=s.size, offered_pps=s.pps, tries=i + 1, clean=clean(m))
            if m["clean"]:
                break
    return m


# -- Linux HTB --------------------------------------------------------------

SAMPLER = r"""
import sys, time, json
dev, period, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
path = f"/sys/class/net/{dev}/statistics/rx_bytes"
f = open(path)
nxt = time.monotonic()
for _ in range(n + 1):
    f.seek(0)
    b = int(f.read())
    t = time.monotonic_ns()
    print(json.dumps({"t_ns": t, "bytes": b}), flush=True)
    nxt += period
    time.sleep(max(0.0, nxt - time.monotonic()))
"""


def sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


def run_htb(rate, seconds, warmup=1.0):
    size = frame_size(rate)
    n = f"{os.getpid() % 100000}"
    nsa, nsb = f"sn{TAG}htbA{n}", f"sn{TAG}htbB{n}"
    va, vb = f"sn{TAG}a{n}"[:15], f"sn{TAG}b{n}"[:15]
    sender = server = None
    try:
        sh("ip", "netns", "add", nsa)
        sh("ip", "netns", "add", nsb)
        sh("ip", "link", "add", va, "netns", nsa, "type", "veth", "peer", "name", vb,
           "netns", nsb)
        for ns, dev, ip in ((nsa, va, "10.77.0.1/24"), (nsb, vb, "10.77.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", ip, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        # static neighbour: no ARP inside the measurement
        mac_b = sh("ip", "-n", nsb, "-j", "link", "show", vb).stdout
        mac_b = json.loads(mac_b)[0]["address"]
        sh("ip", "-n", nsa, "neigh", "add", "10.77.0.2", "lladdr", mac_b, "dev", va)
        sh("ip", "netns", "exec", nsa, "tc", "qdisc", "add", "dev", va, "root", "handle", "1:",
           "htb", "default", "10")
        sh("ip", "netns", "exec", nsa, "tc", "class", "add", "dev", va, "parent", "1:",
           "classid", "1:10", "htb", "rate", f"{rate}bit", "ceil", f"{rate}bit")
        server = subprocess.Popen(["ip", "netns", "exec", nsb, "iperf3", "-s", "-1", "-B",
                                   "10.77.0.2", "-p", "5301"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        sender = subprocess.Popen(["ip", "netns", "exec", nsa, "iperf3", "-c", "10.77.0.2",
                                   "-p", "5301", "-u", "-b", "0", "-l", str(size - 42),
                                   "-t", str(int(warmup + seconds + 5))],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(warmup)
        nsamp = int(seconds * 10)
        out = subprocess.run(["ip", "netns", "exec", nsb, sys.executable, "-c", SAMPLER, vb,
                              "0.1", str(nsamp)], capture_output=True, text=True, check=True,
                             timeout=seconds * 3 + 30).stdout
        ts = [(d["t_ns"] / 1e9, d["bytes"]) for d in map(json.loads, out.splitlines())]
        rates = sample_rates(ts)
        return {"rate_bps": rate, "frame_bytes": size, "dev_pct": round(mad_pct(rates, rate), 4),
                "samples": len(rates), "median_bps": statistics.median(rates)}
    finally:
        stop(sender, 5)
        stop(server, 5)
        sh("ip", "netns", "del", nsa, check=False)
        sh("ip", "netns", "del", nsb, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    ap.add_argument("--build-dir", default=os.environ.get("SN_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window per rate")
    ap.add_argument("--rates", type=int, nargs="+", default=RATES)
    ap.add_argument("--no-htb", action="store_true", help="skip the Linux HTB baseline")
    a = ap.parse_args()
    ours, htb = [], []
    for r in a.rates:
        log(f"schednic at {r} bit/s")
        ours.append(run_schednic(a.build_dir, r, a.seconds))
        log(f"  sink dev {ours[-1]['sink_dev_pct']} %, worker-clock dev "
            f"{ours[-1]['worker_dev_pct']} %")
        if not a.no_htb:
            log(f"HTB at {r} bit/s")
            htb.append(run_htb(r, a.seconds))
            log(f"  dev {htb[-1]['dev_pct']} %")
    res = {
        "rates_bps": a.rates,
        "schednic_dev_pct": [x["sink_dev_pct"] for x in ours],
        "schednic_worker_dev_pct": [x["worker_dev_pct"] for x in ours],
        "htb_dev_pct": [x["dev_pct"] for x in htb] if htb else None,
        "method": "mean absolute deviation of 100 ms receiver samples from R, in % of R "
                  "(Carousel 7.1.1); each sample's rate = delta bytes / delta of its own "
                  "timestamp; frames without FCS; schednic: vm0 limited to R, 1.2 R offered "
                  "by sn-gen, measured by sn-gen's sampling sink on the uplink's "
                  "(net_vhost) peer; schednic_worker_dev_pct: the same metric on the rate "
                  "limiter's output (policy.released_bytes) in the worker's clock (exact pairs); HTB: veth between two netns, class rate=ceil=R, "
                  "iperf3 -u -b 0 sender, rx_bytes of the receiving veth",
        "seconds_per_rate": a.seconds,
        "schednic": ours, "htb": htb,
    }
    print(json.dumps(res, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
