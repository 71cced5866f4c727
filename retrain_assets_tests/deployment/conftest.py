"""A rollout world without the platform: Postgres, feature days with actuals, a fake registry."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from retrain_assets.deployment.advancing import TickReport, advance_rollouts
from retrain_assets.deployment.records import DeploymentRequest, StartedDeployment, start_deployment
from retrain_assets.deployment.settings import RolloutSettings
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.machines.rollout import rollout_machine
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.store.migrations import migrate
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshot
from retrain_assets_tests.deployment.contract import Predict, serve_rows

DAYS = [dt.date(2026, 3, 1) + dt.timedelta(days=i) for i in range(5)]
SETTINGS = RolloutSettings(
    interval_seconds=1, step_seconds=60, min_predictions=20, min_actuals=20,
    max_no_data_intervals=3, max_error_rate=0.05,
)


@dataclass
class FakeRegistry:
    """The alias calls of `MlflowRegistry`, on a dict per customer; records every call."""

    aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[tuple] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)  # method names that raise

    def _call(self, name: str, *args: object) -> None:
        self.calls.append((name, *args))
        if name in self.failing:
            from mlflow.exceptions import MlflowException

            raise MlflowException(f"{name}: the registry is unreachable")

    def set_canary(self, customer: str, version: str) -> None:
        self._call("set_canary", customer, version)
        self.aliases.setdefault(customer, {})["canary"] = version

    def remove_canary(self, customer: str) -> None:
        self._call("remove_canary", customer)
        self.aliases.setdefault(customer, {}).pop("canary", None)

    def promote(self, customer: str, version: str, previous: str | None, decision_id: int) -> None:
        self._call("promote", customer, version, previous, decision_id)
        mine = self.aliases.setdefault(customer, {})
        if previous is not None and previous != version:
            mine["previous"] = previous
        mine["champion"] = version
        mine.pop("canary", None)


@dataclass
class Clock:
    """A clock the test moves."""

    now: dt.datetime = dt.datetime(2026, 3, 6, 12, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def forward(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@dataclass
class RolloutWorld:
    """Everything a rollout test touches."""

    db: str
    features: ParquetPartitionStore
    actuals: dict[tuple[str, str, str, dt.date], float]
    registry: FakeRegistry
    clock: Clock
    settings: RolloutSettings = SETTINGS

    def series(self, customer: str) -> list[tuple[str, str]]:
        return sorted({(s, i) for c, s, i, _ in self.actuals if c == customer})

    def model(self, customer: str, factor: float = 1.0, fail: bool = False) -> Predict:
        """A forecaster: the actual sales times `factor` (or one that always fails)."""

        def predict(store: str, item: str, day: dt.date) -> float:
            if fail:
                raise RuntimeError("the model could not be loaded")
            return self.actuals[(customer, store, item, day)] * factor

        return predict

    def deploy(self, customer: str, version: str, champion: str | None) -> StartedDeployment:
        """Record a passing deploy-time verdict and start the rollout, as deployed_model does."""
        verdict = record_gate_result(self.db, GateResult(
            run_key=f"rk-{version}", customer=customer, passed=True, candidate_wape=0.3,
            reference_wape=0.4, reference="champion", champion_version=champion, margin=0.0,
            holdout_window="-", rows_scored=10, reason="passes",
            gate="challenger_beats_champion_now", model_version=version,
        ))
        request = DeploymentRequest(
            customer=customer, version=version, run_key=f"rk-{version}", decided_by="tester",
            reason="test", gate_result_id=verdict, previous_champion=champion,
            dagster_run_id=f"run-{customer}-{version}-{self.clock.now.timestamp()}",
        )
        return start_deployment(self.db, request, set(), rollout_machine(self.settings))

    def advance(self, **kwargs) -> TickReport:
        kwargs.setdefault("settings", self.settings)
        return advance_rollouts(
            self.db, self.registry, self.features, clock=self.clock, **kwargs
        )

    def serve(self, customer: str, models: dict[str, Predict], days: list[dt.date] = DAYS) -> int:
        keys = [(s, i, d) for d in days for s, i in self.series(customer)]
        return serve_rows(self.db, customer, keys, models, served_at=self.clock.now)

    def with_settings(self, **changes) -> RolloutWorld:
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, **changes))


def write_feature_days(
    db: str,
    root: Path,
    customers: list[str],
    stores: int = 4,
    items: int = 10,
    days: list[dt.date] = DAYS,
    units: Callable[[np.random.Generator, int], np.ndarray] | None = None,
) -> dict[tuple[str, str, str, dt.date], float]:
    """Write `store_day_features` days (label only matters here) and publish their records."""
    rng = np.random.default_rng(5)
    store = ParquetPartitionStore(str(root))
    actuals = {}
    for day in days:
        frames = []
        for customer in customers:
            n = stores * items
            sold = units(rng, n) if units else rng.integers(1, 30, n)
            frame = pd.DataFrame({
                "customer": customer,
                "store_id": [f"S{s:03d}" for s in range(stores) for _ in range(items)],
                "item_id": [f"I{i:04d}" for _ in range(stores) for i in range(items)],
                "date": pd.Timestamp(day),
                "units_sold": sold.astype(float),
            })
            frames.append(frame)
            for row in frame.itertuples():
                actuals[(customer, row.store_id, row.item_id, day)] = float(row.units_sold)
        store.write("store_day_features", day.isoformat(), pd.concat(frames, ignore_index=True))
        publish_snapshot(db, SnapshotRecord(day, f"v-{day}", "f1", {}, False, None, "run"))
    return actuals


@pytest.fixture
def world(app_db: str, tmp_path: Path) -> RolloutWorld:
    migrate(app_db)
    actuals = write_feature_days(app_db, tmp_path / "storage", ["acme", "bolt"])
    return RolloutWorld(
        app_db, ParquetPartitionStore(str(tmp_path / "storage")), actuals, FakeRegistry(), Clock()
    )
