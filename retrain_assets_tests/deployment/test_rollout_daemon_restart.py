"""The real dagster-daemon killed in the middle of a canary step, then started again.

Real Postgres, MLflow, the prediction service (`retrain-assets serve`) answering a client that
keeps asking for forecasts, and a daemon of this test's own (killing the shared platform's
would stop the platform). The rollout must resume with its step's start and weight as they
were, and promote once.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading

import dagster as dg
import pandas as pd
import pytest
import requests

from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.machines.store import history, pointer
from retrain_assets.registry.mlflow_registry import MlflowRegistry
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.store.customers import register_customer
from retrain_assets.store.database import transaction
from retrain_assets_tests.deployment.platform_helpers import days
from retrain_assets_tests.serving.serving_process import TOKEN, ServingProcess
from retrain_assets_tests.support.processes import start_daemon, stop_group
from retrain_assets_tests.support.waiting import wait_until

pytestmark = pytest.mark.system
CUSTOMER = "restart-us"
START, LAST = dt.date(2025, 1, 1), dt.date(2025, 3, 5)
FIRST_FEATURE_DAY = START + dt.timedelta(days=28)
STEP_SECONDS = 60
ROLLOUT_ENV = {
    "RETRAIN_ROLLOUT_INTERVAL_SECONDS": "1",
    "RETRAIN_ROLLOUT_STEP_SECONDS": str(STEP_SECONDS),
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "20",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "20",
    "RETRAIN_DEPLOY_CHECK_DAYS": "3",
    # this test's daemon runs the rollout only (another sensor's first tick could be slow)
    "RETRAIN_POLL_INTERVAL_SECONDS": "3600",
    "RETRAIN_POLICY_INTERVAL_SECONDS": "3600",
    "RETRAIN_LANDING_AUTOMATION": "off",
}


class Retailer(threading.Thread):
    """Asks the prediction service for the same published days' forecasts until stopped."""

    def __init__(self, url: str, rows: list[dict]) -> None:
        super().__init__(daemon=True)
        self.url, self.rows, self.failures = url, rows, []
        self.stop = threading.Event()

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {TOKEN}"
        while not self.stop.wait(1.0):
            answer = session.post(
                f"{self.url}/forecast/{CUSTOMER}", json={"rows": self.rows}, timeout=60
            )
            if answer.status_code != 200:
                self.failures.append(f"{answer.status_code} {answer.text[:200]}")


def register(registry: MlflowRegistry, frame: pd.DataFrame, key: str, rounds: int) -> str:
    import lightgbm

    from retrain_assets.features.training_export import LABEL

    booster = lightgbm.train(
        {
            "objective": "regression",
            "num_leaves": 15,
            "learning_rate": 0.1,
            "verbose": -1,
            "seed": 3,
            "min_data_in_leaf": 5,
        },
        lightgbm.Dataset(frame[MODEL_FEATURES], label=frame[LABEL]),
        num_boost_round=rounds,
    )
    run_id = registry.candidate_run(CUSTOMER, key)
    registry.log_candidate(run_id, booster, {}, frame[MODEL_FEATURES].head(20))
    return registry.register(CUSTOMER, key, run_id)


def request_rows(frame: pd.DataFrame) -> list[dict]:
    rows = []
    for record in frame[["store_id", "item_id", "date", *MODEL_FEATURES]].to_dict("records"):
        row = {
            "store_id": record["store_id"],
            "item_id": record["item_id"],
            "date": record["date"].date().isoformat(),
        }
        row.update({k: None if pd.isna(record[k]) else float(record[k]) for k in MODEL_FEATURES})
        rows.append(row)
    return rows


def test_a_daemon_killed_mid_step_resumes_the_rollout_and_promotes_once(
    tmp_path, pg_server, app_db, dagster_db, mlflow_uri, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("RETRAIN_HOME", str(home))
    monkeypatch.setenv("RETRAIN_PG_URL", pg_server.url)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    for name, value in ROLLOUT_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("RETRAIN_LANDING_URL", "RETRAIN_STORAGE_URL"):
        monkeypatch.delenv(name, raising=False)
    register_customer(app_db, CUSTOMER, "US", "test")
    folders = prepare_dagster_home(repo_file("dagster.yaml"))
    for key, value in child_environment(pg_server, folders).items():
        monkeypatch.setenv(key, value)
    db = os.environ["RETRAIN_APP_PG_URL"]
    land_tenant(
        str(home / "landing"),
        TenantSpec(CUSTOMER, "US", stores=6, items=20, seed=60),
        days(START, LAST),
    )
    registry = MlflowRegistry(mlflow_uri)

    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(CUSTOMERS.name, [CUSTOMER])
        defs = build_definitions()
        published = defs.resolve_job_def(FEATURES_JOB).execute_in_process(
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": START.isoformat(),
                "dagster/asset_partition_range_end": LAST.isoformat(),
            },
        )
        assert published.success
        store = ParquetPartitionStore(str(home / "storage"))
        frame = store.read(
            "store_day_features", [d.isoformat() for d in days(FIRST_FEATURE_DAY, LAST)]
        )
        frame = frame[frame["customer"] == CUSTOMER].reset_index(drop=True)
        early = frame[frame["date"] <= pd.Timestamp(LAST - dt.timedelta(days=10))]
        first = register(registry, early, "weak", rounds=12)
        deploy = defs.resolve_job_def("deploy_model")
        assert deploy.execute_in_process(instance=instance, partition_key=CUSTOMER).success
        second = register(registry, frame, "strong", rounds=150)

        service = ServingProcess(app_db=db, mlflow_uri=mlflow_uri, home=tmp_path / "serve")
        service.start()
        recent = frame[frame["date"] > pd.Timestamp(LAST - dt.timedelta(days=10))]
        retailer = Retailer(service.url, request_rows(recent))
        log = tmp_path / "daemon.log"
        daemon = start_daemon(log)
        try:
            retailer.start()
            idle = "Sensor rollout_controller skipped: no rollout in progress"
            wait_until(
                lambda: idle in log.read_text(),
                120,
                "the daemon's rollout_controller",
                detail=lambda: log.read_text()[-3000:],
            )
            # deployed while the daemon runs, so the kill lands early in the step
            assert deploy.execute_in_process(instance=instance, partition_key=CUSTOMER).success
            started = pointer(db, "rollout", CUSTOMER)
            assert started.state == "CANARY_10"
            step_start = started.payload["step_started_at"]
            waiting = "Sensor rollout_controller skipped: 1 rollout(s) in progress: 1 inside"
            wait_until(
                lambda: waiting in log.read_text(),
                120,
                "the rollout_controller seeing the step inside its minimum time",
                detail=lambda: log.read_text()[-3000:],
            )
            stop_group(daemon, signal.SIGKILL)  # the daemon dies in the middle of CANARY_10
            elapsed = dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(step_start)
            assert elapsed.total_seconds() < STEP_SECONDS, "killed after the step, not in it"
            mid = pointer(db, "rollout", CUSTOMER)
            assert (mid.state, mid.payload["step_started_at"], mid.payload["weight"]) == (
                "CANARY_10",
                step_start,
                0.1,
            )
            daemon = start_daemon(log)
            wait_until(
                lambda: pointer(db, "rollout", CUSTOMER).state == "DONE",
                300,
                "the rollout to finish after the restart",
                detail=lambda: log.read_text()[-3000:],
            )
        finally:
            retailer.stop.set()
            stop_group(daemon, signal.SIGTERM)
            service.stop()
    assert retailer.failures == []
    visits = [
        (h.state, h.visit, h.yielded, h.next_state, h.started_at)
        for h in history(db, "rollout", CUSTOMER, started.run_key)
    ]
    entered = [(state, at) for state, visit, yielded, _, at in visits if visit == 1]
    assert [state for state, _ in entered] == ["START", "CANARY_10", "CANARY_50", "PROMOTE"]
    analysis_10 = next(
        at for state, visit, yielded, _, at in visits if state == "CANARY_10" and not yielded
    )
    assert (analysis_10 - dt.datetime.fromisoformat(step_start)).total_seconds() >= STEP_SECONDS
    assert sum(state == "PROMOTE" for state, *_ in visits) == 1  # promoted once
    with transaction(db) as cur:
        cur.execute(
            "SELECT from_version, to_version FROM champion_moves WHERE customer = %s ORDER BY id",
            (CUSTOMER,),
        )
        moves = cur.fetchall()
    assert moves == [(None, first), (first, second)]
    assert registry.aliases(CUSTOMER) == {
        "champion": second,
        "previous": first,
        "challenger": second,
    }
