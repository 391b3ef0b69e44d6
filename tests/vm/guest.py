# SPDX-License-Identifier: BSD-3-Clause
"""One QEMU test guest, started through qemu-configs/qemu-vm.sh.

The guest (scripts/build-guest-image.sh) runs a command agent on its second
serial port, which QEMU exposes as a unix socket. Protocol (scripts/guest/
sn-agent): we send "<id> <base64 script>\\n"; the guest answers
"@@SN-BEGIN id@@", the base64 of stdout+stderr, "@@SN-END id rc@@". Ids are
unique per request, so replies to requests sent before the agent started
(we resend a probe until one is answered) are recognised and skipped.
"""
import base64
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QEMU_VM = REPO / "qemu-configs" / "qemu-vm.sh"
_END = re.compile(rb"@@SN-END ([A-Za-z0-9]+) (-?\d+)@@")
_ids = itertools.count(1)
SUBNET = "10.77.0"
UPLINK_HOST_IP = f"{SUBNET}.1"

INSTALL_HINT = ("install it with scripts/bootstrap.sh (Debian: apt-get install "
                "qemu-system-x86 libvirt-daemon-system libvirt-clients "
                "busybox-static iperf3 cpio kmod ethtool)")


def require_tool(tool):
    """Fail (never skip) the test when a host tool is missing."""
    import pytest
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} not found: {INSTALL_HINT}")


@dataclass
class Result:
    rc: int
    out: str

    def check(self, what=""):
        assert self.rc == 0, f"guest command {what!r} failed rc={self.rc}:\n{self.out}"
        return self


class GuestError(Exception):
    pass


class Guest:
    def __init__(self, name, sock, workdir, guest_dir, sock_mode="client",
                 mac="52:54:00:00:00:01", ip=None, role="idle", mem=256,
                 extra_args=(), queues=1):
        self.name = name
        self.sock = str(sock)
        self.sock_mode = sock_mode
        self.mac = mac
        self.ip = ip
        self.addr = ip.split("/")[0] if ip else None
        self.ifname = "sn" + "".join(mac.split(":")[3:6])
        self.workdir = Path(workdir)
        self.agent_path = str(self.workdir / f"{name}.agent")
        self.console_path = self.workdir / f"{name}.console.log"
        self.stdout_path = self.workdir / f"{name}.qemu.log"
        self.cmd = [str(QEMU_VM), "--name", name, "--sock", self.sock,
                    "--sock-mode", sock_mode, "--mac", mac, "--role", role,
                    "--mem", str(mem), "--guest-dir", str(guest_dir),
                    "--agent", self.agent_path,
                    "--console", str(self.console_path)]
        if ip:
            self.cmd += ["--ip", ip]
        if queues != 1:
            self.cmd += ["--queues", str(queues)]
        if extra_args:
            self.cmd += ["--", *extra_args]
        self.proc = None
        self.conn = None
        self.buf = b""

    # ---- lifecycle -------------------------------------------------------
    def start(self, cpu=None):
        """Start QEMU (pinned to `cpu` if given). Returns immediately."""
        for p in (self.agent_path,):
            if os.path.exists(p):
                os.unlink(p)
        if self.sock_mode == "server" and os.path.exists(self.sock):
            os.unlink(self.sock)
        cmd = self.cmd
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu), *cmd]
        self.logf = open(self.stdout_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.conn = None
        self.buf = b""
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _fail(self, msg):
        raise GuestError(f"{self.name}: {msg}\n--- qemu output ---\n"
                         f"{self._tail(self.stdout_path)}\n--- console ---\n"
                         f"{self._tail(self.console_path)}")

    @staticmethod
    def _tail(path, n=40):
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            return "(none)"
        return "\n".join(lines[-n:])

    def _connect(self, deadline):
        while time.monotonic() < deadline:
            if not self.alive():
                self._fail(f"QEMU exited with {self.proc.returncode}")
            if os.path.exists(self.agent_path):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.agent_path)
                    self.conn = s
                    return
                except OSError:
                    s.close()
            time.sleep(0.1)
        self._fail("agent socket never appeared")

    def wait_ready(self, timeout=120):
        """Probe the agent until it answers (guest booted, NIC configured)."""
        deadline = time.monotonic() + timeout
        if self.conn is None:
            self._connect(deadline)
        while time.monotonic() < deadline:
            try:
                r = self.run("echo ready", timeout=3)
            except TimeoutError:
                continue
            if r.rc == 0 and r.out.strip() == "ready":
                return self
        self._fail(f"agent did not answer within {timeout}s")

    def run(self, script, timeout=60):
        """Run a shell script in the guest; return Result(rc, output)."""
        if self.conn is None:
            self._connect(time.monotonic() + timeout)
        rid = f"r{os.getpid()}x{next(_ids)}"
        payload = base64.b64encode(script.encode()).decode()
        self.conn.sendall(f"{rid} {payload}\n".encode())
        deadline = time.monotonic() + timeout
        begin = f"@@SN-BEGIN {rid}@@".encode()
        while True:
            m = None
            start = self.buf.find(begin)
            if start >= 0:
                for m in _END.finditer(self.buf, start):
                    if m.group(1).decode() == rid:
                        break
                else:
                    m = None
            if m is not None:
                body = self.buf[start + len(begin):m.start()]
                self.buf = self.buf[m.end():]
                out = base64.b64decode(b"".join(body.split()))
                return Result(int(m.group(2)), out.decode(errors="replace"))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name}: no reply to {script!r} in {timeout}s")
            if not self.alive():
                self._fail(f"QEMU exited with {self.proc.returncode} during {script!r}")
            self.conn.settimeout(min(left, 1.0))
            try:
                chunk = self.conn.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                self._fail("agent socket closed")
            self.buf += chunk

    def check(self, script, timeout=60):
        return self.run(script, timeout).check(script)

    def iperf(self, server, secs, reverse=False):
        """TCP iperf3 to `server` for `secs` s; receiver Mbit/s. Bounded by
        a guest-side timeout so a stalled stream fails fast."""
        cmd = (f"timeout {secs + 20} iperf3 -c {server} -t {secs} -J "
               f"--connect-timeout 5000{' -R' if reverse else ''}")
        r = self.run(cmd, timeout=secs + 60)
        if r.rc != 0:
            raise AssertionError(f"{self.name}: {cmd} -> rc {r.rc}\n{r.out[-3000:]}")
        return iperf_mbps(r.out)

    def reboot(self):
        """Reboot the guest from inside; reconnect lazily afterwards."""
        self.conn.sendall(f"r{os.getpid()}x{next(_ids)} "
                          f"{base64.b64encode(b'reboot -f').decode()}\n".encode())
        # The reply never comes; the chardev socket stays open across a guest
        # reset, so keep the connection and drop stale bytes.
        self.buf = b""

    def kill(self, sig=signal.SIGKILL):
        """Kill QEMU by PID (and only it); safe to call twice."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None
        for p in [self.agent_path] + ([self.sock] if self.sock_mode == "server" else []):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def iperf_mbps(result_json):
    """Receiver-side throughput (Mbit/s) from `iperf3 -J` output."""
    j = json.loads(result_json)
    if "error" in j or "sum_received" not in j.get("end", {}):
        raise AssertionError(f"iperf3 failed: {j.get('error', result_json[-2000:])}")
    return j["end"]["sum_received"]["bits_per_second"] / 1e6


def quiet_stats(daemon, settle=0.5, tries=20):
    """stats.get once two consecutive reads agree on all packet counters."""
    prev = None
    for _ in range(tries):
        s = daemon.stats()
        key = json.dumps([(p["name"], p["rx_packets"], p["tx_packets"], p["drops"])
                          for p in s["ports"]], sort_keys=True)
        if key == prev:
            return s
        prev = key
        time.sleep(settle)
    raise AssertionError("port counters never settled")


def sched_ns(pid, comm_prefix=""):
    """(run, runqueue wait) ns summed over the threads of process pid whose
    name starts with comm_prefix (/proc/PID/task/*/schedstat): how much
    host CPU they got, and how long they were runnable without one."""
    run = wait = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (t / "comm").read_text().startswith(comm_prefix):
                continue
            r, w, _ = (t / "schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        run, wait = run + int(r), wait + int(w)
    return run, wait
