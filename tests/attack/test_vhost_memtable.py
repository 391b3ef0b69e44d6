# SPDX-License-Identifier: BSD-3-Clause
"""A front-end sends memory tables the vhost library cannot map, or that
reach past the end of their file, to a running device while two other
ports switch.

DPDK 22.11 drops the current table before it maps a new one and checks
nothing against the region files: an fd it cannot map leaves the rings
pointing at unmapped memory (the next SET_VRING_KICK writes there), and a
region past the end of its file maps and then faults (SIGBUS) when the
library re-reads the rings or a worker reads a frame there. The daemon
refuses each such table in its pre-message hook (port/sn_port_vumsg.c,
doc/isolation.md). Each variant below is sent with NEED_REPLY on a fresh
connection of port "w" whose device runs; then the rings are touched
(SET_VRING_KICK), a TX descriptor whose buffer lies past the end of the
file is posted and kicked, and a GET_FEATURES checks that every message
before it was handled. The test asserts that the table is answered as
failed, mem_table_rejected rose by one, the daemon is alive, and a phase
of FWD frames vm1 -> vm2 arrives in full after every variant.
"""
import ctypes
import fcntl
import mmap
import os
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datapath"))
from sngen import SnGen, port_table  # noqa: E402

pytestmark = [pytest.mark.attack, pytest.mark.functional]

FWD = 50
VU_VERSION = 1
NEED_REPLY = 0x8
GPA = 0x100000
F_ADD_SEALS, F_SEAL_WRITE = 1033, 0x8


def vu_msg(req, payload=b"", flags=0):
    return struct.pack("<III", req, VU_VERSION | flags, len(payload)) + payload


class Front:
    """A minimal vhost-user front-end: one memfd region of SIZE bytes at
    guest-physical GPA, rings in it (vring v at offset v * 0x8000: desc,
    avail + 0x1000, used + 0x2000), the device started (SET_VRING_KICK on
    both rings)."""

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

    def table(self, regions, fds, flags=0):
        """SET_MEM_TABLE of regions (gpa, size, uaddr, mmap_offset)."""
        body = b"".join(struct.pack("<QQQQ", *r) for r in regions)
        self.send(5, struct.pack("<II", len(regions), 0) + body, fds, flags)

    def good_table(self, flags=0):
        self.table([(GPA, self.SIZE, self.ua, 0)], [self.fd], flags)

    def kick(self, v):
        efd = os.eventfd(0)
        self.fds.append(efd)
        self.send(12, struct.pack("<Q", v), [efd])
        return efd

    def start(self):
        self.send(3)                                     # SET_OWNER
        self.send(2, struct.pack("<Q", 1 << 32))         # SET_FEATURES: VERSION_1
        self.good_table()
        for v in (0, 1):
            self.send(8, struct.pack("<II", v, 256))     # NUM
            self.send(10, struct.pack("<II", v, 0))      # BASE
            self.send(9, struct.pack("<IIQQQQ", v, 0, self.ua + v * 0x8000,  # desc, used, avail
                                     self.ua + v * 0x8000 + 0x2000,
                                     self.ua + v * 0x8000 + 0x1000, 0))
            efd = os.eventfd(0)
            self.fds.append(efd)
            self.send(13, struct.pack("<Q", v), [efd])   # CALL
            self.kick(v)

    def post_tx(self, gpa, length=64):
        """One TX descriptor (vring 1) of length bytes at gpa, made available
        and kicked."""
        base = 0x8000
        struct.pack_into("<QIHH", self.mm, base, gpa, length, 0, 0)
        avail = base + 0x1000
        idx = struct.unpack_from("<H", self.mm, avail + 2)[0]
        struct.pack_into("<H", self.mm, avail + 4 + 2 * (idx % 256), 0)
        struct.pack_into("<H", self.mm, avail + 2, (idx + 1) & 0xffff)
        self.kick(1)

    def close(self):
        self.s.close()
        for f in self.fds:
            os.close(f)
        self.mm.close()
        os.close(self.fd)


def memfd(size, seal=False):
    fd = os.memfd_create("sn-test-bad", os.MFD_ALLOW_SEALING if seal else 0)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE)
    return fd


# variant -> f(front) -> (regions, fds[, frame gpa]); the front-end closes the
# fds it made.
# The frame is posted after the table: in guest memory that the bad table
# would claim but its file does not back (a worker or the library reading
# it faults), outside the table the daemon keeps (a bad descriptor).
S = Front.SIZE
FAR = GPA + 2 * S - 0x1000
GPA2 = GPA + 4 * S


def second(f, fd, size=S, off=0, gpa=GPA2):
    """The current region and a new one on fd: a changed table (the library
    ignores one with the same regions, whatever its fds)."""
    return [(GPA, S, f.ua, 0), (gpa, size, f.ua + 4 * S, off)], [f.fd, fd]


def tracked(f, fd):
    f.fds.append(fd)
    return fd


VARIANTS = {
    # an fd the library cannot mmap: it fails with the old table gone and
    # the rings pointing into it
    "eventfd": lambda f: second(f, tracked(f, os.eventfd(0))),
    "read-only fd": lambda f: second(f, tracked(f, os.open(f"/proc/self/fd/{f.fd}",
                                                          os.O_RDONLY))),
    "write-sealed memfd": lambda f: second(f, tracked(f, memfd(S, True))),
    # regions past the end of their file: mapped, and the frame there faults
    "offset past the end": lambda f: (*second(f, f.fd, off=S - 0x1000), GPA2 + 0x2000),
    "huge size": lambda f: ([(GPA, 1 << 40, f.ua, 0)], [f.fd], FAR),
    "short file": lambda f: (*second(f, tracked(f, memfd(S // 4))), GPA2 + S // 2),
    # regions the library cannot map at all
    "size 0": lambda f: second(f, f.fd, size=0),
    "offset wraps": lambda f: second(f, f.fd, off=(1 << 64) - 0x1000),
    "overlapping regions": lambda f: second(f, f.fd, size=S // 2, gpa=GPA + S // 2),
    "misaligned offset": lambda f: second(f, f.fd, size=S // 2, off=0x800),
}


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


def connect_up(d, tries=3):
    """A started Front on w once the port is up. A deferred port whose
    last stop the worker has not answered yet (a loaded host) refuses the
    next device start; the front-end connects again, as QEMU would."""
    for k in range(tries):
        f = Front(d.vhost_path("w"))
        f.start()
        try:
            d.wait_port_state("w", "up", timeout=10)
            return f
        except TimeoutError:
            f.close()
            if k == tries - 1:
                raise


def rejected(d):
    return port_table(d.stats())["w"]["vhost_user"]["mem_table_rejected"]


@pytest.mark.parametrize("completion", ["deferred", "immediate"])
def test_bad_memory_tables_refused(schednicd, spawn, sn_tmpdir, build_dir, completion):
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion=completion),
                         dport(sn_tmpdir, "vm1"), dport(sn_tmpdir, "vm2")])
    flows = []
    for k in range(len(VARIANTS)):
        flows += ["--flow", f"src=0,dst=1,count={FWD},phase={k}"]
    g = SnGen(spawn, build_dir / "backend/sn-gen", sn_tmpdir, "count",
              [d.vhost_path("vm1"), d.vhost_path("vm2")], flows, 1)
    g.wait("ready")
    for n in ("vm1", "vm2"):
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_vm2(d, 1)
    time.sleep(0.3)
    base = port_table(d.stats())["vm2"]["tx_packets"]
    for k, (name, make) in enumerate(VARIANTS.items()):
        before = rejected(d)
        f = connect_up(d)
        regions, fds, *frame = make(f)
        try:
            f.table(regions, fds, NEED_REPLY)
            ack = f.reply(5)
            f.kick(0)                              # touches the rings
            f.post_tx(frame[0] if frame else FAR)
            time.sleep(0.2)                        # the worker polls the TX ring
            f.send(1)                              # GET_FEATURES
            features = f.reply(1)                  # every message before it handled
        except OSError as e:
            time.sleep(0.2)
            pytest.fail(f"{name}: {e}; daemon exit status {d.proc.poll()}\n{d.log_tail()}")
        assert features & (1 << 32), name
        assert d.alive(), (name, d.log_tail())
        after = rejected(d)
        print(f"{name}: ack {ack} (0 = applied), mem_table_rejected {before} -> {after}")
        assert ack != 0, name
        assert after == before + 1, (name, d.log_tail())
        g.go(k)
        wait_vm2(d, base + FWD * (k + 1))
        f.close()
        d.wait_port_state("w", "down")
    t = port_table(d.stats())
    assert t["vm2"]["tx_packets"] == base + FWD * len(VARIANTS), t["vm2"]
    assert "SET_MEM_TABLE refused: region 1: bad fd type" in d.log_path.read_text(), d.log_tail()
    # the port still serves a well-formed front-end
    f = connect_up(d)
    f.good_table(NEED_REPLY)
    assert f.reply(5) == 0
    f.close()
    assert d.alive() and d.rpc("version"), d.log_tail()


def test_bad_memory_table_on_a_second_connection(schednicd, sn_tmpdir):
    """A second front-end connects to a port whose device runs (the library
    accepts it) and sends a table reaching past the end of its file, then
    sets up a ring there: the library reads the used ring when the kick
    translates the ring addresses. The table is refused on that connection
    too and counted on the port; the first device keeps running."""
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred")])
    a = connect_up(d)
    b = Front(d.vhost_path("w"))
    b.send(3)                                          # SET_OWNER
    b.send(2, struct.pack("<Q", 1 << 32))              # SET_FEATURES: VERSION_1
    b.table([(GPA, S, b.ua, S - 0x1000)], [b.fd], NEED_REPLY)
    ack = b.reply(5)
    print("second connection: SET_MEM_TABLE ack (0 = applied):", ack)
    # without a table the library fails SET_VRING_ADDR and closes the
    # connection; with the bad one applied it would fault on the kick
    try:
        b.send(8, struct.pack("<II", 1, 256))          # NUM
        b.send(10, struct.pack("<II", 1, 0))           # BASE
        b.send(9, struct.pack("<IIQQQQ", 1, 0, b.ua + 0x8000, b.ua + 0xa000, b.ua + 0x9000, 0))
        b.kick(1)
    except OSError:
        pass
    time.sleep(0.3)
    assert d.alive(), (d.proc.poll(), d.log_tail())
    assert ack != 0
    assert rejected(d) == 1, d.log_tail()
    assert d.alive() and d.rpc("version"), d.log_tail()
    assert [p["state"] for p in d.rpc("port.list")["ports"] if p["name"] == "w"] == ["up"]
    b.close()
    a.close()
