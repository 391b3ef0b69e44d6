"""Untrusted-input hardening of schednicd (s13-R3 review): what a control
client or a config file names must never be destroyed or wedge the daemon."""
import json
import socket
import stat
from pathlib import Path

import pytest

from snlib.rpc import RpcError


def listening_socket(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(1)
    return s


def test_port_add_never_deletes_what_is_at_its_path(schednicd, sn_tmpdir):
    """port.add on a path that holds a regular file, another process's live
    socket or the daemon's own control socket: refused with -32000, the
    file stays. (Before: rte_vhost_driver_start's bind() failed and the
    error path's rte_vhost_driver_unregister() unlinked the path.)"""
    d = schednicd(ports=())
    regular = sn_tmpdir / "regular.txt"
    regular.write_text("keep me")
    other = listening_socket(sn_tmpdir / "other.sock")
    try:
        cases = [(regular, "not a socket"), (sn_tmpdir / "other.sock", "listens"),
                 (Path(d.socket), "listens")]
        for i, (path, word) in enumerate(cases):
            with pytest.raises(RpcError) as e:
                d.rpc("port.add", {"name": f"p{i}", "path": str(path)})
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


def test_config_port_on_regular_file_refused_file_kept(schednicd, sn_tmpdir):
    regular = sn_tmpdir / "vm0.sock"
    regular.write_text("keep me")
    d = schednicd(ports=("vm0",), start=False)
    with pytest.raises(RuntimeError) as e:
        d.start(timeout=30)
    assert d.proc.returncode == 1
    assert "not a socket" in str(e.value), str(e.value)
    assert regular.read_text() == "keep me"
