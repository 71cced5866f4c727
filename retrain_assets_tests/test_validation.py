import datetime as dt

from retrain_assets.features.validation import validate_file

DAY = dt.date(2026, 1, 2)
HEADER = "date,store_id,item_id,units_sold,price,on_promo,stock_on_hand"


def _validate(body: str, header: str = HEADER):
    return validate_file(f"{header}\n{body}", "acme", DAY, "acme/2026-01-02.csv")


def test_good_rows_are_typed_and_kept():
    outcome = _validate("2026-01-02,S1,I1,3,2.5,1,4\n2026-01-02,S1,I2,0,1.0,false,0\n")
    assert outcome.quarantined == [] and outcome.problems == []
    assert list(outcome.accepted["units_sold"]) == [3, 0]
    assert list(outcome.accepted["on_promo"]) == [True, False]
    assert set(outcome.accepted["customer"]) == {"acme"}


def test_each_bad_row_is_quarantined_with_line_and_reason_and_good_rows_survive():
    outcome = _validate(
        "2026-01-02,S1,I1,3,2.5,0,4\n"  # line 2: good
        "2026-01-02,S1,I2,-3,2.5,0,4\n"  # line 3: negative units
        "2026-01-03,S1,I3,3,2.5,0,4\n"  # line 4: other day
        "2026-01-02,S1,I4,3,-1,0,4\n"  # line 5: negative price
        "2026-01-02,S1,I5,3,abc,maybe,4\n"  # line 6: unparsable price and promo
        ",S1,I6,,2.5,0,1.5\n"  # line 7: missing date and units, fractional stock
    )
    reasons = {row.line: row.reason for row in outcome.quarantined}
    assert reasons == {
        3: "units_sold: negative",
        4: "date 2026-01-03 is outside partition 2026-01-02",
        5: "price: negative",
        6: "price: missing or not a number; on_promo: not one of 0/1/true/false",
        7: "date: missing or not YYYY-MM-DD; units_sold: missing; "
        "stock_on_hand: not a whole number",
    }
    assert list(outcome.accepted["item_id"]) == ["I1"]
    assert outcome.quarantined[0].raw["units_sold"] == "-3"


def test_exact_duplicate_keeps_first_and_conflicting_duplicates_are_all_quarantined():
    outcome = _validate(
        "2026-01-02,S2,I1,3,2.5,0,4\n2026-01-02,S2,I1,3,2.5,0,4\n"
        "2026-01-02,S3,I1,3,2.5,0,4\n2026-01-02,S3,I1,4,2.5,0,4\n"
    )
    reasons = {row.line: row.reason for row in outcome.quarantined}
    assert reasons == {
        3: "duplicate of line 2 for (S2, I1)",
        4: "conflicting rows for (S3, I1) on lines 4, 5",
        5: "conflicting rows for (S3, I1) on lines 4, 5",
    }
    assert list(outcome.accepted["store_id"]) == ["S2"]


def test_unknown_columns_are_dropped_with_a_warning_and_rows_kept():
    outcome = _validate("2026-01-02,S1,I1,3,2.5,0,4,x\n", header=HEADER + ",colour")
    assert [p.reason for p in outcome.problems] == ["unknown column(s) dropped: colour"]
    assert not outcome.failed
    assert len(outcome.accepted) == 1 and "colour" not in outcome.accepted.columns


def test_missing_columns_fail_the_file_with_the_names():
    outcome = _validate("2026-01-02,S1,3\n", header="date,store_id,units_sold")
    assert outcome.failed
    assert outcome.problems[0].reason == (
        "missing column(s): item_id, price, on_promo, stock_on_hand"
    )
    assert outcome.accepted.empty


def test_empty_file_is_unreadable():
    outcome = validate_file("", "acme", DAY, "acme/2026-01-02.csv")
    assert outcome.failed and outcome.problems[0].reason.startswith("unreadable CSV")
