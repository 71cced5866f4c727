"""The rules for the values of each landing column, applied once per distinct value.

A column of a landing file holds few distinct values (a day, some hundred counts, a few
thousand prices), so validation dictionary-encodes it and judges each distinct value once.
Plain values (digits; digits with a decimal point) are judged with Arrow compute; the others
(signs, exponents, words, very long numbers) in Python, with the original pandas rules and
exact decimal arithmetic for integers. A verdict is a typed value and a reason, "" when good.

Integers (`units_sold`, `stock_on_hand`): the text, stripped, must be a number that
`pandas.to_numeric` reads (so "3.0", "1e3", "+5", " 12 " are numbers, "0x10" and "1_000" are
not). Its exact decimal value must be finite ("inf" is not), not negative ("-0" is zero),
whole ("3.5" is not) and at most 2**63 - 1, the largest int64 ("1e20" and "9223372036854775808"
are out of range). The value kept is that exact integer, never a float rounded to one.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

PY_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Exactly the characters Python's `str.strip()` removes (the original rules stripped so)."""

INT64_MAX = 2**63 - 1
TRUE_WORDS, FALSE_WORDS = frozenset({"1", "true", "yes"}), frozenset({"0", "false", "no"})
_PLAIN_INTEGER_DIGITS = 18  # any 18 digits fit in an int64
_PLAIN_PRICE = r"^[0-9]+(\.[0-9]+)?$"
_PLAIN_PRICE_LENGTH = 16  # at most 15 digits and a point: Arrow and pandas give the same float


@dataclass(frozen=True)
class Verdicts:
    """One typed value and one reason ("" when good) per distinct value of a column."""

    values: np.ndarray
    reasons: np.ndarray


def stripped(texts: pa.Array) -> pa.Array:
    """Strip what Python's `str.strip()` strips from each text."""
    return pc.utf8_trim(texts, PY_WHITESPACE)


def filled(count: int, value: object) -> np.ndarray:
    """Return an object array holding `value` everywhere, the same object, never a copy of it.

    (`np.full(count, "text", dtype=object)` makes a new string for every element.)
    """
    array = np.empty(count, dtype=object)
    array.fill(value)
    return array


def _reasons(count: int) -> np.ndarray:
    return filled(count, "")


def date_verdicts(texts: pa.Array, day: dt.date) -> Verdicts:
    """Dates must read as YYYY-MM-DD (as pandas reads that format) and be the partition's day."""
    reasons = _reasons(len(texts))
    other = np.flatnonzero(~pc.equal(texts, day.isoformat()).to_numpy(zero_copy_only=False))
    if len(other):
        words = texts.take(pa.array(other)).to_pylist()
        parsed = pd.to_datetime(pd.Series(words, dtype=object), format="%Y-%m-%d", errors="coerce")
        for position, word, when in zip(other.tolist(), words, parsed, strict=True):
            if pd.isna(when):
                reasons[position] = "date: missing or not YYYY-MM-DD"
            elif when.date() != day:
                reasons[position] = f"date {word} is outside partition {day}"
    return Verdicts(np.full(len(texts), np.datetime64(day, "ns")), reasons)


def key_verdicts(words: list[str], name: str) -> Verdicts:
    """Keys (`store_id`, `item_id`) must not be empty; the value is the stripped text."""
    reasons = np.array(["" if word else f"{name}: missing" for word in words], dtype=object)
    return Verdicts(np.array(words, dtype=object), reasons)


def count_verdicts(texts: pa.Array, name: str) -> Verdicts:
    """Counts must be whole, non-negative and fit in an int64, exactly (module docstring)."""
    plain = pc.and_(
        pc.ascii_is_decimal(texts),
        pc.less_equal(pc.binary_length(texts), _PLAIN_INTEGER_DIGITS),
    )
    values = pc.cast(pc.if_else(plain, texts, "0"), pa.int64()).to_numpy().copy()
    reasons = _reasons(len(texts))
    other = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if len(other):
        words = texts.take(pa.array(other)).to_pylist()
        for position, word, number in zip(other.tolist(), words, _numbers(words), strict=True):
            values[position], reasons[position] = _count_verdict(word, number, name)
    return Verdicts(values, reasons)


def _numbers(words: list[str]) -> np.ndarray:
    """Read texts as pandas did (`to_numeric`, NaN when not a number), as floats."""
    numbers = pd.to_numeric(pd.Series(words, dtype=object), errors="coerce")
    return numbers.to_numpy(dtype=float, na_value=np.nan)


def _count_verdict(word: str, number: float, name: str) -> tuple[int, str]:
    if word == "":
        return 0, f"{name}: missing"
    if math.isnan(number):
        return 0, f"{name}: not a number"
    try:
        exact = Decimal(word)
    except InvalidOperation:  # a form pandas reads and Decimal does not: take pandas' number
        exact = Decimal(number)
    if not exact.is_finite():
        return 0, f"{name}: not finite"
    if exact < 0:
        return 0, f"{name}: negative"
    if exact != exact.to_integral_value():
        return 0, f"{name}: not a whole number"
    if exact > INT64_MAX:
        return 0, f"{name}: out of range (above {INT64_MAX})"
    return int(exact), ""


def price_verdicts(texts: pa.Array) -> Verdicts:
    """Prices must be numbers (as pandas reads them), finite and not negative."""
    plain = pc.and_(
        pc.match_substring_regex(texts, _PLAIN_PRICE),
        pc.less_equal(pc.binary_length(texts), _PLAIN_PRICE_LENGTH),
    )
    values = pc.cast(pc.if_else(plain, texts, "0"), pa.float64()).to_numpy().copy()
    reasons = _reasons(len(texts))
    other = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if len(other):
        words = texts.take(pa.array(other)).to_pylist()
        for position, number in zip(other.tolist(), _numbers(words), strict=True):
            values[position] = number
            if math.isnan(number):
                reasons[position] = "price: missing or not a number"
            elif not math.isfinite(number):
                reasons[position] = "price: not finite"
            elif number < 0:
                reasons[position] = "price: negative"
    return Verdicts(values, reasons)


def promo_verdicts(words: list[str]) -> Verdicts:
    """`on_promo` must be one of 1/true/yes or 0/false/no, in any case."""
    lowered = [word.lower() for word in words]
    reasons = np.array(
        [
            ""
            if word in TRUE_WORDS or word in FALSE_WORDS
            else "on_promo: not one of 0/1/true/false"
            for word in lowered
        ],
        dtype=object,
    )
    return Verdicts(np.array([word in TRUE_WORDS for word in lowered], dtype=bool), reasons)
