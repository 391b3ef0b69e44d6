# SPDX-License-Identifier: BSD-3-Clause
"""Runs the C unit tests (meson test) and reports each as a pytest case.

A failing, crashing, timing-out or skipping (exit 77) C test fails here:
every C test must really run.
"""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SN_BUILD_DIR", REPO / "build")).resolve()


def _c_tests():
    try:
        out = subprocess.run(["meson", "introspect", "--tests", str(BUILD)],
                             capture_output=True, text=True, check=True).stdout
        return sorted(t["name"] for t in json.loads(out))
    except (OSError, subprocess.CalledProcessError, ValueError):
        return ["<no build dir: run scripts/build.sh>"]


@pytest.mark.parametrize("name", _c_tests())
def test_c_unit(name):
    assert not name.startswith("<"), f"cannot list meson tests in {BUILD}"
    r = subprocess.run(["meson", "test", "-C", str(BUILD), "--no-rebuild",
                        "--print-errorlogs", name],
                       capture_output=True, text=True)
    tail = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, f"meson test {name} failed:\n{tail}"
    assert re.search(r"^Ok:\s+1\s*$", r.stdout, re.M), \
        f"meson test {name} did not pass (skipped? every C test must run):\n{tail}"
