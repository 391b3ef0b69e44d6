# SPDX-License-Identifier: BSD-3-Clause
"""Runqueue waits of the processes a test runs (datapath and policy tests).

On this shared 2-core machine a busy-polling daemon or sn-gen that the OS
keeps off its CPU spoils measurements the test cannot blame on schednic: a
sink that is not draining its RX rings, a shaper whose generator stopped.
A test that sees such a spoiled run asks how long the OS kept each process
runnable but not running over the run (schedstat, via scripts/bench/
conformance.py's thread_waits) and measures again, or skips, only when the
waits explain it. s14-R4: shared here instead of per-test copies
(test_policy.py, test_live_change.py, test_multiqueue.py).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402


class RunqueueWaits:
    """Runqueue waits of a daemon and its sn-gen processes from now on.

    RunqueueWaits(daemon_pid, [sngen_pid, ...]); .ms() -> {"daemon_sum_wait_ms":
    summed over the daemon's threads, "daemon_wait_ms": its busiest thread's,
    "sngen_wait_ms": the busiest thread of any sn-gen} since construction."""

    def __init__(self, daemon_pid, sngen_pids=()):
        self.daemon = daemon_pid
        self.gens = list(sngen_pids)
        self.d0 = conf.thread_waits(daemon_pid)
        self.g0 = [conf.thread_waits(p) for p in self.gens]

    def ms(self):
        now = conf.thread_waits(self.daemon)
        return {"daemon_sum_wait_ms":
                round(sum(now[k] - self.d0.get(k, 0) for k in now) / 1e6, 1),
                "daemon_wait_ms": conf.busiest_wait_ms(self.daemon, self.d0),
                "sngen_wait_ms": max((conf.busiest_wait_ms(p, w)
                                      for p, w in zip(self.gens, self.g0)), default=0.0)}
