"""Typing and validating one customer's daily landing file.

Nothing is lost: every row is either accepted, typed, or quarantined with its line number,
its original fields and the reason; a file that cannot be read at all is a file problem.
"""

from __future__ import annotations

import datetime as dt
import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from retrain_assets.landing import LANDING_COLUMNS

SALES_COLUMNS = ["customer", *LANDING_COLUMNS]
_TRUE, _FALSE = {"1", "true", "yes"}, {"0", "false", "no"}


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


def empty_sales() -> pd.DataFrame:
    """Return an empty, typed sales frame (a copy: callers may modify it)."""
    return _EMPTY_SALES.copy()


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(
        {
            "customer": str, "date": "datetime64[ns]", "store_id": str, "item_id": str,
            "units_sold": "int64", "price": "float64", "on_promo": bool, "stock_on_hand": "int64",
        }
    )[SALES_COLUMNS]


_EMPTY_SALES = _typed(pd.DataFrame({c: pd.Series(dtype=str) for c in SALES_COLUMNS}))


def failed_file(customer: str, file: str, reason: str) -> FileOutcome:
    """Return the outcome of a file that is missing or cannot be read."""
    return FileOutcome(customer, file, empty_sales(), problems=[FileProblem("error", reason)])


def _non_negative_int(values: pd.Series, name: str) -> tuple[pd.Series, pd.Series]:
    number = pd.to_numeric(values.str.strip(), errors="coerce")
    reason = pd.Series("", index=values.index)
    reason[values.str.strip() == ""] = f"{name}: missing"
    reason[(reason == "") & number.isna()] = f"{name}: not a number"
    reason[(reason == "") & ~np.isfinite(number.fillna(0))] = f"{name}: not finite"
    reason[(reason == "") & (number < 0)] = f"{name}: negative"
    reason[(reason == "") & (number.fillna(0) % 1 != 0)] = f"{name}: not a whole number"
    return number, reason


def validate_file(text: str, customer: str, day: dt.date, file: str) -> FileOutcome:
    """Type and validate one landing file for `customer` on partition `day`."""
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        return failed_file(customer, file, f"unreadable CSV: {err}".strip())
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in LANDING_COLUMNS if c not in frame.columns]
    if missing:
        return failed_file(customer, file, f"missing column(s): {', '.join(missing)}")
    outcome = FileOutcome(customer, file, empty_sales())
    unknown = [c for c in frame.columns if c not in LANDING_COLUMNS]
    if unknown:
        outcome.problems.append(
            FileProblem("warning", f"unknown column(s) dropped: {', '.join(unknown)}")
        )
    if frame.columns.duplicated().any():
        return failed_file(customer, file, "duplicate column names in the header")
    if frame.empty:
        return outcome

    lines = pd.Series(np.arange(len(frame)) + 2, index=frame.index)  # line 1 is the header
    reasons: list[pd.Series] = []
    dates = pd.to_datetime(frame["date"].str.strip(), format="%Y-%m-%d", errors="coerce")
    date_reason = pd.Series("", index=frame.index)
    date_reason[dates.isna()] = "date: missing or not YYYY-MM-DD"
    outside = dates.notna() & (dates.dt.date != day)
    date_reason[outside] = "date " + frame["date"].str.strip() + f" is outside partition {day}"
    reasons.append(date_reason)
    for key in ("store_id", "item_id"):
        reasons.append(pd.Series(np.where(frame[key].str.strip() == "", f"{key}: missing", ""),
                                 index=frame.index))
    units, units_reason = _non_negative_int(frame["units_sold"], "units_sold")
    stock, stock_reason = _non_negative_int(frame["stock_on_hand"], "stock_on_hand")
    price = pd.to_numeric(frame["price"].str.strip(), errors="coerce")
    price_reason = pd.Series("", index=frame.index)
    price_reason[price.isna()] = "price: missing or not a number"
    price_reason[(price_reason == "") & ~np.isfinite(price.fillna(0))] = "price: not finite"
    price_reason[(price_reason == "") & (price < 0)] = "price: negative"
    promo_text = frame["on_promo"].str.strip().str.lower()
    promo_reason = pd.Series(
        np.where(promo_text.isin(_TRUE | _FALSE), "", "on_promo: not one of 0/1/true/false"),
        index=frame.index,
    )
    reasons += [units_reason, price_reason, promo_reason, stock_reason]

    reason = reasons[0]
    for more in reasons[1:]:
        joined = np.where(reason == "", more, np.where(more == "", reason, reason + "; " + more))
        reason = pd.Series(joined, index=frame.index)
    reason = _flag_duplicates(frame, reason, lines)

    bad = reason != ""
    for idx in frame.index[bad]:
        outcome.quarantined.append(
            QuarantinedRow(int(lines[idx]), reason[idx], frame.loc[idx].to_dict())
        )
    good = ~bad
    outcome.accepted = _typed(
        pd.DataFrame(
            {
                "customer": customer,
                "date": dates[good],
                "store_id": frame.loc[good, "store_id"].str.strip(),
                "item_id": frame.loc[good, "item_id"].str.strip(),
                "units_sold": units[good].astype("int64"),
                "price": price[good],
                "on_promo": promo_text[good].isin(_TRUE),
                "stock_on_hand": stock[good].astype("int64"),
            }
        )
    ).reset_index(drop=True)
    return outcome


def _flag_duplicates(frame: pd.DataFrame, reason: pd.Series, lines: pd.Series) -> pd.Series:
    """Quarantine repeated (store_id, item_id) rows.

    An exact repeat of an earlier line is quarantined as a copy and the first kept; rows that
    disagree are all quarantined, since nothing says which one is right.
    """
    keys = frame["store_id"].str.strip() + "\x1f" + frame["item_id"].str.strip()
    repeated = keys.duplicated(keep=False) & (frame["store_id"].str.strip() != "")
    if not repeated.any():
        return reason
    reason = reason.copy()
    content = frame[LANDING_COLUMNS].apply(lambda col: col.str.strip()).agg("\x1f".join, axis=1)
    for _, group in frame[repeated].groupby(keys[repeated], sort=False):
        where = group.index
        store, item = frame.at[where[0], "store_id"].strip(), frame.at[where[0], "item_id"].strip()
        if content[where].nunique() == 1:
            extra = f"duplicate of line {lines[where[0]]} for ({store}, {item})"
            targets = where[1:]
        else:
            listed = ", ".join(str(lines[i]) for i in where)
            extra = f"conflicting rows for ({store}, {item}) on lines {listed}"
            targets = where
        for idx in targets:
            reason[idx] = f"{reason[idx]}; {extra}" if reason[idx] else extra
    return reason
