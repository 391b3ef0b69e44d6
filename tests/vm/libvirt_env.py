# SPDX-License-Identifier: BSD-3-Clause
"""A private libvirtd + virtlogd for tests (no systemd, no host config).

Both daemons run in their own mount namespace (unshare -m) in which
/etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
/var/cache/libvirt are bind mounts of directories under a temp dir. So the
host's libvirt configuration, networks and any libvirtd already running are
neither read nor touched, and everything the daemons create disappears with
the temp dir. virsh connects from the host namespace through the socket's
temp-dir path (qemu:///system?socket=...).

qemu.conf for a container host: security_driver "none" (no
AppArmor/SELinux labelling), no cgroups (systemd is not PID 1), QEMU as root,
plus namespaces [] so QEMU sees the real /dev and the test's sockets.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

MOUNTS = {
    "etc": "/etc/libvirt",
    "run": "/run/libvirt",
    "lib": "/var/lib/libvirt",
    "log": "/var/log/libvirt",
    "cache": "/var/cache/libvirt",
}

QEMU_CONF = """\
security_driver = "none"
cgroup_controllers = [ ]
user = "root"
group = "root"
namespaces = [ ]
"""


class PrivateLibvirt:
    def __init__(self, base):
        self.base = Path(base)
        self.dirs = {k: self.base / k for k in MOUNTS}
        self.uri = f"qemu:///system?socket={self.dirs['run']}/libvirt-sock"
        self.proc = None
        self.created_mountpoints = []

    def _pid(self, name):
        try:
            return int((self.dirs["run"] / name).read_text().strip())
        except (OSError, ValueError):
            return None

    def start(self, hooks=None, timeout=60):
        """hooks: {file name: text} installed in /etc/libvirt/hooks/."""
        for d in self.dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        etc = self.dirs["etc"]
        if hooks:
            (etc / "hooks").mkdir(exist_ok=True)
            for fname, text in hooks.items():
                (etc / "hooks" / fname).write_text(text)
                (etc / "hooks" / fname).chmod(0o755)
        (etc / "qemu.conf").write_text(QEMU_CONF)
        log = self.dirs["log"]
        (etc / "libvirtd.conf").write_text(
            f'log_outputs = "3:file:{log}/libvirtd.log"\n')
        (etc / "virtlogd.conf").write_text(
            f'log_outputs = "3:file:{log}/virtlogd.log"\n')
        # Bind-mount targets must exist; create missing ones (empty dirs, as
        # the libvirt packages would) and remove them again in stop().
        for target in MOUNTS.values():
            if not os.path.isdir(target):
                os.makedirs(target)
                self.created_mountpoints.append(target)
        binds = " && ".join(f"mount --bind {self.dirs[k]} {t}" for k, t in MOUNTS.items())
        run = "/run/libvirt"
        script = (f"{binds} && "
                  f"virtlogd --pid-file {run}/virtlogd.pid & "
                  f"exec libvirtd --pid-file {run}/libvirtd.pid")
        self.stdout = open(self.base / "daemons.out", "ab")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=self.stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"libvirtd exited {self.proc.returncode}: {self.log_tail()}")
            if (self.dirs["run"] / "libvirt-sock").exists():
                r = self.virsh("version", check=False)
                if r.returncode == 0:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"libvirtd did not answer in {timeout}s: {self.log_tail()}")

    def log_tail(self, n=30):
        out = []
        for f in (self.base / "daemons.out", self.dirs["log"] / "libvirtd.log"):
            try:
                out.append(f"--- {f}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-n:]))
            except OSError:
                pass
        return "\n".join(out)

    def virsh(self, *args, check=True, timeout=120):
        r = subprocess.run(["virsh", "-c", self.uri, *args], capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"virsh {' '.join(args)} -> {r.returncode}\n"
                                 f"{r.stdout}{r.stderr}\n{self.log_tail()}")
        return r

    def qemu_log(self, domain, n=30):
        f = self.dirs["log"] / "qemu" / f"{domain}.log"
        try:
            return "\n".join(f.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no qemu log)"

    def stop(self):
        # QEMU processes outlive libvirtd: destroy what is still running,
        # then kill leftovers by the PID files libvirt wrote.
        if self.proc is not None and self.proc.poll() is None:
            r = self.virsh("list", "--name", check=False, timeout=30)
            for dom in r.stdout.split():
                self.virsh("destroy", dom, check=False, timeout=60)
        qdir = self.dirs["run"] / "qemu"
        for pidf in qdir.glob("*.pid") if qdir.is_dir() else []:
            try:
                os.kill(int(pidf.read_text().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        logd = self._pid("virtlogd.pid")
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if logd is not None:
            try:
                os.kill(logd, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if getattr(self, "stdout", None):
            self.stdout.close()
        for t in reversed(self.created_mountpoints):
            try:
                os.rmdir(t)
            except OSError:
                pass
