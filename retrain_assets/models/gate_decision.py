"""The gate's whole decision on a candidate, without Dagster: its WAPE, then its intervals.

`beats_champion` (the blocking check) and the decision benchmark (`bench_hindsight.py`) both
call `decide_gate`, so what the benchmark judges in hindsight is the verdict the check gives:
the rule of RETRAIN_GATE_RULE (`gate.judge_gate`), then the coverage step
(`gate_coverage.judge_intervals`, which widens a first model's short intervals).
"""

from __future__ import annotations

import pandas as pd

from retrain_assets.features.evidence import Evidence, EvidenceRules
from retrain_assets.features.training_export import LABEL
from retrain_assets.models.gate import Predict, ReferenceModel, judge_gate
from retrain_assets.models.gate_coverage import GatedIntervals, judge_intervals
from retrain_assets.models.gate_evidence import GateRules
from retrain_assets.prediction_intervals import IntervalTable


def decide_gate(
    holdout: pd.DataFrame,
    candidate: Predict,
    model: ReferenceModel | None,
    margin: float,
    evidence: Evidence,
    rules: GateRules,
    evidence_rules: EvidenceRules,
    rule: str,
    intervals: IntervalTable | None,
    tolerance: float,
) -> GatedIntervals:
    """Judge the candidate against `model` (None: seasonal naive) on `holdout`, then its intervals.

    `intervals`: the trainer's widths the candidate carries (None: none); `tolerance`: how far
    below its level a level's coverage may fall. A first model is one whose reference is the
    seasonal naive forecast.
    """
    outcome = judge_gate(holdout, candidate, model, margin, evidence, rules, evidence_rules, rule)
    return judge_intervals(
        outcome,
        holdout[LABEL].to_numpy(dtype=float),
        candidate(holdout),
        intervals,
        tolerance,
        first_model=model is None,
    )
