# SPDX-License-Identifier: BSD-3-Clause
"""Port tables sized from datapath.max_ports: a daemon with more ports than
64 starts with all of them, switches frames between ports in slots above
64 with counters exact at both ends, and refuses a port.add beyond the
configured maximum with the number in the error; the soft RLIMIT_NOFILE
is raised toward the hard limit at start.
"""
import os
import resource
import signal
import time

import pytest

from sngen import drops_total, egress_drops, peer_mac, port_table, wait_settled
from snlib.rpc import RpcError

pytestmark = pytest.mark.functional

N_PORTS = 100
N = 2000


def names(n):
    return [f"vm{i}" for i in range(n)]


def test_hundred_ports_switch_on_high_slots(schednicd, sngen):
    """100 configured ports (slots 0..99): port.list shows every one; sn-gen
    peers on vm65, vm80, vm99 exchange unicast frames, counted exactly."""
    d = schednicd(ports=names(N_PORTS), datapath={"max_ports": 128})
    listed = [p["name"] for p in d.rpc("port.list")["ports"]]
    assert sorted(listed) == sorted(names(N_PORTS)), listed
    peers = ["vm65", "vm80", "vm99"]
    g = sngen([d.vhost_path(n) for n in peers],
              "--flow", f"src=0,dst=2,count={N}", "--flow", f"src=2,dst=1,count={N}")
    g.wait("ready")
    for n in peers:
        d.wait_port_state(n, "up")
    g.go("learn")
    t0 = wait_settled(d, lambda t: all(
        t[x]["rx_packets"] == 1 and t[x]["tx_packets"] + egress_drops(t[x]) == 2 for x in peers))
    assert d.stats()["mac_table"]["entries"] == 3
    g.go(0)   # both flows
    wait_settled(d, lambda t: t["vm65"]["rx_packets"] == 1 + N and t["vm99"]["rx_packets"] == 1 + N)
    r = g.finish()
    t = port_table(d.stats())
    for i, n in enumerate(peers):
        gp = r["ports"][i]
        assert t[n]["rx_packets"] == gp["tx_packets"], (n, t[n], gp)
        assert t[n]["tx_packets"] == gp["rx_packets"], (n, t[n], gp)
        assert t[n]["tx_bytes"] == gp["rx_bytes"], (n, t[n], gp)
        # every frame in came out where the MAC table says or was counted
        # at the egress port (a peer's full RX ring: ring_full)
        assert drops_total(t[n]) == egress_drops(t[n]), (n, t[n]["drops"])
    for f, dst in zip(r["flows"], ("vm99", "vm80")):
        j = peers.index(dst)
        got = t[dst]["tx_packets"] - t0[dst]["tx_packets"]
        lost = egress_drops(t[dst]) - egress_drops(t0[dst])
        assert f["tx"] == f["count"] == N, f
        assert f["rx"] == f["rx_by_port"][j] == got > 0 and f["rx_ooo"] == 0, f
        assert got + lost == N, (dst, got, lost)
    # the other 97 ports took nothing but the learning broadcasts' floods
    idle = [n for n in names(N_PORTS) if n not in peers]
    assert all(t[n]["rx_packets"] == 0 for n in idle)


def test_backlog_toward_a_high_slot_delivers_all(schednicd, sngen, sn_tmpdir):
    """A deferred source (slot 66) sends to a paused sink in slot 150: the
    frames beyond its RX ring wait in the switch's backlog of slot 150
    (third word of the busy bitmap), descriptors held, and all arrive once
    the sink resumes; nothing dropped, every descriptor completed."""
    n = 1500
    ports = names(160)
    ports[66] = {"name": "vm66", "type": "vhost-user", "path": str(sn_tmpdir / "vm66.sock"),
                 "mode": "server", "completion": "deferred"}
    d = schednicd(ports=ports, datapath={"max_ports": 200})
    sink = sngen([d.vhost_path("vm150")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=8)
    gen = sngen([d.vhost_path("vm66")], "--marker",
                "--flow", f"src=0,dst={peer_mac(8)},count={n},phase=0")
    sink.wait("ready")
    gen.wait("ready")
    for p in ("vm66", "vm150"):
        d.wait_port_state(p, "up")
    sink.go("learn")
    gen.go("learn")
    t0 = wait_settled(d, lambda t: t["vm66"]["rx_packets"] == 1 and t["vm150"]["rx_packets"] == 1)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        gen.go(0)
        t = wait_settled(d, lambda t: t["vm66"]["rx_packets"] == 1 + n
                         and t["vm66"]["completion"]["held_now"] > 0, timeout=90)
        held = t["vm66"]["completion"]["held_now"]
        assert t["vm150"]["tx_packets"] - t0["vm150"]["tx_packets"] + held == n, (t["vm150"], held)
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    t = wait_settled(d, lambda t: t["vm66"]["completion"]["held_now"] == 0
                     and t["vm150"]["tx_packets"] == t0["vm150"]["tx_packets"] + n)
    c = t["vm66"]["completion"]
    assert c["completed"] == c["popped"] and c["hold_timeouts"] == 0, c
    assert egress_drops(t["vm150"]) == egress_drops(t0["vm150"]) == 0, t["vm150"]
    time.sleep(1.5)   # the resumed sink drains its ring before its summary
    assert sink.finish()["ports"][0]["rx_packets"] == t["vm150"]["tx_packets"]
    assert gen.finish()["flows"][0]["tx"] == n


def test_port_add_beyond_max_ports_fails_with_the_number(schednicd, sn_tmpdir):
    """max_ports 70 with 69 configured: one port.add fits, the next one is
    refused naming 70, and the port list is unchanged by the refusal."""
    d = schednicd(ports=names(69), datapath={"max_ports": 70})
    assert d.rpc("port.add", {"name": "extra0", "path": str(sn_tmpdir / "extra0.sock")}) == \
        {"name": "extra0"}
    with pytest.raises(RpcError) as e:
        d.rpc("port.add", {"name": "extra1", "path": str(sn_tmpdir / "extra1.sock")})
    assert "port limit (70) reached" in e.value.message, e.value
    assert len(d.rpc("port.list")["ports"]) == 70
    # a deleted port frees its place for the next port.add
    d.rpc("port.del", {"name": "vm3"})
    assert d.rpc("port.add", {"name": "extra1", "path": str(sn_tmpdir / "extra1.sock")}) == \
        {"name": "extra1"}


def test_start_raises_soft_nofile_limit(schednicd):
    """Started with a soft RLIMIT_NOFILE of 256, the daemon runs with its
    soft limit at the hard limit (511 ports need more than 256)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        d = schednicd(ports=names(2), datapath={"max_ports": 511})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    line = [l for l in open(f"/proc/{d.proc.pid}/limits") if l.startswith("Max open files")][0]
    assert line.split()[3:5] == [str(hard), str(hard)], line
