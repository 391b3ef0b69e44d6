# SPDX-License-Identifier: BSD-3-Clause
"""A hostile front-end sends random vhost-user messages to one port while
two other ports switch a measured flow.

sn-vufront's fuzz mode (backend/tools/sn_vufront_fuzz.c) connects to the
deferred port "w" again and again and sends random but plausible message
sequences (repeated memory tables over real memfds, wrong fd counts, ring
set-up while running, feature renegotiation, truncated and oversized
messages, random request codes) for FUZZ_S seconds. Meanwhile sn-gen
forwards FWD frames vm1 -> vm2 per phase, one phase every GAP_S. The
test asserts that the daemon stays up and answers RPC, that every phase
arrived in full at vm2 while the fuzzer ran (delivered frames rose
throughout), that no drop counter of vm1 or vm2 moved, and that w can be
deleted and added again and then serves a well-formed guest.
"""
import ctypes
import json
import mmap
import os
import socket
import struct
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
                "--seed", 24], name="vufront-fuzz", stdout=subprocess.PIPE)
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


# -- a memory table the vhost library would drop the current one for -------

VU_VERSION = 1


NEED_REPLY = 0x8


def vu_msg(req, payload=b"", flags=0):
    return struct.pack("<III", req, VU_VERSION | flags, len(payload)) + payload


class Front:
    """A minimal vhost-user front-end in Python: one memfd region, rings
    in it, the device started (SET_VRING_KICK on both rings)."""

    SIZE = 1 << 20

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)
        self.fd = os.memfd_create("sn-test-guest")
        os.ftruncate(self.fd, self.SIZE)
        self.mm = mmap.mmap(self.fd, self.SIZE)
        self.ua = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        self.fds = []

    def send(self, req, payload=b"", fds=(), flags=0):
        socket.send_fds(self.s, [vu_msg(req, payload, flags)], list(fds))

    def reply(self, req):
        """The u64 reply to req (GET_* or a NEED_REPLY ack)."""
        buf = b""
        while len(buf) < 20:
            chunk = self.s.recv(20 - len(buf))
            assert chunk, "back-end closed the connection"
            buf += chunk
        r, flags, size = struct.unpack("<III", buf[:12])
        assert r == req and size == 8, (r, flags, size)
        return struct.unpack("<Q", buf[12:])[0]

    def table(self, size, flags=0):
        region = struct.pack("<QQQQ", 0x100000, size, self.ua, 0)
        self.send(5, struct.pack("<II", 1, 0) + region, [self.fd], flags)

    def start(self):
        self.send(3)                                     # SET_OWNER
        self.send(2, struct.pack("<Q", 1 << 32))         # SET_FEATURES: VERSION_1
        self.table(self.SIZE)
        for v in (0, 1):
            self.send(8, struct.pack("<II", v, 256))     # NUM
            self.send(10, struct.pack("<II", v, 0))      # BASE
            self.send(9, struct.pack("<IIQQQQ", v, 0, self.ua + v * 0x8000,
                                     self.ua + v * 0x8000 + 0x2000,
                                     self.ua + v * 0x8000 + 0x1000, 0))
            for req in (13, 12):                         # CALL, KICK
                efd = os.eventfd(0)
                self.fds.append(efd)
                self.send(req, struct.pack("<Q", v), [efd])

    def close(self):
        self.s.close()
        for f in self.fds:
            os.close(f)
        self.mm.close()
        os.close(self.fd)


@pytest.mark.parametrize("completion", ["deferred", "immediate"])
def test_bad_memory_table_keeps_the_current_one(schednicd, sn_tmpdir, completion):
    """SET_MEM_TABLE with a region of size 0 on a running device: the
    library would unmap the current table and then fail on the region,
    leaving the rings pointing at unmapped memory (the next SET_VRING_KICK
    writes there). The daemon refuses the table first: counted, the
    device keeps its table, the daemon keeps running and the port still
    comes back after a reconnect."""
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion=completion)])
    f = Front(d.vhost_path("w"))
    f.start()
    d.wait_port_state("w", "up")
    # with NEED_REPLY the library answers a failed message and goes on
    # reading the connection
    f.table(0, NEED_REPLY)
    ack = f.reply(5)
    print("SET_MEM_TABLE ack (0 = applied):", ack)
    assert ack != 0
    efd = os.eventfd(0)
    f.fds.append(efd)
    f.send(12, struct.pack("<Q", 1), [efd])             # KICK again: touches the ring
    f.send(1)                                          # GET_FEATURES
    assert f.reply(1) & (1 << 32)                      # every message before it handled
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        v = port_table(d.stats())["w"]["vhost_user"]["mem_table_rejected"]
        if v:
            break
        time.sleep(0.05)
    print("mem_table_rejected:", v)
    assert v == 1, d.log_tail()
    assert d.alive() and d.rpc("version"), d.log_tail()
    assert "region 0: bad memory_size" in d.log_path.read_text(), d.log_tail()
    f.close()
    g = Front(d.vhost_path("w"))
    g.start()
    d.wait_port_state("w", "up")
    g.close()
    assert d.alive() and d.rpc("version"), d.log_tail()
