"""Reading a prediction request into a FeatureBatch, or refusing it with the reason.

Two shapes of body carry the same rows: the plain JSON route's `{"rows": [{...}, ...]}` and
the Open Inference Protocol's (v2) named tensors. Both are checked column by column and every
problem is named by where it is (`rows[3].lag_7`, `inputs[lag_7].data[3]`) and what is wrong,
never by echoing the value sent. A missing feature, a bad date or a value that is not a finite
number is a 422; more rows than RETRAIN_SERVE_MAX_ROWS is a 413.

`null` for a feature is a missing value, as in training (a new item has no `lag_28` yet) and
LightGBM treats it the way it learned to; NaN and Infinity are refused: JSON has no such
numbers, and a client that produced one has a bug worth hearing about.

A request whose rows carry none of the computed features (lags, rolling means, calendar) asks
by key: store, item, date (optional: the day after the latest published one) and optionally the
covariates known in advance, `price` and `on_promo` (null or absent: the latest known value).
The service computes the rest (serving.key_lookup). Covariates sent by key are checked as
landing files are: a price is a finite number, 0 or more; a promotion is 0 or 1 (rows with
every feature are taken as they come, as before).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrain_assets.features.served_features import COVARIATES
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.routing import request_key

ID_FIELDS = ("store_id", "item_id")
DATE_FIELD = "date"
MAX_ID_LENGTH = 100
MAX_PROBLEMS_SHOWN = 5
V2_NUMERIC_TYPES = frozenset(
    {"BOOL", "FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64"}
    | {"UINT8", "UINT16", "UINT32", "UINT64"}
)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BAD_ID_CHARACTER = re.compile(r"[/\x00-\x1f\x7f]")
_NUMBER_TYPES = frozenset({float, int, bool, type(None)})
_MISSING = object()
Location = Callable[[str, int], str]
COMPUTED_FEATURES = tuple(name for name in MODEL_FEATURES if name not in COVARIATES)


class InvalidRequest(Exception):
    """A request the service refuses: `status` (4xx) and a message saying what and where."""

    def __init__(self, status: int, message: str) -> None:
        """Keep the HTTP status with the message."""
        super().__init__(message)
        self.status = status
        self.message = message


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


class _Problems:
    """Collects what is wrong; the message shows the first few and counts the rest."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.shown) < MAX_PROBLEMS_SHOWN:
            self.shown.append(message)

    def raise_if_any(self) -> None:
        if not self.count:
            return
        more = self.count - len(self.shown)
        tail = f" (and {more} more problem(s))" if more else ""
        raise InvalidRequest(422, "; ".join(self.shown) + tail)


def parse_json(raw: bytes) -> Any:
    """Return the decoded JSON body.

    Raises:
        InvalidRequest: 422, the body is not JSON, or it has NaN or Infinity.
    """

    def refuse_constant(name: str) -> None:
        raise InvalidRequest(
            422,
            f"the body has {name}, which is not a JSON number: send a finite number, or null "
            "for a missing feature",
        )

    try:
        return json.loads(raw, parse_constant=refuse_constant)
    except UnicodeDecodeError:
        raise InvalidRequest(422, "the body is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InvalidRequest(
            422,
            f"the body is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
        ) from None


def _check_row_count(count: int, max_rows: int) -> None:
    if count > max_rows:
        raise InvalidRequest(
            413,
            f"{count} rows in one request; at most {max_rows} (RETRAIN_SERVE_MAX_ROWS): "
            "split the batch",
        )
    if count == 0:
        raise InvalidRequest(422, "the request has no rows")


def _identifiers(
    values: Sequence[Any], name: str, where: Location, problems: _Problems
) -> list[str]:
    if (
        values
        and set(map(type, values)) == {str}
        and min(map(len, values)) > 0
        and max(map(len, values)) <= MAX_ID_LENGTH
        and not _BAD_ID_CHARACTER.search("".join(values))
    ):
        return list(values)  # the common case, checked in C; the loop below names problems
    out = []
    for i, value in enumerate(values):
        if value is _MISSING:
            problems.add(f"{where(name, i)}: missing")
        elif isinstance(value, int) and not isinstance(value, bool):
            out.append(str(value))
            continue
        elif not isinstance(value, str):
            problems.add(f"{where(name, i)}: must be a string")
        elif not value or len(value) > MAX_ID_LENGTH:
            problems.add(f"{where(name, i)}: must have 1 to {MAX_ID_LENGTH} characters")
        elif "/" in value or _CONTROL.search(value):
            problems.add(f"{where(name, i)}: must not contain '/' or control characters")
        else:
            out.append(value)
            continue
        out.append("")
    return out


def _dates(values: Sequence[Any], where: Location, problems: _Problems) -> list[dt.date]:
    parsed: dict[str, dt.date] = {}
    out = []
    for i, value in enumerate(values):
        day = parsed.get(value) if isinstance(value, str) else None
        if day is None:
            if value is _MISSING:
                problems.add(f"{where(DATE_FIELD, i)}: missing")
            elif not isinstance(value, str) or not _DATE.match(value):
                problems.add(f"{where(DATE_FIELD, i)}: must be a date YYYY-MM-DD")
            else:
                try:
                    day = parsed[value] = dt.date.fromisoformat(value)
                except ValueError:
                    problems.add(f"{where(DATE_FIELD, i)}: is not a calendar date")
        out.append(day or dt.date.min)
    return out


def _numbers(
    values: Sequence[Any], name: str, where: Location, problems: _Problems, column: np.ndarray
) -> None:
    if set(map(type, values)) <= _NUMBER_TYPES:  # the common case: numpy converts (None: NaN)
        try:
            column[:] = np.array(values, dtype="float64")
        except OverflowError:
            pass  # an integer beyond float range: the loop below names it
        else:
            if not np.isinf(column).any():  # NaN is only ever a null: JSON has no NaN
                return
    for i, value in enumerate(values):
        if value is None:
            column[i] = math.nan  # a missing value, as in training
        elif value is _MISSING:
            problems.add(f"{where(name, i)}: missing feature")
        elif isinstance(value, bool | int | float):
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if math.isfinite(number):
                column[i] = number
            else:
                problems.add(f"{where(name, i)}: must be a finite number")
        else:
            problems.add(f"{where(name, i)}: must be a number (or null for a missing value)")


def _batch(
    columns: Mapping[str, Sequence[Any]], count: int, where: Location, problems: _Problems
) -> FeatureBatch:
    stores = _identifiers(columns["store_id"], "store_id", where, problems)
    items = _identifiers(columns["item_id"], "item_id", where, problems)
    dates = _dates(columns[DATE_FIELD], where, problems)
    features = np.empty((count, len(MODEL_FEATURES)), dtype="float64")
    for j, name in enumerate(MODEL_FEATURES):
        _numbers(columns[name], name, where, problems, features[:, j])
    problems.raise_if_any()
    return FeatureBatch(stores, items, dates, features)


def _covariate_ranges(
    price: np.ndarray, on_promo: np.ndarray, where: Location, problems: _Problems
) -> None:
    """Name every price below 0 and every promotion other than 0 or 1 (NaN: not given)."""
    for i in np.flatnonzero(price < 0).tolist():
        problems.add(f"{where('price', i)}: out of range: a price is 0 or more")
    given = ~np.isnan(on_promo)
    for i in np.flatnonzero(given & (on_promo != 0) & (on_promo != 1)).tolist():
        problems.add(f"{where('on_promo', i)}: out of range: must be 0 or 1 (false or true)")


def _optional_dates(
    values: Sequence[Any], where: Location, problems: _Problems
) -> list[dt.date | None]:
    given = [i for i, value in enumerate(values) if value is not _MISSING and value is not None]
    if len(given) == len(values):
        return list(_dates(values, where, problems))
    out: list[dt.date | None] = [None] * len(values)
    parsed = _dates([values[i] for i in given], lambda name, n: where(name, given[n]), problems)
    for i, day in zip(given, parsed, strict=True):
        out[i] = day
    return out


def _key_batch(
    columns: Mapping[str, Sequence[Any]], count: int, where: Location, problems: _Problems
) -> KeyBatch:
    stores = _identifiers(columns["store_id"], "store_id", where, problems)
    items = _identifiers(columns["item_id"], "item_id", where, problems)
    dates = _optional_dates(columns[DATE_FIELD], where, problems)
    covariates = {}
    for name in COVARIATES:
        values = [None if v is _MISSING else v for v in columns[name]]
        covariates[name] = np.empty(count, dtype="float64")
        _numbers(values, name, where, problems, covariates[name])
    _covariate_ranges(covariates["price"], covariates["on_promo"], where, problems)
    problems.raise_if_any()
    return KeyBatch(stores, items, dates, covariates["price"], covariates["on_promo"], where)


def rows_batch(body: Any, max_rows: int) -> FeatureBatch | KeyBatch:
    """Return the batch of a JSON route body `{"rows": [{store_id, item_id, date, ...}]}`.

    Rows with every feature give a FeatureBatch; rows with none of the computed ones (by key)
    give a KeyBatch. Fields other than the identity and MODEL_FEATURES are ignored.

    Raises:
        InvalidRequest: 413 for too many rows; 422 naming each problem's row and field.
    """
    rows = body.get("rows", _MISSING) if isinstance(body, dict) else _MISSING
    if not isinstance(rows, list):
        raise InvalidRequest(422, 'the body must be an object with "rows": a list of objects')
    _check_row_count(len(rows), max_rows)
    problems = _Problems()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            problems.add(f"rows[{i}]: must be an object")
    problems.raise_if_any()
    names = (*ID_FIELDS, DATE_FIELD, *MODEL_FEATURES)
    columns = {name: [row.get(name, _MISSING) for row in rows] for name in names}

    def where(name: str, i: int) -> str:
        return f"rows[{i}].{name}"

    if not any(name in row for row in rows for name in COMPUTED_FEATURES):
        return _key_batch(columns, len(rows), where, problems)
    return _batch(columns, len(rows), where, problems)


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


def _tensor_data(tensor: dict[str, Any], name: str) -> tuple[list[Any], int]:
    """Return a tensor's values (flattened one level) and its row count, from its shape."""
    shape, data = tensor.get("shape"), tensor.get("data")
    if not isinstance(data, list):
        raise InvalidRequest(422, f"inputs[{name}].data: must be a list")
    if data and all(isinstance(value, list) for value in data):
        data = [value for inner in data for value in inner]
    if (
        not isinstance(shape, list)
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        or len(shape) not in (1, 2)
        or (len(shape) == 2 and shape[1] != 1)
    ):
        raise InvalidRequest(422, f"inputs[{name}].shape: must be [rows] or [rows, 1]")
    if shape[0] != len(data):
        raise InvalidRequest(
            422, f"inputs[{name}]: shape {shape} holds {shape[0]} value(s), data has {len(data)}"
        )
    return data, shape[0]


def v2_key_inputs() -> list[tuple[str, str, bool]]:
    """Return the v2 inputs of a request by key, as (name, datatype, required)."""
    return [
        ("store_id", "BYTES", True),
        ("item_id", "BYTES", True),
        (DATE_FIELD, "BYTES", False),
        *((name, "FP64", False) for name in COVARIATES),
    ]


def v2_batch(body: Any, max_rows: int, output_names: Sequence[str] = ()) -> InferRequest:
    """Return the batch of an Open Inference Protocol request (`inputs` as named tensors).

    With any computed feature among the inputs, every input of `v2_inputs()` is required;
    without, the request is by key (`v2_key_inputs()`). Each tensor is of shape [rows] (or
    [rows, 1]); identities are BYTES, features any numeric datatype. An unknown input is
    refused; `outputs`, when given, picks which outputs the response carries, and which of
    them are binary (their `binary_data` parameter, else the request's `binary_data_output`).

    Raises:
        InvalidRequest: 413 for too many rows; 422 naming the input, row and problem.
    """
    inputs = body.get("inputs", _MISSING) if isinstance(body, dict) else _MISSING
    if not isinstance(inputs, list) or not inputs:
        raise InvalidRequest(422, 'the body must be an object with "inputs": a list of tensors')
    expected = dict(v2_inputs())
    tensors: dict[str, dict[str, Any]] = {}
    for i, tensor in enumerate(inputs):
        name = tensor.get("name") if isinstance(tensor, dict) else None
        if not isinstance(name, str):
            raise InvalidRequest(422, f"inputs[{i}]: must be an object with a string name")
        if name not in expected:
            raise InvalidRequest(
                422, f"inputs[{i}]: unknown input; the model takes {', '.join(expected)}"
            )
        if name in tensors:
            raise InvalidRequest(422, f"inputs[{name}]: given twice")
        tensors[name] = tensor
    by_key = not any(name in tensors for name in COMPUTED_FEATURES)
    required = [name for name, _, needed in v2_key_inputs() if needed] if by_key else list(expected)
    missing = [name for name in required if name not in tensors]
    if missing:
        raise InvalidRequest(422, f"inputs: missing {', '.join(missing)}")
    columns: dict[str, Sequence[Any]] = {}
    counts: dict[str, int] = {}
    for name, datatype in expected.items():
        if name not in tensors:
            continue
        given = tensors[name].get("datatype")
        allowed = {"BYTES"} if datatype == "BYTES" else V2_NUMERIC_TYPES
        if given not in allowed:
            raise InvalidRequest(
                422, f"inputs[{name}].datatype: must be {' or '.join(sorted(allowed))}"
            )
        columns[name], counts[name] = _tensor_data(tensors[name], name)
        _check_row_count(counts[name], max_rows)
    if len(set(counts.values())) > 1:
        sizes = ", ".join(f"{name} {count}" for name, count in counts.items())
        raise InvalidRequest(422, f"inputs disagree on the number of rows: {sizes}")
    count = next(iter(counts.values()))

    def where(name: str, i: int) -> str:
        return f"inputs[{name}].data[{i}]"

    batch: FeatureBatch | KeyBatch
    if by_key:
        keyed = {name: columns.get(name, [_MISSING] * count) for name in (*ID_FIELDS, DATE_FIELD)}
        keyed |= {name: columns.get(name, [None] * count) for name in COVARIATES}
        batch = _key_batch(keyed, count, where, _Problems())
    else:
        batch = _batch(columns, count, where, _Problems())
    request_id = body.get("id")
    wanted, binary = _outputs(body, output_names)
    return InferRequest(batch, request_id if isinstance(request_id, str) else None, wanted, binary)


def _binary_flag(parameters: Any, name: str, where: str) -> bool | None:
    if parameters is None:
        return None
    if not isinstance(parameters, dict):
        raise InvalidRequest(422, f"{where}.parameters: must be an object")
    flag = parameters.get(name)
    if flag is not None and not isinstance(flag, bool):
        raise InvalidRequest(422, f"{where}.parameters.{name}: must be true or false")
    return flag


def _outputs(
    body: dict[str, Any], output_names: Sequence[str]
) -> tuple[list[str] | None, set[str]]:
    """Return the outputs asked for (None: all) and those to send as binary tensor data."""
    every_binary = bool(_binary_flag(body.get("parameters"), "binary_data_output", "request"))
    outputs = body.get("outputs")
    if outputs is None:
        return None, set(output_names) if every_binary else set()
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise InvalidRequest(422, "outputs: must be a list of objects with a name")
    binary = set()
    for i, output in enumerate(outputs):
        flag = _binary_flag(output.get("parameters"), "binary_data", f"outputs[{i}]")
        if flag or (flag is None and every_binary):
            binary.add(output["name"])
    return [o["name"] for o in outputs], binary
