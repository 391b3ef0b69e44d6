# SPDX-License-Identifier: BSD-3-Clause
"""Daemon restart with TX descriptors held: every descriptor completed
exactly once (doc/deferred.md, After a crash or restart).

sn-vufront (backend/tools/sn_vufront_restart.c) is the guest of the
deferred port w: it posts frames whose completions come back out of order
(half to a peer that takes nothing, "sink": held; half to its own MAC:
dropped at once), keeps its memory and rings while schednicd is stopped
(SIGTERM) or killed (SIGKILL) and started again on the same config, and
reconnects as QEMU does when it could not ask GET_VRING_BASE (TX ring
restarted at its used index). It keeps its own book per head. Checked:
- the front-end: no head completed twice, none lost, every head that was
  outstanding before the restart completed once, and a further batch taken
  and completed after it (the queue works);
- the restarted daemon: it completed exactly the recorded heads
  (recovered_after_restart) and popped only the new batch (no frame of
  before the restart taken, so sent, again).
The durable record itself: validated (a file that is not a record is
rejected and counted, the queue starts as without one), left saying
nothing is outstanding after a clean device stop, removed by port.del.
"""
import json
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from snlib.wait import wait_for

pytestmark = pytest.mark.functional

SINK_MAC = "02:99:00:00:00:09"   # unknown: flooded to the sink, which takes nothing
COUNT = 200                      # frames per batch on a 256-entry ring
REC_HDR = struct.Struct("<IHHIHH3Q")



def rig_ports(tmp):
    # sn-vufront writes no opt-in marker: a long unmarked_max_hold_us keeps
    # its frames held until the restart instead of dropped after 1 ms.
    return [{"name": "w", "type": "vhost-user", "path": str(tmp / "w.sock"), "mode": "server",
             "completion": "deferred", "unmarked_max_hold_us": 10_000_000},
            {"name": "sink", "type": "vhost-user", "path": str(tmp / "sink.sock"),
             "mode": "server"}]


def comp(d, name="w"):
    return d.port_stats(name)["completion"]


def next_event(p, what, timeout=60):
    """The next JSON line of sn-vufront's stdout whose event is `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            pytest.fail(f"sn-vufront ended before event {what}: rc {p.wait(10)}, "
                        f"log {p.log_path.read_text(errors='replace')}")
        ev = json.loads(line)
        if ev.get("event") == what or (what is None and "event" not in ev):
            return ev
    pytest.fail(f"no event {what} in {timeout}s")


def kill_and_start(d, sig):
    if sig == signal.SIGKILL:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
    # SIGTERM: the daemon stops its devices and exits; after a SIGKILL this
    # only removes the DPDK runtime directory.
    d.stop()
    d.start()


def read_record(path):
    b = path.read_bytes()
    magic, version, vring, size, last_avail, used_pub, *gpa = REC_HDR.unpack_from(b)
    bits = b[REC_HDR.size:REC_HDR.size + size // 8]
    return {"magic": magic, "version": version, "vring": vring, "size": size,
            "last_avail": last_avail, "used_pub": used_pub,
            "outstanding": sum(bin(x).count("1") for x in bits)}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_restart_with_held_descriptors(schednicd, spawn, sn_tmpdir, vufront_bin, sig):
    d = schednicd(ports=rig_ports(sn_tmpdir))
    go = sn_tmpdir / "go"
    sink_done = sn_tmpdir / "sink-done"
    spawn([vufront_bin, "--socket", d.vhost_path("sink"), "--scenario", "sink",
           "--timeout", "60", "--go-file", sink_done], name="sink")
    w = spawn([vufront_bin, "--socket", d.vhost_path("w"), "--scenario", "restart",
               "--count", COUNT, "--dst", SINK_MAC, "--timeout", "60", "--go-file", go],
              name="w", stdout=subprocess.PIPE, text=True)
    for n in ("w", "sink"):
        d.wait_port_state(n, "up")
    (sn_tmpdir / "go.0").touch()
    held = next_event(w, "held")
    out = held["outstanding"]
    # Completions came back out of order: the held set is not a tail.
    assert COUNT // 2 <= held["completed"] < COUNT and out > 0, held
    wait_for(lambda: comp(d)["held_now"] == out, "the daemon holds what the guest has out", d=d)
    rec = read_record(sn_tmpdir / "state" / "w.txq0.rec")
    assert rec["outstanding"] == out and rec["last_avail"] == COUNT, rec

    kill_and_start(d, sig)
    next_event(w, "reconnected")
    rnd = next_event(w, "round")
    r = next_event(w, None)
    sink_done.touch()
    assert w.wait(30) == 0, r
    res = r["restart"]
    assert res["duplicates"] == 0 and res["lost"] == 0, r
    assert res["posted"] == res["completed"] == 2 * COUNT, r
    assert rnd["completed"] == 2 * COUNT, rnd
    c = comp(d)
    if sig == signal.SIGKILL:
        # The heads held at the kill, completed once by the new daemon.
        assert res["recovered"] == out, r
        assert c["recovered_after_restart"] == out, c
    else:
        # The old daemon drop-completed them at its device stop.
        assert c["recovered_after_restart"] == 0, c
    assert c["record_rejected"] == 0, c
    # Nothing of before the restart was taken again: only the new batch.
    assert c["popped"] == COUNT, c
    assert c["completed"] == COUNT + c["recovered_after_restart"], c
    assert c["held_now"] == 0, c
    # The clean stop at the end (GET_VRING_BASE) leaves nothing outstanding.
    rec = read_record(sn_tmpdir / "state" / "w.txq0.rec")
    assert rec["outstanding"] == 0 and rec["last_avail"] == rec["used_pub"] == 2 * COUNT, rec
    assert r["stop"]["tx_base"] == 2 * COUNT, r


def test_record_validated_and_removed(schednicd, sn_tmpdir, vufront_bin):
    state = sn_tmpdir / "state"
    state.mkdir()
    junk = state / "w.txq0.rec"
    junk.write_bytes(bytes([0xab]) * 8192)     # not a record
    d = schednicd(ports=rig_ports(sn_tmpdir)[:1])
    r = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"), "--scenario", "good",
                        "--count", "20", "--dst", SINK_MAC, "--timeout", "30"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr, d.log_tail())
    c = comp(d)
    assert c["record_rejected"] == 1 and c["recovered_after_restart"] == 0, c
    assert c["completed"] == 20, c
    assert "record rejected" in d.log_tail(200)
    rec = read_record(junk)
    assert rec["outstanding"] == 0 and rec["last_avail"] == rec["used_pub"] == 20, rec
    d.rpc("port.del", {"name": "w"})
    assert not junk.exists()


def test_second_daemon_on_the_same_state_dir_refused(schednicd):
    """One daemon per state_dir: a second schednicd given the same
    control.state_dir (its own control socket) refuses to start, naming the
    owner's pid, and the first one's records are untouched; once the first
    is gone, the directory is free again."""
    first = schednicd(ports=[])
    lock = Path(first.config["control"]["state_dir"]) / "schednicd.lock"
    assert lock.read_text().strip() == str(first.proc.pid)
    second = schednicd(ports=[], start=False)
    assert second.config["control"]["state_dir"] == first.config["control"]["state_dir"]
    assert second.socket != first.socket
    with pytest.raises(RuntimeError) as e:
        second.start()
    assert second.proc.returncode == 1
    assert (f"state_dir {lock.parent} is in use by another schednicd (pid {first.proc.pid}"
            in str(e.value)), str(e.value)
    assert first.rpc("version")
    first.stop()
    second.start()
    assert lock.read_text().strip() == str(second.proc.pid)
