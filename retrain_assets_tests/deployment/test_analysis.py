"""The step verdict on its own: operational failures first, then data, then quality."""

from retrain_assets.deployment.analysis import StepObservation, judge_step
from retrain_assets.deployment.rollout_settings import RolloutSettings

SETTINGS = RolloutSettings(
    min_predictions=100,
    min_actuals=50,
    max_no_data_intervals=3,
    max_error_rate=0.01,
    max_nonfinite=0,
    wape_tolerance=0.05,
)
HEALTHY = StepObservation("CANARY_10", 200, 1, 0, 80, 0.30, 0.30)


def verdict(**changes):
    return judge_step(StepObservation(**{**HEALTHY.__dict__, **changes}), SETTINGS, 0)


def test_a_healthy_step_within_the_tolerance_passes():
    assert verdict(canary_wape=0.315).kind == "pass"  # 5 % worse is still within
    assert verdict(canary_wape=0.3151).kind == "fail"


def test_non_finite_forecasts_fail_even_without_actuals():
    found = judge_step(StepObservation("CANARY_10", 150, 0, 2, 0, None, None, False), SETTINGS, 0)
    assert (found.kind, found.reason) == (
        "fail",
        "2 non-finite canary predictions of 150 (at most 0 allowed)",
    )


def test_errors_are_judged_once_the_step_has_its_predictions():
    assert verdict(canary_requests=99, canary_errors=50).kind == "wait"
    failed = verdict(canary_requests=100, canary_errors=2)
    assert failed.kind == "fail" and failed.reason.startswith("error rate 2.0% (2 of 100")


def test_no_data_waits_then_fails_and_zero_sales_are_not_scored():
    waiting = judge_step(StepObservation("CANARY_50", 120, 0, 0, 60, None, None), SETTINGS, 0)
    assert waiting.kind == "wait" and "(their actual sales sum to 0)" in waiting.reason
    ended = judge_step(StepObservation("CANARY_50", 120, 0, 0, 10, 0.2, 0.3), SETTINGS, 2)
    assert ended.kind == "fail"
    assert ended.reason == (
        "no data: 120 of 100 canary predictions, 10 of 50 rows with actuals "
        "after 3 intervals (no data is a failure)"
    )
