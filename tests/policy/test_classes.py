"""Flow classes and aggregates (issue 6 deliverable 3): policy model,
classification in the worker, per-flow / per-class pacing, aggregates split
by the NBA.

Traffic: sn-gen virtio-user peers send IPv4/UDP frames (--flow ...,udp=)
to an unknown MAC, so the switch floods them to the uplink, a net_null
ethdev. Rates come from the daemon's per-class counters over windows timed
by the worker's own clock (arbiter.clock_ns); offered load always exceeds
the limit, so the delivered rate is set by the shaper alone.
"""
import time

import pytest

from test_policy import FRAME, SINK_MAC, UPLINK, pstats

CLASSES_OK = {
    "aggregates": {"agg1": {"rate_bps": 100_000_000, "burst_bytes": 1500, "update_ms": 50}},
    "ports": {"vm0": {"rate_bps": 0, "classes": [
        {"name": "web", "proto": "tcp", "dst": "10.0.0.0/8", "dst_port": [80, 443],
         "rate_bps": 5_000_000, "scope": "flow", "horizon": "clamp"},
        {"proto": "udp", "src": "192.0.2.7", "src_port": 53, "rate_bps": 1_000_000,
         "burst_bytes": 3000, "scope": "class", "aggregate": "agg1"},
        {"name": "any-icmp", "proto": "icmp", "aggregate": "agg1"},
        {"proto": 47},
    ]}},
}

CLASSES_BAD = [
    ({"proto": "sctp"}, "policy.ports.vm0.classes[0].proto"),
    ({"dst": "10.0.0.1/33"}, "policy.ports.vm0.classes[0].dst: bad prefix length"),
    ({"dst": "10.0.0.0.1"}, "policy.ports.vm0.classes[0].dst: bad prefix"),
    ({"src": "10.0.0.1/8"}, "policy.ports.vm0.classes[0].src: bad prefix (host bits"),
    ({"proto": "udp", "dst_port": [90, 80]}, "policy.ports.vm0.classes[0].dst_port"),
    ({"proto": "udp", "src_port": 70000}, "policy.ports.vm0.classes[0].src_port"),
    ({"dst_port": 80}, "policy.ports.vm0.classes[0]: src_port/dst_port need"),
    ({"rate_bps": 10}, "policy.ports.vm0.classes[0].rate_bps"),
    ({"scope": "vm"}, "policy.ports.vm0.classes[0].scope"),
    ({"horizon": "wait"}, "policy.ports.vm0.classes[0].horizon"),
    ({"aggregate": "nope"}, "policy.ports.vm0.classes[0].aggregate"),
    ({"name": "bad name"}, "policy.ports.vm0.classes[0].name"),
    ({"colour": 1}, "policy.ports.vm0.classes[0].colour: unknown key"),
]


def test_class_policy_round_trip_and_validation(schednicd):
    d = schednicd(ports=["vm0"], policy=CLASSES_OK)
    got = d.rpc("policy.get")
    assert got["aggregates"] == CLASSES_OK["aggregates"]
    cl = got["ports"]["vm0"]["classes"]
    assert [c["name"] for c in cl] == ["web", "1", "any-icmp", "3"]
    assert cl[0] == {"name": "web", "proto": "tcp", "dst": "10.0.0.0/8", "dst_port": [80, 443],
                     "rate_bps": 5_000_000, "burst_bytes": 0, "scope": "flow",
                     "horizon": "clamp"}
    assert cl[1]["src"] == "192.0.2.7/32" and cl[1]["src_port"] == [53, 53]
    assert cl[1]["aggregate"] == "agg1" and cl[1]["scope"] == "class"
    assert cl[3] == {"name": "3", "proto": 47, "rate_bps": 0, "burst_bytes": 0,
                     "scope": "flow", "horizon": "drop"}
    # policy.get's output is a valid policy.set input that reads back equal.
    body = {k: v for k, v in got.items() if k != "generation"}
    d.rpc("policy.set", {"policy": body})
    again = d.rpc("policy.get")
    assert {k: v for k, v in again.items() if k != "generation"} == body

    before = d.rpc("policy.get")
    bad_cases = [({"aggregates": CLASSES_OK["aggregates"],
                   "ports": {"vm1": {"weight": 2}, "vm0": {"classes": [{"proto": "udp"}, c]}}},
                  f.replace("classes[0]", "classes[1]")) for c, f in CLASSES_BAD]
    bad_cases += [
        ({"ports": {"vm0": {"classes": [{}] * 17}}}, "policy.ports.vm0.classes: at most 16"),
        ({"ports": {"vm0": {"classes": {}}}}, "policy.ports.vm0.classes: must be an array"),
        ({"ports": {"vm0": {"classes": [{"name": "a"}, {"name": "a"}]}}},
         "policy.ports.vm0.classes[1].name"),
        ({"aggregates": {"a": {}}}, "policy.aggregates.a.rate_bps: required"),
        ({"aggregates": {"a": {"rate_bps": 1_000_000, "update_ms": 0}}},
         "policy.aggregates.a.update_ms"),
        ({"aggregates": {"a": {"rate_bps": 1_000_000, "x": 0}}}, "policy.aggregates.a.x"),
        ({"aggregates": {f"a{i}": {"rate_bps": 10**6} for i in range(17)}},
         "policy.aggregates: at most 16"),
    ]
    for bad, field in bad_cases:
        with d.client() as c:
            r = c.call_raw("policy.set", {"policy": bad})
        assert r["error"]["code"] == -32602 and field in r["error"]["message"], (bad, r)
        assert d.rpc("policy.get") == before, bad
    assert d.alive()
