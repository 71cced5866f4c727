"""The data side through Dagster, on a Postgres-backed instance and the real project tables."""

import datetime as dt
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.content_hash import frame_content_hash
from retrain_assets.features.lookback import LOOKBACK_DAYS
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.sales_asset import FILES_CHECK
from retrain_assets.store.database import transaction
from retrain_assets.store.snapshots import latest_snapshots

START = dt.date(2025, 1, 1)
TENANTS = (
    TenantSpec("alpha-us", "US", stores=2, items=3, seed=1),
    TenantSpec("beta-de", "DE", stores=1, items=2, seed=2),
)


@pytest.fixture
def world(
    tmp_path: Path,
    app_db: str,
    dagster_instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
):
    """Landing files for two tenants over 35 days, and a Postgres-backed Dagster instance."""
    landing, storage = tmp_path / "landing", tmp_path / "storage"
    for spec in TENANTS:
        land_tenant(str(landing), spec, [START + dt.timedelta(days=i) for i in range(35)])
    monkeypatch.setenv("RETRAIN_LANDING_URL", str(landing))
    monkeypatch.setenv("RETRAIN_STORAGE_URL", str(storage))
    monkeypatch.setenv("RETRAIN_APP_PG_URL", app_db)
    instance = dagster_instance
    instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in TENANTS])
    return {"instance": instance, "landing": landing, "storage": storage, "db": app_db}


def _run_range(instance: dg.DagsterInstance, first: str, last: str, tags=None):
    job = build_definitions().resolve_job_def(FEATURES_JOB)
    return job.execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
            **(tags or {}),
        },
    )


def _feature_versions(instance: dg.DagsterInstance) -> dict[str, str]:
    records = instance.fetch_materializations(dg.AssetKey("store_day_features"), limit=1000)
    versions: dict[str, str] = {}
    for record in sorted(records.records, key=lambda r: r.storage_id):
        mat = record.asset_materialization
        versions[mat.partition] = mat.tags["dagster/data_version"]
    return versions


def test_a_range_run_gives_every_day_its_own_content_hash_and_snapshot(world):
    instance = world["instance"]
    assert "postgres" in type(instance.run_storage).__module__
    result = _run_range(instance, "2025-01-01", "2025-02-04")
    assert result.success
    versions = _feature_versions(instance)
    assert len(versions) == 35 and len(set(versions.values())) == 35
    store = ParquetPartitionStore(str(world["storage"]))
    day = store.read("store_day_features", ["2025-01-30"])
    assert versions["2025-01-30"] == frame_content_hash(day)
    assert set(day["customer"]) == {"alpha-us", "beta-de"} and len(day) == 2 * 3 + 1 * 2
    assert day["lag_28"].notna().all()
    snapshots = latest_snapshots(world["db"])
    assert snapshots[dt.date(2025, 1, 30)].data_version == versions["2025-01-30"]
    assert snapshots[dt.date(2025, 1, 30)].rows_per_customer == {"alpha-us": 6, "beta-de": 2}
    assert not snapshots[dt.date(2025, 1, 30)].from_backfill

    # The same data again gives the same versions; a backfill's republication is marked so.
    assert _run_range(instance, "2025-01-30", "2025-02-04", {"dagster/backfill": "bf1"}).success
    again = _feature_versions(instance)
    assert again == versions
    assert latest_snapshots(world["db"])[dt.date(2025, 2, 4)].backfill_id == "bf1"


def test_bad_files_fail_only_their_day_and_lose_no_good_rows(world):
    landing, instance = world["landing"], world["instance"]
    (landing / "beta-de" / "2025-01-03.csv").unlink()
    good = landing / "alpha-us" / "2025-01-02.csv"
    good.write_text(good.read_text() + "2025-01-02,S9,I9,-4,1.0,0,3\n")
    (landing / "alpha-us" / "2025-01-04.csv").write_bytes(b"\xff\xfe not text")
    assert _run_range(instance, "2025-01-01", "2025-01-05").success

    checks = {e.partition: e for e in _check_evaluations(instance) if e.partition is not None}
    assert {k for k, e in checks.items() if not e.passed} == {"2025-01-03", "2025-01-04"}
    assert "beta-de/2025-01-03.csv" in checks["2025-01-03"].metadata["failed_files"].value
    assert "not UTF-8" in str(checks["2025-01-04"].metadata["failed_files"].value)
    with transaction(world["db"]) as cur:
        cur.execute("SELECT customer, line, reason FROM quarantined_rows")
        quarantined = cur.fetchall()
        cur.execute("SELECT partition_date, file, reason FROM landing_file_problems")
        problems = cur.fetchall()
    assert quarantined == [("alpha-us", 8, "units_sold: negative")]
    assert {(str(d), f) for d, f, _ in problems} == {
        ("2025-01-03", "beta-de/2025-01-03.csv"),
        ("2025-01-04", "alpha-us/2025-01-04.csv"),
    }
    sales = ParquetPartitionStore(str(world["storage"])).read("sales", ["2025-01-02", "2025-01-03"])
    per_day = sales.groupby([sales["date"].dt.strftime("%Y-%m-%d"), "customer"]).size()
    assert per_day.to_dict() == {
        ("2025-01-02", "alpha-us"): 6,
        ("2025-01-02", "beta-de"): 2,
        ("2025-01-03", "alpha-us"): 6,
    }


def test_features_refuse_to_run_over_missing_sales_history(world):
    result = _run_features(world["instance"], "2025-01-20", "2025-01-20")
    assert not result.success
    failure = _failure(result)
    assert "2025-01-20: sales has no day materialized at all" in failure
    assert "materialize those partitions of sales first" in failure


def _check_evaluations(instance: dg.DagsterInstance) -> list:
    key = dg.AssetCheckKey(dg.AssetKey("sales"), FILES_CHECK)
    records = instance.event_log_storage.get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION), limit=1000
    )
    return [
        r.event_log_entry.dagster_event.event_specific_data
        for r in records
        if r.event_log_entry.dagster_event.event_specific_data.asset_check_key == key
    ]


def test_an_unknown_frame_hashes_the_same_in_any_order_of_construction():
    a = pd.DataFrame({"x": [1, 2], "y": ["a", "b"]})
    assert frame_content_hash(a) == frame_content_hash(a.copy())
    assert frame_content_hash(a) != frame_content_hash(a.assign(x=[1, 3]))


def _run_features(instance: dg.DagsterInstance, first: str, last: str):
    job = (
        build_definitions()
        .resolve_job_def(FEATURES_JOB)
        .get_subset(asset_selection={dg.AssetKey("store_day_features")})
    )
    return job.execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        },
        raise_on_error=False,
    )


def _feature_metadata(instance: dg.DagsterInstance) -> dict[str, dict]:
    """Return the latest materialization metadata of every feature day, as plain values."""
    records = instance.fetch_materializations(dg.AssetKey("store_day_features"), limit=1000)
    latest: dict[str, dict] = {}
    for record in sorted(records.records, key=lambda r: r.storage_id):
        mat = record.asset_materialization
        latest[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return latest


def _failure(result) -> str:
    return result.get_step_failure_events()[0].step_failure_data.error.to_string()


def test_one_run_over_the_first_landed_days_computes_them_from_the_days_that_exist(world):
    """Sales start on 2025-01-10 here: the first feature days look back past it."""
    instance = world["instance"]
    assert _run_range(instance, "2025-01-10", "2025-01-14").success  # one run, both assets
    meta = _feature_metadata(instance)
    assert sorted(meta) == [f"2025-01-{d}" for d in range(10, 15)]
    assert [meta[day]["history_days_available"] for day in sorted(meta)] == [0, 1, 2, 3, 4]
    assert all(m["partial_history"] is True for m in meta.values())
    assert [m["rows"] for m in meta.values()] == [8] * 5

    features = ParquetPartitionStore(str(world["storage"])).read(
        "store_day_features", ["2025-01-14"]
    )
    assert features[["lag_7", "lag_14", "lag_28"]].isna().all().all()
    sales = ParquetPartitionStore(str(world["storage"])).read(
        "sales", [f"2025-01-{d}" for d in range(10, 14)]
    )
    one = features[
        (features["customer"] == "alpha-us")
        & (features["store_id"] == "S001")
        & (features["item_id"] == "I0001")
    ]
    history = sales[
        (sales["customer"] == "alpha-us")
        & (sales["store_id"] == "S001")
        & (sales["item_id"] == "I0001")
    ]
    assert len(history) == 4  # 01-10 .. 01-13: none ends the rolling windows (D-34 .. D-7)
    assert one[["rolling_mean_7", "rolling_mean_28"]].isna().all().all()
    published = set(latest_snapshots(world["db"]))
    assert published == {START + dt.timedelta(days=d) for d in range(9, 14)}

    # Once LOOKBACK_DAYS earlier days exist, a day has its whole look-back again.
    assert _run_range(instance, "2025-01-15", "2025-02-04").success
    meta = _feature_metadata(instance)
    assert meta["2025-02-04"] == {
        **meta["2025-02-04"],
        "history_days_available": 25,
        "partial_history": True,
    }
    assert _run_range(instance, "2025-01-01", "2025-01-09").success  # history now from 01-01
    assert _run_features(instance, "2025-02-04", "2025-02-04").success
    assert _feature_metadata(instance)["2025-02-04"]["partial_history"] is False
    assert _feature_metadata(instance)["2025-02-04"]["history_days_available"] == LOOKBACK_DAYS


def test_a_hole_in_the_sales_history_is_named_and_blocks_only_the_days_that_need_it(world):
    instance, storage = world["instance"], world["storage"]
    assert _run_range(instance, "2025-01-10", "2025-01-20").success
    (storage / "sales" / "2025-01-15.parquet").unlink()  # a sales day lost after the fact
    result = _run_features(instance, "2025-01-12", "2025-01-17")
    assert not result.success
    failure = _failure(result)
    assert "could not compute 3" in failure and "published 3 day(s)" in failure
    assert "2025-01-15: sales has no data for 2025-01-15 itself" in failure
    assert "2025-01-16: sales has no data for 2025-01-15 of its look-back" in failure
    assert "materialize those partitions of sales first" in failure
    mats = instance.fetch_materializations(dg.AssetKey("store_day_features"), limit=1000)
    this_run = sorted(
        r.asset_materialization.partition for r in mats.records if r.run_id == result.run_id
    )
    assert this_run == ["2025-01-12", "2025-01-13", "2025-01-14"]  # before the hole: published

    before = _run_features(instance, "2025-01-05", "2025-01-05")
    assert not before.success
    assert "2025-01-05 is before the first sales day 2025-01-10" in _failure(before)
