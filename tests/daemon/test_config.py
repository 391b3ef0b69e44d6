# SPDX-License-Identifier: BSD-3-Clause
"""schednicd command line and configuration validation (no EAL started).

Table-driven: each bad config must make `schednicd --check-config` exit 1
with a message naming the offending key path; each good one must exit 0.
"""
import json
import resource
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "backend" / "daemon" / "app" / "default-config.json"


def run(binary, *args, timeout=30):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def check(binary, tmp_path, text):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text if isinstance(text, str) else json.dumps(text))
    return run(binary, "--check-config", "--config", cfg)


def port(name="vm0", path="/tmp/sn-x/vm0.sock", **kw):
    return {"name": name, "path": path, **kw}


# (id, config (dict or raw text), text the error line must contain)
BAD = [
    ("json-syntax", '{"eal": ', "cfg.json:"),
    ("json-dup-key", '{"eal": {}, "eal": {}}', "cfg.json:"),
    ("root-array", [], "(root): must be an object"),
    ("root-unknown", {"bogus": 1}, "config: bogus: unknown key"),
    ("eal-not-object", {"eal": 3}, "config: eal: must be an object"),
    ("eal-unknown", {"eal": {"huge_pages": True}}, "config: eal.huge_pages: unknown key"),
    ("eal-memory-type", {"eal": {"memory_mb": "1G"}}, "config: eal.memory_mb: must be an integer"),
    ("eal-memory-range", {"eal": {"memory_mb": 1}}, "config: eal.memory_mb: must be an integer in"),
    ("eal-memory-negative", {"eal": {"memory_mb": -5}}, "config: eal.memory_mb:"),
    ("eal-prefix-slash", {"eal": {"file_prefix": "a/b"}}, "config: eal.file_prefix:"),
    ("eal-prefix-empty", {"eal": {"file_prefix": ""}}, "config: eal.file_prefix:"),
    ("eal-cpu-range", {"eal": {"worker_cpu": 5000}}, "config: eal.worker_cpu:"),
    ("eal-cpu-type", {"eal": {"main_cpu": 0.5}}, "config: eal.main_cpu: must be an integer"),
    ("eal-extra-type", {"eal": {"extra_args": "--foo"}}, "config: eal.extra_args: must be an array"),
    ("eal-extra-item", {"eal": {"extra_args": ["--a", 7]}}, "config: eal.extra_args[1]:"),
    ("control-unknown", {"control": {"port": 80}}, "config: control.port: unknown key"),
    ("control-socket-empty", {"control": {"socket": ""}}, "config: control.socket:"),
    ("control-socket-long", {"control": {"socket": "/tmp/" + "s" * 200}}, "config: control.socket:"),
    ("control-clients-zero", {"control": {"max_clients": 0}}, "config: control.max_clients:"),
    ("control-request-small", {"control": {"max_request_bytes": 10}}, "config: control.max_request_bytes:"),
    ("datapath-burst-zero", {"datapath": {"burst": 0}}, "config: datapath.burst:"),
    ("datapath-burst-big", {"datapath": {"burst": 1000}}, "config: datapath.burst:"),
    ("datapath-mbufs-small", {"datapath": {"mbufs": 10}}, "config: datapath.mbufs:"),
    ("datapath-mbufs-word", {"datapath": {"mbufs": "many"}},
     'config: datapath.mbufs: must be "auto" or an integer'),
    ("datapath-mbufs-auto-memory", {"eal": {"memory_mb": 64}, "datapath": {"max_ports": 511}},
     "config: datapath.mbufs: \"auto\" sizes the pool for datapath.max_ports 511"),
    ("quota-unknown", {"quota": {"sockets": 4}}, "config: quota.sockets: unknown key"),
    ("quota-mbufs-small", {"quota": {"mbufs": 1}}, "config: quota.mbufs:"),
    ("quota-held-word", {"quota": {"held": "lots"}}, "config: quota.held:"),
    ("quota-not-object", {"quota": 5}, "config: quota: must be an object"),
    ("datapath-cache-vs-mbufs", {"datapath": {"mbufs": 511, "mbuf_cache": 512}},
     "config: datapath.mbuf_cache:"),
    ("datapath-mac-pow2", {"datapath": {"mac_table_size": 1000}},
     "config: datapath.mac_table_size: must be a power of two"),
    ("datapath-aging-zero", {"datapath": {"mac_aging_s": 0}}, "config: datapath.mac_aging_s:"),
    ("datapath-cpu-fair-big", {"datapath": {"cpu_fair_pct": 101}}, "config: datapath.cpu_fair_pct:"),
    # ncore accepts CPU fair dropping (one instance per worker), not a bad value
    ("datapath-cpu-fair-ncore-big", {"datapath": {"cpu_fair_pct": 101, "layout": "ncore"}},
     "config: datapath.cpu_fair_pct:"),
    ("datapath-cpu-fair-ncore-neg", {"datapath": {"cpu_fair_pct": -1, "layout": "ncore"}},
     "config: datapath.cpu_fair_pct:"),
    ("datapath-unknown", {"datapath": {"queues": 2}}, "config: datapath.queues: unknown key"),
    ("uplink-type", {"uplink": 5}, "config: uplink: must be an object"),
    ("uplink-devargs-empty", {"uplink": {"devargs": ""}}, "config: uplink.devargs:"),
    ("uplink-desc", {"uplink": {"rx_desc": 1}}, "config: uplink.rx_desc:"),
    ("uplink-name", {"uplink": {"name": "bad name"}}, "config: uplink.name:"),
    ("uplink-unknown", {"uplink": {"mtu": 9000}}, "config: uplink.mtu: unknown key"),
    ("ports-type", {"ports": {}}, "config: ports: must be an array"),
    ("ports-item-type", {"ports": ["vm0"]}, "config: ports[0]: must be an object"),
    ("ports-name-missing", {"ports": [{"path": "/tmp/a.sock"}]}, "config: ports[0].name: required"),
    ("ports-path-missing", {"ports": [{"name": "a"}]}, "config: ports[0].path: required"),
    ("ports-name-chars", {"ports": [port(), port("a b", "/tmp/b.sock")]}, "config: ports[1].name:"),
    ("ports-name-long", {"ports": [port("x" * 33)]}, "config: ports[0].name:"),
    ("ports-name-reserved", {"uplink": None, "ports": [port("uplink")]},
     'config: ports[0].name: "uplink" is reserved'),
    ("ports-name-uplink-clash", {"uplink": {"name": "up0"}, "ports": [port("up0")]},
     "config: ports[0].name:"),
    ("ports-name-dup", {"ports": [port("a", "/tmp/a.sock"), port("a", "/tmp/b.sock")]},
     "config: ports[1].name:"),
    ("ports-path-dup", {"ports": [port("a", "/tmp/a.sock"), port("b", "/tmp/a.sock")]},
     "config: ports[1].path:"),
    ("ports-path-control", {"control": {"socket": "/tmp/c.sock"}, "ports": [port("a", "/tmp/c.sock")]},
     "config: ports[0].path:"),
    ("ports-path-long", {"ports": [port("a", "/tmp/" + "p" * 200)]}, "config: ports[0].path:"),
    ("ports-mode", {"ports": [port("a", "/tmp/a.sock"), port("b", "/tmp/b.sock", mode="listen")]},
     'config: ports[1].mode: must be "server" or "client"'),
    ("ports-type-value", {"ports": [port(type="tap")]}, 'config: ports[0].type: must be "vhost-user"'),
    ("ports-unknown", {"ports": [port(vectors=2)]}, "config: ports[0].vectors: unknown key"),
    ("ports-queues-0", {"ports": [port(queues=0)]}, "config: ports[0].queues: must be an integer 1..8"),
    ("ports-queues-9", {"ports": [port(queues=9)]}, "config: ports[0].queues: must be an integer 1..8"),
    ("ports-queues-str", {"ports": [port(queues="2")]}, "config: ports[0].queues: must be an integer 1..8"),
    ("datapath-max-ports-zero", {"datapath": {"max_ports": 0}},
     "config: datapath.max_ports: must be an integer in [1, 511]"),
    ("datapath-max-ports-big", {"datapath": {"max_ports": 512}},
     "config: datapath.max_ports: must be an integer in [1, 511]"),
    ("ports-over-max-ports", {"datapath": {"max_ports": 2},
                              "ports": [port(f"v{i}", f"/tmp/sn-x/v{i}.sock") for i in range(3)]},
     "config: ports: 3 ports, more than datapath.max_ports 2"),
    ("ports-over-vhost-limit", {"datapath": {"max_ports": 511},
                                "ports": [port(f"v{i}", f"/tmp/sn-x/v{i}.sock") for i in range(512)]},
     "config: ports: 512 ports, more than the vhost library's limit 511"),
    ("policy-ports-over-max-ports", {"datapath": {"max_ports": 1}, "ports": [],
                                     "policy": {"ports": {"a": {}, "b": {}, "c": {}}}},
     "config: policy.ports: at most 2 entries (datapath.max_ports + 1)"),
    ("max-ports-net-vhost-uplink", {"datapath": {"max_ports": 511},
                                    "uplink": {"devargs": "net_vhost0,iface=/tmp/sn-x/up.sock"}},
     "config: datapath.max_ports: at most 510 with a net_vhost uplink"),
]

GOOD = [
    ("empty", {}),
    ("no-uplink-no-ports", {"uplink": None, "ports": []}),
    ("client-port", {"uplink": None, "ports": [port(mode="client"), port("vm1", "/tmp/sn-x/vm1.sock")]}),
    ("mq-port", {"uplink": None, "ports": [port(queues=8), port("vm1", "/tmp/sn-x/vm1.sock", queues=1)]}),
    ("partial-sections", {"eal": {"memory_mb": 256, "file_prefix": "x-1", "extra_args": ["--log-level=lib.eal:notice"]},
                          "datapath": {"burst": 64, "mac_table_size": 16}}),
    ("cpu-fair-ncore", {"datapath": {"cpu_fair_pct": 50, "layout": "ncore", "workers": 3}}),
    ("max-ports-511", {"datapath": {"max_ports": 511},
                       "ports": [port(f"v{i}", f"/tmp/sn-x/v{i}.sock") for i in range(511)]}),
]


@pytest.mark.parametrize("config,expect", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_config_names_key(schednicd_bin, tmp_path, config, expect):
    r = check(schednicd_bin, tmp_path, config)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.startswith("config:")]
    assert len(lines) == 1, r.stderr
    assert expect in lines[0], lines[0]


@pytest.mark.parametrize("config", [c[1] for c in GOOD], ids=[c[0] for c in GOOD])
def test_good_config(schednicd_bin, tmp_path, config):
    r = check(schednicd_bin, tmp_path, config)
    assert r.returncode == 0, r.stderr
    assert "config: ok" in r.stderr


def test_bad_config_stops_daemon_before_eal(schednicd_bin, tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"ports": [port(mode="both")]}))
    r = run(schednicd_bin, "--config", cfg)
    assert r.returncode == 1
    assert 'config: ports[0].mode: must be "server" or "client"' in r.stderr
    assert "EAL" not in r.stderr


def test_missing_config_file(schednicd_bin, tmp_path):
    r = run(schednicd_bin, "--check-config", "--config", tmp_path / "nope.json")
    assert r.returncode == 1
    assert "nope.json" in r.stderr and "No such file" in r.stderr


def test_config_file_is_a_directory(schednicd_bin, tmp_path):
    """The reason is named ("Is a directory"), not a bare "read error"."""
    r = run(schednicd_bin, "--check-config", "--config", tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip() == f"config: {tmp_path}: Is a directory", r.stderr


@pytest.mark.parametrize("text,expect", [("", "cfg.json:1:0:"), ("{}{}", "cfg.json:1:3:"),
                                         ('{"datapath": {"burst": 18446744073709551616}}',
                                          "too big integer"),
                                         ('{"datapath": {"burst": 32.0}}',
                                          "datapath.burst: must be an integer")],
                         ids=["empty", "two-objects", "int-over-2^64", "float-for-int"])
def test_config_file_contents_rejected(schednicd_bin, tmp_path, text, expect):
    r = check(schednicd_bin, tmp_path, text)
    assert r.returncode == 1 and expect in r.stderr, r.stderr


@pytest.mark.parametrize("text,expect", [
    ('{"ports [\\\n', "cfg.json:2:0: invalid escape near '\"ports [\\?'"),
    ('{"eal": {"bad\\nkey": 1}}', "config: eal.bad?key: unknown key"),
    ('{"policy": {"uplink": {"ove\\rload": 1}}}', "policy.uplink.ove?load: unknown key"),
    (json.dumps({"eal": {"k" * 600: 1}}), "config: eal." + "k" * 64 + ": unknown key"),
    (json.dumps({"policy": {"uplink": {"k" * 600: 1}}}),
     "policy.uplink." + "k" * 64 + ": unknown key"),
], ids=["syntax-error-quotes-newline", "key-with-newline", "policy-key-with-cr", "long-key",
        "policy-long-key"])
def test_error_message_is_one_line(schednicd_bin, tmp_path, text, expect):
    """Control characters of the input quoted in a message are replaced; a
    long key is cut so that the reason stays in the message."""
    r = check(schednicd_bin, tmp_path, text)
    print(repr(r.stderr))
    assert r.returncode == 1, r.stderr
    msg = r.stderr.rstrip("\n")
    assert "\n" not in msg and "\r" not in msg, repr(r.stderr)
    assert expect in msg, repr(r.stderr)


def test_print_default_config_round_trip(schednicd_bin, tmp_path):
    r = run(schednicd_bin, "--print-default-config")
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed == json.loads(DEFAULT_CONFIG.read_text())
    # The keys of the shared daemon spec, with their defaults.
    assert printed["eal"]["file_prefix"] == "auto"
    assert printed["control"]["socket"] == "/run/schednic/schednicd.sock"
    assert printed["datapath"]["burst"] == 32
    assert [p["mode"] for p in printed["ports"]] == ["server", "server"]
    out = tmp_path / "default.json"
    out.write_text(r.stdout)
    r2 = run(schednicd_bin, "--check-config", "--config", out)
    assert r2.returncode == 0, r2.stderr


def test_check_config_default(schednicd_bin):
    r = run(schednicd_bin, "--check-config")
    assert r.returncode == 0, r.stderr
    assert "embedded default" in r.stderr


def test_version(schednicd_bin):
    r = run(schednicd_bin, "--version")
    assert r.returncode == 0
    assert r.stdout.startswith("schednicd 0.1.0 ")
    assert "DPDK 22.11" in r.stdout


def test_help(schednicd_bin):
    r = run(schednicd_bin, "--help")
    assert r.returncode == 0
    for flag in ("--config", "--check-config", "--print-default-config", "--version", "--help"):
        assert flag in r.stdout


@pytest.mark.parametrize("args", [["--bogus"], ["extra-arg"], ["--config"]],
                         ids=["unknown-flag", "positional", "missing-value"])
def test_usage_errors(schednicd_bin, args):
    r = run(schednicd_bin, *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "usage:" in r.stderr


def test_max_ports_beyond_hard_nofile_limit_refused(schednicd_bin, tmp_path):
    """With a hard RLIMIT_NOFILE too low for the configured ports the daemon
    refuses before the EAL, naming the numbers, ulimit -n and LimitNOFILE;
    too low only for datapath.max_ports (ports port.add may add) it warns
    and runs; max_ports 16 fits without a word."""
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    many = [{"name": f"p{i}", "path": str(tmp_path / f"p{i}.sock")} for i in range(100)]
    cases = ((511, many, 1, ("the 100 configured ports need", "hard limit is 1024",
                             "ulimit -n", "LimitNOFILE")),
             (511, None, 0, ("warning: datapath.max_ports 511 needs", "hard limit is 1024",
                             "port.add", "LimitNOFILE")),
             (16, None, 0, ()))
    for max_ports, ports, rc, words in cases:
        cfg = tmp_path / f"cfg{max_ports}-{rc}.json"
        c = {"datapath": {"max_ports": max_ports}}
        if ports is not None:
            c["ports"] = ports
        cfg.write_text(json.dumps(c))
        r = subprocess.run([str(schednicd_bin), "--check-config", "--config", str(cfg)],
                           capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL, preexec_fn=low_limit)
        assert r.returncode == rc, (max_ports, r.stderr)
        for word in words:
            assert word in r.stderr, (word, r.stderr)
        if not words:
            assert "hard limit" not in r.stderr, r.stderr
