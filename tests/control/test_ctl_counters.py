# SPDX-License-Identifier: BSD-3-Clause
"""stats.get "control": every refused connection, dropped client and
rejected request of the control socket is counted by cause, for every
client."""
import socket
import time

import pytest

from ctlutil import IDLE_S, MAX_CLIENTS, MAX_REQ, RpcClient

pytestmark = pytest.mark.functional


def control(d):
    return d.rpc("stats.get")["control"]


def raw(d, data: bytes, read=True):
    with RpcClient(d.socket, timeout=10) as c:
        c.send_raw(data)
        return c.recv_line() if read else None


def test_control_counters_by_cause(schednicd):
    d = schednicd(ports=(), control={"max_request_bytes": MAX_REQ, "max_clients": MAX_CLIENTS})
    idle = socket.socket(socket.AF_UNIX)  # holds a slot, never sends: idle_timeout
    idle.connect(d.socket)
    t_idle = time.monotonic()
    c0 = control(d)

    raw(d, b'{"jsonrpc": "2.0", "method"\n')                                   # parse_error
    raw(d, b'[]\n')                                                            # invalid_request
    raw(d, b'{"jsonrpc": "2.0", "method": "no.such", "id": 1}\n')              # method_not_found
    raw(d, b'{"jsonrpc": "2.0", "method": "no.such"}\n'
           b'{"jsonrpc": "2.0", "method": "version", "id": 2}\n')               # + notification
    raw(d, b'{"jsonrpc": "2.0", "method": "port.del", "params": {"name": 3}, "id": 3}\n')
    raw(d, b'{"jsonrpc": "2.0", "method": "port.del", "params": {"name": "x"}, "id": 4}\n')
    raw(d, b'{"jsonrpc": "2.0", "method": "port.del", "params": {"name": "x"}}\n'
           b'{"jsonrpc": "2.0", "method": "version", "id": 5}\n')               # failed notification
    assert b"max_request_bytes" in raw(d, b"x" * (MAX_REQ + 10))                # oversize
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.socket)
    s.sendall(b'{"jsonrpc": "2.0", "met')                                     # partial_hangup
    s.close()
    time.sleep(0.5)  # the daemon sees the hang-ups above and frees their slots
    held = []
    for _ in range(MAX_CLIENTS - 1):  # with `idle`: max_clients slots taken
        h = socket.socket(socket.AF_UNIX)
        h.connect(d.socket)
        held.append(h)
    time.sleep(0.3)
    extra = socket.socket(socket.AF_UNIX)                                     # refused
    extra.connect(d.socket)
    extra.settimeout(5)
    assert b"-32002" in extra.recv(4096)
    extra.close()
    for h in held:
        h.close()
    time.sleep(max(0.0, IDLE_S + 1.0 - (time.monotonic() - t_idle)))
    c1 = control(d)
    idle.close()

    def delta(*path):
        a, b = c0, c1
        for k in path:
            a, b = a[k], b[k]
        return b - a

    errs = {k: delta("errors", k) for k in c1["errors"]}
    assert errs == {"parse_error": 1, "invalid_request": 1, "oversize": 1, "method_not_found": 2,
                    "invalid_params": 1, "failed": 2}, errs
    assert delta("dropped", "idle_timeout") == 1, (c0, c1)
    assert delta("dropped", "partial_hangup") == 1, (c0, c1)
    assert delta("dropped", "output_overflow") == 0
    assert delta("refused") == 1
    # parse, batch, 2+2+1+1+2 requests, oversize, and the stats.get reading c1
    assert delta("requests") == 1 + 1 + 1 + 2 + 1 + 1 + 2 + 1 + 1, (c0, c1)
    # 8 raw connections, partial, 3 held, the stats.get reading c1 (idle and
    # c0's were accepted before c0 was read)
    assert delta("accepted") == 8 + 1 + (MAX_CLIENTS - 1) + 1, (c0, c1)
