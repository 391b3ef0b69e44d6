# SPDX-License-Identifier: BSD-3-Clause
"""Port tables sized from datapath.max_ports: a daemon with more ports than
64 starts with all of them, switches frames between ports in slots above
64 with counters exact at both ends, and refuses a port.add beyond the
configured maximum with the number in the error; the soft RLIMIT_NOFILE
is raised toward the hard limit at start.
"""
import resource

import pytest

from sngen import drops_total, egress_drops, port_table, wait_settled
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
