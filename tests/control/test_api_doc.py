# SPDX-License-Identifier: BSD-3-Clause
"""doc/rpc.md is what scripts/gen-api-doc.py renders from rpc_api.json, so
the reference cannot drift from the schema; every method has its section;
and every member of a live answer is described in the schema."""
import importlib.util
import json
import re

import pytest

from ctlutil import REPO, load_schema

SCHEMA = load_schema()
DOC = REPO / "doc" / "rpc.md"
GEN = REPO / "scripts" / "gen-api-doc.py"


def generator():
    spec = importlib.util.spec_from_file_location("gen_api_doc", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.unit
def test_rpc_doc_is_generated_from_schema():
    want = generator().render(SCHEMA)
    assert DOC.read_text() == want, \
        "doc/rpc.md is out of date: run scripts/gen-api-doc.py --write and commit it"


@pytest.mark.unit
def test_every_method_has_a_section():
    text = DOC.read_text()
    for name, m in SCHEMA["methods"].items():
        section = re.search(r"^## `%s`\n(.*?)(?=^## |\Z)" % re.escape(name), text, re.S | re.M)
        assert section, f"doc/rpc.md: no section for {name}"
        body = section.group(1)
        for part in ("**Params**", "**Result**", "**Errors**"):
            assert part in body, (name, part)
        for p in m["params"]:
            assert f"| `{p}` |" in body, (name, p)
        for e in m["errors"]:
            assert str(SCHEMA["errors"][e]["code"]) in body, (name, e)


def members(fields, prefix=""):
    """Dotted paths of a schema result, '[]' after an array member."""
    for name, spec in fields.items():
        path = prefix + name
        yield path, spec
        if isinstance(spec, dict):
            sub = path + ("[]" if spec.get("type") == "array" else "")
            yield from members(spec.get("fields", {}), sub + ".")


@pytest.mark.unit
def test_every_result_member_is_described():
    for name, m in SCHEMA["methods"].items():
        for path, spec in members(m["result"]):
            if isinstance(spec, str):
                assert spec.strip(), (name, path)
            else:
                assert set(spec) <= {"type", "doc", "fields"}, (name, path, set(spec))
                assert spec.get("type") in ("object", "array"), (name, path)
                assert spec.get("doc") or spec.get("fields"), (name, path)


# Result members whose keys are names chosen by the operator (a map).
MAPS = {("stats.get", "aggregates"), ("policy.get", "ports"), ("policy.get", "aggregates")}
# Members described by reference to another one ("as the top-level cpu_fair").
BY_REFERENCE = {"arbiter.workers[].cpu_fair", "ports[].queues[].completion.held_occupancy"}


def answer_paths(method, value, prefix=""):
    """Dotted paths of a live answer, as members() names them."""
    if isinstance(value, dict):
        for k, v in value.items():
            key = "*" if (method, prefix.rstrip(".")) in MAPS else k
            path = prefix + key
            if any(path.startswith(r + ".") for r in BY_REFERENCE):
                continue
            yield path
            yield from answer_paths(method, v, path + ".")
    elif isinstance(value, list) and prefix:
        for v in value:
            if isinstance(v, dict):
                yield from answer_paths(method, v, prefix.rstrip(".") + "[].")


def documented(method):
    out = set()
    for path, _spec in members(SCHEMA["methods"][method]["result"]):
        out.add(path)
    # A map's members are documented as the fields of its value.
    for m, top in MAPS:
        if m == method:
            out = {p.replace(top + ".", top + ".*.", 1) if p.startswith(top + ".") else p
                   for p in out} | {top + ".*"}
    return out


@pytest.mark.functional
def test_live_answers_are_documented(schednicd, sn_tmpdir):
    """Every member of stats.get, port.list and policy.get, with every optional
    part present (deferred multiqueue port, policy with a class and an
    aggregate, fair dropping, CPU fair dropping), is in the schema."""
    port = {"name": "vm0", "type": "vhost-user", "path": str(sn_tmpdir / "vm0.sock"),
            "mode": "server", "completion": "deferred", "queues": 2}
    policy = {"uplink": {"rate_bps": 100000000, "overload": "fair"},
              "ports": {"vm1": {"min_rate_bps": 1000000},
                        "vm0": {"rate_bps": 20000000, "peak_bps": 40000000,
                                "inbound": {"rate_bps": 5000000, "peak_bps": 6000000},
                                "classes": [
                  {"name": "c", "proto": "udp", "src": "10.0.0.0/8", "dst_port": [1, 9],
                   "aggregate": "a"}]}},
              "aggregates": {"a": {"rate_bps": 10000000}}}
    d = schednicd(ports=[port], uplink="net_null0", datapath={"cpu_fair_pct": 50},
                  policy=policy)
    for method in ("stats.get", "port.list", "policy.get"):
        live = set(answer_paths(method, d.rpc(method)))
        missing = sorted(live - documented(method))
        assert not missing, f"{method}: members not described in rpc_api.json: {missing}"
