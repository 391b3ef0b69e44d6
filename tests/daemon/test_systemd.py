# SPDX-License-Identifier: BSD-3-Clause
"""schednicd under systemd (doc/deploy.md, "Running under systemd").

These machines have no systemd as PID 1, so each part is checked on its
own: the unit file by systemd-analyze (verify, and the offline security
review); the sd_notify protocol by running the daemon with NOTIFY_SOCKET
and WATCHDOG_USEC pointing at a datagram socket of the test, as the
service manager would, and reading what it sends; the unit's capability
set by running the daemon under setpriv with exactly that bounding set
and switching traffic through a tap uplink, which needs CAP_NET_ADMIN.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from sngen import port_table, wait_settled

pytestmark = pytest.mark.functional

# The watchdog interval the tests ask for: a check (and ping) every 0.5 s.
WATCHDOG_USEC = 1_000_000


class NotifySocket:
    """The service manager's end of NOTIFY_SOCKET: every datagram with the
    monotonic time it arrived."""

    def __init__(self, path: Path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.msgs = []   # (time, {field: value})

    def read(self, timeout: float):
        """Reads what arrives within timeout."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                break
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.msgs.append((time.monotonic(), fields))

    def wait(self, field: str, value: str = "1", timeout: float = 60.0, since: int = 0):
        """Index of the first message from since on with field=value."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(since, len(self.msgs)):
                if self.msgs[i][1].get(field) == value:
                    return i
            if time.monotonic() > deadline:
                raise AssertionError(f"no {field}={value} in {timeout}s: {self.msgs[since:]}")
            self.read(0.2)

    def times(self, field: str, start: int = 0, end=None):
        return [t for t, f in self.msgs[start:end] if f.get(field) == "1"]

    def close(self):
        self.sock.close()


@pytest.fixture
def notify(sn_tmpdir):
    n = NotifySocket(sn_tmpdir / "notify.sock")
    yield n
    n.close()


def unit_path(build_dir: Path) -> Path:
    p = build_dir / "schednicd.service"
    assert p.exists(), f"{p}: meson generates the unit from backend/daemon/systemd/"
    return p


def unit_caps(build_dir: Path):
    """The unit's CapabilityBoundingSet, as setpriv names them."""
    m = re.search(r"^CapabilityBoundingSet=(.*)$", unit_path(build_dir).read_text(), re.M)
    assert m, "the unit sets no CapabilityBoundingSet"
    return [c.lower().removeprefix("cap_") for c in m.group(1).split()]


def test_unit_passes_systemd_analyze(build_dir, schednicd_bin, sn_tmpdir):
    """systemd-analyze verify finds nothing to say about the unit (its
    ExecStart pointed at this build's binary: verify checks that the
    executables exist); the offline security review rates its exposure
    below "EXPOSED" (the value is printed)."""
    text = unit_path(build_dir).read_text()
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={schednicd_bin}", text, flags=re.M)
    unit = sn_tmpdir / "schednicd.service"
    unit.write_text(text)
    # verify also runs man(1) on each Documentation= page: the tree's pages
    # under a MANPATH of their own (as installed: man8/)
    man8 = sn_tmpdir / "man" / "man8"
    man8.mkdir(parents=True)
    for page in ("schednicd.8", "schednicctl.8"):
        shutil.copy(Path(__file__).resolve().parents[2] / "doc" / "man" / page, man8 / page)
    v = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                       text=True, timeout=60,
                       env={**os.environ, "MANPATH": str(sn_tmpdir / "man")})
    print("systemd-analyze verify:", v.returncode, v.stdout, v.stderr)
    assert v.returncode == 0 and not v.stdout.strip() and not v.stderr.strip(), v
    s = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", s.stdout)
    print("systemd-analyze security:", m.group(0) if m else s.stdout[-400:])
    assert m, s.stdout + s.stderr
    assert float(m.group(1)) < 7.0, m.group(0)   # 7.0 and above: EXPOSED, UNSAFE


def test_notify_ready_watchdog_reload_stop(schednicd, notify):
    """READY=1 comes once the control socket answers and the config's port
    exists; WATCHDOG=1 every half interval while the worker loops;
    RELOADING=1 then READY=1 around a SIGHUP reload; STOPPING=1 at
    SIGTERM, and the exit is clean."""
    d = schednicd(ports=["vm0"], start=False)
    d.env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": str(WATCHDOG_USEC)}
    d.start(wait=False)
    ready = notify.wait("READY")
    # Nothing retried: the control socket answers as READY=1 arrives.
    assert [p["name"] for p in d.rpc("port.list")["ports"]] == ["vm0"]
    assert "control socket" in notify.msgs[ready][1].get("STATUS", ""), notify.msgs[ready]
    notify.read(3.0)
    pings = notify.times("WATCHDOG", ready)
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    print(f"{len(pings)} WATCHDOG=1 in 3 s, gaps {[round(g, 3) for g in gaps]}")
    assert len(pings) >= 4, notify.msgs
    assert max(gaps) < 1.5, gaps
    mark = len(notify.msgs)
    d.proc.send_signal(signal.SIGHUP)
    reloading = notify.wait("RELOADING", since=mark, timeout=30)
    notify.wait("READY", since=reloading + 1, timeout=30)
    mark = len(notify.msgs)
    assert d.stop() == 0
    notify.read(0.5)
    notify.wait("STOPPING", since=mark, timeout=1)


def test_no_notify_socket_no_messages(schednicd, notify):
    """Without NOTIFY_SOCKET (not started by systemd) the daemon sends
    nothing, even with WATCHDOG_USEC set, and runs as usual."""
    d = schednicd(ports=["vm0"], start=False)
    d.env = {"WATCHDOG_USEC": str(WATCHDOG_USEC)}
    d.start()
    notify.read(1.5)
    assert notify.msgs == []
    assert d.stop() == 0


def test_bad_watchdog_usec_refused(schednicd, notify):
    """A WATCHDOG_USEC that is not a number: the daemon says so and exits 1
    instead of running without the watchdog it was asked for."""
    d = schednicd(ports=["vm0"], start=False)
    d.env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "soon"}
    d.start(wait=False)
    assert d.proc.wait(60) == 1
    assert "watchdog: WATCHDOG_USEC" in d.log_tail(), d.log_tail()


def cap_eff(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError("no CapEff")


CAP_BITS = {"net_admin": 12, "net_raw": 13, "ipc_lock": 14}


def setpriv(caps):
    return ["setpriv", "--bounding-set=-all" + "".join(f",+{c}" for c in caps),
            "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--"]


def test_runs_with_exactly_the_units_capabilities(build_dir, schednicd, daemon_sngen, netns):
    """Under setpriv with the unit's bounding set (and no_new_privs, as the
    unit): the daemon's effective set is exactly that set, it opens a tap
    uplink and switches an echo exchange between a namespace and a vhost
    peer. Without CAP_NET_ADMIN it cannot create the tap and exits with a
    message: the set is what the daemon needs, not only what it gets."""
    caps = unit_caps(build_dir)
    assert set(caps) <= set(CAP_BITS), caps
    ifname = f"sncap{os.getpid() % 100000}"
    d = schednicd(ports=["vm0"], uplink=f"net_tap0,iface={ifname}", start=False)
    d.wrapper = setpriv(caps)
    d.start()
    want = sum(1 << CAP_BITS[c] for c in caps)
    assert cap_eff(d.proc.pid) == want, (hex(cap_eff(d.proc.pid)), hex(want))

    ns = netns()
    ns_run = lambda *cmd: subprocess.run(["ip", "netns", "exec", ns, *cmd], check=True,  # noqa: E731
                                         timeout=60, capture_output=True, text=True)
    for key in ("all", "default"):
        ns_run("sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
    subprocess.run(["ip", "link", "set", ifname, "netns", ns], check=True)
    ns_run("ip", "addr", "add", "10.203.0.1/24", "dev", ifname)
    ns_run("ip", "link", "set", ifname, "up")
    g = daemon_sngen([d.vhost_path("vm0")], "--echo-ip", "10.203.0.2", mode="echo")
    g.wait("ready")
    d.wait_port_state("vm0", "up")
    d.wait_port_state("uplink", "up")
    ns_run("ping", "-n", "-c", "3", "-i", "0.2", "-w", "30", "10.203.0.2")
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] >= 3)
    assert t["uplink"]["tx_packets"] >= 3, port_table(d.stats())
    g.finish()
    assert d.stop() == 0

    without = [c for c in caps if c != "net_admin"]
    e = schednicd(ports=["vm0"], uplink=f"net_tap0,iface={ifname}x", start=False)
    e.wrapper = setpriv(without)
    e.start(wait=False)
    assert e.proc.wait(60) != 0
    print("without CAP_NET_ADMIN:", e.log_tail(5))
    assert "failed to initialize net_tap0" in e.log_tail(10), e.log_tail(10)
