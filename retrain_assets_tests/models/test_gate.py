"""The gate on real LightGBM models: re-scored now, never trusted from a recorded metric."""

import datetime as dt

import lightgbm
import numpy as np
import pandas as pd

from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.models.gate import ReferenceModel, judge_candidate, lightgbm_predictor


def frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {name: rng.uniform(0, 10, rows) for name in MODEL_FEATURES}
    data["lag_7"] = rng.uniform(0, 10, rows)
    data[LABEL] = np.round(2 * data["rolling_mean_7"] + data["lag_7"] + rng.normal(0, 1, rows))
    data[LABEL] = np.clip(data[LABEL], 0, None)
    data["date"] = pd.Timestamp(dt.date(2025, 2, 1)) + pd.to_timedelta(np.arange(rows) % 7, "D")
    return pd.DataFrame(data)


def model_file(tmp_path, train: pd.DataFrame, rounds: int, name: str) -> str:
    booster = lightgbm.train(
        {"objective": "regression", "verbose": -1, "seed": 1, "deterministic": True},
        lightgbm.Dataset(train[MODEL_FEATURES], train[LABEL]),
        num_boost_round=rounds,
    )
    path = tmp_path / f"{name}.txt"
    booster.save_model(str(path))
    return str(path)


def test_a_good_candidate_beats_the_seasonal_naive_baseline(tmp_path):
    train, holdout = frame(2000, 1), frame(300, 2)
    candidate = lightgbm_predictor(model_file(tmp_path, train, 60, "c"))
    outcome = judge_candidate(holdout, candidate, None, 0.02)
    assert outcome.verdict.passed, outcome.verdict.reason
    assert outcome.metadata["rows_scored"] == 300
    assert outcome.metadata["holdout_window"] == "2025-02-01 .. 2025-02-07"


def test_a_weak_candidate_loses_to_a_re_scored_champion(tmp_path):
    train, holdout = frame(2000, 1), frame(300, 2)
    champion = ReferenceModel(
        "champion demand_forecast.acme v1",
        lightgbm_predictor(model_file(tmp_path, train, 80, "champ")),
    )
    weak = lightgbm_predictor(model_file(tmp_path, train, 2, "weak"))
    outcome = judge_candidate(holdout, weak, champion, 0.02)
    assert not outcome.verdict.passed
    assert outcome.metadata["reference"] == "champion demand_forecast.acme v1"
    assert outcome.metadata["reference_wape"] < outcome.metadata["candidate_wape"]


def test_negative_or_non_finite_forecasts_fail_the_gate():
    holdout = frame(50, 3)
    outcome = judge_candidate(holdout, lambda f: np.full(len(f), -1.0), None, 0.0)
    assert not outcome.verdict.passed and "negative" in outcome.verdict.reason
    outcome = judge_candidate(holdout, lambda f: np.full(len(f), np.nan), None, 0.0)
    assert not outcome.verdict.passed and "non-finite" in outcome.verdict.reason


def test_a_candidate_worse_than_the_challenger_fails_though_it_beats_seasonal_naive():
    """Before a first champion the challenger is the reference: the registry never regresses."""
    holdout = frame(400, 4)
    actual = holdout[LABEL].to_numpy(float)
    noise = np.random.default_rng(9).normal(0, 1, len(actual))
    challenger = ReferenceModel(
        "challenger demand_forecast.acme v1",
        lambda f: np.clip(actual + noise, 0, None),
        "challenger",
        "1",
    )
    candidate = lambda f: np.clip(actual + 1.05 * noise, 0, None)  # noqa: E731 a bit worse
    assert judge_candidate(holdout, candidate, None, 0.02).verdict.passed  # naive is far behind
    outcome = judge_candidate(holdout, candidate, challenger, 0.02)
    assert not outcome.verdict.passed
    assert outcome.metadata["reference"] == "challenger demand_forecast.acme v1"
    assert outcome.metadata["reference_version"] == "1"
    assert "does not beat challenger demand_forecast.acme v1" in outcome.verdict.reason
