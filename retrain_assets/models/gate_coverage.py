"""The gate's look at the candidate's prediction intervals: do they cover the holdout?

The trainer's widths promise that about 80 % of actuals fall within the 80 % interval. The
holdout is rows the candidate never saw, so the gate counts how many do: an interval that
covers far less than its level (more than RETRAIN_INTERVAL_COVERAGE_TOLERANCE below it; 0.15
by default, so an 80 % interval covering 50 % fails) would make every served bound a
confident lie. A challenger (the registry has a model to compare it with, which keeps serving)
fails with that reason even if its WAPE wins. A first model (its reference is the seasonal
naive forecast: nothing would be served without it) that beats the naive is not refused for
its widths: they are widened on the holdout (`interval_widening.py`) and it is served with
those, labelled. A candidate without intervals (RETRAIN_INTERVAL_LEVELS=none, or a training
window too short for two rolling origins) is not judged on them, and the metadata says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from retrain_assets.models.gate import SEASONAL_NAIVE, GateMetadata, GateOutcome
from retrain_assets.models.interval_widening import widen_on_holdout
from retrain_assets.prediction_intervals import (
    ABSOLUTE,
    SCALE_WORDS,
    IntervalTable,
    bounds,
    coverage,
)


@dataclass(frozen=True)
class CoverageVerdict:
    """Whether every level covered enough of the holdout, why, and the numbers."""

    passed: bool
    reason: str
    metadata: GateMetadata


def judge_coverage(
    actual: np.ndarray,
    forecast: np.ndarray,
    intervals: IntervalTable | None,
    tolerance: float,
) -> CoverageVerdict:
    """Return the coverage of each of the candidate's levels on the holdout and the verdict."""
    if intervals is None:
        said = "not judged: the candidate carries no prediction intervals"
        return CoverageVerdict(True, said, {"interval_coverage": said})
    if len(actual) == 0:
        said = "not judged: the holdout has no rows"
        return CoverageVerdict(True, said, {"interval_coverage": said})
    shown: GateMetadata = {"interval_scores": intervals.scores, "interval_scale": intervals.scale}
    short = []
    scaled = f" {SCALE_WORDS[intervals.scale]}" if intervals.scale != ABSOLUTE else ""
    for name, width in intervals.halfwidths.items():
        lower, upper = bounds(forecast, intervals.row_halfwidths(width, forecast))
        covered = coverage(actual, lower, upper)
        needed = float(name) / 100.0 - tolerance
        shown[f"coverage_{name}"] = round(covered, 4)
        shown[f"interval_halfwidth_{name}"] = round(width, 4)
        if covered < needed:
            short.append(
                f"the {name} % interval (half-width {width:.3g}{scaled}) covers {covered:.1%} "
                f"of the holdout's {len(actual)} actuals, below the {needed:.1%} it needs "
                f"({name} % less RETRAIN_INTERVAL_COVERAGE_TOLERANCE's {tolerance * 100:g} points)"
            )
    if short:
        reason = "coverage: " + "; ".join(short)
        shown["interval_coverage"] = reason
        return CoverageVerdict(False, reason, shown)
    levels = ", ".join(
        f"{name} % covers {shown[f'coverage_{name}']:.1%}" for name in intervals.halfwidths
    )
    said = f"ok on {len(actual)} actuals: {levels}"
    shown["interval_coverage"] = said
    return CoverageVerdict(True, said, shown)


def with_coverage(outcome: GateOutcome, judged: CoverageVerdict) -> GateOutcome:
    """Return the gate's outcome with the coverage shown; a passing candidate may now fail.

    A failed coverage turns a pass into a fail decided by rule `coverage` (the WAPE verdict
    stays in the metadata as `wape_verdict`); a candidate that already failed keeps its reason.
    """
    shown: GateMetadata = {**outcome.metadata, **judged.metadata}
    if judged.passed or not outcome.verdict.passed:
        return GateOutcome(outcome.verdict, shown)
    shown |= {
        "rule": "coverage",
        "reason": judged.reason,
        "wape_verdict": f"pass: {outcome.verdict.reason}",
    }
    verdict = dataclasses.replace(outcome.verdict, passed=False, reason=judged.reason)
    return GateOutcome(verdict, shown)


@dataclass(frozen=True)
class GatedIntervals:
    """The gate's outcome with its coverage, and the intervals the model is served with."""

    outcome: GateOutcome
    served: IntervalTable | None  # the trainer's, or widened on the holdout (None: none)


def judge_intervals(
    outcome: GateOutcome,
    actual: np.ndarray,
    forecast: np.ndarray,
    intervals: IntervalTable | None,
    tolerance: float,
    first_model: bool,
) -> GatedIntervals:
    """Judge the intervals' coverage; a first model that passed keeps its pass, widened.

    `first_model`: the candidate's reference is the seasonal naive forecast (no registered
    model stands behind the customer). Any other candidate is judged by `with_coverage`.
    """
    judged = judge_coverage(actual, forecast, intervals, tolerance)
    if intervals is None or judged.passed or not first_model or not outcome.verdict.passed:
        shown = with_coverage(outcome, judged)
        if intervals is None:
            return GatedIntervals(shown, None)
        labelled = {**shown.metadata, "interval_calibration": intervals.calibration}
        return GatedIntervals(GateOutcome(shown.verdict, labelled), intervals)
    widened = widen_on_holdout(actual, forecast, intervals)
    return GatedIntervals(served_widened(outcome, judged, widened), widened)


def served_widened(
    outcome: GateOutcome, judged: CoverageVerdict, widened: IntervalTable
) -> GateOutcome:
    """Return a first model's pass with its short coverage shown and the widened widths said."""
    said = (
        f"{judged.reason}; not a reason to serve nothing: a first model that beats the "
        f"{SEASONAL_NAIVE} is served with intervals {widened.calibration}"
    )
    reason = (
        f"{outcome.verdict.reason}; its prediction intervals fell short of their level on the "
        f"holdout and are served {widened.calibration}"
    )
    shown: GateMetadata = {
        **outcome.metadata,
        **judged.metadata,
        "interval_coverage": said,
        "interval_calibration": widened.calibration,
        **{f"served_halfwidth_{name}": round(w, 4) for name, w in widened.halfwidths.items()},
        "reason": reason,
    }
    return GateOutcome(dataclasses.replace(outcome.verdict, reason=reason), shown)
