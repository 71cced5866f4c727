"""The gate's coverage of the candidate's prediction intervals on the holdout, and widening."""

import dataclasses
import math

import numpy as np
import pytest

from retrain_assets.models.gate import SEASONAL_NAIVE, GateOutcome
from retrain_assets.models.gate_coverage import judge_coverage, judge_intervals, with_coverage
from retrain_assets.models.interval_widening import widen_on_holdout
from retrain_assets.models.scoring import Verdict
from retrain_assets.prediction_intervals import IntervalTable, bounds, coverage

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


def naive_pass() -> GateOutcome:
    verdict = Verdict(True, 0.20, 0.32, SEASONAL_NAIVE, 0.02, "candidate WAPE 0.2000 beats ...")
    return GateOutcome(verdict, {"rule": "margin", "reason": verdict.reason})


def test_widening_takes_each_level_to_the_holdouts_conformal_quantile_and_says_so():
    widened = widen_on_holdout(ACTUAL, FORECAST, NARROW)
    errors = np.abs(ACTUAL - FORECAST)
    assert widened.halfwidths["80"] == np.sort(errors)[math.ceil(1001 * 0.80) - 1]
    assert widened.halfwidths["80"] > 4.5  # from 2.7: sd-4 errors need about 5.13
    assert widened.halfwidths["95"] == 7.84  # it covered: kept, never narrowed
    for name, level in (("80", 0.80), ("95", 0.95)):
        covered = coverage(ACTUAL, *bounds(FORECAST, widened.halfwidths[name]))
        assert covered >= level
    assert widened.calibration.startswith("widened on the gate's holdout: covered ")
    assert " % at 80 %, " in widened.calibration
    assert "of 1000 holdout actuals" in widened.calibration
    assert "(was 2.7)" in widened.calibration and "7.84 at 95 % (kept)" in widened.calibration
    assert (widened.windows, widened.scores) == (NARROW.windows, NARROW.scores)


def test_widened_widths_serve_every_day_ahead_not_the_trainers_day_ahead_ones():
    by_day = dataclasses.replace(NARROW, by_horizon={3: {"80": 2.0, "95": 6.0}})
    widened = widen_on_holdout(ACTUAL, FORECAST, by_day)
    assert widened.by_horizon == {}  # the holdout pools every day ahead
    width, named = widened.width("80", 3)
    assert width == widened.halfwidths["80"] > 4.5
    assert named is not None and named.startswith("widened on the gate's holdout: ")
    assert named.endswith("(conformal, all days ahead pooled)")


def test_too_few_holdout_errors_leave_the_trainers_widths_labelled_uncalibrated():
    few = widen_on_holdout(ACTUAL[:10], FORECAST[:10], NARROW)  # 95 % needs 19 errors
    assert few.halfwidths == NARROW.halfwidths
    assert few.calibration.startswith("uncalibrated: the trainer's widths covered ")
    assert "too few to widen the 95 % interval" in few.calibration
    empty = widen_on_holdout(np.array([]), np.array([]), NARROW)
    assert empty.halfwidths == NARROW.halfwidths
    assert empty.calibration.startswith("uncalibrated: the trainer's widths were never checked")


def test_a_first_model_that_beats_the_naive_passes_with_widened_intervals_and_says_so():
    gated = judge_intervals(naive_pass(), ACTUAL, FORECAST, NARROW, 0.10, first_model=True)
    assert gated.outcome.verdict.passed
    assert gated.served is not None and gated.served.halfwidths["80"] > 4.5
    shown = gated.outcome.metadata
    assert shown["rule"] == "margin"  # the WAPE decided; coverage did not
    assert shown["coverage_80"] == pytest.approx(0.50, abs=0.05)  # the trainer's, as measured
    assert shown["interval_halfwidth_80"] == 2.7
    assert shown["served_halfwidth_80"] == round(gated.served.halfwidths["80"], 4)
    assert shown["interval_calibration"] == gated.served.calibration
    assert str(shown["interval_coverage"]).startswith("coverage: the 80 % interval")
    assert "not a reason to serve nothing" in str(shown["interval_coverage"])
    reason = gated.outcome.verdict.reason
    assert reason.startswith("candidate WAPE 0.2000 beats ...; its prediction intervals fell")
    assert reason.endswith(f"are served {gated.served.calibration}")
    assert shown["reason"] == reason


def test_a_challenger_short_of_coverage_still_fails_and_a_losing_first_model_keeps_its_reason():
    challenger = judge_intervals(passed(), ACTUAL, FORECAST, NARROW, 0.10, first_model=False)
    assert not challenger.outcome.verdict.passed
    assert challenger.outcome.metadata["rule"] == "coverage"
    assert challenger.served == NARROW  # not widened: it is not registered
    lost = GateOutcome(
        Verdict(False, 0.35, 0.32, SEASONAL_NAIVE, 0.02, "does not beat the naive"), {}
    )
    loser = judge_intervals(lost, ACTUAL, FORECAST, NARROW, 0.10, first_model=True)
    assert not loser.outcome.verdict.passed
    assert loser.outcome.verdict.reason == "does not beat the naive"
    assert loser.served == NARROW


def test_a_first_model_whose_intervals_cover_is_served_with_the_trainers_widths():
    gated = judge_intervals(naive_pass(), ACTUAL, FORECAST, HONEST, 0.10, first_model=True)
    assert gated.outcome.verdict.passed and gated.served == HONEST
    assert gated.outcome.metadata["interval_calibration"] == "trainer backtests"
    assert "served_halfwidth_80" not in gated.outcome.metadata
    none = judge_intervals(naive_pass(), ACTUAL, FORECAST, None, 0.10, first_model=True)
    assert none.outcome.verdict.passed and none.served is None
    assert "interval_calibration" not in none.outcome.metadata


def test_scaled_widths_are_judged_row_by_row_and_widened_on_scaled_errors():
    # errors grow with the forecast (sd a tenth of forecast + 1): one width fits no row
    rng = np.random.default_rng(8)
    forecast = rng.uniform(1, 100, 2000)
    actual = forecast + rng.normal(0, 0.1, 2000) * (forecast + 1.0)
    scaled = IntervalTable({"80": 0.128}, windows=3, scores=600, scale="linear")
    judged = judge_coverage(actual, forecast, scaled, 0.05)
    assert judged.passed and judged.metadata["coverage_80"] == pytest.approx(0.80, abs=0.03)
    assert judged.metadata["interval_scale"] == "linear"
    small = forecast < 20  # the small series are covered as well as the large ones
    lower, upper = bounds(forecast, scaled.row_halfwidths(0.128, forecast))
    assert coverage(actual[small], lower[small], upper[small]) == pytest.approx(0.80, abs=0.05)

    short = dataclasses.replace(scaled, halfwidths={"80": 0.05})
    failed = judge_coverage(actual, forecast, short, 0.05)
    assert "(half-width 0.05 x (forecast + 1)) covers" in failed.reason
    widened = widen_on_holdout(actual, forecast, short)
    assert widened.scale == "linear"
    assert widened.halfwidths["80"] == pytest.approx(0.128, abs=0.01)  # the scaled quantile
    lower, upper = bounds(forecast, widened.row_halfwidths(widened.halfwidths["80"], forecast))
    assert coverage(actual, lower, upper) >= 0.80
