"""Waiting on events, with deadlines that stretch on a busy machine.

Tests wait for something to happen (a run's status, a tick, a line in a log) and poll until
it does; the deadline only decides how long a broken build takes to say so. Every deadline
is multiplied by RETRAIN_TEST_PATIENCE (default 4): on a quiet machine the events come long
before it, on a loaded 2-core CI machine the daemon's queue may take minutes, and neither
case should fail a correct build.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

DEFAULT_PATIENCE = 4.0


def patience(seconds: float) -> float:
    """Return `seconds` stretched by RETRAIN_TEST_PATIENCE (a positive number, default 4)."""
    factor = float(os.environ.get("RETRAIN_TEST_PATIENCE", DEFAULT_PATIENCE))
    if factor <= 0:
        raise ValueError(f"RETRAIN_TEST_PATIENCE must be positive, not {factor}")
    return seconds * factor


def wait_until(
    condition: Callable[[], object],
    seconds: float,
    what: str,
    *,
    interval: float = 0.5,
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll `condition` until it is true; fail naming `what` (and `detail()`) if it never is.

    `seconds` is the deadline on a quiet machine; it is stretched by `patience`.
    """
    budget = patience(seconds)
    deadline = time.monotonic() + budget
    while not condition():
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail else ""
            pytest.fail(f"{what} did not happen within {budget:.0f} s{extra}")
        time.sleep(interval)
