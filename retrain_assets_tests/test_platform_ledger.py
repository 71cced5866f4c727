"""The ledger `make test` prints at its end: every whole platform, counted, longest first."""

from retrain_assets_tests.support.platform_ledger import (
    PlatformEntry,
    PlatformLedger,
    entries_from_json,
    summary_lines,
)


def test_the_summary_counts_every_platform_and_lists_the_longest_first():
    short = PlatformEntry("a/test_a.py::test_one (call)", 12.4, 80.2, "gw0")
    long = PlatformEntry("b/test_b.py::test_two (setup)", 20.0, 300.6, "gw1")
    unfinished = PlatformEntry("c/test_c.py::test_three (setup)", None, None, "gw2")
    short.counted({"features_job": 3, "candidate_job": 5})
    long.uncounted("its database did not answer: connection refused")
    lines = summary_lines([short, unfinished, long])
    assert lines[0] == "whole platforms started (retrain-assets up): 3"
    assert lines[1] == "    301 s alive, ready after  20 s  [gw1] b/test_b.py::test_two (setup)"
    assert lines[2].strip() == ("runs not counted: its database did not answer: connection refused")
    assert lines[3].startswith("     80 s alive, ready after  12 s  [gw0]")
    assert lines[4].strip() == "8 runs: candidate_job 5, features_job 3"
    assert lines[5] == "        - alive, ready after     -  [gw2] c/test_c.py::test_three (setup)"
    assert lines[6].strip() == "runs not counted: the platform ended before"
    assert lines[7] == "Dagster runs in those platforms: 8"


def test_a_workers_ledger_travels_as_json_and_the_first_stop_counts(monkeypatch):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x/test_x.py::test_it (setup)")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    ledger = PlatformLedger()
    entry = ledger.started()
    entry.ready()
    entry.stopped()
    first = entry.wall_seconds
    entry.stopped()  # the context manager's cleanup after an early stop
    assert entry.wall_seconds == first
    entry.counted({"features_job": 2})
    entry.counted({"features_job": 9})  # a later count replaces it (count_runs counts once)
    [back] = entries_from_json(ledger.to_json())
    assert (back.started_by, back.worker) == ("x/test_x.py::test_it", "gw3")
    assert back.runs == {"features_job": 9}
    assert back.ready_seconds is not None and back.wall_seconds == first
