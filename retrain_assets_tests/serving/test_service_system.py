"""The real prediction service process against the real Postgres and MLflow server."""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.feature_math import store_day_features
from retrain_assets.features.lookback import LOOKBACK_DAYS
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.prediction_intervals import IntervalTable
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.runtime.token_files import write_token_files
from retrain_assets.serving.binary_tensors import HEADER
from retrain_assets.serving.history import Publication
from retrain_assets.serving.routing import bucket
from retrain_assets.store.database import transaction
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets_tests.serving.models import train
from retrain_assets_tests.serving.published import LATEST, publish, simulated_sales
from retrain_assets_tests.serving.serving_process import (
    TOKEN,
    Client,
    ServingProcess,
    feature_row,
)
from retrain_assets_tests.serving.versions_and_routes import register, set_route
from retrain_assets_tests.support.waiting import patience, wait_until

pytestmark = pytest.mark.system
MAX_ROWS = 500
SUFFIX = uuid.uuid4().hex[:6]
STEADY, MOVING, BROKEN, NO_CHAMPION, LEVELS = (
    f"{n}-{SUFFIX}" for n in ("steady", "moving", "broken", "new", "levels")
)
WIDTHS = IntervalTable({"80": 3.0, "95": 7.5}, windows=2, scores=280)  # LEVELS' version 1
# STEADY's version 1: widths per day ahead, each a multiple of the row's forecast + 1
SCALED = IntervalTable(
    {"80": 0.3, "95": 0.6}, 3, 420, by_horizon={7: {"80": 0.25, "95": 0.5}}, scale="linear"
)
KEYED_SPEC = TenantSpec(STEADY, "US", stores=2, items=6, seed=5)  # STEADY's published history
DROPPED = ("S002", "I0003")  # a store and an item it has, never sold together
README_SPEC = TenantSpec("northwind-us", "US", stores=2, items=3, seed=11)  # README's customer


@pytest.fixture(scope="module")
def module_db(pg_server: PostgresServer) -> str:
    """A migrated project database shared by this module's service processes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
        url = ensure_database(pg_server, "app")
    migrate(url)
    return url


@pytest.fixture(scope="module")
def boosters(mlflow_uri: str) -> dict[tuple[str, str], object]:
    """Registered versions: (customer, version) -> the booster logged as that version."""
    registry = MlflowRegistry(mlflow_uri)
    made = {}
    for customer in (STEADY, MOVING):
        for scale, offset in ((1.0, 0.0), (2.0, 100.0)):
            booster = train(scale, offset)
            widths = SCALED if (customer, offset) == (STEADY, 0.0) else None
            made[(customer, register(registry, customer, booster, widths))] = booster
    broken = train(1.0, 0.0, ("weather",))
    made[(BROKEN, register(registry, BROKEN, broken))] = broken
    readme = train(1.0, 0.0)
    made[(README_SPEC.name, register(registry, README_SPEC.name, readme))] = readme
    with_intervals, old = train(1.0, 0.0), train(2.0, 100.0)
    made[(LEVELS, register(registry, LEVELS, with_intervals, WIDTHS))] = with_intervals
    made[(LEVELS, register(registry, LEVELS, old))] = old  # logged before intervals existed
    return made


def logged(url, customer, keys=None):
    with transaction(url) as cur:
        cur.execute(
            "SELECT request_key, model_version, alias, served, prediction, error, rollout_id, "
            "step FROM prediction_log WHERE customer = %s ORDER BY id",
            (customer,),
        )
        rows = cur.fetchall()
    return [row for row in rows if keys is None or row[0] in keys]


def wait_for_versions(service: ServingProcess, customer: str, versions: list[str]) -> None:
    def served() -> bool:
        response = service.call("GET", f"/v2/models/{customer}")
        return response.status_code == 200 and response.json()["versions"] == versions

    wait_until(served, 30, f"{customer} to be served by {versions}", interval=0.2)


@pytest.fixture(scope="module")
def published(module_db, tmp_path_factory) -> tuple[str, Publication, pd.DataFrame]:
    """STEADY's published feature days (the asset's code) and their `feature_snapshots` rows."""
    storage = str(tmp_path_factory.mktemp("storage"))
    publication, written = publish(
        ParquetPartitionStore(storage),
        KEYED_SPEC,
        drop=DROPPED,
        db_url=module_db,
        others=(README_SPEC,),
    )
    return storage, publication, written


@pytest.fixture(scope="module")
def service(
    module_db, mlflow_uri, boosters, published, tmp_path_factory
) -> Iterator[ServingProcess]:
    """One service process for the module (routes, routing, validation, requests by key)."""
    set_route(module_db, STEADY, "1")
    set_route(module_db, MOVING, "1")
    set_route(module_db, BROKEN, "1")
    set_route(module_db, NO_CHAMPION, None)
    set_route(module_db, LEVELS, "1")
    process = ServingProcess(
        module_db,
        mlflow_uri,
        tmp_path_factory.mktemp("serve"),
        extra_env={
            "RETRAIN_SERVE_MAX_ROWS": str(MAX_ROWS),
            "RETRAIN_SERVE_MAX_MODELS": "3",
            "RETRAIN_STORAGE_URL": published[0],
        },
    )
    process.start()
    try:
        yield process
    finally:
        assert process.stop() == 0, process.log()


def v2_request(rows: list[dict]) -> dict:
    inputs = [
        {"name": name, "datatype": "BYTES", "shape": [len(rows)], "data": [r[name] for r in rows]}
        for name in ("store_id", "item_id", "date")
    ]
    inputs += [
        {"name": name, "datatype": "FP64", "shape": [len(rows)], "data": [r[name] for r in rows]}
        for name in MODEL_FEATURES
    ]
    return {"id": "req-1", "inputs": inputs}


def test_v2_and_json_routes_serve_the_champion_and_log_it(service, module_db, boosters):
    set_route(module_db, STEADY, "1")
    wait_for_versions(service, STEADY, ["1"])
    rows = [feature_row("S1", f"I{i}", seed=i) for i in range(5)]
    expected = boosters[(STEADY, "1")].predict(pd.DataFrame(rows)[MODEL_FEATURES])

    metadata = service.call("GET", f"/v2/models/{STEADY}").json()
    assert metadata["platform"] == "lightgbm"
    assert [i["name"] for i in metadata["inputs"]] == [
        "store_id",
        "item_id",
        "date",
        *MODEL_FEATURES,
    ]
    assert {o["name"]: o["datatype"] for o in metadata["outputs"]}["forecast"] == "FP64"
    assert service.call("GET", "/v2/health/live", token=None).json() == {"live": True}
    assert service.call("GET", f"/v2/models/{STEADY}/ready").status_code == 200

    infer = service.call("POST", f"/v2/models/{STEADY}/infer", json=v2_request(rows))
    assert infer.status_code == 200, infer.text
    body = infer.json()
    assert body["model_name"] == STEADY and body["id"] == "req-1"
    outputs = {o["name"]: o for o in body["outputs"]}
    assert np.allclose(outputs["forecast"]["data"], expected)
    assert outputs["forecast"]["shape"] == [5]
    assert outputs["model_version"]["data"] == ["1"] * 5
    assert outputs["alias"]["data"] == ["champion"] * 5

    plain = service.forecast(STEADY, rows)
    assert plain.status_code == 200, plain.text
    answered = plain.json()["predictions"]
    assert [r["request_key"] for r in answered] == [f"S1/I{i}/{LATEST}" for i in range(5)]
    assert np.allclose([r["prediction"] for r in answered], expected)
    assert {(r["model_version"], r["alias"], r["non_finite"]) for r in answered} == {
        ("1", "champion", False)
    }
    log = logged(module_db, STEADY, {r["request_key"] for r in answered})
    assert len(log) == 10  # v2 and JSON: each row served twice, each logged
    assert {row[1:4] for row in log} == {("1", "champion", True)}
    assert np.allclose(sorted(row[4] for row in log), sorted([*expected, *expected]))


def test_a_canary_at_half_gets_its_keys_every_time_and_is_shadowed(service, module_db):
    set_route(module_db, STEADY, "1", canary="2", weight=0.5, rollout=11, step="CANARY_50")
    wait_for_versions(service, STEADY, ["1", "2"])
    rows = [feature_row(f"C{i % 10}", f"I{i}", seed=i) for i in range(400)]
    first = service.forecast(STEADY, rows).json()["predictions"]
    again = service.forecast(STEADY, rows).json()["predictions"]
    assert [r["model_version"] for r in first] == [r["model_version"] for r in again]
    expected = {
        r["request_key"]: ("2" if bucket(STEADY, r["request_key"]) < 0.5 else "1") for r in first
    }
    assert {r["request_key"]: r["model_version"] for r in first} == expected
    canary_share = sum(v == "2" for v in expected.values()) / len(expected)
    assert 0.4 < canary_share < 0.6  # 400 keys: within about four standard deviations

    log = logged(module_db, STEADY, set(expected))
    canary_keys = {k for k, v in expected.items() if v == "2"}
    served = [row for row in log if row[3]]
    shadows = [row for row in log if not row[3]]
    assert len(served) == 800 and len(shadows) == 2 * len(canary_keys)
    assert {row[0] for row in shadows} == canary_keys
    assert {row[1:3] for row in shadows} == {("1", "champion")}
    assert {row[6:8] for row in log} == {(11, "CANARY_50")}


def test_a_route_move_is_served_without_restart_and_no_request_fails(service, module_db):
    set_route(module_db, MOVING, "1")
    wait_for_versions(service, MOVING, ["1"])
    clients = [Client(service, MOVING, f"mv{n}-{SUFFIX}", rows=10) for n in range(2)]
    for client in clients:
        client.start()
    try:
        wait_until(lambda: all(c.requests > 5 for c in clients), 30, "clients under way")
        set_route(module_db, MOVING, "2", rollout=12, step="PROMOTE")

        def moved() -> bool:
            answers = [v for c in clients for v in list(c.acknowledged.values())]  # a snapshot
            return ("2", "champion") in answers

        wait_until(moved, 30, "the move to version 2", interval=0.1)
        settle = [c.requests for c in clients]
        wait_until(
            lambda: all(c.requests > n + 5 for c, n in zip(clients, settle, strict=True)),
            30,
            "more requests after the move",
        )
    finally:
        for client in clients:
            client.stop.set()
        for client in clients:
            client.join(patience(30))
    assert [f for c in clients for f in c.failures] == []
    versions = {v for c in clients for v in c.acknowledged.values()}
    assert versions == {("1", "champion"), ("2", "champion")}
    assert "loaded model version 2 of " + MOVING in service.log()


def test_bad_input_is_refused_with_its_status_and_reason(service, module_db, published):
    good = [feature_row("B1", "I1")]

    def refused(response, status: int, reason: str) -> None:
        assert response.status_code == status, response.text
        message = response.json().get("detail") or response.json().get("error")
        assert reason in message, message

    refused(service.forecast("nobody-here", good), 404, "unknown customer 'nobody-here'")
    refused(service.forecast("Not_A_Slug", good), 404, "is not a safe slug")
    refused(service.forecast(NO_CHAMPION, good), 409, "has no champion yet")
    refused(service.call("GET", f"/v2/models/{NO_CHAMPION}/ready"), 409, "no champion yet")
    missing = [{k: v for k, v in good[0].items() if k != "lag_28"}]
    refused(service.forecast(STEADY, missing), 422, "rows[0].lag_28: missing feature")
    refused(
        service.forecast(STEADY, [{**good[0], "date": "2026-13-01"}]),
        422,
        "rows[0].date: is not a calendar date",
    )
    nan_body = json.dumps({"rows": good}).replace('"lag_7": 0.0', '"lag_7": NaN')
    assert "NaN" in nan_body
    refused(
        service.call(
            "POST",
            f"/forecast/{STEADY}",
            data=nan_body,
            headers={"Content-Type": "application/json"},
        ),
        422,
        "the body has NaN",
    )
    refused(
        service.forecast(STEADY, good * (MAX_ROWS + 1)),
        413,
        f"{MAX_ROWS + 1} rows in one request; at most {MAX_ROWS}",
    )
    v2_bad = v2_request(good)
    v2_bad["inputs"] = v2_bad["inputs"][:-1]
    refused(
        service.call("POST", f"/v2/models/{STEADY}/infer", json=v2_bad),
        422,
        f"inputs: missing {MODEL_FEATURES[-1]}",
    )
    header = json.dumps(v2_request(good))
    binary = service.call(
        "POST",
        f"/v2/models/{STEADY}/infer",
        data=header.encode(),
        headers={"Inference-Header-Content-Length": str(len(header) + 10)},
    )
    refused(binary, 400, f"says the JSON header has {len(header) + 10} bytes")
    refused(service.forecast(STEADY, good, token=None), 401, "missing or wrong bearer token")
    refused(service.forecast(STEADY, good, token="dev-token"), 401, "bearer token")
    secret = {**good[0], "price": "secret-price-417"}
    response = service.forecast(STEADY, [secret])
    refused(response, 422, "rows[0].price: must be a number")
    assert "secret-price-417" not in response.text

    # rows with every feature, in every form: each date is checked against the days served
    latest = published[1].latest
    first, last = latest - dt.timedelta(days=6), latest + dt.timedelta(days=7)
    early = [good[0], {**good[0], "date": (first - dt.timedelta(days=1)).isoformat()}]
    late = [good[0], {**good[0], "date": (last + dt.timedelta(days=1)).isoformat()}]
    before = log_count(module_db, STEADY)
    refused(
        service.forecast(STEADY, early),
        422,
        f"rows[1].date: before the days served: the earliest is {first}; "
        f"days served: {first} to {last}",
    )
    infer = f"/v2/models/{STEADY}/infer"
    refused(
        service.call("POST", infer, json=v2_request(late)),
        422,
        f"inputs[date].data[1]: past the horizon: the furthest forecastable date is {last}",
    )
    header = v2_request(early)
    (dates,) = [tensor for tensor in header["inputs"] if tensor["name"] == "date"]
    raw = b"".join(len(d).to_bytes(4, "little") + d for d in (r["date"].encode() for r in early))
    dates.pop("data")
    dates["parameters"] = {"binary_data_size": len(raw)}
    body, length = binary_body(header, raw)
    refused(
        service.call("POST", infer, data=body, headers={HEADER: str(length)}),
        422,
        f"inputs[date].data[1]: before the days served: the earliest is {first}",
    )
    assert log_count(module_db, STEADY) == before  # nothing served, nothing logged
    edges = [{**good[0], "date": day.isoformat()} for day in (first, latest, last)]
    assert service.forecast(STEADY, edges).status_code == 200  # the days served are answered
    assert service.call("POST", infer, json=v2_request(edges)).status_code == 200

    failed = service.forecast(BROKEN, good)
    refused(failed, 500, "needs feature(s) weather")
    (row,) = logged(module_db, BROKEN)
    assert row[0] == f"B1/I1/{LATEST}" and row[4] is None and "weather" in row[5]


def raw_request(service: ServingProcess, head: str, chunks: list[bytes] = ()) -> bytes:
    """Send a request's head, then body chunks until the service answers; return its answer.

    A chunk goes out only while no answer has come: the service reads everything sent before
    it answers, so its close is clean (unread data would make it reset the connection).
    """
    with socket.create_connection(("127.0.0.1", service.port), timeout=patience(10)) as sock:
        sock.sendall(head.encode())
        for chunk in chunks:
            if select.select([sock], [], [], 0.05)[0]:
                break
            sock.sendall(chunk)
        answer = b""
        while data := sock.recv(65536):  # the service closes the connection after answering
            answer += data
        return answer


def test_no_body_is_read_without_the_token_or_past_the_size_limit(service):
    head = (
        f"POST /forecast/{STEADY} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {50 * 1024 * 1024}\r\n"
    )
    # none of the 50 MB is sent: an answer proves the service never waited for the body
    answer = raw_request(service, head + "\r\n")
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"missing or wrong bearer token" in answer
    answer = raw_request(service, head + f"Authorization: Bearer {TOKEN}\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"the body is larger than" in answer

    chunked = (
        f"POST /forecast/{STEADY} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b" " * 65536
    answer = raw_request(service, chunked, [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 64)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]  # 4 MiB offered, ~600 KiB read
    assert b"the body is larger than" in answer


def hammer(service: ServingProcess, customer: str, tag: str) -> list[Client]:
    clients = [Client(service, customer, f"{tag}{n}-{SUFFIX}", rows=25) for n in range(3)]
    for client in clients:
        client.start()
    wait_until(lambda: all(len(c.acknowledged) >= 100 for c in clients), 60, "clients under way")
    return clients


def stop_clients(clients: list[Client]) -> dict[str, tuple[str, str]]:
    for client in clients:
        client.stop.set()
    for client in clients:
        client.join(patience(30))
    return {key: value for client in clients for key, value in client.acknowledged.items()}


def assert_all_logged(url: str, customer: str, acknowledged: dict[str, tuple[str, str]]) -> None:
    served = {
        row[0]: (row[1], row[2]) for row in logged(url, customer, set(acknowledged)) if row[3]
    }
    missing = set(acknowledged) - set(served)
    assert not missing, f"{len(missing)} acknowledged prediction(s) not logged"
    assert served == acknowledged


@pytest.fixture
def own_service(module_db, mlflow_uri, boosters, published, tmp_path) -> Iterator[ServingProcess]:
    """A service process of the test's own, to stop and kill (its rows' day is published)."""
    set_route(module_db, STEADY, "1", canary="2", weight=0.5, rollout=11, step="CANARY_50")
    process = ServingProcess(module_db, mlflow_uri, tmp_path)
    try:
        yield process
    finally:
        if process.process is not None and process.process.poll() is None:
            process.kill()


def test_sigterm_drains_and_every_acknowledged_prediction_is_logged(own_service, module_db):
    own_service.start()
    clients = hammer(own_service, STEADY, "term")
    assert own_service.stop() == 0, own_service.log()
    acknowledged = stop_clients(clients)
    assert_all_logged(module_db, STEADY, acknowledged)
    assert "prediction log writer stopped after" in own_service.log()


def test_sigkill_then_restart_loses_nothing_acknowledged_and_serves_the_same(
    own_service, module_db
):
    own_service.start()
    probe = [feature_row(f"P{i % 5}", f"I{i}", seed=i) for i in range(100)]
    before = [
        (r["model_version"], r["alias"])
        for r in own_service.forecast(STEADY, probe).json()["predictions"]
    ]
    assert {v for v, _ in before} == {"1", "2"}
    clients = hammer(own_service, STEADY, "kill")
    own_service.kill()
    acknowledged = stop_clients(clients)
    assert_all_logged(module_db, STEADY, acknowledged)

    own_service.start()
    after = own_service.forecast(STEADY, probe)
    assert after.status_code == 200, after.text
    assert [(r["model_version"], r["alias"]) for r in after.json()["predictions"]] == before
    assert own_service.stop() == 0


# -- requests by key, and the whole v2 protocol for real clients ------------------------------


def day_rows(written: pd.DataFrame, day) -> pd.DataFrame:
    """Return STEADY's published rows of one day."""
    mine = (written["date"] == pd.Timestamp(day)) & (written["customer"] == STEADY)
    return written[mine].reset_index(drop=True)


def served_versions(service: ServingProcess, customer: str, version: str) -> None:
    set_route(service.app_db, customer, version)
    wait_for_versions(service, customer, [version])


def log_count(url: str, customer: str) -> int:
    with transaction(url) as cur:
        cur.execute("SELECT count(*) FROM prediction_log WHERE customer = %s", (customer,))
        return int(cur.fetchone()[0])


def test_requests_by_key_are_answered_from_the_published_history(service, boosters, published):
    _, publication, written = published
    served_versions(service, STEADY, "1")
    booster = boosters[(STEADY, "1")]
    latest = day_rows(written, publication.latest)
    keys = [
        {"store_id": s, "item_id": i, "date": publication.latest.isoformat()}
        for s, i in zip(latest["store_id"], latest["item_id"], strict=True)
    ]
    answer = service.forecast(STEADY, keys)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["predictions"]
    # the served features of a published day are its partition's: the same predictions
    assert np.allclose([r["prediction"] for r in rows], booster.predict(latest[MODEL_FEATURES]))
    assert {(r["reason"], tuple(r["defaulted"]), r["model_version"]) for r in rows} == {
        (None, (), "1")
    }

    ahead = [publication.latest + dt.timedelta(days=n) for n in range(1, 8)]
    week = [{"store_id": "S001", "item_id": "I0001", "date": d.isoformat()} for d in ahead]
    week.append({"store_id": DROPPED[0], "item_id": DROPPED[1], "price": 2.5})
    before = log_count(service.app_db, STEADY)
    answer = service.forecast(STEADY, week)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["predictions"]
    assert all(r["prediction"] is not None and r["reason"] is None for r in rows[:7])
    assert rows[0]["defaulted"] == ["price", "on_promo"] and rows[-1]["defaulted"] == ["on_promo"]
    assert rows[-1]["prediction"] is None and rows[-1]["model_version"] is None
    assert "no sales of this item at this store" in rows[-1]["reason"]
    assert rows[-1]["request_key"] == f"{DROPPED[0]}/{DROPPED[1]}/{ahead[0]}"
    assert log_count(service.app_db, STEADY) == before + 7  # the row without history: not served

    past = (ahead[-1] + dt.timedelta(days=1)).isoformat()
    earliest = publication.latest - dt.timedelta(days=6)  # the last published week is served
    refusals = {
        f"rows[1].date: past the horizon: the furthest forecastable date is {ahead[-1]}": {
            "store_id": "S001",
            "item_id": "I0001",
            "date": past,
        },
        "rows[1].store_id: unknown store": {"store_id": "S-secret-9", "item_id": "I0001"},
        "rows[1].item_id: unknown item": {"store_id": "S001", "item_id": "I-secret-4"},
        f"rows[1].date: before the days served: the earliest is {earliest}": {
            "store_id": "S001",
            "item_id": "I0001",
            "date": (earliest - dt.timedelta(days=1)).isoformat(),
        },
        "rows[1].price: out of range": {"store_id": "S001", "item_id": "I0001", "price": -3},
        "rows[1].on_promo: out of range": {"store_id": "S001", "item_id": "I0001", "on_promo": 3},
    }
    for reason, bad in refusals.items():
        refused = service.forecast(STEADY, [week[0], bad])
        assert refused.status_code == 422 and reason in refused.json()["detail"], refused.text
        assert "secret" not in refused.text
    assert log_count(service.app_db, STEADY) == before + 7  # nothing logged for a refusal


def test_a_week_ahead_is_forecast_from_what_training_computes_for_that_day(
    service, boosters, published
):
    """No training/serving skew at h = 7, through the running service.

    Once day latest + 7 is published, the asset computes its training row from the days up to
    it. A request by key for that day made 7 days earlier, with the day's own price and
    promotion, must get the same prediction from the same model: its features were the same.
    """
    _, publication, _ = published
    served_versions(service, STEADY, "1")
    booster = boosters[(STEADY, "1")]
    day = publication.latest + dt.timedelta(days=7)
    days = [day - dt.timedelta(days=back) for back in range(LOOKBACK_DAYS + 7, -1, -1)]
    sales = simulated_sales(KEYED_SPEC, days, DROPPED)  # the week to come, as it will land
    training = store_day_features(sales, [day], {STEADY: KEYED_SPEC.country})
    assert len(training) > 0 and training["rolling_mean_7"].notna().all()
    # promoted: the test model then reads rolling_mean_7 (0.3 x it), so a skew in it shows
    training["on_promo"] = True
    keys = [
        {
            "store_id": row.store_id,
            "item_id": row.item_id,
            "date": day.isoformat(),
            "price": float(row.price),
            "on_promo": bool(row.on_promo),
        }
        for row in training.itertuples()
    ]
    answer = service.forecast(STEADY, keys)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["predictions"]
    assert {(r["horizon_days"], r["defaulted"] == []) for r in rows} == {(7, True)}
    served = np.array([r["prediction"] for r in rows], dtype=float)
    assert np.allclose(served, booster.predict(training[MODEL_FEATURES]))
    # its intervals: day 7's width, scaled by each row's own forecast, and said so
    upper = np.array([r["upper_80"] for r in rows], dtype=float)
    assert np.allclose(upper - served, 0.25 * (served + 1.0))
    assert {r["interval_calibration"] for r in rows} == {"conformal, day ahead 7, x (forecast + 1)"}


def triton_inputs(http, columns: dict, binary: bool) -> list:
    inputs = []
    for name, (datatype, values) in columns.items():
        tensor = http.InferInput(name, list(values.shape), datatype)
        tensor.set_data_from_numpy(values, binary_data=binary)
        inputs.append(tensor)
    return inputs


def test_tritonclient_with_its_defaults_and_with_json(service, boosters, published):
    http = pytest.importorskip("tritonclient.http")
    from tritonclient.utils import InferenceServerException

    _, publication, written = published
    served_versions(service, STEADY, "1")
    latest = day_rows(written, publication.latest)
    count = len(latest)
    price = latest["price"].to_numpy(np.float32)
    columns = {
        "store_id": ("BYTES", latest["store_id"].to_numpy(object)),
        "item_id": ("BYTES", latest["item_id"].to_numpy(object)),
        "date": ("BYTES", np.array([publication.latest.isoformat().encode()] * count, object)),
        "price": ("FP32", price.reshape(count, 1)),
        "on_promo": ("INT32", latest["on_promo"].to_numpy(np.int32).reshape(count, 1)),
    }
    expected_rows = latest[MODEL_FEATURES].assign(price=price.astype(np.float64))
    expected = boosters[(STEADY, "1")].predict(expected_rows)

    def auth() -> dict[str, str]:  # a fresh dict a call: infer() adds its header to the one given
        return {"Authorization": f"Bearer {TOKEN}"}

    client = http.InferenceServerClient(url=f"127.0.0.1:{service.port}")
    try:
        metadata = client.get_server_metadata(headers=auth())
        assert "binary_tensor_data" in metadata["extensions"]
        # the defaults: binary inputs, and every output binary
        result = client.infer(
            STEADY, triton_inputs(http, columns, True), headers=auth(), request_id="t-1"
        )
        response = result.get_response()
        assert response["model_version"] == "1" and response["id"] == "t-1"
        assert all("binary_data_size" in o["parameters"] for o in response["outputs"])
        assert np.allclose(result.as_numpy("forecast"), expected)
        assert result.as_numpy("model_version").tolist() == [b"1"] * count
        assert result.as_numpy("non_finite").tolist() == [False] * count
        # JSON both ways
        outputs = [http.InferRequestedOutput(n, binary_data=False) for n in ("forecast", "alias")]
        result = client.infer(
            STEADY, triton_inputs(http, columns, False), outputs=outputs, headers=auth()
        )
        response = result.get_response()
        assert "parameters" not in response["outputs"][0] and response["id"]
        assert np.allclose(result.as_numpy("forecast"), expected)
        assert result.as_numpy("alias").tolist() == ["champion"] * count
        # rows with every feature, FP32, binary
        features = {
            name: ("FP32", latest[name].to_numpy(np.float32)) for name in MODEL_FEATURES
        } | {name: columns[name] for name in ("store_id", "item_id", "date")}
        result = client.infer(STEADY, triton_inputs(http, features, True), headers=auth())
        as_fp32 = latest[MODEL_FEATURES].astype(np.float32).astype(np.float64)
        assert np.allclose(result.as_numpy("forecast"), boosters[(STEADY, "1")].predict(as_fp32))
        # a pinned version is refused in the protocol's error shape, which the client reads
        with pytest.raises(InferenceServerException) as caught:
            client.infer(STEADY, triton_inputs(http, columns, True), "1", headers=auth())
        assert caught.value.status() == "404"
        assert "versioned paths are not served" in caught.value.message()
    finally:
        client.close()
    unknown = service.call("GET", f"/v2/models/{STEADY}/config")
    assert unknown.status_code == 404 and unknown.json() == {"error": "Not Found"}


def binary_body(header: dict, *tensors: bytes) -> tuple[bytes, int]:
    head = json.dumps(header).encode()
    return head + b"".join(tensors), len(head)


def test_binary_bodies_that_disagree_with_their_header_are_refused(service):
    before = log_count(service.app_db, STEADY)
    names = [b"S001", b"S002"]
    stores = b"".join(len(n).to_bytes(4, "little") + n for n in names)
    items = b"".join(len(n).to_bytes(4, "little") + n for n in (b"I0001", b"I0002"))

    def tensor(name: str, datatype: str, size: int, shape=(2,)) -> dict:
        return {
            "name": name,
            "datatype": datatype,
            "shape": list(shape),
            "parameters": {"binary_data_size": size},
        }

    def send(body: bytes, length: int):
        return service.call(
            "POST",
            f"/v2/models/{STEADY}/infer",
            data=body,
            headers={"Inference-Header-Content-Length": str(length)},
        )

    header = {
        "inputs": [
            tensor("store_id", "BYTES", len(stores)),
            tensor("item_id", "BYTES", len(items)),
            tensor("price", "FP32", 8),
        ]
    }
    price = np.array([1.5, 2.5], np.float32).tobytes()
    body, length = binary_body(header, stores, items, price)
    assert send(body, length).status_code == 200  # the well-formed one, for contrast
    answered = log_count(service.app_db, STEADY)
    assert answered == before + 2

    short, length = binary_body(header, stores, items, price[:4])
    response = send(short, length)
    assert response.status_code == 400
    assert "add up to" in response.json()["error"] and "carries" in response.json()["error"]
    response = send(body, len(body) + 1)
    assert response.status_code == 400 and "says the JSON header has" in response.json()["error"]
    header["inputs"][2] = tensor("price", "FP32", 12, shape=(3,))
    body, length = binary_body(header, stores, items, price + price[:4])
    response = send(body, length)
    assert response.status_code == 422, response.text
    assert "inputs[price]" in response.json()["error"] or "disagree" in response.json()["error"]
    header["inputs"][2] = tensor("price", "FP32", 4, shape=(2,))
    body, length = binary_body(header, stores, items, price[:4])
    response = send(body, length)
    assert response.status_code == 422
    assert "inputs[price]: binary_data_size is 4 bytes" in response.json()["error"]
    assert "1.5" not in response.text
    header["inputs"][2] = tensor("on_promo", "INT32", 8)
    body, length = binary_body(header, stores, items, np.array([0, 7], np.int32).tobytes())
    response = send(body, length)
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith("inputs[on_promo].data[1]: out of range")
    assert log_count(service.app_db, STEADY) == answered


# The Open Inference Protocol's REST schemas (kserve/open-inference-protocol, rest spec):
# $inference_response, $metadata_server_response, $metadata_model_response, $inference_error.
TENSOR = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer"}},
        "datatype": {"type": "string"},
        "parameters": {"type": "object"},
        "data": {"type": "array"},
    },
}
INFERENCE_RESPONSE = {
    "type": "object",
    "required": ["model_name", "outputs"],
    "properties": {
        "model_name": {"type": "string"},
        "model_version": {"type": "string"},
        "id": {"type": "string"},
        "parameters": {"type": "object"},
        "outputs": {"type": "array", "items": TENSOR},
    },
}
SERVER_METADATA = {
    "type": "object",
    "required": ["name", "version", "extensions"],
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "extensions": {"type": "array", "items": {"type": "string"}},
    },
}
MODEL_METADATA = {
    "type": "object",
    "required": ["name", "platform", "inputs", "outputs"],
    "properties": {
        "name": {"type": "string"},
        "versions": {"type": "array", "items": {"type": "string"}},
        "platform": {"type": "string"},
        "inputs": {"type": "array", "items": TENSOR},
        "outputs": {"type": "array", "items": TENSOR},
    },
}
ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}


def test_a_plain_client_gets_the_published_v2_json_shapes(service, published):
    jsonschema = pytest.importorskip("jsonschema")
    _, publication, _ = published
    served_versions(service, STEADY, "1")
    jsonschema.validate(service.call("GET", "/v2").json(), SERVER_METADATA)
    jsonschema.validate(service.call("GET", f"/v2/models/{STEADY}").json(), MODEL_METADATA)
    body = {
        "inputs": [
            {
                "name": "store_id",
                "datatype": "BYTES",
                "shape": [2, 1],
                "data": [["S001"], ["S002"]],
            },
            {"name": "item_id", "datatype": "BYTES", "shape": [2], "data": ["I0001", "I0002"]},
            {"name": "on_promo", "datatype": "BOOL", "shape": [2], "data": [True, False]},
        ]
    }
    response = service.call("POST", f"/v2/models/{STEADY}/infer", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    jsonschema.validate(answer, INFERENCE_RESPONSE)
    assert answer["model_version"] == "1" and len(answer["id"]) == 32  # made up: none was sent
    outputs = {o["name"]: o["data"] for o in answer["outputs"]}
    next_day = (publication.latest + dt.timedelta(days=1)).isoformat()
    assert outputs["request_key"] == [f"S001/I0001/{next_day}", f"S002/I0002/{next_day}"]
    assert outputs["on_promo_used"] == [1.0, 0.0] and outputs["defaulted"] == ["price"] * 2
    refused = service.call("POST", f"/v2/models/{STEADY}/infer", json={"inputs": []})
    assert refused.status_code == 422
    jsonschema.validate(refused.json(), ERROR)


README = Path(__file__).resolve().parents[2] / "README.md"
README_MARKER = "Ask for a forecast by store, item and day"


def readme_example() -> str:
    """Return the shell block that follows the README's forecast sentence, as written."""
    text = README.read_text()
    after = text[text.index(README_MARKER) :]
    start = after.index("```\n") + 4
    return after[start : after.index("```", start)]


def test_the_readme_example_works_verbatim_from_a_second_terminal(
    service, boosters, published, tmp_path
):
    _, publication, _ = published
    version = next(v for (c, v) in boosters if c == README_SPEC.name)
    served_versions(service, README_SPEC.name, version)
    clone = tmp_path / "clone"  # a clone's folder: its venv, and `up`'s default home in it
    clone.mkdir()
    (clone / ".venv").symlink_to(README.parent / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRAIN_", "MLFLOW_"))}
    env |= {"RETRAIN_SERVE_TOKEN": TOKEN, "RETRAIN_GPU_TOKEN": "gpu"}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RETRAIN_HOME", raising=False)
        patch.chdir(clone)
        write_token_files(env)  # what `make up` run in the clone does
    assert (clone / ".retrain" / "tokens" / "serve").exists()
    # a second terminal in the clone: no token, no RETRAIN_HOME; the service on `up`'s port
    del env["RETRAIN_SERVE_TOKEN"], env["RETRAIN_GPU_TOKEN"]
    env |= {"RETRAIN_SERVE_PORT": str(service.port)}
    done = subprocess.run(
        ["bash", "-c", readme_example()],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["predictions"]
    next_day = publication.latest + dt.timedelta(days=1)
    assert row["request_key"] == f"S001/I0001/{next_day}" and row["prediction"] is not None
    assert row["model_version"] == version and row["defaulted"] == ["price", "on_promo"]
    # README: its model was registered without intervals, so null bounds and a note say why
    assert row["lower_80"] is None and row["upper_95"] is None
    assert "carries no prediction intervals" in row["interval_note"]


def logged_bounds(url: str, answered: list[dict], served: bool = True) -> dict:
    """Return request key -> (alias, intervals) of the newest logged rows of these keys."""
    keys = [row["request_key"] for row in answered]
    with transaction(url) as cur:
        cur.execute(
            "SELECT DISTINCT ON (request_key) request_key, alias, intervals FROM prediction_log "
            "WHERE customer = %s AND request_key = ANY(%s) AND served = %s "
            "ORDER BY request_key, id DESC",
            (LEVELS, keys, served),
        )
        return {key: (alias, bounds) for key, alias, bounds in cur.fetchall()}


def test_intervals_on_both_routes_in_binary_and_json_and_an_old_canary_says_why(service, boosters):
    http = pytest.importorskip("tritonclient.http")
    served_versions(service, LEVELS, "1")
    rows = [feature_row("S1", f"I{i}", seed=i) for i in range(6)]
    expected = boosters[(LEVELS, "1")].predict(pd.DataFrame(rows)[MODEL_FEATURES])
    low80, high80 = np.maximum(expected - 3.0, 0), expected + 3.0
    low95, high95 = np.maximum(expected - 7.5, 0), expected + 7.5

    answered = service.forecast(LEVELS, rows).json()["predictions"]
    assert np.allclose([r["lower_80"] for r in answered], low80)
    assert np.allclose([r["upper_95"] for r in answered], high95)
    assert {r["interval_note"] for r in answered} == {None}
    kept = logged_bounds(service.app_db, answered)  # the log keeps what was answered
    assert {a for a, _ in kept.values()} == {"champion"}
    for row in answered:
        bounds = kept[row["request_key"]][1]
        assert bounds["80"] == pytest.approx([row["lower_80"], row["upper_80"]])
        assert bounds["95"] == pytest.approx([row["lower_95"], row["upper_95"]])
    outputs = service.call("GET", f"/v2/models/{LEVELS}").json()["outputs"]
    assert [o["name"] for o in outputs][-6:] == [
        "lower_80",
        "upper_80",
        "lower_95",
        "upper_95",
        "interval_note",
        "interval_calibration",
    ]
    infer = service.call("POST", f"/v2/models/{LEVELS}/infer", json=v2_request(rows)).json()
    by_name = {o["name"]: o["data"] for o in infer["outputs"]}
    assert np.allclose(by_name["upper_80"], high80) and by_name["interval_note"] == [""] * 6

    columns = {
        name: ("BYTES", np.array([r[name].encode() for r in rows], object))
        for name in ("store_id", "item_id", "date")
    } | {name: ("FP64", np.array([r[name] for r in rows])) for name in MODEL_FEATURES}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    client = http.InferenceServerClient(url=f"127.0.0.1:{service.port}")
    try:
        result = client.infer(LEVELS, triton_inputs(http, columns, True), headers=dict(auth))
        assert all("binary_data_size" in o["parameters"] for o in result.get_response()["outputs"])
        assert np.allclose(result.as_numpy("lower_80"), low80)
        assert np.allclose(result.as_numpy("lower_95"), low95)
        assert np.allclose(result.as_numpy("upper_95"), high95)
        assert result.as_numpy("interval_note").tolist() == [b""] * 6
        # the version logged before intervals existed, as a canary taking every row
        set_route(service.app_db, LEVELS, "1", "2", 1.0, 7, "CANARY_100")
        wait_for_versions(service, LEVELS, ["1", "2"])
        wanted = [
            http.InferRequestedOutput(name, binary_data=name != "alias")
            for name in ("forecast", "upper_80", "interval_note", "alias")
        ]
        result = client.infer(
            LEVELS, triton_inputs(http, columns, False), outputs=wanted, headers=dict(auth)
        )
        assert result.as_numpy("alias").tolist() == ["canary"] * 6
        assert np.isnan(result.as_numpy("upper_80")).all()
        assert np.isfinite(result.as_numpy("forecast")).all()
        note = result.as_numpy("interval_note")[0].decode()
        assert note == (
            f"model version 2 of {LEVELS} carries no prediction intervals "
            "(logged before its trainer computed them)"
        )
        plain = service.forecast(LEVELS, rows).json()["predictions"]
        assert {(r["lower_95"], r["interval_note"]) for r in plain} == {(None, note)}
        kept = logged_bounds(service.app_db, plain, served=False)  # the champion's shadows
        assert all(bounds["80"] for _, bounds in kept.values())
        assert {b for _, b in logged_bounds(service.app_db, plain).values()} == {None}
    finally:
        client.close()
        served_versions(service, LEVELS, "1")


def test_past_the_history_bound_the_least_recent_table_is_dropped_and_rebuilt(
    module_db, mlflow_uri, boosters, published, tmp_path
):
    """RETRAIN_SERVE_MAX_HISTORY_MB below one table: each customer asked evicts the other."""
    readme_version = next(v for (c, v) in boosters if c == README_SPEC.name)
    set_route(module_db, STEADY, "1")
    set_route(module_db, README_SPEC.name, readme_version)
    process = ServingProcess(
        module_db,
        mlflow_uri,
        tmp_path,
        extra_env={"RETRAIN_STORAGE_URL": published[0], "RETRAIN_SERVE_MAX_HISTORY_MB": "0.001"},
    )
    process.start()
    try:
        row = [{"store_id": "S001", "item_id": "I0001"}]
        for customer in (STEADY, README_SPEC.name, STEADY):
            answer = process.forecast(customer, row)
            assert answer.status_code == 200, answer.text
            assert answer.json()["predictions"][0]["prediction"] is not None
        lines = process.log().splitlines()
        dropped = [line for line in lines if "dropped: over the memory bound" in line]
        assert [STEADY in line for line in dropped] == [True, False], dropped
        assert README_SPEC.name in dropped[1]
    finally:
        assert process.stop() == 0, process.log()


def test_a_new_published_day_moves_the_horizon_and_requests_read_no_files(service, published):
    """The tables are held in memory (no Parquet read per request) and rebuilt on publication.

    Runs last in the module: it publishes a day, then withdraws it, so the horizon is back.
    """
    storage, publication, _ = published
    served_versions(service, STEADY, "1")
    furthest = publication.latest + dt.timedelta(days=7)

    def ask(day: dt.date):
        row = {"store_id": "S001", "item_id": "I0001", "date": day.isoformat()}
        return service.forecast(STEADY, [row])

    assert ask(furthest).status_code == 200
    files = Path(storage) / "store_day_features"
    hidden = files.with_name("hidden")
    files.rename(hidden)
    try:  # the published files gone: requests are answered from memory all the same
        for n in range(1, 8):
            answer = ask(publication.latest + dt.timedelta(days=n))
            assert answer.status_code == 200, answer.text
    finally:
        hidden.rename(files)
    later = ask(furthest + dt.timedelta(days=1))
    assert later.status_code == 422 and f"forecastable date is {furthest}" in later.text

    day = publication.latest + dt.timedelta(days=1)
    publish(
        ParquetPartitionStore(storage),
        KEYED_SPEC,
        latest=day,
        days=1,
        drop=DROPPED,
        db_url=service.app_db,
        others=(README_SPEC,),
    )
    try:
        wait_until(
            lambda: ask(furthest + dt.timedelta(days=1)).status_code == 200,
            30,
            "the service to take the newly published day",
            interval=0.2,
        )
        answer = ask(day).json()["predictions"][0]
        assert answer["defaulted"] == [] and answer["prediction"] is not None  # now published
    finally:
        with transaction(service.app_db) as cur:
            cur.execute("DELETE FROM feature_snapshots WHERE partition_date = %s", (day,))
    wait_until(
        lambda: ask(furthest + dt.timedelta(days=1)).status_code == 422,
        30,
        "the withdrawn day to be dropped",
        interval=0.2,
    )
