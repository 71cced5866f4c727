"""The gate with evidence: which rule decides, the interval it shows, and "not enough evidence"."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.evidence import EvidenceRules
from retrain_assets.models.gate_evidence import GateRules, judge_with_evidence

LAST = dt.date(2026, 5, 20)


def holdout(stores: int = 3, items: int = 5, days: int = 7, seed: int = 1) -> pd.DataFrame:
    """Rows of `days` days up to LAST for `stores` x `items` series, with Poisson sales."""
    rng = np.random.default_rng(seed)
    rows = [
        (LAST - dt.timedelta(days=d), f"S{s:03d}", f"I{i:04d}")
        for d in range(days)
        for s in range(1, stores + 1)
        for i in range(1, items + 1)
    ]
    frame = pd.DataFrame(rows, columns=["date", "store_id", "item_id"])
    frame["date"] = pd.to_datetime(frame["date"])
    frame["units_sold"] = rng.poisson(20, len(frame)).astype(float)
    return frame


def noisy(frame: pd.DataFrame, sd: float, seed: int) -> np.ndarray:
    """Return forecasts off the actuals by normal noise of `sd` units (never negative)."""
    rng = np.random.default_rng(seed)
    return np.clip(frame["units_sold"].to_numpy() + rng.normal(0, sd, len(frame)), 0, None)


def judge(frame: pd.DataFrame, candidate: np.ndarray, reference: np.ndarray, **rules: float):
    stores = {s: 100 for s in frame["store_id"].unique()}
    return judge_with_evidence(
        frame,
        candidate,
        reference,
        "champion demand_forecast.acme v3",
        GateRules(resamples=500, **rules),  # type: ignore[arg-type]
        EvidenceRules(),
        stores,
        "acme",
    )


def test_a_clearly_better_candidate_passes_on_the_interval_with_its_numbers():
    frame = holdout()
    verdict = judge(frame, noisy(frame, 2, 2), noisy(frame, 5, 3))
    assert verdict.passed and verdict.rule == "interval"
    shown = verdict.metadata
    assert float(shown["interval_low"]) <= float(shown["wape_change"]) < 0
    assert float(shown["interval_high"]) < 0 and shown["interval_method"] == "BCa"
    assert shown["store_days"] == 21 and shown["rows_scored"] == 105
    assert verdict.reason.startswith("interval: better, and not worse by more than 2%: WAPE ")
    assert "paired bootstrap over 21 store-days, 105 rows, 1 window(s) of 7 days" in verdict.reason
    again = judge(frame, noisy(frame, 2, 2), noisy(frame, 5, 3))
    assert again.metadata == shown  # a re-run gives the same interval and verdict


def test_a_worse_candidate_fails_on_the_interval():
    frame = holdout()
    verdict = judge(frame, noisy(frame, 5, 3), noisy(frame, 2, 2), store_tolerance=10.0)
    assert not verdict.passed and verdict.rule == "interval"
    assert verdict.reason.startswith("interval: not better on these rows: ")


def test_a_candidate_better_in_total_but_much_worse_in_one_store_fails_the_store_guard():
    frame = holdout()
    candidate = noisy(frame, 1, 2)
    reference = noisy(frame, 4, 3)
    one = (frame["store_id"] == "S002").to_numpy()
    candidate[one] = frame["units_sold"].to_numpy()[one] * 1.6  # S002 over-forecast by 60 %
    verdict = judge(frame, candidate, reference, max_worse_stores=0.0)
    assert not verdict.passed and verdict.rule == "store guard"
    assert verdict.reason.startswith("store guard: 1 of 3 stores worse by more than 10%")
    assert str(verdict.metadata["store_changes"]).startswith("S002 +")


def test_one_store_is_not_enough_evidence_for_a_bootstrap():
    frame = holdout(stores=1, items=10)
    verdict = judge(frame, noisy(frame, 1, 2), noisy(frame, 5, 3))
    assert not verdict.passed and verdict.rule == "evidence"
    assert verdict.reason.startswith(
        "not enough evidence: the holdout has 1 store(s) with rows; a bootstrap over one "
        "store's 7 days cannot speak for a customer (needs >= 2)"
    )


def test_windows_longer_than_the_holdout_are_not_enough_evidence():
    frame = holdout()
    verdict = judge(frame, noisy(frame, 1, 2), noisy(frame, 5, 3), windows=2)
    assert not verdict.passed and verdict.rule == "evidence"
    assert verdict.reason == (
        "not enough evidence: the holdout 2026-05-14 .. 2026-05-20 is shorter than 2 window(s) "
        "of 7 days (from 2026-05-07)"
    )


def test_a_window_without_a_store_names_the_window_and_the_store():
    frame = holdout(days=14)
    frame = frame[~((frame["store_id"] == "S003") & (frame["date"] < pd.Timestamp("2026-05-14")))]
    verdict = judge(frame, noisy(frame, 1, 2), noisy(frame, 5, 3), windows=2)
    assert not verdict.passed and verdict.rule == "evidence"
    assert verdict.reason.startswith(
        "window 1 of 2: not enough evidence: holdout 2026-05-07 .. 2026-05-13 has too few rows "
        "for 1 of 3 store(s) (S003: 0;"
    )


def test_a_store_that_closed_in_an_earlier_window_is_not_asked_for_rows_later():
    frame = holdout(days=28)
    closed = (frame["store_id"] == "S003") & (frame["date"] > pd.Timestamp("2026-04-27"))
    frame = frame[~closed]  # S003's newest day is in window 1, over a week before the holdout's
    verdict = judge(frame, noisy(frame, 1, 2), noisy(frame, 5, 3), windows=4)
    assert verdict.rule == "interval" and verdict.passed


def test_a_store_missing_from_the_newest_week_only_is_still_asked_for_rows():
    frame = holdout(days=28)
    closed = (frame["store_id"] == "S003") & (frame["date"] > pd.Timestamp("2026-05-13"))
    frame = frame[~closed]  # S003 sold up to the day before window 4: a gap, not a closure yet
    verdict = judge(frame, noisy(frame, 1, 2), noisy(frame, 5, 3), windows=4)
    assert not verdict.passed and verdict.rule == "evidence"
    assert verdict.reason.startswith("window 4 of 4: not enough evidence: holdout 2026-05-14")


def test_unscorable_forecasts_fail_naming_the_rule():
    frame = holdout()
    candidate = noisy(frame, 1, 2)
    candidate[3] = np.nan
    verdict = judge(frame, candidate, noisy(frame, 5, 3))
    assert not verdict.passed and verdict.rule == "forecasts"
    assert verdict.reason == "forecasts cannot be scored: 1 non-finite forecast(s)"


def test_a_setting_out_of_range_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("RETRAIN_GATE_CONFIDENCE", "1.5")
    with pytest.raises(
        ValueError, match=r"RETRAIN_GATE_CONFIDENCE=1.5: must be a number in \[0.5, 0.999\]"
    ):
        GateRules.from_settings()
    monkeypatch.setenv("RETRAIN_GATE_CONFIDENCE", "0.8")
    monkeypatch.setenv("RETRAIN_GATE_WINDOWS", "four")
    with pytest.raises(ValueError, match=r"RETRAIN_GATE_WINDOWS=four: must be a whole number in"):
        GateRules.from_settings()


def gate_inputs(frame: pd.DataFrame):
    """The evidence the gate gets for a holdout: every store had training rows."""
    from retrain_assets.features.evidence import judge_parts

    train = frame.assign(date=frame["date"] - pd.Timedelta(days=7), customer="acme")
    return judge_parts("acme", train, frame.assign(customer="acme"), EvidenceRules())


def test_the_margin_decides_by_default_and_the_metadata_carries_the_interval():
    from retrain_assets.models.gate import ReferenceModel, judge_gate

    frame = holdout().assign(lag_7=0.0)
    champion = ReferenceModel("champion demand_forecast.acme v3", lambda f: noisy(f, 5, 3))
    outcome = judge_gate(
        frame,
        lambda f: noisy(f, 2, 2),
        champion,
        0.02,
        gate_inputs(frame),
        GateRules(resamples=500),
        EvidenceRules(),
    )
    shown = outcome.metadata
    assert outcome.verdict.passed and shown["rule"] == "margin"
    assert outcome.verdict.reason.startswith("candidate WAPE ")  # the margin's own reason
    assert str(shown["evidence_verdict"]).startswith("pass (interval): interval: better")
    assert float(shown["interval_high"]) < 0 and shown["store_days"] == 21


def test_the_evidence_rule_decides_when_chosen_and_keeps_the_margins_verdict_beside_it():
    from retrain_assets.models.gate import ReferenceModel, judge_gate

    frame = holdout().assign(lag_7=0.0)
    champion = ReferenceModel("champion demand_forecast.acme v3", lambda f: noisy(f, 2.0, 3))
    outcome = judge_gate(
        frame,
        lambda f: noisy(f, 1.96, 2),  # better by about 2 %: the margin's coin flip
        champion,
        0.02,
        gate_inputs(frame),
        GateRules(resamples=500, tolerance=0.03),
        EvidenceRules(),
        rule="evidence",
    )
    shown = outcome.metadata
    assert shown["rule"] in ("interval", "store guard")
    assert outcome.verdict.reason == shown["reason"] and shown["reason"].startswith(shown["rule"])
    assert str(shown["margin_verdict"]).startswith(("pass: candidate WAPE", "fail: candidate"))
    assert outcome.verdict.margin == 0.03  # the tolerance the evidence rule used


def test_the_export_keeps_a_holdout_long_enough_for_the_gates_windows(monkeypatch):
    from retrain_assets.models.training_job_asset import TrainingJobConfig

    assert TrainingJobConfig().export_holdout_days() == 7
    monkeypatch.setenv("RETRAIN_GATE_WINDOWS", "4")
    config = TrainingJobConfig()
    assert config.export_holdout_days() == 28
    assert config.training_config()["holdout_days"] == 28  # a different export, another key
    assert TrainingJobConfig(holdout_days=35).export_holdout_days() == 35


def test_a_reference_without_error_in_most_store_days_gives_no_interval_and_no_pass():
    frame = holdout()
    reference = frame["units_sold"].to_numpy().copy()
    reference[:3] += 5.0  # the reference misses only the first three rows (one store-day)
    verdict = judge(frame, noisy(frame, 1, 2), reference)
    assert not verdict.passed and verdict.rule == "evidence"
    assert verdict.reason == (
        "not enough evidence: no bootstrap interval over 21 store-days (the reference's "
        "absolute error sums to 0 in some resamples)"
    )


def regime_that_ended() -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Four weeks: the candidate far better in the three older ones, far worse in the newest.

    What a candidate trained on a festival (or a price cut) looks like once it is over.
    """
    frame = holdout(days=28)
    newest = (frame["date"] > pd.Timestamp(LAST - dt.timedelta(days=7))).to_numpy()
    candidate, reference = noisy(frame, 1, 2), noisy(frame, 5, 3)
    candidate[newest], reference[newest] = noisy(frame, 8, 4)[newest], noisy(frame, 2, 5)[newest]
    return frame, candidate, reference


def test_the_newest_window_weighs_most_so_a_regime_that_ended_does_not_pass():
    frame, candidate, reference = regime_that_ended()
    equal = judge(frame, candidate, reference, windows=4, half_life=0.0)
    assert equal.passed and equal.rule == "interval"  # pooled, the old weeks outvote the newest
    assert equal.metadata["window_weights"] == "1, 1, 1, 1"
    assert "recency-weighted" not in equal.reason
    recent = judge(frame, candidate, reference, windows=4)  # the default: half-life 1 window
    assert not recent.passed and recent.rule == "interval"
    assert recent.metadata["window_weights"] == "0.125, 0.25, 0.5, 1"
    assert float(recent.metadata["wape_change"]) > 0 > float(equal.metadata["wape_change"])
    assert (
        recent.reason.startswith("interval: not better on these rows: WAPE ")
        and "recency-weighted (half-life 1 window(s)) change +" in recent.reason
    )
    # the pooled WAPEs stay unweighted: the weights change the verdict's change, not the scores
    assert recent.candidate_wape == equal.candidate_wape


def test_recency_weights_halve_every_half_life_and_the_setting_is_checked(monkeypatch):
    assert GateRules(half_life=1.0).window_weights(3) == [0.25, 0.5, 1.0]
    assert GateRules(half_life=2.0).window_weights(3) == pytest.approx([0.5, 0.5**0.5, 1.0])
    assert GateRules(half_life=0.0).window_weights(2) == [1.0, 1.0]
    assert GateRules().window_weights(1) == [1.0]  # one window: nothing to weigh
    monkeypatch.setenv("RETRAIN_GATE_HALF_LIFE", "-1")
    with pytest.raises(ValueError, match=r"RETRAIN_GATE_HALF_LIFE=-1: must be a number in \[0, 52"):
        GateRules.from_settings()
    monkeypatch.setenv("RETRAIN_GATE_HALF_LIFE", "2")
    assert GateRules.from_settings().half_life == 2.0
