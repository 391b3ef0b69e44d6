# SPDX-License-Identifier: BSD-3-Clause
"""RPC fuzzing against a live schednicd: the real handlers
(port.add/del, policy.set/del, stats.get, ...) get random and mutated
requests for a fixed time (SN_RPC_FUZZ_S, default 10 s; SN_RPC_FUZZ_SEED) on several
connections, some of which hang up mid-request or never read. Every answer
must be a well-formed JSON-RPC response with a standard or documented error
code, never -32603 (an internal error is a daemon bug for client input);
the daemon must stay up, and stats.get / port.list / policy.get must still
work afterwards. test_fuzzed_requests (test_ctl_server.py) does the same
against rpc_harness (mock handlers, ASan).

Paths sent to port.add are always inside the test's temp dir (mutations
never see a path), so the fuzzer cannot create or remove files elsewhere.
"""
import json
import os
import random
import socket
import time

import pytest

from snlib.rpc import RpcClient

pytestmark = pytest.mark.functional

FUZZ_S = float(os.environ.get("SN_RPC_FUZZ_S", "10"))
ALLOWED = {-32700, -32600, -32601, -32602, -32000, -32001, -32002, -32003}
BOUNDARY_INTS = [0, 1, -1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65, 255, 256, 1000, 999,
                 65535, 65536, 65537, 1 << 30, (1 << 30) + 1, 1 << 31, 1 << 32, 1 << 50,
                 (1 << 50) + 1, 4 * 10**11, 4 * 10**11 + 1, (1 << 63) - 1, -(1 << 63)]
# Valid JSON that jansson cannot hold as an integer (-32602 in params, else -32600/-32700).
HUGE_INTS = [1 << 63, 1 << 64, 10**30, -(1 << 63) - 1]


def rand_scalar(rng):
    return rng.choice([
        lambda: rng.choice(BOUNDARY_INTS), lambda: rng.randint(-10**6, 10**12),
        lambda: rng.choice([0.0, 0.5, -1.5, 1e300, 1000.0, 1e11]),
        lambda: rng.choice(["", "x", "tcp", "udp", "icmp", "qfq", "drr", "fifo", "fair", "tail",
                            "flow", "class", "drop", "clamp", "deferred", "immediate", "client",
                            "server", "vhost-user", "10.0.0.0/8", "1.2.3.4/33", "1.2.3.4/24",
                            "a" * 40, "vm0", "uplink", "\u00e9\u4e2d", "1.2.3", "../x",
                            "a" + "\u00e9" * 40 + "\u4e2d" * 90]),
        lambda: rng.choice([True, False, None]),
    ])()


def rand_value(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.6:
        return rand_scalar(rng)
    if r < 0.8:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["rate_bps", "weight", "burst_bytes", "x", "name"]): rand_value(rng, depth + 1)
            for _ in range(rng.randint(0, 3))}


def rand_class(rng, aggs):
    c = {}
    for k, gen in [("name", lambda: rng.choice(["c0", "c1", "", "a" * 40, 5])),
                   ("proto", lambda: rng.choice(["tcp", "udp", "icmp", 6, 256, -1, "sctp"])),
                   ("src", lambda: rng.choice(["10.0.0.0/8", "10.0.0.1/8", "1.2.3.4", "x", 7])),
                   ("dst", lambda: rng.choice(["10.1.0.0/16", "0.0.0.0/0", "1.2.3.4/33"])),
                   ("src_port", lambda: rng.choice([80, [1, 2], [2, 1], [0, 65536], -1, [1]])),
                   ("dst_port", lambda: rng.choice([443, [1000, 2000], "80", 70000])),
                   ("rate_bps", lambda: rng.choice(BOUNDARY_INTS + [1.5e6])),
                   ("burst_bytes", lambda: rng.choice(BOUNDARY_INTS)),
                   ("scope", lambda: rng.choice(["flow", "class", "x"])),
                   ("horizon", lambda: rng.choice(["drop", "clamp", None])),
                   ("aggregate", lambda: rng.choice(aggs + ["nope"])),
                   ("bogus", lambda: rand_value(rng))]:
        if rng.random() < 0.35:
            c[k] = gen()
    return c


def rand_policy(rng):
    aggs = [f"g{i}" for i in range(rng.randint(0, 3))]
    pol = {}
    if rng.random() < 0.5:
        pol["uplink"] = {k: v for k, v in [
            ("rate_bps", rng.choice(BOUNDARY_INTS)), ("algorithm", rng.choice(["qfq", "drr", "fifo", "wfq", 1])),
            ("overhead_bytes", rng.choice(BOUNDARY_INTS)), ("overload", rng.choice(["tail", "fair", 0]))]
            if rng.random() < 0.5}
    if aggs:
        pol["aggregates"] = {a: {k: rng.choice(BOUNDARY_INTS) for k in ("rate_bps", "burst_bytes", "update_ms")
                                 if rng.random() < 0.7} for a in aggs}
    if rng.random() < 0.9:
        pol["ports"] = {}
        for _ in range(rng.randint(0, 4)):
            name = rng.choice(["vm0", "f0", "f1", "uplink", "bad name", "x" * 33, "p" + str(rng.randint(0, 99))])
            e = {k: rng.choice(BOUNDARY_INTS + [1.5, "1000"]) for k in ("rate_bps", "burst_bytes", "weight")
                 if rng.random() < 0.6}
            if rng.random() < 0.4:
                e["classes"] = [rand_class(rng, aggs) for _ in range(rng.randint(0, 18))]
            pol["ports"][name] = e
    if rng.random() < 0.1:
        pol[rng.choice(["bogus", "uplink", "ports"])] = rand_value(rng)
    return pol


def rand_request(rng, tmpdir, req_id):
    m = rng.choice(["version", "port.add", "port.add", "port.del", "port.list", "stats.get",
                    "policy.get", "policy.set", "policy.set", "policy.set", "policy.del",
                    "nosuch.method", "port.ADD"])
    p = {}
    if m == "port.add":
        p = {"name": rng.choice(["f0", "f1", "f2", "vm0", "uplink", "", "a" * 33, "a b", 3]),
             "path": rng.choice([str(tmpdir / f"fz{rng.randint(0, 5)}.sock"), str(tmpdir / "vm0.sock"),
                                 str(tmpdir) + "/", "", str(tmpdir / ("p" * 120)), 5, None])}
        for k, gen in [("mode", lambda: rng.choice(["server", "client", "both", 1])),
                       ("completion", lambda: rng.choice(["immediate", "deferred", "x"])),
                       ("max_hold_us", lambda: rng.choice(BOUNDARY_INTS + [1.5])),
                       ("unmarked_max_hold_us", lambda: rng.choice(BOUNDARY_INTS)),
                       ("queues", lambda: rng.choice([1, 2, 8, 9, 0, -1, 2.0, "2"])),
                       ("workers", lambda: rng.choice([[0], [0, 0], [1], [-1], "0", [0.5]])),
                       ("type", lambda: rng.choice(["vhost-user", "tap"])),
                       ("bogus", lambda: rand_value(rng))]:
            if rng.random() < 0.3:
                p[k] = gen()
        p = {k: v for k, v in p.items() if v is not None or rng.random() < 0.5}
    elif m == "port.del":
        p = {"name": rng.choice(["f0", "f1", "f2", "nosuch", "uplink", 7, None])}
    elif m == "stats.get":
        p = rng.choice([{}, {"port": "vm0"}, {"port": "nosuch"}, {"port": 1}, {"x": 1}])
    elif m == "policy.set":
        p = {"policy": rand_policy(rng) if rng.random() < 0.95 else rand_value(rng)}
    elif m == "policy.del":
        p = {"port": rng.choice(["vm0", "f0", "nosuch", "", 3])}
    req = {"jsonrpc": "2.0", "method": m, "params": p, "id": req_id}
    r = rng.random()
    if r < 0.05:
        req["params"] = rand_value(rng)
    elif r < 0.08:
        del req["jsonrpc"]
    elif r < 0.10:
        req["id"] = rng.choice([[1], {"a": 1}, True, 1.5])
    elif r < 0.12:
        req[rng.choice(["a" + "\u00e9" * 40, "extra"])] = 1
    return json.dumps(req, ensure_ascii=rng.random() < 0.5).encode()


def mutate(rng, line: bytes, seeds) -> bytes:
    """Byte-level damage to a request without a path (see module doc)."""
    b = bytearray(line)
    for _ in range(rng.randint(1, 4)):
        op, i = rng.randrange(5), rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b = b[:i]
        elif op == 2:
            b[i:i] = rng.choice(seeds)[: rng.randint(1, 40)]
        elif op == 3:
            b[i:i] = rng.choice([b"1" * 30, b"-0", b"1e999", b"[" * 50, b"\\ud800", b"\\u0000",
                                 str(rng.choice(HUGE_INTS)).encode()])
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(b).replace(b"\n", b" ")


def check_response(line: bytes):
    r = json.loads(line)
    assert r.get("jsonrpc") == "2.0" and ("result" in r) != ("error" in r), r
    if "error" in r:
        e = r["error"]
        assert isinstance(e.get("code"), int) and isinstance(e.get("message"), str) and e["message"], r
        assert e["code"] in ALLOWED, f"unexpected error code for client input: {r}"
    return r


def test_live_daemon_survives_fuzzed_rpc(schednicd, sn_tmpdir):
    d = schednicd(ports=("vm0",))
    rng = random.Random(int(os.environ.get("SN_RPC_FUZZ_SEED", "20261123")))
    no_path = [b'{"jsonrpc":"2.0","method":"policy.set","params":{"policy":{"ports":{"vm0":'
               b'{"rate_bps":1000000,"weight":2,"classes":[{"proto":"tcp","dst_port":[1,2],'
               b'"rate_bps":5000,"scope":"class"}]}},"aggregates":{"g":{"rate_bps":2000}}}},"id":1}',
               b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":"vm0"},"id":2}',
               b'{"jsonrpc":"2.0","method":"policy.del","params":{"port":"vm0"},"id":"x"}',
               b'{"jsonrpc":"2.0","method":"port.del","params":{"name":"f0"},"id":null}',
               b'{"jsonrpc":"2.0","method":"version","id":4}']
    counts = {"sent": 0, "answered": 0, "errors": 0, "hangups": 0, "unread": 0}
    unread = []
    deadline = time.monotonic() + FUZZ_S
    n = 0
    while time.monotonic() < deadline:
        style = rng.random()
        if style < 0.08:  # hang up mid-request
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.socket)
            s.sendall(rand_request(rng, sn_tmpdir, n)[: rng.randint(0, 30)])
            s.close()
            counts["hangups"] += 1
            continue
        if style < 0.12 and len(unread) < 4:  # send, never read (dropped after IDLE_MS)
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.socket)
            s.sendall(b"".join(rand_request(rng, sn_tmpdir, i) + b"\n" for i in range(20)))
            unread.append(s)
            counts["unread"] += 1
            continue
        lines, expect, got = [], set(), set()
        for _ in range(rng.randint(1, 40)):
            n += 1
            if rng.random() < 0.6:
                lines.append(rand_request(rng, sn_tmpdir, 10**6 + n))
                if json.loads(lines[-1]).get("id") == 10**6 + n:
                    expect.add(10**6 + n)  # an id: an answer is due, whatever else is wrong
            else:
                lines.append(mutate(rng, rng.choice(no_path), no_path))
        with RpcClient(d.socket, timeout=30) as c:
            c.send_raw(b"\n".join(lines) + b'\n{"jsonrpc":"2.0","method":"version","id":"end"}\n')
            counts["sent"] += len(lines)
            while True:
                r = check_response(c.recv_line())
                got.add(r.get("id") if isinstance(r.get("id"), int) else None)
                counts["answered"] += 1
                counts["errors"] += "error" in r
                if r.get("id") == "end" and "result" in r:
                    break
        assert expect <= got, f"requests left unanswered: {sorted(expect - got)[:5]}"
        assert d.alive(), d.log_tail()
    for s in unread:
        s.close()
    assert d.alive(), d.log_tail()
    assert d.stats()["ports"] is not None
    names = {p["name"] for p in d.rpc("port.list")["ports"]}
    assert names <= {"vm0", "f0", "f1", "f2"}, names
    assert "generation" in d.rpc("policy.get")
    assert d.rpc("version")
    print(f"fuzz: {counts} in {FUZZ_S:g}s; ports left {sorted(names)}")
    assert counts["answered"] > 100 and counts["errors"] < counts["answered"]
