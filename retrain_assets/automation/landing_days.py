"""Which landed days are ready to read, and which have changed since they were read.

Pure functions over a landing scan, so the rules are tested without a filesystem or a clock.

- A customer is *active* on a day from its first landed day on.
- A day is *complete* when every active customer delivered its file, or when the day's
  cut-off (the end of the day, UTC, plus the cut-off hours) has passed.
- A day is *settled* when its newest file has not changed for the settle time.
- A day is *ready* when it is complete and settled. It is read when it is ready and its
  fingerprint (the stamps of its files) differs from the one last requested: a new day, or
  a late or corrected file for a day read before.
- Days are read in order: a day never read before waits while an earlier day waits, because
  its features look back over that earlier day.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from retrain_assets.automation.landing_scan import LandedFile

DayRange = tuple[dt.date, dt.date]


@dataclass(frozen=True)
class LandingDay:
    """One calendar day between the first and the last landed day.

    `expected` counts the active customers; their names are worked out only for a day that
    misses some (`missing()`), since listing them for every day costs customers x days.
    """

    day: dt.date
    delivered: frozenset[str]
    expected: int
    fingerprint: str
    newest: float | None
    first_days: Mapping[str, dt.date] = field(repr=False, compare=False, default_factory=dict)

    def missing(self) -> list[str]:
        """Return the active customers without a file for this day, sorted."""
        return sorted(
            c
            for c, start in self.first_days.items()
            if start <= self.day and c not in self.delivered
        )


@dataclass(frozen=True)
class Readiness:
    """Whether a day can be read now, and the reason shown in the sensor's tick."""

    ready: bool
    reason: str


@dataclass
class LandingPlan:
    """What one tick reads: contiguous day ranges, and why other days wait."""

    ranges: list[DayRange] = field(default_factory=list)
    fingerprints: dict[dt.date, str] = field(default_factory=dict)
    reasons: dict[dt.date, str] = field(default_factory=dict)
    late: list[dt.date] = field(default_factory=list)
    waiting: dict[dt.date, str] = field(default_factory=dict)

    @property
    def days(self) -> list[dt.date]:
        """Return every day the plan reads, oldest first."""
        return sorted(self.fingerprints)


def _fingerprint(files: list[LandedFile]) -> str:
    text = "\n".join(sorted(f"{f.customer}\t{f.stamp}" for f in files))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def landing_days(files: Iterable[LandedFile]) -> list[LandingDay]:
    """Return every day from the first to the last landed file, with who delivered."""
    by_day: dict[dt.date, list[LandedFile]] = defaultdict(list)
    first_days: dict[str, dt.date] = {}
    for landed in files:
        by_day[landed.day].append(landed)
        start = first_days.get(landed.customer)
        if start is None or landed.day < start:
            first_days[landed.customer] = landed.day
    if not by_day:
        return []
    starts = sorted(first_days.values())
    first, last = min(by_day), max(by_day)
    days = []
    for offset in range((last - first).days + 1):
        day = first + dt.timedelta(days=offset)
        of_day = by_day.get(day, [])
        times = [f.modified for f in of_day if f.modified is not None]
        days.append(
            LandingDay(
                day=day,
                delivered=frozenset(f.customer for f in of_day),
                expected=bisect.bisect_right(starts, day),
                fingerprint=_fingerprint(of_day),
                newest=max(times, default=None),
                first_days=first_days,
            )
        )
    return days


def cutoff(day: dt.date, cutoff_hours: int) -> dt.datetime:
    """Return when `day` stops waiting for missing customers: its end (UTC) plus the hours."""
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    return end + dt.timedelta(hours=cutoff_hours)


def readiness(
    day: LandingDay, now: dt.datetime, cutoff_hours: int, settle_seconds: int
) -> Readiness:
    """Return whether a day is complete and settled at `now`, and why (or why not)."""
    # A file stamped after `now` (clocks of two machines) is as fresh as one stamped now.
    age = None if day.newest is None else max(now.timestamp() - day.newest, 0.0)
    if age is not None and age < settle_seconds:
        return Readiness(
            False,
            f"files still arriving (newest {age:.0f} s old, settles after {settle_seconds} s)",
        )
    delivered = f"{len(day.delivered)} of {day.expected} customers delivered"
    if len(day.delivered) >= day.expected:
        return Readiness(True, f"complete: {delivered}")
    missing = day.missing()
    closes = cutoff(day.day, cutoff_hours)
    shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    if now >= closes:
        return Readiness(
            True, f"cut-off {closes:%Y-%m-%d %H:%M} UTC passed: {delivered}, missing {shown}"
        )
    return Readiness(
        False, f"{delivered}; waiting for {shown} until the cut-off {closes:%Y-%m-%d %H:%M} UTC"
    )


def plan_landing(
    days: Iterable[LandingDay],
    requested: Mapping[dt.date, str],
    now: dt.datetime,
    cutoff_hours: int,
    settle_seconds: int,
) -> LandingPlan:
    """Return the days to read this tick, given the fingerprint last requested for each day.

    A day never requested waits behind an earlier day that waits; a day requested before
    whose files changed (a late file) is read again as soon as it is ready.
    """
    plan, blocked_by = LandingPlan(), None
    for day in sorted(days, key=lambda d: d.day):
        before = requested.get(day.day)
        if before == day.fingerprint:
            continue
        state = readiness(day, now, cutoff_hours, settle_seconds)
        if before is None and blocked_by is not None:
            plan.waiting[day.day] = f"waits for {blocked_by} (its features look back over it)"
        elif state.ready:
            plan.fingerprints[day.day] = day.fingerprint
            plan.reasons[day.day] = state.reason
            if before is not None:
                plan.late.append(day.day)
        else:
            plan.waiting[day.day] = state.reason
            if before is None:
                blocked_by = day.day
    plan.ranges = contiguous_ranges(plan.days)
    return plan


def contiguous_ranges(days: Iterable[dt.date]) -> list[DayRange]:
    """Return the days as (first, last) ranges of consecutive days, oldest first."""
    ranges: list[DayRange] = []
    for day in sorted(set(days)):
        if ranges and ranges[-1][1] + dt.timedelta(days=1) == day:
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges
