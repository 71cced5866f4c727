"""The service's OpenAPI document, generated from the request schema's models.

The request bodies are read by hand (serving.inputs: strict JSON, then the schema), so FastAPI
does not see them as parameters; this module gives each inference path its request body from
the same pydantic models (`openapi_extra`), puts their definitions under
`components/schemas`, and names the answers (JSON, binary, and the refusals' two shapes) so a
client, or a fuzzer, knows every form the service takes and what it may answer.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, TypeAdapter

from retrain_assets.serving.request_schema import FORECAST_ADAPTER, InferenceRequest

REF = "#/components/schemas/{model}"
HEADER = "Inference-Header-Content-Length"


class Refusal(BaseModel):
    """A refusal on the JSON route: what is wrong, and where."""

    detail: str


class ProtocolError(BaseModel):
    """A refusal on a /v2 path, in the Open Inference Protocol's shape."""

    error: str


class PredictionRow(BaseModel):
    """One row's answer (the interval bounds `lower_80` ... follow the served levels)."""

    model_config = ConfigDict(extra="allow")

    request_key: str
    prediction: float | None
    non_finite: bool
    model_version: str | None
    alias: str | None
    reason: str | None
    defaulted: list[str]
    horizon_days: int | None = None  # days past the latest published day (null: not known)


class ForecastAnswer(BaseModel):
    """The JSON route's answer: one prediction per row, in the rows' order."""

    customer: str
    predictions: list[PredictionRow]


class OutputTensor(BaseModel):
    """One output: its values in `data`, or (binary) their size in `parameters`."""

    name: str
    datatype: str
    shape: list[int]
    data: list[Any] | None = None
    parameters: dict[str, Any] | None = None


class InferenceAnswer(BaseModel):
    """A v2 inference answer."""

    model_name: str
    model_version: str
    id: str
    outputs: list[OutputTensor]


def _refusals(model: type[BaseModel], statuses: tuple[int, ...]) -> dict[int | str, Any]:
    return {status: {"model": model, "description": "refused, saying why"} for status in statuses}


FORECAST_RESPONSES = {
    200: {"model": ForecastAnswer, "description": "one prediction per row"},
    **_refusals(Refusal, (400, 401, 404, 409, 413, 422, 503)),
}
INFER_RESPONSES = {
    200: {
        "model": InferenceAnswer,
        "description": "the outputs (binary ones after the JSON header, as the request asks)",
        "content": {"application/octet-stream": {"schema": {"type": "string"}}},
    },
    **_refusals(ProtocolError, (400, 401, 404, 409, 413, 422, 503)),
}


def _split(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return a model's schema without its `$defs`, and the `$defs`."""
    schema = dict(schema)
    return schema, schema.pop("$defs", {})


def forecast_body() -> dict[str, Any]:
    """Return the JSON route's `openapi_extra`: rows by key, or rows with every feature."""
    schema, _ = _split(FORECAST_ADAPTER.json_schema(ref_template=REF))
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": True, "content": content}}


def infer_body() -> dict[str, Any]:
    """Return the v2 inference path's `openapi_extra`: JSON, or the binary extension."""
    binary = {
        "type": "string",
        "format": "binary",
        "description": f"{HEADER} bytes of an InferenceRequest as JSON, then the raw tensors",
    }
    content = {
        "application/json": {"schema": {"$ref": REF.format(model="InferenceRequest")}},
        "application/octet-stream": {"schema": binary},
    }
    header = {
        "name": HEADER,
        "in": "header",
        "required": False,
        "description": "binary tensor data: the length of the JSON header at the body's start",
        "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
    }
    return {"requestBody": {"required": True, "content": content}, "parameters": [header]}


def request_components() -> dict[str, Any]:
    """Return every request model's definition, for `components/schemas`."""
    _, forecast = _split(FORECAST_ADAPTER.json_schema(ref_template=REF))
    infer, nested = _split(TypeAdapter(InferenceRequest).json_schema(ref_template=REF))
    return {**forecast, **nested, "InferenceRequest": infer}


def install(app: FastAPI) -> None:
    """Make `app.openapi()` add the request models' definitions to FastAPI's document."""

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                request_components()
            )
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]  # FastAPI's documented extension point
