"""The answers' shapes: Open Inference Protocol (v2) responses and metadata, the JSON route's.

JSON has no NaN: a prediction that is not finite is answered as null with `non_finite` true
(the log keeps the value itself).
"""

from __future__ import annotations

import math
from typing import Any

from retrain_assets.serving.inputs import InvalidRequest, v2_inputs
from retrain_assets.serving.predictor import Forecast
from retrain_assets.serving.routes import Route

PLATFORM = "lightgbm"
V2_OUTPUTS = (
    ("forecast", "FP64"),
    ("model_version", "BYTES"),
    ("alias", "BYTES"),
    ("non_finite", "BOOL"),
    ("request_key", "BYTES"),
)


def _finite_or_none(predictions: list[float]) -> tuple[list[float | None], list[bool]]:
    values: list[float | None] = []
    flags: list[bool] = []
    for value in predictions:
        finite = math.isfinite(value)
        values.append(value if finite else None)
        flags.append(not finite)
    return values, flags


def rows_response(forecast: Forecast) -> dict[str, Any]:
    """Return the JSON route's answer: `predictions`, per row its key, value, version, alias."""
    values, flags = _finite_or_none(forecast.predictions.tolist())
    return {
        "customer": forecast.customer,
        "predictions": [
            {
                "request_key": key,
                "prediction": value,
                "non_finite": flag,
                "model_version": version,
                "alias": alias,
            }
            for key, value, flag, version, alias in zip(
                forecast.keys, values, flags, forecast.versions, forecast.aliases, strict=True
            )
        ],
    }


def check_outputs(wanted: list[str] | None) -> None:
    """Refuse a v2 request that asks for an output the service does not produce.

    Raises:
        InvalidRequest: 422 naming the unknown output.
    """
    known = {name for name, _ in V2_OUTPUTS}
    for name in wanted or []:
        if name not in known:
            raise InvalidRequest(
                422, f"outputs: unknown output {name!r}; the model gives {', '.join(sorted(known))}"
            )


def infer_response(
    forecast: Forecast, request_id: str | None, wanted: list[str] | None
) -> dict[str, Any]:
    """Return the v2 inference response: one tensor per output (all, or those asked for)."""
    values, flags = _finite_or_none(forecast.predictions.tolist())
    data = {
        "forecast": values,
        "model_version": forecast.versions,
        "alias": forecast.aliases,
        "non_finite": flags,
        "request_key": forecast.keys,
    }
    rows = len(forecast.keys)
    outputs = [
        {"name": name, "datatype": datatype, "shape": [rows], "data": data[name]}
        for name, datatype in V2_OUTPUTS
        if wanted is None or name in wanted
    ]
    answer: dict[str, Any] = {"model_name": forecast.customer, "outputs": outputs}
    if request_id is not None:
        answer["id"] = request_id
    return answer


def model_metadata(route: Route) -> dict[str, Any]:
    """Return the v2 model metadata of a customer: versions served, inputs, outputs, split."""
    return {
        "name": route.customer,
        "versions": route.versions(),
        "platform": PLATFORM,
        "inputs": [
            {"name": name, "datatype": datatype, "shape": [-1]} for name, datatype in v2_inputs()
        ],
        "outputs": [
            {"name": name, "datatype": datatype, "shape": [-1]} for name, datatype in V2_OUTPUTS
        ],
        "parameters": {
            "champion_version": route.champion_version,
            "canary_version": route.canary_version,
            "canary_weight": route.canary_weight,
            "rollout_id": route.rollout_id,
            "step": route.step,
        },
    }
