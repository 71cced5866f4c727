"""Decoding a request body's JSON strictly, before the request schema sees it.

`json.loads` is lenient where a prediction request must not be: it keeps the last of two equal
keys (so `{"price": 1, "price": -5}` would be read as one of them silently), reads NaN and
Infinity, turns an integer of a million digits into a ValueError and a deeply nested array into
a RecursionError (both a 500 if not caught). Here a duplicate key, a NaN, nesting deeper than
MAX_DEPTH and an integer of more than MAX_INT_DIGITS digits are each a 422 naming where they
are (`rows[3].price`), never echoing the value.
"""

from __future__ import annotations

import json
from typing import Any

from retrain_assets.serving.refusal import InvalidRequest

# The deepest request is a v2 tensor's `[[value]]`: body, inputs, tensor, data, row: 5.
MAX_DEPTH = 6
# Past 2**64 no identifier or feature is meant; a longer integer is read as a float (inf when
# huge), which the schema then refuses at its own path as not a finite number.
MAX_INT_DIGITS = 24


class _Duplicated(dict[str, Any]):
    """An object that had a key twice: the path walk names where it is."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.duplicate = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) == len(pairs):
        return made
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return _Duplicated(pairs, key)
        seen.add(key)
    raise AssertionError("unreachable: fewer keys than pairs means a repeated key")


def _integer(text: str) -> int | float:
    digits = text.lstrip("-")
    return int(text) if len(digits) <= MAX_INT_DIGITS else float(text)


def _refuse_constant(name: str) -> None:
    raise InvalidRequest(
        422,
        f"the body has {name}, which is not a JSON number: send a finite number, or null "
        "for a missing feature",
    )


def child_path(path: str, key: str | int) -> str:
    """Return the JSON-pointer-like path of a member: `rows[3]`, `rows[3].date`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _check_shape(value: Any) -> None:
    """Refuse a duplicate key or nesting past MAX_DEPTH, naming the path (containers only)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidRequest(
                422, f"{path or 'the body'}: nested deeper than {MAX_DEPTH} levels"
            )
        if isinstance(node, _Duplicated):
            where = child_path(path, node.duplicate)
            raise InvalidRequest(422, f"{where}: given twice in one object")
        if isinstance(node, dict):
            members: Any = node.items()
        elif isinstance(node, list):
            members = enumerate(node)
        else:
            continue
        for key, child in members:
            if isinstance(child, dict | list):
                stack.append((child, child_path(path, key), depth + 1))


def parse_json(raw: bytes) -> Any:
    """Return the decoded JSON body, refusing what `json.loads` would let through.

    Raises:
        InvalidRequest: 422, the body is not UTF-8 JSON, has NaN or Infinity, a key twice in
            one object, or nesting deeper than MAX_DEPTH.
    """
    try:
        value = json.loads(
            raw,
            parse_constant=_refuse_constant,
            parse_int=_integer,
            object_pairs_hook=_object,
        )
    except UnicodeDecodeError:
        raise InvalidRequest(422, "the body is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InvalidRequest(
            422,
            f"the body is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
        ) from None
    except RecursionError:
        raise InvalidRequest(422, f"the body is nested deeper than {MAX_DEPTH} levels") from None
    _check_shape(value)
    return value
