"""Decoding a request body's JSON strictly, before the request schema sees it.

`json.loads` is lenient where a prediction request must not be: it keeps the last of two equal
keys (so `{"price": 1, "price": -5}` would be read as one of them silently), reads NaN and
Infinity, turns an integer of a million digits into a ValueError and a deeply nested array into
a RecursionError (both a 500 if not caught). Here a duplicate key and a NaN are each a 422
naming where they are (`rows[3].price`), never echoing the value; an integer of more than
MAX_INT_DIGITS digits is read as a float (the schema then refuses it where it is), and nesting
deeper than the parser takes is a 422. Nesting within that is bounded by the schema: no field
of it nests deeper than a v2 tensor's `[[value]]` (5 levels), so anything deeper is refused at
its path as a value of the wrong type. The walk that names a duplicate's path runs only when
the decoder saw one: the common body costs one hook call per object.
"""

from __future__ import annotations

import json
from typing import Any

from retrain_assets.serving.refusal import InvalidRequest

# Past 2**64 no identifier or feature is meant; a longer integer is read as a float (inf when
# huge), which the schema then refuses at its own path as not a finite number.
MAX_INT_DIGITS = 24


class _Duplicated(dict[str, Any]):
    """An object that had a key twice: the path walk names where it is."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.duplicate = key


def _duplicated(pairs: list[tuple[str, Any]]) -> _Duplicated:
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


def _refuse_duplicate(value: Any) -> None:
    """Refuse the first object with a key twice, naming its path (containers only)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
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
                stack.append((child, child_path(path, key)))


def parse_json(raw: bytes) -> Any:
    """Return the decoded JSON body, refusing what `json.loads` would let through.

    Raises:
        InvalidRequest: 422, the body is not UTF-8 JSON, has NaN or Infinity, a key twice in
            one object, or nesting deeper than the parser takes.
    """
    duplicates = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicates
        made = dict(pairs)
        if len(made) == len(pairs):
            return made
        duplicates = True
        return _duplicated(pairs)

    try:
        value = json.loads(
            raw,
            parse_constant=_refuse_constant,
            parse_int=_integer,
            object_pairs_hook=pairs_hook,
        )
    except UnicodeDecodeError:
        raise InvalidRequest(422, "the body is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise InvalidRequest(
            422,
            f"the body is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
        ) from None
    except RecursionError:
        raise InvalidRequest(422, "the body is nested deeper than any request is") from None
    if duplicates:
        _refuse_duplicate(value)
    return value
