# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the QEMU VM suite (tests/vm).

- guest_image: builds (or reuses) the test guest with
  scripts/build-guest-image.sh into $SN_BUILD_DIR/guest. Fails, never skips,
  when QEMU is missing.
- vm: factory booting TCG guests attached to vhost-user sockets through
  qemu-configs/qemu-vm.sh; every QEMU is killed by PID and its sockets
  removed at teardown, also when the test fails (console tails printed).
- uplink_host: a DPDK net_tap uplink for schednicd whose kernel side is moved
  into a private network namespace with an address and an iperf3 server.

CPU placement on the 2-core CI machine: schednicd's worker busy-polls CPU 1
(tests/conftest.py), so guests run on CPU 0 next to the mostly idle main
lcore.
"""
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guest import Guest, REPO, SUBNET, UPLINK_HOST_IP, require_tool  # noqa: E402
from snlib.summary import Summary  # noqa: E402

GUEST_CPU = 0
_mac_seq = itertools.count(1)

@pytest.fixture(scope="session")
def guest_image(build_dir):
    """Directory with vmlinuz + initrd.img of the test guest (cached)."""
    require_tool("qemu-system-x86_64")
    for t in ("busybox", "iperf3", "cpio", "depmod"):
        require_tool(t)
    out = build_dir / "guest"
    t0 = time.monotonic()
    r = subprocess.run([str(REPO / "scripts" / "build-guest-image.sh"), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr, f"guest image ready in {time.monotonic() - t0:.1f}s")
    if r.returncode != 0:
        pytest.fail(f"build-guest-image.sh failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return out


def guest_mac(i):
    return f"52:54:00:77:00:{i:02x}"


class VmFactory:
    def __init__(self, guest_dir, workdir):
        self.guest_dir = guest_dir
        self.workdir = workdir
        self.guests = []

    def __call__(self, name, sock, mode="client", ip=None, role="idle", mem=256,
                 host=None, wait=True, extra_args=(), queues=1):
        """Start one guest on vhost-user socket `sock`.

        mode "client": QEMU connects to a schednicd server-mode port;
        mode "server": QEMU listens on `sock` (schednicd port in client mode).
        host: index for MAC/IP (52:54:00:77:00:<host>, 10.77.0.<host>/24).
        """
        host = next(_mac_seq) + 10 if host is None else host
        g = Guest(name, sock, self.workdir, self.guest_dir, sock_mode=mode,
                  mac=guest_mac(host), ip=ip or f"{SUBNET}.{host}/24", role=role,
                  mem=mem, extra_args=extra_args, queues=queues)
        self.guests.append(g)
        g.start(cpu=GUEST_CPU)
        if wait:
            g.wait_ready()
        return g

    def boot(self, socks, roles=None, mode="client", queues=1):
        """Boot len(socks) guests concurrently, wait until all are ready."""
        roles = roles or ["server"] + ["client"] * (len(socks) - 1)
        gs = [self(Path(s).stem, s, mode=mode, role=r, host=10 + i, wait=False, queues=queues)
              for i, (s, r) in enumerate(zip(socks, roles))]
        t0 = time.monotonic()
        for g in gs:
            g.wait_ready(timeout=180)
        print(f"{len(gs)} guests ready in {time.monotonic() - t0:.1f}s")
        return gs

    def teardown(self, failed):
        for g in self.guests:
            if failed:
                print(f"--- {g.name} console (tail) ---\n{g._tail(g.console_path, 30)}")
                print(f"--- {g.name} qemu (tail) ---\n{g._tail(g.stdout_path, 30)}")
            g.kill()


@pytest.fixture
def vm(guest_image, schednicd, sn_tmpdir, request):
    """Factory for QEMU guests; depends on `schednicd` so that guests are
    torn down before the daemon they are attached to."""
    f = VmFactory(guest_image, sn_tmpdir)
    yield f
    f.teardown(getattr(request.node, "rep_call_failed", False))


class UplinkHost:
    """Kernel side of schednicd's net_tap uplink, inside its own netns."""

    def __init__(self, ns):
        self.ns = ns
        self.ifname = f"snup{os.getpid() % 100000}"
        self.devargs = f"net_tap0,iface={self.ifname}"
        self.ip = UPLINK_HOST_IP
        self.iperf = None

    def attach(self, timeout=20):
        """Call after schednicd (with uplink=self.devargs) is up."""
        deadline = time.monotonic() + timeout
        while not Path(f"/sys/class/net/{self.ifname}").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"tap {self.ifname} never appeared")
            time.sleep(0.1)
        subprocess.run(["ip", "link", "set", self.ifname, "netns", self.ns], check=True)
        self.sh(f"ip link set lo up && ip addr add {self.ip}/24 dev {self.ifname} "
                f"&& ip link set {self.ifname} up")
        self.iperf = subprocess.Popen(["ip", "netns", "exec", self.ns, "iperf3", "-s"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      stdin=subprocess.DEVNULL)
        return self

    def sh(self, cmd, check=True, timeout=60):
        r = subprocess.run(["ip", "netns", "exec", self.ns, "sh", "-c", cmd],
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"[{self.ns}] {cmd} -> {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def close(self):
        if self.iperf is not None and self.iperf.poll() is None:
            self.iperf.send_signal(signal.SIGTERM)
            try:
                self.iperf.wait(10)
            except subprocess.TimeoutExpired:
                self.iperf.kill()
                self.iperf.wait(5)


@pytest.fixture
def uplink_host(netns, schednicd):
    """Uplink host; start schednicd with uplink=uplink_host.devargs, then
    call uplink_host.attach(). The tap disappears with the daemon; the
    namespace is deleted by the `netns` fixture."""
    h = UplinkHost(netns())
    yield h
    h.close()


SUMMARY = Summary("schednic VM measurements")


@pytest.fixture
def record_result(record_property):
    """record_result(label, value, unit): shown in the terminal summary and
    stored as a junit property, so throughputs appear in every CI log."""
    def rec(label, value, unit):
        SUMMARY.line(f"{label}: {value:.1f} {unit}")
        record_property(label, f"{value:.1f} {unit}")
        print(f"{label}: {value:.1f} {unit}")
    return rec


def pytest_terminal_summary(terminalreporter):
    SUMMARY.write(terminalreporter)
