# SPDX-License-Identifier: BSD-3-Clause
"""Guest opt-in to long holds on deferred ports (the backend side).

The patched guest driver writes num_buffers = 0x5344 in every TX virtio-net
header (guest-driver-patch/README.md); sn-gen --marker does the same from
a real virtio driver (net_virtio_user). A deferred port holds a frame up to
max_hold_us only once its guest opted in (8 marked frames, none unmarked,
since the device started); a stock guest's frames are held at most
unmarked_max_hold_us, then dropped and completed. Here a paused sink
(SIGSTOP of its sn-gen) would hold frames indefinitely:
- marked: frames stay held while the sink is paused, and are all delivered
  after it resumes (long holds); port.list / stats.get say "deferred", and
  "immediate" again once the guest disconnected;
- unmarked: no frame is held past the short limit (hold p99 below
  unmarked_max_hold_us x 4 — the histogram's bucket edge is within 2x, plus
  scheduling noise): the frames waiting for the paused sink are copied out
  (completion.copied_out) and the copies delivered after it resumes, the
  excess beyond the switch's backlog is dropped at the full ring as on an
  immediate port; the port says "immediate".
"""
import os
import signal
import time

import pytest

from sngen import peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

SINK_MAC_BASE = 8
MAX_HOLD_US = 5_000_000
UNMARKED_US = 1000
N_SLOW = 1500
PAUSE_S = 1.0


def dport(d, name, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"), "mode": "server"}
    p.update(kw)
    return p


def listed_mode(d, name):
    return {p["name"]: p for p in d.rpc("port.list")["ports"]}[name]["completion_mode"]


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_hold_depends_on_opt_in(schednicd, sngen, sn_tmpdir, marked):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0", completion="deferred", max_hold_us=MAX_HOLD_US,
                               unmarked_max_hold_us=UNMARKED_US),
                         dport(sn_tmpdir, "vm1")])
    assert listed_mode(d, "vm0") == "immediate"        # no guest yet
    assert listed_mode(d, "vm1") == "immediate"        # configured immediate
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    gen = sngen([d.vhost_path("vm0")], *(["--marker"] if marked else []),
                "--flow", f"src=0,dst={peer_mac(SINK_MAC_BASE)},count={N_SLOW},phase=0")
    sink.wait("ready")
    gen.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("vm1", "up")
    sink.go("learn")
    gen.go("learn")
    wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 and t["vm1"]["rx_packets"] == 1)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        gen.go(0)
        t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + N_SLOW, timeout=90)
        c = t["vm0"]["completion"]
        print("paused:", c)
        if marked:
            time.sleep(PAUSE_S)
            t = port_table(d.stats())
            c = t["vm0"]["completion"]
            assert c["held_now"] > 0, c            # still held after the pause
            assert c["hold_timeouts"] == 0, c
        else:
            assert c["held_now"] == 0, c           # nothing waits for the sink
            assert c["hold_timeouts"] == 0, c      # the backlog was copied out
            assert c["copied_out"] > 0, c
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    t = wait_settled(d, lambda t: t["vm0"]["completion"]["held_now"] == 0)
    c = t["vm0"]["completion"]
    print("resumed:", c)
    assert c["popped"] == c["completed"] == 1 + N_SLOW, c
    assert c["marked"] == (1 + N_SLOW if marked else 0), c
    assert c["unmarked"] == (0 if marked else 1 + N_SLOW), c
    assert c["unmarked_max_hold_us"] == UNMARKED_US, c
    mode = "deferred" if marked else "immediate"
    assert t["vm0"]["completion_mode"] == mode and listed_mode(d, "vm0") == mode
    assert t["vm1"]["completion_mode"] == "immediate"
    if marked:
        # every frame delivered, the longest hold spans the pause
        assert c["hold_timeouts"] == 0, c
        assert t["vm1"]["tx_packets"] == 1 + N_SLOW, t["vm1"]
        assert c["hold_us"]["max"] >= PAUSE_S * 1e6, c
    else:
        assert c["hold_us"]["p99"] < 4 * UNMARKED_US, c
        # the copies waited for the sink and were delivered; what did not
        # fit the backlog was dropped at the full ring, as on an
        # immediate port
        assert c["hold_timeouts"] == 0 and c["copy_no_mbuf"] == 0, c
        assert t["vm1"]["tx_packets"] - 1 >= c["copied_out"] > 0, (c, t["vm1"])
        assert t["vm1"]["tx_packets"] - 1 + t["vm1"]["drops"]["ring_full"] == N_SLOW, \
            (c, t["vm1"])
    gen.finish()
    # The opt-in belongs to the connection: gone with the guest.
    deadline = time.monotonic() + 20
    while listed_mode(d, "vm0") != "immediate" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert listed_mode(d, "vm0") == "immediate"
    sink.finish()



def test_unmarked_hold_setting_validated(schednicd, sn_tmpdir):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0", completion="deferred", max_hold_us=500,
                               unmarked_max_hold_us=2000)])
    for params, ok in [({"completion": "deferred", "unmarked_max_hold_us": 0}, False),
                       ({"completion": "deferred", "unmarked_max_hold_us": -1}, False),
                       ({"completion": "deferred", "unmarked_max_hold_us": 10_000_001}, False),
                       ({"completion": "deferred", "unmarked_max_hold_us": "1"}, False),
                       ({"completion": "immediate", "unmarked_max_hold_us": 5}, False),
                       ({"completion": "deferred", "unmarked_max_hold_us": 300}, True)]:
        with d.client() as c:
            r = c.call_raw("port.add", {"name": "x1", "path": str(sn_tmpdir / "x1.sock"),
                                        **params})
        if ok:
            assert "result" in r, r
        else:
            assert r["error"]["code"] == -32602 and \
                "unmarked_max_hold_us" in r["error"]["message"], r
    t = port_table(d.stats())
    assert t["x1"]["completion"]["unmarked_max_hold_us"] == 300
    assert t["vm0"]["completion"]["unmarked_max_hold_us"] == 2000
    assert t["x1"]["completion_mode"] == t["vm0"]["completion_mode"] == "immediate"
    bad = schednicd(ports=[dport(sn_tmpdir, "b0", completion="immediate",
                                 unmarked_max_hold_us=5)], start=False)
    with pytest.raises(Exception) as e:
        bad.start(timeout=20)
    assert "unmarked_max_hold_us" in str(e.value) or \
        "unmarked_max_hold_us" in bad.log_tail(), bad.log_tail()
