# SPDX-License-Identifier: BSD-3-Clause
"""Multiqueue vhost-user ports (VIRTIO_NET_F_MQ).

A port with "queues": N offers N queue pairs. sn-gen drives real
net_virtio_user drivers with queues=N (--queues): flow i leaves on TX queue
i mod N, and every RX queue is drained. The tests check, exactly:
- every enabled TX queue is polled: per-queue rx counters both > 0, equal to
  what sn-gen sent on each queue, summing to the port totals; in immediate
  and deferred modes, no drop, every flow in order;
- frames to a multiqueue VM are spread over its RX queues by flow hash
  (per-queue delivered counters == sn-gen's per-queue receive counts);
- a deferred multiqueue port behind a paused sink holds descriptors on both
  TX queues at once and completes every one of them after the resume;
- a port created with queues=1 does not offer MQ (see the test for what
  DPDK 22.11's virtio-user does then); the daemon survives and the port
  serves a one-queue driver; a queues=2 port serves a one-queue driver;
- "queues" is validated (config file and port.add) with a message naming
  the key.
"""
import os
import signal
import subprocess
from pathlib import Path

import pytest

from sngen import drops_total, peer_mac, port_table, wait_settled
from snlib.hostwait import RunqueueWaits

pytestmark = pytest.mark.functional

CTL = Path(__file__).resolve().parents[2] / "scripts" / "schednicctl"
N = 1500                       # frames per flow
RING_FULL_MAX = 0.02           # immediate sources: RX ring drops allowed (check_drops)
DESCHED_MS = 10                # a busy poller kept off its CPU this long: descheduled
SINK_MAC_BASE = 8
# Source MACs for the flows: several flows per direction, so that the RX
# side's flow hash has several flows to spread (checked, not assumed).
SMACS = [f"02:5a:00:00:{d:02x}:{i:02x}" for d in (1, 2) for i in range(1, 5)]


def mqport(d, name, queues=2, **kw):
    p = {"name": name, "type": "vhost-user", "path": str(d / f"{name}.sock"),
         "mode": "server", "queues": queues}
    p.update(kw)
    return p


def flows(src, dst, smacs, count=N, phase=0):
    out = []
    for m in smacs:
        out += ["--flow", f"src={src},dst={dst},count={count},smac={m},phase={phase}"]
    return out


def qsum(p, key):
    return sum(q[key] for q in p["queues"])


def delivered(p):
    """Frames that reached the port's driver or were dropped at its RX
    rings (the only drop an immediate source can suffer here)."""
    return p["tx_packets"] + p["drops"]["ring_full"]


def check_drops(p, src_deferred, total, bound=True):
    """Deferred sources: none (backpressure). Immediate sources: a full RX
    ring is a counted drop (no backpressure); on this shared 2-core machine
    a descheduled sink can lose a few, so allow < 2% (bound=False: the
    caller checks the bound), each counted on the RX queue it was meant
    for. No other cause ever."""
    assert drops_total(p) == p["drops"]["ring_full"] == qsum(p, "ring_full"), p
    if src_deferred:
        assert p["drops"]["ring_full"] == 0, p
    elif bound:
        assert p["drops"]["ring_full"] < RING_FULL_MAX * total, p


def test_queues_validated(schednicd, sn_tmpdir):
    d = schednicd(ports=[mqport(sn_tmpdir, "vm0", queues=3)])
    t = port_table(d.stats())
    assert [q["queue"] for q in t["vm0"]["queues"]] == [0, 1, 2], t["vm0"]
    assert all(q["owner"] == 0 for q in t["vm0"]["queues"])
    for bad in (0, 9, "2", 1.5):
        with d.client() as c:
            r = c.call_raw("port.add", {"name": "x1", "path": str(sn_tmpdir / "x1.sock"),
                                        "queues": bad})
        assert r["error"]["code"] == -32602 and "queues" in r["error"]["message"], r
    d.rpc("port.add", {"name": "x2", "path": str(sn_tmpdir / "x2.sock"), "queues": 8,
                       "completion": "deferred"})
    t = port_table(d.stats())
    assert len(t["x2"]["queues"]) == 8
    assert len(t["vm0"]["queues"]) == 3
    # schednicctl shows one line per queue of a multiqueue port
    out = subprocess.run([str(CTL), "-s", str(d.socket), "stats"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    assert sum(line.strip().startswith("x2 q") for line in out.splitlines()) == 8, out
    assert "vm0 q2: owner=0" in out, out
    d.rpc("port.del", {"name": "x2"})
    assert d.alive()
    for bad in (0, 9, "two"):
        b = schednicd(ports=[mqport(sn_tmpdir, "b0", queues=bad)], start=False)
        with pytest.raises(Exception) as e:
            b.start(timeout=20)
        assert "ports[0].queues" in str(e.value) + b.log_tail(), b.log_tail()


# ncore (every TX queue is owned by exactly one worker lcore): two worker
# lcores, each port's TX queues on different
# workers (vm0: q0 -> worker 0, q1 -> worker 1; vm1 the other way round),
# so every RX ring is filled by both workers at once.
NCORE_MAP = {"vm0": [0, 1], "vm1": [1, 0]}


@pytest.mark.parametrize("layout", ["1core", "ncore"])
@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_both_tx_queues_switched(schednicd, sngen, sn_tmpdir, mode, layout):
    """Both TX queues of each port switched, nothing lost inside schednic
    (every frame sn-gen sent reached its RX queues or is a counted
    ring_full drop there), per-queue counters exact; see both_queues_run.
    Immediate mode has no backpressure: a daemon and then a sink that the
    OS keeps off their CPUs let the sink's RX rings overflow (ring_full;
    753 of 6001 seen at load 3.5; see the pacing in both_queues_run). A
    run over the RING_FULL_MAX bound is run once more (fresh daemon and
    sn-gen) only if the sink or the daemon was descheduled for DESCHED_MS
    or more during it (runqueue waits; on this shared host most runs see
    hundreds of ms); else, or if the second run is over the bound too, the
    test fails: a defect that drops at the RX rings (all flows on one
    queue, a stalled delivery) fails both runs."""
    lost, total, waits = both_queues_run(schednicd, sngen, sn_tmpdir, mode, layout)
    over = max(lost.values()) >= RING_FULL_MAX * total
    print(f"\nring_full {lost} of {total} per port; runqueue waits {waits}")
    if over and max(waits["sngen_wait_ms"], waits["daemon_wait_ms"]) >= DESCHED_MS:
        first = (lost, waits)
        retry = sn_tmpdir / "retry"
        retry.mkdir()
        lost, total, waits = both_queues_run(schednicd, sngen, retry, mode, layout)
        print(f"retry (first run: ring_full {first[0]}, waits {first[1]}): ring_full {lost}, "
              f"waits {waits}")
    assert max(lost.values()) < RING_FULL_MAX * total, (lost, total, waits)


def both_queues_run(schednicd, sngen, wd, mode, layout):
    """One run of test_both_tx_queues_switched (ports' sockets in wd): every
    check but the ring_full bound asserted; returns ({port: ring_full},
    frames sent per port, runqueue waits of sn-gen and the daemon over the
    traffic phase). The daemon is stopped (a busy poller less)."""
    names = ["vm0", "vm1"]
    if layout == "ncore":
        d = schednicd(ports=[mqport(wd, n, completion=mode, workers=NCORE_MAP[n])
                             for n in names],
                      datapath={"layout": "ncore", "workers": 2}, eal={"arbiter_cpu": 1})
        listed = {p["name"]: p for p in d.rpc("port.list")["ports"]}
        st = port_table(d.stats())
        for n in names:
            assert [q["worker"] for q in listed[n]["queues"]] == NCORE_MAP[n], listed[n]
            assert [q["worker"] for q in st[n]["queues"]] == NCORE_MAP[n], st[n]
        assert len(d.stats()["arbiter"]["workers"]) == 2
    else:
        d = schednicd(ports=[mqport(wd, n, completion=mode) for n in names])
    # 4 flows each way: flows 0-3 vm0 -> vm1 (TX queues 0,1,0,1), 4-7 back.
    # Paced (--rate, all flows together): immediate mode has no
    # backpressure, a full RX ring is a drop, and several flows may hash
    # to one RX queue. What can overflow the sink's RX rings is a backlog:
    # the daemon kept off its CPU while sn-gen goes on sending fills the TX
    # rings, and the daemon then forwards them at once; if sn-gen is off its
    # CPU in turn, 3 of 4 flows hashed to one 1024-entry RX ring lose the
    # excess. At 20 k frames/s and 2048-entry rings (sn-gen's 8192 mbufs per
    # port still hold both RX rings full and as much in flight) that takes
    # a daemon stall of ~270 ms, not ~70 ms.
    # deferred: the guest opts in to long holds on every TX queue
    g = sngen([str(wd / f"{n}.sock") for n in names], "--queues", "2", "--rate", "20000",
              "--queue-size", "2048",
              *(["--marker"] if mode == "deferred" else []),
              *flows(0, 1, SMACS[:4]), *flows(1, 0, SMACS[4:]))
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    # pair 1 is enabled by the driver after pair 0 brought the port up
    wait_settled(d, lambda t: all([(q["tx_enabled"], q["rx_enabled"]) for q in t[n]["queues"]]
                                  == [(True, True), (True, True)] for n in names))
    g.go("learn")
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    w = RunqueueWaits(d.proc.pid, [g.proc.pid])
    g.go(0)
    total = 1 + 4 * N
    live = wait_settled(d, lambda t: all(t[n]["rx_packets"] == total == delivered(t[n])
                                         for n in names))
    waits = w.ms()
    r = g.finish()
    t = port_table(d.stats())
    for i, n in enumerate(names):
        p, gp = t[n], r["ports"][i]
        assert gp["queues"] == 2, gp
        check_drops(p, mode == "deferred", total, bound=False)
        # TX side (guest -> us): both queues polled, exactly what was sent.
        assert [q["rx_packets"] for q in p["queues"]] == gp["tx_by_queue"], (p["queues"], gp)
        assert all(q["rx_packets"] > 0 for q in p["queues"]), p["queues"]
        # rx_bursts = polls that took >= 1 frame, at most 32 (datapath.burst) each
        assert all(0 < q["rx_bursts"] <= q["rx_packets"] <= 32 * q["rx_bursts"]
                   for q in p["queues"]), p["queues"]
        assert qsum(p, "rx_packets") == p["rx_packets"] == gp["tx_packets"]
        assert qsum(p, "rx_bytes") == p["rx_bytes"] == gp["tx_bytes"]
        # RX side (us -> guest): flows spread by hash, totals consistent.
        assert [q["tx_packets"] for q in p["queues"]] == gp["rx_by_queue"], (p["queues"], gp)
        assert all(q["tx_packets"] > 0 for q in p["queues"]), p["queues"]
        assert qsum(p, "tx_packets") == p["tx_packets"] == gp["rx_packets"]
        assert qsum(p, "tx_bytes") == p["tx_bytes"] == gp["rx_bytes"]
        c = p["completion"]
        assert c["mode"] == mode
        qc = [q["completion"] for q in p["queues"]]
        if mode == "deferred":
            assert all(x["popped"] > 0 and x["completed"] == x["popped"]
                       and x["held_now"] == 0 for x in qc), qc
            assert [x["popped"] for x in qc] == gp["tx_by_queue"], (qc, gp)
            assert sum(x["popped"] for x in qc) == c["popped"] == total, c
            assert sum(x["completed"] for x in qc) == c["completed"]
            assert c["held_now"] == 0 and not any(c["vring_errors"].values()), c
            # the opt-in is per TX queue; the port is "deferred" when all are
            assert all(x["marked"] == x["popped"] and x["unmarked"] == 0 for x in qc), qc
            assert c["marked"] == sum(x["marked"] for x in qc) == total, c
            # while connected (the opt-in ends with the connection)
            lq = [q["completion"] for q in live[n]["queues"]]
            assert all(x["opted_in"] and not x["opted_out"] for x in lq), lq
            assert live[n]["completion_mode"] == "deferred", live[n]
            assert p["completion_mode"] == "immediate", p
        else:
            assert c["popped"] == 0 and all(x["popped"] == 0 for x in qc), c
    lost = sum(t[n]["drops"]["ring_full"] for n in names)
    assert sum(f["rx"] for f in r["flows"]) + lost == 8 * N
    for f in r["flows"]:
        # one flow, one RX queue: still in order after the switch
        assert f["tx"] == f["count"], f
        assert f["rx"] == f["count"] or mode == "immediate", f
        assert f["rx_ooo"] == 0 and f["rx_bad"] == 0, f
    d.stop()
    return {n: t[n]["drops"]["ring_full"] for n in names}, total, waits


def test_deferred_mq_paused_sink_holds_on_both_queues(schednicd, sngen, sn_tmpdir):
    d = schednicd(ports=[mqport(sn_tmpdir, "vm0", completion="deferred"),
                         mqport(sn_tmpdir, "vm1", queues=1)])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    # 2 x 950 frames: what vm1's ring does not take fits vm0's backlog
    # quota (960 of vm1's 1024-frame backlog), so every frame waits
    gen = sngen([d.vhost_path("vm0")], "--queues", "2", "--marker",  # long holds: opted in
                *flows(0, peer_mac(SINK_MAC_BASE), SMACS[:2], count=950))
    sink.wait("ready")
    gen.wait("ready")
    for n in ("vm0", "vm1"):
        d.wait_port_state(n, "up")
    sink.go("learn")
    gen.go("learn")
    t0 = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 and t["vm1"]["rx_packets"] == 1)
    os.kill(sink.proc.pid, signal.SIGSTOP)
    try:
        gen.go(0, timeout=90)
        t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + 1900, timeout=90)
        qc = [q["completion"] for q in t["vm0"]["queues"]]
        held = [x["held_now"] for x in qc]
        assert all(h > 0 for h in held), qc        # both TX queues hold descriptors
        assert sum(held) == t["vm0"]["completion"]["held_now"]
        delivered = t["vm1"]["tx_packets"] - t0["vm1"]["tx_packets"]
        assert delivered + sum(held) == 1900, (delivered, held)
    finally:
        os.kill(sink.proc.pid, signal.SIGCONT)
    t = wait_settled(d, lambda t: t["vm0"]["completion"]["held_now"] == 0
                     and t["vm1"]["tx_packets"] == t0["vm1"]["tx_packets"] + 1900)
    assert drops_total(t["vm1"]) == 0 and drops_total(t["vm0"]) == 0, (t["vm0"], t["vm1"])
    for q in t["vm0"]["queues"]:
        x = q["completion"]
        assert x["held_now"] == 0 and x["completed"] == x["popped"] > 0, x
        assert x["held_max"] > 0 and x["forced"] == 0 and x["hold_timeouts"] == 0, x
    gen.finish()


@pytest.mark.parametrize("mode", ["immediate", "deferred"])
def test_single_queue_port_does_not_offer_mq(schednicd, sngen, sn_tmpdir, mode):
    """queues=1: MQ is not offered, so a driver asking for two pairs is
    limited to one (QEMU: tests/vm/test_vm_multiqueue.py, which forwards on
    one pair). DPDK 22.11's virtio-user cannot fall back: it still sets up
    vrings for the pairs it was configured with (vring 3 with size 0), which
    the vhost library refuses (SET_VRING_NUM fails, connection closed). The
    daemon must survive that and the same port then serves a one-queue
    driver; a queues=2 port next to it is unaffected."""
    d = schednicd(ports=[mqport(sn_tmpdir, "vm0", queues=1, completion=mode),
                         mqport(sn_tmpdir, "vm1", queues=2)])
    bad = sngen([d.vhost_path("vm0")], "--queues", "2", "--flow",
                "src=0,dst=02:99:00:00:00:09,count=0", "--connect-timeout", "3")
    try:
        bad.wait("ready", timeout=15)
        # A virtio-user that falls back to one pair: must report it.
        assert bad.finish()["ports"][0]["queues"] == 1
    except RuntimeError:
        pass                                  # refused: the 22.11 virtio-user case
    assert d.alive()
    g = sngen([d.vhost_path(n) for n in ("vm0", "vm1")], "--rate", "40000",
              *(["--marker"] if mode == "deferred" else []),
              *flows(0, 1, SMACS[:2]), *flows(1, 0, SMACS[4:6]))
    g.wait("ready")
    for n in ("vm0", "vm1"):
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in ("vm0", "vm1")))
    g.go(0)
    t = wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 + 2 * N == delivered(t[n])
                                      for n in ("vm0", "vm1")))
    r = g.finish()
    assert len(t["vm0"]["queues"]) == 1 and t["vm0"]["queues"][0]["rx_packets"] == 1 + 2 * N
    # vm1 (queues=2) with a one-queue driver: only pair 0 enabled and used
    assert [q["tx_enabled"] for q in t["vm1"]["queues"]] == [True, False], t["vm1"]["queues"]
    assert t["vm1"]["queues"][0]["rx_packets"] == 1 + 2 * N
    # vm1 -> vm0 frames come from an immediate port (vm1); vm0 -> vm1 from vm0
    check_drops(t["vm0"], False, 2 * N)
    check_drops(t["vm1"], mode == "deferred", 2 * N)
    lost = sum(t[n]["drops"]["ring_full"] for n in ("vm0", "vm1"))
    assert sum(f["rx"] for f in r["flows"]) + lost == 4 * N
    for f in r["flows"]:
        assert f["tx"] == f["count"] and f["rx_ooo"] == 0, f


def test_deferred_mq_unmarked_guest_opted_out_per_queue(schednicd, sngen, sn_tmpdir):
    """A stock (unmarked) multiqueue guest on a deferred port: each TX
    queue that carries its frames opts out on its own (queues[].completion
    opted_out, unmarked), the port totals are the sums, completion_mode
    stays "immediate" and frames are held at most unmarked_max_hold_us
    (delivered or dropped as hold_timeouts, nothing lost otherwise)."""
    d = schednicd(ports=[mqport(sn_tmpdir, "vm0", completion="deferred",
                                max_hold_us=5_000_000, unmarked_max_hold_us=1000),
                         mqport(sn_tmpdir, "vm1", queues=1)])
    sink = sngen([d.vhost_path("vm1")], "--flow", "src=0,dst=02:99:00:00:00:09,count=0",
                 mac_base=SINK_MAC_BASE)
    gen = sngen([d.vhost_path("vm0")], "--queues", "2", "--rate", "20000",
                *flows(0, peer_mac(SINK_MAC_BASE), SMACS[:2], count=300))
    sink.wait("ready")
    gen.wait("ready")
    for n in ("vm0", "vm1"):
        d.wait_port_state(n, "up")
    sink.go("learn")
    gen.go("learn")
    wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 and t["vm1"]["rx_packets"] == 1)
    gen.go(0)
    # every frame of vm0 (learn + 600) delivered to vm1 or dropped after
    # the short hold
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + 600
                     and t["vm0"]["completion"]["held_now"] == 0
                     and t["vm1"]["tx_packets"] + t["vm0"]["completion"]["hold_timeouts"]
                     == 1 + 600)
    r = gen.finish()
    p = t["vm0"]
    qc = [q["completion"] for q in p["queues"]]
    assert [x["popped"] for x in qc] == r["ports"][0]["tx_by_queue"], (qc, r["ports"][0])
    assert all(x["popped"] > 0 and x["unmarked"] == x["popped"] and x["marked"] == 0
               and x["opted_out"] and not x["opted_in"] for x in qc), qc
    c = p["completion"]
    assert c["unmarked"] == sum(x["unmarked"] for x in qc) == 1 + 600, c
    assert c["hold_timeouts"] == sum(x["hold_timeouts"] for x in qc), c
    assert p["completion_mode"] == "immediate", p
    listed = {x["name"]: x for x in d.rpc("port.list")["ports"]}["vm0"]
    assert listed["completion_mode"] == "immediate", listed
    assert c["popped"] == c["completed"] == 1 + 600, c
    sink.finish()


def test_driver_with_more_queues_than_configured(schednicd, sngen, sn_tmpdir):
    """DPDK 22.11 cannot announce fewer than its own maximum of queue pairs,
    so a driver may enable more pairs than "queues": the port serves pairs
    [0, queues) only and logs the others; flows on served queues go through."""
    names = ["vm0", "vm1"]
    d = schednicd(ports=[mqport(sn_tmpdir, n, queues=2) for n in names])
    # 4 pairs per driver; flows 0 and 1 (vm0 -> vm1) leave on TX queues 0, 1
    g = sngen([d.vhost_path(n) for n in names], "--queues", "4", "--rate", "40000",
              *flows(0, 1, SMACS[:2]))
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    assert "beyond queues=2: not served" in d.log_tail(100000), d.log_tail(60)
    g.go("learn")
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    g.go(0)
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + 2 * N == delivered(t["vm1"]))
    r = g.finish()
    assert r["ports"][0]["queues"] == 4
    assert len(t["vm0"]["queues"]) == 2
    assert [q["rx_packets"] for q in t["vm0"]["queues"]] == r["ports"][0]["tx_by_queue"][:2]
    # delivered to vm1 only on the RX queues it serves
    assert r["ports"][1]["rx_by_queue"][2:] == [0, 0], r["ports"][1]
    check_drops(t["vm1"], False, 2 * N)
    assert sum(f["rx"] for f in r["flows"]) + t["vm1"]["drops"]["ring_full"] == 2 * N
    for f in r["flows"]:
        assert f["tx"] == f["count"] and f["rx_ooo"] == 0, f
    assert d.alive()
