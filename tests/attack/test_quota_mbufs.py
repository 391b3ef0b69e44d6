# SPDX-License-Identifier: BSD-3-Clause
"""A hostile tenant tries to take the shared mempool while a victim's flow
is measured (doc/isolation.md, "Mbufs and held descriptors").

Rig: one daemon (pool of 8191 mbufs, a net_tap uplink whose RX is fed
from the host side during the attack), a victim flow vs -> vd (two
immediate ports of one sn-gen, 50 kpps of 64 B frames, far below what the
switch forwards) and a hostile deferred port h. The victim's flow runs
one phase alone, then one phase while h attacks:
  (a) h (sn-vufront flood64) posts 64-segment chains, 64 mbufs each, to a
      paused peer p (an sn-gen stopped with SIGSTOP, its RX ring not
      drained): without a budget its frames waiting in the switch would
      hold the whole pool (256 chains x 64 = 16384 mbufs);
  (b) h (sn-gen, opted in) floods the uplink through a shaped class
      (1 Mbit/s, horizon clamp): its frames wait in the timing wheel; its
      budget is set by its policy entry (quota.mbufs 512, below its ring
      of 1024 single-segment frames, which would otherwise bound it;
      quota.held 1024, so that the mbuf budget is the one it meets).
Each attack runs until h's own quota counter rises (quota.mbufs.hits).
Asserted: the victim's no_mbuf delta 0, the uplink's no_mbuf (its PMD's
rx_nombuf) delta 0, every victim frame sent under attack delivered, the
victim's delivered
rate within 2 % of its rate alone, and h's mbufs all back once it stops
(quota.mbufs.used 0). The numbers are printed.

Apart from the rig: port.add of a port whose reserve for its queues does
not fit the pool is refused, naming quota.mbufs.
"""
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from snlib.wait import wait_for
from sngen import peer_mac, port_table, wait_settled

pytestmark = [pytest.mark.attack]

RATE = 50_000             # victim frames/s (sn-gen --rate)
N = 75_000                # victim frames per phase (1.5 s)
WINDOW = 1.0              # seconds of a phase its rate is measured over
SINK_MAC_BASE = 8         # MACs of the paused peer's sn-gen
HOSTILE_MAC = "02:53:56:00:00:01"   # sn-vufront's default source
UPLINK_HOST = "02:71:00:00:00:01"   # a host behind the uplink (tap)
TOL = 0.02
# (b): sn-gen's frames are one segment and its ring holds 1024, below the
# auto budget of this pool: the operator's policy gives h a smaller one
HOSTILE_MBUFS = 512


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


class TapFeeder:
    """Frames into the uplink's tap from the host side (AF_PACKET), so its
    PMD keeps refilling its RX ring from the pool during the attack:
    source UPLINK_HOST (learned on the uplink), destination dst."""

    def __init__(self, ifname, dst):
        subprocess.run(["ip", "link", "set", "dev", ifname, "up"], check=True)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.sock.bind((ifname, 0))
        self.frame = mac_bytes(dst) + mac_bytes(UPLINK_HOST) + b"\x88\xb5" + bytes(46)
        self.sent = 0
        self.stop = threading.Event()
        self.thread = None

    def send(self, n):
        for _ in range(n):
            self.sock.send(self.frame)
        self.sent += n

    def start(self):
        def run():
            while not self.stop.is_set():
                self.send(50)
                time.sleep(0.005)      # ~10 kframes/s
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        if self.thread:
            self.thread.join(5)
        self.sock.close()


def victim_phase(d, gen, phase):
    """Run victim phase `phase`; its delivered rate (frames/s delivered to
    vd, from the daemon's counters over WINDOW seconds in the middle of
    the phase, while sn-gen sends at RATE) and the stats before and after
    the whole phase."""
    t0 = port_table(d.stats())
    (gen.sync / f"go-{phase}").touch()
    time.sleep(0.3)
    a, ta = port_table(d.stats()), time.monotonic()
    time.sleep(WINDOW)
    b, tb = port_table(d.stats()), time.monotonic()
    gen.wait(f"sent-{phase}", timeout=60)
    t1 = wait_for(lambda: (lambda t: t if t["vs"]["rx_packets"] >= t0["vs"]["rx_packets"] + N
                           else None)(port_table(d.stats())), "the victim's phase taken", d=d)
    time.sleep(0.2)    # its last frames through the switch
    t1 = port_table(d.stats())
    return (b["vd"]["tx_packets"] - a["vd"]["tx_packets"]) / (tb - ta), t0, t1


def quota(t, name):
    return t[name]["quota"]["mbufs"]


def start_daemon(schednicd, sn_tmpdir, ifname, hostile, policy=None):
    ports = [{"name": n, "type": "vhost-user", "path": str(sn_tmpdir / f"{n}.sock"),
              "mode": "server"} for n in ("vs", "vd", "p")]
    ports.append({"name": "h", "type": "vhost-user", "path": str(sn_tmpdir / "h.sock"),
                  "mode": "server", "completion": "deferred", **hostile})
    kw = {"policy": policy} if policy else {}
    return schednicd(ports=ports, uplink=f"net_tap0,iface={ifname}", **kw)


def victim_gen(sngen, d):
    gen = sngen([d.vhost_path("vs"), d.vhost_path("vd")], "--rate", str(RATE),
                "--flow", f"src=0,dst=1,count={N},phase=0",
                "--flow", f"src=0,dst=1,count={N},phase=1")
    gen.wait("ready")
    return gen


def report(name, alone, attacked, t0, t1, h):
    no_mbuf = t1["vs"]["drops"]["no_mbuf"] - t0["vs"]["drops"]["no_mbuf"]
    up_nombuf = t1["uplink"]["drops"]["no_mbuf"] - t0["uplink"]["drops"]["no_mbuf"]
    lost = {k: t1["vd"]["drops"][k] - t0["vd"]["drops"][k] for k in t1["vd"]["drops"]}
    print(f"\n{name}: victim alone {alone:.0f} pps, under attack {attacked:.0f} pps "
          f"({(attacked / alone - 1) * 100:+.2f} %), victim sink drops {lost}, "
          f"victim no_mbuf delta {no_mbuf}, "
          f"uplink no_mbuf delta {up_nombuf}; hostile quota.mbufs {h['quota']['mbufs']}, "
          f"completion quota_mbufs {h['completion']['quota_mbufs']} "
          f"quota_mbufs_dropped {h['completion']['quota_mbufs_dropped']}")
    return no_mbuf, up_nombuf


def check_victim(gen, alone, attacked, no_mbuf, up_nombuf):
    assert no_mbuf == 0
    assert up_nombuf == 0
    # every victim frame delivered (a slow sink, e.g. a loaded host, shows here)
    assert abs(attacked / alone - 1) <= TOL, (alone, attacked)
    r = gen.finish()
    print(f"victim frames received alone {r['flows'][0]['rx']}, under attack "
          f"{r['flows'][1]['rx']} of {N} each")
    assert r["flows"][1]["rx"] == N, r["flows"]


@pytest.mark.accuracy
def test_chains_to_paused_peer(schednicd, sngen, spawn, vufront_bin, sn_tmpdir):
    """(a) 64-segment chains to a paused peer."""
    ifname = f"snq{os.getpid() % 100000}a"
    d = start_daemon(schednicd, sn_tmpdir, ifname, {})
    gen = victim_gen(sngen, d)
    sink = sngen([d.vhost_path("p")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    sink.wait("ready")
    for n in ("vs", "vd", "p"):
        d.wait_port_state(n, "up")
    gen.go("learn")
    sink.go("learn")
    wait_settled(d, lambda t: t["vd"]["rx_packets"] >= 1 and t["p"]["rx_packets"] >= 1)
    feeder = TapFeeder(ifname, HOSTILE_MAC)
    alone, _, _ = victim_phase(d, gen, 0)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        vu = spawn([vufront_bin, "--socket", d.vhost_path("h"), "--scenario", "flood64",
                    "--dst", peer_mac(SINK_MAC_BASE), "--timeout", "8"], name="vufront",
                   stdout=subprocess.PIPE)
        feeder.start()
        wait_for(lambda: quota(port_table(d.stats()), "h")["hits"] > 0,
                 "the hostile port at its mbuf budget", d=d, timeout=20)
        attacked, t0, t1 = victim_phase(d, gen, 1)
        h = t1["h"]
    finally:
        feeder.close()
        os.kill(sink.proc.pid, signal.SIGCONT)
    no_mbuf, up_nombuf = report("chains to a paused peer", alone, attacked, t0, t1, h)
    q = h["quota"]["mbufs"]
    assert q["hits"] > 0 and q["used"] <= q["limit"], q
    # the rest waited in its ring: it was not polled at its budget
    assert h["completion"]["quota_mbufs"] > 0, h["completion"]
    check_victim(gen, alone, attacked, no_mbuf, up_nombuf)
    assert vu.wait(30) == 0, vu.log_path.read_text()[-2000:]
    # the device stop completed every held chain: all its mbufs are back
    wait_for(lambda: quota(port_table(d.stats()), "h")["used"] == 0,
             "the hostile port's mbufs back", d=d)


@pytest.mark.accuracy
def test_flood_into_shaped_class(schednicd, sngen, sn_tmpdir):
    """(b) an opted-in guest floods a 1 Mbit/s class with horizon clamp."""
    ifname = f"snq{os.getpid() % 100000}b"
    policy = {"ports": {"h": {"classes": [{"name": "slow", "proto": "udp",
                                           "rate_bps": 1_000_000, "scope": "class",
                                           "horizon": "clamp"}],
                              "quota": {"mbufs": HOSTILE_MBUFS, "held": 1024}}}}
    d = start_daemon(schednicd, sn_tmpdir, ifname, {}, policy=policy)
    # the policy's budget, not the auto one, is in force
    assert quota(port_table(d.stats()), "h")["limit"] == HOSTILE_MBUFS
    gen = victim_gen(sngen, d)
    hostile_mac = peer_mac(SINK_MAC_BASE)
    hostile = sngen([d.vhost_path("h")], "--cpu", "1", "--marker", "--flow",
                    f"src=0,dst={UPLINK_HOST},count=1000000,phase=0,"
                    "udp=10.0.0.1:1000-10.0.0.2:2000", mac_base=SINK_MAC_BASE)
    hostile.wait("ready")
    for n in ("vs", "vd", "h"):
        d.wait_port_state(n, "up")
    gen.go("learn")
    hostile.go("learn")
    feeder = TapFeeder(ifname, hostile_mac)
    feeder.send(1)   # the uplink host's MAC is learned on the uplink
    wait_settled(d, lambda t: t["vd"]["rx_packets"] >= 1 and t["uplink"]["rx_packets"] >= 1)
    alone, _, _ = victim_phase(d, gen, 0)
    try:
        (hostile.sync / "go-0").touch()   # floods until stopped
        feeder.start()
        wait_for(lambda: quota(port_table(d.stats()), "h")["hits"] > 0,
                 "the hostile port at its mbuf budget", d=d, timeout=20)
        attacked, t0, t1 = victim_phase(d, gen, 1)
        h = t1["h"]
    finally:
        feeder.close()
    no_mbuf, up_nombuf = report("flood into a shaped class", alone, attacked, t0, t1, h)
    q = h["quota"]["mbufs"]
    assert q["hits"] > 0 and q["used"] <= q["limit"], q
    assert h["completion"]["quota_mbufs"] > 0, h["completion"]
    check_victim(gen, alone, attacked, no_mbuf, up_nombuf)
    d.rpc("policy.del", {"port": "h"})    # its held frames leave now
    hostile.proc.send_signal(signal.SIGTERM)
    hostile.proc.wait(30)
    wait_for(lambda: quota(port_table(d.stats()), "h")["used"] == 0,
             "the hostile port's mbufs back", d=d, timeout=30)


@pytest.mark.functional
def test_held_cap_bounds_an_opted_in_guest(schednicd, sngen, sn_tmpdir):
    """An opted-in guest with max_hold_us 0 (no time limit) sends to a
    paused peer: once the peer's RX ring is full its frames would wait in
    the switch's backlog with their descriptors held; quota.held (128 from
    its policy entry) is what bounds them. Its queue is then not polled
    (quota_held rises) and, once the peer drains, every frame arrives:
    backpressure, no drop."""
    held, n = 128, 2000
    ports = [{"name": "p", "type": "vhost-user", "path": str(sn_tmpdir / "p.sock"),
              "mode": "server"},
             {"name": "h", "type": "vhost-user", "path": str(sn_tmpdir / "h.sock"),
              "mode": "server", "completion": "deferred", "max_hold_us": 0}]
    d = schednicd(ports=ports, policy={"ports": {"h": {"quota": {"held": held}}}})
    sink = sngen([d.vhost_path("p")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    gen = sngen([d.vhost_path("h")], "--marker",
                "--flow", f"src=0,dst={peer_mac(SINK_MAC_BASE)},count={n},phase=0")
    sink.wait("ready")
    gen.wait("ready")
    for name in ("p", "h"):
        d.wait_port_state(name, "up")
    sink.go("learn")
    gen.go("learn")
    wait_settled(d, lambda t: t["p"]["rx_packets"] == 1 and t["h"]["rx_packets"] == 1)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        (gen.sync / "go-0").touch()
        t = wait_for(lambda: (lambda t: t if t["h"]["quota"]["held"]["hits"] > 0 else None)(
            port_table(d.stats())), "the hostile queue at its held cap", d=d)
        samples = [port_table(d.stats())["h"] for _ in range(20)]
        most = max(s["completion"]["held_now"] for s in samples)
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    q = t["h"]["quota"]["held"]
    print(f"\nheld cap {held}: most held {most}, quota.held {q}, "
          f"completion.quota_held {samples[-1]['completion']['quota_held']}")
    assert q["limit"] == held and 0 < most <= held, (q, most)
    assert samples[-1]["completion"]["quota_held"] > 0
    t = wait_settled(d, lambda t: t["p"]["tx_packets"] == 1 + n
                     and t["h"]["completion"]["held_now"] == 0, timeout=60)
    c = t["h"]["completion"]
    assert c["completed"] == c["popped"] == 1 + n and c["hold_timeouts"] == 0, c
    assert t["p"]["drops"]["ring_full"] == 0 and t["h"]["quota"]["mbufs"]["used"] == 0, t



@pytest.mark.functional
def test_port_add_refused_when_its_reserve_does_not_fit(schednicd, sn_tmpdir):
    """port.add of a port whose mbuf reserve for its queues (two bursts
    each) does not fit beside the reserves in force fails with a resource
    error naming quota.mbufs, and adds nothing; a port whose reserve fits
    is added with it."""
    d = schednicd(ports=["vm0", "vm1"], datapath={"mbufs": 1400, "max_ports": 4})
    per_queue = d.port_stats("vm0")["quota"]["mbufs"]["reserve"]
    assert per_queue > 0
    # about 500 mbufs shared (the rest are caches and stashes): two ports
    # reserve about 125, eight queues would need about 500
    with d.client() as c:
        r = c.call_raw("port.add", {"name": "big", "path": str(sn_tmpdir / "big.sock"),
                                    "queues": 8, "completion": "deferred"})
    assert "error" in r, r
    assert r["error"]["code"] == -32002 and "quota.mbufs" in r["error"]["message"], r
    assert "big" not in port_table(d.stats())
    d.rpc("port.add", {"name": "vm2", "path": str(sn_tmpdir / "vm2.sock")})
    assert d.port_stats("vm2")["quota"]["mbufs"]["reserve"] == per_queue
