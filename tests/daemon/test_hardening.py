# SPDX-License-Identifier: BSD-3-Clause
"""Untrusted-input hardening of schednicd: what a control
client or a config file names must never be destroyed or wedge the daemon."""
import json
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from snlib.rpc import RpcError

pytestmark = pytest.mark.functional


def listening_socket(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(1)
    return s


def test_port_add_never_deletes_what_is_at_its_path(schednicd, sn_tmpdir):
    """port.add on a path that holds a regular file, another process's live
    socket or the daemon's own control socket: refused with -32000, the
    file stays (rte_vhost_driver_start's bind() fails there, and its error
    path's rte_vhost_driver_unregister() must not unlink the path)."""
    d = schednicd(ports=())
    regular = sn_tmpdir / "regular.txt"
    regular.write_text("keep me")
    other = listening_socket(sn_tmpdir / "other.sock")
    try:
        ctl = Path(d.socket)  # spelled differently: past the control-socket name check
        cases = [(regular, "not a socket"), (sn_tmpdir / "other.sock", "listens"),
                 (f"{ctl.parent}//{ctl.name}", "listens")]
        for i, (path, word) in enumerate(cases):
            with pytest.raises(RpcError) as e:
                d.rpc("port.add", {"name": f"p{i}", "path": str(path)})
            path = Path(path)
            assert e.value.code == -32000 and word in e.value.message, e.value
            assert path.exists(), f"{path} removed by a refused port.add"
        assert regular.read_text() == "keep me"
        assert stat.S_ISSOCK((sn_tmpdir / "other.sock").stat().st_mode)
        assert [p["name"] for p in d.rpc("port.list")["ports"]] == []
        # The control socket still answers; a stale socket is still replaced.
        stale = sn_tmpdir / "stale.sock"
        listening_socket(stale).close()
        assert d.rpc("port.add", {"name": "ok", "path": str(stale)}) == {"name": "ok"}
    finally:
        other.close()


def test_port_add_on_listener_with_full_backlog_refused(schednicd, sn_tmpdir):
    """A live socket whose listener never accepts and whose backlog is
    full: the probe connect() must not block the control thread (a
    blocking Unix-socket connect waits for backlog room). Refused as a live
    socket, at once; the daemon answers."""
    d = schednicd(ports=())
    path = sn_tmpdir / "wedged.sock"
    lst = listening_socket(path)
    fillers = []
    try:
        while True:                      # fill the backlog (listen(1))
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            fillers.append(c)
            try:
                c.connect(str(path))
            except BlockingIOError:
                break
            assert len(fillers) < 64, "backlog never filled"
        with pytest.raises(RpcError) as e:
            d.rpc("port.add", {"name": "w", "path": str(path)})
        assert e.value.code == -32000 and "listens" in e.value.message, e.value
        assert path.exists()
        assert [p["name"] for p in d.rpc("port.list")["ports"]] == []
    finally:
        for c in fillers:
            c.close()
        lst.close()


def test_client_port_on_control_socket_refused(schednicd):
    """A client-mode port on the control socket would speak vhost-user to
    the RPC server and reconnect forever; the config refuses that path, and
    now port.add does too."""
    d = schednicd(ports=())
    with pytest.raises(RpcError) as e:
        d.rpc("port.add", {"name": "loop", "path": d.socket, "mode": "client"})
    assert e.value.code == -32000 and "control socket" in e.value.message, e.value
    assert d.rpc("port.list")["ports"] == []


def test_config_port_on_regular_file_refused_file_kept(schednicd, sn_tmpdir):
    regular = sn_tmpdir / "vm0.sock"
    regular.write_text("keep me")
    d = schednicd(ports=("vm0",), start=False)
    with pytest.raises(RuntimeError) as e:
        d.start(timeout=30)
    assert d.proc.returncode == 1
    assert "not a socket" in str(e.value), str(e.value)
    assert regular.read_text() == "keep me"


@pytest.mark.parametrize("what,word", [("file", "exists and is not a socket"),
                                       ("live", "a process listens on this socket")])
def test_control_socket_path_taken(schednicd, sn_tmpdir, what, word):
    path = sn_tmpdir / "taken"
    other = None
    if what == "file":
        path.write_text("keep me")
    else:
        other = listening_socket(path)
    try:
        d = schednicd(ports=(), start=False, control={"socket": str(path)})
        d.cfg_path.write_text(json.dumps(d.config))
        r = subprocess.run([str(d.binary), "--config", str(d.cfg_path)], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 1 and word in r.stderr, r.stderr
        assert path.exists() and (what != "file" or path.read_text() == "keep me")
    finally:
        if other:
            other.close()


# ---- every integer field of port.add / policy.set: out-of-range values ----

BIG = (1 << 63) - 1
# (method, field path as the error names it, builder(value) -> params, max)
# "path" is replaced by one in the test's own temp dir (the largest valid
# value adds the port: its socket must not be left in /tmp)
PORT = {"name": "p", "path": "p.sock", "completion": "deferred"}


def _pol(path, v):
    """policy.set params with v at a dotted path under policy."""
    base = {"uplink": {}, "ports": {"vm0": {"classes": [{"proto": "tcp"}]}},
            "aggregates": {"g": {"rate_bps": 1000000}}}
    node = base
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = v
    return {"policy": base}


INT_FIELDS = [
    ("port.add", "max_hold_us", lambda v: {**PORT, "max_hold_us": v}, 10000000),
    ("port.add", "unmarked_max_hold_us", lambda v: {**PORT, "unmarked_max_hold_us": v}, 10000000),
    ("port.add", "queues", lambda v: {**PORT, "queues": v}, 8),
    ("port.add", "workers[0]", lambda v: {**PORT, "workers": [v]}, 0),
    ("policy.set", "policy.uplink.rate_bps", lambda v: _pol("uplink.rate_bps", v), 1 << 50),
    ("policy.set", "policy.uplink.overhead_bytes", lambda v: _pol("uplink.overhead_bytes", v), 1024),
    ("policy.set", "policy.ports.vm0.rate_bps", lambda v: _pol("ports.vm0.rate_bps", v), 400000000000),
    ("policy.set", "policy.ports.vm0.burst_bytes", lambda v: _pol("ports.vm0.burst_bytes", v), 1 << 30),
    ("policy.set", "policy.ports.vm0.weight", lambda v: _pol("ports.vm0.weight", v), 1 << 16),
    ("policy.set", "policy.ports.vm0.classes[0].rate_bps",
     lambda v: _pol("ports.vm0.classes.0.rate_bps", v), 400000000000),
    ("policy.set", "policy.ports.vm0.classes[0].burst_bytes",
     lambda v: _pol("ports.vm0.classes.0.burst_bytes", v), 1 << 30),
    ("policy.set", "policy.ports.vm0.classes[0].proto", lambda v: _pol("ports.vm0.classes.0.proto", v), 255),
    ("policy.set", "policy.ports.vm0.classes[0].dst_port",
     lambda v: _pol("ports.vm0.classes.0.dst_port", v), 65535),
    ("policy.set", "policy.ports.vm0.classes[0].src_port",
     lambda v: _pol("ports.vm0.classes.0.src_port", [0, v]), 65535),
    ("policy.set", "policy.aggregates.g.rate_bps", lambda v: _pol("aggregates.g.rate_bps", v), 400000000000),
    ("policy.set", "policy.aggregates.g.burst_bytes", lambda v: _pol("aggregates.g.burst_bytes", v), 1 << 30),
    ("policy.set", "policy.aggregates.g.update_ms", lambda v: _pol("aggregates.g.update_ms", v), 10000),
]
BAD_VALUES = [("negative", -1), ("int64-max", BIG), ("int64-min", -(1 << 63)), ("float", 1.5),
              ("float-integral", 2.0), ("string", "5"), ("bool", True), ("null", None)]


@pytest.mark.parametrize("method,field,build,hi", INT_FIELDS, ids=[f[1] for f in INT_FIELDS])
def test_integer_fields_reject_bad_values(schednicd, sn_tmpdir, method, field, build, hi):
    """Each bad value and max + 1: -32602 naming the field, nothing applied
    (the policy generation and the port list do not move)."""
    d = schednicd(ports=("vm0",))
    gen = d.rpc("policy.get")["generation"]
    leaf = field.split(".")[-1].split("[")[0]

    def params(v):
        p = build(v)
        return {**p, "path": str(sn_tmpdir / p["path"])} if "path" in p else p

    for name, v in BAD_VALUES + [("max+1", hi + 1)]:
        with pytest.raises(RpcError) as e:
            d.rpc(method, params(v))
        assert e.value.code == -32602, (name, v, e.value)
        assert leaf in e.value.message, (name, v, e.value.message)
    assert d.rpc("policy.get")["generation"] == gen
    assert [p["name"] for p in d.rpc("port.list")["ports"]] == ["vm0"]
    d.rpc(method, params(hi))  # the same request with the largest valid value passes
