# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the policy tests: the datapath tests' sn-gen driver
(snlib/sngen_fixtures.py, which also lets the tests import sngen), the
lcore layouts, and the "schednic policy measurements" section of the
terminal summary (each measured figure beside its bound, in every CI
log)."""
import os
import time

import pytest

from snlib.sngen_fixtures import sn_gen_bin, sngen  # noqa: F401
from snlib.summary import Summary

SUMMARY = Summary("schednic policy measurements")


@pytest.fixture
def measured(record_property):
    """measured(table, col=value, ...): one row of `table` in the terminal
    summary's "schednic policy measurements" (and a junit property). Put
    the bound or threshold column beside the value it limits; record
    before asserting, so a failure shows its value too."""
    def rec(table, **cols):
        SUMMARY.row(table, **cols)
        record_property(table, repr(cols))
    return rec


def pytest_terminal_summary(terminalreporter):
    SUMMARY.write(terminalreporter)


# Lcore layouts: a test parametrized over "layout" gets every
# daemon it starts in that layout. 2core puts the arbiter lcore on the
# worker's CPU (sn-gen busy-polls CPU 0; two busy pollers of one daemon on
# one CPU only trade time slices, which the link emulation's 100 ms slack
# and the mailboxes absorb at these rates). ncore: 2 workers (default
# datapath.workers), both on eal.worker_cpu, the arbiter there too; ports
# are assigned to the workers round-robin (vm0 -> 0, vm1 -> 1, ...).


@pytest.fixture
def schednicd(schednicd, request):
    callspec = getattr(request.node, "callspec", None)
    layout = callspec.params.get("layout") if callspec else None
    if not layout:
        return schednicd

    def factory(*args, **kw):
        dp = dict(kw.pop("datapath", None) or {})
        dp.setdefault("layout", layout)
        kw["datapath"] = dp
        eal = dict(kw.pop("eal", None) or {})
        eal.setdefault("arbiter_cpu", 1 if (os.cpu_count() or 1) > 1 else 0)
        kw["eal"] = eal
        d = schednicd(*args, **kw)
        if kw.get("start", True):
            check_layout(d, layout)
        return d

    return factory


def check_layout(d, layout, timeout=10.0):
    """The daemon runs the layout asked for: in 2core the arbiter lcore
    loops on its own (arbiter_thread.loops grows), in 1core it never
    exists (0); in ncore (2 workers by default) the arbiter and every
    worker lcore loop (arbiter.workers[k].loops)."""
    deadline = time.monotonic() + timeout
    while True:
        a = d.stats()["arbiter"]
        loops = a["arbiter_thread"]["loops"]
        if layout == "1core":
            assert loops == 0, f"1core daemon runs an arbiter lcore ({loops} loops)"
            assert len(a["workers"]) == 1, a["workers"]
            return
        if layout == "ncore":
            assert len(a["workers"]) >= 2, a["workers"]
        else:
            assert len(a["workers"]) == 1, a["workers"]
        if loops > 0 and all(w["loops"] > 0 for w in a["workers"]):
            return
        assert time.monotonic() < deadline, f"{layout} daemon: an lcore never ran: {a}"
        time.sleep(0.1)
