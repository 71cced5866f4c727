"""Typing and validating one customer's daily landing file.

Nothing is lost: every row is either accepted, typed, or quarantined with its line number,
its original fields and the reason; a file that cannot be read at all is a file problem.
`landing_csv` cuts the file into rows with true line numbers (pyarrow's parser for the plain
lines), `value_rules` judges each column's distinct values, and this module joins the verdicts,
finds repeated keys and builds the outcome (docs/decisions.md: the engine and the rules).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from retrain_assets.features import value_rules
from retrain_assets.features.landing_csv import (
    LandingCsv,
    LandingRows,
    MalformedLine,
    UnreadableCsv,
)
from retrain_assets.landing import LANDING_COLUMNS

SALES_COLUMNS = ["customer", *LANDING_COLUMNS]
MALFORMED_KEY = "malformed_line"
"""The only key of a malformed row's `raw`: the text of its line."""
_CONTROL = r"[\x00-\x08\x0a-\x1f]"  # escapes both Python's re and Arrow's RE2 read
CONTROL_CHARACTERS = re.compile(_CONTROL)
"""C0 control characters other than tab: never valid inside a value."""


@dataclass(frozen=True)
class QuarantinedRow:
    """A row that did not pass, kept whole with the reason."""

    line: int
    reason: str
    raw: dict[str, str]


@dataclass(frozen=True)
class FileProblem:
    """Something about the file itself: `error` means none of its rows were accepted."""

    severity: str
    reason: str


@dataclass
class FileOutcome:
    """What became of one landing file."""

    customer: str
    file: str
    accepted: pd.DataFrame
    quarantined: list[QuarantinedRow] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Return True when the file could not be used at all (missing or unreadable)."""
        return any(p.severity == "error" for p in self.problems)


_SALES_DTYPES: dict[str, str | type[object]] = {
    "customer": object,
    "date": "datetime64[ns]",
    "store_id": object,
    "item_id": object,
    "units_sold": "int64",
    "price": "float64",
    "on_promo": bool,
    "stock_on_hand": "int64",
}


def empty_sales() -> pd.DataFrame:
    """Return an empty, typed sales frame (a copy: callers may modify it)."""
    return pd.DataFrame({c: pd.Series(dtype=_SALES_DTYPES[c]) for c in SALES_COLUMNS})


def failed_file(customer: str, file: str, reason: str) -> FileOutcome:
    """Return the outcome of a file that is missing or cannot be read."""
    return FileOutcome(customer, file, empty_sales(), problems=[FileProblem("error", reason)])


def column_names(header: list[str]) -> list[str]:
    """Name the header's columns as the original pandas reader did, then strip them.

    An empty name becomes `Unnamed: <position>`, and a repeated one `<name>.1`, `<name>.2`.
    """
    names = [name or f"Unnamed: {i}" for i, name in enumerate(header)]
    counts: dict[str, int] = defaultdict(int)
    for i, name in enumerate(names):
        count = counts[name]
        while count > 0:
            counts[name] = count + 1
            name = f"{name}.{count}"
            count = counts[name]
        names[i] = name
        counts[name] = count + 1
    return [name.strip() for name in names]


def _utf8(data: bytes | str) -> bytes:
    """Return the file as UTF-8 bytes.

    Raises:
        UnicodeDecodeError: it is not UTF-8 text.
    """
    if isinstance(data, str):
        return data.encode("utf-8")
    if not data.isascii():
        data.decode("utf-8")
    return data


def _header_error(names: list[str]) -> str | None:
    missing = [c for c in LANDING_COLUMNS if c not in names]
    if missing:
        return f"missing column(s): {', '.join(missing)}"
    if len(set(names)) != len(names):
        return "duplicate column names in the header"
    return None


def validate_file(data: bytes | str, customer: str, day: dt.date, file: str) -> FileOutcome:
    """Type and validate one landing file (UTF-8 bytes or text) for `customer` on `day`."""
    try:
        data = _utf8(data)
    except UnicodeDecodeError as err:
        reason = f"unreadable: not UTF-8 text ({err.reason} at byte {err.start})"
        return failed_file(customer, file, reason)
    try:
        csv = LandingCsv(data)
        names = column_names(csv.header)
        if error := _header_error(names):
            return failed_file(customer, file, error)
        rows = csv.rows()
    except UnreadableCsv as err:
        return failed_file(customer, file, f"unreadable CSV: {err}")
    del csv, data  # the file's bytes and line positions
    unknown = [_shown(c) for c in names if c not in LANDING_COLUMNS]
    problems = (
        [FileProblem("warning", f"unknown column(s) dropped: {', '.join(unknown)}")]
        if unknown
        else []
    )
    judged = _judge(rows, names, day)
    good = rows.in_file_order[~judged.bad[rows.in_file_order]]
    malformed = rows.malformed
    del rows  # every row's text: let it go before the records and the typed columns are made
    pa.default_memory_pool().release_unused()
    quarantined = _quarantined(judged, malformed, names)
    # An empty typed frame only when nothing was accepted: building one costs a millisecond.
    accepted = _accepted(judged.columns, good, customer, day) if len(good) else empty_sales()
    return FileOutcome(customer, file, accepted, quarantined, problems)


@dataclass(frozen=True)
class _Column:
    """One landing column: each row's index into its distinct values, and their verdicts."""

    indices: np.ndarray
    raw: pa.Array
    distinct: pa.Array
    verdicts: value_rules.Verdicts

    def bad(self) -> np.ndarray:
        return (self.verdicts.reasons != "")[self.indices]

    def stripped_at(self, positions: np.ndarray) -> list[str]:
        return self.distinct.take(pa.array(self.indices[positions])).to_pylist()

    def raw_at(self, positions: np.ndarray) -> list[str]:
        """Return the original texts at `positions`; equal texts are one string object."""
        wanted, inverse = np.unique(self.indices[positions], return_inverse=True)
        words = np.array(self.raw.take(pa.array(wanted)).to_pylist(), dtype=object)
        return words[inverse].tolist()


def _judge_column(values: pa.ChunkedArray, name: str, day: dt.date) -> _Column:
    encoded = pc.dictionary_encode(values.combine_chunks())
    distinct = value_rules.stripped(encoded.dictionary)
    if name == "date":
        verdicts = value_rules.date_verdicts(distinct, day)
    elif name in ("store_id", "item_id"):
        verdicts = value_rules.key_verdicts(distinct.to_pylist(), name)
    elif name == "price":
        verdicts = value_rules.price_verdicts(distinct)
    elif name == "on_promo":
        verdicts = value_rules.promo_verdicts(distinct.to_pylist())
    else:
        verdicts = value_rules.count_verdicts(distinct, name)
    # The smallest index type that holds them (a column has few distinct values): less memory.
    indices = encoded.indices.to_numpy().astype(np.min_scalar_type(len(distinct)))
    return _Column(indices, encoded.dictionary, distinct, verdicts)


@dataclass(frozen=True)
class _Judged:
    """Every row judged; what it takes to write the records and type the good rows."""

    columns: dict[str, _Column]
    bad: np.ndarray
    positions: np.ndarray  # of the bad rows, ascending
    lines: np.ndarray  # of the bad rows
    reasons: list[str]  # of the bad rows
    others: pa.Table  # the bad rows' values of the columns that are not landing columns


def _judge(rows: LandingRows, names: list[str], day: dt.date) -> _Judged:
    """Judge every row: each landing column, then which rows are bad and why."""
    table = rows.fields
    others = [i for i, name in enumerate(names) if name not in LANDING_COLUMNS]
    if table.num_rows == 0:
        nothing = np.zeros(0, dtype=np.int64)
        return _Judged({}, nothing.astype(bool), nothing, nothing, [], table.select(others))
    columns = {
        name: _judge_column(table.column(names.index(name)), name, day) for name in LANDING_COLUMNS
    }
    bad = np.zeros(table.num_rows, dtype=bool)
    for column in columns.values():
        bad |= column.bad()
    controls = _control_characters(table, names, rows.suspects)
    repeats = _repeated_keys(columns, rows.lines)
    bad[[position for position, _ in controls]] = True
    bad[list(repeats)] = True
    positions = np.flatnonzero(bad)
    return _Judged(
        columns,
        bad,
        positions,
        rows.lines[positions],
        _reasons(columns, controls, repeats, positions),
        table.select(others).take(pa.array(positions)),
    )


def _quarantined(
    judged: _Judged, malformed: list[MalformedLine], names: list[str]
) -> list[QuarantinedRow]:
    """Return the quarantine records of the bad and the malformed rows, by line."""
    records = [QuarantinedRow(m.line, m.reason, {MALFORMED_KEY: m.text}) for m in malformed]
    if not len(judged.positions):
        return records
    others = iter(judged.others.columns)
    raw_columns = [
        judged.columns[name].raw_at(judged.positions)
        if name in LANDING_COLUMNS
        else next(others).to_pylist()
        for name in names
    ]
    raws = [dict(zip(names, values, strict=True)) for values in zip(*raw_columns, strict=True)]
    records += [
        QuarantinedRow(line, reason, raw)
        for line, reason, raw in zip(judged.lines.tolist(), judged.reasons, raws, strict=True)
    ]
    return sorted(records, key=lambda row: row.line)


def _control_characters(
    table: pa.Table, names: list[str], suspects: np.ndarray
) -> dict[tuple[int, str], str]:
    """Find control characters in the landing values of the rows that may hold them."""
    found: dict[tuple[int, str], str] = {}
    if not len(suspects):
        return found
    for name in LANDING_COLUMNS:
        values = table.column(names.index(name)).take(pa.array(suspects))
        hits = np.flatnonzero(
            pc.match_substring_regex(values, _CONTROL).to_numpy(zero_copy_only=False)
        )
        texts = values.take(pa.array(hits)).to_pylist()
        for position, value in zip(suspects[hits].tolist(), texts, strict=True):
            characters = sorted(set(CONTROL_CHARACTERS.findall(value)))
            plural = "s" if len(characters) > 1 else ""
            listed = ", ".join(f"U+{ord(c):04X}" for c in characters)
            found[(position, name)] = f"{name}: control character{plural} {listed}"
    return found


def _shown(word: str) -> str:
    """Return a name or key as it can appear in a reason: control characters escaped."""
    if CONTROL_CHARACTERS.search(word):
        return word.encode("unicode_escape").decode("ascii")
    return word


def _word_codes(column: _Column) -> np.ndarray:
    """Number each row's stripped key, equal texts alike (0, 1, ... in order of appearance)."""
    first: dict[str, int] = {}
    codes = [first.setdefault(word, len(first)) for word in column.verdicts.values]
    return np.asarray(codes, dtype=column.indices.dtype)[column.indices]


def _repeated_keys(columns: dict[str, _Column], lines: np.ndarray) -> dict[int, str]:
    """Quarantine repeated (store_id, item_id) rows; return the reason per row position.

    An exact repeat of an earlier line is quarantined as a copy and the first kept; rows that
    disagree are all quarantined, since nothing says which one is right.
    """
    stores, items = columns["store_id"], columns["item_id"]
    store_codes, item_codes = _word_codes(stores), _word_codes(items)
    # Only rows whose store and item both occur again can repeat a key: number those densely.
    store_again, item_again = np.bincount(store_codes) > 1, np.bincount(item_codes) > 1
    candidates = np.flatnonzero(store_again[store_codes] & item_again[item_codes] & ~stores.bad())
    store_rank, item_rank = np.cumsum(store_again) - 1, np.cumsum(item_again) - 1
    item_count = int(item_again.sum())
    keys = store_rank[store_codes[candidates]] * item_count
    keys += item_rank[item_codes[candidates]]
    positions = candidates[_repeated(keys, int(store_again.sum()) * item_count)]
    if not len(positions):
        return {}
    positions = positions[np.argsort(lines[positions], kind="stable")]  # file order
    contents = list(zip(*(c.stripped_at(positions) for c in columns.values()), strict=True))
    keys = store_codes[positions].astype(np.int64) * len(item_again) + item_codes[positions]
    groups: dict[int, list[int]] = defaultdict(list)
    for index, key in enumerate(keys.tolist()):
        groups[key].append(index)
    reasons: dict[int, str] = {}
    store_at, item_at = LANDING_COLUMNS.index("store_id"), LANDING_COLUMNS.index("item_id")
    for members in groups.values():
        first = contents[members[0]]
        key = f"({_shown(first[store_at])}, {_shown(first[item_at])})"
        at = [int(positions[m]) for m in members]
        if all(contents[m] == first for m in members):
            for position in at[1:]:
                reasons[position] = f"duplicate of line {lines[at[0]]} for {key}"
        else:
            listed = ", ".join(str(lines[p]) for p in at)
            for position in at:
                reasons[position] = f"conflicting rows for {key} on lines {listed}"
    return reasons


def _repeated(keys: np.ndarray, possible: int) -> np.ndarray:
    """Return which keys occur more than once; `possible` bounds them (0 <= key < possible)."""
    if possible <= len(keys):  # count them
        return np.bincount(keys, minlength=possible)[keys] > 1
    order = np.argsort(keys, kind="stable")  # too many possible keys to count: sort them
    same = keys[order[1:]] == keys[order[:-1]]
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[order[1:][same]] = True
    repeated[order[:-1][same]] = True
    return repeated


def _reasons(
    columns: dict[str, _Column],
    controls: dict[tuple[int, str], str],
    repeats: dict[int, str],
    positions: np.ndarray,
) -> list[str]:
    """Join each quarantined row's reasons, in column order, the repeat last.

    `positions` must be sorted (they are row positions, not lines).
    """
    parts = {name: c.verdicts.reasons[c.indices[positions]] for name, c in columns.items()}
    if controls:
        where = np.searchsorted(positions, [position for position, _ in controls])
        for at, ((_, name), reason) in zip(where.tolist(), controls.items(), strict=True):
            parts[name][at] = reason
    repeat = value_rules.filled(len(positions), "")
    if repeats:
        repeat[np.searchsorted(positions, list(repeats))] = list(repeats.values())
    return ["; ".join(filter(None, row)) for row in zip(*parts.values(), repeat, strict=True)]


def _accepted(
    columns: dict[str, _Column], good: np.ndarray, customer: str, day: dt.date
) -> pd.DataFrame:
    """Return the rows at `good` (in file order), typed."""
    typed = {
        name: column.verdicts.values[column.indices[good]]
        for name, column in columns.items()
        if name != "date"
    }
    return pd.DataFrame(
        {
            "customer": value_rules.filled(len(good), customer),
            "date": np.full(len(good), np.datetime64(day, "ns")),
            **typed,
        },
        columns=SALES_COLUMNS,
        copy=False,  # no consolidation: it would copy every column once more
    )
