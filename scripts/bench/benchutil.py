# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the benchmark scripts of this directory (datapath.py,
conformance.py, ...): DPDK runtime-dir cleanup, stopping a child process, a
one-shot JSON-RPC call to schednicd's control socket, and waiting for that
socket to answer. Stdlib only."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def remove_runtime(prefix):
    """Remove the DPDK runtime directory of a --file-prefix we used."""
    for base in ("/var/run/dpdk", "/run/dpdk"):
        shutil.rmtree(os.path.join(base, prefix), ignore_errors=True)


def stop(proc, timeout=15.0):
    """SIGTERM a child we started (by its Popen), SIGKILL after timeout."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def rpc(sock_path, method, params=None, timeout=10.0):
    """One JSON-RPC 2.0 request on a fresh connection; the result, or
    RuntimeError carrying the daemon's error object."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        req = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            req["params"] = params
        s.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
    resp = json.loads(buf.split(b"\n", 1)[0])
    if "error" in resp:
        raise RuntimeError(f"rpc {method}: {resp['error']}")
    return resp["result"]


def wait_control(sock_path, proc, timeout=60.0, what="schednicd control socket",
                 logfile=None, rpc_timeout=2.0):
    """Wait until schednicd (proc, started by us) answers "version" on
    sock_path; RuntimeError with its log's tail if it exits first, or after
    timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = logfile or getattr(proc, "logfile", None)
            tail = Path(log).read_text(errors="replace")[-2000:] if log else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        try:
            rpc(sock_path, "version", timeout=rpc_timeout)
            return
        except (OSError, ValueError, RuntimeError):
            time.sleep(0.1)
    raise RuntimeError(f"{what}: timed out after {timeout}s")
