"""The rollout's thresholds, step weights and timers: defaults in code, overridable by variables.

Read when a tick, a run or a command starts (never at import time), so tests and the demo
shorten the timers through the environment. A value out of range is refused naming the variable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_T = TypeVar("_T")


@dataclass(frozen=True)
class RolloutSettings:
    """How a rollout advances and when a canary step passes.

    Attributes:
        interval_seconds: the `rollout_controller` tick interval (one "interval").
        step_weights: canary traffic share of each step, increasing, each in (0, 1).
        step_seconds: minimum time a step runs before it is analysed.
        min_predictions: canary predictions a step needs before it is analysed.
        min_actuals: canary-routed rows with materialized actual sales (and a champion
            shadow prediction) a step needs before it is analysed.
        max_error_rate: largest share of failed canary predictions in a step.
        max_nonfinite: most NaN/inf canary predictions in a step.
        wape_tolerance: how much (relative) the canary's WAPE may exceed the champion's on the
            same rows: 0.05 allows 5 % worse.
        max_no_data_intervals: analyses in a row without enough data before the step fails
            ("no data counts as a failure", as in Flagger).
        check_days: days with actuals the deploy-time check re-scores on.
        deploy_margin: how much lower (relative) the challenger's WAPE must be than the
            champion's at the deploy-time check (0: lower at all).
        pass_max_age_hours: how old a deploy-time pass may be for a later run of
            `deployment_decision` alone to rely on it.
        canary_rule: which rule judges a step's forecast quality: `wape` (the canary's WAPE
            within `wape_tolerance` of the champion's on `min_actuals` rows) or `evidence`
            (`canary_evidence.py`: a paired interval, inconclusive extends the step).
        canary_confidence: confidence of the evidence rule's paired bootstrap interval.
        canary_min_rows: rows with actuals the evidence rule needs at least (Spinnaker's
            canary guidance: 50 data points); a bootstrap over a handful of store-days is noise.
        canary_min_days: days of the customer's canary traffic a step's rows must cover at
            least (with `canary_min_rows` as the floor): the sample size from the volume.
        canary_inconclusive_limit: inconclusive analyses of a step (each extends it by
            `step_seconds`) before `canary_final_rule` decides.
        canary_final_rule: what decides a step still inconclusive after the limit: `point`
            (the point estimate within `wape_tolerance` passes) or `rollback`.
    """

    interval_seconds: int = 60
    step_weights: tuple[float, ...] = (0.10, 0.50)
    step_seconds: int = 1800
    min_predictions: int = 100
    min_actuals: int = 50
    max_error_rate: float = 0.01
    max_nonfinite: int = 0
    wape_tolerance: float = 0.05
    max_no_data_intervals: int = 2880
    check_days: int = 7
    deploy_margin: float = 0.0
    pass_max_age_hours: float = 24.0
    canary_rule: str = "wape"
    canary_confidence: float = 0.90
    canary_min_rows: int = 50
    canary_min_days: float = 1.0
    canary_inconclusive_limit: int = 3
    canary_final_rule: str = "point"

    @property
    def canary_visit_budget(self) -> int:
        """Return the visits a canary step may take: entering, analyses, a few retries."""
        return self.max_no_data_intervals + self.canary_inconclusive_limit + 20


DEFAULTS = RolloutSettings()
VARIABLES = {  # environment variable -> field
    "RETRAIN_ROLLOUT_INTERVAL_SECONDS": "interval_seconds",
    "RETRAIN_ROLLOUT_STEPS": "step_weights",
    "RETRAIN_ROLLOUT_STEP_SECONDS": "step_seconds",
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "min_predictions",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "min_actuals",
    "RETRAIN_ROLLOUT_MAX_ERROR_RATE": "max_error_rate",
    "RETRAIN_ROLLOUT_MAX_NONFINITE": "max_nonfinite",
    "RETRAIN_ROLLOUT_WAPE_TOLERANCE": "wape_tolerance",
    "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS": "max_no_data_intervals",
    "RETRAIN_DEPLOY_CHECK_DAYS": "check_days",
    "RETRAIN_DEPLOY_GATE_MARGIN": "deploy_margin",
    "RETRAIN_DEPLOY_PASS_MAX_AGE_HOURS": "pass_max_age_hours",
    "RETRAIN_CANARY_RULE": "canary_rule",
    "RETRAIN_CANARY_CONFIDENCE": "canary_confidence",
    "RETRAIN_CANARY_MIN_ROWS": "canary_min_rows",
    "RETRAIN_CANARY_MIN_DAYS": "canary_min_days",
    "RETRAIN_CANARY_INCONCLUSIVE_LIMIT": "canary_inconclusive_limit",
    "RETRAIN_CANARY_FINAL_RULE": "canary_final_rule",
}
CANARY_RULES = ("wape", "evidence")
FINAL_RULES = ("point", "rollback")


class InvalidRolloutSetting(ValueError):
    """A rollout variable that is not a number in its range (the message names it)."""


def rollout_settings() -> RolloutSettings:
    """Return the settings from the environment, defaults for unset variables.

    Raises:
        InvalidRolloutSetting: a variable is malformed or out of range.
    """
    return RolloutSettings(
        interval_seconds=_number("RETRAIN_ROLLOUT_INTERVAL_SECONDS", int, 1, 86_400),
        step_weights=_weights(),
        step_seconds=_number("RETRAIN_ROLLOUT_STEP_SECONDS", int, 0, 30 * 86_400),
        min_predictions=_number("RETRAIN_ROLLOUT_MIN_PREDICTIONS", int, 1, 10_000_000),
        min_actuals=_number("RETRAIN_ROLLOUT_MIN_ACTUALS", int, 1, 10_000_000),
        max_error_rate=_number("RETRAIN_ROLLOUT_MAX_ERROR_RATE", float, 0.0, 1.0),
        max_nonfinite=_number("RETRAIN_ROLLOUT_MAX_NONFINITE", int, 0, 10_000_000),
        wape_tolerance=_number("RETRAIN_ROLLOUT_WAPE_TOLERANCE", float, 0.0, 10.0),
        max_no_data_intervals=_number("RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS", int, 1, 1_000_000),
        check_days=_number("RETRAIN_DEPLOY_CHECK_DAYS", int, 1, 365),
        deploy_margin=_number("RETRAIN_DEPLOY_GATE_MARGIN", float, 0.0, 0.99),
        pass_max_age_hours=_number("RETRAIN_DEPLOY_PASS_MAX_AGE_HOURS", float, 0.0, 8760.0),
        canary_rule=_choice("RETRAIN_CANARY_RULE", CANARY_RULES),
        canary_confidence=_number("RETRAIN_CANARY_CONFIDENCE", float, 0.5, 0.999),
        canary_min_rows=_number("RETRAIN_CANARY_MIN_ROWS", int, 1, 10_000_000),
        canary_min_days=_number("RETRAIN_CANARY_MIN_DAYS", float, 0.0, 365.0),
        canary_inconclusive_limit=_number("RETRAIN_CANARY_INCONCLUSIVE_LIMIT", int, 0, 1000),
        canary_final_rule=_choice("RETRAIN_CANARY_FINAL_RULE", FINAL_RULES),
    )


def _choice(variable: str, choices: tuple[str, ...]) -> str:
    default = str(getattr(DEFAULTS, VARIABLES[variable]))
    text = (os.environ.get(variable) or "").strip().lower() or default
    if text not in choices:
        raise InvalidRolloutSetting(f"{variable} must be one of {', '.join(choices)}, not {text!r}")
    return text


def _number(variable: str, kind: Callable[[str], _T], low: float, high: float) -> _T:
    default = getattr(DEFAULTS, VARIABLES[variable])
    text = os.environ.get(variable)
    if text is None or not text.strip():
        return default
    try:
        value = kind(text.strip())
    except ValueError:
        raise InvalidRolloutSetting(
            f"{variable} must be a {kind.__name__} like {default}, not {text!r}"
        ) from None
    if not (math.isfinite(float(value)) and low <= float(value) <= high):  # type: ignore[arg-type]
        raise InvalidRolloutSetting(f"{variable} = {value} is outside [{low:g}, {high:g}]")
    return value


def _weights() -> tuple[float, ...]:
    text = os.environ.get("RETRAIN_ROLLOUT_STEPS")
    if text is None or not text.strip():
        return DEFAULTS.step_weights
    try:
        weights = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise InvalidRolloutSetting(
            f"RETRAIN_ROLLOUT_STEPS must be comma-separated fractions like 0.10,0.50, not {text!r}"
        ) from None
    if not all(0.01 <= w <= 0.99 for w in weights) or list(weights) != sorted(set(weights)):
        raise InvalidRolloutSetting(
            f"RETRAIN_ROLLOUT_STEPS = {text!r}: each weight must be in [0.01, 0.99], increasing"
        )
    names = {step_name(w) for w in weights}
    if len(names) != len(weights):
        raise InvalidRolloutSetting(
            f"RETRAIN_ROLLOUT_STEPS = {text!r}: two weights round to the same percent"
        )
    return weights


def step_name(weight: float) -> str:
    """Return the state name of a canary step: CANARY_10 for 0.10."""
    return f"CANARY_{round(weight * 100)}"
