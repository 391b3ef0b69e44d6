# SPDX-License-Identifier: BSD-3-Clause
"""Mutated configuration files against `schednicd --check-config`:
whatever the file holds, the parser answers exit 0 ("config: ok") or exit 1
with exactly one "config: ..." line, within a second, never a crash, a hang
or another exit status. Seeds: the embedded default, a config using every
port and policy key, and the table of test_config.py; mutations: random
values of random types at random key paths, dropped/duplicated keys, and
byte damage. SN_CONFIG_FUZZ_N cases (default 600), SN_CONFIG_FUZZ_SEED."""
import copy
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]
N = int(os.environ.get("SN_CONFIG_FUZZ_N", "600"))

FULL = {
    "eal": {"memory_mb": 256, "file_prefix": "sn-cfg-fuzz", "main_cpu": 0, "worker_cpu": 1,
            "arbiter_cpu": 1, "worker_cpus": [1, 1], "extra_args": ["--log-level=lib.eal:notice"]},
    "control": {"socket": "/tmp/sn-r3-fuzz/ctl.sock", "max_request_bytes": 4096, "max_clients": 4},
    "datapath": {"mbufs": 8191, "mbuf_cache": 128, "burst": 32, "mac_table_size": 1024,
                 "mac_aging_s": 60, "max_flows": 64, "layout": "ncore", "workers": 2,
                 "idle_sleep_us": 50, "cpu_fair_pct": 0},
    "uplink": {"name": "up", "devargs": "net_null0", "rx_desc": 512, "tx_desc": 512},
    "ports": [{"name": "vm0", "path": "/tmp/sn-r3-fuzz/vm0.sock", "type": "vhost-user",
               "mode": "server", "completion": "deferred", "max_hold_us": 1000,
               "unmarked_max_hold_us": 500, "queues": 2, "workers": [0, 1]},
              {"name": "vm1", "path": "/tmp/sn-r3-fuzz/vm1.sock", "mode": "client"}],
    "policy": {"uplink": {"rate_bps": 10**9, "algorithm": "drr", "overhead_bytes": 24,
                          "overload": "fair"},
               "aggregates": {"g": {"rate_bps": 10**6, "burst_bytes": 3000, "update_ms": 50}},
               "ports": {"vm0": {"rate_bps": 10**8, "burst_bytes": 1500, "weight": 3,
                                 "classes": [{"name": "c", "proto": "tcp", "src": "10.0.0.0/8",
                                              "dst": "10.1.2.3", "src_port": [1, 9],
                                              "dst_port": 80, "rate_bps": 10**6,
                                              "burst_bytes": 0, "scope": "class",
                                              "aggregate": "g", "horizon": "clamp"}]}}},
}


def values(rng):
    return rng.choice([0, 1, -1, 2, 63, 64, 1023, 1024, 65535, 65536, 1 << 31, 1 << 32,
                       (1 << 63) - 1, -(1 << 63), 0.5, 1e308, "", "x", "a" * 300, "/", "../x",
                       "ncore", "2core", "1core", "client", "deferred", True, False, None, [], {},
                       [1, 2, 3], {"a": 1}, ["x"] * 40, list(range(70))])


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def mutate(rng, cfg):
    cfg = copy.deepcopy(cfg)
    for _ in range(rng.randint(1, 3)):
        ps = [p for p in paths(cfg) if p]
        if not ps:
            break
        p = rng.choice(ps)
        parent = cfg
        for k in p[:-1]:
            parent = parent[k]
        op = rng.random()
        if op < 0.6:
            parent[p[-1]] = values(rng)
        elif op < 0.8 and isinstance(parent, dict):
            del parent[p[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice(["bogus", "name", "path", "rate_bps", "queues"])] = values(rng)
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[p[-1]]))
    return cfg


def test_config_parser_survives_mutated_files(schednicd_bin, tmp_path):
    rng = random.Random(int(os.environ.get("SN_CONFIG_FUZZ_SEED", "1123")))
    default = json.loads((REPO / "backend" / "daemon" / "app" / "default-config.json").read_text())
    seeds = [default, FULL, {}]
    f = tmp_path / "cfg.json"
    outcomes = {0: 0, 1: 0}
    for i in range(N):
        if rng.random() < 0.85:
            text = json.dumps(mutate(rng, rng.choice(seeds)))
        else:
            b = bytearray(json.dumps(rng.choice(seeds)).encode())
            for _ in range(rng.randint(1, 4)):
                j = rng.randrange(len(b) + 1)
                b[j:j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            text = bytes(b).decode("latin-1")
        f.write_text(text, encoding="latin-1")
        r = subprocess.run([str(schednicd_bin), "--check-config", "--config", str(f)],
                           capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
                           errors="replace")
        assert r.returncode in (0, 1), f"case {i}: exit {r.returncode}\n{text[:2000]}\n{r.stderr}"
        lines = [l for l in r.stderr.splitlines() if l.startswith("config:")]
        assert len(lines) == 1, f"case {i}: {r.stderr}\n{text[:2000]}"
        assert (r.returncode == 0) == lines[0].startswith("config: ok"), (i, lines)
        outcomes[r.returncode] += 1
    print(f"config fuzz: {N} cases, {outcomes[0]} accepted, {outcomes[1]} rejected")
    assert outcomes[0] > 0 and outcomes[1] > 0
