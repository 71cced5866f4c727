"""The deploy-time check's decision, without Dagster: the challenger against the champion now.

`challenger_beats_champion_now` and the decision benchmark (`bench_hindsight.py`) both call
`judge_deploy`, so the benchmark judges in hindsight the verdict the check gives.
"""

from __future__ import annotations

import math

import pandas as pd

from retrain_assets.models.gate import GateOutcome, Predict, ReferenceModel, judge_candidate
from retrain_assets.models.scoring import Verdict


def judge_deploy(
    rows: pd.DataFrame,
    challenger: Predict,
    champion: ReferenceModel | None,
    margin: float,
    label: str,
    already_champion: bool = False,
) -> GateOutcome:
    """Score the challenger (`label`) and the champion (None: seasonal naive) on `rows`.

    `rows`: the newest days with actuals (`recent_window.choose_days`). A challenger that is
    already the champion fails: there is nothing to deploy.
    """
    if already_champion:
        reason = f"{label} is already the champion: nothing to deploy"
        verdict = Verdict(False, math.nan, math.nan, label, margin, reason)
        return GateOutcome(verdict, {"reason": reason})
    return judge_candidate(rows, challenger, champion, margin)
