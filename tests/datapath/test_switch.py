# SPDX-License-Identifier: BSD-3-Clause
"""L2 switching through schednicd with sn-gen virtio-user peers.

Every test checks the counters exactly (stats.get semantics in the daemon
spec): for each port, what the daemon received from it equals
what sn-gen's driver transmitted, what the daemon delivered to it equals
what sn-gen received there, and every frame that went in either came out
where the MAC table says or is counted as a drop on the port where it was
lost (ring_full/port_down on the egress port, the rest on the ingress port).
Phases are released one at a time and the daemon's counters are waited on
until they settle, so the results do not depend on the machine's speed.
"""
import time

import pytest

from sngen import drops_total, egress_drops, peer_mac, port_table, wait_settled

pytestmark = pytest.mark.functional

N = 5000
UNKNOWN_MAC = "02:99:00:00:00:01"


def start(schednicd, sngen, names, *flows, extra=()):
    d = schednicd(ports=names)
    socks = [d.vhost_path(n) for n in names]
    args = [a for f in flows for a in ("--flow", f)] + list(extra)
    g = sngen(socks, *args)
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    return d, g


def learn(d, g, names):
    """Each port broadcasts once from its MAC; wait until all copies landed."""
    n = len(names)
    g.go("learn")
    t = wait_settled(d, lambda t: all(
        t[x]["rx_packets"] == 1 and t[x]["tx_packets"] + egress_drops(t[x]) == n - 1
        for x in names))
    st = d.stats()
    assert st["mac_table"]["entries"] == n, st["mac_table"]
    return t


def phase(d, g, ph, src, count, prev):
    g.go(ph)
    want = prev[src]["rx_packets"] + count
    return wait_settled(d, lambda t: t[src]["rx_packets"] == want)


def delta(a, b, name, key):
    if key == "egress":
        return egress_drops(b[name]) - egress_drops(a[name])
    if key == "drops":
        return drops_total(b[name]) - drops_total(a[name])
    if key in b[name]["drops"]:
        return b[name]["drops"][key] - a[name]["drops"][key]
    return b[name][key] - a[name][key]


def check_ports_match_gen(t, names, r):
    """Daemon-side counters == sn-gen-side counters, port by port."""
    for i, n in enumerate(names):
        gp = r["ports"][i]
        assert t[n]["rx_packets"] == gp["tx_packets"], (n, t[n], gp)
        assert t[n]["rx_bytes"] == gp["tx_bytes"], (n, t[n], gp)
        assert t[n]["tx_packets"] == gp["rx_packets"], (n, t[n], gp)
        assert t[n]["tx_bytes"] == gp["rx_bytes"], (n, t[n], gp)
        assert gp["rx_bad"] == 0 and gp["rx_foreign"] == 0, gp
    for f in r["flows"]:
        assert f["tx"] == f["count"], f
        assert f["rx_ooo"] == 0 and f["rx_bad"] == 0, f


@pytest.mark.parametrize("pace", [[], ["--rate", "20000"], ["--burst", "8", "--gap-us", "300"]],
                         ids=["unlimited", "20kpps", "burst-gap"])
def test_unicast_both_ways_counters_exact(schednicd, sngen, pace):
    names = ["vm0", "vm1"]
    d, g = start(schednicd, sngen, names,
                 f"src=0,dst=1,count={N}", f"src=1,dst=0,count={N}", extra=pace)
    t0 = learn(d, g, names)
    g.go(0)
    t = wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 + N for x in names))
    r = g.finish()
    t = port_table(d.stats())
    check_ports_match_gen(t, names, r)
    for i, (src, dst) in enumerate([("vm0", "vm1"), ("vm1", "vm0")]):
        f = r["flows"][i]
        j = 1 - i
        # unicast to a learned MAC: only the destination port gets it
        assert f["rx_by_port"][i] == 0, f
        assert f["rx"] == f["rx_by_port"][j] > 0, f
        # sent = received + counted drops (ingress drops on src, egress on dst)
        assert N == f["rx"] + delta(t0, t, dst, "egress") + delta(t0, t, src, "drops") \
            - delta(t0, t, src, "egress"), (f, t[src]["drops"], t[dst]["drops"])
        # and the spec's identity over the whole run
        assert t[src]["rx_packets"] == t[dst]["tx_packets"] + egress_drops(t[dst]) + \
            drops_total(t[src]) - egress_drops(t[src]), (t[src], t[dst])
    assert t["vm0"]["drops"]["hairpin"] == t["vm1"]["drops"]["hairpin"] == 0
    st = d.stats()
    assert st["mac_table"]["entries"] == 2 and st["mac_table"]["moves"] == 0, st["mac_table"]


def test_flood_unknown_broadcast_multicast_three_ports(schednicd, sngen):
    names = ["vm0", "vm1", "vm2"]
    flows = [(0, UNKNOWN_MAC), (1, "ff:ff:ff:ff:ff:ff"), (2, "01:00:5e:00:00:01")]
    d, g = start(schednicd, sngen, names,
                 *[f"src={s},dst={m},count={N},phase={k}" for k, (s, m) in enumerate(flows)])
    prev = learn(d, g, names)
    deltas = []
    for k, (s, _) in enumerate(flows):
        t = phase(d, g, k, names[s], N, prev)
        deltas.append((prev, t))
        prev = t
    r = g.finish()
    check_ports_match_gen(prev, names, r)
    for k, (s, _) in enumerate(flows):
        a, b = deltas[k]
        f = r["flows"][k]
        src = names[s]
        # never back out of the ingress port
        assert f["rx_by_port"][s] == 0 and delta(a, b, src, "tx_packets") == 0, f
        assert delta(a, b, src, "drops") - delta(a, b, src, "egress") == 0, b[src]
        for p, n in enumerate(names):
            if p == s:
                continue
            # every other port got each frame, or counted it as an egress drop
            assert f["rx_by_port"][p] == delta(a, b, n, "tx_packets") > 0, (f, n)
            assert f["rx_by_port"][p] + delta(a, b, n, "egress") == N, (f, b[n]["drops"])
            assert delta(a, b, n, "unknown_dst") == 0
    st = d.stats()
    assert st["mac_table"]["entries"] == 3, st["mac_table"]  # destinations never learned


def test_no_hairpin_to_own_mac(schednicd, sngen):
    names = ["vm0", "vm1"]
    d, g = start(schednicd, sngen, names, f"src=0,dst=0,count={N}")
    t0 = learn(d, g, names)
    t = phase(d, g, 0, "vm0", N, t0)
    r = g.finish()
    check_ports_match_gen(t, names, r)
    f = r["flows"][0]
    assert f["rx"] == 0 and f["rx_by_port"] == [0, 0], f
    assert delta(t0, t, "vm0", "tx_packets") == delta(t0, t, "vm1", "tx_packets") == 0
    hairpin = sum(delta(t0, t, n, "hairpin") for n in names)
    assert hairpin == N, (t["vm0"]["drops"], t["vm1"]["drops"])
    assert sum(delta(t0, t, n, "drops") for n in names) == N


def test_mac_move_and_back(schednicd, sngen):
    names = ["vm0", "vm1", "vm2"]
    M = 100
    d, g = start(schednicd, sngen, names,
                 f"src=2,smac={peer_mac(0)},dst=1,count={M},phase=0",  # vm0's MAC moves to vm2
                 f"src=1,dst=0,count={N},phase=1",                    # -> must reach vm2
                 f"src=0,dst=1,count={M},phase=2",                    # moves back to vm0
                 f"src=1,dst=0,count={N},phase=3")                    # -> must reach vm0
    t = learn(d, g, names)
    moves0 = d.stats()["mac_table"]["moves"]
    snaps = [t]
    for k, (src, count) in enumerate([("vm2", M), ("vm1", N), ("vm0", M), ("vm1", N)]):
        t = phase(d, g, k, src, count, t)
        snaps.append(t)
        if k in (0, 2):
            assert d.stats()["mac_table"]["moves"] == moves0 + (1 if k == 0 else 2)
    r = g.finish()
    check_ports_match_gen(t, names, r)
    f1, f3 = r["flows"][1], r["flows"][3]
    assert f1["rx_by_port"][0] == 0 and f1["rx_by_port"][1] == 0, f1
    assert f1["rx_by_port"][2] > 0
    assert f1["rx_by_port"][2] + delta(snaps[1], snaps[2], "vm2", "egress") == N
    assert f3["rx_by_port"][1] == 0 and f3["rx_by_port"][2] == 0, f3
    assert f3["rx_by_port"][0] > 0
    assert f3["rx_by_port"][0] + delta(snaps[3], snaps[4], "vm0", "egress") == N
    st = d.stats()
    assert st["mac_table"]["entries"] == 3 and st["mac_table"]["moves"] == moves0 + 2


@pytest.mark.parametrize("size", [60, 1514])
def test_frame_sizes_delivered_intact(schednicd, sngen, size):
    names = ["vm0", "vm1"]
    n = 2000
    d, g = start(schednicd, sngen, names, f"src=0,dst=1,count={n}", f"src=1,dst=0,count={n}",
                 extra=["--size", str(size)])
    learn(d, g, names)
    g.go(0)
    wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 + n for x in names))
    r = g.finish()
    t = port_table(d.stats())
    check_ports_match_gen(t, names, r)   # includes bytes, payload pattern, order
    for i, x in enumerate(names):
        assert t[x]["rx_bytes"] == (1 + n) * size
        assert r["flows"][i]["rx"] + egress_drops(t[names[1 - i]]) == n
        assert r["flows"][i]["rx"] > 0


def test_mac_aging_floods_again(schednicd, sngen):
    names = ["vm0", "vm1", "vm2"]
    M = 100
    d = schednicd(ports=names, datapath={"mbufs": 8191, "mac_aging_s": 1})
    socks = [d.vhost_path(n) for n in names]
    g = sngen(socks, "--no-learn",
              "--flow", f"src=0,dst=1,count={M},phase=0",   # vm1 unknown: flood; learns vm0
              "--flow", f"src=1,dst=0,count={N},phase=1")   # after vm0 aged out: flood
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    t0 = port_table(d.stats())
    t1 = phase(d, g, 0, "vm0", M, t0)
    assert d.stats()["mac_table"]["learned"] >= 1
    deadline = time.monotonic() + 30
    while True:
        mt = d.stats()["mac_table"]
        if mt["aged"] >= 1 and mt["entries"] == 0:
            break
        assert time.monotonic() < deadline, f"vm0's MAC never aged out: {mt}"
        time.sleep(0.1)
    t2 = phase(d, g, 1, "vm1", N, t1)
    r = g.finish()
    check_ports_match_gen(t2, names, r)
    for k, (s, a, b, count) in enumerate([(0, t0, t1, M), (1, t1, t2, N)]):
        f = r["flows"][k]
        assert f["rx_by_port"][s] == 0, f
        for p, n in enumerate(names):
            if p != s:
                assert f["rx_by_port"][p] > 0, (k, f)
                assert f["rx_by_port"][p] + delta(a, b, n, "egress") == count, (k, f, b[n])


def test_burst_memo_sees_learning_inside_the_burst(schednicd, sngen):
    """switch_burst reuses the previous frame's destination lookup
    within a burst; learning a source MAC must invalidate it, since the
    next lookup may be of that very MAC. Flows X (vm0 to an unknown MAC U:
    flooded while U is unknown) and Z (vm0 from U to U: learns U on vm0,
    then is a hairpin drop), one frame per tx burst; sn-gen serves the
    flows of a phase in turn, starting with flow 1 and rotating, so vm0's
    ring holds X1, Z1, Z2, X2, X3, Z3, ... (flow 0, vm1 to vm0, only sets
    the rotation). X1 is flooded; every later frame of X and Z is a
    hairpin drop. A stale memo would flood Z1 (its destination U was just
    looked up as unknown by X1) and every frame after it in that burst
    (the daemon naps when idle, so the first burst holds several)."""
    names = ["vm0", "vm1"]
    d, g = start(schednicd, sngen, names,
                 f"src=1,dst=0,count={N}",
                 f"src=0,dst={UNKNOWN_MAC},count={N}",                      # X
                 f"src=0,smac={UNKNOWN_MAC},dst={UNKNOWN_MAC},count={N}",   # Z
                 extra=["--burst", "1"])
    t0 = learn(d, g, names)
    g.go(0)
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == t0["vm0"]["rx_packets"] + 2 * N
                     and t["vm1"]["rx_packets"] == t0["vm1"]["rx_packets"] + N)
    r = g.finish()
    check_ports_match_gen(t, names, r)
    x, z = r["flows"][1], r["flows"][2]
    flooded = x["rx_by_port"][1] + z["rx_by_port"][1]
    hairpin = delta(t0, t, "vm0", "hairpin")
    assert hairpin >= 2 * N - 1, (flooded, hairpin, t["vm0"]["drops"], t["vm1"]["drops"])
    assert flooded <= 1, (flooded, hairpin)
    assert z["rx_by_port"] == [0, 0], z
    assert d.stats()["mac_table"]["entries"] == 3
