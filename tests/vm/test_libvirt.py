# SPDX-License-Identifier: BSD-3-Clause
"""libvirt attachment: a private libvirtd boots the qemu-configs/libvirt
example domains (paths rewritten to this test's temp dir) on schednicd
ports, and traffic flows between them through schednicd."""
import json
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from guest import REPO, SUBNET, Guest, require_tool
from libvirt_env import PrivateLibvirt

pytestmark = [pytest.mark.vm, pytest.mark.libvirt]

GUEST_CPU = 0

EXAMPLES = REPO / "qemu-configs" / "libvirt"
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)


def domain_xml(template, name, sock, mac, ip, role, guest_dir, workdir):
    """The example domain with its host-specific values replaced."""
    root = ET.parse(template).getroot()
    root.find("name").text = name
    # Keep QEMU off schednicd's worker CPU (see tests/vm/conftest.py).
    root.find("vcpu").set("cpuset", str(GUEST_CPU))
    os_el = root.find("os")
    os_el.find("kernel").text = str(guest_dir / "vmlinuz")
    os_el.find("initrd").text = str(guest_dir / "initrd.img")
    os_el.find("cmdline").text = (f"console=ttyS0 loglevel=4 panic=-1 tsc=reliable sn.name={name} "
                                  f"sn.role={role} sn.ip={ip}")
    iface = root.find("devices/interface[@type='vhostuser']")
    iface.find("mac").set("address", mac)
    iface.find("source").set("path", str(sock))
    for it in root.iterfind(f"metadata/{{{SN_NS}}}schednic/{{{SN_NS}}}interface"):
        it.set("port", sock.name[:-len(".sock")])
    serials = root.findall("devices/serial")
    serials[0].find("source").set("path", str(workdir / f"{name}.console.log"))
    serials[1].find("source").set("path", str(workdir / f"{name}.agent"))
    return ET.tostring(root, encoding="unicode")


@pytest.fixture
def libvirtd(sn_tmpdir):
    """Factory: libvirtd(hooks={...}) -> started PrivateLibvirt."""
    require_tool("libvirtd")
    require_tool("virtlogd")
    require_tool("virsh")
    started = []

    def start(**kw):
        lv = PrivateLibvirt(sn_tmpdir / "libvirt")
        started.append(lv)
        return lv.start(**kw)

    yield start
    for lv in started:
        lv.stop()


class LibvirtGuest(Guest):
    """A guest whose QEMU libvirt owns: only the agent side of Guest is used."""

    def __init__(self, lv, name, workdir, mac, ip):
        super().__init__(name, "", workdir, workdir, mac=mac, ip=ip)
        self.lv = lv

    def alive(self):
        r = self.lv.virsh("domstate", self.name, check=False, timeout=30)
        return r.returncode == 0 and "running" in r.stdout

    def _fail(self, msg):
        raise AssertionError(f"{self.name}: {msg}\n{self.lv.qemu_log(self.name)}\n"
                             f"--- console ---\n{self._tail(self.console_path)}")

    def kill(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def hooked_libvirtd(schednicd, libvirtd, sn_tmpdir):
    """(schednicd without ports, a private libvirtd whose qemu hook adds
    and removes its ports from the domain XML)."""
    d = schednicd(ports=[])
    hook_cfg = {"socket": d.socket, "socket_dirs": [str(sn_tmpdir)]}
    lv = libvirtd(hooks={"qemu": (EXAMPLES / "hooks" / "qemu").read_text(),
                         "schednic.json": json.dumps(hook_cfg)})
    return d, lv


def create_domains(lv, sn_tmpdir, xmls):
    """virsh create each {name: domain XML} (transient domains)."""
    for name, xml in xmls.items():
        f = sn_tmpdir / f"{name}.xml"
        f.write_text(xml)
        lv.virsh("create", str(f))


SN_NS = "http://schednic.org/xmlns/libvirt/domain/1.0"
ET.register_namespace("sn", SN_NS)


def policy_rate(d, port, seconds, key=("policy", "released_bytes")):
    """bits/s of the port's counter `key` (default: its shaper's
    released_bytes) over `seconds`, timed by the worker's clock
    (arbiter.clock_ns)."""
    def sample():
        st = d.stats()
        p = {x["name"]: x for x in st["ports"]}[port]
        for k in key:
            p = p[k]
        return st["arbiter"]["clock_ns"] / 1e9, p
    ta, a = sample()
    time.sleep(seconds)
    tb, b = sample()
    return (b - a) * 8 / (tb - ta)


def rate_during(d, port, key, run):
    """run() (a 14 s iperf3) with the port's counter `key` measured over
    10 s from 3 s after its start (past a burst and TCP's slow start):
    (run()'s result, bits/s)."""
    rate = {}
    meter = threading.Thread(target=lambda: (time.sleep(3),
                             rate.update(bps=policy_rate(d, port, 10, key=key))))
    meter.start()
    try:
        out = run()
    finally:
        meter.join()
    return out, rate["bps"]


def test_libvirt_vhostuser_domains(schednicd, libvirtd, guest_image, sn_tmpdir,
                                   record_result):
    """Both example domains under a private libvirtd whose qemu hook
    (qemu-configs/libvirt/hooks/qemu) creates and deletes the schednicd
    ports from the domain XML. Domain 1 is vm-bandwidth.xml: libvirt 9.0
    hands the hook the <bandwidth> of a vhostuser interface (it only warns
    that it does not apply it itself) and the domain's schednic
    <metadata>, which become its port's policy entry: its TCP stream is
    held to <outbound average>."""
    require_tool("qemu-system-x86_64")
    d, lv = hooked_libvirtd(schednicd, libvirtd, sn_tmpdir)
    # Domain 1: QEMU vhost-user client -> the hook adds a server-mode port.
    x0 = domain_xml(EXAMPLES / "vm-bandwidth.xml", "sn-lv0",
                    sn_tmpdir / "sn-lv0.0.sock", "52:54:00:77:00:30", f"{SUBNET}.30/24",
                    "server", guest_image, sn_tmpdir)
    # Domain 2: QEMU vhost-user server -> the hook adds a client-mode port.
    x1 = domain_xml(EXAMPLES / "vm-vhostuser-server.xml", "sn-lv1",
                    sn_tmpdir / "sn-lv1.0.sock", "52:54:00:77:00:31", f"{SUBNET}.31/24",
                    "client", guest_image, sn_tmpdir)
    guests = []
    try:
        t0 = time.monotonic()
        create_domains(lv, sn_tmpdir, {"sn-lv0": x0, "sn-lv1": x1})
        ports = {p["name"]: p for p in d.rpc("port.list")["ports"]}
        assert sorted(ports) == ["sn-lv0.0", "sn-lv1.0"], ports
        assert ports["sn-lv0.0"]["mode"] == "server" and ports["sn-lv1.0"]["mode"] == "client"
        # average 5000 kB/s = 40 Mbit/s, peak 10000 kB/s, burst 256 KiB;
        # inbound 2500 kB/s = 20 Mbit/s
        assert d.rpc("policy.get")["ports"] == {
            "sn-lv0.0": {"rate_bps": 40_000_000, "peak_bps": 80_000_000,
                         "burst_bytes": 262144, "weight": 3,
                         "inbound": {"rate_bps": 20_000_000, "burst_bytes": 0}}}

        a = LibvirtGuest(lv, "sn-lv0", sn_tmpdir, "52:54:00:77:00:30", f"{SUBNET}.30/24")
        b = LibvirtGuest(lv, "sn-lv1", sn_tmpdir, "52:54:00:77:00:31", f"{SUBNET}.31/24")
        guests += [a, b]
        a.wait_ready(timeout=180)
        b.wait_ready(timeout=180)
        print(f"libvirt guests ready in {time.monotonic() - t0:.1f}s")
        d.wait_port_state("sn-lv0.0", "up")
        d.wait_port_state("sn-lv1.0", "up")

        # The NIC was configured from the domain XML (MAC-derived name, IP).
        a.check(f"ip addr show dev sn770030 | grep -q 'inet {a.addr}/24'")
        b.check(f"ping -c 3 -W 5 {a.addr}", timeout=60)
        # a sends for 14 s (iperf3 -R): its L2 rate at schednic's counters
        # (the 256 KiB burst is spent in the first 0.1 s)
        mbps, bps = rate_during(d, "sn-lv0.0", ("policy", "released_bytes"),
                                lambda: b.iperf(a.addr, 14, reverse=True))
        rate = {"bps": bps}
        record_result("libvirt VM->VM iperf3 TCP, <outbound average> 40 Mbit/s", mbps, "Mbit/s")
        record_result("libvirt VM->VM L2 rate at the port, <outbound average> 40 Mbit/s",
                      rate["bps"] / 1e6, "Mbit/s")
        print(f"<outbound average=5000 kB/s>: {rate['bps'] / 1e6:.3f} Mbit/s L2 at the port, "
              f"iperf3 goodput {mbps:.2f} Mbit/s")
        assert abs(rate["bps"] - 40e6) / 40e6 < 0.02, rate
        # b sends to a: a's <inbound average>, L2 bytes delivered to a's ring
        mbps_in, rate["inb"] = rate_during(d, "sn-lv0.0", ("tx_bytes",),
                                           lambda: b.iperf(a.addr, 14))
        record_result("libvirt VM->VM iperf3 TCP, <inbound average> 20 Mbit/s", mbps_in, "Mbit/s")
        record_result("libvirt VM->VM L2 rate into the port, <inbound average> 20 Mbit/s",
                      rate["inb"] / 1e6, "Mbit/s")
        print(f"<inbound average=2500 kB/s>: {rate['inb'] / 1e6:.3f} Mbit/s L2 into the port, "
              f"iperf3 goodput {mbps_in:.2f} Mbit/s")
        assert abs(rate["inb"] - 20e6) / 20e6 < 0.02, rate
        st = {p["name"]: p for p in d.stats()["ports"]}
        assert st["sn-lv1.0"]["rx_packets"] > 0 and st["sn-lv0.0"]["tx_packets"] > 0

        for name in ("sn-lv0", "sn-lv1"):
            lv.virsh("destroy", name)
        assert lv.virsh("list", "--name").stdout.split() == []
        # The hook's "release" removed both ports and their entries.
        assert d.rpc("port.list")["ports"] == [] and d.rpc("policy.get")["ports"] == {}
        assert d.alive()
    finally:
        for g in guests:
            g.kill()


def test_libvirt_multiqueue_domain(schednicd, libvirtd, guest_image, sn_tmpdir):
    """qemu-configs/libvirt/vm-multiqueue.xml (<driver queues='2'/>, TCG via
    qemu:override vectors=0): the hook adds the port with "queues": 2, the
    guest enables both channels and its streams leave on both TX queues."""
    require_tool("qemu-system-x86_64")
    d, lv = hooked_libvirtd(schednicd, libvirtd, sn_tmpdir)
    x0 = domain_xml(EXAMPLES / "vm-multiqueue.xml", "sn-mq1",
                    sn_tmpdir / "sn-mq1.0.sock", "52:54:00:77:00:32", f"{SUBNET}.32/24",
                    "server", guest_image, sn_tmpdir)
    x1 = domain_xml(EXAMPLES / "vm-vhostuser-client.xml", "sn-lv3",
                    sn_tmpdir / "sn-lv3.0.sock", "52:54:00:77:00:33", f"{SUBNET}.33/24",
                    "client", guest_image, sn_tmpdir)
    guests = []
    try:
        create_domains(lv, sn_tmpdir, {"sn-mq1": x0, "sn-lv3": x1})
        a = LibvirtGuest(lv, "sn-mq1", sn_tmpdir, "52:54:00:77:00:32", f"{SUBNET}.32/24")
        b = LibvirtGuest(lv, "sn-lv3", sn_tmpdir, "52:54:00:77:00:33", f"{SUBNET}.33/24")
        guests += [a, b]
        a.wait_ready(timeout=180)
        b.wait_ready(timeout=180)
        d.wait_port_state("sn-mq1.0", "up")
        d.wait_port_state("sn-lv3.0", "up")
        st = {p["name"]: p for p in d.stats()["ports"]}
        assert len(st["sn-mq1.0"]["queues"]) == 2 and len(st["sn-lv3.0"]["queues"]) == 1
        a.check(f"ethtool -L {a.ifname} combined 2")
        b.check(f"ping -c 3 -W 5 {a.addr}", timeout=60)
        # sn-mq1 sends (-R): 4 streams over its two TX queues
        b.check(f"timeout 40 iperf3 -c {a.addr} -t 3 -P 4 -R --connect-timeout 5000",
                timeout=90)
        qs = {p["name"]: p for p in d.stats()["ports"]}["sn-mq1.0"]["queues"]
        print("sn-mq1.0 queues", [(q["rx_packets"], q["tx_packets"]) for q in qs])
        assert all(q["tx_enabled"] and q["rx_packets"] > 0 for q in qs), qs
        for name in ("sn-mq1", "sn-lv3"):
            lv.virsh("destroy", name)
        assert d.rpc("port.list")["ports"] == []
        assert d.alive()
    finally:
        for g in guests:
            g.kill()


def wait_until(pred, timeout, step=0.01):
    """Seconds until pred() held (polled every `step`), or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(step)
    return None


def test_reconciler_follows_live_metadata_and_a_libvirtd_restart(schednicd, libvirtd,
                                                                 guest_image, sn_tmpdir, spawn):
    """scripts/schednic-libvirt beside the hook: a running domain's schednic
    <metadata> changed with virsh metadata --live reaches its port's entry,
    and after libvirtd was restarted (the domain kept running, schednicd's
    entry lost meanwhile) the entry is back; each within 1 s, measured. The
    guest need not boot: QEMU and its vhost-user connection are enough."""
    require_tool("qemu-system-x86_64")
    d, lv = hooked_libvirtd(schednicd, libvirtd, sn_tmpdir)
    cfg = sn_tmpdir / "reconciler.json"
    cfg.write_text(json.dumps({"socket": str(d.socket), "socket_dirs": [str(sn_tmpdir)]}))
    x0 = domain_xml(EXAMPLES / "vm-bandwidth.xml", "sn-rc0", sn_tmpdir / "sn-rc0.0.sock",
                    "52:54:00:77:00:40", f"{SUBNET}.40/24", "server", guest_image, sn_tmpdir)
    create_domains(lv, sn_tmpdir, {"sn-rc0": x0})
    rec = spawn([REPO / "scripts" / "schednic-libvirt", "--uri", lv.uri, "--config", cfg,
                 "--resync", "30"], name="reconciler")
    assert wait_until(lambda: "connected" in rec.log_path.read_text(), 20), \
        rec.log_path.read_text()
    entry = lambda: d.rpc("policy.get")["ports"].get("sn-rc0.0", {})   # noqa: E731
    assert entry().get("weight") == 3

    new = ("<schednic><interface port='sn-rc0.0'><outbound min_rate='1000'/></interface>"
           "</schednic>")
    d.rpc("policy.set", {"policy": {"uplink": {"rate_bps": 100_000_000},
                                    "ports": d.rpc("policy.get")["ports"]}})
    t0 = time.monotonic()
    lv.virsh("metadata", "sn-rc0", SN_NS, "--key", "sn", "--set", new, "--live")
    took = wait_until(lambda: entry().get("min_rate_bps") == 8_000_000, 5)
    print(f"virsh metadata --live returned after {time.monotonic() - t0:.3f} s; "
          f"the port's entry changed {took} s after the call")
    assert took is not None and took < 1.0, (entry(), rec.log_path.read_text())
    assert "weight" not in entry() and entry()["rate_bps"] == 40_000_000
    # virsh domiftune on a vhostuser interface: libvirt 9.0 refuses it
    # before any hook or event (doc/vms.md); the live XML is unchanged
    r = lv.virsh("domiftune", "sn-rc0", "52:54:00:77:00:40", "--outbound", "2500", "--live",
                 check=False)
    print(f"virsh domiftune on a vhostuser interface: rc {r.returncode}: "
          f"{(r.stdout + r.stderr).strip()}")
    assert r.returncode != 0 and "type 'vhostuser' is not implemented" in r.stderr, r
    assert entry()["rate_bps"] == 40_000_000

    # libvirtd goes away, the entry is lost meanwhile, libvirtd comes back
    lv.proc.terminate()
    lv.proc.wait(timeout=30)
    assert wait_until(lambda: "retrying" in rec.log_path.read_text(), 10), \
        rec.log_path.read_text()
    d.rpc("policy.del", {"port": "sn-rc0.0"})
    lv.start(hooks={"qemu": (EXAMPLES / "hooks" / "qemu").read_text(),
                    "schednic.json": cfg.read_text()})
    took = wait_until(lambda: entry().get("min_rate_bps") == 8_000_000, 5)
    print(f"libvirtd answering again to the entry restored: {took} s")
    assert took is not None and took < 1.0, (entry(), rec.log_path.read_text())
    assert "running" in lv.virsh("domstate", "sn-rc0").stdout
    lv.virsh("destroy", "sn-rc0")
    assert wait_until(lambda: d.rpc("port.list")["ports"] == [], 5) is not None
    assert d.alive()


@pytest.mark.parametrize("meta,uplink,msg", [
    (f"<sn:schednic xmlns:sn='{SN_NS}'><sn:colour/></sn:schednic>", 0,
     "schednic hook: prepare sn-rf0: <metadata> schednic/colour: unknown element"),
    (f"<sn:schednic xmlns:sn='{SN_NS}'><sn:interface port='sn-rf0.0'><sn:outbound "
     "min_rate='2500'/></sn:interface></sn:schednic>", 10_000_000,
     "policy.ports.sn-rf0.0.min_rate_bps: the minimums add up to 20000000 bit/s, above "
     "policy.uplink.rate_bps 10000000 (from <metadata> schednic/interface/outbound min_rate)"),
], ids=["unknown-element", "minimum-over-the-uplink"])
def test_libvirt_refuses_what_schednic_cannot_do(schednicd, libvirtd, guest_image, sn_tmpdir,
                                                 meta, uplink, msg):
    """virsh create of a domain whose schednic <metadata> asks for what
    schednic cannot do fails, with the hook's message naming the element
    in virsh's error; no port or entry is left behind."""
    d, lv = hooked_libvirtd(schednicd, libvirtd, sn_tmpdir)
    if uplink:
        d.rpc("policy.set", {"policy": {"uplink": {"rate_bps": uplink}}})
    root = ET.fromstring(domain_xml(EXAMPLES / "vm-vhostuser-client.xml", "sn-rf0",
                                    sn_tmpdir / "sn-rf0.0.sock", "52:54:00:77:00:41",
                                    f"{SUBNET}.41/24", "server", guest_image, sn_tmpdir))
    root.insert(1, ET.fromstring(f"<metadata>{meta}</metadata>"))
    f = sn_tmpdir / "sn-rf0.xml"
    f.write_text(ET.tostring(root, encoding="unicode"))
    r = lv.virsh("create", str(f), check=False)
    print(f"virsh create: rc {r.returncode}: {r.stderr.strip()}")
    assert r.returncode != 0 and msg in r.stderr, r.stderr
    assert lv.virsh("list", "--name").stdout.split() == []
    assert d.rpc("port.list")["ports"] == [] and d.rpc("policy.get")["ports"] == {}
