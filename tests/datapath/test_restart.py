# SPDX-License-Identifier: BSD-3-Clause
"""Restarts and vanishing peers.

- A client-mode port (schednicd connects to a virtio-user peer that listens,
  sn-gen --server) comes back up and passes traffic after schednicd is
  restarted, and after the peer itself is restarted (the vhost library's
  reconnect).
- A virtio-user peer killed (SIGKILL) in the middle of traffic leaves
  mempool in_use back at its baseline: no mbuf leaks on any path, and the
  daemon keeps switching for the next peer.

Counters are waited on until they settle; nothing depends on speed.
"""
import signal

import pytest

from snlib.wait import wait_for
from sngen import egress_drops, port_table, wait_settled

pytestmark = pytest.mark.functional

N = 3000
UNKNOWN_MAC = "02:99:00:00:00:07"


def client_ports(sn_tmpdir, names):
    return [{"name": n, "type": "vhost-user", "path": str(sn_tmpdir / f"peer-{n}.sock"),
             "mode": "client"} for n in names]

def wait_in_use(d, baseline, timeout=20.0):
    last = [None]

    def ok():
        last[0] = d.stats()["mempool"]["in_use"]
        return last[0] == baseline
    try:
        wait_for(ok, "mempool in_use back at baseline", timeout)
    except TimeoutError:
        pytest.fail(f"mempool in_use {last[0]} != baseline {baseline}:\n{d.log_tail()}")


def send_phase(d, g, ph, src, dst, count, before):
    """Release phase ph (count frames src -> dst) and check the daemon's
    counters: all of it received from src; delivered to dst or counted as
    dropped there."""
    g.go(ph)
    t = wait_settled(d, lambda t: t[src]["rx_packets"] == before[src]["rx_packets"] + count)
    got = (t[dst]["tx_packets"] - before[dst]["tx_packets"]) + \
          (egress_drops(t[dst]) - egress_drops(before[dst]))
    assert got == count, (t, before)
    assert t[dst]["tx_packets"] > before[dst]["tx_packets"], "nothing delivered"
    return t


def test_client_port_reconnects_after_daemon_restart(schednicd, sngen, sn_tmpdir):
    names = ["c0", "c1"]
    ports = client_ports(sn_tmpdir, names)
    g = sngen([p["path"] for p in ports], "--server",
              "--flow", f"src=0,dst=1,count={N},phase=0",
              "--flow", f"src=0,dst=1,count={N},phase=1",
              "--connect-timeout", "60")
    # No wait for the peer's sockets: virtio-user in server mode creates
    # them one at a time (blocking accept), and a client-mode port retries.
    d = schednicd(ports=ports)
    for n in names:
        d.wait_port_state(n, "up")
    assert {p["mode"] for p in d.rpc("port.list")["ports"]} == {"client"}
    g.wait("ready")
    g.go("learn")
    t0 = wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    send_phase(d, g, 0, "c0", "c1", N, t0)

    d.restart()                   # SIGTERM, exit, start again on the same config
    for n in names:
        d.wait_port_state(n, "up")
    t1 = port_table(d.stats())
    assert t1["c0"]["rx_packets"] == 0  # a fresh daemon
    send_phase(d, g, 1, "c0", "c1", N, t1)
    assert d.stats()["mac_table"]["learned"] >= 1

    r = g.finish()
    flows = r["flows"]
    assert [f["tx"] for f in flows] == [N, N], flows
    # What sn-gen got on port 1 of each flow is what the daemon delivered
    # (no duplicates, no corruption, in order).
    assert all(f["rx_ooo"] == 0 and f["rx_bad"] == 0 for f in flows), flows
    assert flows[1]["rx"] == d.port_stats("c1")["tx_packets"], (flows, d.port_stats("c1"))
    assert d.stop() == 0


def test_client_port_reconnects_when_peer_returns(schednicd, sngen, sn_tmpdir):
    names = ["c0", "c1"]
    ports = client_ports(sn_tmpdir, names)
    socks = [p["path"] for p in ports]
    g1 = sngen(socks, "--server", "--connect-timeout", "60")
    # No wait for the peer's sockets: virtio-user in server mode creates
    # them one at a time (blocking accept), and a client-mode port retries.
    d = schednicd(ports=ports)
    for n in names:
        d.wait_port_state(n, "up")
    g1.wait("ready")
    g1.finish()                   # the peer goes away ...
    for n in names:
        d.wait_port_state(n, "down")
    g2 = sngen(socks, "--server", "--flow", f"src=1,dst=0,count={N},phase=0",
               "--connect-timeout", "60")
    for n in names:               # ... and comes back: the daemon reconnects
        d.wait_port_state(n, "up", timeout=60)
    g2.wait("ready")
    g2.go("learn")
    t0 = wait_settled(d, lambda t: all(t[n]["rx_packets"] >= 1 for n in names))
    send_phase(d, g2, 0, "c1", "c0", N, t0)
    r = g2.finish()
    assert r["flows"][0]["tx"] == N
    assert r["flows"][0]["rx"] == d.port_stats("c0")["tx_packets"] - \
        (t0["c0"]["tx_packets"]), r["flows"]


def kill_mid_traffic(d, sender, victim, src):
    """Release the sender's endless phase 0 and SIGKILL the victim sn-gen
    once traffic flows."""
    start = d.port_stats(src)["rx_packets"]
    (sender.sync / "go-0").touch()
    wait_for(lambda: d.port_stats(src)["rx_packets"] > start + 20000, "traffic flowing", d=d)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)


@pytest.mark.parametrize("victim", ["both", "sink"])
def test_peer_killed_mid_traffic_no_mbuf_leak(schednicd, sngen, victim):
    names = ["vm0", "vm1"]
    d = schednicd(ports=names)
    socks = [d.vhost_path(n) for n in names]
    big = 50_000_000              # never finishes: the peer dies first
    if victim == "both":
        # One sn-gen owns both peers: sender and sink die together.
        g = sngen(socks, "--flow", f"src=0,dst=1,count={big},phase=0",
                  "--flow", f"src=1,dst=0,count={big},phase=0")
        g.wait("ready")
        for n in names:
            d.wait_port_state(n, "up")
        baseline = d.stats()["mempool"]["in_use"]
        g.go("learn")
        kill_mid_traffic(d, g, g, "vm0")
    else:
        # Sender on vm0 keeps going; the sink on vm1 is killed.
        sink = sngen([socks[1]], "--no-learn", "--flow", f"src=0,dst={UNKNOWN_MAC},count=1,phase=9")
        sink.wait("ready")
        g = sngen([socks[0]], "--no-learn", "--flow", f"src=0,dst={UNKNOWN_MAC},count={big},phase=0")
        g.wait("ready")
        for n in names:
            d.wait_port_state(n, "up")
        baseline = d.stats()["mempool"]["in_use"]
        kill_mid_traffic(d, g, sink, "vm0")
        d.wait_port_state("vm1", "down")
        # Traffic into a vanished destination: still received, nothing leaks.
        before = d.port_stats("vm0")["rx_packets"]
        wait_for(lambda: d.port_stats("vm0")["rx_packets"] > before + 10000, "traffic after kill", d=d)
        g.proc.send_signal(signal.SIGKILL)
        g.proc.wait(10)
    for n in names:
        d.wait_port_state(n, "down")
    wait_in_use(d, baseline)
    assert d.alive()

    # The daemon still switches for new peers, and stays leak-free.
    g2 = sngen(socks, "--flow", f"src=0,dst=1,count={N},phase=0")
    g2.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g2.go("learn")
    t0 = wait_settled(d, lambda t: t["vm1"]["tx_packets"] + egress_drops(t["vm1"]) >= 1)
    send_phase(d, g2, 0, "vm0", "vm1", N, t0)
    g2.finish()
    for n in names:
        d.wait_port_state(n, "down")
    wait_in_use(d, baseline)


def test_port_add_del_under_traffic(schednicd, sngen, sn_tmpdir):
    names = ["vm0", "vm1"]
    d = schednicd(ports=names)
    socks = [d.vhost_path(n) for n in names]
    big = 50_000_000
    g = sngen(socks, "--flow", f"src=0,dst=1,count={big},phase=0",
              "--flow", f"src=1,dst=0,count={big},phase=0")
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    baseline = d.stats()["mempool"]["in_use"]
    g.go("learn")
    start = d.port_stats("vm0")["rx_packets"]
    (g.sync / "go-0").touch()
    wait_for(lambda: d.port_stats("vm0")["rx_packets"] > start + 20000, "traffic flowing", d=d)

    # Churn an unrelated port while the worker is switching.
    extra = str(sn_tmpdir / "vm2.sock")
    for _ in range(5):
        d.rpc("port.add", {"name": "vm2", "path": extra})
        d.rpc("port.del", {"name": "vm2"})
    # Delete the busy destination, then the busy source, under traffic.
    d.rpc("port.del", {"name": "vm1"})
    t = d.port_stats("vm0")["rx_packets"]
    wait_for(lambda: d.port_stats("vm0")["rx_packets"] > t + 10000, "vm0 still received", d=d)
    d.rpc("port.del", {"name": "vm0"})
    assert d.rpc("port.list")["ports"] == []
    g.proc.send_signal(signal.SIGKILL)
    g.proc.wait(10)
    wait_in_use(d, baseline)

    # Same names and paths again, new peers: switching works, counters exact.
    for n, s in zip(names, socks):
        d.rpc("port.add", {"name": n, "path": s})
    g2 = sngen(socks, "--flow", f"src=0,dst=1,count={N},phase=0")
    g2.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g2.go("learn")
    t0 = wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    send_phase(d, g2, 0, "vm0", "vm1", N, t0)
    r = g2.finish()
    assert r["flows"][0]["rx"] + egress_drops(d.port_stats("vm1")) == N, r["flows"]
    wait_in_use(d, baseline)
