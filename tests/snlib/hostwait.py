# SPDX-License-Identifier: BSD-3-Clause
"""What the host does to the processes a measuring test runs.

On a shared machine a busy-polling daemon or sn-gen that the OS keeps off
its CPU spoils a measurement schednic cannot be blamed for: a sink that
does not drain its RX rings, a shaper whose generator stopped. Two tools:

- wait_quiet(): before a measurement (and before each retry) wait, for a
  bounded time, until the other processes of the host leave the CPUs to
  ours; what it saw goes into the failure message if the measurement
  misses anyway.
- RunqueueWaits: how long the OS kept each thread of the daemon and of
  its sn-gen processes runnable but not running (schedstat, via
  scripts/bench/conformance.py's thread_waits) over a measuring window,
  so a test can tell a window the host spoiled and measure it again.

The outcome of a measuring test is always an assertion: a miss fails with
the measured value and the load seen, never a skip.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))
import conformance as conf  # noqa: E402

# The longest wait for a quiet host before one measurement, and all of one
# test's waits together (environment: SN_QUIET_MAX_S, SN_QUIET_BUDGET_S).
QUIET_MAX_S = float(os.environ.get("SN_QUIET_MAX_S", "60"))
QUIET_BUDGET_S = float(os.environ.get("SN_QUIET_BUDGET_S", "120"))
QUIET_OTHERS = 0.10       # quiet: others use at most this share of all CPUs
QUIET_PROBE_S = 1.0

_budget = {"test": None, "left": QUIET_BUDGET_S}
_last = {}                # the latest wait_quiet() report


def loadavg():
    """/proc/loadavg: the 1, 5 and 15 min load averages and "runnable/threads"."""
    try:
        f = Path("/proc/loadavg").read_text().split()
        return {"loadavg": [float(x) for x in f[:3]], "runnable": f[3]}
    except (OSError, ValueError, IndexError):
        return {"loadavg": None, "runnable": None}


def _cpu_ticks():
    """(busy, total) clock ticks of all CPUs so far (/proc/stat "cpu" line;
    steal counts as busy: it is CPU time the host gave someone else)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def _proc_ticks(pid):
    """utime + stime clock ticks of every thread of pid (0 once it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except (OSError, ValueError, IndexError):
        return 0


def others_cpu_share(pids=(), probe_s=QUIET_PROBE_S):
    """The share of all CPUs (0..1) that processes other than `pids` and
    this one used over the next probe_s seconds."""
    own = (*pids, os.getpid())
    b0, t0 = _cpu_ticks()
    p0 = sum(_proc_ticks(p) for p in own)
    time.sleep(probe_s)
    b1, t1 = _cpu_ticks()
    p1 = sum(_proc_ticks(p) for p in own)
    if t1 <= t0:
        return 0.0
    return round(max(0.0, (b1 - b0) - (p1 - p0)) / (t1 - t0), 3)


def _budget_left():
    """What is left of the current test's QUIET_BUDGET_S (pytest names the
    running test in PYTEST_CURRENT_TEST; a new test gets a new budget)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if test != _budget["test"]:
        _budget.update(test=test, left=QUIET_BUDGET_S)
    return _budget["left"]


def wait_quiet(max_s=QUIET_MAX_S, pids=(), others=QUIET_OTHERS, probe_s=QUIET_PROBE_S):
    """Wait until the processes other than `pids` (the daemon, sn-gen: they
    busy-poll, so the CPUs are never idle while they run) and this one use
    at most `others` of all CPUs over a probe_s probe, for at most max_s
    seconds and at most what is left of the test's budget. Never fails:
    returns what it saw, for the message of a measurement that misses:
    {"quiet": reached, "waited_s", "others_cpu": last probe's share,
    "loadavg", "runnable"}."""
    limit = min(max_s, _budget_left())
    t0 = time.monotonic()
    share = others_cpu_share(pids, probe_s)
    while share > others and time.monotonic() - t0 + probe_s <= limit:
        share = others_cpu_share(pids, probe_s)
    waited = time.monotonic() - t0
    _budget["left"] = max(0.0, _budget["left"] - waited)
    _last.clear()
    _last.update(quiet=share <= others, waited_s=round(waited, 1), others_cpu=share,
                 **loadavg())
    return dict(_last)


def load_seen():
    """For the message of a measurement that missed its bound: what the
    latest wait_quiet() saw before it, and the load averages now."""
    return {"before": dict(_last), "now": loadavg()}


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
