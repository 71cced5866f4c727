"""Customer names at every boundary: the discovery sensor, `sales`, the model assets, the op.

The Dagster UI's "add partition" accepts any string; a `customers` partition such as `../x/y`
must never become a path outside the landing root, a row published under that name, a query
or a registry name. Each boundary refuses it with the key and the rule.
"""

import datetime as dt
import shutil
from pathlib import Path

import dagster as dg
import pytest

from retrain_assets.automation.customer_discovery import customer_discovery
from retrain_assets.customers import CUSTOMER_NAME_RULE, CUSTOMERS
from retrain_assets.definitions import build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.sales_asset import FILES_CHECK, sales
from retrain_assets.models.model_candidate_asset import model_candidate
from retrain_assets.models.registered_model_asset import registered_model
from retrain_assets.models.training_job_asset import training_job
from retrain_assets.policy.rule import APPROVAL_JOB
from retrain_assets.store.customers import customer_countries
from retrain_assets.store.database import transaction
from retrain_assets.store.resource import ProjectDatabase

DAY = dt.date(2025, 1, 1)
TENANT = TenantSpec("alpha-us", "US", stores=2, items=3, seed=1)
ESCAPING = "../x/y"


@pytest.fixture
def world(
    tmp_path: Path,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
):
    """One tenant's landing file, a file OUTSIDE the landing root, a Postgres instance."""
    landing, storage = tmp_path / "landing", tmp_path / "storage"
    land_tenant(str(landing), TENANT, [DAY])
    outside = tmp_path / "x" / "y"  # what `<landing>/../x/y` points at
    outside.mkdir(parents=True)
    shutil.copy(landing / TENANT.name / f"{DAY}.csv", outside / f"{DAY}.csv")
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_LANDING_URL", str(landing))
    monkeypatch.setenv("RETRAIN_STORAGE_URL", str(storage))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    # what `up` exports and definitions.py reads; the assets refuse before calling a service
    monkeypatch.setenv("RETRAIN_GPU_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RETRAIN_GPU_TOKEN", "unused")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    return {"instance": dagster_instance, "landing": landing, "storage": storage, "db": app_db}


def test_discovery_refuses_a_folder_whose_name_ends_in_a_newline(world):
    (world["landing"] / "abc\n").mkdir()
    instance = world["instance"]

    def tick() -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=instance, resources={"project_db": ProjectDatabase()}
        )
        return customer_discovery(context)

    first = tick()
    added = [key for req in first.dynamic_partitions_requests for key in req.partition_keys]
    assert added == [TENANT.name]
    instance.add_dynamic_partitions(CUSTOMERS.name, added)  # what the daemon does with it
    assert customer_countries(world["db"]) == {TENANT.name: "US"}
    second = tick()
    assert not second.dynamic_partitions_requests
    reason = second.skip_reason.skip_message
    assert "refused: folder 'abc\\n'" in reason and "not a safe slug" in reason
    assert instance.get_dynamic_partitions(CUSTOMERS.name) == [TENANT.name]


def test_sales_skips_an_escaping_partition_and_says_so(world):
    instance = world["instance"]
    instance.add_dynamic_partitions(CUSTOMERS.name, [TENANT.name, ESCAPING])
    result = dg.materialize(
        [sales],
        partition_key=DAY.isoformat(),
        instance=instance,
        resources=build_definitions().resources,
    )
    assert result.success
    published = ParquetPartitionStore(str(world["storage"])).read("sales", [DAY.isoformat()])
    assert set(published["customer"]) == {TENANT.name}
    materialization = result.asset_materializations_for_node("sales")[0]
    assert materialization.metadata["refused_partitions"].value == [repr(ESCAPING)]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == FILES_CHECK
    assert not check.passed
    assert repr(ESCAPING) in check.description
    errors = [
        event.message
        for event in instance.all_logs(result.run_id)
        if event.level == "ERROR" or event.level == 40
    ]
    assert any(repr(ESCAPING) in message and "skipped" in message for message in errors)
    with transaction(world["db"]) as cur:  # nothing recorded under the escaping name either
        cur.execute("SELECT count(*) FROM landing_file_problems WHERE customer = %s", (ESCAPING,))
        assert cur.fetchone()[0] == 0


@pytest.mark.parametrize("asset", [training_job, model_candidate, registered_model])
def test_a_model_asset_refuses_an_unsafe_partition_naming_key_and_rule(world, asset):
    instance = world["instance"]
    instance.add_dynamic_partitions(CUSTOMERS.name, [ESCAPING])
    result = dg.materialize(
        [training_job, model_candidate, registered_model],
        selection=[asset],
        partition_key=ESCAPING,
        instance=instance,
        resources=build_definitions().resources,
        raise_on_error=False,
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data
    assert failure.user_failure_data is not None, failure.error
    assert repr(ESCAPING) in failure.user_failure_data.description
    assert CUSTOMER_NAME_RULE in failure.user_failure_data.description


def test_the_drift_approval_refuses_an_unsafe_partition(world):
    instance = world["instance"]
    instance.add_dynamic_partitions(CUSTOMERS.name, ["abc\n"])
    job = build_definitions().resolve_job_def(APPROVAL_JOB)
    result = job.execute_in_process(instance=instance, partition_key="abc\n", raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data
    assert failure.user_failure_data is not None, failure.error
    assert "'abc\\n'" in failure.user_failure_data.description
