# SPDX-License-Identifier: BSD-3-Clause
"""A new NBA grant applies to the frames already queued, for every class
an aggregate paces (a live change is in force within 100 ms, plus one NBA
period for aggregates; sn_pl_restamp_aggs in pipeline/sn_pl_apply.c).

A frame's release time is the max over every policy it crosses (Carousel
§5.1.1): its port limit, its class / flow pacing and its worker's share of
the class's aggregate. When the NBA moves the share's grant, the frames
the share already stamped into the wheel (up to the 262 ms horizon ahead
when the share is saturated) must follow the new grant at once, also for
a class with its own pacing and on a port with a limit (which would
otherwise keep the old grant's stamps for up to a horizon): the
aggregate's part of each stamp is rescaled and the max over the frame's policies taken again
(capped at the horizon: beyond it the frame is dropped as the share would
drop it, never released earlier than now, FIFO per flow).

Setup (one worker, layout 1core): vm0 sends 4 UDP flows, 1000 B frames,
30 Mbit/s in all, through one class of aggregate "agg" (20 Mbit/s,
update_ms 10), the class paced at 40 Mbit/s per flow ("class" case) or
the port limited to 40 Mbit/s ("port" case), or neither ("alone": the
class is paced by the aggregate only): the aggregate share binds.
The aggregate is cut to 10 Mbit/s live; from the moment the worker holds
the new grant (its worker0_grant_bps, read with the shaper's counters in
one stats.get) the port's uplink rate over the next 30-230 ms must be the
new 10 Mbit/s (within 5 %), not ~20 Mbit/s as with the queued frames
keeping their stamps. Nothing is lost inside schednic but
the share's own "horizon" drops.

Also here: a restamp puts a "clamp" class's frames back clamped (they
were dropped), and every flow's frames leave in order across restamps
(net_pcap uplink, sequence numbers in sn-gen's payload).
"""
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

FRAME = 1000
OFFERED = 30_000_000
AGG_OLD, AGG_NEW = 20_000_000, 10_000_000
OWN = 40_000_000                    # the class's / port's own rate: never binds
FLOWS = 4
WINDOW = (0.03, 0.23)               # s after the worker took the new grant (< horizon 0.262)


def policy(case, agg_rate):
    cls = {"name": "c", "proto": "udp", "aggregate": "agg"}
    port = {"classes": [cls]}
    if case == "class":
        cls.update({"rate_bps": OWN, "scope": "flow"})
    elif case == "port":
        port["rate_bps"] = OWN
    return {"aggregates": {"agg": {"rate_bps": agg_rate, "update_ms": 10}},
            "ports": {"vm0": port}}


def samples(s, seconds):
    """[(worker clock s, uplink bytes, offered bytes, grant bit/s, policy)]:
    exact pairs (clock_consistent) read as fast as stats.get answers."""
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        st = s.stats()
        q = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]
        g = st["aggregates"]["agg"]["worker0_grant_bps"]
        if q["clock_consistent"] and (not out or q["clock_ns"] / 1e9 > out[-1][0]):
            out.append((q["clock_ns"] / 1e9, q["uplink_bytes"], q["offered_bytes"], g, q))
        time.sleep(0.005)
    return out


def after_grant(pp, grant):
    """Rate (bit/s) of uplink and offered bytes over WINDOW after the first
    pair in which the worker holds `grant`; None if the pairs do not cover
    most of the window."""
    tg = next((x[0] for x in pp if x[3] == grant), None)
    if tg is None:
        return None
    t0, t1 = tg + WINDOW[0], tg + WINDOW[1]
    a = next((x for x in pp if x[0] >= t0), None)
    b = [x for x in pp if x[0] <= t1]
    if a is None or not b or b[-1][0] - a[0] < 0.6 * (t1 - t0):
        return None
    b = b[-1]
    dt = b[0] - a[0]
    return {"rate": (b[1] - a[1]) * 8 / dt, "offered": (b[2] - a[2]) * 8 / dt,
            "span_s": round(dt, 3), "tg_pair_ms": round((a[0] - tg) * 1e3, 1)}


def no_loss(before, after, allow=("horizon",)):
    return {k: after["drops"][k] - v for k, v in before["drops"].items()
            if k not in allow and after["drops"][k] != v}


@pytest.mark.accuracy
@pytest.mark.parametrize("case", ["class", "port", "alone"])
def test_grant_cut_restamps_queued_frames_of_every_paced_class(build_dir, case):
    flows = [(0, 10**10, f"udp=10.0.0.1:{1000 + i}-10.0.9.9:2000") for i in range(FLOWS)]
    pps = int(OFFERED / (8 * FRAME))
    with conf.Schednic(build_dir, ["vm0"], policy(case, AGG_OLD), FRAME, pps,
                       flows=flows) as s:
        s.wait_flowing()
        time.sleep(1.5)                 # the share's backlog reaches the horizon
        tries = []
        for _ in range(4):
            q0 = s.port_policy()["vm0"]
            s.rpc("policy.set", {"policy": policy(case, AGG_NEW)})
            pp = samples(s, 0.8)
            m = after_grant(pp, AGG_NEW)
            tries.append(m)
            # a valid window: exact pairs over it, and the generator kept
            # offering more than the old grant (not starved of its CPU)
            if m and m["offered"] > AGG_OLD:
                break
            s.rpc("policy.set", {"policy": policy(case, AGG_OLD)})
            time.sleep(1.0)
        else:
            pytest.fail(f"no grant change with exact pairs and a fed generator in 4 tries: "
                        f"{tries}")
        q1 = pp[-1][4]
    print(f"\n{case}: {m['rate'] / 1e6:.3f} Mbit/s over {WINDOW} s after the new grant "
          f"({AGG_NEW / 1e6:.0f} wanted, {AGG_OLD / 1e6:.0f} before); tries {tries}; "
          f"drops {no_loss(q0, q1, allow=())}")
    assert abs(m["rate"] - AGG_NEW) / AGG_NEW < 0.05, tries
    assert no_loss(q0, q1) == {}, (q0["drops"], q1["drops"])


@pytest.mark.functional
def test_restamp_keeps_clamp_class_frames_queued(build_dir):
    """A "clamp" class's frames beyond the horizon are queued at the
    horizon (counted "clamped"), not dropped (Carousel §5.1.2). A restamp
    takes every frame out of the wheel and puts it back, clamped again: put
    back with the "drop" policy, another port's rate change would drop the
    clamp class's queued frames as "horizon" (its backlog is all beyond
    the horizon when it is offered twice its pacing rate). vm0 loses
    nothing when vm1's limit changes."""
    pol = {"ports": {"vm0": {"classes": [{"name": "c", "proto": "udp", "rate_bps": 5_000_000,
                                          "scope": "class", "horizon": "clamp"}]},
                     "vm1": {"rate_bps": 10_000_000}}}
    flows = [(0, 10**10, "udp=10.0.0.1:1000-10.0.9.9:2000"), 1]
    pps = 2 * int(10_000_000 / (8 * FRAME))          # 10 Mbit/s from each port
    with conf.Schednic(build_dir, ["vm0", "vm1"], pol, FRAME, pps, flows=flows) as s:
        s.wait_flowing()
        time.sleep(1.0)
        got = []
        for rate in (5_000_000, 10_000_000, 5_000_000):
            # The premise: vm0 has frames queued when vm1 changes. A
            # snapshot can find its wheel empty if sn-gen was off its CPU
            # for a horizon (P3's run at load 3-4, once): read again, up
            # to 1 s; the assertion below still fails if it never queues.
            for _ in range(20):
                a = s.port_policy()
                if a["vm0"]["wheel_depth"] > 0:
                    break
                time.sleep(0.05)
            s.rpc("policy.set", {"policy": {**pol, "ports": {**pol["ports"],
                                                             "vm1": {"rate_bps": rate}}}})
            time.sleep(0.5)
            b = s.port_policy()
            got.append({"vm0_horizon": b["vm0"]["drops"]["horizon"] - a["vm0"]["drops"]["horizon"],
                        "vm0_lost": no_loss(a["vm0"], b["vm0"], allow=()),
                        "vm0_clamped": b["vm0"]["classes"][0]["clamped"] -
                        a["vm0"]["classes"][0]["clamped"],
                        "vm0_wheel": a["vm0"]["wheel_depth"],     # when vm1 changed
                        "vm1_rate": b["vm1"]["rate_bps"]})
    print(f"\nvm1 rate changes: {got}")
    for g in got:
        assert g["vm0_clamped"] > 0 and g["vm0_wheel"] > 0, got   # vm0 was clamping, queued
        assert g["vm0_lost"] == {}, got


PCAP_HDR = struct.Struct("<IHHiIII")
PCAP_REC = struct.Struct("<IIII")
SEQ_OFF = 100        # sn-gen payload byte i of frame seq = (seq + i) & 0xff, past the UDP header


def pcap_frames(path):
    """Frames of a pcap file (either timestamp precision)."""
    data = Path(path).read_bytes()
    magic = PCAP_HDR.unpack_from(data, 0)[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    off, out = PCAP_HDR.size, []
    while off + PCAP_REC.size <= len(data):
        incl = PCAP_REC.unpack_from(data, off)[2]
        off += PCAP_REC.size
        out.append(data[off:off + incl])
        off += incl
    return out


@pytest.mark.functional
@pytest.mark.parametrize("case", ["class", "port"])
def test_restamped_flows_stay_fifo(schednicd, sngen, sn_tmpdir, case):
    """Per flow, the frames leave in the order they arrived across grant
    cuts and raises (each restamps the wheel). The uplink is net_pcap: the
    frames' payload carries sn-gen's per-flow sequence number mod 256, so
    successive frames of a flow must differ by 1..127 (gaps: the share's
    horizon drops: < 128 in a row per flow with 32 flows, even for a burst
    of 3000 frames after a generator stall); 0 or >= 128 is a frame
    that overtook an earlier one (or a duplicate)."""
    empty, out = sn_tmpdir / "empty.pcap", sn_tmpdir / "out.pcap"
    empty.write_bytes(PCAP_HDR.pack(0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    d = schednicd(ports=["vm0"], uplink=f"net_pcap0,rx_pcap={empty},tx_pcap={out}",
                  policy=policy(case, AGG_OLD))
    nflows, pps = 32, int(OFFERED / (8 * FRAME))
    spec = []
    for i in range(nflows):
        spec += ["--flow", f"src=0,dst=02:00:00:00:00:99,count={pps * 10 // nflows},"
                           f"udp=10.0.0.1:{1000 + i}-10.0.9.9:2000"]
    g = sngen([d.vhost_path("vm0")], "--no-learn", "--size", str(FRAME), "--rate", str(pps),
              *spec)
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    (g.sync / "go-0").touch()
    time.sleep(1.5)
    u0 = d.stats()["aggregates"]["agg"]["worker0_grant_updates"]
    for rate in (AGG_NEW, AGG_OLD, AGG_NEW, AGG_OLD):
        d.rpc("policy.set", {"policy": policy(case, rate)})
        time.sleep(0.5)
    st = d.stats()
    updates = st["aggregates"]["agg"]["worker0_grant_updates"] - u0
    horizon = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]["drops"]["horizon"]
    g.finish()
    d.stop()                             # net_pcap flushes its file at close
    seqs = {}
    for f in pcap_frames(out):
        if len(f) < FRAME or f[12:14] != b"\x08\x00":
            continue
        sport = int.from_bytes(f[34:36], "big")
        seqs.setdefault(sport, []).append((f[SEQ_OFF] - SEQ_OFF) & 0xFF)
    bad = {sp: [(i, s[i - 1], s[i]) for i in range(1, len(s))
                if not 1 <= (s[i] - s[i - 1]) & 0xFF <= 127][:5]
           for sp, s in seqs.items()}
    print(f"\n{case}: {sum(map(len, seqs.values()))} frames of {len(seqs)} flows on the "
          f"uplink, {updates} grant updates, {horizon} horizon drops; out of order: "
          f"{ {sp: b for sp, b in bad.items() if b} }")
    assert len(seqs) == nflows and min(map(len, seqs.values())) > 100, seqs.keys()
    assert updates >= 4, updates          # every change reached the worker (and restamped)
    assert all(not b for b in bad.values()), bad
