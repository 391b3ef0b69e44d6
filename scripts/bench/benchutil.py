# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the benchmark scripts of this directory (datapath.py,
conformance.py): DPDK runtime-dir cleanup, stopping a child process, and a
one-shot JSON-RPC call to schednicd's control socket. Stdlib only."""
import json
import os
import shutil
import signal
import socket
import subprocess


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
