# SPDX-License-Identifier: BSD-3-Clause
"""The systemd watchdog sees a stuck worker: with a worker stalled inside
its loop, MAIN keeps running but sends no WATCHDOG=1 until the worker
loops again (systemd would restart the daemon one WatchdogSec later).

The stall comes from the test hook of a -Dtest_hooks=true build
(SCHEDNICD_TEST_STALL=W:A:F: worker W blocks once, A ms after its start,
for F ms); scripts/test.sh runs this module on its ASan build, which has
the hooks, and the main pytest run leaves it out (marker "hooks").
"""
import subprocess

import pytest

from test_systemd import NotifySocket

pytestmark = [pytest.mark.functional, pytest.mark.hooks]

WATCHDOG_USEC = 400_000   # a check every 0.2 s
STALL_AFTER_MS, STALL_MS = 2000, 3000


def test_watchdog_silent_while_a_worker_stalls(schednicd, schednicd_bin, sn_tmpdir):
    v = subprocess.run([str(schednicd_bin), "--version"], capture_output=True, text=True,
                       check=True).stdout
    assert "test-hooks" in v, (f"{schednicd_bin} has no test hooks ({v.strip()}): build it "
                               "with -Dtest_hooks=true (scripts/test.sh does, in build-asan)")
    notify = NotifySocket(sn_tmpdir / "notify.sock")
    try:
        d = schednicd(ports=["vm0"], start=False)
        d.env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": str(WATCHDOG_USEC),
                 "SCHEDNICD_TEST_STALL": f"0:{STALL_AFTER_MS}:{STALL_MS}"}
        d.start(wait=False)
        ready = notify.wait("READY")
        notify.read((STALL_AFTER_MS + STALL_MS) / 1000 + 3.0)
        pings = notify.times("WATCHDOG", ready)
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        print(f"{len(pings)} WATCHDOG=1, gaps {[round(g, 2) for g in gaps]}")
        # Pings before and after the stall, none for most of it: the
        # longest gap covers the stall less one check period each side.
        assert len(pings) >= 8, notify.msgs
        assert max(gaps) >= STALL_MS / 1000 - 2 * WATCHDOG_USEC / 1e6, gaps
        assert max(gaps) <= STALL_MS / 1000 + 3 * WATCHDOG_USEC / 1e6, gaps
        assert sorted(gaps)[-2] < 2.0, gaps   # one silence only
        log = d.log_path.read_text()
        assert "watchdog: worker 0 made no progress" in log, d.log_tail()
        assert "watchdog: every datapath thread loops again" in log, d.log_tail()
        assert d.stop() == 0
    finally:
        notify.close()
