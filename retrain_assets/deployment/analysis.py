"""Judging one canary step: operational health first, then forecast quality against the champion.

Kept apart from the machine and the database so the rule reads (and is tested) on its own.
Operational: the canary's error rate and its non-finite predictions in the step, from the
prediction log. Quality: WAPE of the canary's predictions and of the champion's shadow
predictions on the same canary-routed rows, once those rows' actual sales are materialized.
Too little of either after the step's wait counts as a failure, as in Flagger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    """

    step: str
    canary_requests: int = 0
    canary_errors: int = 0
    canary_nonfinite: int = 0
    rows_with_actuals: int = 0
    canary_wape: float | None = None
    champion_wape: float | None = None
    quality_read: bool = True


@dataclass(frozen=True)
class StepVerdict:
    """`pass` and `fail` are analyses (recorded); `wait` means not enough data yet."""

    kind: Literal["pass", "fail", "wait"]
    reason: str


def judge_step(
    seen: StepObservation, settings: RolloutSettings, intervals_without_data: int
) -> StepVerdict:
    """Decide a step whose minimum time has passed.

    Args:
        seen: the step's observation now.
        settings: the thresholds.
        intervals_without_data: earlier analyses of this step that lacked data.
    """
    if seen.canary_requests >= settings.min_predictions:
        failure = _operational_failure(seen, settings)
        if failure:
            return StepVerdict("fail", failure)
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
        shortage = f"{predictions}, {actuals}"
        interval = intervals_without_data + 1
        if interval >= settings.max_no_data_intervals:
            return StepVerdict(
                "fail", f"no data: {shortage} after {interval} intervals (no data is a failure)"
            )
        return StepVerdict(
            "wait",
            f"waiting for data: {shortage} (interval {interval} of "
            f"{settings.max_no_data_intervals})",
        )
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
