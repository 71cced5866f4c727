"""The decision benchmark's hindsight: strict counting, change lags and the regimes served."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets_tests.benchmarks.bench_path import bench_module

score = bench_module("hindsight_score")
report = bench_module("hindsight_report")
DAY = dt.date(2026, 5, 1)


def judged(passed: bool, candidate: float, replaced: float, kind: str = "gate") -> object:
    found = score.Judged("acme", kind, DAY, "v2", "v1", passed, "why")
    found.candidate_wape, found.replaced_wape = candidate, replaced
    return found


def test_a_decision_within_two_percent_is_left_out_not_counted_right() -> None:
    result = report.ScenarioResult("s", 1, 1)
    report._count(
        result,
        [
            judged(False, 0.99, 1.0),  # within 2 %: excluded either way
            judged(True, 1.015, 1.0),
            judged(True, 0.9, 1.0),  # right
            judged(True, 1.1, 1.0, kind="canary"),  # a wrong promotion: +10 %
        ],
    )
    assert (result.right, result.decisions, result.excluded) == (1, 2, 2)
    assert result.by_kind == {"gate": (1, 1), "canary": (0, 1)}
    assert result.promotions == 1 and round(result.worst_promotion, 4) == 0.1


def test_a_change_reaches_the_served_model_when_a_model_trained_on_it_serves() -> None:
    naive = score.Model("naive", lambda f: np.zeros(len(f)))
    old = score.Model("v1", naive.predict, DAY, DAY - dt.timedelta(days=1))
    new = score.Model("v2", naive.predict, DAY, DAY + dt.timedelta(days=3))
    models = {m.name: m for m in (naive, old, new)}
    served = {DAY + dt.timedelta(days=k): "v1" if k < 9 else "v2" for k in range(12)}
    assert score.change_lag(DAY + dt.timedelta(days=2), served, models) == 7
    assert score.change_lag(DAY + dt.timedelta(days=5), served, models) is None


def test_the_oracle_keeps_the_better_model_and_the_baselines_do_not_look() -> None:
    days = pd.date_range(DAY, periods=60, freq="D")
    frame = pd.DataFrame({"date": days, "units_sold": 10.0})
    errors = score.DailyErrors(frame, DAY, DAY + dt.timedelta(days=59))
    naive = score.Model("naive", lambda f: np.zeros(len(f)))
    good = score.Model("good", lambda f: np.full(len(f), 9.0), DAY + dt.timedelta(days=1))
    bad = score.Model("bad", lambda f: np.full(len(f), 2.0), DAY + dt.timedelta(days=5))
    models = {m.name: m for m in (naive, good, bad)}
    served = {d.date(): "good" for d in days[3:30]}
    shown = [d.date() for d in days[1:30]]
    found = score.regimes(shown, served, [good, bad], models, naive, errors)
    day = DAY + dt.timedelta(days=10)
    assert found["oracle"][day].name == "good" and found["newest"][day].name == "bad"
    assert found["never"][day].name == "good"
    assert found["platform"][DAY + dt.timedelta(days=1)] is naive  # nothing served yet


def test_the_refit_experiment_judges_a_refit_champion_only_on_days_it_never_trained_on() -> None:
    replay = bench_module("hindsight_replay")
    rows = pd.DataFrame({"date": pd.to_datetime(["2026-05-01", "2026-05-02", "2026-05-03"])})
    later = replay.days_after(rows, dt.date(2026, 5, 1))
    assert list(later["date"].dt.day) == [2, 3]
    assert replay.days_after(rows, None) is rows  # the seasonal naive never trained
