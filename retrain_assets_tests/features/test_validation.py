import datetime as dt

import pandas as pd
import pytest

from retrain_assets.demo.faults import FAULTS, with_faults
from retrain_assets.features.validation import empty_sales, validate_file

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


def _reasons(outcome) -> dict[int, str]:
    return {row.line: row.reason for row in outcome.quarantined}


TOO_LARGE = "out of range (above 9223372036854775807)"


def test_integers_too_large_for_int64_are_quarantined_never_wrapped():
    outcome = _validate(
        "2026-01-02,S1,I1,1e20,2.5,0,4\n"  # 2
        "2026-01-02,S1,I2,3,2.5,0,9223372036854775808\n"  # 3: 2**63
        "2026-01-02,S1,I3,99999999999999999999,2.5,0,4\n"  # 4
        "2026-01-02,S1,I4,9223372036854775807,2.5,0,4\n"  # 5: the largest int64, kept
        "2026-01-02,S1,I5,9007199254740993,2.5,0,3.5\n"  # 6: not a whole number
        "2026-01-02,S1,I6,9007199254740993,2.5,0,1.5e19\n"  # 7
        "2026-01-02,S1,I7,9007199254740993,2.5,0,1e3\n"  # 8: kept, exactly
        "2026-01-02,S1,I8, 12 ,2.5,0,3.0\n"  # 9: kept, 12 and 3
    )
    assert _reasons(outcome) == {
        2: f"units_sold: {TOO_LARGE}",
        3: f"stock_on_hand: {TOO_LARGE}",
        4: f"units_sold: {TOO_LARGE}",
        6: "stock_on_hand: not a whole number",
        7: f"stock_on_hand: {TOO_LARGE}",
    }
    assert list(outcome.accepted["units_sold"]) == [2**63 - 1, 9007199254740993, 12]
    assert list(outcome.accepted["stock_on_hand"]) == [4, 1000, 3]
    assert outcome.accepted["units_sold"].dtype == "int64"


def test_nul_and_other_control_characters_are_quarantined_and_a_tab_is_kept():
    outcome = _validate(
        "2026-01-02,S\x001,I1,3,2.5,0,4\n"  # 2: NUL, which once cut the value to "S"
        "2026-01-02,S1,I\x1b2,3,2.5,0,4\n"  # 3
        "2026-01-02,S1,I3,3\x00,2.5,0,4\n"  # 4
        "2026-01-02,S1,I5,\x0c3,2.5,\x01\x02,4\n"  # 5: even where strip() would drop it
        "2026-01-02,S\t1,I4,3,2.5,0,4\n"  # 6: a tab inside a value is text
    )
    assert _reasons(outcome) == {
        2: "store_id: control character U+0000",
        3: "item_id: control character U+001B",
        4: "units_sold: control character U+0000",
        5: "units_sold: control character U+000C; on_promo: control characters U+0001, U+0002",
    }
    assert outcome.quarantined[0].raw["store_id"] == "S\x001"
    assert list(outcome.accepted["store_id"]) == ["S\t1"]


def test_line_numbers_are_physical_lines_after_blank_lines_and_quoted_line_breaks():
    outcome = _validate(
        "\n"  # 2: blank
        "2026-01-02,S1,I1,-1,2.5,0,4\n"  # 3
        "   \n"  # 4: blank
        '2026-01-02,S1,"I\n2",3,2.5,0,4\n'  # 5 and 6: one row, a line break in item_id
        "2026-01-02,S1,I3,-3,2.5,0,4\r\n"  # 7
        "\r\n"  # 8: blank
        "2026-01-02,S1,I4,-4,2.5,0,4\r"  # 9: a lone CR ends a line too
        "2026-01-02,S1,I5,3,2.5,0,4\n"  # 10: good
        "2026-01-02,S1,I5,3,2.5,0,4\n"  # 11: a copy of line 10
    )
    assert _reasons(outcome) == {
        3: "units_sold: negative",
        5: "item_id: control character U+000A",
        7: "units_sold: negative",
        9: "units_sold: negative",
        11: "duplicate of line 10 for (S1, I5)",
    }
    assert list(outcome.accepted["item_id"]) == ["I5"]


def test_a_malformed_row_is_quarantined_alone_and_the_rest_of_the_file_kept():
    outcome = _validate(
        "2026-01-02,S1,I1,3,2.5,0,4,x\n"  # 2: a field too many
        "2026-01-02,S1,I2,3,2.5,0,4\n"  # 3
        "2026-01-02,S1,I3,3,2.5,0\n"  # 4: a field too few
        '2026-01-02,S1,"I4,3,2.5,0,4\n'  # 5: a quote that never closes on its row
        "2026-01-02,S1,I5,3,2.5,0,4\n"  # 6
        '2026-01-02,S1,"I6",3,"2.5",0,4\n'  # 7: quotes closed (line 5 must not run to here)
        '2026-01-02,S1,"I7,3,2.5,0,4\n'  # 8: two in a row,
        '2026-01-02,S1,"I8,3,2.5,0,4\n'  # 9: the second at the end of the file
    )
    assert _reasons(outcome) == {
        2: "malformed row: 8 fields where the header has 7",
        4: "malformed row: 6 fields where the header has 7",
        5: "malformed row: a quoted field is not closed",
        8: "malformed row: a quoted field is not closed",
        9: "malformed row: a quoted field is not closed",
    }
    assert outcome.quarantined[0].raw == {"malformed_line": "2026-01-02,S1,I1,3,2.5,0,4,x"}
    assert outcome.quarantined[2].raw == {"malformed_line": '2026-01-02,S1,"I4,3,2.5,0,4'}
    assert list(outcome.accepted["item_id"]) == ["I2", "I5", "I6"]
    assert outcome.problems == []


def test_a_header_that_no_row_fits_fails_the_file_and_a_header_alone_is_empty():
    outcome = _validate(
        "2026-01-02,S1,I1,3,2.5,0,4\n\n2026-01-02,S1,I2,3,2.5,0,4\n",
        header=HEADER + ",colour",  # declared, never sent
    )
    assert outcome.failed and outcome.problems[0].reason == (
        "unreadable CSV: no row has the header's 8 fields (line 2 has 7)"
    )
    malformed = _validate('2026-01-02,S1,"I1,3,2.5,0,4\n2026-01-02,S1,"I2,3,2.5,0,4\n')
    assert not malformed.failed and [q.line for q in malformed.quarantined] == [2, 3]
    alone = _validate("")
    assert alone.quarantined == [] and alone.accepted.empty and not alone.failed
    assert (alone.accepted.dtypes == empty_sales().dtypes).all()


def test_repeats_are_found_when_stores_and_items_combine_in_more_ways_than_rows():
    outcome = _validate(
        "2026-01-02,S1,I1,3,2.5,0,4\n"  # 2
        "2026-01-02,S2,I2,3,2.5,0,4\n"  # 3
        "2026-01-02,S3,I3,3,2.5,0,4\n"  # 4
        "2026-01-02,S1,I1,3,2.5,0,4\n"  # 5: a copy of line 2
        "2026-01-02,S2,I3,3,2.5,0,4\n"  # 6
        "2026-01-02,S3,I2,3,2.5,0,4\n"  # 7
        "2026-01-02,S2,I3,4,2.5,0,4\n"  # 8: disagrees with line 6
    )
    assert _reasons(outcome) == {
        5: "duplicate of line 2 for (S1, I1)",
        6: "conflicting rows for (S2, I3) on lines 6, 8",
        8: "conflicting rows for (S2, I3) on lines 6, 8",
    }
    assert len(outcome.accepted) == 4


def test_a_value_longer_than_the_parser_reads_at_once_is_kept():
    long_store = "S" * 3_000_000
    outcome = _validate(f"2026-01-02,S1,I1,3,2.5,0,4\n2026-01-02,{long_store},I2,3,2.5,0,4\n")
    assert list(outcome.accepted["store_id"]) == ["S1", long_store]


KEPT_KINDS = {"padded", "quoted", "odd_numbers", "blank_line"}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_every_fault_kind_is_kept_or_quarantined_and_nothing_is_lost(kind):
    frame = pd.DataFrame(
        {
            "date": "2026-01-02",
            "store_id": "S001",
            "item_id": [f"I{i:04d}" for i in range(1, 7)],
            "units_sold": 3,
            "price": 2.5,
            "on_promo": 0,
            "stock_on_hand": 4,
        }
    )
    outcome = validate_file(with_faults(frame, 0.2, [kind], seed=3), "acme", DAY, "f")
    assert outcome.problems == []
    assert len(outcome.accepted) + len(outcome.quarantined) == len(frame)
    expected_bad = {"duplicate": 1, "conflict": 2}.get(kind, 0 if kind in KEPT_KINDS else 1)
    assert len(outcome.quarantined) == expected_bad, [q.reason for q in outcome.quarantined]
