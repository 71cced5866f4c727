"""Judging one canary step: operational health first, then forecast quality against the champion.

Kept apart from the machine and the database so the rule reads (and is tested) on its own.
Operational: the canary's error rate and its non-finite predictions in the step, from the
prediction log. Quality: WAPE of the canary's predictions and of the champion's shadow
predictions on the same canary-routed rows, once those rows' actual sales are materialized.
Too little of either after the step's wait counts as a failure, as in Flagger.

Two quality rules (RETRAIN_CANARY_RULE): `wape`, the canary's WAPE within the tolerance of the
champion's on at least `min_actuals` rows; and `evidence` (issue 26, part 3): the paired
interval of `canary_evidence.py` on as many rows as the customer's volume says the step needs,
where an inconclusive interval extends the step (`canary_inconclusive_limit` times) and then
`canary_final_rule` decides, named in the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

from retrain_assets.deployment.canary_evidence import CanaryEvidence, StepVolume, judge_canary
from retrain_assets.deployment.rollout_settings import RolloutSettings


@dataclass(frozen=True)
class StepObservation:
    """What the prediction log and the materialized actuals say about one step of a rollout.

    Attributes:
        step: the step (state) the counts are for.
        canary_requests: canary predictions served in the step.
        canary_errors: of those, failed predictions.
        canary_nonfinite: of those, NaN or infinite predictions.
        rows_with_actuals: canary-routed rows of the rollout so far with an actual and a
            champion shadow prediction (a row keeps its route from step to step).
        canary_wape: the canary's WAPE on those rows (None without rows or actual sales).
        champion_wape: the champion's WAPE on the same rows.
        quality_read: False when the rows were not read yet (too few canary predictions).
        pairs: those rows, one per request key (`canary_evidence.PAIR_COLUMNS`), for the
            evidence rule; None when not read.
        rows_per_day: the customer's rows with actuals a day (0: not known).
        canary_coverage: the share of the canary's served rows with actuals inside its
            prediction interval, per level ("80": 0.81, ...), and their count ("rows");
            recorded beside the analysis, never a reason to pass or fail; None when the
            canary logged no bounds (a model without intervals) or no actuals are known.
    """

    step: str
    canary_requests: int = 0
    canary_errors: int = 0
    canary_nonfinite: int = 0
    rows_with_actuals: int = 0
    canary_wape: float | None = None
    champion_wape: float | None = None
    quality_read: bool = True
    pairs: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    rows_per_day: float = 0.0
    canary_coverage: Mapping[str, float] | None = None


@dataclass(frozen=True)
class StepVerdict:
    """`pass`, `fail` and `inconclusive` are analyses (recorded); `wait`: not enough data yet.

    `rule` names what decided: `operational`, `no data`, `wape`, `interval` (the evidence's
    interval), or `final rule: point` / `final rule: rollback` after the inconclusive limit.
    """

    kind: Literal["pass", "fail", "wait", "inconclusive"]
    reason: str
    rule: str = "wape"
    evidence: CanaryEvidence | None = None


def judge_step(
    seen: StepObservation,
    settings: RolloutSettings,
    intervals_without_data: int,
    *,
    weight: float = 0.0,
    inconclusive: int = 0,
) -> StepVerdict:
    """Decide a step whose minimum time has passed.

    Args:
        seen: the step's observation now.
        settings: the thresholds and which quality rule decides.
        intervals_without_data: earlier analyses of this step that lacked data.
        weight: the step's share of the traffic (the evidence rule's sample size).
        inconclusive: earlier inconclusive analyses of this step (the evidence rule).
    """
    if seen.canary_requests >= settings.min_predictions:
        failure = _operational_failure(seen, settings)
        if failure:
            return StepVerdict("fail", failure, "operational")
    if settings.canary_rule == "evidence":
        return _judge_with_evidence(seen, settings, intervals_without_data, weight, inconclusive)
    return _judge_wape(seen, settings, intervals_without_data)


def _judge_wape(
    seen: StepObservation, settings: RolloutSettings, intervals_without_data: int
) -> StepVerdict:
    """Judge the step's quality by the two WAPEs on at least `min_actuals` rows (rule `wape`)."""
    enough_requests = seen.canary_requests >= settings.min_predictions
    canary, champion = seen.canary_wape, seen.champion_wape
    enough_actuals = seen.rows_with_actuals >= settings.min_actuals
    if not (enough_requests and enough_actuals) or canary is None or champion is None:
        scored = canary is not None and champion is not None
        actuals = (
            f"{seen.rows_with_actuals} of {settings.min_actuals} rows with actuals"
            + ("" if scored or not seen.rows_with_actuals else " (their actual sales sum to 0)")
            if seen.quality_read
            else "rows with actuals not counted yet"
        )
        predictions = f"{seen.canary_requests} of {settings.min_predictions} canary predictions"
        return _no_data(f"{predictions}, {actuals}", settings, intervals_without_data)
    allowed = champion * (1.0 + settings.wape_tolerance)
    quality = (
        f"canary WAPE {canary:.4f} vs champion WAPE {champion:.4f} on "
        f"{seen.rows_with_actuals} rows with actuals (allowed up to {allowed:.4f}, "
        f"+{settings.wape_tolerance:.0%})"
    )
    if canary > allowed:
        return StepVerdict("fail", f"forecast quality: {quality}")
    return StepVerdict(
        "pass",
        f"{quality}; {seen.canary_errors} errors and {seen.canary_nonfinite} non-finite in "
        f"{seen.canary_requests} canary predictions",
    )


def _no_data(shortage: str, settings: RolloutSettings, intervals_without_data: int) -> StepVerdict:
    """Wait for data, or fail once the step has waited its allowed intervals without it."""
    interval = intervals_without_data + 1
    if interval >= settings.max_no_data_intervals:
        return StepVerdict(
            "fail",
            f"no data: {shortage} after {interval} intervals (no data is a failure)",
            "no data",
        )
    return StepVerdict(
        "wait",
        f"waiting for data: {shortage} (interval {interval} of {settings.max_no_data_intervals})",
        "no data",
    )


def _judge_with_evidence(
    seen: StepObservation,
    settings: RolloutSettings,
    intervals_without_data: int,
    weight: float,
    inconclusive: int,
) -> StepVerdict:
    """Judge the step's quality by the paired interval; inconclusive extends, then a final rule."""
    volume = StepVolume(
        seen.rows_per_day, weight, settings.canary_min_rows, settings.canary_min_days
    )
    enough_requests = seen.canary_requests >= settings.min_predictions
    pairs = seen.pairs if seen.quality_read and enough_requests else None
    evidence = judge_canary(pairs, volume, settings.wape_tolerance, settings.canary_confidence)
    if not enough_requests or evidence.outcome == "not enough evidence":
        predictions = f"{seen.canary_requests} of {settings.min_predictions} canary predictions"
        actuals = evidence.reason if pairs is not None else "rows with actuals not counted yet"
        return _no_data(f"{predictions}, {actuals}", settings, intervals_without_data)
    health = (
        f"{seen.canary_errors} errors and {seen.canary_nonfinite} non-finite in "
        f"{seen.canary_requests} canary predictions"
    )
    if evidence.outcome == "pass":
        return StepVerdict("pass", f"interval: {evidence.reason}; {health}", "interval", evidence)
    if evidence.outcome == "fail":
        return StepVerdict("fail", f"interval: {evidence.reason}", "interval", evidence)
    count = inconclusive + 1
    limit = settings.canary_inconclusive_limit
    if count <= limit:
        why = (
            f"inconclusive ({count} of {limit}; the step runs another "
            f"{settings.step_seconds} s): {evidence.reason}"
        )
        return StepVerdict("inconclusive", why, "interval", evidence)
    return _final_rule(evidence, settings, limit, health)


def _final_rule(
    evidence: CanaryEvidence, settings: RolloutSettings, limit: int, health: str
) -> StepVerdict:
    """Decide a step still inconclusive after the limit, by the named final rule."""
    rule = f"final rule: {settings.canary_final_rule}"
    after = f"still inconclusive after {limit} extension(s)"
    change = evidence.change if evidence.change is not None else float("inf")
    if settings.canary_final_rule == "point" and change <= settings.wape_tolerance:
        why = (
            f"{rule}: {after}, the point estimate {change:+.1%} is within "
            f"+{settings.wape_tolerance:.0%}: {evidence.reason}; {health}"
        )
        return StepVerdict("pass", why, rule, evidence)
    if settings.canary_final_rule == "point":
        why = (
            f"{rule}: {after}, the point estimate {change:+.1%} is above "
            f"+{settings.wape_tolerance:.0%}: {evidence.reason}"
        )
    else:
        why = f"{rule}: {after}, the champion stays: {evidence.reason}"
    return StepVerdict("fail", why, rule, evidence)


def _operational_failure(seen: StepObservation, settings: RolloutSettings) -> str | None:
    rate = seen.canary_errors / seen.canary_requests
    if rate > settings.max_error_rate:
        return (
            f"error rate {rate:.1%} ({seen.canary_errors} of {seen.canary_requests} canary "
            f"predictions failed) exceeds {settings.max_error_rate:.1%}"
        )
    if seen.canary_nonfinite > settings.max_nonfinite:
        return (
            f"{seen.canary_nonfinite} non-finite canary predictions of {seen.canary_requests} "
            f"(at most {settings.max_nonfinite} allowed)"
        )
    return None
