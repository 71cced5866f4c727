"""The prediction service's HTTP API: Open Inference Protocol (v2) paths and a JSON route.

- `GET /v2/health/live`, `GET /v2/health/ready` (no token): ready once the route table and
  the published days (which days are served) have been read, the routes' latest read
  answered and the log writer runs; 503 otherwise.
- `GET /v2` (server metadata), `GET /v2/models/{customer}` (model metadata),
  `GET /v2/models/{customer}/ready`, `POST /v2/models/{customer}/infer`.
- `POST /forecast/{customer}` with `{"rows": [...]}`: the same predictions as plain JSON.

Both take rows with every feature, or rows by key (store, item, date, optional price and
promotion) whose features the service computes from the published history (serving.history,
serving.key_lookup); in either, every row's date must be a day served (the last published
week up to the furthest forecastable day; 422 naming the row otherwise). The v2 path speaks
the binary tensor data extension both ways (serving.binary_tensors).

Bodies are read by hand, not by FastAPI: strictly decoded JSON (serving.strict_json), then
one request schema for every form (serving.request_schema), each problem named by its path
without echoing the input, in a worker thread with the prediction, so a large batch never
blocks the event loop. The OpenAPI document at /openapi.json describes those same models
(serving.openapi_document).
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
from starlette.exceptions import HTTPException

from retrain_assets.serving.binary_tensors import HEADER, decode_request, encode_response
from retrain_assets.serving.guard import RequestGuard, error_body
from retrain_assets.serving.history import HistoryCache, HistoryUnavailable, PublicationWatcher
from retrain_assets.serving.inputs import (
    FeatureBatch,
    InvalidRequest,
    KeyBatch,
    infer_request,
    inference_request,
    rows_batch,
)
from retrain_assets.serving.key_lookup import features_by_key, served_rows
from retrain_assets.serving.openapi_document import (
    FORECAST_RESPONSES,
    INFER_RESPONSES,
    forecast_body,
    infer_body,
    install,
)
from retrain_assets.serving.prediction_log import PredictionLogWriter
from retrain_assets.serving.predictor import Predictor, ServingError
from retrain_assets.serving.protocol import (
    check_outputs,
    infer_response,
    model_metadata,
    rows_response,
    v2_outputs,
)
from retrain_assets.serving.routes import RouteRefresher
from retrain_assets.serving.strict_json import parse_json

SERVER_NAME = "retrain_assets prediction service"
# Enforced by RequestGuard before the body is read; declared here only so the OpenAPI document
# (and its /docs page) shows which paths need the bearer token.
_DOCUMENTED_TOKEN = [Depends(HTTPBearer(auto_error=False, description="RETRAIN_SERVE_TOKEN"))]
OPEN_PATHS = frozenset({"/v2/health/live", "/v2/health/ready", "/openapi.json", "/docs"})
ROW_BYTES_ALLOWANCE = 1024
EXTENSIONS = ["binary_tensor_data"]
UNVERSIONED = (
    "versioned paths are not served: which version answers a row is the route's (champion "
    "or canary); call /v2/models/<customer>/infer without a version, its answer's "
    "model_version names the version that served"
)


def max_body_bytes(max_rows: int) -> int:
    """Return the body size limit for `max_rows` rows: 1 KiB a row plus 64 KiB of slack."""
    return max_rows * ROW_BYTES_ALLOWANCE + 65536


def _json(content: dict[str, Any], status: int = 200) -> Response:
    return Response(json.dumps(content).encode(), status_code=status, media_type="application/json")


def create_app(
    predictor: Predictor,
    refresher: RouteRefresher,
    log: PredictionLogWriter,
    token: str,
    max_rows: int,
    history: HistoryCache,
    watcher: PublicationWatcher | None = None,
) -> FastAPI:
    """Return the service's app; its lifespan runs the refreshers and the log writer.

    On shutdown (after uvicorn has finished the requests in flight) the refresher stops and
    the log writer commits everything queued before the process exits.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        log.start()
        refresher.start()
        if watcher is not None:
            watcher.start()
        try:
            yield
        finally:
            if watcher is not None:
                await run_in_threadpool(watcher.stop)
            await run_in_threadpool(refresher.stop)
            await run_in_threadpool(log.close)

    app = FastAPI(
        title=SERVER_NAME,
        version="1",
        description="Every customer's demand model: champion and canary split by request key.",
        lifespan=lifespan,
        redoc_url=None,
    )
    install(app)
    app.add_middleware(
        RequestGuard,
        token=token,
        max_body_bytes=max_body_bytes(max_rows),
        open_paths=OPEN_PATHS,
    )

    def features(customer: str, batch: FeatureBatch | KeyBatch) -> FeatureBatch:
        """Return the rows' features, every date checked against the days served."""
        if isinstance(batch, FeatureBatch):
            try:
                publication = history.current()
            except HistoryUnavailable as error:
                raise ServingError(503, f"the days served are not known now: {error}") from error
            return served_rows(publication, batch)
        try:
            table = history.get(customer)
        except HistoryUnavailable as error:
            raise ServingError(503, f"features cannot be computed now: {error}") from error
        return features_by_key(table, batch)

    @app.exception_handler(ServingError)
    @app.exception_handler(InvalidRequest)
    async def refused(request: Request, error: Exception) -> JSONResponse:
        status = getattr(error, "status", 500)
        message = getattr(error, "message", str(error))
        return JSONResponse(error_body(request.url.path, message), status_code=status)

    @app.exception_handler(HTTPException)
    async def framework_refusal(request: Request, error: HTTPException) -> JSONResponse:
        """Answer an unknown path or method in the protocol's error shape on /v2 paths."""
        body = error_body(request.url.path, str(error.detail))
        return JSONResponse(body, status_code=error.status_code, headers=error.headers)

    async def answer(work: Callable[[bytes], dict[str, Any]], request: Request) -> Response:
        raw = await request.body()
        return await run_in_threadpool(lambda: _json(work(raw)))  # off the event loop

    @app.get("/v2/health/live", tags=["health"])
    def live() -> dict[str, bool]:
        """Answer while the process runs."""
        return {"live": True}

    @app.get("/v2/health/ready", tags=["health"])
    def ready() -> Response:
        """Answer 200 once routes and published days are read and Postgres answers; else 503."""
        reasons = []
        if not refresher.table.loaded:
            reasons.append("the route table has not been read yet")
        if refresher.last_error:
            reasons.append(f"serving_routes cannot be read: {refresher.last_error}")
        if not log.alive():
            reasons.append("the prediction log writer is not running")
        if watcher is not None and not history.read_once:  # no date can be checked before
            reasons.append("feature_snapshots has not been read yet")
        if reasons:
            return _json({"ready": False, "reason": "; ".join(reasons)}, 503)
        return _json({"ready": True})

    @app.get("/v2", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def server_metadata() -> dict[str, Any]:
        """Return the server's name, version and protocol extensions."""
        return {"name": SERVER_NAME, "version": "1", "extensions": EXTENSIONS}

    @app.get("/v2/models/{customer}", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def metadata(customer: str) -> Response:
        """Return the customer's model: versions served, inputs, outputs and the traffic split."""
        return _json(model_metadata(predictor.route(customer), predictor.levels))

    @app.get("/v2/models/{customer}/ready", tags=["v2"], dependencies=_DOCUMENTED_TOKEN)
    def model_ready(customer: str) -> dict[str, Any]:
        """Answer 200 when the customer has a champion to serve (404/409 with the reason)."""
        route = predictor.route(customer)
        return {"name": customer, "ready": True, "versions": route.versions()}

    @app.api_route(
        "/v2/models/{customer}/versions/{rest:path}", methods=["GET", "POST"], tags=["v2"]
    )
    def versioned() -> Response:
        """Refuse a versioned path (404) saying why and what to call instead."""
        raise ServingError(404, UNVERSIONED)

    @app.post(
        "/v2/models/{customer}/infer",
        tags=["v2"],
        openapi_extra=infer_body(),
        responses=INFER_RESPONSES,
        dependencies=_DOCUMENTED_TOKEN,
    )
    async def infer(customer: str, request: Request) -> Response:
        """Predict a batch sent as v2 tensors (JSON or binary): forecast, model_version, ..."""
        header = request.headers.get(HEADER)
        names = [name for name, _ in v2_outputs(predictor.levels)]

        def work(raw: bytes) -> Response:
            predictor.route(customer)  # an unknown customer is a 404 before any body check
            if header is not None:
                request = decode_request(raw, header)
            else:
                request = inference_request(parse_json(raw))
            parsed = infer_request(request, max_rows, names)
            check_outputs(parsed.outputs, predictor.levels)
            forecast = predictor.forecast(customer, features(customer, parsed.batch))
            answered = infer_response(forecast, parsed.request_id, parsed.outputs)
            content, length = encode_response(answered, parsed.binary_outputs)
            if length is None:
                return Response(content, media_type="application/json")
            return Response(
                content,
                media_type="application/octet-stream",
                headers={HEADER: str(length)},
            )

        raw = await request.body()
        return await run_in_threadpool(lambda: work(raw))

    @app.post(
        "/forecast/{customer}",
        tags=["json"],
        openapi_extra=forecast_body(),
        responses=FORECAST_RESPONSES,
        dependencies=_DOCUMENTED_TOKEN,
    )
    async def forecast(customer: str, request: Request) -> Response:
        """Predict `{"rows": [...]}`: per row its request key, prediction, version and alias."""

        def work(raw: bytes) -> dict[str, Any]:
            predictor.route(customer)
            batch = features(customer, rows_batch(parse_json(raw), max_rows))
            return rows_response(predictor.forecast(customer, batch))

        return await answer(work, request)

    return app
