# SPDX-License-Identifier: BSD-3-Clause
"""scripts/lint.py on small files in a temporary git repository: each rule
fires on what it is for and stays quiet on code and constants that only
look alike. The tags are built by concatenation so that this file itself
stays clean."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

LINT = Path(__file__).resolve().parents[1] / "scripts" / "lint.py"
SPDX_C = "/* SPDX-License-Identifier: BSD-3-Clause */\n"
SPDX_PY = "# SPDX-License-Identifier: BSD-3-Clause\n"

TAG = "s" + "12"
TAG_SUFFIX = "s" + "21-D4"
TAG_UPPER = "S" + "14-" + "S" + "4"
ISSUE_PAREN = "(issue " + "6)"
ISSUE_CAP = "Issue " + "5"
ISSUE_HASH = "issue #" + "5"
ISSUE_DASH = "issue-" + "6"
DATE = "20" + "26-11-29"
UTC = "09:" + "45" + " UTC"
UTC_RANGE = "10:" + "17-10:" + "46" + " UTC"
HASH = "5ab" + "4858"
NEXT = "Next" + " step:"
V0, V1, V2 = "s" + "0", "s" + "1", "s" + "2"     # names a tag could take


def lint(repo, files, *paths):
    """Write {name: text} into the git repo `repo`, stage them, run the
    lint; returns (exit status, [(path, line, rule)], stdout)."""
    for name, text in files.items():
        f = repo / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    r = subprocess.run([sys.executable, str(LINT), "--root", str(repo), *paths],
                       capture_output=True, text=True, timeout=60)
    found = []
    for ln in r.stdout.splitlines():
        path, line, rule = ln.split(":", 3)[:3]
        found.append((path, int(line), rule.strip()))
    return r.returncode, found, r.stdout


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


@pytest.mark.parametrize("text,rule", [
    (f"/* {TAG}: the seq is odd while a writer runs */", "session-tag"),
    (f"// see {TAG_SUFFIX}", "session-tag"),
    (f"/* {TAG_UPPER} */", "session-tag"),
    ("/* the mailbox (s" + "19) */", "session-tag"),
    (f"/* deferred completions {ISSUE_PAREN} */", "issue-ref"),
    (f"/* {ISSUE_CAP} asks for it */", "issue-ref"),
    (f"/* {ISSUE_HASH} */", "issue-ref"),
    (f"/* the {ISSUE_DASH} ncore case */", "issue-ref"),
    (f"/* measured on {DATE} */", "iso-date"),
    (f"/* run at {UTC} */", "utc-time"),
    (f"/* runs {UTC_RANGE} */", "utc-time"),
    (f"/* {NEXT} split it */", "next-step"),
    (f"/* fixed in commit {HASH} */", "commit-hash"),
    ("/* on 76809" + "db */", "commit-hash"),
    ("/* (afa" + "5ec1) */", "commit-hash"),
    (f'static const char *msg = "{ISSUE_CAP} policy";', "issue-ref"),
], ids=lambda v: v if v in ("session-tag", "issue-ref", "iso-date", "utc-time",
                            "next-step", "commit-hash") else None)
def test_c_comment_and_string_caught(repo, text, rule):
    rc, found, out = lint(repo, {"a.c": SPDX_C + text + "\n"})
    assert rc == 1, out
    assert found == [("a.c", 2, rule)], out


def test_python_comment_and_docstring_caught(repo):
    src = (SPDX_PY + f'"""Policy model ({TAG}).\n\nSecond paragraph, {DATE}."""\n'
           f"x = 1  # {ISSUE_CAP}\n"
           f'y = f"{{x}} {UTC}"\n')
    rc, found, out = lint(repo, {"m.py": src})
    assert rc == 1
    assert found == [("m.py", 2, "session-tag"), ("m.py", 4, "iso-date"),
                     ("m.py", 5, "issue-ref"), ("m.py", 6, "utc-time")], out


def test_markdown_and_shell_checked_as_text(repo):
    rc, found, out = lint(repo, {
        "doc.md": f"# Title\n\nThe wheel ({TAG}) since {HASH}.\n",
        "run.sh": "#!/bin/sh\n" + SPDX_PY + f"echo hi  # {ISSUE_PAREN}\n"})
    assert rc == 1
    assert sorted(found) == [("doc.md", 3, "commit-hash"), ("doc.md", 3, "session-tag"),
                             ("run.sh", 3, "issue-ref")], out


@pytest.mark.parametrize("name,text", [
    ("a.c", "int x;\n"),
    ("b.h", "#pragma once\n"),
    ("c.py", "x = 1\n"),
    ("d.sh", "#!/bin/sh\necho\n"),
    ("sub/meson.build", "project('x')\n"),
    ("tool", "#!/usr/bin/env python3\nprint(1)\n"),
])
def test_missing_spdx_caught(repo, name, text):
    rc, found, out = lint(repo, {name: text})
    assert rc == 1 and found == [(name, 1, "spdx")], out


def test_code_constants_and_clean_files_not_flagged(repo):
    rc, found, out = lint(repo, {
        "a.c": SPDX_C + "#include <stdint.h>\n"
                        f"uint64_t f(void)\n{{\n\tuint64_t {V1} = 0, {V2} = 0x1234abc;\n"
                        f"\treturn {V1} + {V2} + 0xdeadbeef1;  /* the sum of both */\n}}\n",
        "b.py": SPDX_PY + f'"""Sum of two ports."""\n{V1} = {{"{V0}": 1, "{V1}": 2}}\n'
                          f'MAGIC = 0xdeadbeef1\nport = "{V0}"\n',
        "c.sh": "#!/bin/sh\n" + SPDX_PY + "echo 0xdeadbeef1\n",
        "vm.xml": "<!-- SPDX-License-Identifier: BSD-3-Clause -->\n"
                  "<uuid>1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b</uuid>\n",
        "notes.txt": "plain text without a licence line: not a source\n",
        "tool": "#!/usr/bin/env python3\n" + SPDX_PY + f"{V1} = 1  # plain\n",
    })
    assert (rc, found) == (0, []), out


def test_dated_files_allowed_but_not_other_tags(repo):
    patch = (f"SPDX-License-Identifier: GPL-2.0\n\n--- a/x.c\n+++ b/x.c\n@@ -1,2 +1,3 @@\n"
             f" /* upstream context {TAG} {HASH} */\n+/* ours ({ISSUE_PAREN}) */\n")
    rc, found, out = lint(repo, {
        "LICENSE": f"Copyright, {DATE}\n",
        "x.patch": patch,
        "sn.8": f'.TH SCHEDNICD 8 "{DATE}"\n.SH NAME\nrelease of {DATE}\n'})
    assert rc == 1
    assert sorted(found) == [("sn.8", 3, "iso-date"), ("x.patch", 7, "issue-ref")], out


def test_paths_and_exit_status(repo):
    files = {"clean.py": SPDX_PY + "x = 1\n", "dirty.py": SPDX_PY + f"# {TAG}\n"}
    assert lint(repo, files, "clean.py")[:2] == (0, [])
    assert lint(repo, files, "dirty.py")[:2] == (1, [("dirty.py", 2, "session-tag")])
    r = subprocess.run([sys.executable, str(LINT), "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr
    r = subprocess.run([sys.executable, str(LINT), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "session-tag" in r.stdout and "spdx" in r.stdout
