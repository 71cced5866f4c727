"""Whether a window holds enough of a customer's rows to be judged: the one rule for everyone.

A GPU job spent on a window the gate cannot score is a job wasted (issue 31: a customer whose
files stopped on 2026-05-02 was trained on a window ending 2026-05-20, its 7-day holdout empty,
and three candidate runs then failed on a library's "Input data must be 2 dimensional and non
empty"). The same rule answers twice:

- before any GPU job is submitted, `training_job` judges the window it is about to export and
  refuses one that cannot be judged, with the numbers and the latest window that could be;
- the gate (`models/gate.py`) judges the holdout it scores and answers "not enough evidence"
  with the numbers instead of scoring (or passing) a window without them.

Enough evidence: at least `min_train_rows` rows in the training part, at least
`min_holdout_rows` in the holdout, and every store that has training rows has at least
`min_holdout_rows_per_store` rows in the holdout (a model is judged for the stores it serves;
a holdout of one store cannot speak for the others), unless the store stopped selling: no row
in the holdout, and its newest row more than STILL_SELLING_DAYS older than the customer's
(issue 37: a closed store refused every candidate of its customer for as long as it stayed in
the training part). The minimums are settings:
RETRAIN_EVIDENCE_MIN_TRAIN_ROWS, RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS and
RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS_PER_STORE.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from retrain_assets.settings_model import FIELDS, current_settings

NOT_ENOUGH = "not enough evidence"
HOLDOUT_DAYS = 7  # `training_job`'s default holdout, the one the policy's decisions train with
# A store whose newest row is more than this many days older than its customer's newest has
# stopped selling (closed): over a week, so a store shut one day a week still sells, and over
# the default 7-day holdout, so a store must also miss the day before it.
STILL_SELLING_DAYS = 7


def gate_windows() -> tuple[int, int]:
    """Return the gate's (windows, days per window): RETRAIN_GATE_WINDOWS x _WINDOW_DAYS.

    Read here, below the policy and the gate, so the policy's pre-check, `training_job` and
    the evidence gate agree on one holdout (issue 31).

    Raises:
        SettingsError: a variable is not a whole number in its range (the message names it).
    """
    settings = current_settings()
    return settings.gate_windows, settings.gate_window_days


def judged_holdout_days(holdout_days: int = HOLDOUT_DAYS) -> int:
    """Return the holdout a window is judged and exported with: long enough for the gate's windows.

    `holdout_days`: the run's own holdout (`training_job`'s config; the policy's decisions use
    the default). The one answer for the policy's pre-check and `training_job`: a window the
    policy decides on is one `training_job` would not refuse for its holdout's length.
    """
    windows, days = gate_windows()
    return max(holdout_days, windows * days)


@dataclass(frozen=True)
class EvidenceRules:
    """The minimum rows a window must hold to be judged."""

    min_train_rows: int = FIELDS["evidence_min_train_rows"].default
    min_holdout_rows: int = FIELDS["evidence_min_holdout_rows"].default
    min_holdout_rows_per_store: int = FIELDS["evidence_min_holdout_rows_per_store"].default

    @classmethod
    def from_settings(cls) -> EvidenceRules:
        """Return the minimums the settings hold (defaults 28, 7, 1).

        Raises:
            SettingsError: a variable is not a whole number >= 1 (the message names it).
        """
        settings = current_settings()
        return cls(
            settings.evidence_min_train_rows,
            settings.evidence_min_holdout_rows,
            settings.evidence_min_holdout_rows_per_store,
        )

    def enough_train(self, rows: int) -> bool:
        """Return whether a training part of `rows` rows is enough (every caller asks here)."""
        return rows >= self.min_train_rows

    def enough_holdout(self, rows: int) -> bool:
        """Return whether a holdout of `rows` rows is enough (every caller asks here)."""
        return rows >= self.min_holdout_rows


@dataclass(frozen=True)
class WindowRows:
    """A customer's rows in one window: per store, in the training part and in the holdout."""

    customer: str
    first_day: dt.date
    holdout_start: dt.date
    last_day: dt.date
    train_by_store: Mapping[str, int]
    holdout_by_store: Mapping[str, int]
    newest_day_with_rows: dt.date | None  # of the customer, in what was read
    # each store's newest day with rows, in what was read (a store not named: unknown, counted)
    newest_day_by_store: Mapping[str, dt.date] = field(default_factory=dict)

    @property
    def train_rows(self) -> int:
        """Return the rows of the training part."""
        return sum(self.train_by_store.values())

    @property
    def holdout_rows(self) -> int:
        """Return the rows of the holdout."""
        return sum(self.holdout_by_store.values())

    @property
    def stopped_stores(self) -> dict[str, dt.date]:
        """Return the stores that stopped selling, with their newest day with rows.

        A store with training rows, none in the holdout, whose newest row is more than
        STILL_SELLING_DAYS older than the customer's: the model cannot be judged for it, and
        it no longer serves it.
        """
        if self.newest_day_with_rows is None:
            return {}
        since = self.newest_day_with_rows - dt.timedelta(days=STILL_SELLING_DAYS)
        return {
            store: last
            for store in sorted(self.train_by_store)
            if not self.holdout_by_store.get(store)
            and (last := self.newest_day_by_store.get(store)) is not None
            and last < since
        }


@dataclass(frozen=True)
class Evidence:
    """The verdict on a window: judgeable or not, why, and the numbers behind it."""

    enough: bool
    reason: str
    rows: WindowRows

    def as_metadata(self) -> dict[str, object]:
        """Return the numbers as JSON-able metadata (the machine's payload, the UI)."""
        r = self.rows
        return {
            "enough": self.enough,
            "reason": self.reason,
            "window": f"{r.first_day} .. {r.last_day}",
            "holdout": f"{r.holdout_start} .. {r.last_day}",
            "train_rows": r.train_rows,
            "holdout_rows": r.holdout_rows,
            "train_rows_by_store": dict(r.train_by_store),
            "holdout_rows_by_store": dict(r.holdout_by_store),
            "stores_stopped": {store: day.isoformat() for store, day in r.stopped_stores.items()},
            "newest_day_with_rows": (
                r.newest_day_with_rows.isoformat() if r.newest_day_with_rows else None
            ),
        }


def count_rows(
    frame: pd.DataFrame, customer: str, first_day: dt.date, last_day: dt.date, holdout_days: int
) -> WindowRows:
    """Count a customer's rows of a window (columns `customer`, `store_id`, `date`).

    The holdout is the window's latest `holdout_days` days, as the export keeps them apart.
    """
    start = last_day - dt.timedelta(days=holdout_days - 1)
    mine = frame[frame["customer"] == customer] if "customer" in frame else frame
    days = pd.to_datetime(mine["date"]).dt.date
    inside = (days >= first_day) & (days <= last_day)
    mine, days = mine[inside], days[inside]
    train = mine[days < start]
    holdout = mine[days >= start]
    return WindowRows(
        customer=customer,
        first_day=first_day,
        holdout_start=start,
        last_day=last_day,
        train_by_store=_by_store(train),
        holdout_by_store=_by_store(holdout),
        newest_day_with_rows=max(days) if len(days) else None,
        newest_day_by_store=newest_day_by_store(mine),
    )


def _by_store(frame: pd.DataFrame) -> dict[str, int]:
    counts = frame.groupby(frame["store_id"].astype(str), observed=True).size()
    return {str(store): int(n) for store, n in counts.items() if n}


def newest_day_by_store(frame: pd.DataFrame) -> dict[str, dt.date]:
    """Return each store's newest day with rows in `frame` (columns `store_id`, `date`)."""
    if frame.empty:
        return {}
    days = pd.to_datetime(frame["date"]).dt.date
    newest = days.groupby(frame["store_id"].astype(str).to_numpy()).max()
    return {str(store): day for store, day in newest.items()}


def judge_window(rows: WindowRows, rules: EvidenceRules) -> Evidence:
    """Return whether the window holds enough of the customer's rows to be judged, and why.

    Every shortfall is named with its numbers, e.g. "holdout 2026-05-14 .. 2026-05-20 has 0
    rows of acme (needs >= 7)".
    """
    shortfalls = []
    holdout = f"holdout {rows.holdout_start} .. {rows.last_day}"
    if rows.holdout_start <= rows.first_day:
        shortfalls.append(
            f"window {rows.first_day} .. {rows.last_day} has "
            f"{(rows.last_day - rows.first_day).days + 1} day(s), no training days before its "
            f"{(rows.last_day - rows.holdout_start).days + 1}-day holdout"
        )
    if not rules.enough_train(rows.train_rows):
        shortfalls.append(
            f"training part {rows.first_day} .. {rows.holdout_start - dt.timedelta(days=1)} has "
            f"{rows.train_rows} rows of {rows.customer} (needs >= {rules.min_train_rows})"
        )
    if not rules.enough_holdout(rows.holdout_rows):
        shortfalls.append(
            f"{holdout} has {rows.holdout_rows} rows of {rows.customer} "
            f"(needs >= {rules.min_holdout_rows})"
        )
    stopped = rows.stopped_stores
    selling = [store for store in sorted(rows.train_by_store) if store not in stopped]
    short = {
        store: rows.holdout_by_store.get(store, 0)
        for store in selling
        if rows.holdout_by_store.get(store, 0) < rules.min_holdout_rows_per_store
    }
    if short and rules.enough_holdout(rows.holdout_rows):
        listed = ", ".join(f"{store}: {n}" for store, n in short.items())
        shortfalls.append(
            f"{holdout} has too few rows for {len(short)} of {len(selling)} "
            f"store(s) ({listed}; needs >= {rules.min_holdout_rows_per_store} each)"
        )
    newest = rows.newest_day_with_rows
    if newest is not None and newest < rows.last_day:
        tail = f"; {rows.customer}'s newest day with rows is {newest}"
    elif newest is None:
        tail = f"; {rows.customer} has no rows in {rows.first_day} .. {rows.last_day}"
    else:
        tail = ""
    if stopped:
        listed = ", ".join(f"{store} since {day}" for store, day in stopped.items())
        tail += f"; not counted, stopped selling (no rows): {listed}"
    if shortfalls:
        return Evidence(False, f"{NOT_ENOUGH}: {'; '.join(shortfalls)}{tail}", rows)
    reason = (
        f"{rows.train_rows} training rows, {rows.holdout_rows} holdout rows over "
        f"{len(rows.holdout_by_store)} store(s){tail}"
    )
    return Evidence(True, reason, rows)


EVIDENCE_COLUMNS = ["customer", "store_id", "date"]  # what counting a window's rows reads


def judge_parts(
    customer: str, train: pd.DataFrame, holdout: pd.DataFrame, rules: EvidenceRules
) -> Evidence:
    """Judge an exported run key's parts (the gate's view): the same rule as `judge_window`.

    The window's days are the parts' own: the training part's first day, the holdout's first
    and last (an empty holdout starts the day after the training part ends).
    """
    train_days = pd.to_datetime(train["date"]).dt.date
    holdout_days = pd.to_datetime(holdout["date"]).dt.date
    every = [*train_days, *holdout_days]
    newest = max(every) if every else None
    first = min(every) if every else dt.date.min
    if len(holdout_days):
        start, last = min(holdout_days), max(holdout_days)
    else:
        start = last = (max(train_days) + dt.timedelta(days=1)) if len(train_days) else first
    both = pd.concat([train[["store_id", "date"]], holdout[["store_id", "date"]]])
    rows = WindowRows(
        customer,
        first,
        start,
        last,
        _by_store(train),
        _by_store(holdout),
        newest,
        newest_day_by_store(both),
    )
    return judge_window(rows, rules)


def newest_day_with_rows(rows_per_day: Mapping[dt.date, int]) -> dt.date | None:
    """Return the newest day whose count is positive (e.g. a customer's published rows)."""
    days = [day for day, n in rows_per_day.items() if n > 0]
    return max(days) if days else None


def latest_judgeable_window(
    rows_per_day: Mapping[dt.date, int],
    length_days: int,
    holdout_days: int,
    rules: EvidenceRules,
    verify: Callable[[dt.date, dt.date], bool] | None = None,
    verify_limit: int = 60,
) -> tuple[dt.date, dt.date] | None:
    """Return the latest window that could be judged: ending on a day with rows, holding enough.

    `rows_per_day` holds every published day (zero for a day without the customer's rows); a
    window is at most `length_days` long and only of published days, as a launch needs.
    Counted on the customer's rows per day (`feature_snapshots`), which know no stores:
    `verify(first, last)` judges a window that passes the counts on the rows themselves (per
    store, the gate's own checks), newest first, at most `verify_limit` of them, so the window
    named is one that would not be refused in turn. None when no such window exists.
    """
    days = sorted(day for day, n in rows_per_day.items() if n > 0)
    one = dt.timedelta(days=1)
    verified = 0
    for last in reversed(days):
        first = last
        while (last - first).days + 1 < length_days and first - one in rows_per_day:
            first -= one
        start = last - dt.timedelta(days=holdout_days - 1)
        train = sum(n for day, n in rows_per_day.items() if first <= day < start)
        holdout = sum(n for day, n in rows_per_day.items() if start <= day <= last)
        if not (start > first and rules.enough_train(train) and rules.enough_holdout(holdout)):
            continue
        if verify is None:
            return first, last
        if verified == verify_limit:
            return None
        verified += 1
        if verify(first, last):
            return first, last
    return None
