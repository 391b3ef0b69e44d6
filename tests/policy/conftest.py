"""Fixtures for the policy tests: the datapath tests' sn-gen driver."""
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
    """Factory: sngen(socks, *args, mode="count") -> SnGen (stopped at teardown)."""
    n = [0]

    def make(socks, *args, mode="count"):
        n[0] += 1
        return SnGen(spawn, sn_gen_bin, sn_tmpdir, mode, socks, args, n[0])

    return make
