# SPDX-License-Identifier: BSD-3-Clause
"""qemu-configs/libvirt/hooks/qemu against rpc_harness (no libvirt, no VM;
tests/vm/test_libvirt.py runs it for real): "prepare begin" adds the
domain's vhost-user ports, "release end" deletes them, and a control socket
whose max_clients are busy is waited for instead of failing the domain
start."""
import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

from ctlutil import REPO

pytestmark = pytest.mark.functional

HOOK = REPO / "qemu-configs" / "libvirt" / "hooks" / "qemu"


def domain_xml(sock_dir):
    return f"""<domain type='qemu'><name>d0</name><devices>
      <interface type='vhostuser'><mac address='52:54:00:AB:CD:01'/>
        <source type='unix' path='{sock_dir}/sn-d0.0.sock' mode='client'/>
        <driver queues='2'/></interface>
      <interface type='vhostuser'><source type='unix' path='/elsewhere/x.sock' mode='client'/></interface>
    </devices></domain>"""


def run_hook(hook, op, sub, xml):
    return subprocess.run([str(hook), "d0", op, sub, "-"], input=xml, capture_output=True,
                          text=True, timeout=30)


def install(tmp, h):
    d = tmp / "hooks"
    d.mkdir()
    shutil.copy(HOOK, d / "qemu")
    sock_dir = tmp / "vhost"
    (d / "schednic.json").write_text(json.dumps({"socket": h.socket, "socket_dirs": [str(sock_dir)]}))
    return d / "qemu", sock_dir


def test_hook_adds_and_deletes_ports(harness, sn_tmpdir):
    h = harness()
    hook, sock_dir = install(sn_tmpdir, h)
    r = run_hook(hook, "prepare", "begin", domain_xml(sock_dir))
    assert r.returncode == 0, r.stderr
    ports = h.rpc("port.list")["ports"]
    assert [(p["name"], p["path"], p["mode"], p["allowed_macs"]) for p in ports] == [
        ("sn-d0.0", f"{sock_dir}/sn-d0.0.sock", "server", ["52:54:00:ab:cd:01"])]
    r = run_hook(hook, "prepare", "begin", domain_xml(sock_dir))  # again: accepted
    assert r.returncode == 0, r.stderr
    r = run_hook(hook, "release", "end", domain_xml(sock_dir))
    assert r.returncode == 0 and h.rpc("port.list")["ports"] == []


def test_hook_waits_for_busy_control_socket(harness, sn_tmpdir):
    """A control socket at max_clients (-32002 'too many clients', or EPIPE)
    is waited for: it must not fail the domain start."""
    h = harness(max_clients=1)
    hook, sock_dir = install(sn_tmpdir, h)
    held = socket.socket(socket.AF_UNIX)
    held.connect(h.socket)
    time.sleep(0.2)
    threading.Timer(0.7, held.close).start()
    r = run_hook(hook, "prepare", "begin", domain_xml(sock_dir))
    assert r.returncode == 0, r.stderr
    assert [p["name"] for p in h.rpc("port.list")["ports"]] == ["sn-d0.0"]


def test_hook_binding_can_be_turned_off(harness, sn_tmpdir):
    """"bind_macs": false in the hook's settings: no allowed_macs."""
    h = harness()
    hook, sock_dir = install(sn_tmpdir, h)
    cfg = hook.parent / "schednic.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "bind_macs": False}))
    r = run_hook(hook, "prepare", "begin", domain_xml(sock_dir))
    assert r.returncode == 0, r.stderr
    assert [p["allowed_macs"] for p in h.rpc("port.list")["ports"]] == [[]]
