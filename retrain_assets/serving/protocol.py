"""The answers' shapes: Open Inference Protocol (v2) responses and metadata, the JSON route's.

JSON has no NaN: a prediction that is not finite is answered as null with `non_finite` true
(the log keeps the value itself). A row with no prediction (`reason` says why) is answered as
null too, with `non_finite` false and no version. Every v2 response carries the request's `id`
(a fresh one when it sent none) and a `model_version`: the version that served every row, or
the champion's and the canary's joined by "+" when a canary took some of them.

Prediction intervals: for every level the service serves (RETRAIN_INTERVAL_LEVELS, e.g. 80
and 95), each JSON row has `lower_80` and `upper_80`, and v2 has FP64 outputs of those names;
`interval_note` says why a row's bounds are null (its model carries none, or not that level),
and `interval_calibration` whose widths they are (the errors of that day ahead, or all days
pooled; after "widened on the gate's holdout: ..." or "uncalibrated: ..." when the model's widths
are not the trainer's; null/empty without bounds). `horizon_days`: the row's days past the
latest published day (null: a row sent with its features). A bound is null (NaN in a binary
tensor) wherever the prediction is.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
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
    ("reason", "BYTES"),
    ("defaulted", "BYTES"),
    ("price_used", "FP64"),
    ("on_promo_used", "FP64"),
    ("horizon_days", "FP64"),
)
INTERVAL_NOTE = "interval_note"
INTERVAL_CALIBRATION = "interval_calibration"


def interval_outputs(levels: Sequence[str]) -> list[tuple[str, str]]:
    """Return the served levels' outputs: lower_80, upper_80, ..., the note, the calibration.

    `interval_calibration` comes last: a client reading outputs by position keeps its own.
    """
    if not levels:
        return []
    bounds = [(f"{side}_{name}", "FP64") for name in levels for side in ("lower", "upper")]
    return [*bounds, (INTERVAL_NOTE, "BYTES"), (INTERVAL_CALIBRATION, "BYTES")]


def v2_outputs(levels: Sequence[str]) -> list[tuple[str, str]]:
    """Return every v2 output (name, datatype) of a service serving `levels`."""
    return [*V2_OUTPUTS, *interval_outputs(levels)]


def _interval_columns(forecast: Forecast) -> dict[str, list[Any]]:
    """Return each interval output's values per row (None where a bound is missing).

    A row without a finite prediction has no bounds (they are NaN from the start).
    """
    rows = forecast.interval_rows()
    if not rows.levels:
        return {}
    columns: dict[str, list[Any]] = {}
    for name in rows.levels:
        columns[f"lower_{name}"] = _or_none(rows.lower[name].tolist())
        columns[f"upper_{name}"] = _or_none(rows.upper[name].tolist())
    columns[INTERVAL_NOTE] = list(rows.notes)
    columns[INTERVAL_CALIBRATION] = list(rows.calibrations or [None] * len(rows.notes))
    return columns


def _finite_or_none(predictions: list[float]) -> tuple[list[float | None], list[bool]]:
    values: list[float | None] = []
    flags: list[bool] = []
    for value in predictions:
        finite = math.isfinite(value)
        values.append(value if finite else None)
        flags.append(not finite)
    return values, flags


def _flags(forecast: Forecast) -> tuple[list[float | None], list[bool], list[str | None]]:
    values, flags = _finite_or_none(forecast.predictions.tolist())
    reasons = forecast.reasons()
    for i, reason in enumerate(reasons):
        if reason is not None:
            flags[i] = False
    return values, flags, reasons


def _or_none(values: list[float]) -> list[float | None]:
    return [value if math.isfinite(value) else None for value in values]


def rows_response(forecast: Forecast) -> dict[str, Any]:
    """Return the JSON route's answer: `predictions`, per row its key, value, version, alias.

    Each row also says why it has no prediction (`reason`, else null), the price and promotion
    its prediction used, and which of them took their latest known value (`defaulted`).
    """
    values, flags, reasons = _flags(forecast)
    prices, promos = _or_none(forecast.covariate("price")), forecast.covariate("on_promo")
    intervals = _interval_columns(forecast)
    return {
        "customer": forecast.customer,
        "predictions": [
            {
                "request_key": key,
                "prediction": value,
                "non_finite": flag,
                "model_version": version or None,
                "alias": alias or None,
                "reason": reason,
                "price": price,
                "on_promo": None if math.isnan(promo) else bool(promo),
                "defaulted": defaulted.split(",") if defaulted else [],
                "horizon_days": horizon,
                **{name: column[at] for name, column in intervals.items()},
            }
            for at, (
                key,
                value,
                flag,
                version,
                alias,
                reason,
                price,
                promo,
                defaulted,
                horizon,
            ) in enumerate(
                zip(
                    forecast.keys,
                    values,
                    flags,
                    forecast.versions,
                    forecast.aliases,
                    reasons,
                    prices,
                    promos,
                    forecast.defaulted(),
                    forecast.horizons(),
                    strict=True,
                )
            )
        ],
    }


def response_version(forecast: Forecast) -> str:
    """Return the v2 response's `model_version`: the one version that served, or "a+b"."""
    served = [v for v in dict.fromkeys(forecast.versions) if v]
    if not served:
        return forecast.route.champion_version or ""
    champion = forecast.route.champion_version
    return "+".join(sorted(served, key=lambda v: (v != champion, v)))


def check_outputs(wanted: list[str] | None, levels: Sequence[str] = ()) -> None:
    """Refuse a v2 request that asks for an output the service does not produce.

    Raises:
        InvalidRequest: 422 naming the unknown output.
    """
    known = {name for name, _ in v2_outputs(levels)}
    for name in wanted or []:
        if name not in known:
            raise InvalidRequest(
                422, f"outputs: unknown output {name!r}; the model gives {', '.join(sorted(known))}"
            )


def infer_response(
    forecast: Forecast, request_id: str | None, wanted: list[str] | None
) -> dict[str, Any]:
    """Return the v2 inference response: one tensor per output (all, or those asked for)."""
    values, flags, reasons = _flags(forecast)
    data: dict[str, list[Any]] = {
        "forecast": values,
        "model_version": forecast.versions,
        "alias": forecast.aliases,
        "non_finite": flags,
        "request_key": forecast.keys,
        "reason": [reason or "" for reason in reasons],
        "defaulted": forecast.defaulted(),
        "price_used": _or_none(forecast.covariate("price")),
        "on_promo_used": _or_none(forecast.covariate("on_promo")),
        "horizon_days": [None if h is None else float(h) for h in forecast.horizons()],
        **_interval_columns(forecast),
    }
    for text in (INTERVAL_NOTE, INTERVAL_CALIBRATION):  # BYTES: every element is a string
        if text in data:
            data[text] = [said or "" for said in data[text]]
    rows = len(forecast.keys)
    outputs = [
        {"name": name, "datatype": datatype, "shape": [rows], "data": data[name]}
        for name, datatype in v2_outputs(forecast.interval_rows().levels)
        if wanted is None or name in wanted
    ]
    return {
        "model_name": forecast.customer,
        "model_version": response_version(forecast),
        "id": request_id if request_id is not None else uuid.uuid4().hex,
        "outputs": outputs,
    }


def model_metadata(route: Route, levels: Sequence[str] = ()) -> dict[str, Any]:
    """Return the v2 model metadata of a customer: versions served, inputs, outputs, split."""
    return {
        "name": route.customer,
        "versions": route.versions(),
        "platform": PLATFORM,
        "inputs": [
            {"name": name, "datatype": datatype, "shape": [-1]} for name, datatype in v2_inputs()
        ],
        "outputs": [
            {"name": name, "datatype": datatype, "shape": [-1]}
            for name, datatype in v2_outputs(levels)
        ],
        "parameters": {
            "champion_version": route.champion_version,
            "canary_version": route.canary_version,
            "canary_weight": route.canary_weight,
            "rollout_id": route.rollout_id,
            "step": route.step,
        },
    }
