"""Everything the data side leaves behind for a shuffled input with bad rows, as plain JSON.

`sales` and `store_day_features` are run over a range (one run, as a single-run backfill) and
then over one day; what they leave is summarised: each Parquet partition's content hash, row
count and columns, the materialization metadata and data versions per partition, the check
evaluations, the quarantine records and file problems, and the published snapshots. A test
compares it with a golden file written by the code before the speed-up (`python -m
retrain_assets_tests.features.feature_outputs <golden.json>` rewrites it; see its test).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import dagster as dg

from retrain_assets.customers import CUSTOMERS
from retrain_assets.definitions import FEATURES_JOB, build_definitions
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.content_hash import frame_content_hash
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.store.database import transaction
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import PostgresServer, ensure_database
from retrain_assets.store.snapshots import latest_snapshots
from retrain_assets_tests.support.databases import postgres_storage

START = dt.date(2025, 1, 1)
DAYS = 36
TENANTS = (
    TenantSpec("alpha-us", "US", stores=3, items=4, seed=11),
    TenantSpec("beta-de", "DE", stores=2, items=3, seed=12),
    TenantSpec("gamma-jp", "JP", stores=1, items=5, seed=13),
)
ASSETS = ("sales", "store_day_features")
BAD_LINES = (
    "{day},S001,I0001,-4,1.0,0,3",  # negative units (and a conflicting key)
    "{day},S001,I0002,3,abc,0,3",  # price not a number
    "2024-12-31,S009,I0009,3,1.5,0,3",  # another day
    "{day},S009,I0009,3,1.5,maybe,3",  # promotion not a flag
    "{day},S008,I0008,1,2.0,0",  # malformed: too few fields
    '{day},"S007",I0007,2,2.5,1,"4"',  # quoted, good
    '{day},"S006,I0006,2,2.5,1,4',  # quote never closes
    "{day},S005,I0005,2.5,2.5,1,4",  # units not whole
    "{day},S\x01,I0005,2,2.5,1,4",  # a control character
    "",  # blank
)


def land_shuffled_input(landing: Path, seed: int = 7) -> None:
    """Land the tenants, shuffle each file's rows, add bad rows; one missing and one non-UTF-8."""
    rng = random.Random(seed)
    for spec in TENANTS:
        land_tenant(str(landing), spec, [START + dt.timedelta(days=i) for i in range(DAYS)])
    for path in sorted(landing.glob("*/*.csv")):
        header, *rows = path.read_text().splitlines()
        day = path.stem
        rows += [line.format(day=day) for line in rng.sample(BAD_LINES, rng.randint(0, 4))]
        if rng.random() < 0.3:
            rows += [rng.choice(rows)]  # an exact copy of a row
        rng.shuffle(rows)
        path.write_text("\n".join([header, *rows]) + "\n")
    (landing / "beta-de" / "2025-01-20.csv").unlink()
    (landing / "gamma-jp" / "2025-01-22.csv").write_bytes(b"date,store_id\n\xff\xfe not text\n")


def _run(instance: dg.DagsterInstance, first: str, last: str) -> None:
    job = build_definitions().resolve_job_def(FEATURES_JOB)
    result = job.execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        },
        raise_on_error=False,
    )
    if not result.success:
        raise AssertionError(f"the feature run {first} .. {last} failed")


def _plain(value: object) -> object:
    """Return a metadata value as JSON-able data."""
    value = getattr(value, "value", value)
    if isinstance(value, dict | list | str | int | float | bool) or value is None:
        return value
    return str(value)


def _materializations(instance: dg.DagsterInstance, asset: str) -> list[dict]:
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=10_000).records
    out = []
    for record in sorted(records, key=lambda r: r.storage_id):
        mat = record.asset_materialization
        metadata = {k: _plain(v) for k, v in mat.metadata.items() if k != "path"}
        tags = {k: v for k, v in (mat.tags or {}).items() if k.startswith("dagster/data_version")}
        out.append({"partition": mat.partition, "metadata": metadata, "tags": tags})
    return out


def _check_evaluations(instance: dg.DagsterInstance) -> list[dict]:
    records = instance.event_log_storage.get_event_records(
        dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION), limit=10_000
    )
    out = []
    for record in sorted(records, key=lambda r: r.storage_id):
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        out.append(
            {
                "partition": evaluation.partition,
                "passed": evaluation.passed,
                "description": evaluation.description,
                "metadata": {k: _plain(v) for k, v in evaluation.metadata.items()},
            }
        )
    return out


def _partitions(storage: Path) -> dict[str, dict]:
    store = ParquetPartitionStore(str(storage))
    out: dict[str, dict] = {}
    for asset in ASSETS:
        for day in store.present_days(asset):
            frame = store.read(asset, [day])
            out[f"{asset}/{day}"] = {
                "hash": frame_content_hash(frame),
                "rows": len(frame),
                "columns": [f"{c}:{t}" for c, t in frame.dtypes.items()],
            }
    return out


def _tables(db: str) -> dict[str, list]:
    with transaction(db) as cur:
        cur.execute(
            "SELECT partition_date::text, customer, file, line, reason, raw::text "
            "FROM quarantined_rows ORDER BY id"
        )
        quarantined = [list(row) for row in cur.fetchall()]
        cur.execute(
            "SELECT partition_date::text, customer, file, severity, reason "
            "FROM landing_file_problems ORDER BY id"
        )
        problems = [list(row) for row in cur.fetchall()]
    snapshots = [
        [day.isoformat(), s.data_version, s.rows_per_customer, s.feature_version]
        for day, s in sorted(latest_snapshots(db).items())
    ]
    return {"quarantined_rows": quarantined, "file_problems": problems, "snapshots": snapshots}


def feature_outputs(home: Path, server: PostgresServer) -> dict:
    """Land the input under `home`, run the range then its last day; return what they left."""
    landing, storage = home / "landing", home / "storage"
    land_shuffled_input(landing)
    os.environ["RETRAIN_LANDING_URL"] = str(landing)
    os.environ["RETRAIN_STORAGE_URL"] = str(storage)
    db = ensure_database(server, "app")
    os.environ["RETRAIN_APP_PG_URL"] = db
    migrate(db)
    overrides = postgres_storage(ensure_database(server, "dagster"))
    last = (START + dt.timedelta(days=DAYS - 1)).isoformat()
    with dg.instance_for_test(overrides=overrides) as instance:
        instance.add_dynamic_partitions(CUSTOMERS.name, [s.name for s in TENANTS])
        _run(instance, START.isoformat(), last)
        _run(instance, last, last)
        outputs = {
            "partitions": _partitions(storage),
            "materializations": {asset: _materializations(instance, asset) for asset in ASSETS},
            "check_evaluations": _check_evaluations(instance),
            **_tables(db),
        }
    # File problems name the landing path: the same outputs in any temporary home.
    return json.loads(json.dumps(outputs).replace(str(home), "<home>"))


def main() -> None:
    """Write the outputs of the code on PYTHONPATH to the golden file named on the command line."""
    from retrain_assets.store.server import start_server

    home = Path(tempfile.mkdtemp(prefix="feature-golden-"))
    os.environ["RETRAIN_DB_PREFIX"] = "golden_"
    outputs = feature_outputs(home, start_server(home))
    Path(sys.argv[1]).write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
