"""A schema violation said as the service says every refusal: where (a path), then what.

pydantic reports each violation with a location (`("rows", 3, "date")`) and a type
(`string_pattern_mismatch`); a union reports one per alternative. Here each location becomes
a path (`rows[3].date`, `inputs[price].data[7]`), the alternatives of one location become one
problem (the one that got furthest: a constraint rather than a type), and the type becomes
words fit for the field. No message shows the value sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from retrain_assets.serving.refusal import InvalidRequest
from retrain_assets.serving.request_schema import (
    DATE_FIELD,
    ID_FIELDS,
    MAX_ID_LENGTH,
    MODEL_FEATURES,
    FeatureRow,
    InferenceRequest,
    InputParameters,
    InputTensor,
    KeyRow,
    OutputParameters,
    RequestedOutput,
    RequestParameters,
)

MAX_PROBLEMS_SHOWN = 5
Path = Callable[[tuple[int | str, ...]], str]
_MODELS = (
    KeyRow,
    FeatureRow,
    InferenceRequest,
    InputTensor,
    InputParameters,
    OutputParameters,
    RequestedOutput,
    RequestParameters,
)
FIELD_NAMES = frozenset({"rows", *(name for model in _MODELS for name in model.model_fields)})
_ID_WORDS = {
    "string_too_short": f"must have 1 to {MAX_ID_LENGTH} characters",
    "string_too_long": f"must have 1 to {MAX_ID_LENGTH} characters",
    "string_pattern_mismatch": "must not contain '/' or control characters",
    "string_unicode": "must be valid Unicode text",
}
_PROMO_RANGE = "out of range: must be 0 or 1 (false or true)"


def problems_refusal(problems: Sequence[str]) -> InvalidRequest:
    """Return the 422 of these problems: the first few shown, the rest counted."""
    shown = list(problems[:MAX_PROBLEMS_SHOWN])
    more = len(problems) - len(shown)
    tail = f" (and {more} more problem(s))" if more else ""
    return InvalidRequest(422, "; ".join(shown) + tail)


def field_path(loc: tuple[int | str, ...]) -> str:
    """Return `rows[3].date` for `("rows", 3, "date")`, leaving out union alternatives' tags.

    A tensor's value is named by its row (`data[7]`), whichever of `7` and `[7]` it failed as.
    """
    path = ""
    for at, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
            if at and loc[at - 1] == "data":
                break
        elif part in FIELD_NAMES:
            path += f".{part}" if path else part
    return path


def _field_of(path: str) -> str:
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def _words(error: ErrorDetails, field: str, missing: str) -> str:
    kind = error["type"]
    if kind == "missing":
        return missing
    if kind == "extra_forbidden":
        return "unknown field"
    if field in ID_FIELDS:
        return _ID_WORDS.get(kind, "must be a string")
    if field == DATE_FIELD:
        return "is not a calendar date" if kind == "calendar_date" else "must be a date YYYY-MM-DD"
    if field in MODEL_FEATURES:
        if kind == "finite_number" or (kind == "float_type" and type(error["input"]) is int):
            return "must be a finite number"
        if kind.startswith(("greater_than", "less_than", "multiple_of")):
            return "out of range: a price is 0 or more" if field == "price" else _PROMO_RANGE
        return "must be a number (or null for a missing value)"
    if field == "data":
        return "must be text, a number, true/false or null (or a list of one of them)"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be an object"
    if kind == "list_type":
        return "must be a list"
    return str(error["msg"])[:1].lower() + str(error["msg"])[1:]


def _furthest(errors: list[ErrorDetails]) -> ErrorDetails:
    """Return the alternative that got past its type check, else the first."""
    for error in errors:
        if not error["type"].endswith("_type"):
            return error
    return errors[0]


def problems(
    error: ValidationError,
    path: Path = field_path,
    missing: str = "missing",
    field: str | None = None,
) -> list[str]:
    """Return every violation of `error` as "path: what is wrong", one per path.

    `path` turns a location into the path shown; `missing` is what a missing feature is called
    (e.g. "missing feature"); `field` is the row field every value is of (a v2 tensor's), else
    the path's last field.
    """
    grouped: dict[str, list[ErrorDetails]] = {}
    for details in error.errors(include_url=False, include_context=False):
        unknown = details["type"] == "extra_forbidden"
        where = path(tuple(details["loc"])) if not unknown else path_unknown(path, details)
        grouped.setdefault(where, []).append(details)
    found = []
    for where, errors in grouped.items():
        of = field or _field_of(where)
        words = _words(_furthest(errors), of, missing if of in MODEL_FEATURES else "missing")
        found.append(f"{where or 'the body'}: {words}")
    return found


def refusal(
    error: ValidationError, path: Path = field_path, missing: str = "missing"
) -> InvalidRequest:
    """Return the 422 naming the violations of `error` (see `problems`)."""
    return problems_refusal(problems(error, path, missing))


def path_unknown(path: Path, details: ErrorDetails) -> str:
    """Return the path of an unknown field: its parent's path, then its name."""
    *parent, name = details["loc"]
    base = path(tuple(parent))
    return f"{base}.{name}" if base else str(name)
