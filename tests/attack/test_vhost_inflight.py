# SPDX-License-Identifier: BSD-3-Clause
"""A front-end asks for a huge inflight area with GET_INFLIGHT_FD.

DPDK 22.11 answers GET_INFLIGHT_FD by creating a memfd of num_queues x
queue_size descriptors' worth and zeroing it on its one vhost-user
message thread, bounded by nothing: a front-end can make it allocate
and zero up to 64 GiB while no port's messages are served. The daemon's
pre-message hook refuses more than 16 queues or rings of more than 32768
descriptors (doc/isolation.md). The test sends, on fresh connections of
port "w", a request for 128 queues of 32768 descriptors (64 MiB: small
enough to be harmless were it let through), one for 65535 x 65535, and
the smaller refusals; a well-formed one (2 queues of 256) comes
before and after them. Each refused request must close
the connection without an answer, count in mem_table_rejected, and leave
the daemon answering at once; the well-formed one must be answered with
an inflight fd of the size DPDK computes (2 queues of 16 B per
descriptor plus a header, rounded up to 64 B), before and after.
"""
import array
import os
import socket
import struct
import time

import pytest

from snlib.ports import ports

pytestmark = [pytest.mark.attack, pytest.mark.functional]

GET_INFLIGHT_FD = 31
VU_VERSION = 0x1
VU_REPLY = 0x4


def get_inflight(path, num_queues, queue_size, timeout=10.0):
    """One GET_INFLIGHT_FD on a fresh connection: (reply payload, fd) or
    None when the back-end closed the connection without answering."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        payload = struct.pack("<QQHHI", 0, 0, num_queues, queue_size, 0)
        s.sendall(struct.pack("<III", GET_INFLIGHT_FD, VU_VERSION, len(payload)) + payload)
        fds = array.array("i")
        msg, anc, _, _ = s.recvmsg(12 + 24, socket.CMSG_SPACE(4))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % 4])
        if not msg:
            return None
        req, flags, size = struct.unpack_from("<III", msg)
        assert req == GET_INFLIGHT_FD and flags & VU_REPLY and size == 24, (req, flags, size)
        return struct.unpack_from("<QQHH", msg, 12), (fds[0] if fds else -1)


def rejected(d):
    return ports(d)["w"]["vhost_user"]["mem_table_rejected"]


def check_answered(d, path):
    """A well-formed request (2 queues of 256) is answered with an inflight
    fd of DPDK's size: per queue 16 B per descriptor plus its header,
    rounded up to 64 B."""
    r = get_inflight(path, 2, 256)
    assert r is not None, d.log_tail()
    (mmap_size, _, nq, qs), fd = r
    try:
        assert fd >= 0 and (nq, qs) == (2, 256), r
        assert 2 * 16 * 256 < mmap_size <= 2 * (16 * 256 + 64), r
        assert os.fstat(fd).st_size >= mmap_size
    finally:
        if fd >= 0:
            os.close(fd)
    return mmap_size


def test_huge_inflight_request_is_refused(schednicd, sn_tmpdir):
    d = schednicd(ports=[{"name": "w", "type": "vhost-user", "mode": "server",
                          "path": str(sn_tmpdir / "w.sock")}])
    path = d.vhost_path("w")
    size = check_answered(d, path)
    print(f"GET_INFLIGHT_FD 2 x 256: answered, mmap_size {size}")
    for nq, qs in ((128, 32768), (65535, 65535), (17, 256), (2, 32769), (0, 256)):
        before = rejected(d)
        t0 = time.monotonic()
        r = get_inflight(path, nq, qs)
        took = time.monotonic() - t0
        after = rejected(d)
        print(f"GET_INFLIGHT_FD {nq} x {qs}: {'answered' if r else 'closed'} in "
              f"{took * 1000:.1f} ms, mem_table_rejected {before} -> {after}")
        assert r is None, (nq, qs, r)
        assert after == before + 1, (before, after)
        assert d.alive(), d.log_tail()
        assert took < 2.0, took
    assert check_answered(d, path) == size
    assert rejected(d) == after
    assert "GET_INFLIGHT_FD refused: bad num_queues" in d.log_path.read_text(errors="replace")
