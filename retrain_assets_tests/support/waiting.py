"""Waiting on events, with deadlines that stretch on a busy machine.

Tests wait for something to happen (a run's status, a tick, a line in a log) and poll until
it does; the deadline only decides how long a broken build takes to say so. Every deadline
is multiplied by RETRAIN_TEST_PATIENCE (default 4): on a quiet machine the events come long
before it, on a loaded 2-core CI machine the daemon's queue may take minutes, and neither
case should fail a correct build.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

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


def wait_for_line(
    pattern: str, output: Path, seconds: float = 10, *, interval: float = 0.2
) -> re.Match[str]:
    """Wait until a line of the file `output` matches the regex `pattern`; return the match.

    `^` and `$` anchor at line ends (re.MULTILINE); pass `re.escape(line)` between them to wait
    for one whole line. Fails showing the file when the line never comes.
    """
    found: list[re.Match[str]] = []

    def matches() -> bool:
        text = output.read_text() if output.exists() else ""
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            found.append(match)
        return match is not None

    wait_until(
        matches,
        seconds,
        f"a line matching {pattern!r} in {output}",
        interval=interval,
        detail=lambda: output.read_text() if output.exists() else "(no such file)",
    )
    return found[-1]
