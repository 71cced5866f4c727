"""The landing automation's rules: completeness, cut-off, settling, late files, days behind."""

import datetime as dt
import os
from pathlib import Path

import pytest

from retrain_assets.automation.feature_staleness import follow_up_days, stale_feature_days
from retrain_assets.automation.landing_days import (
    contiguous_ranges,
    cutoff,
    landing_days,
    plan_landing,
)
from retrain_assets.automation.landing_scan import LandedFile, scan_landing
from retrain_assets.automation.landing_settings import (
    day_cutoff_hours,
    landing_automation_enabled,
    landing_interval_seconds,
)

D1, D2, D3, D4 = (dt.date(2026, 5, d) for d in (1, 2, 3, 4))
LONG_AGO = dt.datetime(2026, 4, 1, tzinfo=dt.UTC).timestamp()
AFTER_ALL = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def landed(customer: str, day: dt.date, stamp: str = "v1", modified: float = LONG_AGO):
    return LandedFile(customer, day, stamp, modified)


def plan(files, requested=None, now=AFTER_ALL, cutoff_hours=12, settle=30):
    return plan_landing(landing_days(files), requested or {}, now, cutoff_hours, settle)


def test_a_day_waits_for_every_active_customer_until_its_cutoff():
    files = [landed("a", D1), landed("b", D1), landed("a", D2)]
    before = dt.datetime(2026, 5, 3, 11, 59, tzinfo=dt.UTC)  # D2's cut-off: May 3, 12:00
    waiting = plan(files, now=before)
    assert waiting.days == [D1]
    assert waiting.waiting == {
        D2: "1 of 2 customers delivered; waiting for b until the cut-off 2026-05-03 12:00 UTC"
    }
    after = plan(files, now=cutoff(D2, 12))
    assert after.days == [D1, D2] and after.ranges == [(D1, D2)]
    assert after.reasons[D2] == (
        "cut-off 2026-05-03 12:00 UTC passed: 1 of 2 customers delivered, missing b"
    )
    assert after.reasons[D1] == "complete: 2 of 2 customers delivered"


def test_a_customer_is_expected_only_from_its_first_landed_day():
    files = [landed("a", D1), landed("a", D2), landed("b", D2)]
    early = plan(files, now=dt.datetime(2026, 5, 1, tzinfo=dt.UTC) + dt.timedelta(days=1))
    assert early.days == [D1, D2] and early.waiting == {}


def test_a_day_with_a_file_still_being_written_waits_until_it_settles():
    now = AFTER_ALL
    files = [landed("a", D1), landed("a", D2, modified=now.timestamp() - 5)]
    result = plan(files, now=now, settle=30)
    assert result.days == [D1]
    assert result.waiting == {D2: "files still arriving (newest 5 s old, settles after 30 s)"}
    assert plan(files, now=now + dt.timedelta(seconds=25), settle=30).days == [D1, D2]


def test_a_new_day_waits_behind_an_earlier_waiting_day_but_a_late_file_does_not():
    before = dt.datetime(2026, 5, 3, tzinfo=dt.UTC)
    files = [
        landed("a", D1, "v2"),
        landed("b", D1),
        landed("a", D2),
        landed("a", D3),
        landed("b", D3),
    ]
    requested = {D1: landing_days([landed("a", D1), landed("b", D1)])[0].fingerprint}
    result = plan(files, requested, now=before, cutoff_hours=48)
    assert result.days == [D1] and result.late == [D1]  # a's file for D1 changed
    assert set(result.waiting) == {D2, D3}
    assert result.waiting[D3] == f"waits for {D2} (its features look back over it)"


def test_a_day_read_before_is_read_again_only_when_its_files_change():
    files = [landed("a", D1), landed("a", D2)]
    first = plan(files)
    assert first.days == [D1, D2] and first.late == []
    assert plan(files, first.fingerprints).days == []
    changed = [landed("a", D1), landed("a", D2, "v2")]
    again = plan(changed, first.fingerprints)
    assert again.days == [D2] and again.late == [D2] and again.ranges == [(D2, D2)]
    removed = plan([landed("a", D2, "v2"), landed("a", D3)], first.fingerprints)
    assert removed.days == [D2, D3]  # D1 is no longer landed at all: nothing to read


def test_days_without_any_file_between_landed_days_are_days_too():
    files = [landed("a", D1), landed("a", D4)]
    result = plan(files)
    assert result.days == [D1, D2, D3, D4] and result.ranges == [(D1, D4)]
    assert result.reasons[D2].startswith("cut-off 2026-05-03 12:00 UTC passed: 0 of 1")


def test_contiguous_ranges():
    assert contiguous_ranges([D4, D1, D2]) == [(D1, D2), (D4, D4)]
    assert contiguous_ranges([]) == []


def test_feature_days_behind_sales_are_missing_or_older_than_a_day_they_look_back_on():
    days = [D1 + dt.timedelta(days=i) for i in range(40)]
    sales = {day: i + 1 for i, day in enumerate(days)}
    features = {day: 1000 + i for i, day in enumerate(days)}
    assert stale_feature_days(sales, features) == []
    late = days[5]
    sales[late] = 5000  # its sales re-read after every feature day was computed
    features[late] = 5001  # ... in one run with its own features
    behind = stale_feature_days(sales, features)
    assert behind == days[6:40]  # the 34 days after the late one (LOOKBACK_DAYS)
    del features[days[39]]
    assert stale_feature_days(sales, features)[-1] == days[39]  # never computed
    assert follow_up_days(behind, [days[20]]) == days[6:20]  # the rest waits for that read


def test_scan_lists_daily_files_and_a_rewritten_file_gets_a_new_stamp(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "2026-05-01.csv").write_text("x\n")
    (tmp_path / "a" / "customer.json").write_text("{}")
    (tmp_path / "a" / "notes.csv").write_text("y\n")
    (tmp_path / "a" / "2026-05-02.csv").mkdir()  # a folder named like a day is not a file
    files = scan_landing(str(tmp_path), ["a", "never-delivered"])
    assert [(f.customer, f.day) for f in files] == [("a", D1)]
    path = tmp_path / "a" / "2026-05-01.csv"
    path.write_text("x,longer\n")
    os.utime(path, (LONG_AGO, LONG_AGO))
    again = scan_landing(str(tmp_path), ["a"])
    assert again[0].stamp != files[0].stamp and again[0].modified == LONG_AGO


def test_settings_come_from_the_environment_with_clear_errors(monkeypatch):
    monkeypatch.setenv("RETRAIN_LANDING_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("RETRAIN_DAY_CUTOFF_HOURS", "0")
    monkeypatch.setenv("RETRAIN_LANDING_AUTOMATION", "off")
    assert landing_interval_seconds() == 5 and day_cutoff_hours() == 0
    assert not landing_automation_enabled()
    monkeypatch.setenv("RETRAIN_LANDING_INTERVAL_SECONDS", "0")
    with pytest.raises(ValueError, match="RETRAIN_LANDING_INTERVAL_SECONDS=0: must be a whole"):
        landing_interval_seconds()
    monkeypatch.setenv("RETRAIN_LANDING_AUTOMATION", "maybe")
    with pytest.raises(ValueError, match="RETRAIN_LANDING_AUTOMATION=maybe: must be on or off"):
        landing_automation_enabled()


def test_scan_lists_object_storage_folders_too():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/landing-scan-test/a/2026-05-01.csv", b"x\n")
    fs.pipe("/landing-scan-test/a/customer.json", b"{}")
    files = scan_landing("memory://landing-scan-test", ["a", "b"])
    assert [(f.customer, f.day) for f in files] == [("a", D1)]
    fs.pipe("/landing-scan-test/a/2026-05-01.csv", b"x,corrected\n")
    assert scan_landing("memory://landing-scan-test", ["a"])[0].stamp != files[0].stamp
    fs.rm("/landing-scan-test", recursive=True)
