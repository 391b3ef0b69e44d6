# SPDX-License-Identifier: BSD-3-Clause
"""Errors that quote a long non-ASCII client string: messages cut client
strings to a byte length, which must not split a UTF-8 sequence (jansson
would refuse the message and the request would go unanswered, the client
waiting for its timeout). Every request with an id must get its error;
integers beyond 64 bits are answered like any out-of-range value."""
import json

import pytest

from ctlutil import RpcClient, assert_serving

pytestmark = pytest.mark.functional

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


# ---- integers beyond 64 bits ---------------------------------------------------
# Valid JSON that jansson cannot hold: answered like any out-of-range value,
# naming the parameter (not -32700 "too big integer" with id null).
BIG = [
    ("param", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":18446744073709551616},"id":7}',
     -32602, 7, "params.port: integer out of range"),
    ("nested", b'{"jsonrpc":"2.0","method":"port.add","params":{"name":"a","path":"/tmp/x.sock",'
     b'"workers":[0,-99999999999999999999]},"id":"s"}', -32602, "s", "params.workers[1]: integer out of range"),
    ("id", b'{"jsonrpc":"2.0","method":"version","id":18446744073709551616}', -32600, None,
     "id: integer out of range"),
    ("member", b'{"jsonrpc":"2.0","method":"version","x":1e3,"y":9223372036854775808,"id":8}', -32600, 8,
     "integer out of range"),
    ("not-an-object", b'[18446744073709551616]', -32700, None, "too big integer"),
    # not a valid request (an unknown member, a method that is an integer):
    # answered, with id null, although it has no id to be a notification
    ("invalid-no-id", b'{"jsonrpc":"2.0","i;":1,"method":55555555555555555555555555555,'
     b'"params":{"port":55555555555555555555555555555}}', -32600, None, "integer out of range"),
    ("bad-id-type", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":18446744073709551616},'
     b'"id":[1]}', -32600, None, "integer out of range"),
    # the +-2^63 edges, where a double cannot tell the in-range INT64_MAX /
    # INT64_MIN from the first integers beyond them (an INT64_MAX id beside
    # an overflowing parameter is a valid id, not -32600 "id: out of range")
    ("id-int64-max", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":18446744073709551616},'
     b'"id":9223372036854775807}', -32602, 9223372036854775807, "params.port: integer out of range"),
    ("id-int64-min", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":18446744073709551616},'
     b'"id":-9223372036854775808}', -32602, -9223372036854775808, "params.port: integer out of range"),
    ("param-2^63", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":9223372036854775808},'
     b'"id":9223372036854775807}', -32602, 9223372036854775807, "params.port: integer out of range"),
    ("param-below-min", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":-9223372036854775809},'
     b'"id":"m"}', -32602, "m", "params.port: integer out of range"),
    ("id-2^63", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":-9223372036854775809},'
     b'"id":9223372036854775808}', -32600, None, "id: integer out of range"),
    ("member-int64-max-id", b'{"jsonrpc":"2.0","method":"version","y":-9223372036854775809,'
     b'"id":9223372036854775807}', -32600, 9223372036854775807, "request: integer out of range"),
    ("in-string", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":"99999999999999999999\\"",'
     b'"x":[1,-99999999999999999999]},"id":"q"}', -32602, "q", "params.x[1]: integer out of range"),
    # only a valid JSON integer is an overflow; invalid number
    # text around a long digit run stays a parse error
    ("invalid-number", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":99999999999999999999-1},'
     b'"id":"v"}', -32700, None, "parse error"),
    ("leading-zeros", b'{"jsonrpc":"2.0","method":"stats.get","params":{"port":0099999999999999999999},'
     b'"id":"z"}', -32700, None, "parse error"),
]


@pytest.mark.parametrize("line,code,rid,word", [b[1:] for b in BIG], ids=[b[0] for b in BIG])
def test_integer_beyond_64_bits(ctl, line, code, rid, word):
    with RpcClient(ctl.socket, timeout=5) as c:
        c.send_raw(line + b"\n")
        r = json.loads(c.recv_line())
        c.send_raw(line.replace(b',"id":7}', b'}') + b"\n" if rid == 7 else b"")
        c.send_raw(b'{"jsonrpc":"2.0","method":"version","id":"after"}\n')
        nxt = json.loads(c.recv_line())  # the notification (rid 7 case) gets no answer
    assert r["error"]["code"] == code and r["id"] == rid and word in r["error"]["message"], r
    assert isinstance(r["id"], type(rid)), r
    assert nxt["id"] == "after"
    assert_serving(ctl)
