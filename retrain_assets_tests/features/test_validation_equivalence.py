"""The validator against the saved outputs of the original pandas validator.

`data/validation_before` holds eight shuffled landing files of one tenant with 15 % faulty rows
of every kind the original validator already judged truthfully (retrain_assets/demo/faults.py,
TRUTHFUL_BEFORE), and what that validator made of them: the accepted rows, the quarantine
records and the store-day features of the last day (see its README). The validator must give
the same, and, on the same file with the faults it lied about added, the corrected outcome.
"""

import datetime as dt
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from retrain_assets.features.feature_math import WINDOWS, store_day_features
from retrain_assets.features.validation import empty_sales, validate_file

BEFORE = Path(__file__).parent / "data" / "validation_before"
DAYS = [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(8)]
LAST = DAYS[-1]
TOO_LARGE = "out of range (above 9223372036854775807)"


def _validate(data: bytes, day: dt.date):
    outcome = validate_file(data, "acme", day, f"acme/{day}.csv")
    assert not outcome.problems
    return outcome


def _records(outcome) -> list[tuple[int, str, dict]]:
    return [(q.line, q.reason, q.raw) for q in outcome.quarantined]


def _reference_records(day: dt.date) -> list[tuple[int, str, dict]]:
    rows = [json.loads(line) for line in (BEFORE / "quarantined.jsonl").read_text().splitlines()]
    return [(r["line"], r["reason"], r["raw"]) for r in rows if r["day"] == str(day)]


@pytest.fixture(scope="module")
def reference_sales() -> pd.DataFrame:
    return pd.read_parquet(BEFORE / "accepted.parquet")


def test_truthful_faults_give_the_same_rows_records_and_features(reference_sales):
    accepted = []
    for day in DAYS:
        outcome = _validate((BEFORE / f"{day}.csv").read_bytes(), day)
        assert _records(outcome) == _reference_records(day), day
        accepted.append(outcome.accepted)
    sales = pd.concat(accepted, ignore_index=True)
    assert (sales.dtypes == empty_sales().dtypes).all()
    pd.testing.assert_frame_equal(sales, reference_sales, check_exact=True)
    features = store_day_features(sales, [LAST], {"acme": "US"})
    # The saved features predate issue 39's rolling means (ending at lag 7): every other column.
    rolling = [f"rolling_mean_{window}" for window in WINDOWS]
    pd.testing.assert_frame_equal(
        features.drop(columns=rolling),
        pd.read_parquet(BEFORE / "features.parquet").drop(columns=rolling),
        check_exact=True,
    )


# Faults the original validator lied about, each put after a line of the last day's file, with
# what must become of it: (after line, text, reason, raw); no reason for a blank line.
D = LAST.isoformat()
ROW = {"date": D, "units_sold": "3", "price": "2.5", "on_promo": "0", "stock_on_hand": "4"}
INJECTED = [
    (10, "", None, None),
    (20, "   ", None, None),
    (
        30,
        f'{D},X1,"Y\n1",3,2.5,0,4',
        "item_id: control character U+000A",
        {**ROW, "store_id": "X1", "item_id": "Y\n1"},
    ),
    (
        40,
        f"{D},X2,Y2,1e20,2.5,0,9223372036854775808",
        f"units_sold: {TOO_LARGE}; stock_on_hand: {TOO_LARGE}",
        {
            **ROW,
            "store_id": "X2",
            "item_id": "Y2",
            "units_sold": "1e20",
            "stock_on_hand": "9223372036854775808",
        },
    ),
    (
        50,
        f"{D},X\x003,Y3,3,2.5,0,4",
        "store_id: control character U+0000",
        {**ROW, "store_id": "X\x003", "item_id": "Y3"},
    ),
    (
        60,
        f"{D},X4,Y\x1b4,3,2.5,0,4",
        "item_id: control character U+001B",
        {**ROW, "store_id": "X4", "item_id": "Y\x1b4"},
    ),
    (
        70,
        f"{D},X5,Y5,3,2.5,0,4,extra",
        "malformed row: 8 fields where the header has 7",
        {"malformed_line": f"{D},X5,Y5,3,2.5,0,4,extra"},
    ),
    (
        80,
        f"{D},X6,Y6,3,2.5,0",
        "malformed row: 6 fields where the header has 7",
        {"malformed_line": f"{D},X6,Y6,3,2.5,0"},
    ),
    (
        90,
        f'{D},X7,"Y7,3,2.5,0,4',
        "malformed row: a quoted field is not closed",
        {"malformed_line": f'{D},X7,"Y7,3,2.5,0,4'},
    ),
    (
        10**9,
        f'{D},X8,"Y8,3,2.5,0,4',
        "malformed row: a quoted field is not closed",
        {"malformed_line": f'{D},X8,"Y8,3,2.5,0,4'},
    ),
]


def _with_lies(lines: list[str]) -> tuple[str, dict[int, int], list[tuple[int, str, dict]]]:
    """Return the file with INJECTED added, where each old line went, and the new records."""
    out: list[str] = []
    moved: dict[int, int] = {}
    expected = []
    pending = list(INJECTED)
    for old, text in enumerate(lines, start=1):
        moved[old] = sum(part.count("\n") + 1 for part in out) + 1
        out.append(text)
        while pending and pending[0][0] == old:
            _, fault, reason, raw = pending.pop(0)
            if reason is not None:
                expected.append((sum(part.count("\n") + 1 for part in out) + 1, reason, raw))
            out.append(fault)
    for _, fault, reason, raw in pending:
        expected.append((sum(part.count("\n") + 1 for part in out) + 1, reason, raw))
        out.append(fault)
    return "\n".join(out) + "\n", moved, expected


def _moved_reason(reason: str, moved: dict[int, int]) -> str:
    return re.sub(
        r"(?<=line )\d+|(?<=lines )[\d, ]+",
        lambda m: ", ".join(str(moved[int(n)]) for n in m[0].split(", ")),
        reason,
    )


def test_the_faults_it_lied_about_are_quarantined_at_their_true_lines(reference_sales):
    lines = (BEFORE / f"{LAST}.csv").read_text().splitlines()
    text, moved, injected = _with_lies(lines)
    outcome = _validate(text.encode(), LAST)

    expected = sorted(
        [
            (moved[line], _moved_reason(reason, moved), raw)
            for line, reason, raw in _reference_records(LAST)
        ]
        + injected
    )
    assert _records(outcome) == expected
    reference = reference_sales[reference_sales["date"] == pd.Timestamp(LAST)]
    pd.testing.assert_frame_equal(outcome.accepted, reference.reset_index(drop=True))
    rows = len(lines) - 1 + sum(1 for _, _, reason, _ in INJECTED if reason)
    assert len(outcome.accepted) + len(outcome.quarantined) == rows  # nothing lost
