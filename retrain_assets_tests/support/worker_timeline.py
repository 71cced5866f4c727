"""Which worker ran which test groups, and when: the suite's critical path, printed each run.

`make test` spreads groups over a few pytest-xdist workers (support/worker_groups). The suite
ends when its busiest worker does, so the figure that matters is each worker's timeline, not
the sum of durations: a worker idle for five minutes at the end means the groups are unbalanced,
not that the tests are slow. The controller sees every report with its worker and its start and
stop times, and prints one line per worker at the end of `make test` (issue 36).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

SHOWN_GROUPS = 6  # the longest groups named on a worker's line; the rest are counted


@dataclass
class GroupSpan:
    """When a group's first test phase started and its last one stopped, on one worker."""

    first_start: float
    last_stop: float

    @property
    def seconds(self) -> float:
        return self.last_stop - self.first_start


@dataclass
class WorkerTimeline:
    """Every group's span, by worker, from the reports the controller receives."""

    spans: dict[str, dict[str, GroupSpan]] = field(default_factory=dict)

    def add(self, worker: str, group: str, start: float, stop: float) -> None:
        groups = self.spans.setdefault(worker, {})
        span = groups.get(group)
        if span is None:
            groups[group] = GroupSpan(start, stop)
        else:
            span.first_start = min(span.first_start, start)
            span.last_stop = max(span.last_stop, stop)

    def add_report(self, report: pytest.TestReport) -> None:
        """Keep a worker's report (reports made in this process have no worker: ignored)."""
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None)
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if worker is None or start is None or stop is None:
            return
        self.add(worker, group_of_node_id(report.nodeid), start, stop)

    def lines(self) -> list[str]:
        """One line per worker: when it finished, how long it was busy, its longest groups."""
        if not self.spans:
            return []
        origin = min(span.first_start for groups in self.spans.values() for span in groups.values())
        lines = []
        for worker in sorted(self.spans):
            groups = self.spans[worker]
            busy = sum(span.seconds for span in groups.values())
            ended = max(span.last_stop for span in groups.values()) - origin
            longest = sorted(groups.items(), key=lambda item: -item[1].seconds)
            named = ", ".join(
                f"{_short(group)} {span.seconds:.0f} s (from {span.first_start - origin:.0f})"
                for group, span in longest[:SHOWN_GROUPS]
            )
            rest = longest[SHOWN_GROUPS:]
            rest_seconds = sum(span.seconds for _, span in rest)
            tail = f"; {len(rest)} more groups {rest_seconds:.0f} s" if rest else ""
            lines.append(
                f"{worker}: done at {ended:.0f} s, busy {busy:.0f} s in {len(groups)} groups: "
                f"{named}{tail}"
            )
        return lines


def group_of_node_id(node_id: str) -> str:
    """Return the xdist group a node id carries after its `@` (the file when it has none)."""
    tail = node_id.rsplit("]", 1)[-1]
    if "@" in tail:
        return node_id[node_id.rindex("@") + 1 :]
    return node_id.split("::", 1)[0]


def _short(group: str) -> str:
    """A group named by its file reads as the file's name."""
    return group.rsplit("/", 1)[-1]


def print_timeline(reporter: pytest.TerminalReporter, timeline: WorkerTimeline) -> None:
    """Write the workers' timelines as their own section at the end of the terminal report."""
    lines = timeline.lines()
    if not lines:
        return
    reporter.section("workers", sep="-")
    for line in lines:
        reporter.write_line(line)
