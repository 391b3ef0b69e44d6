# SPDX-License-Identifier: BSD-3-Clause
"""TX checksum/TSO offloads on deferred-completion ports: the virtio-net
header's checksum/GSO requests are honoured or resolved before the packet
leaves.

A deferred port offers CSUM and HOST_TSO4 like an immediate one; sn_vqtx
turns each TX header into mbuf offload metadata, and the frame takes the
same switch paths as an immediate port's: to the uplink it is copied, then
checksummed / TSO-segmented in software (the netns kernel must see valid
checksums, or TCP stalls: TcpInCsumErrors), to a VM it keeps its offload in
the destination's RX header. Real Linux 6.1 guests with TSO on (default)
and iperf3 TCP are the evidence; the counters prove the offload path was
taken (csum/gso requests > 0, none refused).
"""
import pytest

from guest import UPLINK_HOST_IP, quiet_stats

pytestmark = pytest.mark.vm

IPERF_S = 5


def dport(sn_tmpdir, name, completion):
    return {"name": name, "type": "vhost-user", "path": str(sn_tmpdir / f"{name}.sock"),
            "mode": "server", "completion": completion, **(
                {"max_hold_us": 2_000_000} if completion == "deferred" else {})}


def ports_of(d):
    return {p["name"]: p for p in quiet_stats(d)["ports"]}


def assert_offload_path(c):
    assert c["mode"] == "deferred", c
    assert c["gso_requests"] > 0, f"no TSO frame reached the deferred path: {c}"
    assert c["offload"] == 0 and c["no_mbuf"] == 0, c


def test_deferred_offloads_to_uplink(schednicd, vm, uplink_host, sn_tmpdir, record_result):
    d = schednicd(ports=[dport(sn_tmpdir, "vm0", "deferred")], uplink=uplink_host.devargs)
    uplink_host.attach()
    g = vm("vm0", d.vhost_path("vm0"), role="server", host=10)
    d.wait_port_state("vm0", "up")
    feat = g.check(f"ethtool -k {g.ifname}").out
    assert "tcp-segmentation-offload: on" in feat, feat
    assert "tx-checksumming: on" in feat, feat

    g.check(f"ping -c 3 -W 5 {UPLINK_HOST_IP}", timeout=60)
    nstat0 = uplink_host.sh("nstat -az TcpInCsumErrors", check=False).stdout
    try:
        mbps = g.iperf(UPLINK_HOST_IP, IPERF_S)
        rmbps = g.iperf(UPLINK_HOST_IP, IPERF_S, reverse=True)
    except AssertionError as e:
        nstat = uplink_host.sh("nstat -az TcpInSegs TcpInCsumErrors TcpRetransSegs",
                               check=False).stdout
        raise AssertionError(f"{e}\n--- uplink host ---\n{nstat}\n--- stats ---\n"
                             f"{d.stats()}") from None
    record_result("deferred VM->uplink-host iperf3 TCP (TSO on)", mbps, "Mbit/s")
    record_result("uplink-host->deferred VM iperf3 TCP (-R)", rmbps, "Mbit/s")
    assert mbps > 1 and rmbps > 1
    nstat = uplink_host.sh("nstat -az TcpInCsumErrors", check=False).stdout
    print("uplink host nstat before/after:", nstat0, nstat)
    errs = [int(line.split()[1]) for line in nstat.splitlines()
            if line.startswith("TcpInCsumErrors")]
    assert errs and errs[0] == 0, f"the uplink host saw bad TCP checksums: {nstat}"

    ports = ports_of(d)
    v, u = ports["vm0"], ports["uplink"]
    c = v["completion"]
    print("vm0 completion:", c)
    assert_offload_path(c)
    assert c["held_now"] == 0 and c["popped"] == c["completed"] - sum(
        c["vring_errors"].values()) - c["offload"] - c["no_mbuf"], c
    # Every guest TSO frame was segmented for the uplink, none refused.
    assert u["drops"]["gso_failed"] == 0 and v["drops"]["malformed"] == 0, ports
    # Every guest frame accounted for (a GSO frame whose segments did not
    # all fit the tap's ring is one ring_full drop: no byte bound here, the
    # 2-core host is too noisy for one).
    egress = ("ring_full", "port_down", "gso_failed")
    assert v["rx_packets"] == (u["tx_packets"] + sum(u["drops"][k] for k in egress)
                               + sum(v["drops"].values())
                               - sum(v["drops"][k] for k in egress)), ports
    assert u["tx_packets"] > 0.5 * v["rx_packets"], ports


def test_deferred_offloads_to_vm(schednicd, vm, sn_tmpdir, record_result):
    """vm0 (deferred) -> vm1 (immediate): the TSO frame goes to vm1 as a
    GSO frame through rte_vhost_enqueue_burst; vm1's TCP accepts it."""
    d = schednicd(ports=[dport(sn_tmpdir, "vm0", "deferred"),
                         dport(sn_tmpdir, "vm1", "immediate")])
    a, b = vm.boot([d.vhost_path("vm0"), d.vhost_path("vm1")], roles=["client", "server"])
    d.wait_port_state("vm0", "up")
    d.wait_port_state("vm1", "up")
    a.check(f"ping -c 3 -W 5 {b.addr}", timeout=60)
    mbps = a.iperf(b.addr, IPERF_S)
    record_result("deferred VM->immediate VM iperf3 TCP (TSO on)", mbps, "Mbit/s")
    assert mbps > 1
    ports = ports_of(d)
    c = ports["vm0"]["completion"]
    print("vm0 completion:", c)
    assert_offload_path(c)
    # GSO frames reached vm1 whole: fewer frames than 1500-byte segments.
    assert ports["vm1"]["tx_bytes"] / max(ports["vm1"]["tx_packets"], 1) > 1514, ports
    assert ports["vm1"]["drops"]["malformed"] == 0, ports
