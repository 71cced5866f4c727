"""Reading a prediction request into a FeatureBatch, or refusing it with the reason.

Every form of request is read through one schema (serving.request_schema): the plain JSON
route's `{"rows": [{...}, ...]}` (rows by key or with every feature) and the Open Inference
Protocol's (v2) named tensors, as JSON or binary. Each value is checked by the type of the row
field it becomes, the same in every form, and every problem is named by where it is
(`rows[3].lag_7`, `inputs[lag_7].data[3]`) and what is wrong, never by echoing the value sent.
An unknown field, a missing feature, a bad date or a value that is not a finite number is a
422; more rows than RETRAIN_SERVE_MAX_ROWS is a 413.

`null` for a feature is a missing value, as in training (a new item has no `lag_28` yet) and
LightGBM treats it the way it learned to; NaN and Infinity are refused: JSON has no such
numbers, and a client that produced one has a bug worth hearing about.

A request whose rows carry none of the computed features (lags, rolling means, calendar) asks
by key: store, item, date (optional: the day after the latest published one) and optionally the
covariates known in advance, `price` and `on_promo` (null or absent: the latest known value).
The service computes the rest (serving.key_lookup, which also checks each date against the
days served). Covariates sent by key are checked as landing files are: a price is a finite
number, 0 or more; a promotion is 0 or 1 (rows with every feature are taken as they come).
Every row's date, in every form, is then checked against the days served by the same code
(serving.key_lookup: `features_by_key`, `served_rows`), which is why a FeatureBatch carries
where its rows were sent (`where`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from retrain_assets.features.served_features import COVARIATES
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.refusal import InvalidRequest
from retrain_assets.serving.request_schema import (
    COMPUTED_FEATURES,
    DATE_FIELD,
    ID_FIELDS,
    V2_NUMERIC_TYPES,
    FeatureRowsRequest,
    InferenceRequest,
    InputTensor,
    KeyRowsRequest,
    calendar_date,
    column_adapter,
)
from retrain_assets.serving.routing import request_key
from retrain_assets.serving.schema_refusals import field_path, problems, problems_refusal, refusal
from retrain_assets.serving.strict_json import parse_json

__all__ = [
    "DATE_FIELD",
    "ID_FIELDS",
    "MODEL_FEATURES",
    "FeatureBatch",
    "InferRequest",
    "InvalidRequest",
    "KeyBatch",
    "Location",
    "parse_json",
    "rows_batch",
    "v2_batch",
    "v2_inputs",
]

Location = Callable[[str, int], str]


def _row_location(name: str, i: int) -> str:
    return f"rows[{i}].{name}"


def _tensor_location(name: str, i: int) -> str:
    return f"inputs[{name}].data[{i}]"


@dataclass(frozen=True)
class FeatureBatch:
    """The rows of one request: their identity and their features (rows x MODEL_FEATURES)."""

    store_ids: list[str]
    item_ids: list[str]
    dates: list[dt.date]
    features: np.ndarray
    # Per row, why it gets no prediction (None: it gets one); None when every row gets one.
    reasons: list[str | None] | None = None
    # Per row, the covariates that took their latest known value ("" for none).
    defaulted: list[str] | None = None
    # Per row, days past the latest published day (None: unknown, the row sent its features).
    horizons: list[int | None] | None = None
    # Where a row's field was sent (`rows[3].date`, `inputs[date].data[3]`), for a refusal.
    where: Location = _row_location
    keys: list[str] = field(init=False)

    def __post_init__(self) -> None:
        """Compute each row's request key once."""
        keys = [
            request_key(store, item, day)
            for store, item, day in zip(self.store_ids, self.item_ids, self.dates, strict=True)
        ]
        object.__setattr__(self, "keys", keys)

    def __len__(self) -> int:
        """Return the number of rows."""
        return len(self.keys)

    def answerable(self) -> np.ndarray:
        """Return, per row, whether it gets a prediction."""
        if self.reasons is None:
            return np.ones(len(self), dtype=bool)
        return np.fromiter((r is None for r in self.reasons), dtype=bool, count=len(self))

    def subset(self, rows: np.ndarray) -> FeatureBatch:
        """Return the rows selected by the boolean mask `rows` (their reasons dropped)."""
        at = np.flatnonzero(rows).tolist()
        return FeatureBatch(
            [self.store_ids[i] for i in at],
            [self.item_ids[i] for i in at],
            [self.dates[i] for i in at],
            self.features[rows],
            horizons=[self.horizons[i] for i in at] if self.horizons is not None else None,
        )


@dataclass(frozen=True)
class KeyBatch:
    """The rows of a request by key: identity, day (None: the next) and covariates (NaN: none)."""

    store_ids: list[str]
    item_ids: list[str]
    dates: list[dt.date | None]
    price: np.ndarray
    on_promo: np.ndarray
    where: Location

    def __len__(self) -> int:
        """Return the number of rows."""
        return len(self.store_ids)


def _check_row_count(count: int, max_rows: int) -> None:
    if count > max_rows:
        raise InvalidRequest(
            413,
            f"{count} rows in one request; at most {max_rows} (RETRAIN_SERVE_MAX_ROWS): "
            "split the batch",
        )
    if count == 0:
        raise InvalidRequest(422, "the request has no rows")


def _identities(values: list[str | int]) -> list[str]:
    """Return the identities as text (an integer identity as its decimal text)."""
    if all(type(value) is str for value in values):
        return values  # type: ignore[return-value]  # the common case: every one is text
    return [value if isinstance(value, str) else str(value) for value in values]


def rows_batch(body: Any, max_rows: int) -> FeatureBatch | KeyBatch:
    """Return the batch of a JSON route body `{"rows": [{store_id, item_id, date, ...}]}`.

    Rows with any computed feature are read as rows with every feature (FeatureRowsRequest,
    a FeatureBatch); rows with none of them as rows by key (KeyRowsRequest, a KeyBatch).

    Raises:
        InvalidRequest: 413 for too many rows; 422 naming each problem's row and field.
    """
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(rows, list):
        raise InvalidRequest(422, 'the body must be an object with "rows": a list of objects')
    _check_row_count(len(rows), max_rows)
    by_key = not any(
        isinstance(row, dict) and any(name in row for name in COMPUTED_FEATURES) for row in rows
    )
    model: type[BaseModel] = KeyRowsRequest if by_key else FeatureRowsRequest
    try:
        request = model.model_validate(body)
    except ValidationError as error:
        raise refusal(error, missing="missing feature") from None
    parsed: list[Any] = request.rows  # type: ignore[attr-defined]
    stores = _identities([row.store_id for row in parsed])
    items = _identities([row.item_id for row in parsed])
    if by_key:
        return KeyBatch(
            stores,
            items,
            [None if row.date is None else calendar_date(row.date) for row in parsed],
            np.array([row.price for row in parsed], dtype="float64"),
            np.array([row.on_promo for row in parsed], dtype="float64"),
            _row_location,
        )
    features = np.array(
        [[row.__dict__[name] for name in MODEL_FEATURES] for row in parsed], dtype="float64"
    )
    return FeatureBatch(stores, items, [calendar_date(row.date) for row in parsed], features)


@dataclass(frozen=True)
class InferRequest:
    """A v2 inference request: its rows, its optional id, the outputs it asked for."""

    batch: FeatureBatch | KeyBatch
    request_id: str | None
    outputs: list[str] | None
    binary_outputs: set[str]


def v2_inputs() -> list[tuple[str, str]]:
    """Return the v2 inputs every model takes, as (name, datatype)."""
    return [
        *((name, "BYTES") for name in (*ID_FIELDS, DATE_FIELD)),
        *((name, "FP64") for name in MODEL_FEATURES),
    ]


def v2_key_inputs() -> list[tuple[str, str, bool]]:
    """Return the v2 inputs of a request by key, as (name, datatype, required)."""
    return [
        ("store_id", "BYTES", True),
        ("item_id", "BYTES", True),
        (DATE_FIELD, "BYTES", False),
        *((name, "FP64", False) for name in COVARIATES),
    ]


def tensor_path(body: Any) -> Callable[[tuple[int | str, ...]], str]:
    """Return the path function of a v2 body: a tensor is named by its name when it has one."""
    known = {name for name, _ in v2_inputs()}

    def path(loc: tuple[int | str, ...]) -> str:
        if len(loc) >= 2 and loc[0] == "inputs" and isinstance(loc[1], int):
            tensors = body.get("inputs") if isinstance(body, dict) else None
            tensor = tensors[loc[1]] if isinstance(tensors, list) else None
            name = tensor.get("name") if isinstance(tensor, dict) else None
            if name in known:
                rest = field_path(loc[2:])
                return f"inputs[{name}]" + (f".{rest}" if rest and rest[0] != "[" else rest)
        return field_path(loc)

    return path


def inference_request(body: Any) -> InferenceRequest:
    """Return a v2 body (JSON, or a binary request's header) read through the schema.

    Raises:
        InvalidRequest: 422 naming every violation by its path.
    """
    inputs = body.get("inputs") if isinstance(body, dict) else None
    if not isinstance(inputs, list) or not inputs:
        raise InvalidRequest(422, 'the body must be an object with "inputs": a list of tensors')
    try:
        return InferenceRequest.model_validate(body)
    except ValidationError as error:
        raise refusal(error, tensor_path(body)) from None


def _tensor_data(tensor: InputTensor) -> tuple[list[Any], int]:
    """Return a tensor's values (flattened one level) and its row count, from its shape."""
    name, shape, data = tensor.name, tensor.shape, tensor.data
    if data is None:
        if tensor.parameters is not None and tensor.parameters.binary_data_size is not None:
            raise InvalidRequest(
                400,
                f"inputs[{name}].parameters.binary_data_size: binary tensor data needs the "
                "Inference-Header-Content-Length header",
            )
        raise InvalidRequest(422, f"inputs[{name}].data: missing")
    if data and all(isinstance(value, list) for value in data):
        data = [value for inner in data for value in inner]  # type: ignore[union-attr]
    if len(shape) == 2 and shape[1] != 1:
        raise InvalidRequest(422, f"inputs[{name}].shape: must be [rows] or [rows, 1]")
    if shape[0] != len(data):
        raise InvalidRequest(
            422, f"inputs[{name}]: shape {shape} holds {shape[0]} value(s), data has {len(data)}"
        )
    return data, shape[0]


def _tensors(request: InferenceRequest) -> dict[str, InputTensor]:
    expected = dict(v2_inputs())
    tensors: dict[str, InputTensor] = {}
    for i, tensor in enumerate(request.inputs):
        if tensor.name not in expected:
            raise InvalidRequest(
                422, f"inputs[{i}].name: unknown input; the model takes {', '.join(expected)}"
            )
        if tensor.name in tensors:
            raise InvalidRequest(422, f"inputs[{tensor.name}]: given twice")
        allowed = {"BYTES"} if expected[tensor.name] == "BYTES" else set(V2_NUMERIC_TYPES)
        if tensor.datatype not in allowed:
            raise InvalidRequest(
                422, f"inputs[{tensor.name}].datatype: must be {' or '.join(sorted(allowed))}"
            )
        tensors[tensor.name] = tensor
    return tensors


def _data_path(name: str) -> Callable[[tuple[int | str, ...]], str]:
    """Return the path function of a tensor's values: `inputs[price].data[7]`."""
    return lambda loc: f"inputs[{name}].data" + field_path(loc[:1])


def _columns(
    tensors: dict[str, InputTensor], by_key: bool, max_rows: int
) -> tuple[dict[str, list[Any]], int]:
    """Return each input's values, checked by the type of its row field, and the row count."""
    columns: dict[str, list[Any]] = {}
    counts: dict[str, int] = {}
    for name, tensor in tensors.items():
        columns[name], counts[name] = _tensor_data(tensor)
        _check_row_count(counts[name], max_rows)
    if len(set(counts.values())) > 1:
        sizes = ", ".join(f"{name} {count}" for name, count in counts.items())
        raise InvalidRequest(422, f"inputs disagree on the number of rows: {sizes}")
    found: list[str] = []
    for name, values in columns.items():
        try:
            columns[name] = column_adapter(by_key, name).validate_python(values)
        except ValidationError as error:
            found += problems(error, _data_path(name), field=name)
    if found:
        raise problems_refusal(found)
    return columns, next(iter(counts.values()))


def infer_request(
    request: InferenceRequest, max_rows: int, output_names: Sequence[str] = ()
) -> InferRequest:
    """Return the batch of a v2 request read through the schema (JSON, or binary decoded).

    With any computed feature among the inputs, every input of `v2_inputs()` is required;
    without, the request is by key (`v2_key_inputs()`). Each tensor is of shape [rows] (or
    [rows, 1]); identities are BYTES, features any numeric datatype. An unknown input is
    refused; `outputs`, when given, picks which outputs the response carries, and which of
    them are binary (their `binary_data` parameter, else the request's `binary_data_output`).

    Raises:
        InvalidRequest: 413 for too many rows; 422 naming the input, row and problem.
    """
    tensors = _tensors(request)
    by_key = not any(name in tensors for name in COMPUTED_FEATURES)
    expected = [name for name, _ in v2_inputs()]
    required = [name for name, _, needed in v2_key_inputs() if needed] if by_key else expected
    missing = [name for name in required if name not in tensors]
    if missing:
        raise InvalidRequest(422, f"inputs: missing {', '.join(missing)}")
    columns, count = _columns(tensors, by_key, max_rows)
    stores = _identities(columns["store_id"])
    items = _identities(columns["item_id"])
    batch: FeatureBatch | KeyBatch
    if by_key:
        days = columns.get(DATE_FIELD, [None] * count)
        batch = KeyBatch(
            stores,
            items,
            [None if day is None else calendar_date(day) for day in days],
            np.array(columns.get("price", [None] * count), dtype="float64"),
            np.array(columns.get("on_promo", [None] * count), dtype="float64"),
            _tensor_location,
        )
    else:
        features = np.array([columns[name] for name in MODEL_FEATURES], dtype="float64").T
        dates = [calendar_date(day) for day in columns[DATE_FIELD]]
        batch = FeatureBatch(
            stores, items, dates, np.ascontiguousarray(features), where=_tensor_location
        )
    wanted, binary = _outputs(request, output_names)
    return InferRequest(batch, request.id, wanted, binary)


def v2_batch(body: Any, max_rows: int, output_names: Sequence[str] = ()) -> InferRequest:
    """Return the batch of an Open Inference Protocol JSON body (see `infer_request`).

    Raises:
        InvalidRequest: 413 for too many rows; 422 naming the input, row and problem.
    """
    return infer_request(inference_request(body), max_rows, output_names)


def _outputs(
    request: InferenceRequest, output_names: Sequence[str]
) -> tuple[list[str] | None, set[str]]:
    """Return the outputs asked for (None: all) and those to send as binary tensor data."""
    parameters = request.parameters
    every_binary = bool(parameters is not None and parameters.binary_data_output)
    if request.outputs is None:
        return None, set(output_names) if every_binary else set()
    binary = set()
    for output in request.outputs:
        flag = output.parameters.binary_data if output.parameters is not None else None
        if flag or (flag is None and every_binary):
            binary.add(output.name)
    return [output.name for output in request.outputs], binary
