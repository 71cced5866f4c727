"""The gate says "not enough evidence" with the numbers (issue 31); errors say what failed."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.evidence import EvidenceRules, judge_parts
from retrain_assets.models.gate import judge_candidate
from retrain_assets.models.handoff_errors import HandoffStepError, doing

D = dt.date(2026, 5, 1)
RULES = EvidenceRules(min_train_rows=28, min_holdout_rows=7, min_holdout_rows_per_store=1)


def part(days, stores, start):
    return pd.DataFrame(
        [
            {"customer": "acme", "store_id": s, "date": pd.Timestamp(start + dt.timedelta(days=i))}
            for i in range(days)
            for s in stores
            for _ in range(3)
        ]
    )


def never_called(frame: pd.DataFrame) -> np.ndarray:
    raise AssertionError("a window without evidence must not be scored")


def test_a_holdout_of_one_store_is_not_enough_evidence_never_a_pass():
    train = part(20, ["s1", "s2"], D)
    holdout = part(7, ["s1"], D + dt.timedelta(days=20))
    evidence = judge_parts("acme", train, holdout, RULES)
    outcome = judge_candidate(holdout, never_called, None, 0.02, evidence=evidence)
    assert not outcome.verdict.passed
    assert outcome.verdict.reason == (
        "not enough evidence: holdout 2026-05-21 .. 2026-05-27 has too few rows for 1 of 2 "
        "store(s) (s2: 0; needs >= 1 each)"
    )
    assert outcome.metadata["rows_scored"] == 0
    assert outcome.metadata["stores_in_holdout"] == "1 of 2"


def test_an_empty_holdout_is_not_enough_evidence_with_its_numbers():
    train = part(20, ["s1"], D)
    empty = train.iloc[0:0]
    evidence = judge_parts("acme", train, empty, RULES)
    outcome = judge_candidate(empty, never_called, None, 0.02, evidence=evidence)
    assert not outcome.verdict.passed
    assert outcome.verdict.reason.startswith(
        "not enough evidence: holdout 2026-05-21 .. 2026-05-21 has 0 rows of acme (needs >= 7)"
    )


def test_a_failing_step_says_what_for_whom_and_on_what_window():
    window = "2026-02-20 .. 2026-05-20"
    with (
        pytest.raises(HandoffStepError) as raised,
        doing("scoring the candidate", "acme", "k1", window),
    ):
        raise ValueError("Input data must be 2 dimensional and non empty.")
    assert str(raised.value) == (
        "scoring the candidate for acme, run key k1, snapshot 2026-02-20 .. 2026-05-20: "
        "ValueError: Input data must be 2 dimensional and non empty."
    )
    assert isinstance(raised.value.__cause__, ValueError)
