# SPDX-License-Identifier: BSD-3-Clause
"""Flow classes and aggregates: policy model,
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
    ({"src": "2001:db8::1/32"}, "policy.ports.vm0.classes[0].src: bad prefix (host bits"),
    ({"src": "10.0.0.0/8", "dst": "2001:db8::/32"},
     "policy.ports.vm0.classes[0].dst: an IPv6 prefix in a class of IPv4 src"),
    ({"family": "ipv4", "flow_label": 1}, "policy.ports.vm0.classes[0].flow_label: IPv6 only"),
    ({"flow_label": 1048576}, "policy.ports.vm0.classes[0].flow_label: must be 0..1048575"),
    ({"family": "ip"}, "policy.ports.vm0.classes[0].family"),
    ({"vlan": 4096}, "policy.ports.vm0.classes[0].vlan: must be 0..4095"),
    ({"pcp": 8}, "policy.ports.vm0.classes[0].pcp: must be 0..7"),
    ({"dscp": 64}, "policy.ports.vm0.classes[0].dscp: must be 0..63"),
]


@pytest.mark.functional
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


SIZE = 1000


def cstats(d, port):
    """(worker clock s, {class name: counters}, raw stats)."""
    t, ports, st = pstats(d)
    return t, {c["name"]: c for c in ports[port]["policy"]["classes"]}, st


def class_rate(d, port, name, want, window=2.0, tries=10, key="sent_bytes"):
    """bits/s of class `name` over a window timed by the worker's clock.

    Offered load is well above `want`, so a window is exact unless the
    generator was descheduled longer than the wheel horizon (the class then
    idles and the window reads low): such windows are measured again. A
    window ABOVE the rate (beyond one burst) is a shaper bug: fail at once."""
    got = []
    for _ in range(tries):
        ta, a, _ = cstats(d, port)
        time.sleep(window)
        tb, b, _ = cstats(d, port)
        r = (b[name][key] - a[name][key]) * 8 / (tb - ta)
        got.append((r, (b[name]["offered_bytes"] - a[name]["offered_bytes"]) * 8 / (tb - ta)))
        assert r < want * 1.01 + 2 * SIZE * 8 / (tb - ta), (name, r, want)
        if abs(r - want) / want < 0.01:
            return r
    pytest.fail(f"{port}.{name}: no window within 1 % of {want} (sent, offered): {got}")


def gen(sngen, d, port, flows, pps, seconds=60, idx=1, size=SIZE):
    """One sn-gen on `port` sending IPv4/UDP flows (SRC:SP-DST:DP each) to
    an unknown MAC (flooded to the uplink), pps frames/s in all."""
    spec = []
    per = pps * seconds // len(flows)
    for i, udp in enumerate(flows):
        spec += ["--flow", f"src=0,dst={SINK_MAC},count={per},udp={udp},"
                           f"smac=02:53:47:00:0{idx}:{i + 1:02x}"]
    g = sngen([d.vhost_path(port)], "--no-learn", "--size", str(size), "--rate", str(pps),
              *spec)
    g.wait("ready")
    return g


def go(d, names, gens):
    for n in names:
        d.wait_port_state(n, "up")
    d.wait_port_state("uplink", "up")
    for g in gens:
        (g.sync / "go-0").touch()


def wait_class(d, port, names, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, c, _ = cstats(d, port)
        if all(c.get(n, {}).get("sent_packets", 0) > 100 for n in names):
            time.sleep(0.5)       # past the start transient (wheel filling)
            return
        time.sleep(0.1)
    raise TimeoutError(f"no traffic through classes {names}: {cstats(d, port)[1]}")


@pytest.mark.accuracy
@pytest.mark.parametrize("layout", ["1core", "2core"])   # conftest.py
def test_two_classes_paced_at_their_rates_and_live_change(schednicd, sngen, layout):
    """Two flows of vm0 in classes "a" (4 Mbit/s) and "b" (12 Mbit/s), each
    offered 32 Mbit/s: each class within 1 % of its rate; a live policy.set
    halves b's rate; an invalid class is rejected and the rates stay."""
    pol = {"ports": {"vm0": {"classes": [
        {"name": "a", "proto": "udp", "dst": "10.1.0.0/16", "dst_port": 1000,
         "rate_bps": 4_000_000, "scope": "class"},
        {"name": "b", "proto": "udp", "dst_port": [2000, 2999], "rate_bps": 12_000_000,
         "scope": "class"}]}}}
    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=pol, datapath={"mbufs": 16383})
    g = gen(sngen, d, "vm0", ["10.0.0.1:5000-10.1.2.3:1000", "10.0.0.1:5001-10.9.9.9:2500"],
            pps=8000)
    go(d, ["vm0"], [g])
    wait_class(d, "vm0", ["a", "b"])
    class_rate(d, "vm0", "a", 4e6)
    class_rate(d, "vm0", "b", 12e6)
    # Port and class counters compared exactly: a snapshot the worker did
    # not change while it was read (clock_consistent, run_seq even on both
    # sides); under traffic a read inside a run may see a drop counted in
    # its class but not yet in its port (CI: 27658 vs 16435 + 11228).
    port = None
    for _ in range(200):
        _, c, st = cstats(d, "vm0")
        port = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]
        if port["clock_consistent"]:
            break
        time.sleep(0.05)
    assert port["clock_consistent"], "no consistent stats snapshot in 200 reads"
    assert c["a"]["drops"]["horizon"] > 0 and c["b"]["drops"]["horizon"] > 0, c
    assert c["a"]["flows_active"] == 0, c       # scope "class": no flow state
    assert c["a"]["offered_packets"] > c["a"]["sent_packets"], c
    assert port["drops"]["horizon"] == c["a"]["drops"]["horizon"] + c["b"]["drops"]["horizon"]

    pol["ports"]["vm0"]["classes"][1]["rate_bps"] = 6_000_000
    d.rpc("policy.set", {"policy": pol})
    time.sleep(0.3)
    class_rate(d, "vm0", "b", 6e6)
    class_rate(d, "vm0", "a", 4e6)

    bad = {"ports": {"vm0": {"classes": [pol["ports"]["vm0"]["classes"][0],
                                         {"name": "c", "dst": "10.0.0.0/33"}]}}}
    with d.client() as cl:
        r = cl.call_raw("policy.set", {"policy": bad})
    assert r["error"]["code"] == -32602
    assert "policy.ports.vm0.classes[1].dst" in r["error"]["message"], r
    assert d.rpc("policy.get")["ports"]["vm0"]["classes"][1]["rate_bps"] == 6_000_000
    class_rate(d, "vm0", "b", 6e6)
    assert d.alive()


@pytest.mark.accuracy
def test_per_flow_pacing(schednicd, sngen):
    """scope "flow": 4 flows of one class each get the per-flow rate
    (3 Mbit/s; each offered 16 Mbit/s): the class carries exactly 4 x 3
    Mbit/s (no flow can exceed its rate, so each has exactly it), with 4
    flow states. A 5th flow matching no class goes by the port entry alone
    (unshaped here): every drop of the port is one of the class's."""
    pol = {"ports": {"vm0": {"classes": [
        {"name": "pf", "proto": "udp", "src": "10.0.0.0/24", "rate_bps": 3_000_000}]}}}
    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=pol, datapath={"mbufs": 16383})
    flows = [f"10.0.0.{i + 1}:4000-10.2.0.1:53" for i in range(4)]
    g = gen(sngen, d, "vm0", flows + ["10.7.0.1:1-10.2.0.1:53"], pps=10000)
    go(d, ["vm0"], [g])
    wait_class(d, "vm0", ["pf"])
    class_rate(d, "vm0", "pf", 12e6)
    _, c, st = cstats(d, "vm0")
    assert c["pf"]["flows_active"] == 4 and c["pf"]["flows_created"] == 4, c
    assert c["pf"]["flow_table_full"] == 0
    port = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]
    assert port["offered_packets"] > c["pf"]["offered_packets"] > 0, (port, c)
    assert port["drops"]["horizon"] == c["pf"]["drops"]["horizon"] > 0, (port, c)
    assert sum(port["drops"].values()) == port["drops"]["horizon"], port
    # A per-flow rate change reaches every existing flow.
    pol["ports"]["vm0"]["classes"][0]["rate_bps"] = 2_000_000
    d.rpc("policy.set", {"policy": pol})
    time.sleep(0.3)
    class_rate(d, "vm0", "pf", 8e6)
    assert cstats(d, "vm0")[1]["pf"]["flows_created"] == 4
    assert d.alive()


@pytest.mark.accuracy
@pytest.mark.parametrize("layout", ["1core", "2core"])   # conftest.py
def test_aggregate_over_two_ports(schednicd, sngen, layout):
    """Aggregate of 100 Mbit/s over classes of vm0 and vm1 offering about
    78 and 39 Mbit/s: the total is within 1 % of 100 Mbit/s; with one
    worker the NBA's water-filling gives that worker the whole aggregate
    (its demand exceeds it: saturated) after one update period. A live
    change of the aggregate rate is in force within one period."""
    size = 1400
    pol = {"aggregates": {"agg": {"rate_bps": 100_000_000, "update_ms": 100}},
           "ports": {n: {"classes": [{"name": "bulk", "proto": "udp", "aggregate": "agg"}]}
                     for n in ("vm0", "vm1")}}
    d = schednicd(ports=["vm0", "vm1"], uplink=UPLINK, policy=pol, datapath={"mbufs": 16383})
    gens = [gen(sngen, d, n, [f"10.0.{i}.1:7-10.9.0.1:9"], pps=pps, idx=i + 1, size=size)
            for i, (n, pps) in enumerate((("vm0", 7000), ("vm1", 3500)))]
    go(d, ["vm0", "vm1"], gens)
    wait_class(d, "vm0", ["bulk"])
    time.sleep(0.3)                       # > one update period

    def agg_rate(want, tries=10):
        got = []
        for _ in range(tries):
            sa = d.stats()
            time.sleep(2.0)
            sb = d.stats()
            dt = (sb["arbiter"]["clock_ns"] - sa["arbiter"]["clock_ns"]) / 1e9
            r = (sb["aggregates"]["agg"]["sent_bytes"] -
                 sa["aggregates"]["agg"]["sent_bytes"]) * 8 / dt
            got.append(r)
            assert r < want * 1.01, got
            if abs(r - want) / want < 0.01:
                return sb
        pytest.fail(f"aggregate: no window within 1 % of {want}: {got}")

    sb = agg_rate(100e6)
    ag = sb["aggregates"]["agg"]
    by = {p["name"]: p["policy"]["classes"][0] for p in sb["ports"] if "policy" in p}
    # One stats.get reads the aggregate and the two classes one after the
    # other while the worker keeps sending: they may differ by the frames
    # released in between (a few; seen: 1 frame of 1400 B on a loaded host).
    assert abs(ag["sent_bytes"] - by["vm0"]["sent_bytes"] - by["vm1"]["sent_bytes"]) \
        <= 32 * 1400, (ag, by)
    assert by["vm0"]["sent_bytes"] > by["vm1"]["sent_bytes"] > 0, by
    # Water-filling over one worker: the whole aggregate, worker saturated.
    assert ag["nba"] == [{"worker": 0, "grant_bps": 100_000_000,
                          "demand_bps": ag["nba"][0]["demand_bps"],
                          "backlog_bytes": ag["nba"][0]["backlog_bytes"], "state": "saturated"}], ag
    assert ag["nba"][0]["demand_bps"] > 100e6, ag     # offered ~117 Mbit/s
    assert ag["worker0_grant_bps"] == 100_000_000 and ag["drops"]["horizon"] > 0, ag

    pol["aggregates"]["agg"]["rate_bps"] = 60_000_000
    d.rpc("policy.set", {"policy": pol})
    time.sleep(0.4)
    sb = agg_rate(60e6)
    assert sb["aggregates"]["agg"]["worker0_grant_bps"] == 60_000_000
    assert d.alive()


@pytest.mark.accuracy
def test_flow_table_full_falls_back_to_the_class_state(schednicd, sngen):
    """datapath.max_flows = 8: of 12 flows of a per-flow class (1 Mbit/s
    each, offered 4 Mbit/s each), at most 8 get their own state; the others
    share the class's fallback state, so the class carries (tracked + 1) x
    1 Mbit/s. A port's flow quota keeps the other port slots' reserves out
    of its reach; with max_ports 1 (2 slots with the uplink's) it is 8 / 2
    = 4 entries: the new flows beyond it are counted in the port's
    quota_flows (a full table's in the class's flow_table_full,
    test_classify.c)."""
    pol = {"ports": {"vm0": {"classes": [
        {"name": "pf", "proto": "udp", "rate_bps": 1_000_000}]}}}
    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=pol,
                  datapath={"mbufs": 16383, "max_flows": 8, "max_ports": 1})
    g = gen(sngen, d, "vm0", [f"10.0.0.{i + 1}:4000-10.2.0.1:53" for i in range(12)], pps=6000)
    go(d, ["vm0"], [g])
    wait_class(d, "vm0", ["pf"])
    _, c, st = cstats(d, "vm0")
    tracked = c["pf"]["flows_active"]
    refused = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]["quota_flows"]
    assert 1 <= tracked <= 4 and refused > 0, (c, refused)
    class_rate(d, "vm0", "pf", (tracked + 1) * 1e6)
    _, c, _ = cstats(d, "vm0")
    assert c["pf"]["flows_active"] == tracked, c
    assert d.alive()


@pytest.mark.accuracy
def test_horizon_clamp_vs_drop(schednicd, sngen):
    """Per-class beyond-horizon behaviour. Two
    classes of vm0 paced at 2 Mbit/s each, each offered 4 Mbit/s for 4 s:
    after ~0.26 s (the wheel horizon at 2 Mbit/s of excess) every new frame's
    release time lies beyond the horizon.
      - "clamp" (horizon: clamp): such frames go to the wheel's last slot and
        are counted `clamped`, never dropped; the class is charged anyway,
        so it sends more than its rate while the excess lasts (everything
        offered comes out, at most one horizon late);
      - "drop" (horizon: drop): such frames are dropped and counted
        `drops.horizon`, never clamped; the class keeps exactly its rate.
    After the generator stopped and the wheel drained, each class's
    counters add up exactly: offered = sent (+ horizon drops)."""
    pol = {"ports": {"vm0": {"classes": [
        {"name": "clamp", "proto": "udp", "dst_port": 1000, "rate_bps": 2_000_000,
         "scope": "class", "horizon": "clamp"},
        {"name": "drop", "proto": "udp", "dst_port": 2000, "rate_bps": 2_000_000,
         "scope": "class", "horizon": "drop"}]}}}
    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=pol, datapath={"mbufs": 16383})
    seconds, pps = 4, 1000                  # 500 frames/s = 4 Mbit/s per class
    g = gen(sngen, d, "vm0", ["10.0.0.1:5000-10.1.0.1:1000", "10.0.0.1:5001-10.1.0.1:2000"],
            pps=pps, seconds=seconds)
    go(d, ["vm0"], [g])
    wait_class(d, "vm0", ["clamp", "drop"])
    class_rate(d, "vm0", "drop", 2e6, window=1.0)
    _, c, _ = cstats(d, "vm0")
    assert c["clamp"]["clamped"] > 0 and c["clamp"]["drops"]["horizon"] == 0, c
    assert c["drop"]["drops"]["horizon"] > 0 and c["drop"]["clamped"] == 0, c
    # every frame offered, then drained: exact conservation per class
    per_flow = pps * seconds // 2
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        _, c, st = cstats(d, "vm0")
        port = {p["name"]: p for p in st["ports"]}["vm0"]["policy"]
        if all(c[n]["offered_packets"] == per_flow for n in c) and port["wheel_depth"] == 0:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"traffic never drained: {c}")
    cl, dr = c["clamp"], c["drop"]
    print(f"\nclamp: {cl['clamped']} clamped, {cl['sent_packets']}/{cl['offered_packets']} sent;"
          f" drop: {dr['drops']['horizon']} dropped, {dr['sent_packets']}/{dr['offered_packets']}")
    assert cl["sent_packets"] == cl["offered_packets"] == per_flow, cl
    assert cl["drops"] == {"horizon": 0, "wheel_pool": 0, "quota_wheel": 0}, cl
    # the drop class kept its rate: about half its offer dropped
    assert dr["sent_packets"] + dr["drops"]["horizon"] == dr["offered_packets"], dr
    assert dr["drops"]["wheel_pool"] == 0 and dr["clamped"] == 0, dr
    assert 0.3 * per_flow < dr["drops"]["horizon"] < 0.6 * per_flow, dr
    # a clamped frame left at most one horizon late: clamp's frames were all
    # released, more of them than the rate allows over the traffic's duration
    assert cl["clamped"] > 0.3 * per_flow, cl
    assert port["drops"]["horizon"] == dr["drops"]["horizon"], port
    assert d.alive()


@pytest.mark.functional
def test_class_uid_not_reused_while_its_flows_live(schednicd, sngen):
    """A class's flow entries are keyed by an 8-bit id per port (its uid,
    kept while the class keeps its name). 256 class creations within the
    2 s flow ageing time wrap the id; a new class must not take over a
    deleted class's live flow entries (it would have no flow of its own,
    flows_created 0 under traffic, and flows_active -1 once the inherited
    entries aged). 16 UDP flows of vm0 (dst ports 1..16), each
    policy.set replaces all 16 per-flow classes (class k matches dst port
    k + 1) by 16 new names: 24 sets after the first, 384 creations. Each class, once it
    carries traffic, must have made its own flow state (flows_created ==
    flows_active == 1); 16 sets within the ageing time (as asserted: else
    the id was never due for reuse while its entries lived) make the id
    wrap onto live entries. After the traffic stopped, the last classes'
    flows all age out (flows_active 0 = created - aged)."""
    nflows, nsets = 16, 25

    def classes(i):
        return {"ports": {"vm0": {"classes": [
            {"name": f"g{i}c{k}", "proto": "udp", "dst_port": k + 1, "rate_bps": 50_000_000,
             "scope": "flow"} for k in range(nflows)]}}}

    d = schednicd(ports=["vm0"], uplink=UPLINK, policy=classes(0), datapath={"mbufs": 16383})
    g = gen(sngen, d, "vm0", [f"10.0.0.1:4000-10.2.0.1:{k + 1}" for k in range(nflows)],
            pps=16000, size=128)
    go(d, ["vm0"], [g])
    started, bad = [], []
    for i in range(nsets):
        d.rpc("policy.set", {"policy": classes(i)})
        started.append(time.monotonic())
        deadline = time.monotonic() + 10
        while True:
            _, c, _ = cstats(d, "vm0")
            mine = {n: v for n, v in c.items() if n.startswith(f"g{i}c")}
            if len(mine) == nflows and all(v["offered_packets"] > 0 for v in mine.values()):
                break
            assert time.monotonic() < deadline, f"set {i}: no traffic in every class: {c}"
            time.sleep(0.005)
        bad += [(i, n, v["flows_created"], v["flows_active"]) for n, v in mine.items()
                if (v["flows_created"], v["flows_active"]) != (1, 1)]
    # 16 sets (256 ids) within the 2 s ageing time: ids were due again
    # while the entries keyed with them lived
    wrap = min(started[i + 16] - started[i] for i in range(nsets - 16))
    print(f"\n{nsets - 1} sets, {(nsets - 1) * nflows} class creations; "
          f"fastest 16 sets {wrap:.2f} s; classes without their own flow state: {bad[:8]}")
    assert wrap < 1.5, f"too slow to exercise the reuse: 16 sets took >= {wrap:.2f} s"
    assert not bad, bad
    g.finish()
    deadline = time.monotonic() + 15
    while True:
        _, c, _ = cstats(d, "vm0")
        if all(v["flows_active"] == 0 for v in c.values()):
            break
        assert all(v["flows_active"] >= 0 for v in c.values()), c
        assert time.monotonic() < deadline, f"flows never aged: {c}"
        time.sleep(0.2)
    assert all(v["flows_aged"] == v["flows_created"] == 1 for v in c.values()), c
    assert d.alive()
