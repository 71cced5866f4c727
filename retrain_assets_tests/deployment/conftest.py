"""A rollout world without the platform: Postgres, feature days with actuals, a fake registry."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from retrain_assets.deployment.advancing import TickReport, advance_rollouts
from retrain_assets.deployment.records import DeploymentRequest, StartedDeployment, start_deployment
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.deployment.rollout_settings import RolloutSettings
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.models.gate_results import GateResult, record_gate_result
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshot
from retrain_assets_tests.deployment.contract import Predict, serve_rows
from retrain_assets_tests.support.in_process import publish_feature_range

DAYS = [dt.date(2026, 3, 1) + dt.timedelta(days=i) for i in range(5)]
SETTINGS = RolloutSettings(
    interval_seconds=1,
    step_seconds=60,
    min_predictions=20,
    min_actuals=20,
    max_no_data_intervals=3,
    max_error_rate=0.05,
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
    days: tuple[dt.date, ...] = tuple(DAYS)  # the days `serve` serves unless told

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
        """Record a passing deploy-time verdict and start the rollout as deployment_decision."""
        verdict = record_gate_result(
            self.db,
            GateResult(
                run_key=f"rk-{version}",
                customer=customer,
                passed=True,
                candidate_wape=0.3,
                reference_wape=0.4,
                reference="champion",
                champion_version=champion,
                margin=0.0,
                holdout_window="-",
                rows_scored=10,
                reason="passes",
                gate="challenger_beats_champion_now",
                model_version=version,
            ),
        )
        request = DeploymentRequest(
            customer=customer,
            version=version,
            run_key=f"rk-{version}",
            decided_by="tester",
            reason="test",
            gate_result_id=verdict,
            previous_champion=champion,
            dagster_run_id=f"run-{customer}-{version}-{self.clock.now.timestamp()}",
        )
        return start_deployment(self.db, request, set(), rollout_machine(self.settings))

    def advance(self, **kwargs) -> TickReport:
        kwargs.setdefault("settings", self.settings)
        return advance_rollouts(self.db, self.registry, self.features, clock=self.clock, **kwargs)

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
            frame = pd.DataFrame(
                {
                    "customer": customer,
                    "store_id": [f"S{s:03d}" for s in range(stores) for _ in range(items)],
                    "item_id": [f"I{i:04d}" for _ in range(stores) for i in range(items)],
                    "date": pd.Timestamp(day),
                    "units_sold": sold.astype(float),
                }
            )
            frames.append(frame)
            for row in frame.itertuples():
                actuals[(customer, row.store_id, row.item_id, day)] = float(row.units_sold)
        store.write("store_day_features", day.isoformat(), pd.concat(frames, ignore_index=True))
        publish_snapshot(db, SnapshotRecord(day, f"v-{day}", "f1", {}, False, None, "run"))
    return actuals


@pytest.fixture
def world(app_db: str, tmp_path: Path) -> RolloutWorld:
    actuals = write_feature_days(app_db, tmp_path / "storage", ["acme", "bolt"])
    return RolloutWorld(
        app_db, ParquetPartitionStore(str(tmp_path / "storage")), actuals, FakeRegistry(), Clock()
    )


# -- a registry world: features materialized in-process, LightGBM versions in a real MLflow ----

REGISTRY_TENANT = "delta-us"
REGISTRY_START = dt.date(2025, 1, 1)
REGISTRY_DAYS = 60
FAST_ROLLOUT = {
    "RETRAIN_ROLLOUT_STEP_SECONDS": "0",
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "20",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "20",
    "RETRAIN_DEPLOY_CHECK_DAYS": "7",
}


@dataclass
class RegistryWorld:
    """A Postgres-backed Dagster instance, published features and a real MLflow registry."""

    instance: object
    db: str
    mlflow_uri: str
    home: Path
    customer: str = REGISTRY_TENANT

    def registry(self):
        from retrain_assets.registry.mlflow_registry import MlflowRegistry

        return MlflowRegistry(self.mlflow_uri)

    def frame(self, first: int, last: int) -> pd.DataFrame:
        """The customer's feature rows of days `first`..`last` (offsets from the start)."""
        from retrain_assets.settings import storage_root

        days = [(REGISTRY_START + dt.timedelta(days=i)).isoformat() for i in range(first, last + 1)]
        frame = ParquetPartitionStore(storage_root()).read("store_day_features", days)
        return frame[frame["customer"] == self.customer].reset_index(drop=True)

    def register(
        self,
        run_key: str,
        rounds: int,
        train_days: tuple[int, int] = (28, 52),
        label_factor: float = 1.0,
    ) -> str:
        """Train a LightGBM model here and register it (alias challenger); return its version."""
        import lightgbm

        from retrain_assets.features.training_export import LABEL, MODEL_FEATURES

        frame = self.frame(*train_days)
        booster = lightgbm.train(
            {
                "objective": "regression",
                "num_leaves": 15,
                "learning_rate": 0.1,
                "verbose": -1,
                "seed": 3,
                "min_data_in_leaf": 5,
            },
            lightgbm.Dataset(frame[MODEL_FEATURES], label=frame[LABEL] * label_factor),
            num_boost_round=rounds,
        )
        registry = self.registry()
        run_id = registry.candidate_run(self.customer, run_key)
        registry.log_candidate(
            run_id, booster, {"rounds": float(rounds)}, frame[MODEL_FEATURES].head(20)
        )
        return registry.register(self.customer, run_key, run_id)

    def run(
        self,
        job: str | None = None,
        assets: list[str] | None = None,
        tags=None,
        checks: list[str] | None = None,
    ):
        """Execute the deploy job, some assets with their checks, or some checks alone."""
        from retrain_assets.definitions import build_definitions

        defs = build_definitions()
        if checks:  # in deploy_model, alone: a check-only job of `deployed_model` has no partitions
            definition = defs.resolve_job_def("deploy_model")
            nodes = [n.name for n in definition.nodes if any(n.name.endswith(c) for c in checks)]
            return definition.execute_in_process(
                instance=self.instance,
                partition_key=self.customer,
                op_selection=nodes,
                tags=tags or {},
                raise_on_error=False,
            )
        if job:
            definition = defs.resolve_job_def(job)
            selection = None
        else:
            keys = [dg.AssetKey(a) for a in assets or []]
            definition = defs.resolve_implicit_job_def_def_for_assets(keys)
            selection = keys
        return definition.execute_in_process(
            instance=self.instance,
            partition_key=self.customer,
            asset_selection=selection,
            tags=tags or {},
            raise_on_error=False,
        )


@pytest.fixture
def registry_world(
    tmp_path: Path,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    mlflow_uri: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """60 days of one tenant's features published on Postgres, MLflow, fast rollout settings."""
    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.demo.simulate import land_tenant
    from retrain_assets.demo.tenants import TenantSpec
    from retrain_assets.store.customers import register_customer

    home = tmp_path / "home"
    customer = f"{REGISTRY_TENANT}-{uuid.uuid4().hex[:8]}"  # MLflow is shared by the session
    spec = TenantSpec(customer, "US", stores=3, items=5, seed=4)
    land_tenant(
        str(home / "landing"),
        spec,
        [REGISTRY_START + dt.timedelta(days=i) for i in range(REGISTRY_DAYS)],
    )
    monkeypatch.setenv("RETRAIN_HOME", str(home))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    # what `up` exports and definitions.py reads; no deployment asset calls the GPU service
    monkeypatch.setenv("RETRAIN_GPU_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RETRAIN_GPU_TOKEN", "unused")
    for name in ("RETRAIN_LANDING_URL", "RETRAIN_STORAGE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in FAST_ROLLOUT.items():
        monkeypatch.setenv(name, value)
    register_customer(app_db, customer, "US", "test")
    instance = dagster_instance
    instance.add_dynamic_partitions(CUSTOMERS.name, [customer])
    last = REGISTRY_START + dt.timedelta(days=REGISTRY_DAYS - 1)
    publish_feature_range(instance, REGISTRY_START, last)
    return RegistryWorld(instance, app_db, mlflow_uri, home, customer)
