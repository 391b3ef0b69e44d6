# SPDX-License-Identifier: BSD-3-Clause
"""Multiqueue with real QEMU guests.

Two TCG guests, each with a 2-queue-pair virtio-net-pci (qemu-vm.sh
--queues 2: netdev queues=2, device mq=on; MSI-X off, ENVIRONMENT.md)
attached to schednicd ports with "queues": 2. Each guest enables both
channels (ethtool -L combined 2); with one vCPU the kernel's XPS map puts
both TX queues on CPU 0 and picks one per flow hash, so several iperf3
streams use both. The test checks that traffic crosses in both directions
and that both TX queues of each port carried frames (per-queue counters of
stats.get), totals being the sums.
"""
import pytest

from guest import quiet_stats

pytestmark = pytest.mark.vm

IPERF_S = 4
STREAMS = 4


def iperf_streams(g, server, reverse=False):
    cmd = (f"timeout {IPERF_S + 30} iperf3 -c {server} -t {IPERF_S} -P {STREAMS} "
           f"--connect-timeout 5000{' -R' if reverse else ''}")
    g.check(cmd, timeout=IPERF_S + 90)


@pytest.mark.parametrize("mode", [pytest.param("immediate", marks=pytest.mark.extended),
                                  "deferred"])
def test_vm_two_queue_pairs(schednicd, vm, sn_tmpdir, mode):
    names = ["vm0", "vm1"]
    d = schednicd(ports=[{"name": n, "path": str(sn_tmpdir / f"{n}.sock"), "mode": "server",
                          "completion": mode, "queues": 2} for n in names])
    a, b = vm.boot([d.vhost_path(n) for n in names], queues=2)
    for g in (a, b):
        d.wait_port_state(g.name, "up")
        out = g.check(f"ethtool -L {g.ifname} combined 2 && ethtool -l {g.ifname}").out
        assert "Combined:\t2" in out.split("Current hardware settings:")[-1], out
    for g in (a, b):
        t = {p["name"]: p for p in d.stats()["ports"]}
        assert [q["tx_enabled"] for q in t[g.name]["queues"]] == [True, True], t[g.name]
    b.check(f"ping -c 3 -W 5 {a.addr}", timeout=60)
    iperf_streams(b, a.addr)                  # vm1 -> vm0
    iperf_streams(b, a.addr, reverse=True)    # vm0 -> vm1
    s = quiet_stats(d)
    ports = {p["name"]: p for p in s["ports"]}
    for n in names:
        p = ports[n]
        qs = p["queues"]
        print(n, [(q["rx_packets"], q["tx_packets"]) for q in qs])
        assert all(q["rx_packets"] > 0 for q in qs), (n, qs)   # both TX queues carried
        assert sum(q["rx_packets"] for q in qs) == p["rx_packets"]
        assert sum(q["rx_bytes"] for q in qs) == p["rx_bytes"]
        assert sum(q["tx_packets"] for q in qs) == p["tx_packets"]
        assert p["drops"]["malformed"] == 0 and p["drops"]["no_mbuf"] == 0, p
        if mode == "deferred":
            c = p["completion"]
            assert c["held_now"] == 0 and c["completed"] == c["popped"] > 0, c
            assert all(q["completion"]["popped"] > 0 for q in qs), qs
    # Back to one channel: queue pair 1 disabled by the driver, traffic on 0.
    for g in (a, b):
        g.check(f"ethtool -L {g.ifname} combined 1")
    t = {p["name"]: p for p in d.stats()["ports"]}
    for n in names:
        assert [q["tx_enabled"] for q in t[n]["queues"]] == [True, False], t[n]["queues"]
    before = {n: [q["rx_packets"] for q in t[n]["queues"]] for n in names}
    iperf_streams(b, a.addr)
    s = quiet_stats(d)
    for p in s["ports"]:
        qs = p["queues"]
        assert qs[0]["rx_packets"] > before[p["name"]][0], qs
        assert qs[1]["rx_packets"] == before[p["name"]][1], qs
        if mode == "deferred":
            assert p["completion"]["held_now"] == 0, p["completion"]


def test_vm_two_queue_driver_on_single_queue_port(schednicd, vm, sn_tmpdir):
    """queues=1: MQ is not offered, so QEMU queues=2 (mq=on) runs on one
    pair: the guest sees one channel and forwards."""
    names = ["vm0", "vm1"]
    d = schednicd(ports=[{"name": n, "path": str(sn_tmpdir / f"{n}.sock"), "mode": "server",
                          "queues": 1} for n in names])
    a, b = vm.boot([d.vhost_path(n) for n in names], queues=2)
    for g in (a, b):
        d.wait_port_state(g.name, "up")
        out = g.check(f"ethtool -l {g.ifname}").out
        assert "Combined:\t2" not in out, out      # no MQ: one channel at most
    b.check(f"ping -c 3 -W 5 {a.addr}", timeout=60)
    iperf_streams(b, a.addr)
    s = quiet_stats(d)
    for p in s["ports"]:
        assert len(p["queues"]) == 1 and p["queues"][0]["rx_packets"] == p["rx_packets"] > 0, p
        assert p["drops"]["malformed"] == 0 and p["drops"]["no_mbuf"] == 0, p
