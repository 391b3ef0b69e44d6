"""Errors that quote a long non-ASCII client string (s13-R3): messages cut
client strings to a byte length, which split a UTF-8 sequence; jansson then
refused the message and the request went unanswered (the client waited for
its timeout). Every request with an id must get its error."""
import json

import pytest

from ctlutil import RpcClient, assert_serving

LONG = "a" + "\u00e9" * 40 + "\u4e2d" * 100  # 2- and 3-byte sequences, > 256 bytes

CASES = [
    ("unknown-param", {"method": "version", "params": {LONG: 1}}, -32602),
    ("unknown-method", {"method": LONG}, -32601),
    ("unknown-member", {"method": "version", LONG: 1}, -32600),
    ("handler-message", {"method": "stats.get", "params": {"port": LONG}}, -32001),
    ("port-del", {"method": "port.del", "params": {"name": LONG}}, None),
]


@pytest.mark.parametrize("req,code", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_long_utf8_in_error_answered(ctl, req, code):
    with RpcClient(ctl.socket, timeout=5) as c:
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 7, **req}, ensure_ascii=False).encode()
                   + b"\n")
        r = json.loads(c.recv_line())
    assert r["id"] == 7 and "error" in r, r
    assert code is None or r["error"]["code"] == code, r
    assert r["error"]["message"], r
    assert_serving(ctl)


def test_long_utf8_policy_port_name_answered(schednicd):
    d = schednicd(ports=())
    with RpcClient(d.socket, timeout=5) as c:
        c.send_raw(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "policy.set",
                               "params": {"policy": {"ports": {LONG: {}}}}},
                              ensure_ascii=False).encode() + b"\n")
        r = json.loads(c.recv_line())
    assert r["id"] == 8 and r["error"]["code"] == -32602, r
    assert "port name must match" in r["error"]["message"]
