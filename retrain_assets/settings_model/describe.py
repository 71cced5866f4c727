"""A setting's rule in words, for the refusal messages and the generated configuration page.

Derived from the field itself (its type, `Field(ge=..., le=...)` bounds, Literal choices, or
an explicit `rule`), so the message a bad value gets and the page's "value" column are the
code's own bounds and cannot drift from them.
"""

from __future__ import annotations

import types
import typing
from typing import Literal

from annotated_types import Ge, Gt, Le, Lt

from retrain_assets.settings_model.model import FIELDS


def requirement(field: str) -> str:
    """Return what `field`'s value must be, in words: its type, its range or its choices."""
    info = FIELDS[field]
    extra = info.json_schema_extra
    if isinstance(extra, dict) and "rule" in extra:
        return str(extra["rule"])
    kind = _without_none(info.annotation)
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(str(choice) for choice in typing.get_args(kind))
    if kind is bool:
        return "on or off (or true/false, yes/no, 1/0)"
    if kind is int:
        return "a whole number" + _range(info.metadata)
    if kind is float:
        return "a number" + _range(info.metadata)
    return "text"


def _without_none(annotation: object) -> object:
    """Return `X` of `X | None`, anything else unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return kept[0] if len(kept) == 1 else annotation
    return annotation


def _range(metadata: list[object]) -> str:
    """Return " in [1, 52]", " >= 0", " > 0", ... for a field's bounds ("" without any)."""
    low = next(((m.ge, "[", ">=") for m in metadata if isinstance(m, Ge)), None) or next(
        ((m.gt, "(", ">") for m in metadata if isinstance(m, Gt)), None
    )
    high = next(((m.le, "]", "<=") for m in metadata if isinstance(m, Le)), None) or next(
        ((m.lt, ")", "<") for m in metadata if isinstance(m, Lt)), None
    )
    if low and high:
        return f" in {low[1]}{number_text(low[0])}, {number_text(high[0])}{high[1]}"
    if low:
        return f" {low[2]} {number_text(low[0])}"
    if high:
        return f" {high[2]} {number_text(high[0])}"
    return ""


def number_text(value: object) -> str:
    """Return a number as a person writes it: 86400, not 86400.0 or 8.64e+04; 0.999 as is."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float) and float(value).is_integer():
        return str(int(value))
    return str(value)
