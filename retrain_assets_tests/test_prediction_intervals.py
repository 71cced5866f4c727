"""Prediction intervals' arithmetic: levels, the conformal quantile, what a model carries."""

import math

import numpy as np
import pytest

from retrain_assets.prediction_intervals import (
    POOLED,
    TRAINER_BACKTESTS,
    IntervalRules,
    IntervalTable,
    bounds,
    conformal_halfwidth,
    coverage,
    coverage_tolerance,
    scale_of,
)
from retrain_assets.settings_model import SettingsError, current_settings
from retrain_assets.settings_model.model import parse_levels


def test_levels_parse_sorted_and_bad_ones_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_levels("95, 80") == (80.0, 95.0)
    assert parse_levels("97.5") == (97.5,)
    assert parse_levels("none") == parse_levels(" ") == ()
    for text, said in (
        ("80,100", "level 100 is outside \\(0, 100\\)"),
        ("0", "level 0 is outside"),
        ("0.8,abc", "'abc' is not a level"),
        ("80,80", "level 80 is listed twice"),
        ("10,20,30,40,50,60", "6 levels; at most 5"),
    ):
        monkeypatch.setenv("RETRAIN_INTERVAL_LEVELS", text)
        with pytest.raises(SettingsError, match=f"RETRAIN_INTERVAL_LEVELS={text}: must .*{said}"):
            current_settings()


def test_rules_and_tolerance_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert IntervalRules.from_settings() == IntervalRules((80.0, 95.0), 3, 7, "linear")
    monkeypatch.setenv("RETRAIN_INTERVAL_LEVELS", "90")
    monkeypatch.setenv("RETRAIN_INTERVAL_WINDOWS", "4")
    assert IntervalRules.from_settings().as_spec() == {
        "levels": [90.0],
        "windows": 4,
        "window_days": 7,
        "scale": "linear",
    }
    monkeypatch.setenv("RETRAIN_INTERVAL_SCALE", " Absolute ")
    assert IntervalRules.from_settings().scale == "absolute"
    monkeypatch.setenv("RETRAIN_INTERVAL_SCALE", "log")
    with pytest.raises(SettingsError, match="RETRAIN_INTERVAL_SCALE=log"):
        IntervalRules.from_settings()
    monkeypatch.delenv("RETRAIN_INTERVAL_SCALE")
    monkeypatch.setenv("RETRAIN_INTERVAL_LEVELS", "")
    assert IntervalRules.from_settings().as_spec() is None
    monkeypatch.setenv("RETRAIN_INTERVAL_WINDOWS", "1")
    with pytest.raises(SettingsError, match=r"RETRAIN_INTERVAL_WINDOWS=1: must be .* in \[2, 12\]"):
        IntervalRules.from_settings()
    monkeypatch.delenv("RETRAIN_INTERVAL_WINDOWS")  # every setting is checked at each read
    assert coverage_tolerance() == 0.10
    monkeypatch.setenv("RETRAIN_INTERVAL_COVERAGE_TOLERANCE", "1.5")
    with pytest.raises(SettingsError, match=r"COVERAGE_TOLERANCE=1\.5: must be a number in \[0, 1"):
        coverage_tolerance()


def test_the_conformal_quantile_is_the_finite_sample_rank() -> None:
    scores = np.arange(1.0, 10.0)  # 9 scores: level 80 takes the ceil(10 x 0.8) = 8th
    assert conformal_halfwidth(scores, 80) == 8.0
    assert conformal_halfwidth(scores, 90) == 9.0
    assert conformal_halfwidth(scores, 95) is None  # the 10th of 9: no finite width
    table = IntervalTable.from_scores(scores, [80, 95], windows=2)
    assert table is not None and dict(table.halfwidths) == {"80": 8.0}


def test_a_table_survives_metrics_and_metadata_and_a_corrupt_one_is_refused() -> None:
    table = IntervalTable({"80": 2.5, "97.5": 6.0}, windows=3, scores=420)
    assert IntervalTable.from_metrics({"train_wape": 0.3, **table.as_metrics()}) == table
    assert IntervalTable.from_metadata({"prediction_intervals": table.as_metadata()}) == table
    assert IntervalTable.from_metrics({"train_wape": 0.3, "interval_windows": 1.0}) is None
    assert IntervalTable.from_metadata(None) is None
    with pytest.raises(ValueError, match="malformed prediction_intervals"):
        IntervalTable.from_metadata({"prediction_intervals": {"halfwidths": {"80": 1.0}}})
    with pytest.raises(ValueError, match="negative or not finite"):
        IntervalTable.from_metadata(
            {"prediction_intervals": {"halfwidths": {"80": -1}, "windows": 2, "scores": 9}}
        )


def test_a_table_says_its_calibration_and_an_older_entry_holds_the_trainers_widths() -> None:
    widened = IntervalTable({"80": 4.1}, 2, 300, calibration="widened on the gate's holdout: ...")
    entry = widened.as_metadata()
    assert entry["calibration"] == "widened on the gate's holdout: ..."
    assert IntervalTable.from_metadata({"prediction_intervals": entry}) == widened
    older = {k: v for k, v in entry.items() if k != "calibration"}  # logged before the field
    read = IntervalTable.from_metadata({"prediction_intervals": older})
    assert read is not None and read.calibration == TRAINER_BACKTESTS == "trainer backtests"
    with pytest.raises(ValueError, match="calibration is 7, not a label"):
        IntervalTable.from_metadata({"prediction_intervals": {**entry, "calibration": 7}})
    assert widened.width("80", None) == (4.1, f"widened on the gate's holdout: ... ({POOLED})")


def test_widths_by_day_ahead_come_from_that_day_aheads_errors_and_travel_with_the_table() -> None:
    scores = np.concatenate([np.arange(1.0, 10.0), np.arange(1.0, 10.0) * 10])
    ahead = np.array([1] * 9 + [7] * 9)
    table = IntervalTable.from_scores(scores, [80], windows=2, horizons=ahead)
    assert table is not None and {h: dict(w) for h, w in table.by_horizon.items()} == {
        1: {"80": 8.0},
        7: {"80": 80.0},
    }
    assert table.width("80", 7) == (80.0, "conformal, day ahead 7")
    assert table.width("80", None) == (table.halfwidths["80"], POOLED)
    assert table.width("95", 1) == (None, None)
    assert IntervalTable.from_metrics({"train_wape": 0.3, **table.as_metrics()}) == table
    assert IntervalTable.from_metadata({"prediction_intervals": table.as_metadata()}) == table


def test_a_scaled_table_gives_each_row_its_own_width_and_says_so() -> None:
    forecast = np.array([1.0, 49.0, np.nan])
    assert np.allclose(scale_of("linear", forecast)[:2], [2.0, 50.0])
    assert np.allclose(scale_of("sqrt", forecast)[:2], [np.sqrt(2.0), np.sqrt(50.0)])
    assert np.allclose(scale_of("absolute", forecast)[:2], [1.0, 1.0])
    assert all(np.isnan(scale_of(kind, forecast)[2]) for kind in ("linear", "sqrt", "absolute"))

    scores = np.arange(1.0, 10.0) / 10  # errors of a tenth .. nine tenths of forecast + 1
    table = IntervalTable.from_scores(scores, [80], windows=3, scale="linear")
    assert table is not None and table.halfwidths["80"] == pytest.approx(0.8)
    assert np.allclose(table.row_halfwidths(0.8, forecast[:2]), [1.6, 40.0])
    assert table.width("80", None) == (pytest.approx(0.8), f"{POOLED}, x (forecast + 1)")
    assert IntervalTable.from_metrics({"train_wape": 0.3, **table.as_metrics()}) == table
    assert IntervalTable.from_metadata({"prediction_intervals": table.as_metadata()}) == table
    older = {k: v for k, v in table.as_metadata().items() if k != "scale"}  # logged before
    read = IntervalTable.from_metadata({"prediction_intervals": older})
    assert read is not None and read.scale == "absolute"
    with pytest.raises(ValueError, match="scale 'log' is none of absolute, sqrt, linear"):
        IntervalTable.from_metadata({"prediction_intervals": {**older, "scale": "log"}})


def test_bounds_clip_at_zero_and_coverage_counts_the_edges() -> None:
    lower, upper = bounds(np.array([1.0, 10.0, math.nan]), 3.0)
    assert lower[:2].tolist() == [0.0, 7.0] and upper[:2].tolist() == [4.0, 13.0]
    assert math.isnan(lower[2]) and math.isnan(upper[2])
    assert coverage(np.array([4.0, 14.0, 1.0]), lower, upper) == pytest.approx(1 / 3)
    assert math.isnan(coverage(np.array([]), np.array([]), np.array([])))
