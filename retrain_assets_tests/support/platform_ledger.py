"""How many whole platforms (`retrain-assets up`) a test session started, and each one's time.

The number of whole platforms is what sets the suite's time (docs/tests.md), so `make test`
prints it at its end, every run: a new platform shows up as a new line, not as a slower CI
nobody can explain. A printed figure, never an assertion on time. Each platform's Dagster runs
are counted by job as it stops: each run is a process of its own (but those a sensor executes
in its own process, named "(in process)"), the largest share of the suite's CPU, so a scenario
that starts more of them is seen too.

Each pytest-xdist worker keeps its own ledger; the worker hands it to the controller in its
`workeroutput` when it finishes, and the controller prints them all.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

import pytest

WORKER_OUTPUT_KEY = "retrain_platforms"


@dataclass
class PlatformEntry:
    """One `up`: who started it, how long until it said ready, and how long it lived."""

    started_by: str
    ready_seconds: float | None = None
    wall_seconds: float | None = None
    worker: str = field(default_factory=lambda: os.environ.get("PYTEST_XDIST_WORKER", "main"))
    since: float = field(default_factory=time.monotonic, repr=False)
    runs: dict[str, int] | None = None  # Dagster runs by job, counted as it stopped
    runs_unknown: str | None = None  # why they could not be counted

    def counted(self, runs: dict[str, int]) -> None:
        """The platform's Dagster runs, by job, read just before it stops."""
        self.runs = dict(runs)

    def uncounted(self, why: str) -> None:
        """The runs could not be read (its database was already gone, say): the line says why."""
        self.runs_unknown = why

    def ready(self) -> None:
        """`up` said ready now."""
        self.ready_seconds = time.monotonic() - self.since

    def stopped(self) -> None:
        """`up` has ended (the first call counts: a later cleanup changes nothing)."""
        if self.wall_seconds is None:
            self.wall_seconds = time.monotonic() - self.since


class PlatformLedger:
    """The platforms this process started, in order."""

    def __init__(self) -> None:
        self.entries: list[PlatformEntry] = []

    def started(self) -> PlatformEntry:
        """Record a platform starting now, for the test running now."""
        test = os.environ.get("PYTEST_CURRENT_TEST", "outside a test").rsplit(" ", 1)[0]
        entry = PlatformEntry(started_by=test)
        self.entries.append(entry)
        return entry

    def to_json(self) -> str:
        """The entries, for a worker's `workeroutput` (a JSON string travels to the controller)."""
        return json.dumps([asdict(entry) for entry in self.entries])


LEDGER = PlatformLedger()


def entries_from_json(text: str) -> list[PlatformEntry]:
    """The entries a worker handed over (`PlatformLedger.to_json`)."""
    return [PlatformEntry(**entry) for entry in json.loads(text)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def summary_lines(entries: list[PlatformEntry]) -> list[str]:
    """The lines `make test` prints: the count, then one line per platform, longest first."""
    lines = [f"whole platforms started (retrain-assets up): {len(entries)}"]
    for entry in sorted(entries, key=lambda e: -(e.wall_seconds or 0)):
        lines.append(
            f"  {_seconds(entry.wall_seconds):>7} alive, ready after "
            f"{_seconds(entry.ready_seconds):>5}  [{entry.worker}] {entry.started_by}"
        )
        lines.append(f"{'':>11}{_runs(entry)}")
    if entries:
        total = sum(sum(entry.runs.values()) for entry in entries if entry.runs is not None)
        lines.append(f"Dagster runs in those platforms: {total}")
    return lines


def _runs(entry: PlatformEntry) -> str:
    if entry.runs is None:
        return f"runs not counted: {entry.runs_unknown or 'the platform ended before'}"
    by_job = sorted(entry.runs.items(), key=lambda item: (-item[1], item[0]))
    jobs = ", ".join(f"{job} {count}" for job, count in by_job)
    return f"{sum(entry.runs.values())} runs" + (f": {jobs}" if jobs else "")


def print_summary(reporter: pytest.TerminalReporter, entries: list[PlatformEntry]) -> None:
    """Write the ledger as its own section at the end of the terminal report."""
    reporter.section("whole platforms", sep="-")
    for line in summary_lines(entries):
        reporter.write_line(line)
