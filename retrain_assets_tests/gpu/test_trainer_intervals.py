"""The trainer's prediction intervals: rolling-origin refits, widths in the metrics, coverage."""

from pathlib import Path

import lightgbm
import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import train
from retrain_assets.prediction_intervals import IntervalTable, bounds, coverage
from retrain_assets_tests.gpu.service_process import FEATURES, training_spec, write_dataset

INTERVALS = {"levels": [95, 80], "windows": 2, "window_days": 7}


def dated(path: Path, days: int, rows: int = 3000, seed: int = 11) -> Path:
    """Write the GPU tests' synthetic rows spread over `days` consecutive days."""
    write_dataset(path, rows, seed)
    frame = pd.read_parquet(path)
    frame["date"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(rows) % days, "D")
    frame.to_parquet(path)
    return path


def spec(dataset: Path, **overrides: object) -> TrainingSpec:
    return TrainingSpec.model_validate(training_spec(dataset, **overrides))


def test_intervals_leave_the_model_as_it_was_and_carry_widths_that_cover_new_rows(
    tmp_path: Path,
) -> None:
    data = dated(tmp_path / "train.parquet", days=60)
    plain = train(spec(data), tmp_path / "plain")
    result = train(spec(data, intervals=INTERVALS), tmp_path / "intervals")
    assert result.sha256 == plain.sha256  # the refits never touch the model itself
    table = IntervalTable.from_metrics(result.metrics)
    assert table is not None
    assert table.windows == 2
    assert table.scores == 3000 * 14 // 60  # the rows of the 14 newest days
    assert 0 < table.halfwidths["80"] < table.halfwidths["95"]
    # each day ahead 1 .. 7 of the two windows gets its own widths (issue 39)
    assert sorted(table.by_horizon) == list(range(1, 8))
    assert all(0 < w["80"] < w["95"] for w in table.by_horizon.values())
    # rows the model never saw, from the same process: the widths cover about their level
    fresh = pd.read_parquet(write_dataset(tmp_path / "fresh.parquet", 4000, seed=99))
    booster = lightgbm.Booster(model_file=str(result.model_path))
    forecast = np.asarray(booster.predict(fresh[FEATURES].astype(float).to_numpy()))
    for name, low, high in (("80", 0.75, 0.86), ("95", 0.92, 0.98)):
        lower, upper = bounds(forecast, table.halfwidths[name])
        assert low <= coverage(fresh["units_sold"].to_numpy(), lower, upper) <= high


def test_scaled_widths_are_each_rows_own_and_cover_new_rows_like_absolute_ones(
    tmp_path: Path,
) -> None:
    data = dated(tmp_path / "train.parquet", days=60)
    result = train(spec(data, intervals={**INTERVALS, "scale": "linear"}), tmp_path / "job")
    table = IntervalTable.from_metrics(result.metrics)
    assert table is not None and table.scale == "linear"
    fresh = pd.read_parquet(write_dataset(tmp_path / "fresh.parquet", 4000, seed=99))
    booster = lightgbm.Booster(model_file=str(result.model_path))
    forecast = np.asarray(booster.predict(fresh[FEATURES].astype(float).to_numpy()))
    widths = table.row_halfwidths(table.halfwidths["80"], forecast)
    assert np.allclose(widths, table.halfwidths["80"] * (forecast + 1.0))  # the row's own
    lower, upper = bounds(forecast, widths)
    assert 0.75 <= coverage(fresh["units_sold"].to_numpy(), lower, upper) <= 0.86


def test_a_window_too_short_for_two_origins_trains_without_widths_and_says_how_many(
    tmp_path: Path,
) -> None:
    data = dated(tmp_path / "short.parquet", days=10)  # 7 days before, 3 days: one origin
    result = train(spec(data, intervals=INTERVALS), tmp_path / "job")
    assert IntervalTable.from_metrics(result.metrics) is None
    assert result.metrics["interval_windows"] == 1.0


def test_a_missing_date_column_and_bad_levels_are_errors_naming_them(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "undated.parquet")
    with pytest.raises(ValueError, match="'date'"):
        train(spec(data, intervals=INTERVALS), tmp_path / "job")
    for levels, said in (([100], "less than 100"), ([0], "greater than 0"), ([80, 80], "repeat")):
        with pytest.raises(ValidationError, match=said):
            spec(data, intervals={"levels": levels})
    with pytest.raises(ValidationError, match="greater than or equal to 2"):
        spec(data, intervals={"levels": [80], "windows": 1})
