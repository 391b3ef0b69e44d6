# SPDX-License-Identifier: BSD-3-Clause
"""Polling helper shared by the datapath and policy tests."""
import time


def wait_for(pred, what, timeout=30.0, d=None):
    """Call pred() every 50 ms until it returns something truthy and return
    that; after `timeout` s raise TimeoutError naming `what` (plus the
    daemon's log tail when the Schednicd `d` is given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise TimeoutError(f"timeout waiting for {what}" + (f":\n{d.log_tail()}" if d else ""))
