"""Quarantine records of rows with control characters reach the real PostgreSQL whole."""

import datetime as dt

from retrain_assets.features.landing_outcomes import ESCAPED_KEY, record_outcomes
from retrain_assets.features.validation import validate_file
from retrain_assets.store.database import transaction

DAY = dt.date(2026, 1, 2)
HEADER = "date,store_id,item_id,units_sold,price,on_promo,stock_on_hand"


def _unescaped(raw: dict) -> dict:
    if set(raw) != {ESCAPED_KEY}:
        return raw
    back = {}
    for name, value in raw[ESCAPED_KEY].items():
        back[name.encode("ascii").decode("unicode_escape")] = value.encode("ascii").decode(
            "unicode_escape"
        )
    return back


def test_rows_with_nul_and_other_control_characters_are_stored_and_read_back_whole(app_db):
    outcome = validate_file(
        f"{HEADER},colour\n"
        "2026-01-02,S\x001,Käse,3,2.5,0,4,red\n"  # NUL in a value
        "2026-01-02,S1,I\x1b1,3,2.5,0,4,red\n"  # ESC: jsonb holds it as it is
        "2026-01-02,S1,I2,3,2.5,0,4,x\x00,y\n"  # malformed, with a NUL
        "2026-01-02,S1,I3,-1,2.5,0,4,\\x00\n",  # a backslash, not a NUL
        "acme",
        DAY,
        "acme/2026-01-02.csv",
    )
    assert [q.line for q in outcome.quarantined] == [2, 3, 4, 5]
    named = validate_file(f"{HEADER},colour\x00\n", "beta", DAY, "beta/2026-01-02.csv")
    assert named.problems[0].reason == "unknown column(s) dropped: colour\\x00"
    record_outcomes(app_db, DAY, [outcome, named], "run-1")

    with transaction(app_db) as cur:
        cur.execute("SELECT line, reason, raw FROM quarantined_rows ORDER BY line")
        stored = cur.fetchall()
        cur.execute("SELECT customer, reason FROM landing_file_problems ORDER BY customer")
        assert cur.fetchall() == [
            ("acme", "unknown column(s) dropped: colour"),
            ("beta", "unknown column(s) dropped: colour\\x00"),
        ]
    assert [(line, reason, _unescaped(raw)) for line, reason, raw in stored] == [
        (q.line, q.reason, q.raw) for q in outcome.quarantined
    ]
    assert set(stored[0][2]) == {ESCAPED_KEY} and set(stored[3][2]) != {ESCAPED_KEY}
    assert stored[0][2][ESCAPED_KEY]["store_id"] == "S\\x001"
    assert stored[1][2]["item_id"] == "I\x1b1"
