"""The prediction service's one request schema: every form of request is read through it.

Four forms carry the same rows (docs/serving.md):
- `/forecast/<customer>` rows with every feature (`FeatureRowsRequest`),
- `/forecast/<customer>` rows by key: store, item, optional date, price, promotion
  (`KeyRowsRequest`),
- `/v2/models/<customer>/infer` Open Inference Protocol tensors as JSON (`InferenceRequest`),
- the same with the binary tensor data extension: its JSON header is an `InferenceRequest`
  whose binary tensors are decoded into their `data` (serving.binary_tensors).

Every model forbids unknown fields and converts nothing (strict: "1.5" is not a number, 1 is
not true). A value is checked by the type of its field, the same type in every form: a v2
tensor's data is validated, element by element, by the field of the row it becomes
(`FIELD_TYPES`). The sizes are bounded (identifiers, ids, names, inputs, outputs, dimensions);
the number of rows is bounded by RETRAIN_SERVE_MAX_ROWS (413) before any of this runs, and the
nesting by serving.strict_json. The service's OpenAPI document is generated from these models.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    TypeAdapter,
    create_model,
)
from pydantic_core import PydanticCustomError

from retrain_assets.features.served_features import COVARIATES
from retrain_assets.features.training_export import MODEL_FEATURES

MAX_ID_LENGTH = 100
MAX_REQUEST_ID_LENGTH = 256
MAX_NAME_LENGTH = 64
MAX_TENSORS = 64
MAX_DIMENSIONS = 2
ID_FIELDS = ("store_id", "item_id")
DATE_FIELD = "date"
COMPUTED_FEATURES = tuple(name for name in MODEL_FEATURES if name not in COVARIATES)
V2_NUMERIC_TYPES = (
    *("BOOL", "FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64"),
    *("UINT8", "UINT16", "UINT32", "UINT64"),
)
V2_DATATYPES = (*V2_NUMERIC_TYPES, "BYTES")
_ID_PATTERN = r"^[^/\x00-\x1f\x7f]+$"
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


class _Strict(BaseModel):
    """Unknown fields refused, no conversions."""

    model_config = ConfigDict(extra="forbid", strict=True)


@functools.lru_cache(maxsize=4096)
def calendar_date(text: str) -> dt.date:
    """Return the day of a YYYY-MM-DD text (cached: a batch repeats its few days)."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise PydanticCustomError("calendar_date", "is not a calendar date") from None


def _date(text: str) -> str:
    calendar_date(text)
    return text


IdText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=_ID_PATTERN)
]
# A store or an item: text, or an integer (read as its decimal text).
Identifier = IdText | StrictInt
# A day, YYYY-MM-DD, a real calendar date. Whether it is a day served is checked after the
# schema, in every form, against the latest publication (serving.key_lookup.date_problem).
DateText = Annotated[
    str,
    StringConstraints(min_length=10, max_length=10, pattern=_DATE_PATTERN),
    AfterValidator(_date),
]
# A feature sent: a finite number, true/false, or null (a missing value, as in training).
Number = Annotated[float, Field(allow_inf_nan=False)]
FeatureValue = Number | StrictBool | None
# A covariate sent by key, checked as landing files are (null: the latest known value).
Price = Annotated[float, Field(ge=0, allow_inf_nan=False)] | StrictBool | None
Promo = Annotated[float, Field(ge=0, le=1, multiple_of=1)] | StrictBool | None


# The type of each field of a row by key, and of a row with every feature: the row models are
# made of them, and a v2 tensor's values are checked by the type of the field they become.
KEY_FIELD_TYPES: dict[str, Any] = {
    "store_id": Identifier,
    "item_id": Identifier,
    DATE_FIELD: DateText | None,
    "price": Price,
    "on_promo": Promo,
}
FEATURE_FIELD_TYPES: dict[str, Any] = {
    "store_id": Identifier,
    "item_id": Identifier,
    DATE_FIELD: DateText,
    **dict.fromkeys(MODEL_FEATURES, FeatureValue),
}


class KeyRow(_Strict):
    """A row by key: the service computes every other feature from the published history."""

    store_id: Identifier
    item_id: Identifier
    date: DateText | None = Field(
        None, description="default: the day after the latest published day"
    )
    price: Price = None
    on_promo: Promo = None


FeatureRow: type[BaseModel] = create_model(
    "FeatureRow",
    __base__=_Strict,
    __doc__="A row with every feature of the model, taken as sent (null: a missing value).",
    **{name: (kind, ...) for name, kind in FEATURE_FIELD_TYPES.items()},  # type: ignore[call-overload]
)
assert set(KeyRow.model_fields) == set(KEY_FIELD_TYPES), "KeyRow and its field types disagree"


class KeyRowsRequest(_Strict):
    """`POST /forecast/<customer>` by key."""

    rows: Annotated[list[KeyRow], Field(min_length=1)]


class FeatureRowsRequest(_Strict):
    """`POST /forecast/<customer>` with every feature."""

    rows: Annotated[list[FeatureRow], Field(min_length=1)]


ForecastRequest = KeyRowsRequest | FeatureRowsRequest


# -- Open Inference Protocol (v2) -------------------------------------------------------------

Scalar = Annotated[str, StringConstraints(max_length=MAX_ID_LENGTH)] | Number | StrictBool | None
Element = Scalar | Annotated[list[Scalar], Field(min_length=1, max_length=1)]


class InputParameters(_Strict):
    """The binary tensor data extension: the tensor's bytes follow the JSON header."""

    binary_data_size: Annotated[int, Field(ge=0)] | None = None


class InputTensor(_Strict):
    """One named input; its data (or its binary bytes) holds one value per row."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_LENGTH)]
    datatype: Literal[V2_DATATYPES]  # type: ignore[valid-type]
    shape: Annotated[
        list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=MAX_DIMENSIONS)
    ] = Field(description="[rows] or [rows, 1]")
    data: list[Element] | None = None
    parameters: InputParameters | None = None


class OutputParameters(_Strict):
    """Whether the output is answered as binary tensor data."""

    binary_data: StrictBool | None = None


class RequestedOutput(_Strict):
    """An output the answer carries (every one when the request names none)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_LENGTH)]
    parameters: OutputParameters | None = None


class RequestParameters(_Strict):
    """Whether every output is answered as binary tensor data."""

    binary_data_output: StrictBool | None = None


class InferenceRequest(_Strict):
    """`POST /v2/models/<customer>/infer`, as JSON or as the binary extension's header."""

    id: Annotated[str, StringConstraints(max_length=MAX_REQUEST_ID_LENGTH)] | None = None
    parameters: RequestParameters | None = None
    inputs: Annotated[list[InputTensor], Field(min_length=1, max_length=MAX_TENSORS)]
    outputs: Annotated[list[RequestedOutput], Field(max_length=MAX_TENSORS)] | None = None


@functools.cache
def column_adapter(by_key: bool, name: str) -> TypeAdapter[list[Any]]:
    """Return the validator of one column (a tensor's values) by its row field's type."""
    field_type = (KEY_FIELD_TYPES if by_key else FEATURE_FIELD_TYPES)[name]
    return TypeAdapter(list[field_type], config=ConfigDict(strict=True))  # type: ignore[valid-type]


FORECAST_ADAPTER: TypeAdapter[KeyRowsRequest | FeatureRowsRequest] = TypeAdapter(ForecastRequest)
