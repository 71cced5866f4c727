"""Is each customer's serving model fresh? One judgement for the UI's check and for `status`.

Freshness is counted in published feature days, not wall-clock days: how many days were
published after the last day the serving champion was trained on. More than the customer's
`schedule_days` behind is a warning, more than twice that an error; a drift alert waiting for a
person is at least a warning, whatever the lag, because nothing moves until someone acts. The
reason names what holds the customer back (its data stopped, an approval waits, training
failed, every candidate since day X failed its gate, its last canary was rolled back, a
challenger is in its canary), so nobody has to read a sensor's tick to learn it.

Everything is read in a handful of set-based queries for all customers at once (the
`serving_report` sensor judges every customer each tick); `judge_freshness(url, [name])` is the
same code for one.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from retrain_assets.machines.training import NAME as TRAINING
from retrain_assets.policy.alerts import DriftAlert, pending_alerts
from retrain_assets.policy.rule import APPROVAL_JOB
from retrain_assets.policy.thresholds import DEFAULTS, all_settings
from retrain_assets.store.database import transaction

Severity = Literal["fresh", "warn", "error"]
GATE = "beats_champion"
NEWEST_DAYS = 7  # days read whole for "newest day with rows"; older ones are asked by key
APPROVAL_LAUNCHPAD = f"/locations/retrain_assets/jobs/{APPROVAL_JOB}/playground"


@dataclass(frozen=True)
class Serving:
    """The champion serving a customer, and the recorded move that put it there."""

    version: str
    since: dt.datetime | None
    move_id: int | None
    from_version: str | None
    decision_id: int | None
    rollout_id: int | None
    run_key: str | None
    decided_by: str | None
    trained_to: dt.date | None


@dataclass(frozen=True)
class Freshness:
    """One customer's verdict: how far behind its serving model is, and why."""

    customer: str
    severity: Severity
    reason: str
    serving: Serving | None
    newest_day: dt.date | None
    customer_last_day: dt.date | None
    days_behind: int | None
    schedule_days: int
    waiting_for_person: str | None = None
    causes: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        """Return whether the check passes (fresh)."""
        return self.severity == "fresh"

    def fingerprint(self) -> str:
        """Return what must change for the verdict to be reported again."""
        version = self.serving.version if self.serving else "-"
        return f"{self.severity}|{version}|{self.days_behind}|{self.reason}"

    def metadata(self) -> dict[str, Any]:
        """Return the check's metadata: the numbers the verdict rests on."""
        serving = self.serving
        return {
            "serving_version": serving.version if serving else "none",
            "serving_since": serving.since.isoformat() if serving and serving.since else "n/a",
            "trained_to": _iso(serving.trained_to if serving else None),
            "newest_published_day": _iso(self.newest_day),
            "customer_last_day_with_rows": _iso(self.customer_last_day),
            "published_days_behind": -1 if self.days_behind is None else self.days_behind,
            "warn_after_days": self.schedule_days,
            "error_after_days": 2 * self.schedule_days,
            "waiting_for_person": self.waiting_for_person or "nothing",
        }


@dataclass(frozen=True)
class _Facts:
    """Everything the verdicts read, for every customer at once."""

    published: list[dt.date]
    last_rows: dict[str, dt.date]
    history_days: dict[str, int]
    serving: dict[str, Serving]
    canary: dict[str, tuple[str, str | None]]
    last_rollout: dict[str, tuple[int, str, str | None, str | None, dt.datetime]]
    gates: dict[str, tuple[int, int, str | None, str | None]]
    training: dict[str, tuple[str, str, str | None, str | None]]
    alerts: dict[str, DriftAlert]
    schedule_days: dict[str, int]
    min_history: dict[str, int]


def judge_freshness(url: str, customers: Sequence[str]) -> dict[str, Freshness]:
    """Return the verdict of each named customer (a customer without any record included)."""
    facts = _read(url, list(customers))
    return {customer: _judge(customer, facts) for customer in customers}


def _judge(customer: str, facts: _Facts) -> Freshness:
    schedule = facts.schedule_days.get(customer, DEFAULTS.schedule_days)
    newest = facts.published[-1] if facts.published else None
    last_rows = facts.last_rows.get(customer)
    serving = facts.serving.get(customer)
    alert = facts.alerts.get(customer)
    waiting = (
        f"drift alert {alert.id} waits for approval since {alert.detected_at:%Y-%m-%d %H:%M} "
        f"UTC: launch {APPROVAL_JOB} for {customer} ({APPROVAL_LAUNCHPAD})"
        if alert
        else None
    )
    causes = _causes(customer, facts, serving, newest, last_rows, waiting)
    if serving is None:
        history = facts.history_days.get(customer, 0)
        enough = facts.min_history.get(customer, DEFAULTS.min_history_days)
        severity: Severity = "error" if history > enough + 2 * schedule else "warn"
        head = f"no model serves {customer} yet ({history} published day(s) with its rows)"
        return Freshness(
            customer, severity, "; ".join([head, *causes]), None, newest, last_rows, None,
            schedule, waiting, tuple(causes),
        )  # fmt: skip
    behind = _days_after(facts.published, serving.trained_to)
    severity = _severity(behind, schedule, waiting is not None)
    if serving.trained_to is None:
        causes.insert(
            0,
            f"no beats_champion verdict records the training window of run key "
            f"{serving.run_key or 'unknown'}",
        )
    head = (
        f"serving {serving.version}, trained on days up to {_iso(serving.trained_to)}: "
        f"{'?' if behind is None else behind} published day(s) behind (newest {_iso(newest)}; "
        f"warn after {schedule}, error after {2 * schedule})"
    )
    return Freshness(
        customer, severity, "; ".join([head, *causes]), serving, newest, last_rows, behind,
        schedule, waiting, tuple(causes),
    )  # fmt: skip


def _severity(behind: int | None, schedule: int, waiting: bool) -> Severity:
    if behind is not None and behind > 2 * schedule:
        return "error"
    if behind is None or behind > schedule or waiting:  # None: its window is not recorded
        return "warn"
    return "fresh"


def _causes(
    customer: str,
    facts: _Facts,
    serving: Serving | None,
    newest: dt.date | None,
    last_rows: dt.date | None,
    waiting: str | None,
) -> list[str]:
    """Return what holds the customer back (or moves it on), most urgent first."""
    causes = []
    if newest is not None and (last_rows is None or last_rows < newest):
        causes.append(
            f"no rows for {customer} since {_iso(last_rows)}"
            if last_rows
            else f"no rows for {customer} in any published day"
        )
    if waiting:
        causes.append(f"waiting for a person: {waiting}")
    training = facts.training.get(customer)
    if training is not None:
        state, status, reason, run_key = training
        if state == "FAILED":
            causes.append(f"training {run_key} failed: {reason or 'no reason recorded'}")
        elif status != "terminal":
            causes.append(f"training {run_key} in {state}")
    gates = facts.gates.get(customer)
    if gates is not None:
        failed, passed, first_failed, latest_reason = gates
        if failed and not passed:
            since = f" since day {first_failed}" if first_failed else ""
            causes.append(
                f"every candidate{since} failed its gate ({failed}; latest: {latest_reason})"
            )
    canary = facts.canary.get(customer)
    if canary is not None:
        causes.append(f"challenger {canary[0]} in its canary ({canary[1] or 'starting'})")
    rollout = facts.last_rollout.get(customer)
    moved = serving.since if serving else None
    if rollout is not None and rollout[2] == "rolled_back":
        _, version, _, why, started = rollout
        if moved is None or started > moved:
            causes.append(f"its last challenger {version} was rolled back: {why}")
    return causes


def _days_after(published: list[dt.date], day: dt.date | None) -> int | None:
    if day is None:
        return None
    return len(published) - bisect.bisect_right(published, day)


def _iso(day: dt.date | None) -> str:
    return day.isoformat() if day else "never"


def _read(url: str, customers: list[str]) -> _Facts:
    """Read every fact in one transaction: grouped queries, none per customer."""
    with transaction(url) as cur:
        cur.execute("SELECT DISTINCT partition_date FROM feature_snapshots ORDER BY 1")
        published = [row[0] for row in cur.fetchall()]
        cur.execute(
            "SELECT r.customer, r.champion_version, m.moved_at, m.id, m.from_version,"
            " m.decision_id, m.rollout_id, d.run_key, d.decided_by, g.holdout_window,"
            " r.canary_version, r.step"
            " FROM serving_routes r"
            " LEFT JOIN LATERAL (SELECT * FROM champion_moves m WHERE m.customer = r.customer"
            "   AND m.to_version = r.champion_version ORDER BY m.id DESC LIMIT 1) m ON true"
            " LEFT JOIN deployment_decisions d ON d.id = m.decision_id"
            " LEFT JOIN LATERAL (SELECT holdout_window FROM gate_results g"
            "   WHERE g.run_key = d.run_key AND g.gate = %s ORDER BY g.id DESC LIMIT 1) g ON true"
            " WHERE r.customer = ANY(%s)",
            (GATE, customers),
        )
        serving, canary = {}, {}
        for row in cur.fetchall():
            customer, version, canary_version, step = row[0], row[1], row[10], row[11]
            if canary_version:
                canary[customer] = (canary_version, step)
            if version:
                serving[customer] = Serving(
                    version=version,
                    since=row[2],
                    move_id=row[3],
                    from_version=row[4],
                    decision_id=row[5],
                    rollout_id=row[6],
                    run_key=row[7],
                    decided_by=row[8],
                    trained_to=_window_end(row[9]),
                )
        cur.execute(
            "SELECT DISTINCT ON (customer) customer, id, version, outcome, reason, started_at"
            " FROM rollouts WHERE customer = ANY(%s) ORDER BY customer, id DESC",
            (customers,),
        )
        last_rollout = {row[0]: tuple(row[1:]) for row in cur.fetchall()}
        cur.execute(
            "SELECT g.customer, count(*) FILTER (WHERE NOT g.passed),"
            " count(*) FILTER (WHERE g.passed),"
            " (array_agg(g.holdout_window ORDER BY g.id) FILTER (WHERE NOT g.passed))[1],"
            " (array_agg(g.reason ORDER BY g.id DESC))[1]"
            " FROM gate_results g LEFT JOIN serving_routes r ON r.customer = g.customer"
            " LEFT JOIN LATERAL (SELECT moved_at FROM champion_moves m"
            "   WHERE m.customer = g.customer ORDER BY m.id DESC LIMIT 1) m ON true"
            " WHERE g.customer = ANY(%s) AND g.gate = %s"
            "   AND g.evaluated_at > coalesce(m.moved_at, '-infinity')"
            " GROUP BY g.customer",
            (customers, GATE),
        )
        gates = {
            c: (failed, passed, _window_end_text(first), latest)
            for c, failed, passed, first, latest in cur.fetchall()
        }
        cur.execute(
            "SELECT customer, state, status, coalesce(reason, last_error), run_key"
            " FROM machine_pointers WHERE machine = %s AND customer = ANY(%s)",
            (TRAINING, customers),
        )
        training = {row[0]: tuple(row[1:]) for row in cur.fetchall()}
        last_rows = _newest_days_with_rows(cur, customers)
        history = _days_with_rows(cur, [c for c in customers if c not in serving])
        for customer, (last, _) in _keyed_rows(cur, [c for c in customers if c not in last_rows]):
            last_rows[customer] = last
    settings = all_settings(url)
    alerts = pending_alerts(url)
    return _Facts(
        published=published,
        last_rows=last_rows,
        history_days=history,
        serving=serving,
        canary=canary,
        last_rollout=last_rollout,
        gates=gates,
        training=training,
        alerts={c: a for c, a in alerts.items() if c in set(customers)},
        schedule_days={c: s.schedule_days for c, s in settings.items()},
        min_history={c: s.min_history_days for c, s in settings.items()},
    )


def _newest_days_with_rows(cur: Any, customers: list[str]) -> dict[str, dt.date]:
    """Return each customer's newest day with rows among the newest NEWEST_DAYS published.

    Read newest first, the latest record of each day, until every customer is found: on a
    platform whose customers deliver, one day's record answers for nearly all of them (each
    record names every customer, so expanding every day's in SQL cost 9 s a tick at 100,000
    customers and 35 days, and grows with the days). The rest go to `_keyed_rows`.
    """
    cur.execute(
        "SELECT DISTINCT ON (partition_date) partition_date, rows_per_customer"
        " FROM feature_snapshots ORDER BY partition_date DESC, published_at DESC, id DESC"
        " LIMIT %s",
        (NEWEST_DAYS,),
    )
    found: dict[str, dt.date] = {}
    left = set(customers)
    for day, rows in iter(cur.fetchone, None):  # a day's record is parsed only when needed
        hits = {c for c in left if rows.get(c, 0) > 0}
        found.update(dict.fromkeys(hits, day))
        left -= hits
        if not left:
            break
    return found


def _keyed_rows(cur: Any, customers: list[str]) -> list[tuple[str, tuple[dt.date, int]]]:
    """Return (customer, (newest day with rows, days with rows)) for a few customers, by key."""
    if not customers:
        return []
    cur.execute(
        "SELECT k, max(s.partition_date), count(DISTINCT s.partition_date)"
        " FROM feature_snapshots s CROSS JOIN unnest(%s::text[]) AS k"
        " WHERE coalesce((s.rows_per_customer ->> k)::bigint, 0) > 0 GROUP BY k",
        (customers,),
    )
    return [(name, (last, days)) for name, last, days in cur.fetchall()]


def _days_with_rows(cur: Any, customers: list[str]) -> dict[str, int]:
    """Return how many published days have rows of each customer (those serving nothing)."""
    return {name: days for name, (_, days) in _keyed_rows(cur, customers)}


def _window_end(window: str | None) -> dt.date | None:
    """Return the last day of a recorded holdout window ("2026-05-01 .. 2026-05-07")."""
    text = _window_end_text(window)
    return dt.date.fromisoformat(text) if text else None


def _window_end_text(window: str | None) -> str | None:
    if not window or ".." not in window:
        return None
    return window.rsplit("..", 1)[1].strip()
