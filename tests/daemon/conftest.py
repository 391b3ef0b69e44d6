# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for tests/daemon: reuse the datapath tests' sn-gen driver."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datapath"))
from sngen import SnGen  # noqa: E402


@pytest.fixture
def daemon_sngen(spawn, build_dir, sn_tmpdir):
    """Factory: daemon_sngen(socks, *args) -> SnGen in count/--sync mode."""
    binary = build_dir / "backend" / "sn-gen"
    if not binary.exists():
        pytest.fail(f"{binary} missing: build with scripts/build.sh")
    n = [0]

    def make(socks, *args, mode="count"):
        n[0] += 1
        return SnGen(spawn, binary, sn_tmpdir, mode, socks, args, f"d{n[0]}")

    return make
