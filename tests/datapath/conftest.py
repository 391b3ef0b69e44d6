# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the datapath tests (helpers live in sngen.py)."""
from pathlib import Path

import pytest

from sngen import SnGen


@pytest.fixture(scope="session")
def sn_gen_bin(build_dir) -> Path:
    for rel in ("backend/sn-gen",):
        b = build_dir / rel
        if b.exists():
            return b
    pytest.fail(f"sn-gen missing in {build_dir}: build with scripts/build.sh")


@pytest.fixture
def sngen(spawn, sn_gen_bin, sn_tmpdir):
    """Factory: sngen(socks, *args, mode="count", mac_base=0) -> SnGen (stopped
    at teardown); port i gets peer_mac(mac_base + i)."""
    n = [0]

    def make(socks, *args, mode="count", mac_base=0):
        n[0] += 1
        return SnGen(spawn, sn_gen_bin, sn_tmpdir, mode, socks, args, n[0], mac_base)

    return make


@pytest.fixture
def veth_ns():
    """Factory: veth_ns(queues=1) -> VethNs (tests/snlib/veth.py), a veth
    pair into a fresh namespace for an uplink on a kernel interface;
    deleted at teardown."""
    from snlib.veth import VethNs

    made = []

    def make(queues=1):
        v = VethNs(queues)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()
