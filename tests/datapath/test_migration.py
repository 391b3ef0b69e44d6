# SPDX-License-Identifier: BSD-3-Clause
"""Live migration on a deferred port, driven by sn-vufront as QEMU drives
it: the dirty log, read from the bitmap, and the announce (SEND_RARP).

Dirty log.

A deferred port writes its guests' TX used rings itself, outside the vhost
library, so the library cannot log those writes: the daemon must
(sn_vqtx.c flush()). sn-vufront (backend/tools/sn_vufront.c, scenario
dirty_log) plays QEMU starting a migration: it negotiates
VHOST_USER_PROTOCOL_F_LOG_SHMFD, shares a memfd bitmap (SET_LOG_BASE),
sets VHOST_F_LOG_ALL and the rings' log addresses while the daemon holds
its frames (they wait for a paused sink), and then checks bit by bit
(4 KiB guest pages) that every page of the used ring written since
logging started is marked: first while the daemon completes the held
frames at their hold limit, then when the device is stopped with frames
held (GET_VRING_BASE, before QEMU's last bitmap sync), the second batch
crossing into the used ring's second page. The daemon's counters must
agree: the frames were held and completed by the paths the phases name,
and log_writes moved.

Announce. After a migration QEMU sends VHOST_USER_SEND_RARP for a guest
without GUEST_ANNOUNCE; the vhost library would inject the RARP only in
rte_vhost_dequeue_burst(), which a deferred port does not call. The
switch must learn the MAC on the port at once (sn_port_migrate.c): frames for
that MAC, until then delivered to the port that had it, go to the
deferred port, though no frame from the MAC came in there; malformed
announces (multicast MAC, short payload) are counted and ignored.

Log resize. A second SET_LOG_BASE while logging (QEMU sends one when guest
memory grows during a migration; any front-end may send many) makes the
library unmap the bitmap the worker writes into: the daemon must survive
thousands of them while it completes frames, and keep logging into the
newest bitmap.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from sngen import peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

SINK_MAC_BASE = 8
N = 100            # frames per phase (ring of 256: the second batch crosses a page)
HOLD_US = 1_000_000



def dport(d, name, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"), "mode": "server"}
    p.update(kw)
    return p


def test_used_ring_writes_are_dirty_logged(schednicd, sngen, sn_tmpdir, vufront_bin):
    # sn-vufront writes no opt-in marker: its frames are held up to
    # unmarked_max_hold_us, then copied out and completed (phase "running")
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred",
                               unmarked_max_hold_us=HOLD_US), dport(sn_tmpdir, "vm1")])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 "--queue-size", "64", mac_base=SINK_MAC_BASE)
    sink.wait("ready")
    d.wait_port_state("vm1", "up")
    sink.go("learn")
    wait_settled(d, lambda t: t["vm1"]["rx_packets"] == 1)
    c0 = port_table(d.stats())["w"]
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        r = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"),
                            "--scenario", "dirty_log", "--count", str(N),
                            "--dst", peer_mac(SINK_MAC_BASE), "--timeout", "20", "--no-stop"],
                           capture_output=True, text=True, timeout=60)
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    assert r.returncode in (0, 1), (r.returncode, r.stdout, r.stderr, d.log_tail())
    out = json.loads(r.stdout)
    log = out["dirty_log"]
    print("dirty log:", json.dumps(log))
    for phase in ("running", "stop"):
        p = log[phase]
        assert p["used_to"] != p["used_from"], (phase, log)     # the phase wrote the ring
        assert p["pages"] and all(marked for _, marked in p["pages"]), (phase, log)
        assert p["unmarked"] == 0, (phase, log)
    # the stop phase's entries 100..199 lie on both pages of the used ring
    assert len(log["stop"]["pages"]) == 2, log
    assert out["ok"], out
    d.wait_port_state("w", "down")
    c = wait_settled(d, lambda t: t["w"]["completion"]["held_now"] == 0)["w"]
    cc, cc0 = c["completion"], c0["completion"]
    # both batches were popped and every frame completed once; the first
    # batch beyond what the paused sink's ring took waited for the hold
    # limit, the second was still held at the stop
    assert cc["popped"] - cc0["popped"] == 2 * N, (cc0, cc)
    assert cc["completed"] - cc0["completed"] == 2 * N, (cc0, cc)
    late = ("copied_out", "hold_timeouts")
    assert sum(cc[k] - cc0[k] for k in late) > 0, (cc0, cc)
    assert cc["forced"] > cc0["forced"], (cc0, cc)
    assert c["migration"]["log_writes"] > c0["migration"]["log_writes"], c["migration"]
    print("w:", {k: cc[k] - cc0[k] for k in ("popped", "completed", *late, "forced")},
          "log_writes", c["migration"]["log_writes"])


FWD = 40


def test_send_rarp_moves_the_mac(schednicd, sngen, sn_tmpdir, vufront_bin, spawn):
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred"),
                         dport(sn_tmpdir, "vm1"), dport(sn_tmpdir, "vm2")])
    g = sngen([d.vhost_path("vm1"), d.vhost_path("vm2")],
              "--flow", f"src=0,dst=1,count={FWD},phase=0",
              "--flow", f"src=0,dst=1,count={FWD},phase=1")
    g.wait("ready")
    for n in ("vm1", "vm2"):
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_settled(d, lambda t: t["vm1"]["rx_packets"] == 1 and t["vm2"]["rx_packets"] == 1)
    t0 = port_table(d.stats())
    g.go(0)             # vm2's MAC is on vm2: its frames arrive there
    wait_settled(d, lambda t: t["vm2"]["tx_packets"] == t0["vm2"]["tx_packets"] + FWD)
    go = sn_tmpdir / "rarp-done"
    p = spawn([vufront_bin, "--socket", d.vhost_path("w"), "--scenario", "rarp",
               "--src", peer_mac(1), "--timeout", "30", "--wait-file", go],
              name="vufront", stdout=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while port_table(d.stats())["w"]["migration"]["rarp_received"] < 3:
        assert time.monotonic() < deadline, port_table(d.stats())["w"]
        assert p.poll() is None, (p.returncode, d.log_tail())
        time.sleep(0.05)
    st = d.stats()
    t1 = port_table(st)
    # the well-formed announce only; the multicast MAC and the short
    # payload are ignored
    assert t1["w"]["migration"] == {"log_writes": 0, "rarp_received": 3, "rarp_learned": 1}, \
        t1["w"]["migration"]
    g.go(1)             # now vm2's MAC is on w
    t = wait_settled(d, lambda t: t["vm1"]["rx_packets"] == t1["vm1"]["rx_packets"] + FWD)
    w_got = (t["w"]["tx_packets"] + sum(t["w"]["drops"].values())
             - t1["w"]["tx_packets"] - sum(t1["w"]["drops"].values()))
    print("after SEND_RARP: vm2 got", t["vm2"]["tx_packets"] - t1["vm2"]["tx_packets"],
          "w got", w_got, "mac moves", d.stats()["mac_table"]["moves"] - st["mac_table"]["moves"])
    assert t["vm2"]["tx_packets"] == t1["vm2"]["tx_packets"], (t1["vm2"], t["vm2"])
    assert w_got == FWD, (t1["w"], t["w"])
    go.touch()
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0, (p.returncode, out, d.log_tail())
    assert d.alive(), d.log_tail()


RESIZE_ROUNDS = 3000   # x 4 SET_LOG_BASE while frames complete


def test_log_base_replaced_while_logging(schednicd, sngen, sn_tmpdir, vufront_bin):
    d = schednicd(ports=[dport(sn_tmpdir, "w", completion="deferred"), dport(sn_tmpdir, "vm1")])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    sink.wait("ready")
    d.wait_port_state("vm1", "up")
    sink.go("learn")
    wait_settled(d, lambda t: t["vm1"]["rx_packets"] == 1)
    t0 = time.monotonic()
    r = subprocess.run([str(vufront_bin), "--socket", d.vhost_path("w"),
                        "--scenario", "log_resize", "--count", str(RESIZE_ROUNDS),
                        "--dst", peer_mac(SINK_MAC_BASE), "--timeout", "20"],
                       capture_output=True, text=True, timeout=300)
    secs = time.monotonic() - t0
    assert d.alive(), d.log_tail()
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr, d.log_tail())
    out = json.loads(r.stdout)
    m = port_table(d.stats())["w"]["migration"]
    print(f"{4 * RESIZE_ROUNDS} SET_LOG_BASE in {secs:.1f}s, log_writes {m['log_writes']},",
          "after:", out["dirty_log"]["after"])
    assert out["ok"] and out["dirty_log"]["after"]["unmarked"] == 0, out
    assert m["log_writes"] > 0, m
