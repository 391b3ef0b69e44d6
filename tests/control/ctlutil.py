# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the control-plane tests (constants, raw socket I/O, the
rpc_harness process wrapper). Fixtures are in conftest.py."""
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from snlib.rpc import RpcClient, RpcError  # tests/ is on sys.path (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]

SCHEMA = REPO / "backend" / "daemon" / "control" / "rpc_api.json"
CTL = REPO / "scripts" / "schednicctl"
MAX_REQ = 4096
MAX_CLIENTS = 4
# sn_rpc.c's idle timeout, read from the source so the tests follow it.
IDLE_S = int(re.search(r"#define IDLE_MS\s+(\d+)",
                       (REPO / "backend" / "daemon" / "control" / "sn_rpc.c").read_text()).group(1)) / 1000

# Methods the harness serves on top of rpc_api.json (and one it leaves
# without handler, which must answer -32601).
TEST_METHODS = {
    "test.big": {"summary": "a big response", "params": {
        "size": {"type": "integer", "required": True}}, "result": {}, "errors": []},
    "test.echo": {"summary": "echo params", "params": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
        "e": {"type": "integer", "enum": [1, 2, 3]},
        "d": {"type": "string", "enum": ["on", "off"], "default": "off"}},
        "result": {}, "errors": []},
    "test.fail": {"summary": "handler fails", "params": {}, "result": {}, "errors": []},
    "test.unimplemented": {"summary": "no handler", "params": {}, "result": {}, "errors": []},
}


def load_schema() -> dict:
    return json.loads(SCHEMA.read_text())


class Harness:
    """rpc_harness process with the same surface as conftest.Schednicd."""

    kind = "harness"

    def __init__(self, binary, workdir: Path, schema: dict, max_req=MAX_REQ,
                 max_clients=MAX_CLIENTS, socket_path=None, nofile=None):
        self.binary = binary
        self.workdir = workdir
        self.socket = str(socket_path or workdir / "ctl-h.sock")
        self.schema_path = workdir / "api.json"
        self.schema_path.write_text(json.dumps(schema))
        self.log_path = workdir / "harness.log"
        self.args = [str(binary), self.socket, str(self.schema_path), str(max_req),
                     str(max_clients)]
        self.nofile = nofile
        self.proc = None

    def start(self):
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
                   UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=87")
        log = open(self.log_path, "ab")
        limit = None
        if self.nofile:
            def limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log,
                                     stdin=subprocess.DEVNULL, env=env, preexec_fn=limit)
        log.close()
        line = self.proc.stdout.readline()
        assert line == b"ready\n", f"harness did not start:\n{self.log_tail()}"
        return self

    def stop(self, timeout=15.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stdout.close()
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """utime + stime of the process so far."""
        f = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self, n=40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def rpc(self, method, params=None, timeout=10.0):
        with RpcClient(self.socket, timeout) as c:
            return c.call(method, params)

    def client(self, timeout=10.0) -> RpcClient:
        return RpcClient(self.socket, timeout)


def request_line(method, params=None, req_id=1, **extra) -> bytes:
    req = {"jsonrpc": "2.0", "method": method, "id": req_id, **extra}
    if params is not None:
        req["params"] = params
    return json.dumps(req).encode() + b"\n"


def exchange(path, data: bytes, timeout=10.0) -> dict:
    """Send raw bytes on a fresh connection, return the first response."""
    with RpcClient(path, timeout) as c:
        c.send_raw(data)
        return json.loads(c.recv_line())


def wait_closed(sock: socket.socket, timeout: float) -> bytes:
    """Read until the server closes; returns what was received before EOF."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    raise TimeoutError(f"server kept the connection open for {timeout}s")


def assert_serving(srv):
    """The server is alive and still answers `version`."""
    assert srv.alive(), "server died"
    assert srv.rpc("version")["version"] == "0.1.0"


def rpc_error(srv, method, params=None) -> RpcError:
    with pytest.raises(RpcError) as ei:
        srv.rpc(method, params)
    return ei.value


def run_ctl(sock, *args, timeout=30, env=None):
    return subprocess.run([str(CTL), "-s", str(sock), *args], capture_output=True,
                          text=True, timeout=timeout, env=env)
