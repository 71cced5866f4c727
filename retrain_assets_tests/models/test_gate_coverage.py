"""The gate's coverage of the candidate's prediction intervals on the holdout."""

import numpy as np
import pytest

from retrain_assets.models.gate import GateOutcome
from retrain_assets.models.gate_coverage import judge_coverage, with_coverage
from retrain_assets.models.scoring import Verdict
from retrain_assets.prediction_intervals import IntervalTable

RNG = np.random.default_rng(5)
FORECAST = RNG.uniform(5, 50, 1000)
ACTUAL = FORECAST + RNG.normal(0, 4, 1000)  # errors of sd 4: |e| < 5.13 for 80 %
HONEST = IntervalTable({"80": 5.13, "95": 7.84}, windows=2, scores=500)
NARROW = IntervalTable({"80": 2.7, "95": 7.84}, windows=2, scores=500)  # covers about 50 %


def passed() -> GateOutcome:
    verdict = Verdict(True, 0.20, 0.25, "champion v1", 0.02, "candidate WAPE 0.2000 beats ...")
    return GateOutcome(verdict, {"rule": "margin", "reason": verdict.reason})


def test_honest_widths_cover_about_their_level_and_pass():
    judged = judge_coverage(ACTUAL, FORECAST, HONEST, 0.10)
    assert judged.passed
    assert judged.metadata["coverage_80"] == pytest.approx(0.80, abs=0.04)
    assert judged.metadata["coverage_95"] == pytest.approx(0.95, abs=0.03)
    assert judged.metadata["interval_halfwidth_80"] == 5.13
    assert str(judged.metadata["interval_coverage"]).startswith("ok on 1000 actuals: 80 % covers")
    outcome = with_coverage(passed(), judged)
    assert outcome.verdict.passed and outcome.metadata["rule"] == "margin"


def test_an_80_interval_covering_half_the_actuals_fails_a_winner_and_says_so():
    judged = judge_coverage(ACTUAL, FORECAST, NARROW, 0.10)
    assert not judged.passed
    assert judged.metadata["coverage_80"] == pytest.approx(0.50, abs=0.05)
    assert judged.reason.startswith("coverage: the 80 % interval (half-width 2.7) covers ")
    assert judged.reason.endswith(
        "of the holdout's 1000 actuals, below the 70.0% it needs "
        "(80 % less RETRAIN_INTERVAL_COVERAGE_TOLERANCE's 10 points)"
    )
    assert "95 %" not in judged.reason  # the honest level is not blamed
    outcome = with_coverage(passed(), judged)
    assert not outcome.verdict.passed and outcome.verdict.reason == judged.reason
    assert outcome.metadata["rule"] == "coverage" and outcome.metadata["reason"] == judged.reason
    assert str(outcome.metadata["wape_verdict"]).startswith("pass: candidate WAPE 0.2000")
    # a looser tolerance lets it through
    assert judge_coverage(ACTUAL, FORECAST, NARROW, 0.35).passed


def test_a_loser_keeps_its_reason_and_no_intervals_or_no_rows_are_not_judged():
    failed = GateOutcome(
        Verdict(False, 0.3, 0.25, "champion v1", 0.02, "does not beat"), {"reason": "x"}
    )
    outcome = with_coverage(failed, judge_coverage(ACTUAL, FORECAST, NARROW, 0.10))
    assert outcome.verdict.reason == "does not beat" and "coverage_80" in outcome.metadata
    none = judge_coverage(ACTUAL, FORECAST, None, 0.10)
    assert none.passed
    assert none.metadata == {
        "interval_coverage": "not judged: the candidate carries no prediction intervals"
    }
    empty = judge_coverage(np.array([]), np.array([]), HONEST, 0.10)
    assert empty.passed and empty.reason == "not judged: the holdout has no rows"
