"""The decision benchmark decides through the platform's own functions, and they agree.

Two guards: the benchmark's modules hold the very function objects the checks, the controller
and the engine call (identity, and the platform's callers still call them), and one identical
case fed through a check (invoked in process on fakes) and through the benchmark's call gives
the same verdict. The canary's case runs on Postgres: `deployment/test_bench_canary_path.py`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from retrain_assets.asset_keys import REGISTERED_MODEL
from retrain_assets.customers import CUSTOMERS
from retrain_assets.deployment import advancing, observations, recent_window, rollout_machine
from retrain_assets.deployment.recent_window import ScoringWindow
from retrain_assets.deployment.rollout_settings import rollout_settings
from retrain_assets.deployment.versions import RegisteredVersion
from retrain_assets.features.evidence import EvidenceRules, judge_parts
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.machines import engine
from retrain_assets.models import (
    beats_champion_check,
    challenger_now_check,
    deploy_gate,
    gate_decision,
    training_job_asset,
)
from retrain_assets.models.gate import ReferenceModel, gate_rule
from retrain_assets.models.gate_evidence import GateRules
from retrain_assets.models.reference import ChosenReference
from retrain_assets.prediction_intervals import IntervalTable, coverage_tolerance
from retrain_assets.settings import gate_margin
from retrain_assets_tests.benchmarks.bench_path import bench_module
from retrain_assets_tests.models.test_first_model_check import (
    KEY,
    FakeRegistry,
    Resource,
    candidate_stub,
)

replay = bench_module("hindsight_replay")
canary = bench_module("hindsight_canary")

SHARED = [  # (benchmark module, name, platform module whose callers use it)
    (replay, "decide_gate", gate_decision),
    (replay, "judge_deploy", deploy_gate),
    (replay, "choose_days", recent_window),
    (replay, "job_spec", training_job_asset),
    (replay, "rollout_machine", rollout_machine),
    (canary, "advance_due", advancing),
    (canary, "analysis_due", advancing),
    (canary, "step_observation", observations),
    (canary, "score_joined", observations),
    (canary, "route", engine),
    (canary, "run_transition", engine),
]
CALLERS = [  # the platform's entry points that must keep calling the shared functions
    (beats_champion_check, "decide_gate("),
    (challenger_now_check, "judge_deploy("),
    (recent_window, "return choose_days("),
    (training_job_asset, "spec = job_spec(config, customer)"),
    (advancing, "return advance_due("),
    (advancing, "return analysis_due("),
    (observations, "step_observation("),
    (engine, "= route(p.state, state, step)"),
    (engine, "step = run_transition(state, context)"),
]


@pytest.mark.parametrize(("bench", "name", "platform"), SHARED, ids=lambda x: str(x)[:40])
def test_the_benchmark_holds_the_platforms_own_function(
    bench: Any, name: str, platform: Any
) -> None:
    assert getattr(bench, name) is getattr(platform, name)


@pytest.mark.parametrize(("module", "call"), CALLERS, ids=lambda x: getattr(x, "__name__", x))
def test_the_platform_still_calls_it(module: Any, call: str) -> None:
    assert call in inspect.getsource(module)


def test_the_benchmark_keeps_no_decision_of_its_own() -> None:
    """The re-implementations it had are gone: no judge_* of its own, no gate or step rule."""
    for module in (replay, canary, bench_module("bench_hindsight")):
        own = [
            name
            for name, value in vars(module).items()
            if inspect.isfunction(value)
            and value.__module__ == module.__name__
            and name.startswith(("judge", "evidence_gate", "gate"))
        ]
        assert own == [], f"{module.__name__} decides by itself: {own}"


# -- one case through the gate: beats_champion in process vs the benchmark's call -------------

DAYS = pd.date_range("2026-01-01", periods=42, freq="D")
RNG = np.random.default_rng(3)


def _frame(days: pd.DatetimeIndex) -> pd.DataFrame:
    keys = [(f"S{s}", f"I{i:04d}") for s in range(3) for i in range(12)]
    frame = pd.DataFrame(
        [(d, s, i) for d in days for s, i in keys], columns=["date", "store_id", "item_id"]
    )
    frame["customer"] = "acme"
    for name in MODEL_FEATURES:
        frame[name] = RNG.uniform(5, 50, len(frame))
    frame[LABEL] = frame["rolling_mean_7"] + RNG.normal(0, 4, len(frame))
    return frame


class Scaled:
    """A stand-in booster: rolling_mean_7 times a factor (1: the candidate, errors of sd 4)."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        return frame["rolling_mean_7"].to_numpy(dtype=float) * self.factor


TRAIN, HOLDOUT = _frame(DAYS[:35]), _frame(DAYS[35:])


@dataclass
class Candidate:
    """The stored candidate: the trainer's metrics (its intervals) and the model."""

    metrics: dict[str, float]

    def load_model(self) -> Scaled:
        return Scaled()


HONEST = IntervalTable({"80": 5.2, "95": 7.9}, windows=2, scores=500)
NARROW = IntervalTable({"80": 2.0, "95": 3.0}, windows=2, scores=500)


def _through_the_check(
    monkeypatch: pytest.MonkeyPatch, chosen: ChosenReference, widths: IntervalTable
) -> dg.AssetCheckEvaluation:
    seams = {
        "latest_run_key": lambda instance, asset, customer: KEY,
        "snapshot_window": lambda instance, customer, key: "2026-01-01 .. 2026-02-11",
        "CandidateTable": lambda url, root: {KEY: Candidate(widths.as_metrics())},
        "choose_reference": lambda registry, customer, key: chosen,
        "read_holdout": lambda store, customer, key: HOLDOUT,
        "read_export_part": lambda *args: TRAIN,
        "record_gate_result": lambda url, result: None,
    }
    for name, fake in seams.items():
        monkeypatch.setattr(beats_champion_check, name, fake)
    resources = {
        "project_db": Resource("postgresql://fake"),
        "partition_storage": Resource("/fake"),
        "mlflow_registry": Resource(FakeRegistry()),
        "gate_settings": beats_champion_check.GateSettings(),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(str(CUSTOMERS.name), ["acme"])
        run = dg.materialize(
            [candidate_stub, beats_champion_check.beats_champion],
            partition_key="acme",
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
    [result] = run.get_asset_check_evaluations()
    return result


@pytest.mark.parametrize(
    ("factor", "widths", "passes", "rule"),
    [
        (None, NARROW, True, "margin"),  # a first model: widened, not refused
        (1.3, NARROW, False, "coverage"),
        (1.3, HONEST, True, "margin"),
        (1.005, HONEST, False, "margin"),
    ],
    ids=["first model widened", "challenger short", "challenger wins", "within the margin"],
)
def test_the_gate_decides_one_case_the_same_through_the_check_and_the_benchmark(
    monkeypatch: pytest.MonkeyPatch,
    factor: float | None,
    widths: IntervalTable,
    passes: bool,
    rule: str,
) -> None:
    champion = (
        None
        if factor is None
        else ReferenceModel("champion v1", Scaled(factor).predict, "champion", "1")
    )
    chosen = ChosenReference(champion, "1" if champion else None)
    checked = _through_the_check(monkeypatch, chosen, widths)
    rules = EvidenceRules.from_settings()
    benched = replay.decide_gate(
        HOLDOUT,
        Scaled().predict,
        champion,
        gate_margin(),
        judge_parts("acme", TRAIN, HOLDOUT, rules),
        GateRules.from_settings(),
        rules,
        gate_rule(),
        widths,
        coverage_tolerance(),
    ).outcome
    shown = {name: value.value for name, value in checked.metadata.items()}
    assert checked.passed == benched.verdict.passed == passes
    assert shown["rule"] == benched.metadata["rule"] == rule
    for name, value in benched.metadata.items():
        assert shown[name] == (value if name != "reason" else shown[name]), name
    assert str(checked.description).startswith(benched.verdict.reason)


# -- one case through the deploy-time check ----------------------------------------------------


@dg.asset(key=REGISTERED_MODEL, partitions_def=CUSTOMERS)
def registered_stub() -> None:
    """Stands in for `registered_model`."""


@dataclass
class Versions:
    """The registry's answers the deploy-time check asks for."""

    champion: str | None

    def aliases(self, customer: str) -> dict[str, str]:
        return {"champion": self.champion} if self.champion else {}

    def load_version(self, customer: str, version: str) -> Scaled:
        return Scaled({"1": 1.15, "2": 1.0, "3": 1.0}[version])


@pytest.mark.parametrize(
    ("champion", "passes"),
    [(None, True), ("1", True), ("3", False), ("2", False)],
    ids=["naive", "worse champion", "as good a champion", "already the champion"],
)
def test_the_deploy_time_check_decides_one_case_the_same_through_the_check_and_the_benchmark(
    monkeypatch: pytest.MonkeyPatch, champion: str | None, passes: bool
) -> None:
    window = ScoringWindow([d.date() for d in DAYS[35:]], "the newest days")
    seams = {
        "challenger_of": lambda registry, customer: RegisteredVersion("acme", "2", KEY),
        "recent_window": lambda url, store, customer, key, days: window,
        "window_rows": lambda store, customer, window: HOLDOUT,
        "record_gate_result": lambda url, result: 1,
        "_log_scores": lambda *args: None,
        "active_run_id": lambda tracking: "run",
    }
    for name, fake in seams.items():
        monkeypatch.setattr(challenger_now_check, name, fake)
    resources = {
        "project_db": Resource("postgresql://fake"),
        "partition_storage": Resource("/fake"),
        "mlflow_registry": Resource(Versions(champion)),
        "deployment_mlflow": object(),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(str(CUSTOMERS.name), ["acme"])
        run = dg.materialize(
            [registered_stub, challenger_now_check.challenger_beats_champion_now],
            partition_key="acme",
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
    [checked] = run.get_asset_check_evaluations()
    reference = (
        ReferenceModel(
            f"champion demand_forecast.acme v{champion}",
            Versions(champion).load_version("acme", champion).predict,
            "champion",
            champion,
        )
        if champion in ("1", "3")
        else None
    )
    benched = replay.judge_deploy(
        HOLDOUT,
        Scaled().predict,
        reference,
        rollout_settings().deploy_margin,
        "demand_forecast.acme v2",
        already_champion=champion == "2",
    )
    assert checked.passed == benched.verdict.passed == passes
    assert checked.description == benched.verdict.reason
    shown = {name: value.value for name, value in checked.metadata.items()}
    assert {k: shown[k] for k in benched.metadata} == dict(benched.metadata)
