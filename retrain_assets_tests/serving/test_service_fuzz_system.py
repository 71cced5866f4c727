"""Fuzzing the real prediction service process: never a 5xx, whatever the body.

schemathesis generates requests from the service's own OpenAPI document (valid ones, and
invalid ones from the same models), for both inference paths; hypothesis generates binary
tensor bodies (header and tensors, then mutated bytes, wrong sizes, shapes and datatypes). The
customer is real: a champion and a published history, so valid requests reach the model.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets_tests.serving.models import train
from retrain_assets_tests.serving.published import publish
from retrain_assets_tests.serving.serving_process import TOKEN, ServingProcess
from retrain_assets_tests.serving.versions_and_routes import register, set_route

pytestmark = pytest.mark.system
CUSTOMER = f"fuzz-{uuid.uuid4().hex[:6]}"
SPEC = TenantSpec(CUSTOMER, "US", stores=2, items=3, seed=7)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PATHS = ("/forecast/{customer}", "/v2/models/{customer}/infer")
EXAMPLES = 60  # per path and mode: the four runs and the binary one take ~30 s together
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def service(
    pg_server: PostgresServer, mlflow_uri: str, tmp_path_factory
) -> Iterator[ServingProcess]:
    """The real `retrain-assets serve`, its customer with a champion and a published history."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
        url = ensure_database(pg_server, "app")
    migrate(url)
    storage = str(tmp_path_factory.mktemp("storage"))
    publish(ParquetPartitionStore(storage), SPEC, db_url=url)
    set_route(url, CUSTOMER, register(MlflowRegistry(mlflow_uri), CUSTOMER, train(1.0, 0.0)))
    process = ServingProcess(
        url,
        mlflow_uri,
        tmp_path_factory.mktemp("serve"),
        extra_env={"RETRAIN_SERVE_MAX_ROWS": "50", "RETRAIN_STORAGE_URL": storage},
    )
    process.start()
    try:
        yield process
    finally:
        assert process.stop() == 0, process.log()


def answered_in_its_shape(path: str, response: requests.Response) -> None:
    """Fail on a 5xx, and on a refusal that is not the path's error shape naming a reason."""
    assert response.status_code < 500, f"{response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        key = "error" if path.startswith("/v2") else "detail"
        body = response.json()
        assert set(body) == {key} and isinstance(body[key], str) and body[key], body


def test_the_openapi_document_describes_every_form(service):
    document = service.call("GET", "/openapi.json", token=None).json()
    forecast = document["paths"]["/forecast/{customer}"]["post"]["requestBody"]["content"]
    refs = {
        one["$ref"].rsplit("/", 1)[1] for one in forecast["application/json"]["schema"]["anyOf"]
    }
    assert refs == {"KeyRowsRequest", "FeatureRowsRequest"}
    infer = document["paths"]["/v2/models/{customer}/infer"]["post"]
    assert set(infer["requestBody"]["content"]) == {"application/json", "application/octet-stream"}
    assert infer["parameters"][-1]["name"] == "Inference-Header-Content-Length"
    schemas = document["components"]["schemas"]
    for model in ("KeyRow", "FeatureRow", "InferenceRequest", "InputTensor"):
        assert schemas[model]["additionalProperties"] is False, model


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
)
def test_schemathesis_from_the_document_never_gets_a_5xx(service, path, mode):
    schema = schemathesis.openapi.from_url(f"{service.url}/openapi.json")
    operation = schema[path]["POST"]
    strategy = operation.as_strategy(
        generation_mode=mode, path_parameters={"customer": CUSTOMER}, headers=dict(AUTH)
    )
    statuses: dict[int, int] = {}

    @FUZZ
    @given(strategy)
    def call(case) -> None:
        case.path_parameters = {"customer": CUSTOMER}
        case.headers = {**(case.headers or {}), **AUTH}
        response = case.call(base_url=service.url, timeout=30)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        case.validate_response(response, checks=[not_a_server_error])
        assert response.status_code < 500, response.text[:500]
        if response.status_code >= 400 and response.status_code != 404:
            body = response.json()
            key = "error" if path.startswith("/v2") else "detail"
            assert set(body) == {key} and body[key], body

    call()
    assert sum(statuses.values()) >= EXAMPLES // 2, statuses
    if mode is schemathesis.GenerationMode.POSITIVE and path.startswith("/forecast"):
        assert statuses.get(200, 0) + statuses.get(422, 0) > 0, statuses


def strings(values: list[bytes]) -> bytes:
    return b"".join(len(v).to_bytes(4, "little") + v for v in values)


@st.composite
def binary_requests(draw) -> tuple[bytes, str]:
    """A binary v2 request by key for the customer's stores, then maybe broken on purpose."""
    rows = draw(st.integers(1, 4))
    stores = [draw(st.sampled_from([b"S001", b"S002", b"S\xff", b""])) for _ in range(rows)]
    items = [draw(st.sampled_from([b"I0001", b"I0002", b"I/1"])) for _ in range(rows)]
    tensors = [("store_id", "BYTES", strings(stores)), ("item_id", "BYTES", strings(items))]
    numeric = st.sampled_from(["FP64", "FP32", "FP16", "INT32", "BOOL", "UINT8", "BYTES", "FP8"])
    for name in draw(st.sets(st.sampled_from(["price", "on_promo", "date", "lag_7"]))):
        datatype = draw(numeric)
        tensors.append((name, datatype, draw(st.binary(max_size=8 * rows + 4))))
    header = {
        "id": draw(st.text(max_size=8)),
        "inputs": [
            {
                "name": name,
                "datatype": datatype,
                "shape": draw(st.sampled_from([[rows], [rows, 1], [rows + 1], [rows, 3]])),
                "parameters": {"binary_data_size": len(data)},
            }
            for name, datatype, data in tensors
        ],
        "parameters": {"binary_data_output": draw(st.booleans())},
    }
    head = json.dumps(header).encode()
    body = bytearray(head + b"".join(data for _, _, data in tensors))
    for at, byte in draw(
        st.lists(st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)), max_size=3)
    ):
        body[at] = byte
    length = draw(st.sampled_from([len(head), len(head) + 1, len(head) - 1, len(body) + 5]))
    return bytes(body), str(length)


def test_hypothesis_binary_bodies_never_get_a_5xx(service):
    session = requests.Session()
    statuses: dict[int, int] = {}

    @FUZZ
    @given(binary_requests())
    def call(request: tuple[bytes, str]) -> None:
        body, length = request
        response = session.post(
            f"{service.url}/v2/models/{CUSTOMER}/infer",
            data=body,
            headers={**AUTH, "Inference-Header-Content-Length": length},
            timeout=30,
        )
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code != 200:
            answered_in_its_shape("/v2", response)

    call()
    assert set(statuses) <= {200, 400, 422}, statuses
