"""Whether `training_job` may spend a GPU job on a window: judged on the customer's own rows.

The rule is `features/evidence.py`'s (the margin gate's too); with RETRAIN_GATE_RULE=evidence
the evidence gate's own checks (`gate_evidence.holdout_shortfall`) are asked as well, so a
window the gate would answer "not enough evidence" is refused before any GPU job. A refusal
names the latest window that could be judged, found on the published counts per day and then
judged on the rows themselves (per store, the gate's checks): never a window that would be
refused in turn.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pandas as pd

from retrain_assets.asset_keys import STORE_DAY_FEATURES, name_of
from retrain_assets.features.evidence import (
    NOT_ENOUGH,
    Evidence,
    EvidenceRules,
    count_rows,
    judge_window,
    latest_judgeable_window,
)
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.models.gate import GATE_RULE, gate_rule
from retrain_assets.models.gate_evidence import MIN_STORES, GateRules, holdout_shortfall
from retrain_assets.policy.thresholds import settings_for
from retrain_assets.store.snapshot_ref import SnapshotRef
from retrain_assets.store.snapshots import latest_snapshots


@dataclasses.dataclass
class _CustomerDays:
    """The customer's rows, read a day at a time and once: the window's, then earlier ones."""

    store: ParquetPartitionStore
    customer: str
    frame: pd.DataFrame
    days: set[str]

    def rows(self, first: dt.date, last: dt.date) -> pd.DataFrame:
        """Return the customer's rows of `first` .. `last`, reading the days not read yet."""
        keys = [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
        missing = [key for key in keys if key not in self.days]
        if missing:
            read = self.store.read(name_of(STORE_DAY_FEATURES), missing)
            self.frame = pd.concat([self.frame, read[read["customer"] == self.customer]])
            self.days.update(missing)
        return self.frame


def judge_rows(
    frame: pd.DataFrame,
    customer: str,
    first: dt.date,
    last: dt.date,
    holdout_days: int,
    rules: EvidenceRules,
) -> Evidence:
    """Judge a window on the customer's rows: the evidence rule, then the evidence gate's own."""
    evidence = judge_window(count_rows(frame, customer, first, last, holdout_days), rules)
    if evidence.enough and gate_rule() == "evidence":
        return judged_by_the_evidence_gate(evidence, frame, rules)
    return evidence


def judged_by_the_evidence_gate(
    evidence: Evidence, frame: pd.DataFrame, rules: EvidenceRules
) -> Evidence:
    """Return the evidence gate's own verdict on the window's holdout, before any forecast.

    RETRAIN_GATE_RULE=evidence answers "not enough evidence" for more than a short holdout
    (one of its several windows short of rows, fewer stores than a bootstrap needs): its own
    checks (`holdout_shortfall`) refuse such a window here, not after a GPU job was spent.
    """
    r = evidence.rows
    mine = frame[frame["customer"] == r.customer] if "customer" in frame else frame
    days = pd.to_datetime(mine["date"]).dt.date
    holdout = mine[(days >= r.holdout_start) & (days <= r.last_day)]
    why = holdout_shortfall(
        holdout,
        GateRules.from_settings(),
        rules,
        dict(r.train_by_store),
        r.customer,
        r.newest_day_by_store,
    )
    if not why:
        return evidence
    why = why.removeprefix(f"{NOT_ENOUGH}: ")
    return Evidence(
        False, f"{NOT_ENOUGH}: the evidence gate ({GATE_RULE}=evidence) would answer: {why}", r
    )


def judge_snapshot(
    db_url: str,
    store: ParquetPartitionStore,
    customer: str,
    ref: SnapshotRef,
    frame: pd.DataFrame,
    holdout_days: int,
) -> Evidence:
    """Judge the window on the customer's rows; a refusal names the latest judgeable window.

    `frame`: the customer's rows of the window (read once, the export reuses them).
    """
    rules = EvidenceRules.from_settings()
    evidence = judge_rows(frame, customer, ref.first_day, ref.last_day, holdout_days, rules)
    if evidence.enough:
        return evidence
    rows = evidence.rows
    stores = len({*rows.train_by_store, *rows.holdout_by_store})
    if gate_rule() == "evidence" and stores < MIN_STORES:  # no later or longer window helps
        return dataclasses.replace(
            evidence,
            reason=f"{evidence.reason}; no window of {customer} can be judged by the evidence "
            f"gate while its rows come from {stores} store(s) (needs >= {MIN_STORES})",
        )
    published = latest_snapshots(db_url)
    per_day = {day: r.rows_per_customer.get(customer, 0) for day, r in published.items()}
    # as long as the window asked for, or the policy's window if that is longer (a window
    # too short to judge asks for a longer one)
    length = max(
        (ref.last_day - ref.first_day).days + 1, settings_for(db_url, customer).window_days
    )
    read = _CustomerDays(store, customer, frame, set(ref.data_versions))

    def judgeable(first: dt.date, last: dt.date) -> bool:
        rows_read = read.rows(first, last)
        return judge_rows(rows_read, customer, first, last, holdout_days, rules).enough

    found = latest_judgeable_window(per_day, length, holdout_days, rules, verify=judgeable)
    if found is None:
        latest = (
            f"; no published window of up to {length} days holds enough of "
            f"{customer}'s rows ({sum(per_day.values())} published in all)"
        )
    else:
        latest = f"; the latest window that could be judged: {found[0]} .. {found[1]}"
    return dataclasses.replace(evidence, reason=evidence.reason + latest)
