"""The prediction service's HTTP API: Open Inference Protocol (v2) paths and a JSON route.

- `GET /v2/health/live`, `GET /v2/health/ready` (no token): ready once the route table has
  been read, its latest read answered and the log writer runs; 503 otherwise.
- `GET /v2` (server metadata), `GET /v2/models/{customer}` (model metadata),
  `GET /v2/models/{customer}/ready`, `POST /v2/models/{customer}/infer`.
- `POST /forecast/{customer}` with `{"rows": [...]}`: the same predictions as plain JSON.

Bodies are read by hand (not declared as pydantic models): the rows are checked column by
column, each problem named without echoing the input, and the body is parsed in a worker
thread with the prediction, so a large batch never blocks the event loop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from starlette.concurrency import run_in_threadpool

from retrain_assets.serving.guard import RequestGuard, error_body
from retrain_assets.serving.inputs import (
    MODEL_FEATURES,
    InvalidRequest,
    parse_json,
    rows_batch,
    v2_batch,
    v2_inputs,
)
from retrain_assets.serving.prediction_log import PredictionLogWriter
from retrain_assets.serving.predictor import Predictor, ServingError
from retrain_assets.serving.protocol import (
    check_outputs,
    infer_response,
    model_metadata,
    rows_response,
)
from retrain_assets.serving.routes import RouteRefresher

SERVER_NAME = "retrain_assets prediction service"
# Enforced by RequestGuard before the body is read; declared here only so the OpenAPI document
# (and its /docs page) shows which paths need the bearer token.
_DOCUMENTED_TOKEN = [Depends(HTTPBearer(auto_error=False, description="RETRAIN_SERVE_TOKEN"))]
OPEN_PATHS = frozenset({"/v2/health/live", "/v2/health/ready", "/openapi.json", "/docs"})
ROW_BYTES_ALLOWANCE = 1024
BINARY_REFUSED = (
    "binary tensor data (the Inference-Header-Content-Length extension) is not supported: "
    "send the tensors as JSON (tritonclient: binary_data=False)"
)


def max_body_bytes(max_rows: int) -> int:
    """Return the body size limit for `max_rows` rows: 1 KiB a row plus 64 KiB of slack."""
    return max_rows * ROW_BYTES_ALLOWANCE + 65536


def _json(content: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(content).encode(), status_code=status, media_type="application/json")


def _feature_schema() -> dict[str, Any]:
    row = {
        "type": "object",
        "required": ["store_id", "item_id", "date", *MODEL_FEATURES],
        "properties": {
            "store_id": {"type": "string"},
            "item_id": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            **{name: {"type": ["number", "null"]} for name in MODEL_FEATURES},
        },
    }
    return {
        "type": "object",
        "required": ["rows"],
        "properties": {"rows": {"type": "array", "items": row}},
    }


def _infer_schema() -> dict[str, Any]:
    tensor = {
        "type": "object",
        "required": ["name", "shape", "datatype", "data"],
        "properties": {
            "name": {"enum": [name for name, _ in v2_inputs()]},
            "shape": {"type": "array", "items": {"type": "integer"}},
            "datatype": {"type": "string"},
            "data": {"type": "array"},
        },
    }
    return {
        "type": "object",
        "required": ["inputs"],
        "properties": {
            "id": {"type": "string"},
            "inputs": {"type": "array", "items": tensor},
            "outputs": {"type": "array", "items": {"type": "object"}},
        },
    }


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def create_app(
    predictor: Predictor,
    refresher: RouteRefresher,
    log: PredictionLogWriter,
    token: str,
    max_rows: int,
) -> FastAPI:
    """Return the service's app; its lifespan runs the route refresher and the log writer.

    On shutdown (after uvicorn has finished the requests in flight) the refresher stops and
    the log writer commits everything queued before the process exits.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        log.start()
        refresher.start()
        try:
            yield
        finally:
            await run_in_threadpool(refresher.stop)
            await run_in_threadpool(log.close)

    app = FastAPI(
        title=SERVER_NAME,
        version="1",
        description="Every customer's demand model: champion and canary split by request key.",
        lifespan=lifespan,
        redoc_url=None,
    )
    app.add_middleware(
        RequestGuard,
        token=token,
        max_body_bytes=max_body_bytes(max_rows),
        open_paths=OPEN_PATHS,
    )

    @app.exception_handler(ServingError)
    @app.exception_handler(InvalidRequest)
    async def refused(request: Request, error: Exception) -> JSONResponse:
        status = getattr(error, "status", 500)
        message = getattr(error, "message", str(error))
        return JSONResponse(error_body(request.url.path, message), status_code=status)

    async def answer(work: Callable[[bytes], dict[str, Any]], request: Request) -> Response:
        raw = await request.body()
        return await run_in_threadpool(lambda: _json(work(raw)))  # off the event loop

    @app.get("/v2/health/live", tags=["health"])
    def live() -> dict[str, bool]:
        """Answer while the process runs."""
        return {"live": True}

    @app.get("/v2/health/ready", tags=["health"])
    def ready() -> Response:
        """Answer 200 once routes are read and Postgres answers; 503 with the reason before."""
        reasons = []
        if not refresher.table.loaded:
            reasons.append("the route table has not been read yet")
        if refresher.last_error:
            reasons.append(f"serving_routes cannot be read: {refresher.last_error}")
        if not log.alive():
            reasons.append("the prediction log writer is not running")
        if reasons:
            return _json({"ready": False, "reason": "; ".join(reasons)}, 503)
        return _json({"ready": True})

    @app.get("/v2", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def server_metadata() -> dict[str, Any]:
        """Return the server's name, version and protocol extensions (none)."""
        return {"name": SERVER_NAME, "version": "1", "extensions": []}

    @app.get("/v2/models/{customer}", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def metadata(customer: str) -> Response:
        """Return the customer's model: versions served, inputs, outputs and the traffic split."""
        return _json(model_metadata(predictor.route(customer)))

    @app.get("/v2/models/{customer}/ready", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def model_ready(customer: str) -> dict[str, Any]:
        """Answer 200 when the customer has a champion to serve (404/409 with the reason)."""
        route = predictor.route(customer)
        return {"name": customer, "ready": True, "versions": route.versions()}

    @app.post(
        "/v2/models/{customer}/infer",
        tags=["v2"],
        openapi_extra=_body(_infer_schema()),
        dependencies=_DOCUMENTED_TOKEN,
    )
    async def infer(customer: str, request: Request) -> Response:
        """Predict a batch sent as v2 tensors; outputs forecast, model_version, alias, ..."""
        binary = "inference-header-content-length" in request.headers

        def work(raw: bytes) -> dict[str, Any]:
            predictor.route(customer)  # an unknown customer is a 404 before any body check
            if binary:
                raise InvalidRequest(422, BINARY_REFUSED)
            parsed = v2_batch(parse_json(raw), max_rows)
            check_outputs(parsed.outputs)
            forecast = predictor.forecast(customer, parsed.batch)
            return infer_response(forecast, parsed.request_id, parsed.outputs)

        return await answer(work, request)

    @app.post(
        "/forecast/{customer}",
        tags=["json"],
        openapi_extra=_body(_feature_schema()),
        dependencies=_DOCUMENTED_TOKEN,
    )
    async def forecast(customer: str, request: Request) -> Response:
        """Predict `{"rows": [...]}`: per row its request key, prediction, version and alias."""

        def work(raw: bytes) -> dict[str, Any]:
            predictor.route(customer)
            return rows_response(
                predictor.forecast(customer, rows_batch(parse_json(raw), max_rows))
            )

        return await answer(work, request)

    return app
