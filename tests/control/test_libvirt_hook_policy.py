# SPDX-License-Identifier: BSD-3-Clause
"""The libvirt hook turns a domain's <bandwidth> and schednic <metadata>
into the port's policy entry against a real schednicd (no libvirt, no VM;
tests/vm/test_libvirt.py runs the hook under libvirtd): libvirt's units,
the entry set before the port and removed with it, and every element
schednic cannot honour refused with a message naming it."""
import json
import shutil
import subprocess

import pytest

from ctlutil import REPO

pytestmark = pytest.mark.functional

HOOK = REPO / "qemu-configs" / "libvirt" / "hooks" / "qemu"
NS = "http://schednic.org/xmlns/libvirt/domain/1.0"


def install(tmp, d):
    h = tmp / "hooks"
    h.mkdir()
    shutil.copy(HOOK, h / "qemu")
    sock_dir = tmp / "vhost"
    (h / "schednic.json").write_text(json.dumps({"socket": str(d.socket),
                                                 "socket_dirs": [str(sock_dir)]}))
    return h / "qemu", sock_dir


def domain(sock_dir, bw0="", bw1="", meta=""):
    return f"""<domain type='qemu'><name>d0</name>
      <metadata>{meta}</metadata><devices>
      <interface type='vhostuser'><mac address='52:54:00:ab:cd:01'/>
        <source type='unix' path='{sock_dir}/d0.0.sock' mode='client'/>{bw0}</interface>
      <interface type='vhostuser'><mac address='52:54:00:ab:cd:02'/>
        <source type='unix' path='{sock_dir}/d0.1.sock' mode='client'/>{bw1}</interface>
    </devices></domain>"""


def run(hook, op, sub, xml):
    return subprocess.run([str(hook), "d0", op, sub, "-"], input=xml, capture_output=True,
                          text=True, timeout=30)


def test_bandwidth_and_metadata_become_the_ports_policy(schednicd, sn_tmpdir):
    d = schednicd(ports=[], policy={"uplink": {"rate_bps": 100_000_000}})
    hook, sock_dir = install(sn_tmpdir, d)
    meta = (f"<sn:schednic xmlns:sn='{NS}'>"
            "<sn:interface mac='52:54:00:AB:CD:02'><sn:outbound min_rate='3750'/></sn:interface>"
            "<sn:interface port='d0.0' weight='7'/></sn:schednic>")
    xml = domain(sock_dir, "<bandwidth><outbound average='1250' peak='2500' burst='64'/>"
                           "<inbound average='500' burst='16'/></bandwidth>", "", meta)
    r = run(hook, "prepare", "begin", xml)
    assert r.returncode == 0, r.stderr
    pol = d.rpc("policy.get")["ports"]
    # 1250 kB/s = 10 Mbit/s, 2500 kB/s = 20 Mbit/s, 64 KiB; 3750 kB/s = 30 Mbit/s
    assert pol == {"d0.0": {"rate_bps": 10_000_000, "peak_bps": 20_000_000,
                            "burst_bytes": 65536, "weight": 7,
                            "inbound": {"rate_bps": 4_000_000, "burst_bytes": 16384}},
                   "d0.1": {"rate_bps": 0, "burst_bytes": 0, "min_rate_bps": 30_000_000}}, pol
    assert sorted(p["name"] for p in d.rpc("port.list")["ports"]) == ["d0.0", "d0.1"]
    r = run(hook, "prepare", "begin", xml)      # again (libvirtd restart): accepted
    assert r.returncode == 0, r.stderr
    r = run(hook, "release", "end", xml)
    assert r.returncode == 0, r.stderr
    assert d.rpc("port.list")["ports"] == [] and d.rpc("policy.get")["ports"] == {}


def test_domain_without_bandwidth_keeps_the_policy(schednicd, sn_tmpdir):
    """An interface with no <bandwidth> and no metadata: the operator's
    entry for that port name stays through start and stop."""
    d = schednicd(ports=[], policy={"ports": {"d0.0": {"rate_bps": 5_000_000}}})
    hook, sock_dir = install(sn_tmpdir, d)
    for op, sub in (("prepare", "begin"), ("release", "end")):
        r = run(hook, op, sub, domain(sock_dir))
        assert r.returncode == 0, r.stderr
        assert d.rpc("policy.get")["ports"] == {"d0.0": {"rate_bps": 5_000_000,
                                                         "burst_bytes": 0, "weight": 1}}


REFUSED = [
    ("<bandwidth><inbound average='1000' floor='100'/></bandwidth>", "", "",
     "interface d0.0: <bandwidth><inbound> floor: not supported by schednic"),
    ("<bandwidth><inbound average='1000' peak='999'/></bandwidth>", "", "",
     "<bandwidth><inbound> peak='999': below average='1000'"),
    ("<bandwidth><outbound average='1000' floor='10'/></bandwidth>", "", "",
     "interface d0.0: <bandwidth><outbound> floor: not supported by schednic"),
    ("<bandwidth><outbound peak='1000'/></bandwidth>", "", "",
     "interface d0.0: <bandwidth><outbound>: average is required"),
    ("<bandwidth><outbound average='1000' peak='500'/></bandwidth>", "", "",
     "<bandwidth><outbound> peak='500': below average='1000'"),
    ("<bandwidth><outbound average='-3'/></bandwidth>", "", "",
     "<bandwidth><outbound> average='-3': must be an integer"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.0'><sn:inbound "
             "min_rate='5000'/></sn:interface></sn:schednic>",
     "<metadata> schednic/interface d0.0/inbound: a minimum on the traffic to a VM"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:colour/></sn:schednic>",
     "<metadata> schednic/colour: unknown element"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.0' speed='1'/></sn:schednic>",
     "<metadata> schednic/interface d0.0 speed: unknown attribute"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.9' weight='2'/></sn:schednic>",
     "<metadata> schednic/interface d0.9: no vhostuser interface"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.0'><sn:outbound "
             "min_rate='5000'/></sn:interface></sn:schednic>",
     "policy.ports.d0.0.min_rate_bps: needs policy.uplink.rate_bps (a share of the line rate "
     "is not known) (from <metadata> schednic/interface/outbound min_rate)"),
    ("", "", f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.0'><sn:outbound "
             "min_rate='5000'/></sn:interface><sn:interface port='d0.1'><sn:outbound "
             "min_rate='5000'/></sn:interface></sn:schednic>",
     "policy.ports.d0.1.min_rate_bps: the minimums add up to 80000000 bit/s, above "
     "policy.uplink.rate_bps 50000000"),
]


@pytest.mark.parametrize("bw0,bw1,meta,msg", REFUSED)
def test_what_schednic_cannot_do_fails_the_start(schednicd, sn_tmpdir, bw0, bw1, meta, msg):
    up = {"uplink": {"rate_bps": 50_000_000}} if "add up" in msg else {}
    d = schednicd(ports=[], policy=up)
    hook, sock_dir = install(sn_tmpdir, d)
    r = run(hook, "prepare", "begin", domain(sock_dir, bw0, bw1, meta))
    assert r.returncode == 1 and msg in r.stderr, r.stderr
    print(r.stderr.strip())
    # nothing half-done: the first port's entry and port are gone again
    assert d.rpc("port.list")["ports"] == [] and d.rpc("policy.get")["ports"] == {}


def test_failed_start_puts_back_the_entries_it_replaced(schednicd, sn_tmpdir):
    """d0.0 had an entry of the operator's; the domain's <bandwidth>
    replaces it, then d0.1 cannot be added (its minimum does not fit):
    the start fails and d0.0's entry is the operator's again."""
    own = {"rate_bps": 5_000_000, "burst_bytes": 0, "weight": 2}
    d = schednicd(ports=[], policy={"uplink": {"rate_bps": 10_000_000}, "ports": {"d0.0": own}})
    hook, sock_dir = install(sn_tmpdir, d)
    meta = (f"<sn:schednic xmlns:sn='{NS}'><sn:interface port='d0.1'><sn:outbound "
            "min_rate='5000'/></sn:interface></sn:schednic>")
    r = run(hook, "prepare", "begin",
            domain(sock_dir, "<bandwidth><outbound average='1000'/></bandwidth>", "", meta))
    assert r.returncode == 1 and "policy.ports.d0.1.min_rate_bps" in r.stderr, r.stderr
    assert d.rpc("port.list")["ports"] == [] and d.rpc("policy.get")["ports"] == {"d0.0": own}
