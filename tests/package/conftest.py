# SPDX-License-Identifier: BSD-3-Clause
"""The installed package's binaries in place of the build directory's:
the schednicd and sn-gen fixtures start /usr/sbin/schednicd and
/usr/bin/sn-gen (scripts/test.sh installs the package, runs these tests
with -m package, and purges it)."""
from pathlib import Path

import pytest

from snlib.sngen_fixtures import sngen  # noqa: F401

SBIN = Path("/usr/sbin")
BIN = Path("/usr/bin")


def installed(p: Path) -> Path:
    if not p.exists():
        pytest.fail(f"{p} missing: install the package first (scripts/package.sh, "
                    "apt-get install ./build/deb/schednic_*.deb)")
    return p


@pytest.fixture(scope="session")
def schednicd_bin() -> Path:
    return installed(SBIN / "schednicd")


@pytest.fixture(scope="session")
def sn_gen_bin() -> Path:
    return installed(BIN / "sn-gen")
