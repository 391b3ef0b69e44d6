# SPDX-License-Identifier: BSD-3-Clause
"""Every configuration key the parser accepts is documented, and every
documented key is accepted.

The accepted keys are read from sn_config.c's key tables and then checked
against the binary: each one, given a value of the wrong type, must be
rejected with an error naming that key (not "unknown key"), and a key not in
the tables must be "unknown key". The documented keys are the first column
of the key table in doc/configuration.md, the one configuration reference
(README.md links to it and keeps no copy). The policy object's keys
(sn_policy.c) must all appear in the policy.set documentation of
rpc_api.json and in doc/policy.md, which the config table points to.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.functional

REPO = Path(__file__).resolve().parents[2]
CONFIG_C = REPO / "backend" / "daemon" / "app" / "sn_config.c"
POLICY_C = REPO / "backend" / "daemon" / "control" / "sn_policy.c"
CONFIG_DOC = REPO / "doc" / "configuration.md"
POLICY_DOC = REPO / "doc" / "policy.md"
README = REPO / "README.md"
SCHEMA = REPO / "backend" / "daemon" / "control" / "rpc_api.json"


def source_keys() -> set:
    src = CONFIG_C.read_text()
    keys = set()
    for section in ("eal", "control", "datapath", "uplink", "quota"):
        body = re.search(r"key_spec %s_keys\[\] = \{(.*?)\n\};" % section, src, re.S).group(1)
        for k in re.findall(r'(?:U|S|B|A)\("(\w+)"|\{ "(\w+)",', body):
            keys.add(f"{section}.{k[0] or k[1]}")
    body = re.search(r"port_keys\[\] = \{(.*?)\};", src, re.S).group(1)
    keys |= {f"ports[i].{k}" for k in re.findall(r'"(\w+)"', body)}
    body = re.search(r"root_keys\[\] = \{(.*?)\};", src, re.S).group(1)
    roots = set(re.findall(r'"(\w+)"', body))
    # Sections are documented through their keys; "policy" as a whole.
    assert roots == {"eal", "control", "datapath", "uplink", "ports", "policy", "quota"}, roots
    keys.add("policy")
    return keys


def table_rows(path: Path) -> list:
    text = path.read_text()
    assert text.count("| key | default | accepted |") == 1, f"{path}: one key table expected"
    start = text.index("| key | default | accepted |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("| `"):
            break
        rows.append(line)
    return rows


def documented_keys(path: Path) -> set:
    keys = set()
    for row in table_rows(path):
        first = row.split(" | ")[0]
        keys |= set(re.findall(r"`([^`]+)`", first))
    return keys


def check(binary, tmp_path, cfg):
    f = tmp_path / "cfg.json"
    f.write_text(json.dumps(cfg))
    r = subprocess.run([str(binary), "--check-config", "--config", str(f)], capture_output=True,
                       text=True, timeout=30, stdin=subprocess.DEVNULL)
    return r.returncode, [l for l in r.stderr.splitlines() if l.startswith("config:")]


def with_value(key: str, value):
    """A config setting key (a table path) to value."""
    if key == "policy":
        return {"policy": value}
    if key.startswith("ports[i]."):
        k = key.split(".", 1)[1]
        port = {"name": "a", "path": "/tmp/sn-doc/a.sock", k: value}
        return {"uplink": None, "ports": [port]}
    section, k = key.split(".")
    return {section: {k: value}}


def test_parser_keys_equal_documented_keys():
    src, doc = source_keys(), documented_keys(CONFIG_DOC)
    assert not src - doc, f"accepted by sn_config.c but not in the config table: {sorted(src - doc)}"
    assert not doc - src, f"documented but not accepted by sn_config.c: {sorted(doc - src)}"


def test_readme_points_to_the_config_reference():
    """One table, in doc/: the README links to it instead of keeping a copy."""
    text = README.read_text()
    assert "doc/configuration.md" in text
    assert "| key | default | accepted |" not in text


@pytest.mark.parametrize("key", sorted(source_keys()))
def test_each_key_recognised_by_binary(schednicd_bin, tmp_path, key):
    bad = 5 if key == "policy" else {"wrong": "type"}  # policy is an object itself
    rc, lines = check(schednicd_bin, tmp_path, with_value(key, bad))
    assert rc == 1 and len(lines) == 1, (rc, lines)
    assert "unknown key" not in lines[0], lines[0]
    shown = key.replace("ports[i]", "ports[0]")
    assert lines[0].startswith(f"config: {shown}") or key == "policy", lines[0]


@pytest.mark.parametrize("section", ["eal", "control", "datapath", "uplink", "quota", "ports[i]"])
def test_unknown_key_rejected_in_every_section(schednicd_bin, tmp_path, section):
    rc, lines = check(schednicd_bin, tmp_path, with_value(f"{section}.no_such_knob", 1))
    assert rc == 1 and len(lines) == 1 and "no_such_knob: unknown key" in lines[0], lines


def policy_keys() -> set:
    src = POLICY_C.read_text()
    keys = set()
    for body in re.findall(r"static const char \*const keys\[\] = \{(.*?)\};", src, re.S):
        keys |= set(re.findall(r'"(\w+)"', body))
    assert {"rate_bps", "weight", "classes", "aggregate"} <= keys, keys
    return keys


def test_policy_keys_documented_in_schema():
    doc = json.loads(SCHEMA.read_text())["methods"]["policy.set"]["params"]["policy"]["doc"]
    missing = sorted(k for k in policy_keys() if not re.search(r"\b%s\b" % k, doc))
    assert not missing, f"policy keys missing from rpc_api.json policy.set doc: {missing}"


def test_policy_keys_documented_in_policy_doc():
    doc = POLICY_DOC.read_text()
    missing = sorted(k for k in policy_keys() if f"`{k}`" not in doc)
    assert not missing, f"policy keys missing from doc/policy.md: {missing}"
