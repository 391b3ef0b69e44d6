# SPDX-License-Identifier: BSD-3-Clause
"""Uplink on a kernel interface through net_af_xdp (uplink.af_xdp).

A veth pair (tests/snlib/veth.py): schednicd's uplink is the host end
through net_af_xdp (native XDP on veth, the PMD's default XDP program),
the other end is in a fresh network namespace with IPv6 off, so the kernel
sends nothing the test did not ask for. First a ping from the namespace to
an sn-gen echo peer on a vhost-user port; then frames in both directions
(sn-gen to the namespace end's MAC; raw AF_PACKET frames from the
namespace to sn-gen's MAC). Every counter is checked exactly against the
other side's: the uplink's against both veth ends' kernel counters, the
vhost port's against sn-gen's. Last, more queues than the interface's
combined channels is refused before the EAL starts.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sngen import drops_total, peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

NS_IP = "10.203.0.1"
PEER_IP = "10.203.0.2"
PINGS = 5
N = 2000
CHUNK = 250


def start(schednicd, v):
    d = schednicd(ports=["vm0"], start=False)
    d.config["uplink"] = {"name": "uplink", "af_xdp": v.host}
    return d.start()


def kernel_settled(v):
    """Every frame one veth end sent, the other end received, and the
    uplink's counters equal the host end's."""
    def pred(t):
        h, p = v.host_stats(), v.peer_stats()
        return (t["uplink"]["rx_packets"] == h["rx_packets"] == p["tx_packets"] and
                t["uplink"]["tx_packets"] == h["tx_packets"] == p["rx_packets"])
    return pred


def test_ping_from_namespace_through_af_xdp_uplink(veth_ns, schednicd, sngen):
    v = veth_ns()
    d = start(schednicd, v)
    log = d.log_path.read_text()
    assert "uplink: net_af_xdp0 started" in log, d.log_tail()
    v.ns_run("ip", "addr", "add", f"{NS_IP}/24", "dev", v.peer)
    g = sngen([d.vhost_path("vm0")], "--echo-ip", PEER_IP, mode="echo")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")
    wait_settled(d, kernel_settled(v))

    p = v.ns_run("ping", "-n", "-c", str(PINGS), "-i", "0.2", "-w", "30", PEER_IP, check=False)
    assert p.returncode == 0 and f"{PINGS} received" in p.stdout, p.stdout + p.stderr
    assert peer_mac(0) in v.ns_run("ip", "neigh", "show", PEER_IP).stdout

    t = wait_settled(d, kernel_settled(v))
    r = g.finish()
    t = port_table(d.stats())
    gp = r["ports"][0]
    h, k = v.host_stats(), v.peer_stats()
    # ping -c counts replies: a slow host makes it send a few more requests
    assert gp["echo_icmp"] >= PINGS and gp["echo_arp"] >= 1 and gp["echo_tx_fail"] == 0, gp
    # daemon vs sn-gen, daemon vs both veth ends, exactly
    assert t["vm0"]["rx_packets"] == gp["tx_packets"] == gp["echo_arp"] + gp["echo_icmp"], gp
    assert t["vm0"]["tx_packets"] == gp["rx_packets"], (t["vm0"], gp)
    assert t["uplink"]["rx_packets"] == h["rx_packets"] == k["tx_packets"], (t["uplink"], h, k)
    assert t["uplink"]["tx_packets"] == h["tx_packets"] == k["rx_packets"], (t["uplink"], h, k)
    assert t["uplink"]["tx_packets"] >= PINGS + 1, t["uplink"]
    assert drops_total(t["vm0"]) == 0, t["vm0"]


def test_af_xdp_uplink_both_directions_counters_exact(veth_ns, schednicd, sngen):
    v = veth_ns()
    d = start(schednicd, v)
    # paced: the namespace end's backlog (netdev_max_backlog) must not overflow
    g = sngen([d.vhost_path("vm0")], "--flow", f"src=0,dst={v.peer_mac},count={N}",
              "--rate", "100000")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")
    g.go("learn")   # one broadcast from vm0's MAC, out of the uplink
    t0 = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 and kernel_settled(v)(t))
    h0, k0 = v.host_stats(), v.peer_stats()
    assert k0["rx_packets"] == 1 and k0["tx_packets"] == 0, k0

    # VM -> namespace: N frames to the namespace end's MAC
    g.go(0)
    t1 = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + N and kernel_settled(v)(t))
    # namespace -> VM: N raw frames to sn-gen's MAC (learned on vm0), in
    # chunks well below the AF_XDP RX ring (uplink.rx_desc), each read by
    # the daemon before the next: the kernel drops what overflows that
    # ring, and schednicd never sees those frames to count them
    base = t1["uplink"]["rx_packets"]
    for k in range(0, N, CHUNK):
        v.send_raw(peer_mac(0), min(CHUNK, N - k))
        want = base + min(N, k + CHUNK)
        wait_settled(d, lambda t: t["uplink"]["rx_packets"] == want, quiet=0.05)
    t2 = wait_settled(d, lambda t: t["uplink"]["rx_packets"] == base + N and
                      t["vm0"]["tx_packets"] == t1["vm0"]["tx_packets"] + N and
                      kernel_settled(v)(t))
    r = g.finish()
    t = port_table(d.stats())
    gp, f = r["ports"][0], r["flows"][0]
    h, k = v.host_stats(), v.peer_stats()

    assert f["tx"] == N, f
    assert gp["tx_packets"] == t["vm0"]["rx_packets"] == 1 + N, (gp, t["vm0"])
    assert gp["rx_packets"] == t["vm0"]["tx_packets"] == N, (gp, t["vm0"])
    assert gp["rx_foreign"] == N and gp["rx_bad"] == 0, gp
    # each direction: exactly N more at every counter it crosses
    assert t["uplink"]["tx_packets"] - t0["uplink"]["tx_packets"] == N, (t0, t)
    assert h["tx_packets"] - h0["tx_packets"] == k["rx_packets"] - k0["rx_packets"] == N, (h, k)
    assert t["uplink"]["rx_packets"] - t0["uplink"]["rx_packets"] == N, (t0, t)
    assert h["rx_packets"] - h0["rx_packets"] == k["tx_packets"] - k0["tx_packets"] == N, (h, k)
    for n in ("vm0", "uplink"):
        assert drops_total(t[n]) == 0, t[n]


def test_af_xdp_more_queues_than_combined_channels_refused(schednicd_bin, sn_tmpdir, veth_ns):
    """A 2-queue veth reports no combined channels, which net_af_xdp counts
    as one queue: af_xdp_queues 2 is refused before the EAL starts, with
    the channel count and the ethtool command."""
    v = veth_ns(queues=2)
    cfg = sn_tmpdir / "cfg.json"
    prefix = f"sn-xq-{os.getpid()}"
    cfg.write_text(json.dumps({
        "eal": {"memory_mb": 64, "file_prefix": prefix},
        "control": {"socket": str(sn_tmpdir / "ctl.sock"), "state_dir": ""},
        "datapath": {"mbufs": 1023, "mbuf_cache": 32}, "ports": [],
        "uplink": {"name": "uplink", "af_xdp": v.host, "af_xdp_queues": 2}}))
    try:
        r = subprocess.run([str(schednicd_bin), "--config", str(cfg)], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        # a regressed refusal would let the EAL start and create this
        shutil.rmtree(Path("/var/run/dpdk", prefix), ignore_errors=True)
    assert r.returncode == 1, r.stderr
    assert (f"schednicd: uplink.af_xdp: {v.host} has 1 combined channel (ethtool -l {v.host}; "
            "none reported counts as 1, e.g. veth); af_xdp_start_queue 0 + af_xdp_queues 2 "
            f"needs 2: ethtool -L {v.host} combined 2") in r.stderr, r.stderr
    assert "EAL" not in r.stderr, r.stderr
