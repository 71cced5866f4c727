"""One evaluation of the policy: what it reads once, and each customer's outcome from that.

The `retraining_policy` sensor and `retrain-assets policy why` both go through here, so the
reason a person is given for one customer is the reason the tick gives: the same reads, the
same busy and settled-data checks, the same rule (`policy_outcome`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import dagster as dg

from retrain_assets.features.evidence import EvidenceRules
from retrain_assets.policy.alerts import DriftAlert, pending_alerts
from retrain_assets.policy.busy import busy_customers
from retrain_assets.policy.decisions import Decision, latest_decisions
from retrain_assets.policy.drift import Baselines, DayFrames, DriftMeasure, measure_drift
from retrain_assets.policy.history import Published, choose_window
from retrain_assets.policy.rule import Outcome, WindowDays, policy_outcome, window_days_of
from retrain_assets.policy.settled import publishing_work
from retrain_assets.policy.thresholds import DEFAULTS, PolicySettings, all_settings

NOTHING_PUBLISHED = "no feature snapshot is published yet"


def held_reason(
    instance: dg.DagsterInstance, published: Published, runs: Sequence[dg.DagsterRun]
) -> str | None:
    """Return why no customer can get a decision now (nothing published, unsettled data)."""
    if not published:
        return NOTHING_PUBLISHED
    publishing = publishing_work(instance, runs)
    if not publishing:
        return None
    return (
        "no decision while feature days are being published (decisions wait for settled "
        f"data): {'; '.join(publishing)}"
    )


def error_line(customer: str, err: Exception) -> str:
    """Return the line that says the rule could not be evaluated for the customer."""
    return f"{customer}: error: {err}"


def waiting_reason(decision: Decision) -> str:
    """Return why an open decision's customer is busy: its run is not launched yet."""
    return f"decision {decision.id} waiting for its run"


@dataclass(frozen=True)
class PolicyState:
    """Every customer's inputs to the rule, read once per evaluation."""

    published: Published
    latest: dict[str, Decision]
    alerts: dict[str, DriftAlert]
    settings: dict[str, PolicySettings]
    busy: dict[str, str]
    frames: DayFrames
    baselines: Baselines
    rules: EvidenceRules = field(default_factory=EvidenceRules.from_settings)
    windows: dict[int, WindowDays] = field(default_factory=dict)  # by window_days

    def settings_of(self, customer: str) -> PolicySettings:
        """Return the customer's effective settings (the defaults without an override)."""
        return self.settings.get(customer, DEFAULTS)

    def window(self, days: int) -> WindowDays:
        """Return the days of the snapshot a decision of `days` days would name now (once)."""
        if days not in self.windows:
            ref = choose_window(self.published, days)
            self.windows[days] = window_days_of(self.published, ref)
        return self.windows[days]

    def outcome(self, customer: str, now: dt.datetime) -> Outcome:
        """Return the rule's outcome for one customer; reads feature files only for drift."""
        settings = self.settings_of(customer)
        return policy_outcome(
            customer,
            self.settings_of(customer),
            self.published,
            self.latest.get(customer),
            self.alerts.get(customer),
            self.busy.get(customer),
            now,
            self.drift_of,
            window=self.window(settings.window_days) if self.published else None,
            rules=self.rules,
        )

    def drift_of(self, last: Decision, recent: list[dt.date]) -> DriftMeasure:
        """Measure drift against the decision's window; its days are parsed only when new."""
        baseline = self.baselines.stored(last.id)
        if baseline is None:
            window = sorted(dt.date.fromisoformat(d) for d in last.data_versions)
            baseline = self.baselines.of(last.id, last.customer, window)
        return measure_drift(baseline, last.customer, recent, self.frames)


def read_state(
    url: str,
    instance: dg.DagsterInstance,
    published: Published,
    runs: Sequence[dg.DagsterRun],
    waiting: Iterable[Decision],
    frames: DayFrames,
) -> PolicyState:
    """Read what the rule needs for every customer; records nothing.

    `waiting`: the open decisions no run has taken up yet (their customers are busy).
    """
    busy = busy_customers(url, instance, runs)
    for decision in waiting:
        busy.setdefault(decision.customer, waiting_reason(decision))
    latest = latest_decisions(url)
    baselines = Baselines(url, frames, [d.id for d in latest.values()])
    return PolicyState(
        published, latest, pending_alerts(url), all_settings(url), busy, frames, baselines
    )
