# SPDX-License-Identifier: BSD-3-Clause
"""sn_rpc.c paths only the harness can reach: test-only methods (big
responses, every param type, failing and unimplemented handlers), slow
readers, bad schemas, socket ownership. The harness runs under ASan/UBSan
and must exit 0 (no leak, no UB) at teardown.
"""
import json
import os
import random
import socket
import subprocess
import time

import pytest

from ctlutil import IDLE_S, assert_serving, load_schema, request_line, rpc_error, \
    wait_closed
from snlib.rpc import RpcClient

pytestmark = pytest.mark.functional


def test_every_param_type_validated(harness):
    h = harness()
    good = {"s": "x", "i": -3, "n": 2.5, "b": False, "o": {"k": [1]}, "a": [1, "2"], "e": 2}
    assert h.rpc("test.echo", good) == {**good, "d": "off"}  # schema default added
    assert h.rpc("test.echo", {"n": 7, "d": "on"}) == {"n": 7, "d": "on"}  # int is a number
    bad = [("d", "maybe"), ("s", 1), ("i", 1.5), ("i", "1"), ("i", True), ("n", "1"), ("b", 0), ("b", None),
           ("o", []), ("a", {}), ("e", 4), ("e", "1")]
    for key, val in bad:
        e = rpc_error(h, "test.echo", {key: val})
        assert e.code == -32602 and f"params.{key}" in e.message, (key, val, e.message)
    assert "1, 2, 3" in rpc_error(h, "test.echo", {"e": 9}).message


def test_handler_failure_and_unimplemented(harness):
    h = harness()
    e = rpc_error(h, "test.fail")
    assert e.code == -32603 and e.message
    e = rpc_error(h, "test.unimplemented")
    assert e.code == -32601 and "not implemented" in e.message
    e = rpc_error(h, "test.big", {})
    assert e.code == -32602 and "size" in e.message


def test_big_response_to_slow_reader_does_not_block_others(harness):
    h = harness()
    size = 3 << 20
    slow = RpcClient(h.socket, timeout=30)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.send_raw(request_line("test.big", {"size": size}, req_id="big"))
    time.sleep(0.3)
    t0 = time.monotonic()
    for _ in range(20):  # the server is not stuck writing to `slow`
        assert_serving(h)
    assert time.monotonic() - t0 < 10
    got = b""
    while b"\n" not in got:
        chunk = slow.sock.recv(8192)
        assert chunk, "connection closed before the big response was complete"
        got += chunk
        time.sleep(0.0005 if len(got) > 65536 else 0.01)
    r = json.loads(got)
    assert r["id"] == "big" and len(r["result"]["data"]) == size
    slow.close()


def test_response_over_bound_drops_client(harness):
    h = harness()
    before = h.rpc("stats.get")["control"]["dropped"]["output_overflow"]
    with RpcClient(h.socket, timeout=20) as c:
        c.send_raw(request_line("test.big", {"size": 20 << 20}))
        assert wait_closed(c.sock, 20) == b""
    assert_serving(h)
    assert h.rpc("stats.get")["control"]["dropped"]["output_overflow"] == before + 1


def test_client_that_never_reads_is_dropped(harness):
    """Pipelined requests whose answers are never read: back-pressure, then
    the idle timeout; meanwhile other clients are served."""
    h = harness()
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(h.socket)
    s.settimeout(2)
    batch = request_line("test.big", {"size": 60000}) * 100  # 6 MB of answers each
    blocked = False
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 10 and not blocked:
            s.send(batch)
    except socket.timeout:
        blocked = True  # the server stopped reading: back-pressure
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("dropped instead of back-pressure:\n" + h.log_tail())
    assert blocked, "the server kept reading while its output was backed up"
    assert "too many unread" not in h.log_tail()
    assert_serving(h)
    time.sleep(IDLE_S + 2)  # not reading at all: no byte moves
    assert_serving(h)
    wait_closed(s, 10)  # what the kernel buffered, then EOF (or reset)
    s.close()
    assert "idle timeout, responses unread" in h.log_tail()


def test_stale_socket_replaced(harness, sn_tmpdir):
    path = sn_tmpdir / "stale.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # bound, never listening: what a crashed daemon leaves
    stale.close()
    h = harness(socket_path=path)
    assert_serving(h)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_parent_dirs_created(harness, sn_tmpdir):
    path = sn_tmpdir / "a" / "b" / "ctl.sock"
    h = harness(socket_path=path)
    assert_serving(h)
    assert oct(os.stat(path.parent).st_mode & 0o777) == "0o700"


def test_live_socket_and_non_socket_not_stolen(harness_bin, harness, sn_tmpdir):
    h = harness()
    second = subprocess.run([str(harness_bin), h.socket, str(h.schema_path), "4096", "4"],
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 1 and "in use" in second.stderr
    assert_serving(h)  # the first server still owns its socket
    regular = sn_tmpdir / "file.sock"
    regular.write_text("keep me")
    r = subprocess.run([str(harness_bin), str(regular), str(h.schema_path), "4096", "4"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and regular.read_text() == "keep me"


def test_destroy_unlinks_only_own_socket(harness, sn_tmpdir):
    h = harness()
    os.unlink(h.socket)  # someone replaced the path with another file
    with open(h.socket, "w") as f:
        f.write("other")
    assert h.stop() == 0
    assert open(h.socket).read() == "other"


BAD_SCHEMAS = [
    ("not json", "schema"),
    ('{"methods": {}}', "methods"),
    ('{"methods": {"m": {}}}', "params"),
    ('{"methods": {"m": {"params": {"p": {"type": "str"}}}}}', "type"),
    ('{"methods": {"m": {"params": {"p": {"type": "string", "required": 1}}}}}', "required"),
    ('{"methods": {"m": {"params": {"p": {"type": "string", "enum": [1]}}}}}', "enum"),
    ('{"methods": {"m": {"params": {}}, "m": {"params": {}}}}', "duplicate"),
    ('{"methods": {"m": {"params": {"p": {"type": "string", "default": 1}}}}}', "default"),
    ('{"methods": {"m": {"params": {"p": {"type": "string", "enum": ["a"], "default": "b"}}}}}',
     "default"),
]


@pytest.mark.parametrize("text,word", BAD_SCHEMAS)
def test_bad_schema_rejected(harness_bin, sn_tmpdir, text, word):
    schema = sn_tmpdir / "bad.json"
    schema.write_text(text)
    sock = sn_tmpdir / "bad.sock"
    r = subprocess.run([str(harness_bin), str(sock), str(schema), "4096", "4"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "schema" in r.stderr and word in r.stderr, r.stderr
    assert not sock.exists()


def test_schema_file_is_the_one_compiled_in(harness):
    """The harness serves the repo's rpc_api.json unchanged (plus test.*)."""
    h = harness(schema=load_schema())
    assert h.rpc("version")["api"] == load_schema()["api"]
    assert rpc_error(h, "test.big", {"size": 1}).code == -32601


def test_limits_validated(harness_bin, sn_tmpdir):
    schema = sn_tmpdir / "api.json"
    schema.write_text(json.dumps(load_schema()))
    for max_req, max_clients in (("10", "4"), ("4096", "0")):
        r = subprocess.run([str(harness_bin), str(sn_tmpdir / "l.sock"), str(schema), max_req,
                            max_clients], capture_output=True, text=True, timeout=30)
        assert r.returncode == 1 and "Invalid argument" in r.stderr


def test_fuzzed_requests(harness):
    """Mutated requests (flips, cuts, splices, junk) on a few connections:
    every answer is a well-formed JSON-RPC response; the server survives
    (and, built with ASan/UBSan, exits 0 at teardown)."""
    h = harness()
    rng = random.Random(20261122)
    seeds = [request_line(m, p, req_id=i) for i, (m, p) in enumerate([
        ("version", None), ("port.add", {"name": "f0", "path": "/tmp/sn-fuzz.sock"}),
        ("port.del", {"name": "f0"}), ("port.list", {}), ("stats.get", {"port": "f0"}),
        ("test.echo", {"s": "x", "i": 1, "o": {"a": [1, {"b": None}]}, "e": 2}),
        ("test.big", {"size": 100})])]
    for conn in range(8):
        lines = []
        for _ in range(300):
            b = bytearray(rng.choice(seeds)[:-1])
            for _ in range(rng.randint(1, 4)):
                op, i = rng.randrange(4), rng.randrange(len(b) + 1)
                if op == 0 and b:
                    b[min(i, len(b) - 1)] = rng.randrange(256)
                elif op == 1:
                    b = b[:i]
                elif op == 2:
                    b[i:i] = rng.choice(seeds)[:-1][: rng.randint(1, 40)]
                else:
                    b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            lines.append(bytes(b).replace(b"\n", b" ") + b"\n")
        with RpcClient(h.socket, timeout=20) as c:
            c.send_raw(b"".join(lines) + request_line("version", req_id="end"))
            while True:
                r = json.loads(c.recv_line())
                assert r["jsonrpc"] == "2.0" and ("result" in r) != ("error" in r), r
                if "error" in r:
                    assert isinstance(r["error"]["code"], int) and r["error"]["message"]
                if r.get("id") == "end" and "result" in r:
                    break
    assert_serving(h)


def test_out_of_fds_pauses_accept_instead_of_spinning(harness):
    """With RLIMIT_NOFILE exhausted, accept() fails with EMFILE and the
    connection stays queued: the server must back off, not spin on a
    readable listener, and serve again once fds are free."""
    h = harness(max_clients=64, nofile=16)
    held = []
    for _ in range(30):
        s = socket.socket(socket.AF_UNIX)
        s.connect(h.socket)
        held.append(s)
    time.sleep(0.5)
    cpu0, t0 = h.cpu_seconds(), time.monotonic()
    time.sleep(3)
    busy = (h.cpu_seconds() - cpu0) / (time.monotonic() - t0)
    assert "pausing" in h.log_tail()
    assert busy < 0.15, f"server used {busy:.0%} of a CPU while out of fds"
    for s in held:
        s.close()
    deadline = time.monotonic() + 10
    while True:  # queued connections are accepted, see EOF, are dropped
        try:
            assert_serving(h)
            break
        except (ConnectionError, OSError):
            assert time.monotonic() < deadline, h.log_tail()
            time.sleep(0.2)
