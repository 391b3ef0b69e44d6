# SPDX-License-Identifier: BSD-3-Clause
"""Uplink: a net_tap uplink moved into a network namespace, pinged from there.

schednicd creates the tap interface (net_tap0,iface=<unique>) in the host
namespace; the test moves it into a fresh namespace (IPv6 off there, so the
kernel sends nothing but what ping needs), addresses it, and pings an sn-gen
virtio-user peer answering ARP and ICMP echo (sn-gen echo). Then every
counter is checked against the other side's: kernel interface counters vs
the daemon's uplink counters, sn-gen's vs the daemon's vhost port.
"""
import os
import subprocess
import time

import pytest

from sngen import drops_total, egress_drops, peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

NS_IP = "10.201.0.1"
PEER_IP = "10.201.0.2"
PINGS = 5


def ns_run(ns, *cmd, check=True):
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, timeout=60,
                          capture_output=True, text=True)


def kernel_stats(ns, ifname):
    out = ns_run(ns, "cat", f"/sys/class/net/{ifname}/statistics/rx_packets",
                 f"/sys/class/net/{ifname}/statistics/tx_packets").stdout.split()
    return {"rx_packets": int(out[0]), "tx_packets": int(out[1])}


def wait_iface(ifname, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(f"/sys/class/net/{ifname}"):
            return
        time.sleep(0.1)
    raise TimeoutError(f"tap interface {ifname} did not appear")


def test_ping_from_namespace_through_tap_uplink(schednicd, sngen, netns):
    ifname = f"snup{os.getpid() % 100000}"
    d = schednicd(ports=["vm0"], uplink=f"net_tap0,iface={ifname}")
    wait_iface(ifname)
    ns = netns()
    for key in ("all", "default"):
        ns_run(ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
    subprocess.run(["ip", "link", "set", ifname, "netns", ns], check=True)
    ns_run(ns, "ip", "link", "set", "lo", "up")
    ns_run(ns, "ip", "addr", "add", f"{NS_IP}/24", "dev", ifname)
    ns_run(ns, "ip", "link", "set", ifname, "up")

    g = sngen([d.vhost_path("vm0")], "--echo-ip", PEER_IP, mode="echo")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")

    # Baseline once both sides are up: frames the tap sent earlier (e.g. IPv6
    # from the host namespace before the move) were flooded to no up port.
    def settled(t):
        k = kernel_stats(ns, ifname)
        return t["uplink"]["rx_packets"] == k["tx_packets"] and \
            t["uplink"]["tx_packets"] == k["rx_packets"]
    t0 = wait_settled(d, settled)

    p = ns_run(ns, "ping", "-n", "-c", str(PINGS), "-i", "0.2", "-w", "30", PEER_IP, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{PINGS} received" in p.stdout, p.stdout
    neigh = ns_run(ns, "ip", "neigh", "show", PEER_IP).stdout
    assert peer_mac(0) in neigh, neigh

    # quiesce: the daemon has read every frame the kernel sent, and vice versa
    wait_settled(d, settled)
    r = g.finish()
    t = port_table(d.stats())
    k = kernel_stats(ns, ifname)
    gp = r["ports"][0]

    assert gp["echo_icmp"] >= PINGS and gp["echo_arp"] >= 1, gp
    assert gp["echo_tx_fail"] == 0, gp
    # daemon vs sn-gen (vm0) and daemon vs kernel (uplink), exactly
    assert t["vm0"]["rx_packets"] == gp["tx_packets"] == gp["echo_arp"] + gp["echo_icmp"]
    assert t["vm0"]["tx_packets"] == gp["rx_packets"], (t["vm0"], gp)
    assert t["uplink"]["rx_packets"] == k["tx_packets"], (t["uplink"], k)
    assert t["uplink"]["tx_packets"] == k["rx_packets"], (t["uplink"], k)
    # two ports, both up since t0: everything from one side went to the other
    # or is a counted drop
    def dl(name, f):
        return f(t[name]) - f(t0[name])

    def rx(p):
        return p["rx_packets"]

    def tx(p):
        return p["tx_packets"]

    def ingress(p):
        return drops_total(p) - egress_drops(p)
    assert dl("uplink", rx) == dl("vm0", tx) + dl("vm0", egress_drops) + \
        dl("uplink", ingress) > PINGS, (t0, t)
    assert dl("vm0", rx) == dl("uplink", tx) + dl("uplink", egress_drops) + \
        dl("vm0", ingress) > PINGS, (t0, t)
    assert t["uplink"]["tx_packets"] >= PINGS + 1  # replies + ARP reply
    st = d.stats()
    assert st["mac_table"]["entries"] >= 2, st["mac_table"]
