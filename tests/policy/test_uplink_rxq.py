# SPDX-License-Identifier: BSD-3-Clause
"""Layout ncore, the uplink's receive side over the workers (threads.md,
"Uplink RX"), with the uplink in a network namespace of the test's own.

- RSS: a net_tap uplink (it offers RSS hash types; the kernel's tun driver
  picks the queue of each frame by its flow hash) gets one RX queue per
  worker, worker k polls queue k: frames of many UDP flows sent from the
  namespace reach the two VM peers with exact counts, both RX queues
  received some and each was counted by its own worker; frames from a VM
  on each worker leave on that worker's own TX queue.
- Device queues: a net_vhost uplink with 3 queues and no RSS: all polled,
  exactly the frames its peer sent on each.
- Fallback: a net_pcap uplink on a veth (one RX queue, no RSS; a TX queue
  per transmitting lcore), two workers: worker 0 receives every frame and
  delivers it to both VMs, one of which another worker polls; counts
  exact.

Frames from the namespace are written by a raw AF_PACKET socket, each to
a VM peer's MAC (learned by sn-gen's broadcast first), so nothing floods.
"""
import os
import subprocess
import sys
import time

import pytest

from sngen import peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

NCORE = {"layout": "ncore", "workers": 2}
EAL = {"arbiter_cpu": 1}
NS_MAC = "02:6e:73:00:00:01"
FLOWS = 64          # UDP flows per VM
PER_FLOW = 8        # frames per flow
VM_TO_UPLINK = 200  # frames from each VM to the namespace

# Runs inside the namespace: python3 -c SEND ifname ns_mac flows per_flow mac...
SEND = r"""
import socket, struct, sys
ifname, smac, flows, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
macs = sys.argv[5:]
def mac(s): return bytes(int(x, 16) for x in s.split(":"))
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
sent = 0
for r in range(per):
    for f in range(flows):
        for i, m in enumerate(macs):
            udp = struct.pack("!HHHH", 10000 + f, 4789, 8 + 18, 0) + bytes(18)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), sent & 0xffff, 0, 64, 17,
                             0, bytes([10, 77, 0, 1]), bytes([10, 77, 1, 1 + i]))
            ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
            s.send(mac(m) + mac(smac) + b"\x08\x00" + ip + udp)
            sent += 1
print(sent)
"""


def ns_run(ns, *cmd, check=True):
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, timeout=120,
                          capture_output=True, text=True)


def ns_prepare(ns, ifname):
    for key in ("all", "default"):
        ns_run(ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
    ns_run(ns, "ip", "link", "set", "lo", "up")
    ns_run(ns, "ip", "link", "set", ifname, "address", NS_MAC)
    ns_run(ns, "ip", "link", "set", ifname, "up")


def wait_iface(ifname, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(f"/sys/class/net/{ifname}"):
        assert time.monotonic() < deadline, f"interface {ifname} did not appear"
        time.sleep(0.1)


def kernel_tx(ns, ifname):
    return int(ns_run(ns, "cat", f"/sys/class/net/{ifname}/statistics/tx_packets").stdout)


def start_vms(d, sngen, flows=()):
    args = [a for f in flows for a in ("--flow", f)]
    g = sngen([d.vhost_path("vm0"), d.vhost_path("vm1")], *args)
    g.wait("ready")
    for n in ("vm0", "vm1", "uplink"):
        d.wait_port_state(n, "up")
    g.go("learn")
    return g


def send_and_check(d, g, ns, ifname):
    """FLOWS x PER_FLOW frames to each VM from the namespace; the daemon's
    and sn-gen's counters are exact. Returns the uplink's stats entry."""
    t0 = wait_settled(d, lambda t: t["vm0"]["rx_packets"] >= 1 and t["vm1"]["rx_packets"] >= 1)
    k0 = kernel_tx(ns, ifname)
    r = ns_run(ns, sys.executable, "-c", SEND, ifname, NS_MAC, str(FLOWS), str(PER_FLOW),
               peer_mac(0), peer_mac(1))
    sent = int(r.stdout)
    assert sent == 2 * FLOWS * PER_FLOW
    want = t0["uplink"]["rx_packets"] + sent
    t = wait_settled(d, lambda t: t["uplink"]["rx_packets"] >= want)
    assert kernel_tx(ns, ifname) - k0 == sent
    assert t["uplink"]["rx_packets"] == want, (t0["uplink"], t["uplink"])
    for n in ("vm0", "vm1"):
        assert t[n]["tx_packets"] - t0[n]["tx_packets"] == FLOWS * PER_FLOW, (n, t0[n], t[n])
    up = port_table(d.stats())["uplink"]
    assert sum(q["rx_packets"] for q in up["rx_queues"]) == up["rx_packets"], up
    return up, sent


def check_gen(r, sent_each):
    for gp in r["ports"]:
        assert gp["rx_foreign"] == sent_each, gp
        assert gp["rx_bad"] == 0, gp


def test_rss_one_rx_queue_per_worker(schednicd, sngen, netns, measured):
    ifname = f"snrq{os.getpid() % 100000}"
    d = schednicd(ports=["vm0", "vm1"], uplink=f"net_tap0,iface={ifname}",
                  datapath=NCORE, eal=EAL)
    wait_iface(ifname)
    ns = netns()
    subprocess.run(["ip", "link", "set", ifname, "netns", ns], check=True)
    ns_prepare(ns, ifname)
    # phase 0: each VM (vm0: worker 0, vm1: worker 1) to the namespace
    g = start_vms(d, sngen, [f"src={i},dst={NS_MAC},count={VM_TO_UPLINK}" for i in (0, 1)])
    # net_tap pairs its queues (RX count = TX count = workers + arbiter):
    # queue 2 goes to worker 0
    log = d.log_path.read_text(errors="replace")
    assert "uplink: net_tap0: RX mode rss: 3 RX queues over 2 workers" in log, log
    up, sent = send_and_check(d, g, ns, ifname)
    assert up["rx_mode"] == "rss", up
    assert [q["worker"] for q in up["rx_queues"]] == [0, 1, 0], up["rx_queues"]
    per_q = [q["rx_packets"] for q in up["rx_queues"]]
    measured("uplink RX queues (rss)", queue0=per_q[0], queue1=per_q[1], queue2=per_q[2],
             sent=sent)
    assert all(q["rx_packets"] > 0 and q["rx_bursts"] > 0 for q in up["rx_queues"]), up
    assert [q["pmd_rx_packets"] for q in up["rx_queues"]] == per_q, up["rx_queues"]
    # TX: worker 0, worker 1, the arbiter, each on its own queue
    assert [(q["queue"], q["lcore"], q["worker"]) for q in up["tx_queues"]] == \
        [(0, "worker", 0), (1, "worker", 1), (2, "arbiter", -1)], up["tx_queues"]
    tx0 = [q["pmd_tx_packets"] for q in up["tx_queues"]]
    g.go("0")
    want = up["tx_packets"] + 2 * VM_TO_UPLINK
    wait_settled(d, lambda t: t["uplink"]["tx_packets"] >= want)
    up = port_table(d.stats())["uplink"]
    assert up["tx_packets"] == want, up
    dtx = [q["pmd_tx_packets"] - a for q, a in zip(up["tx_queues"], tx0)]
    assert dtx == [VM_TO_UPLINK, VM_TO_UPLINK, 0], dtx
    check_gen(g.finish(), FLOWS * PER_FLOW)


def test_single_rx_queue_fallback_exact(schednicd, sngen, netns):
    ns = netns()
    a, b = f"snxa{os.getpid() % 100000}", f"snxb{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", b, "netns", ns], check=True)
    try:
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{a}.disable_ipv6=1"], check=True)
        subprocess.run(["ip", "link", "set", a, "up"], check=True)
        ns_prepare(ns, b)
        # one RX queue (incoming frames of a), a TX queue per transmitting lcore
        d = schednicd(ports=["vm0", "vm1"],
                      uplink=f"net_pcap0,rx_iface_in={a}" + f",tx_iface={a}" * 3,
                      datapath=NCORE, eal=EAL)
        g = start_vms(d, sngen)
        log = d.log_path.read_text(errors="replace")
        assert "no RSS on IP/TCP/UDP: one RX queue, worker 0 receives for all 2 workers" \
            in log, log
        assert "RX mode single: 1 RX queue over 2 workers" in log, log
        vq = {p["name"]: [q["worker"] for q in p["queues"]]
              for p in d.rpc("port.list")["ports"] if p["type"] == "vhost-user"}
        assert vq == {"vm0": [0], "vm1": [1]}, vq
        up, _ = send_and_check(d, g, ns, b)
        assert up["rx_mode"] == "single", up
        assert [(q["worker"], q["rx_packets"]) for q in up["rx_queues"]] == \
            [(0, up["rx_packets"])], up["rx_queues"]
        check_gen(g.finish(), FLOWS * PER_FLOW)
        d.stop()
    finally:
        subprocess.run(["ip", "link", "del", a], check=False, capture_output=True)


def test_device_queues_without_rss_all_polled(schednicd, sngen, sn_tmpdir):
    """auto on a device without RSS that has a few queues of its own (a
    net_vhost uplink with queues=3): every queue polled, RX queue q by
    worker q mod 2; sn-gen, its peer, sends flow i on its TX queue i."""
    up = sn_tmpdir / "up.sock"
    vm0 = {"name": "vm0", "type": "vhost-user", "path": str(sn_tmpdir / "vm0.sock"), "queues": 3}
    d = schednicd(ports=[vm0], uplink=f"net_vhost0,iface={up},queues=3", datapath=NCORE, eal=EAL)
    n = 300
    g = sngen([str(up), vm0["path"]], "--queues", "3",
              *[a for _ in range(3) for a in ("--flow", f"src=0,dst=1,count={n}")])
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    log = d.log_path.read_text(errors="replace")
    assert "no RSS, 3 RX queues of its own: every one polled" in log, log
    assert "RX mode device: 3 RX queues over 2 workers" in log, log
    g.go("learn")
    t0 = wait_settled(d, lambda t: t["uplink"]["rx_packets"] >= 1 and t["vm0"]["rx_packets"] >= 1)
    q0 = [q["rx_packets"] for q in port_table(d.stats())["uplink"]["rx_queues"]]
    g.go("0")
    t = wait_settled(d, lambda t: t["vm0"]["tx_packets"] >= t0["vm0"]["tx_packets"] + 3 * n)
    assert t["vm0"]["tx_packets"] == t0["vm0"]["tx_packets"] + 3 * n, (t0["vm0"], t["vm0"])
    up_st = port_table(d.stats())["uplink"]
    assert up_st["rx_mode"] == "device", up_st
    assert [q["worker"] for q in up_st["rx_queues"]] == [0, 1, 0], up_st["rx_queues"]
    assert [q["rx_packets"] - a for q, a in zip(up_st["rx_queues"], q0)] == [n, n, n], \
        (q0, up_st["rx_queues"])
    r = g.finish()
    for f in r["flows"]:
        assert f["tx"] == f["count"] == f["rx"] and f["rx_ooo"] == 0 and f["rx_bad"] == 0, f


@pytest.mark.parametrize("val", ["two", 0, 9, -1, 1.5, [2]])
def test_rx_queues_bad_value_rejected(schednicd_bin, sn_tmpdir, val):
    import json
    f = sn_tmpdir / "bad.json"
    f.write_text(json.dumps({"uplink": {"devargs": "net_null0", "rx_queues": val}}))
    r = subprocess.run([str(schednicd_bin), "--config", str(f), "--check-config"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r
    assert 'config: uplink.rx_queues: must be "auto" or an integer 1..8' in r.stderr, r.stderr


def test_paired_queues_1core_extra_tx_queue_unused(schednicd, sngen, netns):
    """Layout 1core (one transmitting lcore) and a net_tap uplink with
    uplink.rx_queues 2: net_tap wants as many TX as RX queues, so the
    uplink gets a second TX queue that nobody transmits on ("unused");
    the worker polls both RX queues, counts exact."""
    ifname = f"snrp{os.getpid() % 100000}"
    d = schednicd(ports=["vm0", "vm1"], uplink=f"net_tap0,iface={ifname}",
                  datapath={"layout": "1core"}, start=False)
    d.config["uplink"]["rx_queues"] = 2
    d.start()
    wait_iface(ifname)
    ns = netns()
    subprocess.run(["ip", "link", "set", ifname, "netns", ns], check=True)
    ns_prepare(ns, ifname)
    g = start_vms(d, sngen, [f"src={i},dst={NS_MAC},count={VM_TO_UPLINK}" for i in (0, 1)])
    log = d.log_path.read_text(errors="replace")
    assert "uplink: net_tap0: 1 TX queues refused, trying 2 (as many as RX queues, 1 unused)" \
        in log, log
    assert "uplink: net_tap0: RX mode rss: 2 RX queues over 1 worker" in log, log
    up, sent = send_and_check(d, g, ns, ifname)
    assert [q["worker"] for q in up["rx_queues"]] == [0, 0], up["rx_queues"]
    assert all(q["rx_packets"] > 0 for q in up["rx_queues"]), up["rx_queues"]
    assert [(q["queue"], q["lcore"], q["worker"]) for q in up["tx_queues"]] == \
        [(0, "worker", 0), (1, "unused", -1)], up["tx_queues"]
    tx0 = [q["pmd_tx_packets"] for q in up["tx_queues"]]
    g.go("0")
    want = up["tx_packets"] + 2 * VM_TO_UPLINK
    wait_settled(d, lambda t: t["uplink"]["tx_packets"] >= want)
    up = port_table(d.stats())["uplink"]
    assert up["tx_packets"] == want, up
    dtx = [q["pmd_tx_packets"] - a for q, a in zip(up["tx_queues"], tx0)]
    assert dtx == [2 * VM_TO_UPLINK, 0], dtx
    check_gen(g.finish(), FLOWS * PER_FLOW)
