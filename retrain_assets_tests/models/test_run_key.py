"""The run key changes with each of its four inputs and with nothing else."""

from retrain_assets.models.run_key import run_key

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
