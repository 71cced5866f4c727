"""The decision benchmark's figures: one row per scenario, then min / median / max over them.

Per scenario: decisions right where their two models differ by more than 2 % over the next 28
days (the others excluded, and counted apart); the worst promotion (the largest WAPE increase of
a new champion over the one it replaced, next 28 days); the served WAPE of the platform, of an
oracle and of two baselines on the days the platform served a champion; and how many demo days
each change of the scenario took to reach the served model, and apart the price changes (the
issue's goal: each within PRICE_DAYS demo days).

Served WAPE is over every row of demo days 1 .. days; a regime with no model yet (the platform
before its first champion) counts the seasonal naive forecast, the gate's last resort.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from hindsight_replay import HISTORY_END, NAIVE, Replay
from hindsight_score import HINDSIGHT_DAYS, DailyErrors, Judged, change_lag, judge, regimes

from retrain_assets.demo.scenarios import ScenarioEvent

REGIMES = ("platform", "oracle", "never", "newest")
PRICE_KINDS = frozenset({"price_up", "price_down"})
PRICE_DAYS = 10  # issue 37: a price change reaches the served model within this many demo days


@dataclass
class ScenarioResult:
    """What one scenario's replay decided and how that looks in hindsight."""

    label: str
    tenants: int
    series: int
    decisions: int = 0  # decisive ones: models more than 2 % apart
    right: int = 0
    excluded: int = 0  # within 2 %: not counted
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (right, of)
    promotions: int = 0  # champion moves (first deployments and promoted canaries)
    worst_promotion: float = math.nan  # the largest relative WAPE increase of a move
    served: dict[str, float] = field(default_factory=dict)  # regime -> WAPE
    lags: list[int] = field(default_factory=list)  # demo days, per change that reached
    price_lags: list[int | None] = field(default_factory=list)  # per price change (None: never)
    changes: int = 0  # changes starting in demo days 1 .. days
    trainings: int = 0
    alerts: int = 0
    wall: float = 0.0

    @property
    def share(self) -> float:
        """Return the share of decisive decisions that were right (nan: none)."""
        return self.right / self.decisions if self.decisions else math.nan

    @property
    def unreached(self) -> int:
        """Return the changes no served model had learnt by the end of the replay."""
        return self.changes - len(self.lags)


def result_of(
    label: str, replay: Replay, events: Sequence[ScenarioEvent], wall: float
) -> tuple[ScenarioResult, list[Judged]]:
    """Judge every decision of a finished replay and sum up the scenario."""
    found = ScenarioResult(
        label,
        len(replay.tenants),
        sum(t.spec.stores * t.spec.items for t in replay.tenants),
        trainings=replay.trainings,
        alerts=sum(t.alerts for t in replay.tenants),
        wall=wall,
    )
    judged: list[Judged] = []
    totals = {name: [0.0, 0.0] for name in REGIMES}
    for tenant in replay.tenants:
        errors = replay_errors(replay, tenant.spec.name)
        for j in tenant.judged:
            judge(j, errors, tenant.models)
            judged.append(j)
        candidates = [m for m in tenant.models.values() if m.decided is not None]
        days = [HISTORY_END + dt.timedelta(days=k) for k in range(1, replay.days + 1)]
        served = regimes(days, tenant.served, candidates, tenant.models, NAIVE, errors)
        for name, by_day in served.items():
            error, volume = errors.served(by_day)
            totals[name][0] += error
            totals[name][1] += volume
        for event in events:
            if event.tenant != tenant.spec.name or not 1 <= event.first_demo_day <= replay.days:
                continue
            found.changes += 1
            lag = change_lag(event.first_day, tenant.served, tenant.models)
            if lag is not None:
                found.lags.append(lag)
            if event.kind in PRICE_KINDS:
                found.price_lags.append(lag)
    found.served = {n: e / v if v else math.nan for n, (e, v) in totals.items()}
    _count(found, judged)
    return found, judged


def replay_errors(replay: Replay, tenant: str) -> DailyErrors:
    """Return the tenant's daily errors over demo days 0 .. days + 28."""
    last = HISTORY_END + dt.timedelta(days=replay.days + HINDSIGHT_DAYS)
    return DailyErrors(replay.features[tenant], HISTORY_END, last)


def _count(found: ScenarioResult, judged: Sequence[Judged]) -> None:
    """Count decisive decisions (right, per kind), exclusions and the worst promotion."""
    kinds: dict[str, list[int]] = {}
    for j in judged:
        if j.moved:
            found.promotions += 1
            if math.isnan(found.worst_promotion) or j.relative > found.worst_promotion:
                found.worst_promotion = j.relative
        if not j.decisive:
            found.excluded += 1
            continue
        found.decisions += 1
        found.right += int(j.right)
        tally = kinds.setdefault(j.kind, [0, 0])
        tally[0] += int(j.right)
        tally[1] += 1
    found.by_kind = {k: (r, n) for k, (r, n) in kinds.items()}


def _lag_text(r: ScenarioResult) -> str:
    if not r.changes:
        return "no change"
    shown = f"{statistics.median(r.lags):g} / {max(r.lags)}" if r.lags else "- / -"
    return f"{shown} ({r.unreached} of {r.changes} never)"


def _price_text(r: ScenarioResult) -> str:
    shown = ", ".join("never" if lag is None else str(lag) for lag in r.price_lags)
    return f"{r.label}: {shown}"


def _worst_text(r: ScenarioResult) -> str:
    if not r.promotions:
        return "none (0)"
    return f"{r.worst_promotion:+.1%} ({r.promotions})"


def _kind_text(r: ScenarioResult, kind: str) -> str:
    right, of = r.by_kind.get(kind, (0, 0))
    return f"{right}/{of}" if of else "-"


def table(results: Sequence[ScenarioResult]) -> str:
    """Return one Markdown row per scenario."""
    lines = [
        "| scenario | tenants; series | decisions right (> 2 % apart) | gate / deploy / canary "
        "right | within 2 % (not counted) | worst promotion (of n) | served WAPE, demo days 1..N: "
        "platform | "
        "oracle | never retrain | always newest | change reached served model, days: median / "
        "max | trainings; drift alerts left waiting | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.label} | {r.tenants}; {r.series} | {r.right} of {r.decisions} "
            f"({r.share:.0%}) | {_kind_text(r, 'gate')} / {_kind_text(r, 'deploy')} / "
            f"{_kind_text(r, 'canary')} | {r.excluded} | {_worst_text(r)} | "
            f"{r.served['platform']:.4f} | {r.served['oracle']:.4f} | "
            f"{r.served['never']:.4f} | {r.served['newest']:.4f} | {_lag_text(r)} | "
            f"{r.trainings}; {r.alerts} | {r.wall:.0f} |"
        )
    return "\n".join(lines)


def _spread(values: Sequence[float], form: str) -> str:
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return "-"
    return " / ".join(format(v, form) for v in (min(kept), statistics.median(kept), max(kept)))


def summary(results: Sequence[ScenarioResult]) -> str:
    """Return min / median / max over the scenarios as a Markdown table."""
    rows = [
        ("decisions right (> 2 % apart)", [r.share for r in results], ".0%"),
        ("worst promotion", [r.worst_promotion for r in results], "+.1%"),
        ("served WAPE, platform", [r.served["platform"] for r in results], ".4f"),
        ("served WAPE, oracle", [r.served["oracle"] for r in results], ".4f"),
        ("served WAPE, never retrain", [r.served["never"] for r in results], ".4f"),
        ("served WAPE, always newest", [r.served["newest"] for r in results], ".4f"),
        (
            "platform vs oracle (served WAPE, relative)",
            [r.served["platform"] / r.served["oracle"] - 1 for r in results],
            "+.1%",
        ),
        (
            "median days for a change to reach the served model",
            [statistics.median(r.lags) if r.lags else math.nan for r in results],
            ".1f",
        ),
        (
            "changes never reaching the served model (share)",
            [r.unreached / r.changes if r.changes else math.nan for r in results],
            ".0%",
        ),
    ]
    decided = sum(r.decisions for r in results)
    right = sum(r.right for r in results)
    prices = [lag for r in results for lag in r.price_lags]
    within = sum(lag is not None and lag <= PRICE_DAYS for lag in prices)
    reached = sorted(lag for lag in prices if lag is not None)
    after = f"reached after {', '.join(map(str, reached))} days" if reached else "none reached"
    lines = [
        f"| over {len(results)} scenarios | min / median / max |",
        "|---|---|",
        *(f"| {name} | {_spread(values, form)} |" for name, values, form in rows),
        f"| all decisions pooled | {right} of {decided} right "
        f"({right / decided if decided else math.nan:.0%}); "
        f"{sum(r.excluded for r in results)} within 2 % not counted |",
        f"| price changes reaching the served model within {PRICE_DAYS} demo days | {within} of "
        f"{len(prices)} ({', '.join(_price_text(r) for r in results if r.price_lags)}); "
        f"{after} |",
    ]
    return "\n".join(lines)
