# SPDX-License-Identifier: BSD-3-Clause
"""An immediate port's frames that wait in its policy's queues hold
mbufs of the shared pool: they are charged to its mbuf quota
(doc/isolation.md, "mbufs"), so a port that floods a slowly paced class
stops at its quota (its frames then wait in its own TX ring) and a victim
port's measured flow keeps its rate and every mbuf it needs.

The attacker (vm1, immediate completion) floods a class paced at 1 Mbit/s
with horizon "clamp" (each frame beyond the horizon waits in the wheel's
last slot) and a wheel quota as large as the pool, so only its mbuf
quota bounds what it holds; the victim (vm0, immediate) runs the paced
flows of tests/attack/test_quota_pipeline.py, measured alone and under
attack in the same daemon.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_quota_pipeline import (FLOW_BURST, FLOW_RATE, PHASE0_S, PHASE1_S, SINK_MAC,  # noqa: E402
                                 SIZE, TOL, UPLINK, VICTIM_PPS, assert_victim_kept_its_rate,
                                 measure_alone_then_attacked, policy_port, port_table, victim_flows)

pytestmark = [pytest.mark.attack]

MBUFS = 2047
# The attacker's class: 6 frames/s of 200 bytes, so the frames it holds
# stay held for the whole test.
ATTACK_RATE = 10_000


def mbuf_quota(st, name):
    return port_table(st)[name]["quota"]["mbufs"]


def attack_ramped(st):
    """The attacker holds what it can: its quota refuses it, or (no quota
    in force) its frames in the wheel passed its quota's limit."""
    q = mbuf_quota(st, "vm1")
    return q["hits"] or policy_port(st, "vm1")["wheel_depth"] > q["limit"]


@pytest.mark.accuracy
def test_immediate_flood_stops_at_its_mbuf_quota(schednicd, sngen):
    """Pool of 2047 mbufs, 9 port slots (max_ports 8): the mbuf quota
    shares 765 of them (the rest is the uplink's RX share and the
    caches), the attacker's cap is 194. Its clamped class would hold
    ~2600 frames (a horizon, 262 ms, of its 10000 frames/s), more than
    the pool, and its wheel quota is the pool; its mbuf quota stops it at
    194: its quota.mbufs hits rise, the victim loses no frame for want of
    an mbuf and keeps its rate. (With its frames not charged the attacker
    held 2016 of the 2047 mbufs here.)"""
    pol = {"ports": {
        "vm0": {"classes": [{"name": "pf", "proto": "udp", "rate_bps": FLOW_RATE,
                             "burst_bytes": FLOW_BURST}]},
        "vm1": {"quota": {"wheel": MBUFS},
                "classes": [{"name": "pf", "proto": "udp", "rate_bps": ATTACK_RATE,
                             "scope": "class", "horizon": "clamp"}]}}}
    d = schednicd(ports=["vm0", "vm1"], uplink=UPLINK, policy=pol,
                  datapath={"mbufs": MBUFS, "mbuf_cache": 32, "max_ports": 8})
    victim = sngen([d.vhost_path("vm0")], "--no-learn", "--size", str(SIZE), "--burst", "1",
                   "--rate", str(VICTIM_PPS), *victim_flows(0, 4000, PHASE0_S),
                   *victim_flows(1, 5000, PHASE1_S))
    attacker = sngen([d.vhost_path("vm1")], "--no-learn", "--size", "200", "--rate", "10000",
                     "--flow", f"src=0,dst={SINK_MAC},count={10000 * 30},"
                               "udp=10.9.0.1:1024-10.2.0.1:53,smac=02:53:47:00:02:01",
                     mac_base=1)
    victim.wait("ready")
    attacker.wait("ready")
    alone, attacked, dv, st = measure_alone_then_attacked(
        d, victim, attacker, attack_ramped)
    att, aq, vq = policy_port(st, "vm1"), mbuf_quota(st, "vm1"), mbuf_quota(st, "vm0")
    print(f"immediate flood: victim {alone / 1e6:.4f} Mbit/s alone, {attacked / 1e6:.4f} "
          f"attacked ({(attacked - alone) / alone:+.2%}); attacker wheel_depth "
          f"{att['wheel_depth']}, quota.mbufs {aq}; victim quota.mbufs {vq}; "
          f"mempool {st['mempool']}; victim deltas {dv}")
    assert dv["port.no_mbuf"] == 0, dv
    assert not any(dv.values()), dv
    assert_victim_kept_its_rate(alone, attacked)
    assert aq["hits"] > 0 and aq["used"] <= aq["limit"], aq
    assert att["wheel_depth"] <= aq["limit"], att
    assert d.alive()
