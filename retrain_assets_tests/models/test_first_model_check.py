"""`beats_champion` invoked in process on a first model whose trainer's intervals fall short.

The database, the parquet store, MLflow and the Dagster instance are replaced by fakes at the
check module's seams (what they hold is not what is tested here; `test_gate_flow` runs them for
real): the candidate, its holdout and the WAPE verdict are given, the check's own wiring of the
intervals is what runs. `registry/test_mlflow_registry.py` shows the rewritten metadata served.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from retrain_assets.asset_keys import MODEL_CANDIDATE
from retrain_assets.customers import CUSTOMERS
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.models import beats_champion_check as check
from retrain_assets.models import gate_decision
from retrain_assets.models.gate import SEASONAL_NAIVE, GateOutcome, ReferenceModel
from retrain_assets.models.reference import ChosenReference
from retrain_assets.models.scoring import Verdict
from retrain_assets.prediction_intervals import IntervalTable

KEY = "rk-first"
RNG = np.random.default_rng(11)
ROWS = 135
HOLDOUT = pd.DataFrame(
    {
        "date": pd.date_range("2026-03-01", periods=ROWS, freq="h"),
        "store_id": "S1",
        **{name: RNG.uniform(5, 50, ROWS) for name in MODEL_FEATURES},
    }
)
HOLDOUT[LABEL] = HOLDOUT["lag_7"] + RNG.normal(0, 4, ROWS)  # forecast = lag_7: errors of sd 4
NARROW = IntervalTable({"80": 2.7, "95": 7.84}, windows=2, scores=500)  # covers about half


class LagSeven:
    """A stand-in booster: forecasts each row's lag_7."""

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        return frame["lag_7"].to_numpy(dtype=float)


@dataclass
class FakeCandidate:
    metrics: dict[str, float]

    def load_model(self) -> LagSeven:
        return LagSeven()


@dataclass
class FakeRegistry:
    """What the check asks of MLflow; `metadata` is what it wrote into the logged model."""

    metadata: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def candidate_run(self, customer: str, key: str) -> str:
        return f"run-{key}"

    def set_model_metadata(self, run_id: str, key: str, value: object) -> bool:
        assert run_id == f"run-{KEY}"
        self.metadata[key] = value
        return True

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)

    def versions_of(self, customer: str, key: str) -> list[object]:
        return []


@dataclass
class Resource:
    """A resource whose one call answers `value`."""

    value: object

    def connection_url(self) -> object:
        return self.value

    def registry(self) -> object:
        return self.value

    def root(self) -> object:
        return self.value

    def store(self) -> object:
        return self.value


def wape_pass(reference: str) -> GateOutcome:
    reason = f"candidate WAPE 0.1200 beats {reference} 0.1950 by more than the 2% margin"
    verdict = Verdict(True, 0.12, 0.195, reference, 0.02, reason)
    return GateOutcome(
        verdict,
        {
            "candidate_wape": 0.12,
            "reference_wape": 0.195,
            "reference": reference,
            "holdout_window": "2026-03-01 .. 2026-03-06",
            "rows_scored": ROWS,
            "rule": "margin",
            "reason": reason,
        },
    )


def run_check(
    monkeypatch: pytest.MonkeyPatch, chosen: ChosenReference
) -> tuple[dg.AssetCheckEvaluation, FakeRegistry, list[check.GateResult]]:
    """Invoke the check on the fakes; return its result, what MLflow got, what was recorded."""
    registry, recorded = FakeRegistry(), []
    reference = chosen.model.label if chosen.model else SEASONAL_NAIVE
    seams = {
        "latest_run_key": lambda instance, asset, customer: KEY,
        "snapshot_window": lambda instance, customer, key: "2026-02-01 .. 2026-02-28",
        "CandidateTable": lambda url, root: {KEY: FakeCandidate(NARROW.as_metrics())},
        "choose_reference": lambda registry, customer, key: chosen,
        "read_holdout": lambda store, customer, key: HOLDOUT,
        "read_export_part": lambda *args: HOLDOUT,
        "judge_parts": lambda *args: None,
        "record_gate_result": lambda url, result: recorded.append(result),
    }
    for name, fake in seams.items():
        monkeypatch.setattr(check, name, fake)
    monkeypatch.setattr(gate_decision, "judge_gate", lambda *args: wape_pass(reference))
    resources = {
        "project_db": Resource("postgresql://fake"),
        "partition_storage": Resource("/fake"),
        "mlflow_registry": Resource(registry),
        "gate_settings": check.GateSettings(margin=0.02),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(str(CUSTOMERS.name), ["acme"])
        run = dg.materialize(
            [candidate_stub, check.beats_champion],
            partition_key="acme",
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
    [result] = run.get_asset_check_evaluations()
    return result, registry, recorded


@dg.asset(key=MODEL_CANDIDATE, partitions_def=CUSTOMERS)
def candidate_stub() -> None:
    """Stands in for `model_candidate`: the fakes hold its candidate."""


def test_a_first_model_passes_with_widened_intervals_written_where_the_service_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, registry, recorded = run_check(monkeypatch, ChosenReference(None, None))
    assert result.passed
    served = IntervalTable.from_metadata(registry.metadata)  # as the service reads it
    assert served is not None and served.halfwidths["80"] > 4.5  # from the trainer's 2.7
    assert served.calibration.startswith("widened on the gate's holdout: covered ")
    assert f"of {ROWS} holdout actuals" in served.calibration
    shown = {name: value.value for name, value in result.metadata.items()}
    assert shown["interval_calibration"] == served.calibration
    assert shown["served_halfwidth_80"] == round(served.halfwidths["80"], 4)
    assert shown["interval_halfwidth_80"] == 2.7 and float(str(shown["coverage_80"])) < 0.65
    assert "not a reason to serve nothing" in str(shown["interval_coverage"])
    assert result.description is not None
    assert result.description.startswith("candidate WAPE 0.1200 beats seasonal naive")
    assert result.description.endswith(f"are served {served.calibration}")
    [verdict] = recorded
    assert verdict.passed and verdict.reason == result.description
    assert registry.metrics["gate_served_halfwidth_80"] == shown["served_halfwidth_80"]


def test_a_challenger_short_of_coverage_fails_and_nothing_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    champion = ReferenceModel(
        "champion demand_forecast.acme v3", LagSeven().predict, "champion", "3"
    )
    result, registry, recorded = run_check(monkeypatch, ChosenReference(champion, "3"))
    assert not result.passed
    assert result.description is not None and result.description.startswith("coverage: the 80 %")
    assert result.metadata["rule"].value == "coverage"
    assert result.metadata["interval_calibration"].value == "trainer backtests"
    assert registry.metadata == {}  # the champion keeps serving; nothing widened
    assert not recorded[0].passed
