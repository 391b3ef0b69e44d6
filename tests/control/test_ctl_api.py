# SPDX-License-Identifier: BSD-3-Clause
"""rpc_api.json is the single source of truth: the daemon, the C error
codes, schednicctl and the generated docs must all agree with it."""
import json
import re
import subprocess

import pytest

from ctlutil import CTL, REPO, load_schema, rpc_error, run_ctl

pytestmark = pytest.mark.functional

SCHEMA = load_schema()
METHODS = SCHEMA["methods"]
SAMPLE = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "object": {},
          "array": []}
WRONG = {"string": 7, "integer": "7", "number": "7", "boolean": "yes", "object": [],
         "array": {}}


def valid_params(method, workdir):
    """Smallest params the schema accepts: required ones, schema-valid values."""
    out = {}
    for name, spec in METHODS[method]["params"].items():
        if spec.get("required"):
            out[name] = spec["enum"][0] if "enum" in spec else SAMPLE[spec["type"]]
            if name == "path":
                out[name] = str(workdir / "agree.sock")
            elif name == "name":
                out[name] = "agree0"
    return out


def cli_commands():
    r = subprocess.run([str(CTL), "--dump-commands"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_schema_is_well_formed():
    errors = SCHEMA["errors"]
    codes = [e["code"] for e in errors.values()]
    assert len(codes) == len(set(codes))
    for name, m in METHODS.items():
        assert re.fullmatch(r"[a-z]+(\.[a-z]+)?", name), name
        assert m["summary"] and isinstance(m["result"], dict)
        for e in m["errors"]:
            assert e in errors, f"{name}: unknown error {e}"
        for p, spec in m["params"].items():
            assert spec["type"] in SAMPLE, (name, p)
            assert spec.get("doc"), (name, p)


def test_error_codes_match_c_header():
    hdr = (REPO / "backend" / "daemon" / "control" / "sn_rpc.h").read_text()
    c_codes = {int(v) for v in re.findall(r"#define SN_RPC_\w+\s+\((-\d+)\)", hdr)}
    assert c_codes == {e["code"] for e in SCHEMA["errors"].values()}


def test_every_schema_method_is_served(schednicd, sn_tmpdir):
    """Not -32601 for any schema method; `shutdown` last since it stops it."""
    d = schednicd(ports=())
    for method in sorted(METHODS, key=lambda m: m == "shutdown"):
        with d.client() as c:
            r = c.call_raw(method, valid_params(method, sn_tmpdir))
        assert r.get("error", {}).get("code") != -32601, (method, r)
        if method not in ("port.del", "policy.del"):   # no such port / entry
            assert "result" in r, (method, r)
    d.proc.wait(30)
    assert d.proc.returncode == 0


@pytest.mark.parametrize("method", sorted(METHODS))
def test_schema_params_enforced_by_daemon(schednicd, sn_tmpdir, method):
    d = schednicd(ports=())
    base = valid_params(method, sn_tmpdir)
    e = rpc_error(d, method, {**base, "bogus_key": 1})
    assert e.code == -32602 and "bogus_key" in e.message
    for name, spec in METHODS[method]["params"].items():
        e = rpc_error(d, method, {**base, name: WRONG[spec["type"]]})
        assert e.code == -32602 and name in e.message, (name, e.message)
        if spec.get("required"):
            e = rpc_error(d, method, {k: v for k, v in base.items() if k != name})
            assert e.code == -32602 and name in e.message
        if "enum" in spec:
            e = rpc_error(d, method, {**base, name: "not-in-enum"})
            assert e.code == -32602 and name in e.message
    assert d.alive()


def test_cli_and_schema_agree():
    cmds = cli_commands()
    mapped = {c["method"] for c in cmds.values()}
    assert mapped == set(METHODS), "CLI subcommands and schema methods differ"
    assert len(mapped) == len(cmds), "two subcommands for one method"
    for sub, c in cmds.items():
        params = METHODS[c["method"]]["params"]
        assert set(c["params"]) <= set(params), f"{sub} sends params the schema lacks"
        required = {p for p, s in params.items() if s.get("required")}
        assert required <= set(c["params"]), f"{sub} cannot send required params"
        assert sub in run_ctl("/nonexistent", "--help").stdout


def test_every_cli_subcommand_against_daemon(schednicd, sn_tmpdir):
    d = schednicd(ports=())
    vsock = str(sn_tmpdir / "cli0.sock")
    pfile = sn_tmpdir / "policy.json"
    pfile.write_text(json.dumps({"ports": {"cli0": {"rate_bps": 10000000}, "cli1": {}}}))
    efile = sn_tmpdir / "entry.json"
    efile.write_text(json.dumps({"rate_bps": 20000000, "weight": 3}))
    argv = {"version": [], "port-add": ["cli0", vsock, "--mode", "server"],
            "port-list": [], "stats": ["cli0"], "port-del": ["cli0"], "shutdown": [],
            "policy-get": [], "policy-set": [str(pfile)], "policy-put": ["cli0", str(efile)],
            "policy-del": ["cli0"], "config-reload": []}
    assert set(argv) == set(cli_commands()), "update this test with the new subcommand"
    for sub in ("version", "port-add", "port-list", "stats", "policy-set", "policy-put",
                "policy-get", "policy-del", "port-del", "config-reload"):
        r = run_ctl(d.socket, sub, *argv[sub])
        assert r.returncode == 0, (sub, r.stderr)
        if sub == "policy-put":
            assert d.rpc("policy.get")["ports"]["cli0"] == {"rate_bps": 20000000,
                                                            "burst_bytes": 0, "weight": 3}
        jargv = {"port-add": ["cli1", str(sn_tmpdir / "cli1.sock")],
                 "port-del": ["cli1"], "policy-del": ["cli1"]}.get(sub, argv[sub])
        j = run_ctl(d.socket, "--json", sub, *jargv)
        assert j.returncode == 0, (sub, j.stderr)
        json.loads(j.stdout)
    listed = json.loads(run_ctl(d.socket, "--json", "port-list").stdout)
    assert listed == d.rpc("port.list")
    r = run_ctl(d.socket, "shutdown")
    assert r.returncode == 0
    d.proc.wait(30)
    assert d.proc.returncode == 0


def test_generated_doc_covers_schema():
    r = subprocess.run([str(REPO / "scripts" / "gen-api-doc.py")], capture_output=True,
                       text=True, check=True)
    for name, m in METHODS.items():
        row = next((line for line in r.stdout.splitlines() if line.startswith(f"| `{name}`")),
                   None)
        assert row, name
        for p in m["params"]:
            assert f"`{p}`" in row, (name, p)
    for e in SCHEMA["errors"].values():
        assert f"| {e['code']} |" in r.stdout
