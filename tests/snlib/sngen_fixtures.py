# SPDX-License-Identifier: BSD-3-Clause
"""The sn-gen fixtures of the test directories that drive virtio-user
peers with the datapath tests' sn-gen driver (tests/datapath/sngen.py).

A directory's conftest imports them by name:
    from snlib.sngen_fixtures import sn_gen_bin, sngen  # noqa: F401
Importing this module puts tests/datapath on sys.path, so that
directory's test modules can `from sngen import ...` too.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "datapath"))
from sngen import SnGen  # noqa: E402


@pytest.fixture(scope="session")
def sn_gen_bin(build_dir) -> Path:
    b = build_dir / "backend" / "sn-gen"
    if not b.exists():
        pytest.fail(f"sn-gen missing in {build_dir}: build with scripts/build.sh")
    return b


@pytest.fixture
def sngen(spawn, sn_gen_bin, sn_tmpdir):
    """Factory: sngen(socks, *args, mode="count", mac_base=0) -> SnGen (stopped
    at teardown); port i gets peer_mac(mac_base + i)."""
    n = [0]

    def make(socks, *args, mode="count", mac_base=0):
        n[0] += 1
        return SnGen(spawn, sn_gen_bin, sn_tmpdir, mode, socks, args, n[0], mac_base)

    return make
