"""The canary with evidence on its own: the interval, the sample size from volume, bad input."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.deployment.analysis import StepObservation, judge_step
from retrain_assets.deployment.canary_evidence import StepVolume, daily_rows, judge_canary
from retrain_assets.deployment.rollout_settings import (
    RolloutSettings,
    rollout_settings,
)
from retrain_assets.settings_model import SettingsError
from retrain_assets.store.snapshots import SnapshotRecord

SETTINGS = RolloutSettings(
    min_predictions=10,
    min_actuals=20,
    canary_min_rows=20,
    max_no_data_intervals=3,
    wape_tolerance=0.05,
    step_seconds=40,
    canary_rule="evidence",
    canary_inconclusive_limit=2,
)
VOLUME = StepVolume(rows_per_day=45, weight=0.10, min_rows=20, min_days=1.0)


def pairs(
    stores: int = 3,
    days: int = 10,
    items: int = 4,
    canary_bias: float = 0.0,
    noise: float = 0.3,
    seed: int = 1,
) -> pd.DataFrame:
    """Canary-routed rows with actuals: the champion's error is `noise`, the canary's biased."""
    rng = np.random.default_rng(seed)
    n = stores * days * items
    actual = rng.integers(5, 40, n).astype(float)
    champion = actual * (1 + rng.normal(0, noise, n))
    canary = actual * (1 + canary_bias + rng.normal(0, noise, n))
    return pd.DataFrame(
        {
            "store_id": [f"S{s}" for s in range(stores) for _ in range(days * items)],
            "forecast_date": [
                dt.date(2026, 5, 1) + dt.timedelta(days=d)
                for _ in range(stores)
                for d in range(days)
                for _ in range(items)
            ],
            "actual": actual,
            "canary": canary,
            "champion": champion,
        }
    )


def step(rows: pd.DataFrame | None, requests: int = 40, **changes) -> StepObservation:
    return StepObservation(
        "CANARY_10", requests, 0, 0, 0 if rows is None else len(rows), pairs=rows, **changes
    )


def test_the_rows_a_step_needs_come_from_the_volume_with_a_floor():
    assert StepVolume(45, 0.10, 20, 1.0).needed == 20  # 4.5 a day: the floor decides
    big = StepVolume(100_000, 0.10, 50, 1.0)
    assert big.needed == 10_000  # a day of a large customer's canary traffic, not its first hour
    assert "about 4.4 days" in StepVolume(45, 0.10, 20, 1.0).describe()
    assert "not known" in StepVolume(0, 0.10, 20, 1.0).describe()


def test_daily_rows_average_the_newest_published_days():
    days = [dt.date(2026, 5, 1) + dt.timedelta(days=i) for i in range(10)]
    records = {
        d: SnapshotRecord(d, "v", "f", {"acme": 40 + i} if i != 8 else {}, False, None, "r")
        for i, d in enumerate(days)
    }
    found = daily_rows(records, ["acme", "bolt"], days=3)
    assert found == {"acme": (47 + 0 + 49) / 3, "bolt": 0.0}
    assert daily_rows({}, ["acme"]) == {"acme": 0.0}


def test_a_clearly_worse_canary_fails_and_a_clearly_better_one_passes_with_their_numbers():
    worse = judge_canary(pairs(canary_bias=0.6, noise=0.1), VOLUME, 0.05, 0.90)
    assert (worse.outcome, worse.rule) == ("fail", "interval")
    assert worse.low is not None and worse.low > 0.05
    assert "lower bound" in worse.reason and "30 store-days of 3 stores, 120 rows" in worse.reason
    better = judge_canary(pairs(canary_bias=0.0, noise=0.3), VOLUME, 0.50, 0.90)
    assert better.outcome == "pass" and better.high is not None and better.high <= 0.50
    shown = better.as_metadata()
    assert shown["rows"] == 120 and shown["rows_needed"] == 20 and shown["store_days"] == 30
    assert {"wape_change", "interval_low", "interval_high", "interval_method"} <= set(shown)


def test_a_noisy_dozen_rows_is_inconclusive_not_a_rollback():
    few = pairs(stores=3, days=2, items=4, canary_bias=0.08, noise=0.4, seed=0)
    found = judge_canary(few, dataclasses.replace(VOLUME, min_rows=12), 0.05, 0.90)
    assert found.outcome == "inconclusive"
    assert found.low is not None and found.high is not None and found.low < 0.05 < found.high


def test_bad_input_is_not_enough_evidence_with_the_numbers_never_a_pass():
    none_yet = judge_canary(pairs().iloc[0:0], VOLUME, 0.05, 0.90)
    assert none_yet.outcome == "not enough evidence"
    assert none_yet.reason.startswith("not enough evidence: 0 rows with actuals, needs >= 20")
    too_few = judge_canary(pairs(days=1), VOLUME, 0.05, 0.90)
    assert too_few.outcome == "not enough evidence" and "12 rows with actuals" in too_few.reason
    one_store = judge_canary(pairs(stores=1), VOLUME, 0.05, 0.90)
    assert one_store.outcome == "not enough evidence"
    assert "40 rows from 1 store" in one_store.reason and "10 days" in one_store.reason
    no_sales = pairs().assign(actual=0.0)
    zero = judge_canary(no_sales, VOLUME, 0.05, 0.90)
    assert zero.outcome == "not enough evidence" and "sum to 0" in zero.reason


def test_a_step_without_actuals_waits_then_fails_as_no_data():
    waiting = judge_step(step(None), SETTINGS, 0, weight=0.10)
    assert (waiting.kind, waiting.rule) == ("wait", "no data")
    assert "0 rows with actuals, needs >= 20" not in waiting.reason  # not read: said so
    empty = judge_step(step(pairs().iloc[0:0]), SETTINGS, 2, weight=0.10)
    assert empty.kind == "fail"
    assert empty.reason.startswith("no data: 40 of 10 canary predictions, not enough evidence: 0")
    one_store = judge_step(step(pairs(stores=1)), SETTINGS, 0, weight=0.10)
    assert one_store.kind == "wait" and "from 1 store" in one_store.reason


def test_inconclusive_extends_the_step_then_the_named_final_rule_decides():
    few = pairs(stores=3, days=2, items=4, canary_bias=0.08, noise=0.4, seed=0)
    settings = dataclasses.replace(SETTINGS, canary_min_rows=12)
    first = judge_step(step(few), settings, 0, weight=0.10, inconclusive=0)
    assert (first.kind, first.rule) == ("inconclusive", "interval")
    assert first.reason.startswith("inconclusive (1 of 2; the step runs another 40 s)")
    assert first.evidence is not None and first.evidence.rows == 24
    final = judge_step(step(few), settings, 0, weight=0.10, inconclusive=2)
    change = final.evidence.change if final.evidence else None
    assert final.rule == "final rule: point" and change is not None
    assert final.kind == ("pass" if change <= 0.05 else "fail")
    assert "still inconclusive after 2 extension(s), the point estimate" in final.reason
    strict = dataclasses.replace(settings, canary_final_rule="rollback")
    rolled = judge_step(step(few), strict, 0, weight=0.10, inconclusive=2)
    assert (rolled.kind, rolled.rule) == ("fail", "final rule: rollback")
    assert "the champion stays" in rolled.reason


def test_operational_failures_come_first_and_the_wape_rule_is_unchanged():
    broken = judge_step(
        dataclasses.replace(step(pairs()), canary_errors=5), SETTINGS, 0, weight=0.10
    )
    assert (broken.kind, broken.rule) == ("fail", "operational")
    wape = dataclasses.replace(SETTINGS, canary_rule="wape")
    old = judge_step(StepObservation("CANARY_10", 40, 0, 0, 30, 0.30, 0.30), wape, 0)
    assert (old.kind, old.rule, old.evidence) == ("pass", "wape", None)


def test_the_canary_settings_come_from_the_environment_and_bad_values_name_the_variable(
    monkeypatch,
):
    monkeypatch.setenv("RETRAIN_CANARY_RULE", "Evidence")
    monkeypatch.setenv("RETRAIN_CANARY_INCONCLUSIVE_LIMIT", "5")
    chosen = rollout_settings()
    assert (chosen.canary_rule, chosen.canary_inconclusive_limit) == ("evidence", 5)
    assert chosen.canary_visit_budget == chosen.max_no_data_intervals + 5 + 20
    monkeypatch.setenv("RETRAIN_CANARY_FINAL_RULE", "coin")
    with pytest.raises(SettingsError, match="RETRAIN_CANARY_FINAL_RULE=coin: must be one of"):
        rollout_settings()
