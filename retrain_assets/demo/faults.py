"""Landing files with realistic faults, for tests, benchmarks and demos of validation.

Each fault kind turns one good CSV row (its fields as text) into what a customer's export might
really send instead: a wrong value, a padded or quoted one, an integer too large for int64, a
control character, a blank line, a value with a line break, a row with a field too many or too
few, a quote that never closes. Validation must keep the good rows and quarantine the bad ones.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

Fault = Callable[[list[str], np.random.Generator], str]
_T = TypeVar("_T")
_DATE, _STORE, _ITEM, _UNITS, _PRICE, _PROMO, _STOCK = range(7)


def _set(fields: list[str], index: int, value: str) -> str:
    return ",".join([*fields[:index], value, *fields[index + 1 :]])


def _pick(rng: np.random.Generator, choices: Sequence[_T]) -> _T:
    return choices[int(rng.integers(len(choices)))]


def _other_day(fields: list[str], rng: np.random.Generator) -> str:
    day = dt.date.fromisoformat(fields[_DATE]) + dt.timedelta(days=_pick(rng, (-1, 1, 30)))
    return _set(fields, _DATE, day.isoformat())


def _several(fields: list[str], rng: np.random.Generator) -> str:
    fields = [*fields]
    fields[_UNITS], fields[_PRICE], fields[_PROMO] = "-2", "abc", "maybe"
    return ",".join(fields)


def _padded(fields: list[str], rng: np.random.Generator) -> str:
    fields = [*fields]
    fields[_STORE], fields[_UNITS] = f" {fields[_STORE]}\t", f" {fields[_UNITS]} "
    fields[_PROMO] = _pick(rng, (" TRUE ", "Yes", "no ", "False"))
    return ",".join(fields)


def _quoted(fields: list[str], rng: np.random.Generator) -> str:
    fields = [*fields]
    fields[_STORE], fields[_PRICE] = f'"{fields[_STORE]}"', f'"{fields[_PRICE]}"'
    item = fields[_ITEM]
    fields[_ITEM] = _pick(rng, (f'"{item}"', f'"{item},b"', f'"{item}""x"'))
    return ",".join(fields)


def _quoted_newline(fields: list[str], rng: np.random.Generator) -> str:
    item = fields[_ITEM]
    return _set(fields, _ITEM, f'"{item[:2]}\n{item[2:]}"')


def _control(fields: list[str], rng: np.random.Generator) -> str:
    index = _pick(rng, (_STORE, _ITEM, _UNITS))
    value = fields[index]
    return _set(fields, index, value[:1] + _pick(rng, ("\x01", "\x1b", "\x0b", "\x1f")) + value[1:])


def _odd_numbers(fields: list[str], rng: np.random.Generator) -> str:
    fields = [*fields]
    fields[_UNITS], fields[_PRICE] = _pick(rng, ("3.0", "1e2", "+5", "-0")), "1e1"
    return ",".join(fields)


def _nul(fields: list[str], rng: np.random.Generator) -> str:
    index = _pick(rng, (_STORE, _ITEM))
    return _set(fields, index, fields[index][:2] + "\x00" + fields[index][2:])


FAULTS: dict[str, Fault] = {
    "negative_units": lambda f, rng: _set(f, _UNITS, f"-{int(rng.integers(1, 9))}"),
    "negative_price": lambda f, rng: _set(f, _PRICE, "-1.25"),
    "other_day": _other_day,
    "bad_date": lambda f, rng: _set(f, _DATE, _pick(rng, ("2026/01/02", "", "tomorrow", "2026"))),
    "missing_store": lambda f, rng: _set(f, _STORE, _pick(rng, ("", "   "))),
    "missing_item": lambda f, rng: _set(f, _ITEM, ""),
    "price_not_a_number": lambda f, rng: _set(f, _PRICE, _pick(rng, ("abc", "", "NaN", '"1,5"'))),
    "price_not_finite": lambda f, rng: _set(f, _PRICE, _pick(rng, ("inf", "-Infinity"))),
    "promo_unknown": lambda f, rng: _set(f, _PROMO, _pick(rng, ("maybe", "2", "", "y"))),
    "fractional_stock": lambda f, rng: _set(f, _STOCK, _pick(rng, ("1.5", "0.25"))),
    "units_not_a_number": lambda f, rng: _set(f, _UNITS, _pick(rng, ("abc", "nan", "1_0"))),
    "units_not_finite": lambda f, rng: _set(f, _UNITS, _pick(rng, ("inf", "Infinity"))),
    "stock_missing": lambda f, rng: _set(f, _STOCK, ""),
    "several": _several,
    "padded": _padded,
    "quoted": _quoted,
    "odd_numbers": _odd_numbers,
    "duplicate": lambda f, rng: ",".join(f),  # the caller copies another row here
    "conflict": lambda f, rng: _set(f, _UNITS, str(int(f[_UNITS]) + 1)),  # and here
    "huge_integer": lambda f, rng: _set(
        f,
        _pick(rng, (_UNITS, _STOCK)),
        _pick(rng, ("1e20", "9223372036854775808", "99999999999999999999", "1.5e19")),
    ),
    "nul_byte": _nul,
    "control_character": _control,
    "blank_line": lambda f, rng: _pick(rng, ("", "  ")) + "\n" + ",".join(f),
    "quoted_newline": _quoted_newline,
    "extra_field": lambda f, rng: ",".join(f) + ",x",
    "missing_field": lambda f, rng: ",".join(f[:-1]),
    "unterminated_quote": lambda f, rng: _set(f, _ITEM, '"' + f[_ITEM]),
}
"""Every fault kind by name; `duplicate` and `conflict` copy another row of the file."""

TRUTHFUL_BEFORE = tuple(
    name
    for name in FAULTS
    if name
    not in {
        "huge_integer",
        "nul_byte",
        "control_character",
        "blank_line",
        "quoted_newline",
        "extra_field",
        "missing_field",
        "unterminated_quote",
    }
)
"""The kinds the original (pandas) validator already handled truthfully."""


def with_faults(
    frame: pd.DataFrame, fraction: float, kinds: Sequence[str], seed: int, shuffle: bool = False
) -> str:
    """Return a landing frame as CSV text with `fraction` of its rows turned into faults.

    Faulty rows are spread at random and their kinds drawn in turn from `kinds`. A `duplicate`
    or `conflict` row repeats (or changes) a row that stays good; `blank_line` keeps its row and
    puts a blank line before it. With `shuffle`, rows are in random order.
    """
    rng = np.random.default_rng(seed)
    header, *lines = frame.to_csv(index=False, lineterminator="\n").splitlines()
    if shuffle:
        lines = [lines[i] for i in rng.permutation(len(lines))]
    chosen = rng.choice(len(lines), size=round(len(lines) * fraction), replace=False)
    faulty = set(chosen.tolist())
    good = np.array([i for i in range(len(lines)) if i not in faulty])
    for turn, index in enumerate(chosen.tolist()):
        kind = kinds[turn % len(kinds)]
        source = lines[int(rng.choice(good))] if kind in {"duplicate", "conflict"} else lines[index]
        lines[index] = FAULTS[kind](source.split(","), rng)
    return "\n".join([header, *lines]) + "\n"
