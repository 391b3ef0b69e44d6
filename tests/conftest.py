# SPDX-License-Identifier: BSD-3-Clause
"""Shared pytest fixtures for the schednic suite.

Everything a fixture starts (schednicd, helper processes, network
namespaces, DPDK runtime dirs, sockets) is torn down by PID / by name it
created itself, even when the test fails.

Environment:
  SN_BUILD_DIR       meson build dir holding backend/schednicd (default: <repo>/build)
  SN_QUIET_MAX_S     longest wait of a measuring test for a quiet host before
                     one measurement (default 60; snlib/hostwait.py)
  SN_QUIET_BUDGET_S  all of one test's waits for a quiet host (default 120)
"""
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from snlib.rpc import RpcClient, RpcError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
_seq = itertools.count()


# Every test belongs to exactly one tier (pytest.ini registers the markers;
# scripts/test.sh --tier selects them with -m). "libvirt" comes on top of
# "vm" for the tests that also start a private libvirtd.
TIERS = ("unit", "functional", "accuracy", "perf", "vm")

# The documentation checks: a test of theirs without a tier marker of its
# own is functional (it checks the docs against the daemon and schema).


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Fail the collection, naming each test, unless every test has exactly
    one tier marker (and every libvirt test is a vm test)."""
    bad = []
    for item in items:
        tiers = {m.name for m in item.iter_markers() if m.name in TIERS}
        if len(tiers) != 1:
            bad.append(f"  {item.nodeid}: tiers {sorted(tiers) or 'none'}")
        elif item.get_closest_marker("libvirt") and tiers != {"vm"}:
            bad.append(f"  {item.nodeid}: libvirt without the vm tier")
    if bad:
        raise pytest.UsageError(
            f"{len(bad)} test(s) without exactly one tier marker ({', '.join(TIERS)}; "
            "set pytestmark = pytest.mark.<tier> in the module, or mark the test):\n" +
            "\n".join(bad))


def _build_dir() -> Path:
    return Path(os.environ.get("SN_BUILD_DIR", REPO / "build")).resolve()


@pytest.fixture(scope="session")
def build_dir() -> Path:
    d = _build_dir()
    if not (d / "build.ninja").exists():
        pytest.fail(f"no meson build in {d}: run scripts/build.sh (or set SN_BUILD_DIR)")
    return d


@pytest.fixture(scope="session")
def schednicd_bin(build_dir) -> Path:
    b = build_dir / "backend" / "schednicd"
    if not b.exists():
        pytest.fail(f"{b} missing: build with scripts/build.sh")
    return b


@pytest.fixture(scope="session")
def vufront_bin(build_dir) -> Path:
    """sn-vufront, the test vhost-user front-end (backend/tools)."""
    b = build_dir / "backend" / "sn-vufront"
    if not b.exists():
        pytest.fail(f"{b} missing: build with scripts/build.sh")
    return b


def unique_prefix(tag: str) -> str:
    """A DPDK --file-prefix unique to this test process and call."""
    return f"sn-{tag}-{os.getpid()}-{next(_seq)}"


def remove_dpdk_runtime(prefix: str) -> None:
    for base in ("/var/run/dpdk", "/run/dpdk"):
        shutil.rmtree(os.path.join(base, prefix), ignore_errors=True)


def stop_process(p: subprocess.Popen, timeout: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after timeout; returns the exit status. A
    killed process always goes, but the kernel may take more than a few
    seconds to tear down a large address space shared with another
    process on a loaded host: up to 60 s are waited for."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(60)
    return p.returncode


class Schednicd:
    """One schednicd process started from a config dict."""

    def __init__(self, binary: Path, workdir: Path, config: dict, log_name="schednicd"):
        self.binary = binary
        self.workdir = workdir
        self.config = config
        self.prefix = config["eal"]["file_prefix"]
        self.socket = config["control"]["socket"]
        self.cfg_path = workdir / f"{log_name}.json"
        self.log_path = workdir / f"{log_name}.log"
        self.proc = None
        self.starts = 0
        self.env = {}        # added to the environment at start (NOTIFY_SOCKET, ...)
        self.wrapper = []    # argv prefix (setpriv ...): it must exec the daemon

    # -- lifecycle ---------------------------------------------------------
    def start(self, timeout: float = 60.0, wait: bool = True):
        """Start the daemon; with wait, return once it answers on its control
        socket."""
        self.cfg_path.write_text(json.dumps(self.config, indent=2))
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n=== start #{self.starts} ===\n".encode())
        log.flush()
        self.proc = subprocess.Popen(self.wrapper + [str(self.binary), "--config",
                                                     str(self.cfg_path)],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env={**os.environ, **self.env} if self.env else None)
        log.close()
        if not wait:
            return self
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"schednicd exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.rpc("version")
                return self
            except (OSError, ConnectionError, RpcError, ValueError):
                time.sleep(0.1)
        raise RuntimeError(f"schednicd did not answer on {self.socket} in {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> int:
        rc = stop_process(self.proc, timeout) if self.proc else 0
        remove_dpdk_runtime(self.prefix)
        return rc

    def restart(self):
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    # -- control -----------------------------------------------------------
    def rpc(self, method: str, params=None, timeout: float = 10.0):
        with RpcClient(self.socket, timeout) as c:
            return c.call(method, params)

    def client(self, timeout: float = 10.0) -> RpcClient:
        return RpcClient(self.socket, timeout)

    def stats(self, port=None):
        return self.rpc("stats.get", {"port": port} if port else {})

    def port_stats(self, name: str) -> dict:
        return self.rpc("stats.get", {"port": name})["ports"][0]

    def wait_port_state(self, name: str, state: str = "up", timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.rpc("port.list")["ports"]:
                if p["name"] == name and p["state"] == state:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"port {name} not {state} after {timeout}s:\n{self.log_tail()}")

    def vhost_path(self, name: str) -> str:
        return str(self.workdir / f"{name}.sock")


@pytest.fixture
def sn_tmpdir():
    """A short temp dir (unix socket paths must stay under 108 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="sn-", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def schednicd(schednicd_bin, sn_tmpdir, request):
    """Factory: schednicd(ports=[...], uplink=None, **sections) -> started Schednicd.

    ports: list of names (server-mode vhost-user sockets in the test's temp
    dir) or full port dicts. uplink: None or devargs string. Other keyword
    arguments replace/extend config sections (e.g. datapath={...}).
    """
    started = []

    def factory(ports=("vm0", "vm1"), uplink=None, start=True, **sections):
        config = {
            "eal": {"memory_mb": 512, "file_prefix": unique_prefix("d"),
                    "main_cpu": 0, "worker_cpu": 1 if (os.cpu_count() or 1) > 1 else 0},
            "control": {"socket": str(sn_tmpdir / f"ctl{len(started)}.sock"),
                        "state_dir": str(sn_tmpdir / "state")},
            "datapath": {"mbufs": 8191},
            "uplink": None,
            "ports": [],
        }
        for p in ports:
            if isinstance(p, str):
                p = {"name": p, "type": "vhost-user", "path": str(sn_tmpdir / f"{p}.sock"),
                     "mode": "server"}
            config["ports"].append(p)
        if uplink:
            config["uplink"] = {"name": "uplink", "devargs": uplink}
        for k, v in sections.items():
            if isinstance(v, dict) and isinstance(config.get(k), dict):
                config[k].update(v)
            else:
                config[k] = v
        d = Schednicd(schednicd_bin, sn_tmpdir, config, log_name=f"schednicd{len(started)}")
        started.append(d)
        if start:
            d.start()
        return d

    yield factory
    err = None
    for d in started:
        try:
            d.stop()
        except subprocess.TimeoutExpired as e:   # the others are stopped first
            err = err or e
        if getattr(request.node, "rep_call_failed", False):
            print(f"--- {d.log_path} ---\n{d.log_tail(80)}")
    if err:
        raise err


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call_failed = rep.failed


@pytest.fixture
def spawn(sn_tmpdir):
    """Start helper processes (peers, generators); all are stopped at teardown.

    spawn(argv, name=..., dpdk_prefix=...) -> Popen with stdout/stderr in a
    log file under the test's temp dir (p.log_path).
    """
    procs = []

    def start(argv, name="proc", dpdk_prefix=None, **kw):
        log_path = sn_tmpdir / f"{name}-{len(procs)}.log"
        log = open(log_path, "wb")
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", log)
        kw.setdefault("stderr", subprocess.STDOUT if kw["stdout"] is log else log)
        p = subprocess.Popen([str(a) for a in argv], **kw)
        log.close()
        p.log_path = log_path
        p.dpdk_prefix = dpdk_prefix
        procs.append(p)
        return p

    yield start
    # every process is stopped even when one of them will not go (the
    # first failure is raised after the others were stopped)
    err = None
    for p in reversed(procs):
        try:
            stop_process(p)
        except subprocess.TimeoutExpired as e:
            err = err or e
        if p.dpdk_prefix:
            remove_dpdk_runtime(p.dpdk_prefix)
    if err:
        raise err


@pytest.fixture
def netns():
    """Factory: netns() -> name of a fresh network namespace (deleted at teardown)."""
    made = []

    def make():
        name = f"sn{os.getpid() % 100000}-{next(_seq)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        made.append(name)
        return name

    yield make
    for name in made:
        subprocess.run(["ip", "netns", "del", name], check=False)


def ns_run(ns, *cmd, check=True, timeout=60, **kw):
    """Run a command inside a network namespace; returns CompletedProcess."""
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=check, timeout=timeout,
                          capture_output=True, text=True, **kw)
