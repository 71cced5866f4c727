"""A world for the model side: published feature snapshots and a real GPU service process."""

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from retrain_assets.customers import CUSTOMERS
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.store.server import PostgresServer
from retrain_assets_tests.gpu.service_process import TOKEN, running_service
from retrain_assets_tests.models.world import DAYS, START, TENANTS, ModelWorld
from retrain_assets_tests.support.in_process import publish_feature_range


@pytest.fixture
def model_world(
    tmp_path: Path,
    app_db: str,
    pg_server: PostgresServer,
    dagster_instance: dg.DagsterInstance,
    mlflow_uri: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[ModelWorld]:
    """Features published for 50 days, a Postgres-backed instance, a GPU service, MLflow."""
    home = tmp_path / "home"
    landing = home / "landing"
    for spec in TENANTS:
        land_tenant(str(landing), spec, [START + dt.timedelta(days=i) for i in range(DAYS)])
    monkeypatch.setenv("RETRAIN_HOME", str(home))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    # a commit per test: run keys (and so MLflow runs and versions) never meet across tests
    monkeypatch.setenv("RETRAIN_CODE_COMMIT", f"test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    # retries are due at once (each still its own advance); machines/test_retry_waits times them
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "0")
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "0")
    monkeypatch.delenv("RETRAIN_LANDING_URL", raising=False)
    monkeypatch.delenv("RETRAIN_STORAGE_URL", raising=False)
    instance = dagster_instance
    with running_service(pg_url=pg_server.url, home=tmp_path / "gpu-home") as service:
        monkeypatch.setenv("RETRAIN_GPU_URL", service.url)
        monkeypatch.setenv("RETRAIN_GPU_TOKEN", TOKEN)
        instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in TENANTS])
        last = START + dt.timedelta(days=DAYS - 1)
        publish_feature_range(instance, START, last)
        yield ModelWorld(
            instance=instance,
            service=service,
            db=app_db,
            last_day=last.isoformat(),
            mlflow_uri=mlflow_uri,
            home=home,
        )
