import datetime as dt
import math

import numpy as np
import pytest

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.forecaster import Forecaster
from retrain_assets.serving.inputs import rows_batch
from retrain_assets.serving.prediction_log import LogUnavailable
from retrain_assets.serving.predictor import Predictor, ServingError
from retrain_assets.serving.protocol import infer_response, rows_response
from retrain_assets.serving.routes import Route, RouteTable
from retrain_assets.serving.routing import canary_mask
from retrain_assets_tests.serving.models import feature_frame, train

AT = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
BOOSTERS = {"1": train(1.0, 0.0), "2": train(2.0, 100.0), "9": train(1.0, 0.0, ("weather",))}


class FakeLog:
    """The log writer's interface, keeping rows in memory (or failing)."""

    def __init__(self) -> None:
        self.rows = []
        self.failure: str | None = None

    def write(self, rows) -> None:
        if self.failure:
            raise LogUnavailable(self.failure)
        self.rows.extend(rows)


class NaNModel:
    customer = "acme"
    version = "5"
    intervals = None

    def predict(self, features: np.ndarray) -> np.ndarray:
        return np.full(len(features), math.nan)


def route(customer="acme", champion="1", canary=None, weight=0.0) -> Route:
    return Route(
        customer,
        champion,
        canary,
        weight,
        42 if canary else None,
        "CANARY_50" if canary else None,
        AT,
    )


def predictor(*routes: Route, log: FakeLog | None = None, loaded: bool = True):
    table = RouteTable()
    for r in routes:
        table.put(r)
    table.loaded = loaded

    def models(customer: str, version: str):
        if version == "5":
            return NaNModel()
        if version not in BOOSTERS:
            raise RuntimeError(f"version {version} is not registered")
        return Forecaster.of(customer, version, BOOSTERS[version])

    return Predictor(table, models, log or FakeLog(), clock=lambda: AT)


def batch(count: int):
    frame = feature_frame(count, seed=9)
    rows = [
        {"store_id": f"S{i % 7}", "item_id": f"I{i}", "date": "2026-03-01", **record}
        for i, record in enumerate(frame.to_dict("records"))
    ]
    return rows_batch({"rows": rows}, 10_000), frame


def test_the_champion_serves_and_every_row_is_logged():
    log = FakeLog()
    rows, frame = batch(20)
    forecast = predictor(route(), log=log).forecast("acme", rows)
    expected = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    assert np.allclose(forecast.predictions, expected)
    assert set(forecast.aliases) == {"champion"} and set(forecast.versions) == {"1"}
    assert [(r.alias, r.served, r.model_version) for r in log.rows] == [
        ("champion", True, "1")
    ] * 20
    assert [r.request_key for r in log.rows] == rows.keys
    assert log.rows[0].served_at == AT and log.rows[0].forecast_date == dt.date(2026, 3, 1)


def test_canary_rows_are_served_by_the_canary_and_shadowed_by_the_champion():
    log = FakeLog()
    rows, frame = batch(200)
    forecast = predictor(route(canary="2", weight=0.5), log=log).forecast("acme", rows)
    to_canary = canary_mask("acme", rows.keys, 0.5)
    assert 60 < to_canary.sum() < 140
    assert [a == "canary" for a in forecast.aliases] == to_canary.tolist()
    champion = BOOSTERS["1"].predict(frame[MODEL_FEATURES])
    canary = BOOSTERS["2"].predict(frame[MODEL_FEATURES])
    assert np.allclose(forecast.predictions, np.where(to_canary, canary, champion))
    assert len(log.rows) == 200 + to_canary.sum()
    shadows = {r.request_key: r for r in log.rows if not r.served}
    assert set(shadows) == {k for k, c in zip(rows.keys, to_canary, strict=True) if c}
    for i, key in enumerate(rows.keys):
        if key in shadows:
            assert shadows[key].alias == "champion" and shadows[key].model_version == "1"
            assert shadows[key].prediction == pytest.approx(champion[i])
    assert {(r.rollout_id, r.step) for r in log.rows} == {(42, "CANARY_50")}


@pytest.mark.parametrize(
    ("customer", "routes", "loaded", "status", "message"),
    [
        ("Acme!", [], True, 404, "unknown customer: customer name 'Acme!' is not a safe slug"),
        ("globex", [route()], True, 404, "unknown customer 'globex': no serving route"),
        ("acme", [route(champion=None)], True, 409, "customer 'acme' has no champion yet"),
        ("acme", [route()], False, 503, "the route table has not been read yet"),
        ("acme", [route(champion="77")], True, 503, "model version 77 of acme could not be loaded"),
    ],
)
def test_refusals_say_why(customer, routes, loaded, status, message):
    rows, _ = batch(2)
    with pytest.raises(ServingError) as caught:
        predictor(*routes, loaded=loaded).forecast(customer, rows)
    assert caught.value.status == status
    assert message in caught.value.message, caught.value.message


def test_a_model_that_cannot_predict_is_logged_and_answered_500():
    log = FakeLog()
    rows, _ = batch(3)
    with pytest.raises(ServingError) as caught:
        predictor(route(champion="9"), log=log).forecast("acme", rows)
    assert caught.value.status == 500
    assert "model version 9 of acme needs feature(s) weather" in caught.value.message
    assert len(log.rows) == 3
    assert all(r.prediction is None and "weather" in r.error for r in log.rows)


def test_a_failing_canary_fails_its_rows_but_the_shadow_is_logged():
    log = FakeLog()
    rows, _ = batch(50)
    with pytest.raises(ServingError) as caught:
        predictor(route(canary="9", weight=0.5), log=log).forecast("acme", rows)
    assert caught.value.status == 500 and "version 9" in caught.value.message
    canary_rows = [r for r in log.rows if r.alias == "canary"]
    assert canary_rows and all(r.error and r.served for r in canary_rows)
    shadows = [r for r in log.rows if not r.served]
    assert len(shadows) == len(canary_rows) and all(r.prediction is not None for r in shadows)


def test_non_finite_predictions_are_logged_as_they_are_and_answered_null():
    log = FakeLog()
    rows, _ = batch(2)
    forecast = predictor(route(champion="5"), log=log).forecast("acme", rows)
    assert all(math.isnan(r.prediction) for r in log.rows)
    answer = rows_response(forecast)["predictions"][0]
    assert answer["prediction"] is None and answer["non_finite"] is True
    outputs = {o["name"]: o for o in infer_response(forecast, "r1", None)["outputs"]}
    assert outputs["forecast"]["data"] == [None, None]
    assert outputs["non_finite"]["data"] == [True, True]


def test_nothing_is_answered_when_the_log_cannot_commit():
    log = FakeLog()
    log.failure = "the prediction log is unavailable: server closed the connection"
    rows, _ = batch(2)
    with pytest.raises(ServingError) as caught:
        predictor(route(), log=log).forecast("acme", rows)
    assert caught.value.status == 503
    assert "nothing was answered: the prediction log is unavailable" in caught.value.message
