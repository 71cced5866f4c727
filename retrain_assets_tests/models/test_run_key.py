"""The run key changes with each of its four inputs and with nothing else."""

import datetime as dt

from retrain_assets.models.run_key import run_key
from retrain_assets.store.snapshot_ref import SnapshotRef

BASE = ("snap-sha", "store_day_features-v1", {"params": {"seed": 7}, "holdout_days": 7}, "abc123")


def test_each_input_changes_the_key():
    key = run_key(*BASE)
    assert len(key) == 16
    variants = [
        ("other-sha", *BASE[1:]),
        (BASE[0], "store_day_features-v2", *BASE[2:]),
        (*BASE[:2], {"params": {"seed": 8}, "holdout_days": 7}, BASE[3]),
        (*BASE[:3], "def456"),
    ]
    keys = {run_key(*variant) for variant in variants}
    assert key not in keys and len(keys) == 4


def test_nothing_else_changes_it():
    reordered = {"holdout_days": 7, "params": {"seed": 7}}
    assert run_key(*BASE) == run_key(BASE[0], BASE[1], reordered, BASE[3])
    assert run_key(*BASE) == run_key(*BASE)  # same inputs, another call, another process


def test_two_customers_on_the_same_days_get_different_snapshot_hashes():
    days = {"2026-03-01": "v1", "2026-03-02": "v2"}
    ref = SnapshotRef(dt.date(2026, 3, 1), dt.date(2026, 3, 2), days)
    assert ref.sha_for("acme") != ref.sha_for("bolt")  # else one GPU job, one candidate for both
    assert ref.sha_for("acme") == SnapshotRef(ref.first_day, ref.last_day, dict(days)).sha_for(
        "acme"
    )
    republished = SnapshotRef(ref.first_day, ref.last_day, {**days, "2026-03-02": "v3"})
    assert republished.sha_for("acme") != ref.sha_for("acme")
