"""Prediction intervals in the answers: per served level, the canary's own, an old model's note."""

import dataclasses
import json
import math
import os
import subprocess

import numpy as np
import pytest

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.prediction_intervals import POOLED, IntervalTable, horizon_calibration
from retrain_assets.serving.forecaster import Forecaster
from retrain_assets.serving.inputs import rows_batch
from retrain_assets.serving.predictor import Predictor
from retrain_assets.serving.protocol import (
    check_outputs,
    infer_response,
    model_metadata,
    rows_response,
)
from retrain_assets.serving.routes import RouteTable
from retrain_assets.serving.routing import canary_mask
from retrain_assets_tests.serving.models import feature_frame
from retrain_assets_tests.serving.serving_process import SERVE
from retrain_assets_tests.serving.test_predictor import AT, BOOSTERS, FakeLog, route
from retrain_assets_tests.support.processes import free_port

WIDENED = (
    "widened on the gate's holdout: covered 63.7 % at 80 %, 95.6 % at 95 % of 135 holdout "
    "actuals; half-widths now 7.5 at 80 % (was 4), 9 at 95 % (kept)"
)
WIDTHS = {
    "1": IntervalTable({"80": 4.0, "95": 9.0}, windows=2, scores=300),  # both levels
    "2": None,  # logged before intervals existed
    "3": IntervalTable({"80": 6.0}, windows=2, scores=300),  # trained with 80 only
    "4": IntervalTable({"80": 7.5, "95": 9.0}, 2, 300, WIDENED),  # a first model, widened
}


def predictor(*routes, log=None, levels=(80.0, 95.0)) -> Predictor:
    table = RouteTable()
    for r in routes:
        table.put(r)
    table.loaded = True

    def models(customer: str, version: str) -> Forecaster:
        booster = BOOSTERS[{"3": "2", "4": "1"}.get(version, version)]
        return Forecaster.of(customer, version, booster, WIDTHS[version])

    return Predictor(table, models, log or FakeLog(), clock=lambda: AT, levels=levels)


def batch(count: int):
    frame = feature_frame(count, seed=4)
    rows = [
        {"store_id": f"S{i % 5}", "item_id": f"I{i}", "date": "2026-03-01", **record}
        for i, record in enumerate(frame.to_dict("records"))
    ]
    return rows_batch({"rows": rows}, 10_000), frame


def test_each_row_carries_its_bounds_at_every_served_level_on_both_routes():
    rows, frame = batch(30)
    forecast = predictor(route()).forecast("acme", rows)
    expected = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    answered = rows_response(forecast)["predictions"]
    for row, value in zip(answered, expected, strict=True):
        assert row["lower_80"] == pytest.approx(max(value - 4.0, 0.0))
        assert row["upper_80"] == pytest.approx(value + 4.0)
        assert row["lower_95"] == pytest.approx(max(value - 9.0, 0.0))
        assert row["upper_95"] == pytest.approx(value + 9.0)
        assert row["interval_note"] is None
    outputs = {o["name"]: o for o in infer_response(forecast, "r", None)["outputs"]}
    assert [o["name"] for o in outputs.values()][-6:] == [
        "lower_80",
        "upper_80",
        "lower_95",
        "upper_95",
        "interval_note",
        "interval_calibration",
    ]
    assert outputs["upper_95"]["datatype"] == "FP64"
    assert outputs["upper_95"]["data"] == pytest.approx((expected + 9.0).tolist())
    assert outputs["interval_note"]["data"] == [""] * 30
    assert outputs["interval_calibration"]["datatype"] == "BYTES"
    assert outputs["interval_calibration"]["data"] == [POOLED] * 30  # no day ahead: pooled
    assert {row["interval_calibration"] for row in answered} == {POOLED}
    assert outputs["horizon_days"]["data"] == [None] * 30  # rows sent with their features
    check_outputs(["lower_95", "interval_note"], forecast.interval_rows().levels)
    names = [o["name"] for o in model_metadata(route(), ("80",))["outputs"]]
    assert names[-4:] == ["lower_80", "upper_80", "interval_note", "interval_calibration"]


def test_a_row_days_ahead_gets_the_width_of_that_day_ahead_and_names_it():
    by_horizon = {1: {"80": 2.0, "95": 5.0}, 7: {"80": 7.0, "95": 12.0}}
    widths = {**WIDTHS, "1": dataclasses.replace(WIDTHS["1"], by_horizon=by_horizon)}
    rows, frame = batch(3)
    rows = dataclasses.replace(rows, horizons=[1, 7, -2])  # the last: a published day
    table = RouteTable()
    table.put(route())
    table.loaded = True

    def models(customer: str, version: str) -> Forecaster:
        return Forecaster.of(customer, version, BOOSTERS[version], widths[version])

    forecast = Predictor(table, models, FakeLog(), clock=lambda: AT, levels=(80.0, 95.0)).forecast(
        "acme", rows
    )
    expected = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    answered = rows_response(forecast)["predictions"]
    assert [row["horizon_days"] for row in answered] == [1, 7, -2]
    assert [row["upper_80"] - row["prediction"] for row in answered] == pytest.approx(
        [2.0, 7.0, 4.0]
    )
    assert answered[1]["upper_95"] == pytest.approx(expected[1] + 12.0)
    assert [row["interval_calibration"] for row in answered] == [
        horizon_calibration(1),
        horizon_calibration(7),
        POOLED,
    ]
    outputs = {o["name"]: o for o in infer_response(forecast, "r", None)["outputs"]}
    assert outputs["horizon_days"]["data"] == [1.0, 7.0, -2.0]


def test_a_scaled_model_answers_each_row_its_own_width_and_names_the_scale():
    by_horizon = {1: {"80": 0.2, "95": 0.5}}
    scaled = dataclasses.replace(WIDTHS["1"], by_horizon=by_horizon, scale="linear")
    rows, frame = batch(2)
    rows = dataclasses.replace(rows, horizons=[1, None])
    table = RouteTable()
    table.put(route())
    table.loaded = True

    def models(customer: str, version: str) -> Forecaster:
        return Forecaster.of(customer, version, BOOSTERS[version], scaled)

    forecast = Predictor(table, models, FakeLog(), clock=lambda: AT, levels=(80.0, 95.0)).forecast(
        "acme", rows
    )
    expected = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    answered = rows_response(forecast)["predictions"]
    # day ahead 1: 0.2 x (forecast + 1); no day ahead: the pooled 4.0 x (forecast + 1)
    assert [row["upper_80"] - row["prediction"] for row in answered] == pytest.approx(
        [0.2 * (expected[0] + 1), 4.0 * (expected[1] + 1)]
    )
    assert [row["interval_calibration"] for row in answered] == [
        f"{horizon_calibration(1)}, x (forecast + 1)",
        f"{POOLED}, x (forecast + 1)",
    ]


def test_an_old_canary_answers_its_rows_without_bounds_and_says_so():
    rows, _ = batch(200)
    log = FakeLog()
    forecast = predictor(route(canary="2", weight=0.5), log=log).forecast("acme", rows)
    to_canary = canary_mask("acme", rows.keys, 0.5)
    answered = rows_response(forecast)["predictions"]
    for row, canary in zip(answered, to_canary, strict=True):
        if canary:
            assert row["lower_80"] is None and row["upper_95"] is None
            assert row["interval_note"] == (
                "model version 2 of acme carries no prediction intervals "
                "(logged before its trainer computed them)"
            )
        else:
            assert row["upper_80"] == pytest.approx(row["prediction"] + 4.0)
            assert row["interval_note"] is None


def test_a_model_without_a_served_level_names_it_and_a_service_without_levels_adds_nothing():
    rows, _ = batch(3)
    forecast = predictor(route(champion="3")).forecast("acme", rows)
    row = rows_response(forecast)["predictions"][0]
    assert row["upper_80"] == pytest.approx(row["prediction"] + 6.0)
    assert row["lower_95"] is None and row["upper_95"] is None
    assert row["interval_note"] == "model version 3 of acme has no 95 % interval (it carries 80)"
    plain = predictor(route(), levels=()).forecast("acme", rows)
    assert "lower_80" not in rows_response(plain)["predictions"][0]
    assert len(infer_response(plain, "r", None)["outputs"]) == 10


def test_a_first_model_widened_by_the_gate_answers_its_widened_widths_and_says_so():
    rows, frame = batch(40)
    forecast = predictor(route(champion="4", canary="2", weight=0.5)).forecast("acme", rows)
    expected = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    to_canary = canary_mask("acme", rows.keys, 0.5)
    answered = rows_response(forecast)["predictions"]
    calibrations = infer_response(forecast, "r", None)["outputs"][-1]
    assert calibrations["name"] == "interval_calibration"
    for at, (row, value) in enumerate(zip(answered, expected, strict=True)):
        if to_canary[at]:  # the old canary carries no intervals: no calibration either
            assert row["interval_calibration"] is None and calibrations["data"][at] == ""
            continue
        assert row["lower_80"] == pytest.approx(max(value - 7.5, 0.0))
        assert row["upper_80"] == pytest.approx(value + 7.5)  # the widened width, not 4.0
        assert row["upper_95"] == pytest.approx(value + 9.0)
        assert row["interval_note"] is None
        assert row["interval_calibration"] == f"{WIDENED} ({POOLED})"  # and which errors
        assert calibrations["data"][at] == f"{WIDENED} ({POOLED})"
    assert to_canary.any() and not to_canary.all()


def test_rows_without_a_prediction_have_no_bounds_and_no_note():
    rows, _ = batch(4)
    rows = dataclasses.replace(
        rows, reasons=[None, "no sales history for store S1, item I1", None, None]
    )
    forecast = predictor(route()).forecast("acme", rows)
    answered = rows_response(forecast)["predictions"]
    assert answered[1]["lower_80"] is None and answered[1]["interval_note"] is None
    assert answered[1]["interval_calibration"] is None
    assert answered[0]["lower_80"] is not None and math.isfinite(answered[2]["upper_95"])
    lower = infer_response(forecast, "r", None)["outputs"][-6]["data"]
    assert lower[1] is None and np.isfinite(lower[0])


def test_every_logged_row_keeps_the_bounds_its_model_gave_shadows_included():
    rows, frame = batch(120)
    log = FakeLog()
    predictor(route(canary="2", weight=0.5), log=log).forecast("acme", rows)
    champion = dict(zip(rows.keys, BOOSTERS["1"].predict(frame[MODEL_FEATURES]), strict=True))
    by_alias = {"champion": [], "canary": []}
    for row in log.rows:
        by_alias[row.alias].append(row)
    assert by_alias["canary"] and all(r.intervals is None for r in by_alias["canary"])
    assert len(by_alias["champion"]) == 120  # served rows and the canary rows' shadows
    for row in by_alias["champion"]:
        value = champion[row.request_key]
        assert json.loads(row.intervals) == {
            "80": [pytest.approx(max(value - 4.0, 0)), pytest.approx(value + 4.0)],
            "95": [pytest.approx(max(value - 9.0, 0)), pytest.approx(value + 9.0)],
        }
    lonely = predictor(route(champion="3"), log=FakeLog())
    lonely.forecast("acme", batch(2)[0])
    assert set(json.loads(lonely.log.rows[0].intervals)) == {"80"}  # its one level


def test_the_service_refuses_to_start_with_a_level_outside_0_100(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRAIN_", "MLFLOW_"))}
    env |= {"RETRAIN_HOME": str(tmp_path), "RETRAIN_INTERVAL_LEVELS": "80,120"}
    done = subprocess.run(
        [*SERVE, "--port", str(free_port())], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "RETRAIN_INTERVAL_LEVELS=80,120: must be " in done.stderr
    assert "(level 120 is outside (0, 100); levels are percentages)" in done.stderr
