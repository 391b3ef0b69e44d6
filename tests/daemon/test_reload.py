# SPDX-License-Identifier: BSD-3-Clause
"""config.reload and SIGHUP re-read the --config file and apply the
difference (doc/configuration.md, "Reload"): the file owns the ports it
names and its policy; ports added over RPC stay; a file that does not
validate, or changes a setting fixed at start, is refused whole and the
running state stays; a port the reload does not touch keeps forwarding."""
import copy
import json
import os
import signal
import time

import pytest

from sngen import drops_total, port_table, wait_settled

pytestmark = pytest.mark.functional

POLICY_A = {"uplink": {"rate_bps": 0, "algorithm": "qfq"},
            "ports": {"vm0": {"rate_bps": 20000000, "weight": 2}}}
POLICY_B = {"uplink": {"rate_bps": 0, "algorithm": "drr"},
            "ports": {"vm2": {"rate_bps": 5000000, "weight": 3}}}


def port_entry(d, name, **kw):
    return {"name": name, "type": "vhost-user", "path": d.vhost_path(name), "mode": "server", **kw}


def write_config(d, config=None, text=None):
    """Replace the daemon's --config file (atomically, as an editor would)."""
    tmp = d.cfg_path.with_suffix(".tmp")
    tmp.write_text(text if text is not None else json.dumps(config, indent=2))
    os.replace(tmp, d.cfg_path)


def sighup_reload(d, timeout=20.0):
    """SIGHUP, then the reload's log line (the outcome or the refusal)."""
    before = d.log_path.read_text(errors="replace").count("reload: ")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [ln for ln in d.log_path.read_text(errors="replace").splitlines()
                 if "reload: " in ln]
        done = [ln for ln in lines[before:] if "reload: SIGHUP" not in ln]
        if done:
            return done[-1]
        assert d.alive(), d.log_tail()
        time.sleep(0.05)
    raise TimeoutError(f"no reload line after SIGHUP:\n{d.log_tail()}")


def reload_error(d):
    with d.client() as c:
        try:
            c.call("config.reload")
        except Exception as e:   # RpcError: code and message
            return e
    pytest.fail("config.reload accepted a file it should refuse")


def ports(d):
    return {p["name"]: p for p in d.rpc("port.list")["ports"]}


def policy(d):
    p = d.rpc("policy.get")
    p.pop("generation")
    return p


@pytest.mark.parametrize("how", ["rpc", "sighup"])
def test_reload_ports(schednicd, sn_tmpdir, how):
    d = schednicd(ports=[], start=False)
    d.config["ports"] = [port_entry(d, "vm0", completion="deferred", max_hold_us=1000),
                         port_entry(d, "vm1"), port_entry(d, "vm3")]
    d.start()
    d.rpc("port.add", {"name": "rpc0", "path": d.vhost_path("rpc0")})
    owners = {n: p["owner"] for n, p in ports(d).items()}
    assert owners == {"vm0": "file", "vm1": "file", "vm3": "file", "rpc0": "rpc"}
    assert d.port_stats("rpc0")["owner"] == "rpc" and d.port_stats("vm0")["owner"] == "file"
    ino = {n: os.stat(d.vhost_path(n)).st_ino for n in ("vm0", "vm3", "rpc0")}

    new = copy.deepcopy(d.config)
    new["ports"] = [port_entry(d, "vm0", completion="deferred", max_hold_us=5000,
                               unmarked_max_hold_us=500),    # hold limits: in place
                    port_entry(d, "vm3", queues=2),           # queues: deleted and added
                    port_entry(d, "vm2")]                     # new; vm1 gone
    write_config(d, new)
    if how == "rpc":
        r = d.rpc("config.reload")
        assert r["config"] == str(d.cfg_path)
        assert r["ports"] == {"added": ["vm2"], "changed": ["vm0"], "recreated": ["vm3"],
                              "removed": ["vm1"], "unchanged": [], "kept": ["rpc0"]}, r
        assert r["policy"] == "kept", r
    else:
        line = sighup_reload(d)
        assert ("reload: ports added vm2, changed vm0, recreated vm3, removed vm1; "
                "policy kept") in line, line
    now = ports(d)
    assert set(now) == {"vm0", "vm2", "vm3", "rpc0"}, now
    assert {n: p["owner"] for n, p in now.items()} == {"vm0": "file", "vm2": "file",
                                                       "vm3": "file", "rpc0": "rpc"}
    c = d.port_stats("vm0")["completion"]
    assert (c["max_hold_us"], c["unmarked_max_hold_us"]) == (5000, 500), c
    assert len(now["vm3"]["queues"]) == 2
    assert not os.path.exists(d.vhost_path("vm1"))
    # vm0 and rpc0 kept their listening sockets; vm3's was made again
    assert os.stat(d.vhost_path("vm0")).st_ino == ino["vm0"]
    assert os.stat(d.vhost_path("rpc0")).st_ino == ino["rpc0"]
    assert os.stat(d.vhost_path("vm3")).st_ino != ino["vm3"]
    # The same file again: nothing to do.
    if how == "rpc":
        r = d.rpc("config.reload")
        assert r["ports"]["unchanged"] == ["vm0", "vm3", "vm2"] and r["ports"]["kept"] == ["rpc0"]
        assert not (r["ports"]["added"] or r["ports"]["changed"] or r["ports"]["recreated"]
                    or r["ports"]["removed"]), r
    else:
        line = sighup_reload(d)
        assert "ports added -, changed -, recreated -, removed -; policy kept" in line, line


@pytest.mark.parametrize("how", ["rpc", "sighup"])
def test_reload_policy(schednicd, how):
    d = schednicd(ports=["vm0", "vm2"], policy=POLICY_A)
    gen0 = d.rpc("policy.get")["generation"]
    assert policy(d)["ports"]["vm0"]["rate_bps"] == 20000000

    def do_reload():
        if how == "rpc":
            return d.rpc("config.reload")["policy"]
        line = sighup_reload(d)
        assert "reload: ports added -" in line, line
        return line.split("; policy ")[1].split()[0]

    new = copy.deepcopy(d.config)
    new["policy"] = POLICY_B
    write_config(d, new)
    assert do_reload() == "replaced"
    got = policy(d)
    assert got["uplink"]["algorithm"] == "drr" and set(got["ports"]) == {"vm2"}, got
    assert got["ports"]["vm2"]["rate_bps"] == 5000000 and got["ports"]["vm2"]["weight"] == 3
    gen1 = d.rpc("policy.get")["generation"]
    assert gen1 > gen0
    assert do_reload() == "unchanged"                # the file's policy is in force
    assert d.rpc("policy.get")["generation"] == gen1
    # A policy set at run time stays when the file has none.
    d.rpc("policy.set", {"policy": POLICY_A})
    set_by_rpc = policy(d)
    del new["policy"]
    write_config(d, new)
    assert do_reload() == "kept"
    assert policy(d) == set_by_rpc


def _bad_json(d, cfg):
    return None, '{"ports": [ {"name": "vm0",, } ]}'


def _bad_mode(d, cfg):
    cfg["ports"].append(port_entry(d, "vm9", mode="both"))
    return cfg, None


def _bad_policy(d, cfg):
    cfg["policy"] = {"ports": {"vm0": {"weight": 0}}}
    return cfg, None


def _max_ports(d, cfg):
    cfg["datapath"]["max_ports"] = 32
    return cfg, None


def _main_cpu(d, cfg):
    cfg["eal"]["main_cpu"] = 1 - cfg["eal"]["main_cpu"]
    return cfg, None


def _socket(d, cfg):
    cfg["control"]["socket"] = cfg["control"]["socket"] + "2"
    return cfg, None


def _rpc_name(d, cfg):
    cfg["ports"].append(port_entry(d, "rpc0"))
    return cfg, None


def _rpc_path(d, cfg):
    cfg["ports"].append({**port_entry(d, "vm7"), "path": d.vhost_path("rpc0")})
    return cfg, None


REFUSED = [
    (_bad_json, r"schednicd0.json:1:"),
    (_bad_mode, 'ports[2].mode: must be "server" or "client"'),
    (_bad_policy, "policy.ports.vm0.weight"),
    (_max_ports, "datapath.max_ports: cannot change at run time"),
    (_main_cpu, "eal.main_cpu: cannot change at run time"),
    (_socket, "control.socket: cannot change at run time"),
    (_rpc_name, "ports[2].name: rpc0 is a port added at run time"),
    (_rpc_path, "ports[2].path: "),
]


@pytest.mark.parametrize("edit,message", REFUSED, ids=[f.__name__[1:] for f, _ in REFUSED])
def test_reload_refused_state_unchanged(schednicd, edit, message):
    d = schednicd(ports=["vm0", "vm1"], policy=POLICY_A)
    d.rpc("port.add", {"name": "rpc0", "path": d.vhost_path("rpc0")})
    before = (d.rpc("port.list"), d.rpc("policy.get"))
    cfg, text = edit(d, copy.deepcopy(d.config))
    # every change the file also makes is not applied either
    if cfg is not None:
        cfg["ports"][0]["completion"] = "deferred"
        del cfg["ports"][1]
        cfg["ports"].insert(1, port_entry(d, "vm5"))
    write_config(d, cfg, text)
    e = reload_error(d)
    assert e.code == -32004, e
    assert "config: " in e.message and message in e.message, e.message
    assert "nothing changed" in e.message, e.message
    assert (d.rpc("port.list"), d.rpc("policy.get")) == before
    line = sighup_reload(d)
    assert "reload: refused: config: " in line and message in line, line
    assert (d.rpc("port.list"), d.rpc("policy.get")) == before


def test_reload_keeps_unchanged_port_forwarding(schednicd, daemon_sngen):
    """Reloads (RPC and SIGHUP, adding and removing another port, changing
    the deferred sender's hold limits in place and replacing the policy)
    while vm0 -> vm1 runs: every frame arrives, none dropped, no link
    went down, and vm1's counter keeps rising across each reload."""
    names = ["vm0", "vm1"]
    n = 30000
    d = schednicd(ports=[], start=False)
    d.config["ports"] = [port_entry(d, "vm0", completion="deferred", max_hold_us=200000),
                         port_entry(d, "vm1")]
    d.start()
    # sn-gen shares CPU 0 with the daemon's main lcore (and the host's other
    # load): 4096 RX descriptors at 10 kpps let its sink fall 0.4 s behind
    # before vm1's ring fills.
    g = daemon_sngen([d.vhost_path(x) for x in names], "--flow", f"src=0,dst=1,count={n}",
                     "--rate", "10000", "--queue-size", "4096")
    g.wait("ready")
    for x in names:
        d.wait_port_state(x, "up")
    g.go("learn")
    t0 = wait_settled(d, lambda t: all(t[x]["rx_packets"] == 1 for x in names))
    (g.sync / "go-0").touch()

    def vm1_tx():
        return d.port_stats("vm1")["tx_packets"]

    def rising(a, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if vm1_tx() > a + 500:
                return
            time.sleep(0.05)
        pytest.fail(f"vm1 stopped receiving after a reload (stuck at {a}):\n{d.log_tail()}")

    rising(t0["vm1"]["tx_packets"])
    extra = copy.deepcopy(d.config)
    extra["ports"][0]["unmarked_max_hold_us"] = 2000
    extra["ports"].append(port_entry(d, "vm2"))
    extra["policy"] = {"ports": {"vm2": {"rate_bps": 1000000}}}
    write_config(d, extra)
    a = vm1_tx()
    r = d.rpc("config.reload")
    assert r["ports"]["added"] == ["vm2"] and r["ports"]["changed"] == ["vm0"], r
    assert r["ports"]["unchanged"] == ["vm1"] and not r["ports"]["recreated"], r
    assert d.port_stats("vm0")["completion"]["unmarked_max_hold_us"] == 2000
    assert r["policy"] == "replaced"
    rising(a)
    write_config(d, d.config)
    a = vm1_tx()
    line = sighup_reload(d)
    assert "changed vm0, recreated -, removed vm2" in line, line
    rising(a)
    g.wait("sent-0", 60)
    t = wait_settled(d, lambda t: t["vm0"]["rx_packets"] == 1 + n)
    res = g.finish()
    assert t["vm1"]["tx_packets"] == 1 + n, t["vm1"]["drops"]
    assert drops_total(t["vm0"]) == drops_total(t["vm1"]) == 0, (t["vm0"]["drops"],
                                                                  t["vm1"]["drops"])
    f = res["flows"][0]
    assert f["tx"] == f["rx"] == n and f["rx_ooo"] == 0, f
    assert all(p["link_downs"] == 0 for p in res["ports"]), res["ports"]
    assert d.port_stats("vm0")["completion"]["popped"] == 1 + n   # the deferred path
    assert port_table(d.stats()).keys() == set(names)
