"""The real prediction service process against the real Postgres and MLflow server."""

from __future__ import annotations

import json
import select
import socket
import uuid
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.serving.routing import bucket
from retrain_assets.store.database import transaction
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets_tests.serving.models import feature_frame, train
from retrain_assets_tests.serving.serving_process import (
    TOKEN,
    Client,
    ServingProcess,
    feature_row,
)
from retrain_assets_tests.support.waiting import patience, wait_until

pytestmark = pytest.mark.system
MAX_ROWS = 500
SUFFIX = uuid.uuid4().hex[:6]
STEADY, MOVING, BROKEN, NO_CHAMPION = (
    f"{n}-{SUFFIX}" for n in ("steady", "moving", "broken", "new")
)


@pytest.fixture(scope="module")
def module_db(pg_server: PostgresServer) -> str:
    """A migrated project database shared by this module's service processes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
        url = ensure_database(pg_server, "app")
    migrate(url)
    return url


def register(registry: MlflowRegistry, customer: str, booster) -> str:
    run_key = uuid.uuid4().hex[:16]
    run_id = registry.candidate_run(customer, run_key)
    example = feature_frame(
        5, extra=tuple(n for n in booster.feature_name() if n not in MODEL_FEATURES)
    )
    registry.log_candidate(run_id, booster, {"holdout_wape": 0.1}, example)
    return registry.register(customer, run_key, run_id)


@pytest.fixture(scope="module")
def boosters(mlflow_uri: str) -> dict[tuple[str, str], object]:
    """Registered versions: (customer, version) -> the booster logged as that version."""
    registry = MlflowRegistry(mlflow_uri)
    made = {}
    for customer in (STEADY, MOVING):
        for scale, offset in ((1.0, 0.0), (2.0, 100.0)):
            booster = train(scale, offset)
            made[(customer, register(registry, customer, booster))] = booster
    broken = train(1.0, 0.0, ("weather",))
    made[(BROKEN, register(registry, BROKEN, broken))] = broken
    return made


def set_route(url, customer, champion, canary=None, weight=0.0, rollout=None, step=None):
    with transaction(url) as cur:
        cur.execute(
            "INSERT INTO serving_routes (customer, champion_version, canary_version, "
            "canary_weight, rollout_id, step) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (customer) DO UPDATE SET champion_version = EXCLUDED.champion_version, "
            "canary_version = EXCLUDED.canary_version, canary_weight = EXCLUDED.canary_weight, "
            "rollout_id = EXCLUDED.rollout_id, step = EXCLUDED.step, "
            "updated_at = clock_timestamp()",
            (customer, champion, canary, weight, rollout, step),
        )


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
def service(module_db, mlflow_uri, boosters, tmp_path_factory) -> Iterator[ServingProcess]:
    """One service process for the module (routes, routing, validation)."""
    set_route(module_db, STEADY, "1")
    set_route(module_db, MOVING, "1")
    set_route(module_db, BROKEN, "1")
    set_route(module_db, NO_CHAMPION, None)
    process = ServingProcess(
        module_db,
        mlflow_uri,
        tmp_path_factory.mktemp("serve"),
        extra_env={"RETRAIN_SERVE_MAX_ROWS": str(MAX_ROWS), "RETRAIN_SERVE_MAX_MODELS": "3"},
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
    assert [r["request_key"] for r in answered] == [f"S1/I{i}/2026-03-01" for i in range(5)]
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


def test_bad_input_is_refused_with_its_status_and_reason(service, module_db):
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
    binary = service.call(
        "POST",
        f"/v2/models/{STEADY}/infer",
        json=v2_request(good),
        headers={"Inference-Header-Content-Length": "100"},
    )
    refused(binary, 422, "binary tensor data")
    refused(service.forecast(STEADY, good, token=None), 401, "missing or wrong bearer token")
    refused(service.forecast(STEADY, good, token="dev-token"), 401, "bearer token")
    secret = {**good[0], "price": "secret-price-417"}
    response = service.forecast(STEADY, [secret])
    refused(response, 422, "rows[0].price: must be a number")
    assert "secret-price-417" not in response.text

    failed = service.forecast(BROKEN, good)
    refused(failed, 500, "needs feature(s) weather")
    (row,) = logged(module_db, BROKEN)
    assert row[0] == "B1/I1/2026-03-01" and row[4] is None and "weather" in row[5]


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
def own_service(module_db, mlflow_uri, boosters, tmp_path) -> Iterator[ServingProcess]:
    """A service process of the test's own, to stop and kill."""
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
