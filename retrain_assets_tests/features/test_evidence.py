"""The one rule for "enough evidence" (issue 31): the bad windows, each refused with its numbers."""

import datetime as dt

import pandas as pd
import pytest

from retrain_assets.features.evidence import (
    EvidenceRules,
    count_rows,
    judge_window,
    latest_judgeable_window,
)

D = dt.date(2026, 5, 1)
RULES = EvidenceRules(min_train_rows=28, min_holdout_rows=7, min_holdout_rows_per_store=1)


def rows(days: int, stores=("s1", "s2"), items=2, customer="acme", start=D, skip_store_after=None):
    out = []
    for i in range(days):
        day = start + dt.timedelta(days=i)
        for store in stores:
            if skip_store_after and store == skip_store_after[0] and day > skip_store_after[1]:
                continue
            out += [{"customer": customer, "store_id": store, "date": day}] * items
    return pd.DataFrame(out)


def judge(frame, first, last, holdout=7, customer="acme"):
    return judge_window(count_rows(frame, customer, first, last, holdout), RULES)


def test_a_window_with_rows_everywhere_is_judgeable():
    verdict = judge(rows(30), D, D + dt.timedelta(days=29))
    assert verdict.enough
    assert verdict.reason == "92 training rows, 28 holdout rows over 2 store(s)"


def test_a_customer_whose_data_stopped_has_an_empty_holdout_and_says_since_when():
    frame = rows(20)  # rows up to D+19; the window runs to D+29
    verdict = judge(frame, D, D + dt.timedelta(days=29))
    assert not verdict.enough
    assert verdict.reason == (
        "not enough evidence: holdout 2026-05-24 .. 2026-05-30 has 0 rows of acme (needs >= 7)"
        "; acme's newest day with rows is 2026-05-20"
    )
    assert verdict.as_metadata()["holdout_rows"] == 0


def test_a_window_of_one_day_has_no_training_days():
    verdict = judge(rows(30), D, D)
    assert not verdict.enough
    assert "window 2026-05-01 .. 2026-05-01 has 1 day(s), no training days before its" in (
        verdict.reason
    )
    assert "training part" in verdict.reason and "has 0 rows of acme (needs >= 28)" in (
        verdict.reason
    )


def test_a_customer_with_zero_rows():
    verdict = judge(rows(30, customer="other"), D, D + dt.timedelta(days=29))
    assert not verdict.enough
    assert verdict.reason.endswith("; acme has no rows in 2026-05-01 .. 2026-05-30")


def test_a_holdout_with_rows_for_only_one_store():
    # s2's newest row (D+22) is 7 days older than acme's: not yet "stopped selling", counted
    frame = rows(30, items=3, skip_store_after=("s2", D + dt.timedelta(days=22)))
    verdict = judge(frame, D, D + dt.timedelta(days=29))
    assert not verdict.enough
    assert verdict.reason == (
        "not enough evidence: holdout 2026-05-24 .. 2026-05-30 has too few rows for 1 of 2 "
        "store(s) (s2: 0; needs >= 1 each)"
    )


def test_a_store_that_stopped_selling_before_the_holdout_is_not_counted():
    # s2's newest row is D+15, more than STILL_SELLING_DAYS (7) older than acme's (D+29): closed
    frame = rows(30, items=3, skip_store_after=("s2", D + dt.timedelta(days=15)))
    verdict = judge(frame, D, D + dt.timedelta(days=29))
    assert verdict.enough
    assert verdict.reason.endswith("; not counted, stopped selling (no rows): s2 since 2026-05-16")
    assert verdict.as_metadata()["stores_stopped"] == {"s2": "2026-05-16"}


def test_the_latest_judgeable_window_ends_where_the_rows_do():
    per_day = {D + dt.timedelta(days=i): (8 if i < 20 else 0) for i in range(30)}
    assert latest_judgeable_window(per_day, 30, 7, RULES) == (D, D + dt.timedelta(days=19))
    assert latest_judgeable_window(per_day, 12, 7, RULES) == (
        D + dt.timedelta(days=8),
        D + dt.timedelta(days=19),
    )
    assert latest_judgeable_window(per_day, 10, 7, RULES) is None  # 24 training rows, not 28
    assert latest_judgeable_window({D: 3}, 30, 7, RULES) is None


def test_the_latest_judgeable_window_is_one_its_rows_judge_too_newest_first():
    per_day = {D + dt.timedelta(days=i): 8 for i in range(30)}
    asked = []

    def judgeable(first: dt.date, last: dt.date) -> bool:  # e.g. a store missing lately
        asked.append(last)
        return last <= D + dt.timedelta(days=26)

    end = D + dt.timedelta(days=26)
    assert latest_judgeable_window(per_day, 30, 7, RULES, verify=judgeable) == (D, end)
    assert asked == [D + dt.timedelta(days=i) for i in (29, 28, 27, 26)]
    asked.clear()
    assert latest_judgeable_window(per_day, 30, 7, RULES, judgeable, verify_limit=3) is None
    assert len(asked) == 3  # the rows are read for a few windows, not for every one


def test_the_minimums_are_settings_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS", "50")
    assert EvidenceRules.from_settings().min_holdout_rows == 50
    monkeypatch.setenv("RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS_PER_STORE", "0")
    with pytest.raises(ValueError, match="RETRAIN_EVIDENCE_MIN_HOLDOUT_ROWS_PER_STORE=0: must be"):
        EvidenceRules.from_settings()
