# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the datapath tests (helpers live in sngen.py; the sn-gen
fixtures are the shared ones of snlib/sngen_fixtures.py)."""
import pytest

from snlib.sngen_fixtures import sn_gen_bin, sngen  # noqa: F401


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
