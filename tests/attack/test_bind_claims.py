# SPDX-License-Identifier: BSD-3-Clause
"""Who may claim a MAC: allowed_macs are exact hex MACs (config and
port.add name the element they refuse), one MAC is bound to one port of a
config, and a port added by hand with another port's allowed MAC does not
take that port's static entry, neither when it is added nor at a policy
publication (doc/isolation.md, "Static entries and the move policy").
"""
import json
import subprocess

import pytest

from snlib.rpc import RpcError
from sngen import peer_mac, port_table

pytestmark = [pytest.mark.attack, pytest.mark.functional]

MAC = "02:53:47:00:77:01"


def vm(sn_tmpdir, name, **kw):
    return {"name": name, "type": "vhost-user", "mode": "server",
            "path": str(sn_tmpdir / f"{name}.sock"), **kw}


def check_config(binary, tmp_path, cfg):
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(cfg))
    r = subprocess.run([str(binary), "--check-config", "--config", str(f)], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    return r.returncode, [l for l in r.stderr.splitlines() if l.startswith("config:")]


@pytest.mark.parametrize("mac", [" 2:53:47:00:77:01", "-2:53:47:00:77:01", "+2:53:47:00:77:01",
                                 "02:53:47:00:77: 1", "02:53:47:0x:77:01"])
def test_lax_mac_is_refused_in_config(schednicd_bin, tmp_path, mac):
    rc, lines = check_config(schednicd_bin, tmp_path,
                             {"ports": [vm(tmp_path, "vm0"), vm(tmp_path, "vm1", allowed_macs=[mac])]})
    assert rc == 1 and len(lines) == 1, (rc, lines)
    assert "ports[1].allowed_macs[0]: must be a MAC" in lines[0], lines


def test_one_mac_bound_to_two_ports_is_refused_in_config(schednicd_bin, tmp_path):
    rc, lines = check_config(schednicd_bin, tmp_path,
                             {"ports": [vm(tmp_path, "vm0", allowed_macs=[MAC]),
                                        vm(tmp_path, "vm1", allowed_macs=["02:00:00:00:00:09",
                                                                          MAC.upper()])]})
    assert rc == 1 and len(lines) == 1, (rc, lines)
    assert f"ports[1].allowed_macs[1]: {MAC} is also in ports[0].allowed_macs" in lines[0], lines


def test_lax_mac_is_refused_by_port_add(schednicd, sn_tmpdir):
    d = schednicd(ports=[])
    for mac in (" 2:53:47:00:77:01", "-2:53:47:00:77:01"):
        with pytest.raises(RpcError) as e:
            d.rpc("port.add", {"name": "vm9", "path": str(sn_tmpdir / "vm9.sock"),
                               "allowed_macs": [mac]})
        assert e.value.code == -32602 and "allowed_macs[0]: must be a MAC" in str(e.value), e.value
    assert [p["name"] for p in d.rpc("port.list")["ports"]] == []


def test_added_port_does_not_take_a_static_entry(schednicd, sn_tmpdir):
    """vm0 lists MAC (a static entry of vm0 from the start). vm1 is added
    by hand listing MAC too (the destination of a live migration): its
    install leaves vm0's entry, and so does every policy publication after,
    which installs every port's allowed_macs again."""
    d = schednicd(ports=[vm(sn_tmpdir, "vm0", allowed_macs=[MAC])])
    mt0 = d.stats()["mac_table"]
    assert port_table(d.stats())["vm0"]["mac"]["entries"] == 1
    d.rpc("port.add", {"name": "vm1", "path": str(sn_tmpdir / "vm1.sock"),
                       "allowed_macs": [MAC, peer_mac(1)]})
    for rate in (10**9, 2 * 10**9):
        d.rpc("policy.set", {"policy": {"ports": {"vm0": {"rate_bps": rate}}}})
    t = port_table(d.stats())
    mt = d.stats()["mac_table"]
    print("vm0", t["vm0"]["mac"], "vm1", t["vm1"]["mac"], "mac_table", mt)
    assert t["vm0"]["mac"]["entries"] == 1, t["vm0"]["mac"]
    assert t["vm1"]["mac"]["entries"] == 1, t["vm1"]["mac"]      # its own MAC only
    assert mt["moves"] == mt0["moves"], (mt0, mt)
    assert mt["move_refused"] >= mt0["move_refused"] + 3, (mt0, mt)
