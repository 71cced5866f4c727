"""training_job's window judgement (issue 31): the evidence rule, then the evidence gate's own."""

import datetime as dt

import pandas as pd
import pytest

from retrain_assets.features.evidence import EvidenceRules
from retrain_assets.models.window_judgement import judge_rows

D = dt.date(2026, 5, 1)
RULES = EvidenceRules()


def frame(days: int, stores: int, stop_after: int | None = None) -> pd.DataFrame:
    """Two items a store a day for `days` days; none after day `stop_after` (0-based)."""
    return pd.DataFrame(
        [
            {"customer": "acme", "store_id": f"S{s}", "date": D + dt.timedelta(days=d)}
            for d in range(days if stop_after is None else stop_after + 1)
            for s in range(stores)
            for _ in range(2)
        ]
    )


def judged(rows: pd.DataFrame, days: int = 35, holdout: int = 7):
    return judge_rows(rows, "acme", D, D + dt.timedelta(days=days - 1), holdout, RULES)


def test_the_margin_gate_judges_one_store_the_evidence_gate_does_not(monkeypatch):
    monkeypatch.setenv("RETRAIN_GATE_RULE", "margin")
    assert judged(frame(35, stores=1)).enough
    monkeypatch.setenv("RETRAIN_GATE_RULE", "evidence")
    verdict = judged(frame(35, stores=1))
    assert not verdict.enough
    assert verdict.reason.startswith(
        "not enough evidence: the evidence gate (RETRAIN_GATE_RULE=evidence) would answer: the "
        "holdout has 1 store(s) with rows; a bootstrap over one store's 7 days"
    )
    assert judged(frame(35, stores=2)).enough  # two stores: a window it can judge


@pytest.mark.parametrize("rule", ["margin", "evidence"])
def test_the_gates_windows_end_on_the_holdouts_newest_day_with_rows(monkeypatch, rule):
    monkeypatch.setenv("RETRAIN_GATE_RULE", rule)
    monkeypatch.setenv("RETRAIN_GATE_WINDOWS", "2")
    rows = frame(35, stores=2, stop_after=31)  # the last 3 days of the 14-day holdout empty
    verdict = judged(rows, holdout=14)
    assert verdict.enough is (rule == "margin")
    if rule == "evidence":
        assert "the holdout 2026-05-22 .. 2026-06-01 is shorter than 2 window(s) of 7 days" in (
            verdict.reason
        )
