# SPDX-License-Identifier: BSD-3-Clause
"""schednicd's log: syslog priorities for the journal, plain lines
elsewhere, DPDK's own log through the same path, and a front-end that
connects again and again cannot flood it.

- Journal: with JOURNAL_STREAM naming the daemon's stderr (what systemd
  sets for StandardError=journal) every line starts with "<N>": schednicd's
  events <6>, DPDK's lines (EAL, vhost) with DPDK's level less one. A JOURNAL_STREAM that names another file
  leaves the lines plain.
- Flood: a front-end connects to a port again and again for FLOOD_S
  seconds, more than one 10 s window (one GET_FEATURES per connection:
  4 DPDK vhost lines). The lines of one DPDK log type and severity are
  capped per window (SN_EAL_LOG_BURST), and the first line of the source
  in a new window says how many were suppressed. (schednic's own call
  sites that a guest can trigger have the same limit, SN_LOG_RL_BURST
  lines: backend/daemon/tests/test_log.c.)
"""
import os
import re
import socket
import struct
import time

import pytest

pytestmark = pytest.mark.functional

FLOOD_S = 11
EAL_BURST = 400     # SN_EAL_LOG_BURST (backend/daemon/app/sn_eal_log.h)
PRIO = re.compile(r"^<([0-7])>")


def journal_env(d):
    """JOURNAL_STREAM naming the file the daemon's stderr goes to."""
    d.log_path.touch()
    st = os.stat(d.log_path)
    return {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}


def log_lines(d):
    """The daemon's lines (not the fixture's "=== start" markers)."""
    return [ln for ln in d.log_path.read_text(errors="replace").splitlines()
            if ln and not ln.startswith("=== ")]


def test_journal_lines_carry_priorities(schednicd, sn_tmpdir):
    d = schednicd(ports=["vm0"], start=False)
    d.env = journal_env(d)
    d.start()
    d.stop()
    lines = log_lines(d)
    bare = [ln for ln in lines if not PRIO.match(ln)]
    assert not bare, "lines without a priority:\n" + "\n".join(bare[:10])
    prio = {}
    for ln in lines:
        prio.setdefault(ln[3:].split(":")[0], set()).add(int(ln[1]))
    print({k: sorted(v) for k, v in prio.items()})
    assert any(ln.startswith("<6>schednicd: port vm0: added") for ln in lines), lines[:20]
    assert any(ln.startswith("<6>schednicd: stopped (exit 0)") for ln in lines), lines[-5:]
    # DPDK's lines come through with its priorities (EAL, vhost)
    assert any(re.match(r"^<[0-7]>(EAL|VHOST_CONFIG): ", ln) for ln in lines), lines[:40]


def test_plain_lines_without_the_journal(schednicd, sn_tmpdir):
    """JOURNAL_STREAM of another file (a shell started from a service):
    no prefixes, the text unchanged."""
    d = schednicd(ports=["vm0"], start=False)
    other = sn_tmpdir / "other"
    other.touch()
    st = os.stat(other)
    d.env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
    d.start()
    d.stop()
    lines = log_lines(d)
    assert not [ln for ln in lines if PRIO.match(ln)], lines[:10]
    assert "schednicd: port vm0: added" in "\n".join(lines)


def flood(path, seconds):
    """Connect to a vhost-user socket again and again for `seconds`: one
    GET_FEATURES (answered), then close. Returns the connections made."""
    get_features = struct.pack("<III", 1, 0x1, 0)   # request, flags (version 1), size
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(get_features)
            s.recv(64)
        n += 1
    return n


def test_connection_flood_is_rate_limited(schednicd, sn_tmpdir):
    d = schednicd(ports=[{"name": "w", "type": "vhost-user", "mode": "server",
                          "path": str(sn_tmpdir / "w.sock")}], start=False)
    d.env = journal_env(d)
    d.start()
    n0 = len(d.log_path.read_text(errors="replace").splitlines())
    conns = flood(d.vhost_path("w"), FLOOD_S)
    assert d.alive(), d.log_tail()
    lines = d.log_path.read_text(errors="replace").splitlines()[n0:]
    d.stop()
    vhost = [ln for ln in lines if re.match(r"^<[0-7]>VHOST_", ln)]
    sup = [ln for ln in lines if "suppressed" in ln]
    print("\n".join(sup))
    print(f"{conns} connections in {FLOOD_S} s: {len(lines)} lines, {len(vhost)} DPDK vhost, "
          f"{len(sup)} suppression reports")
    # Each connection makes 4 vhost lines (new connection, new device,
    # the message, peer closed): far more than the limit lets through.
    assert conns * 4 > 3 * EAL_BURST, conns
    # Each window (at most 3 in FLOOD_S = 11 s) passes EAL_BURST lines
    # per DPDK log type and severity (vhost config and data, 2 severities
    # each).
    assert len(vhost) <= 3 * 4 * EAL_BURST, len(vhost)
    # The flood outlasts a window: the first line of a source in the next
    # one says how many of its lines were suppressed.
    assert any(re.match(r"^<6>schednicd: dpdk: \d+ lines of log type \d+ \(VHOST_CONFIG\) "
                        r"suppressed \(at most 400 per 10 s\)$", ln) for ln in sup), sup[:5]
