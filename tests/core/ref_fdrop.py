# SPDX-License-Identifier: BSD-3-Clause
"""Independent Python references for fair dropping (sn_fdrop).

  - max_min(): max-min fair shares of a capacity over offered rates, by
    progressive filling (the fluid ideal fair dropping converges to);
  - Algorithm1: the paper's Algorithm 1 written literally (credit loop
    over the ActiveList, exact rational arithmetic), to compare packet
    verdicts with the C code's virtual-time/heap implementation;
  - trace generators (Poisson / CBR) and a runner for `sn-trace fdrop`
    (format in backend/core/tools/trace_fdrop.c).
"""
import json
import os
import random
import subprocess
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sn_trace_bin() -> Path:
    build = Path(os.environ.get("SN_BUILD_DIR", REPO / "build")).resolve()
    return build / "backend" / "core" / "sn-trace"


def run(config, packets, timeout=120):
    """config: the `config ...` line; packets: iterable of tuples
    (arrival_ns, flow, len[, cycles]). Returns the parsed JSON result."""
    text = config + "\n" + "\n".join(" ".join(map(str, p)) for p in packets) + "\n"
    r = subprocess.run([str(sn_trace_bin()), "fdrop"], input=text,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"sn-trace fdrop exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def max_min(demands, capacity):
    """Progressive filling: repeatedly give every unsatisfied flow an equal
    part of what is left; flows whose demand fits are frozen."""
    alloc = [0.0] * len(demands)
    left = float(capacity)
    open_ = [i for i, d in enumerate(demands) if d > 0]
    while open_ and left > 1e-12 * capacity:
        part = left / len(open_)
        done = [i for i in open_ if demands[i] - alloc[i] <= part]
        if not done:
            for i in open_:
                alloc[i] += part
            break
        for i in done:
            left -= demands[i] - alloc[i]
            alloc[i] = demands[i]
        open_ = [i for i in open_ if i not in done]
    return alloc


def poisson(rng, flow, rate_pps, t_end_ns, length, cycles=None, t0=0.0):
    """Poisson arrivals of `rate_pps` packets/s until t_end_ns."""
    out, t = [], t0
    mean_ns = 1e9 / rate_pps
    while True:
        t += rng.expovariate(1.0) * mean_ns
        if t >= t_end_ns:
            return out
        ln = length(rng) if callable(length) else length
        out.append((int(t), flow, ln) if cycles is None else (int(t), flow, ln, cycles))


def cbr(flow, rate_pps, t_end_ns, length, phase_ns=0.0):
    out, gap, t = [], 1e9 / rate_pps, phase_ns
    while t < t_end_ns:
        out.append((int(t), flow, length))
        t += gap
    return out


def merge(*traces):
    pk = [p for tr in traces for p in tr]
    pk.sort(key=lambda p: p[0])
    return pk


def shares(result, key="delivered_units", capacity=None):
    """Per-flow delivered rate (units/s) over the trace's time span."""
    span = (result["end_ns"] - result["start_ns"]) / 1e9
    return {f["flow"]: f[key] / span for f in result["flows"]}


class Algorithm1:
    """Algorithm 1 of the paper, literally, with exact fractions.
    capacity in units/s, times in ns, theta in units."""

    def __init__(self, capacity, theta):
        self.C = Fraction(capacity, 10**9)       # units per ns
        self.theta = theta
        self.B = {}                               # flow -> vq (ActiveList)
        self.last = None

    def advance(self, now):
        if self.last is None or now <= self.last:
            self.last = now if self.last is None else self.last
            return
        credit = self.C * (now - self.last)       # line 3
        self.last = now
        while credit > 0 and self.B:              # lines 4-15
            share = credit / len(self.B)
            credit = 0
            for f in list(self.B):
                if share < self.B[f]:
                    self.B[f] -= share
                else:
                    credit += share - self.B[f]
                    del self.B[f]

    def admit(self, flow, length):               # lines 16-27
        if flow in self.B:
            if self.B[flow] > self.theta:
                return False
            self.B[flow] += length
        else:
            self.B[flow] = Fraction(length)
        return True


def random_mix(seed, budget=120_000):
    """A random flow mix on a link: some flows below the fair share, some
    far above; Poisson or CBR; packet sizes 512, 1500 or uniform 64..1500 B;
    the time span is chosen for about `budget` packets (10..50 ms).
    Returns (config_line, packets, capacity, offered bytes/s per flow, meta)."""
    rng = random.Random(seed)
    n = rng.randint(2, 10)
    capacity = rng.choice([10**8, 10**9])                      # bytes/s
    load = rng.uniform(1.3, 4.0)
    weights = [rng.choice([0.05, 0.2, 1, 1, 3, 10]) * rng.uniform(0.5, 1.5) for _ in range(n)]
    total = sum(weights)
    flows = []
    for f in range(n):
        rate_b = load * capacity * weights[f] / total           # bytes/s
        size = rng.choice([512, 1500, "mix"])
        mean = (64 + 1500) / 2 if size == "mix" else size
        flows.append((rate_b, size, rate_b / mean))
    span = budget / sum(pps for _, _, pps in flows) * 1e9
    span = int(min(max(span, 10e6), 50e6))
    traces, offered = [], []
    for f, (rate_b, size, pps) in enumerate(flows):
        if size == "mix":
            tr = poisson(rng, f, pps, span, lambda r: r.randint(64, 1500))
        elif rng.random() < 0.5:
            tr = poisson(rng, f, pps, span, size)
        else:
            tr = cbr(f, pps, span, size, phase_ns=rng.uniform(0, 1e9 / pps))
        traces.append(tr)
        offered.append(sum(p[2] for p in tr) / (span / 1e9))
    theta = rng.choice([10, 20, 40]) * 1500
    batch = rng.choice([1, 1, 8, 32])
    cfg = f"config mode=link capacity={capacity} theta={theta} batch={batch}"
    return cfg, merge(*traces), capacity, offered, {"theta": theta, "batch": batch,
                                                    "load": load, "span_ns": span}
