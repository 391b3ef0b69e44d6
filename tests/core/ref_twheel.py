# SPDX-License-Identifier: BSD-3-Clause
"""Independent reference model for `sn-trace twheel` (timestamping + wheel).

Exact rational arithmetic (fractions.Fraction), written from the release
rule stated in backend/core/sn_tstamp.h and sn_twheel.h, not from the C:

  policy:  LTS' = max(LTS + len*8e9/rate, max(0, now - burst*8e9/rate))
           ts_policy = max(ceil(LTS'), now); LTS starts at
           max(0, start - burst*8e9/rate); a dropped packet is not charged.
  packet:  ts = max over the policies of its flow (consolidation).
  wheel:   slot S = ceil(ts / g); the driver extracts at every arrival, so
           the front slot at insert is floor(arrival / g); S beyond
           front + slots - 1 is clamped there or dropped ("range").
           The packet is released at S * g (the driver extracts at
           next_due()).
"""
import math
import os
import random
import subprocess
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NS_BITS = 8 * 10**9


def sn_trace_bin() -> Path:
    build = Path(os.environ.get("SN_BUILD_DIR", REPO / "build")).resolve()
    return build / "backend" / "core" / "sn-trace"


@dataclass
class Config:
    granularity_ns: int
    slots: int
    reject: bool = False
    start_ns: int = 0
    pool_nodes: int = 1 << 16
    policies: dict = field(default_factory=dict)   # id -> (rate_bps, burst_bytes)
    flows: dict = field(default_factory=dict)      # id -> [policy ids]

    def text(self) -> str:
        lines = [f"granularity_ns {self.granularity_ns}", f"slots {self.slots}",
                 f"pool_nodes {self.pool_nodes}",
                 f"horizon {'reject' if self.reject else 'clamp'}",
                 f"start_ns {self.start_ns}"]
        lines += [f"policy {pid} {r} {b}" for pid, (r, b) in sorted(self.policies.items())]
        lines += [f"flow {fid} " + " ".join(map(str, pols))
                  for fid, pols in sorted(self.flows.items())]
        return "\n".join(lines) + "\n"

    def flow_policies(self, fid):
        return self.flows.get(fid, [fid])


@dataclass
class Expected:
    ts: int
    dropped: bool
    release: int          # valid if not dropped
    clamped: bool


def model(cfg: Config, trace):
    """trace: list of (arrival_ns, flow, len). Returns list of Expected."""
    g, n = cfg.granularity_ns, cfg.slots
    lts = {}
    for pid, (rate, burst) in cfg.policies.items():
        lts[pid] = max(Fraction(0), cfg.start_ns - Fraction(burst * NS_BITS, rate))
    out = []
    for arrival, fid, length in trace:
        pols = cfg.flow_policies(fid)
        nxt = {}
        ts = arrival
        for pid in pols:
            rate, burst = cfg.policies[pid]
            floor = max(Fraction(0), arrival - Fraction(burst * NS_BITS, rate))
            v = max(lts[pid] + Fraction(length * NS_BITS, rate), floor)
            nxt[pid] = v
            ts = max(ts, math.ceil(v))
        slot = -(-ts // g)
        front = arrival // g
        clamped = False
        if slot > front + n - 1:
            if cfg.reject:
                out.append(Expected(ts, True, -1, False))
                continue
            slot, clamped = front + n - 1, True
        lts.update(nxt)
        out.append(Expected(ts, False, slot * g, clamped))
    return out


def run_trace(cfg: Config, trace, tmp_path: Path):
    """Run sn-trace twheel; returns (rel list of (idx, ts, release) in output
    order, drops dict idx -> (ts, cause), stats dict)."""
    c = tmp_path / "twheel.cfg"
    t = tmp_path / "twheel.trace"
    c.write_text(cfg.text())
    t.write_text("".join(f"{a} {f} {ln}\n" for a, f, ln in trace))
    r = subprocess.run([str(sn_trace_bin()), "twheel", "--config", str(c), "--trace", str(t)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"sn-trace twheel failed ({r.returncode}): {r.stderr}"
    rel, drops, stats = [], {}, {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "rel":
            idx, fl, ln, arr, ts, relt = map(int, parts[1:])
            assert (arr, fl, ln) == tuple(trace[idx]), f"packet {idx} echoed wrong: {line}"
            rel.append((idx, ts, relt))
        elif parts[0] == "drop":
            idx, fl, ln, arr, ts = map(int, parts[1:6])
            assert (arr, fl, ln) == tuple(trace[idx]), f"packet {idx} echoed wrong: {line}"
            drops[idx] = (ts, parts[6])
        elif line.startswith("# stats"):
            kv = parts[2:]
            stats = {kv[i]: int(kv[i + 1]) for i in range(0, len(kv), 2)}
        elif not line.startswith("#"):
            raise AssertionError(f"unexpected output line: {line}")
    return rel, drops, stats


def random_setup(rng: random.Random, n_policies=6, n_flows=12, n_pkts=4000,
                 load=1.5, reject=False, slots=None, g=None, burst=True):
    """Random policies (log-uniform 1 Mbit/s .. 10 Gbit/s), flows crossing
    1-3 of them (the first one is the flow's own), Poisson-ish arrivals at
    about `load` times the sum of the flows' first-policy rates, bursts."""
    g = g or rng.choice([100, 1000, 2000, 7919])
    cfg = Config(granularity_ns=g, slots=slots or rng.choice([256, 4096, 1 << 16]),
                 reject=reject, start_ns=rng.randrange(0, 10**12))
    for pid in range(n_policies):
        rate = int(10 ** rng.uniform(6, 10))
        b = rng.choice([0, 0, 1500, 64000]) if burst else 0
        cfg.policies[pid] = (rate, b)
    for fid in range(100, 100 + n_flows):
        k = rng.randint(1, 3)
        cfg.flows[fid] = rng.sample(range(n_policies), k)
    total_rate = sum(cfg.policies[p[0]][0] for p in cfg.flows.values())
    now = cfg.start_ns
    trace = []
    fids = sorted(cfg.flows)
    mean_len = 800
    gap = mean_len * NS_BITS / (load * total_rate)
    while len(trace) < n_pkts:
        if rng.random() < 0.01:
            now += int(rng.expovariate(1 / (gap * 500)))      # idle period
        else:
            now += int(rng.expovariate(1 / gap))
        burst_n = 1 if rng.random() < 0.9 else rng.randint(2, 30)
        f = rng.choice(fids)
        for _ in range(burst_n):
            ln = rng.choice([64, 64, 576, 1500, 1500, rng.randint(1, 9000)])
            trace.append((now, f, ln))
    return cfg, trace[:n_pkts]
