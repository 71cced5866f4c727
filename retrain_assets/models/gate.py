"""The evaluation gate's computation: candidate and reference scored now, on the same holdout.

Kept apart from Dagster so the rule is testable on its own; `beats_champion` (the blocking
asset check) and `registered_model` (which refuses without a recorded pass) both use it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from retrain_assets.features.evidence import Evidence, EvidenceRules
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.models.gate_evidence import GateRules, judge_with_evidence
from retrain_assets.models.scoring import InvalidForecast, Verdict, judge, seasonal_naive, wape
from retrain_assets.settings_model import current_settings, env_name

if TYPE_CHECKING:  # imported where used: loading the code location skips LightGBM
    import lightgbm

Predict = Callable[[pd.DataFrame], np.ndarray]


@dataclass(frozen=True)
class ReferenceModel:
    """The registered model a candidate must beat (see `reference.py`), forecasting now."""

    label: str  # e.g. "champion demand_forecast.acme v3"
    predict: Predict
    alias: str = "champion"  # which alias it holds: champion, else challenger
    version: str | None = None


GateMetadata = dict[str, float | int | str]  # what a gate shows next to its verdict


@dataclass(frozen=True)
class GateOutcome:
    """The verdict and what the UI shows next to it."""

    verdict: Verdict
    metadata: GateMetadata


def lightgbm_predictor(model_file: str) -> Predict:
    """Return a forecaster from a LightGBM text model file."""
    import lightgbm  # here, not at import: loading the code location skips LightGBM

    return booster_predictor(lightgbm.Booster(model_file=model_file))


def booster_predictor(booster: lightgbm.Booster) -> Predict:
    """Return a forecaster from a loaded LightGBM model (one forecast a row, as an array)."""
    return lambda frame: np.asarray(booster.predict(frame[MODEL_FEATURES]), dtype=float)


SEASONAL_NAIVE = "seasonal naive (same weekday last week)"


def judge_candidate(
    holdout: pd.DataFrame,
    candidate: Predict,
    model: ReferenceModel | None,
    margin: float,
    evidence: Evidence | None = None,
) -> GateOutcome:
    """Score both sides on `holdout` and judge; an unscorable candidate fails the gate.

    `model` is the registered reference (None: seasonal naive, the last resort). `evidence`:
    the holdout judged by the one evidence rule (`features/evidence.py`); a holdout without
    enough rows is answered "not enough evidence" with the numbers, never scored or passed.
    """
    if evidence is not None and not evidence.enough:
        return _not_enough(holdout, model, margin, evidence)
    actual = holdout[LABEL].to_numpy(dtype=float)
    if model is None:
        reference, reference_forecast = SEASONAL_NAIVE, seasonal_naive(holdout)
    else:
        reference, reference_forecast = model.label, model.predict(holdout)
    reference_wape = wape(actual, reference_forecast)
    try:
        candidate_wape = wape(actual, candidate(holdout))
    except InvalidForecast as err:
        verdict = Verdict(
            False,
            float("nan"),
            reference_wape,
            reference,
            margin,
            f"candidate forecasts cannot be scored: {err}",
        )
    else:
        verdict = judge(candidate_wape, reference_wape, reference, margin)
    days = holdout["date"]
    metadata: GateMetadata = {
        "candidate_wape": verdict.candidate_wape,
        "reference_wape": verdict.reference_wape,
        "reference": reference,
        "reference_version": model.version if model and model.version else "none",
        "margin": margin,
        "holdout_window": f"{days.min().date()} .. {days.max().date()}",
        "rows_scored": len(holdout),
        "reason": verdict.reason,
    }
    return GateOutcome(verdict, metadata)


def _not_enough(
    holdout: pd.DataFrame, model: ReferenceModel | None, margin: float, evidence: Evidence
) -> GateOutcome:
    """Return the verdict on a holdout that cannot be judged: failed, nothing scored."""
    reference = model.label if model is not None else SEASONAL_NAIVE
    verdict = Verdict(False, float("nan"), float("nan"), reference, margin, evidence.reason)
    rows = evidence.rows
    metadata: GateMetadata = {
        "candidate_wape": verdict.candidate_wape,
        "reference_wape": verdict.reference_wape,
        "reference": reference,
        "reference_version": model.version if model and model.version else "none",
        "margin": margin,
        "holdout_window": f"{rows.holdout_start} .. {rows.last_day}",
        "rows_scored": 0,
        "holdout_rows": len(holdout),
        "train_rows": rows.train_rows,
        "stores_in_holdout": f"{len(rows.holdout_by_store)} of {len(rows.train_by_store)}",
        "reason": evidence.reason,
    }
    return GateOutcome(verdict, metadata)


GATE_RULE = env_name("gate_rule")


def gate_rule() -> str:
    """Return which rule decides `beats_champion`: `margin` (default) or `evidence`.

    Raises:
        SettingsError: RETRAIN_GATE_RULE names neither (or another setting is bad).
    """
    return current_settings().gate_rule


def judge_gate(
    holdout: pd.DataFrame,
    candidate: Predict,
    model: ReferenceModel | None,
    margin: float,
    evidence: Evidence,
    rules: GateRules,
    evidence_rules: EvidenceRules,
    rule: str = "margin",
) -> GateOutcome:
    """Judge by `rule`, showing both: the margin's verdict and the evidence's interval.

    `margin` decides as `judge_candidate` always did; `evidence` decides by
    `gate_evidence.judge_with_evidence` (windows, paired bootstrap interval, store guard). The
    metadata names the rule that decided (`rule`: margin, evidence, forecasts, store guard or
    interval) and carries the other's verdict, so the Checks tab shows how sure either is.
    """
    by_margin = judge_candidate(holdout, candidate, model, margin, evidence=evidence)
    if not evidence.enough:
        return GateOutcome(by_margin.verdict, {**by_margin.metadata, "rule": "evidence"})
    reference = model.label if model is not None else SEASONAL_NAIVE
    judged = judge_with_evidence(
        holdout,
        np.asarray(candidate(holdout), dtype=float),
        model.predict(holdout) if model is not None else seasonal_naive(holdout),
        reference,
        rules,
        evidence_rules,
        dict(evidence.rows.train_by_store),
        evidence.rows.customer,
        evidence.rows.newest_day_by_store,
    )
    shown: GateMetadata = {**by_margin.metadata}
    shown |= {k: v for k, v in judged.metadata.items() if k not in shown and k != "rule"}
    said = f"{'pass' if judged.passed else 'fail'} ({judged.rule}): {judged.reason}"
    if rule == "margin":
        shown |= {"rule": "margin", "evidence_verdict": said}
        return GateOutcome(by_margin.verdict, shown)
    margin_said = f"{'pass' if by_margin.verdict.passed else 'fail'}: {by_margin.verdict.reason}"
    shown |= {"rule": judged.rule, "reason": judged.reason, "margin_verdict": margin_said}
    verdict = Verdict(
        judged.passed,
        judged.candidate_wape,
        judged.reference_wape,
        reference,
        rules.tolerance,
        judged.reason,
    )
    return GateOutcome(verdict, shown)
