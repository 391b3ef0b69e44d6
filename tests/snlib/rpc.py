# SPDX-License-Identifier: BSD-3-Clause
"""Minimal JSON-RPC 2.0 client for schednicd's unix socket (tests only).

The operator-facing client is scripts/schednicctl; tests talk to the daemon
directly through this module so that a CLI bug cannot hide a daemon bug.
"""
import itertools
import json
import socket


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class RpcClient:
    """One connection; newline-delimited requests and responses."""

    _ids = itertools.count(1)

    def __init__(self, path, timeout=10.0):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def recv_line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("schednicd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def call_raw(self, method, params=None, req_id=None):
        """Send one request and return the decoded response object."""
        req = {"jsonrpc": "2.0", "method": method,
               "id": next(self._ids) if req_id is None else req_id}
        if params is not None:
            req["params"] = params
        self.send_raw(json.dumps(req).encode() + b"\n")
        return json.loads(self.recv_line())

    def call(self, method, params=None):
        resp = self.call_raw(method, params)
        if "error" in resp:
            e = resp["error"]
            raise RpcError(e.get("code"), e.get("message"), e.get("data"))
        return resp["result"]


def call(path, method, params=None, timeout=10.0):
    with RpcClient(path, timeout) as c:
        return c.call(method, params)
