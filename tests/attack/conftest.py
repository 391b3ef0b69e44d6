# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the attack tests: the datapath tests' sn-gen driver
(tests/datapath/sngen.py) for victims' and attackers' virtio-user peers
(snlib/sngen_fixtures.py, which also lets the tests import sngen)."""
from snlib.sngen_fixtures import sn_gen_bin, sngen  # noqa: F401
