# SPDX-License-Identifier: BSD-3-Clause
"""JSON-RPC server behaviour: every method, every error path, hostile clients.

Each test runs against rpc_harness and against schednicd (fixture `ctl`);
after every abuse the server must still answer `version`.
"""
import json
import os
import socket
import stat
import threading
import time

import pytest

from ctlutil import (IDLE_S, MAX_CLIENTS, MAX_REQ, assert_serving, exchange, request_line,
                     rpc_error, wait_closed)
from snlib.rpc import RpcClient

pytestmark = pytest.mark.functional

DROP_KEYS = {"no_mbuf", "ring_full", "unknown_dst", "malformed", "port_down", "hairpin", "gso_failed",
             "spoofed", "spoofed_arp", "spoofed_nd",
             "quota_backlog"}


# ---- each method ----------------------------------------------------------

def test_version(ctl):
    r = ctl.rpc("version")
    assert r["version"] == "0.1.0" and r["api"] == 1
    assert isinstance(r["dpdk"], str) and r["dpdk"]
    if ctl.kind == "daemon":
        assert "22.11" in r["dpdk"]


def test_port_add_list_del(ctl, sn_tmpdir):
    a, b = str(sn_tmpdir / "va.sock"), str(sn_tmpdir / "vb.sock")
    assert ctl.rpc("port.add", {"name": "va", "path": a}) == {"name": "va"}
    assert ctl.rpc("port.add", {"name": "vb", "path": b, "mode": "server",
                                "type": "vhost-user"}) == {"name": "vb"}
    ports = {p["name"]: p for p in ctl.rpc("port.list")["ports"]}
    assert set(ports) >= {"va", "vb"}
    assert {k: v for k, v in ports["va"].items() if k != "queues"} == {
        "name": "va", "type": "vhost-user", "owner": "rpc", "path": a, "mode": "server",
        "state": "down", "completion_mode": "immediate", "allowed_macs": [], "allowed_ips": []}
    if ctl.kind == "daemon":
        # queue -> worker map; one worker outside layout ncore
        assert ports["va"]["queues"] == [{"queue": 0, "worker": 0}], ports["va"]
        assert stat.S_ISSOCK(os.stat(a).st_mode), "server-mode port has no socket"
    assert rpc_error(ctl, "port.add", {"name": "va", "path": str(sn_tmpdir / "o.sock")}).code == -32000
    assert rpc_error(ctl, "port.add", {"name": "vc", "path": a}).code == -32000
    for bad in ("", "x" * 33, "a b", "a/b", "uplink"):
        e = rpc_error(ctl, "port.add", {"name": bad, "path": str(sn_tmpdir / "z.sock")})
        assert e.code in ((-32602, -32000) if bad == "uplink" else (-32602,)), (bad, e)
    assert ctl.rpc("port.del", {"name": "va"}) == {}
    assert "va" not in {p["name"] for p in ctl.rpc("port.list")["ports"]}
    if ctl.kind == "daemon":
        assert not os.path.exists(a), "port.del left the server socket behind"
    e = rpc_error(ctl, "port.del", {"name": "va"})
    assert e.code == -32001 and "va" in e.message
    # the name and path are free again
    assert ctl.rpc("port.add", {"name": "va", "path": a}) == {"name": "va"}


def test_stats_get(ctl, sn_tmpdir):
    ctl.rpc("port.add", {"name": "st0", "path": str(sn_tmpdir / "st0.sock")})
    r = ctl.rpc("stats.get")
    assert {"ports", "mempool", "mac_table", "uptime_s"} <= set(r)
    assert set(r["mempool"]) >= {"size", "in_use"} and r["mempool"]["size"] > 0
    assert set(r["mac_table"]) >= {"entries", "learned", "aged", "moves", "full"}
    one = ctl.rpc("stats.get", {"port": "st0"})["ports"]
    assert [p["name"] for p in one] == ["st0"]
    p = one[0]
    for k in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes"):
        assert p[k] == 0, k
    assert set(p["drops"]) == DROP_KEYS and not any(p["drops"].values())
    assert p["state"] == "down" and p["type"] == "vhost-user"
    e = rpc_error(ctl, "stats.get", {"port": "nope"})
    assert e.code == -32001 and "nope" in e.message


def test_shutdown(ctl):
    sock = ctl.socket
    assert ctl.rpc("shutdown") == {}
    ctl.proc.wait(30)
    assert ctl.proc.returncode == 0
    assert not os.path.exists(sock), "control socket not unlinked"


def test_uplink_cannot_be_deleted(schednicd):
    d = schednicd(ports=(), uplink="net_ring0")
    names = {p["name"]: p for p in d.rpc("port.list")["ports"]}
    assert names["uplink"]["type"] == "uplink"
    e = rpc_error(d, "port.del", {"name": "uplink"})
    assert e.code == -32003
    assert "uplink" in {p["name"] for p in d.rpc("port.list")["ports"]}


# ---- JSON-RPC exactness ---------------------------------------------------

@pytest.mark.parametrize("req_id", [0, -7, 2**53, "abc", "", "ünï", None, 1.5])
def test_id_echoed(ctl, req_id):
    r = exchange(ctl.socket, request_line("version", req_id=req_id))
    assert r["jsonrpc"] == "2.0" and "result" in r
    assert "id" in r and r["id"] == req_id and type(r["id"]) is type(req_id)
    r = exchange(ctl.socket, request_line("nope", req_id=req_id))
    assert r["error"]["code"] == -32601 and r["id"] == req_id


def test_notifications_get_no_response(ctl):
    notes = [{"jsonrpc": "2.0", "method": "version"},
             {"jsonrpc": "2.0", "method": "nope"},
             {"jsonrpc": "2.0", "method": "port.del", "params": {"zzz": 1}},
             {"jsonrpc": "2.0", "method": "stats.get", "params": {"port": "nope"}}]
    data = b"".join(json.dumps(n).encode() + b"\n" for n in notes)
    r = exchange(ctl.socket, data + request_line("version", req_id="after"))
    assert r["id"] == "after", "a notification was answered"


INVALID = [  # (raw line, expected code, word the message must contain)
    (b"{bad json", -32700, "parse"),
    (b'{"jsonrpc": "2.0", "method": "version", "id": 1', -32700, "parse"),
    (b'{"jsonrpc":"2.0","method":"version","id":1,"id":2}', -32700, "duplicate"),
    (b'\xff\xfe garbage', -32700, "parse"),
    (b'[{"jsonrpc": "2.0", "method": "version", "id": 1}]', -32600, "batch"),
    (b'[]', -32600, "batch"),
    (b'42', -32600, "object"),
    (b'"version"', -32600, "object"),
    (b'{"method": "version", "id": 1}', -32600, "jsonrpc"),
    (b'{"jsonrpc": "1.0", "method": "version", "id": 1}', -32600, "jsonrpc"),
    (b'{"jsonrpc": 2.0, "method": "version", "id": 1}', -32600, "jsonrpc"),
    (b'{"jsonrpc": "2.0", "id": 1}', -32600, "method"),
    (b'{"jsonrpc": "2.0", "method": 5, "id": 1}', -32600, "method"),
    (b'{"jsonrpc": "2.0", "method": "version", "id": {"a": 1}}', -32600, "id"),
    (b'{"jsonrpc": "2.0", "method": "version", "id": [1]}', -32600, "id"),
    (b'{"jsonrpc": "2.0", "method": "version", "id": true}', -32600, "id"),
    (b'{"jsonrpc": "2.0", "method": "version", "id": 1, "extra": 0}', -32600, "extra"),
    (b'{"jsonrpc": "2.0", "method": "version", "params": 3, "id": 1}', -32600, "params"),
    (b'{"jsonrpc": "2.0", "method": "version", "params": "x", "id": 1}', -32600, "params"),
    (b'{"jsonrpc": "2.0", "method": "version", "params": [], "id": 1}', -32602, "params"),
    (b'{"jsonrpc": "2.0", "method": "version", "params": {"x": 1}, "id": 1}', -32602, "x"),
    (b'{"jsonrpc": "2.0", "method": "version\\u0000x", "id": 1}', -32700, "parse"),
    (b"[" * 2100, -32700, "depth"),
    (b'{"jsonrpc": "2.0", "method": "no.such", "id": 1}', -32601, "no.such"),
    (b'{"jsonrpc": "2.0", "method": "", "id": 1}', -32601, "not found"),
]


@pytest.mark.parametrize("line,code,word", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_requests(ctl, line, code, word):
    with RpcClient(ctl.socket) as c:
        c.send_raw(line + b"\n")
        r = json.loads(c.recv_line())
        assert r["jsonrpc"] == "2.0" and "result" not in r
        assert r["error"]["code"] == code, r
        assert word.lower() in r["error"]["message"].lower(), r
        if code in (-32700,) or b'"id": 1' not in line:
            assert r["id"] is None
        # the same connection keeps working after an error
        c.send_raw(request_line("version", req_id=99))
        assert json.loads(c.recv_line())["id"] == 99
    assert_serving(ctl)


BAD_PARAMS = [  # (method, params, field the message must name)
    ("port.add", {"path": "/tmp/x.sock"}, "name"),
    ("port.add", {"name": "a"}, "path"),
    ("port.add", {"name": 5, "path": "/tmp/x.sock"}, "name"),
    ("port.add", {"name": "a", "path": None}, "path"),
    ("port.add", {"name": "a", "path": "/tmp/x.sock", "mode": "sideways"}, "mode"),
    ("port.add", {"name": "a", "path": "/tmp/x.sock", "mode": 1}, "mode"),
    ("port.add", {"name": "a", "path": "/tmp/x.sock", "type": "tap"}, "type"),
    ("port.add", {"name": "a", "path": "/tmp/x.sock", "colour": "red"}, "colour"),
    ("port.del", {}, "name"),
    ("port.del", {"name": ["a"]}, "name"),
    ("stats.get", {"port": 3}, "port"),
    ("stats.get", {"ports": "a"}, "ports"),
    ("port.list", {"all": True}, "all"),
    ("shutdown", {"now": True}, "now"),
]


@pytest.mark.parametrize("method,params,field", BAD_PARAMS,
                         ids=[f"{m}-{f}-{i}" for i, (m, _, f) in enumerate(BAD_PARAMS)])
def test_bad_params(ctl, method, params, field):
    e = rpc_error(ctl, method, params)
    assert e.code == -32602
    assert field in e.message, e.message
    assert ctl.rpc("port.list")["ports"] == [] or method != "port.add"
    assert_serving(ctl)  # in particular `shutdown` with bad params did not stop it


# ---- framing and hostile clients -----------------------------------------

def test_request_split_across_writes(ctl):
    line = request_line("version", req_id="slow")
    with RpcClient(ctl.socket) as c:
        for i in range(0, len(line), 7):
            c.send_raw(line[i:i + 7])
            time.sleep(0.02)
        assert json.loads(c.recv_line())["id"] == "slow"


def test_pipelined_requests_answered_in_order(ctl):
    n = 300
    data = b"".join(request_line("version", req_id=i) for i in range(n))
    with RpcClient(ctl.socket) as c:
        c.send_raw(b"\n  \r\n" + data)  # blank lines are ignored
        ids = [json.loads(c.recv_line())["id"] for _ in range(n)]
    assert ids == list(range(n))


def test_crlf_and_whitespace(ctl):
    r = exchange(ctl.socket, b'  {"jsonrpc":"2.0","method":"version","id":5}  \r\n')
    assert r["id"] == 5 and "result" in r


def test_request_at_limit_accepted_over_limit_closed(ctl):
    base = request_line("version", req_id="big")[:-1]
    pad = MAX_REQ - len(base)
    exact = base[:-1] + b" " * pad + b"}"
    assert len(exact) == MAX_REQ
    assert exchange(ctl.socket, exact + b"\n")["id"] == "big"

    with RpcClient(ctl.socket) as c:
        c.send_raw(b"{" + b" " * (MAX_REQ + 10))  # no newline ever
        got = wait_closed(c.sock, 10)
    r = json.loads(got.split(b"\n")[0])
    assert r["error"]["code"] == -32600 and "max_request_bytes" in r["error"]["message"]
    assert r["id"] is None

    with RpcClient(ctl.socket) as c:  # oversize with a newline, then a request
        try:
            c.send_raw(b" " * (3 * MAX_REQ) + b"\n" + request_line("version"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = wait_closed(c.sock, 10)
    assert got.count(b"\n") == 1 and b"-32600" in got
    assert_serving(ctl)


def test_huge_request_flood(ctl):
    """Megabytes on one connection without a newline: error, close, alive."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(ctl.socket)
    s.settimeout(10)
    sent = 0
    try:
        while sent < 8 << 20:
            sent += s.send(b"x" * 65536)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert_serving(ctl)


def test_hangup_mid_request(ctl):
    for i in range(30):
        s = socket.socket(socket.AF_UNIX)
        s.connect(ctl.socket)
        s.sendall(request_line("port.list")[: 5 + i])
        if i % 2:
            s.shutdown(socket.SHUT_WR)  # half-close: the partial line is dropped
            assert wait_closed(s, 5) == b""
        s.close()
    assert_serving(ctl)


def test_hangup_before_reading_answers(ctl):
    """Requests sent, connection closed before the answers: no SIGPIPE death."""
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX)
        s.connect(ctl.socket)
        try:
            s.sendall(b"".join(request_line("stats.get", req_id=i) for i in range(50)))
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused (max_clients) while earlier ones were still being dropped
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
        time.sleep(0.05)
    assert_serving(ctl)


def test_half_close_after_request_still_answered(ctl):
    with RpcClient(ctl.socket) as c:
        c.send_raw(request_line("version", req_id="hc"))
        c.sock.shutdown(socket.SHUT_WR)
        got = wait_closed(c.sock, 5)
    assert json.loads(got)["id"] == "hc"


def test_idle_clients_dropped(ctl):
    """No newline ever, or nothing at all: closed after the idle timeout,
    while other clients keep being served."""
    partial = socket.socket(socket.AF_UNIX)
    partial.connect(ctl.socket)
    partial.sendall(b'{"jsonrpc": "2.0", "meth')
    silent = socket.socket(socket.AF_UNIX)
    silent.connect(ctl.socket)
    t0 = time.monotonic()
    for _ in range(3):
        assert_serving(ctl)
        time.sleep(1)
    assert wait_closed(partial, IDLE_S + 10) == b""
    assert wait_closed(silent, IDLE_S + 10) == b""
    assert IDLE_S - 1 <= time.monotonic() - t0 <= IDLE_S + 10
    partial.close()
    silent.close()
    assert_serving(ctl)


def test_max_clients_flood(ctl):
    held = []
    for _ in range(MAX_CLIENTS):
        c = RpcClient(ctl.socket)
        c.send_raw(request_line("version"))
        c.recv_line()  # accepted and served
        held.append(c)
    refused = 0
    for _ in range(40):
        s = socket.socket(socket.AF_UNIX)
        s.connect(ctl.socket)  # the kernel backlog accepts; the server closes
        got = wait_closed(s, 10)
        s.close()
        if got:
            assert json.loads(got)["error"]["code"] == -32002
        refused += 1
    assert refused == 40
    for c in held:  # held clients were not disturbed
        c.send_raw(request_line("version", req_id="still"))
        assert json.loads(c.recv_line())["id"] == "still"
    held.pop().close()
    time.sleep(0.3)
    assert_serving(ctl)  # a slot is free again
    for c in held:
        c.close()


def test_two_concurrent_clients(ctl, sn_tmpdir):
    errors = []

    def worker(tag):
        try:
            with RpcClient(ctl.socket) as c:
                for i in range(100):
                    name = f"{tag}{i % 5}"
                    r = c.call_raw("port.add", {"name": name,
                                                "path": str(sn_tmpdir / f"{name}.sock")},
                                   req_id=f"{tag}-{i}a")
                    assert r["id"] == f"{tag}-{i}a" and "result" in r, r
                    r = c.call_raw("stats.get", {"port": name}, req_id=f"{tag}-{i}b")
                    assert r["id"] == f"{tag}-{i}b"
                    assert r["result"]["ports"][0]["name"] == name
                    r = c.call_raw("port.del", {"name": name}, req_id=f"{tag}-{i}c")
                    assert r["id"] == f"{tag}-{i}c" and r["result"] == {}, r
        except Exception as e:  # reported in the main thread
            errors.append(f"{tag}: {e!r}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in ("p", "q")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert ctl.rpc("port.list")["ports"] == []


def test_socket_mode_0600(ctl):
    st = os.stat(ctl.socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600


def test_daemon_replaces_stale_socket_and_unlinks_it(schednicd, sn_tmpdir):
    path = sn_tmpdir / "ctl0.sock"  # where the fixture puts the first daemon's socket
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # left behind by a crashed daemon: bound, nobody listening
    stale.close()
    d = schednicd(ports=())
    assert d.socket == str(path)
    assert_serving(d)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert d.stop() == 0  # SIGTERM: clean stop
    assert not path.exists()
