# SPDX-License-Identifier: BSD-3-Clause
"""A hostile front-end sends random vhost-user messages to one port while
two other ports switch a measured flow.

sn-vufront's fuzz mode (backend/tools/sn_vufront_fuzz.c) connects to the
deferred port "w" again and again and sends random but plausible message
sequences (repeated memory tables over real memfds, wrong fd counts, ring
set-up while running, feature renegotiation, truncated and oversized
messages, random request codes; regions on unmappable fds and past the
end of their files, which the daemon refuses) for FUZZ_S seconds. Meanwhile sn-gen
forwards FWD frames vm1 -> vm2 per phase, one phase every GAP_S. The
test asserts that the daemon stays up and answers RPC, that every phase
arrived in full at vm2 while the fuzzer ran (delivered frames rose
throughout), that no drop counter of vm1 or vm2 moved, and that w can be
deleted and added again and then serves a well-formed guest.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datapath"))
from sngen import SnGen, port_table  # noqa: E402

pytestmark = [pytest.mark.attack, pytest.mark.functional]

FUZZ_S = 10
FWD = 50
PHASES = 32              # sn-gen takes at most 32 flows: one phase each
GAP_S = FUZZ_S / PHASES  # phases spread over the fuzzer's run


def dport(d, name, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"), "mode": "server"}
    p.update(kw)
    return p


def wait_vm2(d, want, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = port_table(d.stats())
        if t["vm2"]["tx_packets"] >= want:
            return t
        time.sleep(0.02)
    raise TimeoutError(f"vm2 tx_packets {t['vm2']['tx_packets']} < {want}\n{d.log_tail()}")


def test_vhost_fuzz_leaves_other_ports_switching(schednicd, spawn, sn_tmpdir, build_dir,
                                                 vufront_bin):
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred"),
                         dport(sn_tmpdir, "vm1"), dport(sn_tmpdir, "vm2")])
    flows = []
    for k in range(PHASES):
        flows += ["--flow", f"src=0,dst=1,count={FWD},phase={k}"]
    g = SnGen(spawn, build_dir / "backend/sn-gen", sn_tmpdir, "count",
              [d.vhost_path("vm1"), d.vhost_path("vm2")], flows, 1)
    g.wait("ready")
    for n in ("vm1", "vm2"):
        d.wait_port_state(n, "up")
    g.go("learn")
    t0 = wait_vm2(d, 1)
    time.sleep(0.3)
    t0 = port_table(d.stats())
    fz = spawn([vufront_bin, "fuzz", "--socket", d.vhost_path("w"), "--seconds", FUZZ_S,
                "--seed", 24, "--bad-fds", "--bad-regions"], name="vufront-fuzz",
               stdout=subprocess.PIPE)
    phases, delivered = 0, []
    while fz.poll() is None and phases < PHASES:
        g.go(phases)
        phases += 1
        t = wait_vm2(d, t0["vm2"]["tx_packets"] + FWD * phases)
        delivered.append(t["vm2"]["tx_packets"] - t0["vm2"]["tx_packets"])
        assert d.alive(), d.log_tail()
        time.sleep(GAP_S)
    out, _ = fz.communicate(timeout=60)
    r = json.loads(out)
    print("fuzzer:", json.dumps(r))
    print(f"victim phases during the fuzz: {phases}, delivered {delivered[-1] if delivered else 0}")
    assert fz.returncode == 0 and r["ok"], (r, d.log_tail())
    assert r["messages"] > 1000 and r["connections"] > 10, r
    assert r["sent"].get("SET_MEM_TABLE", 0) > 50, r
    # the flow kept going while the fuzzer ran: several phases, each in full
    assert phases >= 5, (phases, r)
    assert delivered == [FWD * (k + 1) for k in range(phases)], delivered
    t = port_table(d.stats())
    for n in ("vm1", "vm2"):
        assert t[n]["drops"] == t0[n]["drops"], (n, t0[n]["drops"], t[n]["drops"])
    assert t["vm1"]["rx_packets"] == t0["vm1"]["rx_packets"] + FWD * phases, t["vm1"]
    assert d.rpc("version")
    # tables the library would fail or fault on were refused
    assert t["w"]["vhost_user"]["mem_table_rejected"] > 0, t["w"]["vhost_user"]
    # the fuzzed port can be deleted and added again, and serves a guest
    d.rpc("port.del", {"name": "w"})
    assert "w" not in port_table(d.stats())
    d.rpc("port.add", {"name": "w", "path": d.vhost_path("w"), "mode": "server",
                       "completion": "deferred"})
    r2 = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"), "--scenario", "good",
                         "--count", "20", "--timeout", "30"],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0, (r2.stdout, r2.stderr, d.log_tail())
    w = json.loads(r2.stdout)
    assert w["ok"] and w["used_total"] == 20, w
    assert d.alive() and d.rpc("version"), d.log_tail()
