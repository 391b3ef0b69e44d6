# SPDX-License-Identifier: BSD-3-Clause
"""Source-address spoofing by a hostile tenant, from a VM port and from the
uplink, while a victim's flow is counted frame by frame.

One sn-gen process owns every virtio-user peer (the VM ports' and, where
there is one, the net_vhost uplink's); phases are released one at a time
and the daemon's counters are waited on until they settle, so nothing
depends on the machine's speed. Every check is on counted frames: what the
attacker received, what the victim received, what the daemon dropped and
why (doc/isolation.md, "MAC entries and source-address binding").
"""
import pytest

from sngen import egress_drops, peer_mac, port_table, wait_settled

pytestmark = [pytest.mark.attack, pytest.mark.functional]

N = 3000      # victim's frames
M = 200       # attacker's frames
BCAST = "ff:ff:ff:ff:ff:ff"


def vm(sn_tmpdir, name, **kw):
    return {"name": name, "type": "vhost-user", "mode": "server",
            "path": str(sn_tmpdir / f"{name}.sock"), **kw}


def start(d, sngen, socks, names, flows):
    args = [a for f in flows for a in ("--flow", f)]
    g = sngen(socks, *args)
    g.wait("ready")
    for n in names:
        d.wait_port_state(n, "up")
    g.go("learn")
    wait_settled(d, lambda t: all(t[n]["rx_packets"] == 1 for n in names))
    return g


def run_phase(d, g, ph, src, count, t):
    g.go(ph)
    want = t[src]["rx_packets"] + count
    return wait_settled(d, lambda t: t[src]["rx_packets"] == want)


def test_vm_port_spoofing_a_victims_mac_is_dropped(schednicd, sngen, sn_tmpdir):
    """vm1 (attacker, bound to its own MAC) sends from vm0's MAC: every such
    frame is dropped as spoofed, the attacker receives none of vm2's traffic
    to vm0, and vm0 receives all of it."""
    names = ["vm0", "vm1", "vm2"]
    d = schednicd(ports=[vm(sn_tmpdir, "vm0", allowed_macs=[peer_mac(0)]),
                         vm(sn_tmpdir, "vm1", allowed_macs=[peer_mac(1)]),
                         vm(sn_tmpdir, "vm2")])
    listed = {p["name"]: p for p in d.rpc("port.list")["ports"]}
    assert listed["vm0"]["allowed_macs"] == [peer_mac(0)], listed["vm0"]
    assert listed["vm2"]["allowed_macs"] == [], listed["vm2"]
    g = start(d, sngen, [d.vhost_path(n) for n in names], names,
              [f"src=1,smac={peer_mac(0)},dst=2,count={M},phase=0",   # spoof
               f"src=1,smac={peer_mac(0)},dst={BCAST},count={M},phase=1",
               f"src=2,dst=0,count={N},phase=2"])                      # victim's flow
    t0 = port_table(d.stats())
    mt0 = d.stats()["mac_table"]
    t1 = run_phase(d, g, 0, "vm1", M, t0)
    t2 = run_phase(d, g, 1, "vm1", M, t1)
    t3 = run_phase(d, g, 2, "vm2", N, t2)
    r = g.finish()
    mt = d.stats()["mac_table"]
    spoofed = t3["vm1"]["drops"]["spoofed"] - t0["vm1"]["drops"]["spoofed"]
    victim = r["flows"][2]
    print(f"spoofed {spoofed}/{2 * M}, victim flow rx_by_port {victim['rx_by_port']}, "
          f"mac_table {mt}")
    assert spoofed == 2 * M
    assert r["flows"][0]["rx"] == 0 and r["flows"][1]["rx"] == 0, r["flows"][:2]
    assert victim["rx_by_port"][1] == 0, victim          # nothing to the attacker
    # all to the victim, or counted as dropped at its full ring
    assert victim["rx_by_port"][0] > 0, victim
    assert victim["rx_by_port"][0] + egress_drops(t3["vm0"]) - egress_drops(t2["vm0"]) == N
    assert t3["vm1"]["tx_packets"] == t0["vm1"]["tx_packets"], (t0["vm1"], t3["vm1"])
    assert mt["moves"] == mt0["moves"] and mt["move_refused"] == mt0["move_refused"], (mt0, mt)
    # vm0's allowed MAC is a static entry of vm0 (installed at start).
    assert t3["vm0"]["mac"]["entries"] == 1, t3["vm0"]["mac"]


@pytest.mark.parametrize("policy", ["vm_sticky", "any"])
def test_uplink_frame_with_a_vms_mac_does_not_divert_it(schednicd, sngen, sn_tmpdir, policy):
    """A frame from the uplink with vm0's source MAC: with the default move
    policy (vm_sticky) vm0's entry stays (move_refused counted) and vm1's
    traffic to vm0 all reaches vm0, none the uplink; datapath.mac_move "any"
    (any port moves any learned entry) is measured too: the entry moves and vm1's frames
    go to the uplink."""
    up = sn_tmpdir / "uplink.sock"
    names = ["vm0", "vm1"]
    d = schednicd(ports=names, uplink=f"net_vhost0,iface={up}",
                  datapath={"mac_move": policy})
    g = start(d, sngen, [d.vhost_path("vm0"), d.vhost_path("vm1"), str(up)],
              names + ["uplink"],
              [f"src=2,smac={peer_mac(0)},dst={BCAST},count={M},phase=0",  # from the uplink
               f"src=1,dst=0,count={N},phase=1"])                         # vm1 -> vm0
    t0 = port_table(d.stats())
    mt0 = d.stats()["mac_table"]
    t1 = run_phase(d, g, 0, "uplink", M, t0)
    t2 = run_phase(d, g, 1, "vm1", N, t1)
    r = g.finish()
    mt = d.stats()["mac_table"]
    f = r["flows"][1]
    refused = t2["uplink"]["mac"]["move_refused"] - t0["uplink"]["mac"]["move_refused"]
    print(f"{policy}: vm1->vm0 rx_by_port {f['rx_by_port']} (vm0, vm1, uplink peer), "
          f"uplink move_refused {refused}, moves {mt['moves'] - mt0['moves']}")
    to = "vm0" if policy == "vm_sticky" else "uplink"
    lost = egress_drops(t2[to]) - egress_drops(t1[to])
    if policy == "vm_sticky":
        assert f["rx_by_port"][2] == 0, f                  # not diverted to the uplink
        assert f["rx_by_port"][0] > 0 and f["rx_by_port"][0] + lost == N, (f, lost)
        assert refused == M
        assert mt["moves"] == mt0["moves"], (mt0, mt)
    else:
        assert mt["moves"] == mt0["moves"] + 1, (mt0, mt)
        assert f["rx_by_port"][0] == 0, f
        assert f["rx_by_port"][2] > 0 and f["rx_by_port"][2] + lost == N, (f, lost)
        assert refused == 0


@pytest.mark.parametrize("policy", ["vm_sticky", "any"])
def test_unbound_vm_frame_with_an_uplink_mac_does_not_divert_it(schednicd, sngen, sn_tmpdir,
                                                                policy):
    """vm1 (no allowed_macs) sends from the MAC of a host behind the
    uplink: with vm_sticky the uplink's entry stays (move_refused counted
    on vm1) and vm0's traffic to that host all leaves by the uplink, none
    reaches vm1; with "any" the entry moves and vm0's frames go to vm1."""
    up = sn_tmpdir / "uplink.sock"
    names = ["vm0", "vm1"]
    d = schednicd(ports=names, uplink=f"net_vhost0,iface={up}",
                  datapath={"mac_move": policy})
    g = start(d, sngen, [d.vhost_path("vm0"), d.vhost_path("vm1"), str(up)],
              names + ["uplink"],
              [f"src=1,smac={peer_mac(2)},dst={BCAST},count={M},phase=0",  # from vm1
               f"src=0,dst=2,count={N},phase=1"])                         # vm0 -> uplink host
    t0 = port_table(d.stats())
    mt0 = d.stats()["mac_table"]
    t1 = run_phase(d, g, 0, "vm1", M, t0)
    t2 = run_phase(d, g, 1, "vm0", N, t1)
    r = g.finish()
    mt = d.stats()["mac_table"]
    f = r["flows"][1]
    refused = t2["vm1"]["mac"]["move_refused"] - t0["vm1"]["mac"]["move_refused"]
    print(f"{policy}: vm0->uplink host rx_by_port {f['rx_by_port']} (vm0, vm1, uplink peer), "
          f"vm1 move_refused {refused}, moves {mt['moves'] - mt0['moves']}")
    to = "uplink" if policy == "vm_sticky" else "vm1"
    lost = egress_drops(t2[to]) - egress_drops(t1[to])
    if policy == "vm_sticky":
        assert f["rx_by_port"][1] == 0, f                  # not diverted to vm1
        assert f["rx_by_port"][2] > 0 and f["rx_by_port"][2] + lost == N, (f, lost)
        assert refused == M
        assert mt["moves"] == mt0["moves"], (mt0, mt)
    else:
        assert mt["moves"] == mt0["moves"] + 1, (mt0, mt)
        assert f["rx_by_port"][2] == 0, f
        assert f["rx_by_port"][1] > 0 and f["rx_by_port"][1] + lost == N, (f, lost)
        assert refused == 0


def test_ip_binding_drops_spoofed_ipv4_and_arp(schednicd, sngen, sn_tmpdir):
    """vm1 bound to 10.77.0.2/32: IPv4 from another source and ARP with a
    foreign sender IP are dropped (spoofed, spoofed_arp); its own address,
    DHCP's 0.0.0.0 and an ARP probe pass and are delivered."""
    names = ["vm0", "vm1"]
    d = schednicd(ports=[vm(sn_tmpdir, "vm0"),
                         vm(sn_tmpdir, "vm1", allowed_macs=[peer_mac(1)],
                            allowed_ips=["10.77.0.2", "2001:db8::/64"])])
    listed = {p["name"]: p for p in d.rpc("port.list")["ports"]}
    assert listed["vm1"]["allowed_ips"] == ["10.77.0.2/32", "2001:db8::/64"], listed["vm1"]
    g = start(d, sngen, [d.vhost_path(n) for n in names], names,
              [f"src=1,dst=0,udp=10.77.0.9:1000-10.77.0.1:2000,count={M},phase=0",
               f"src=1,dst={BCAST},arp=10.77.0.1-10.77.0.3,count={M},phase=1",
               f"src=1,dst=0,udp=10.77.0.2:1000-10.77.0.1:2000,count={M},phase=2",
               f"src=1,dst={BCAST},udp=0.0.0.0:68-255.255.255.255:67,count={M},phase=3",
               f"src=1,dst={BCAST},arp=10.77.0.2-10.77.0.1,count={M},phase=4",
               f"src=1,dst={BCAST},arp=0.0.0.0-10.77.0.2,count={M},phase=5"])
    t = [port_table(d.stats())]
    for ph in range(6):
        t.append(run_phase(d, g, ph, "vm1", M, t[-1]))
    g.finish()

    def dd(k, key):
        return t[k + 1]["vm1"]["drops"][key] - t[k]["vm1"]["drops"][key]

    def got(k):
        return t[k + 1]["vm0"]["tx_packets"] - t[k]["vm0"]["tx_packets"]

    rows = [(ph, dd(ph, "spoofed"), dd(ph, "spoofed_arp"), got(ph)) for ph in range(6)]
    print("phase, spoofed, spoofed_arp, delivered to vm0:", rows)
    assert rows[0][1:] == (M, 0, 0)          # IPv4 from 10.77.0.9
    assert rows[1][1:] == (0, M, 0)          # ARP from 10.77.0.1
    assert rows[2][1:] == (0, 0, M)          # its own address
    assert rows[3][1:] == (0, 0, M)          # DHCP discover
    assert rows[4][1:] == (0, 0, M)          # its own ARP
    assert rows[5][1:] == (0, 0, M)          # ARP probe (sender 0.0.0.0)


def test_nd_spoofing_is_dropped(schednicd, sngen, sn_tmpdir):
    """vm1 (attacker, bound to its MAC and 2001:db8::11) sends neighbour
    advertisements and solicitations naming vm0's 2001:db8::10 as sender
    or target, with its own or vm0's MAC in the link-layer option: none is
    delivered, each is counted (spoofed_nd, or spoofed for a foreign IPv6
    source), and vm2's traffic to vm0 all reaches vm0. An advertisement of
    its own address passes (the frames are otherwise well formed)."""
    own, victim = "2001:db8::11", "2001:db8::10"
    names = ["vm0", "vm1", "vm2"]
    d = schednicd(ports=[vm(sn_tmpdir, "vm0", allowed_macs=[peer_mac(0)], allowed_ips=[victim]),
                         vm(sn_tmpdir, "vm1", allowed_macs=[peer_mac(1)], allowed_ips=[own]),
                         vm(sn_tmpdir, "vm2")])
    cases = [  # (nd=, drop counter)
        (f"na/{own}/{victim}/{peer_mac(1)}", "spoofed_nd"),   # victim's address, own MAC
        (f"na/{own}/{victim}/{peer_mac(0)}", "spoofed_nd"),   # victim's address and MAC
        (f"ns/{own}/{victim}/{peer_mac(0)}", "spoofed_nd"),   # victim's MAC as source LLA
        (f"na/{victim}/{victim}/{peer_mac(0)}", "spoofed"),   # victim's address as source
        (f"ns/{victim}/{own}/{peer_mac(1)}", "spoofed"),
        (f"na/{own}/{own}/{peer_mac(1)}", None),              # its own: delivered
    ]
    flows = [f"src=1,dst={BCAST},nd={nd},count={M},phase={ph}" for ph, (nd, _) in enumerate(cases)]
    g = start(d, sngen, [d.vhost_path(n) for n in names], names,
              flows + [f"src=2,dst=0,count={N},phase={len(cases)}"])
    t = [port_table(d.stats())]
    for ph in range(len(cases)):
        t.append(run_phase(d, g, ph, "vm1", M, t[-1]))
    t.append(run_phase(d, g, len(cases), "vm2", N, t[-1]))
    r = g.finish()

    def dd(k, port, group, key):
        return t[k + 1][port][group][key] - t[k][port][group][key]

    rows = [(nd.split("/")[0], dd(k, "vm1", "drops", "spoofed_nd"), dd(k, "vm1", "drops", "spoofed"),
             t[k + 1]["vm0"]["tx_packets"] - t[k]["vm0"]["tx_packets"],
             t[k + 1]["vm2"]["tx_packets"] - t[k]["vm2"]["tx_packets"])
            for k, (nd, _) in enumerate(cases)]
    victim_flow = r["flows"][len(cases)]
    print("kind, spoofed_nd, spoofed, delivered to vm0, to vm2:", rows,
          "victim flow rx_by_port", victim_flow["rx_by_port"])
    for (kind, nd_drops, drops, to0, to2), (_, counter) in zip(rows, cases):
        if counter is None:
            assert (nd_drops, drops, to0, to2) == (0, 0, M, M), rows
        else:
            assert (to0, to2) == (0, 0), rows
            assert (nd_drops, drops) == ((M, 0) if counter == "spoofed_nd" else (0, M)), rows
    last = len(cases)
    assert victim_flow["rx_by_port"][1] == 0, victim_flow
    assert victim_flow["rx_by_port"][0] > 0
    assert (victim_flow["rx_by_port"][0] + egress_drops(t[last + 1]["vm0"])
            - egress_drops(t[last]["vm0"]) == N), victim_flow
