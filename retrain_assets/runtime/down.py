"""`retrain-assets down`: stop the platform of this RETRAIN_HOME from any terminal.

It reads `up`'s record (runtime/platform_file.py). A running `up` is asked to stop (SIGTERM:
it stops its children as on Ctrl-C) and given the time it needs; whatever recorded process is
still there afterwards (or every one, when `up` was killed) is stopped group by group, SIGKILL
after the grace period. A recorded pid that is now another process is left alone and named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from retrain_assets.runtime.platform_file import (
    platform_file,
    read_platform_file,
    remove_platform_file,
)
from retrain_assets.runtime.reaper import DEFAULT_GRACE_SECONDS
from retrain_assets.runtime.reaping import (
    StopReport,
    alive,
    label,
    stop_platform_processes,
    stop_recorded,
)
from retrain_assets.store.server import forget_handle

UP_EXTRA_SECONDS = 10.0  # beyond its children's grace: `up` stops Postgres after them


def stop_platform(home: Path, grace: float, say: Callable[[str], None]) -> StopReport | None:
    """Stop `home`'s recorded platform; return what was done, None when nothing is recorded.

    Raises:
        PlatformFileError: the record is not readable.
    """
    record = read_platform_file(home)
    if record is None:
        return None
    report = StopReport()
    stopped_by_up: set[str] = set()
    if record.up.is_running():
        running = [p for p in record.processes if alive(p)]
        say(f"asking `up` (pid {record.up.pid}) to stop its platform (SIGTERM)")
        up = dataclasses.replace(record.up, name="up", group=False)
        report.extend(stop_recorded([up], grace + UP_EXTRA_SECONDS))
        stopped_by_up = {label(p) for p in running if not alive(p)}
        report.stopped += sorted(stopped_by_up)
    else:
        say(f"`up` (pid {record.up.pid}) is not running: stopping what it left")
    rest = stop_platform_processes(record.processes, grace)
    rest.gone = [name for name in rest.gone if name not in stopped_by_up]
    report.extend(rest)
    forget_handle(home, record.up.pid)  # a killed `up` never let go of the embedded Postgres
    remove_platform_file(home)
    return report


def run_down(home: Path, grace: float = DEFAULT_GRACE_SECONDS) -> int:
    """Stop the platform of `home` and say what was stopped; exit 0, 1 if a pid was left alone."""

    def say(line: str) -> None:
        print(f"retrain-assets down: {line}", flush=True)

    report = stop_platform(home, grace, say)
    if report is None:
        say(f"no platform recorded for {home} ({platform_file(home)} is absent): nothing to stop")
        return 0
    for line in report.lines():
        say(line)
    if not (report.stopped or report.killed or report.refused):
        say("nothing was running")
    return 1 if report.refused else 0
