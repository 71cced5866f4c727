"""`store_day_features`: per customer, store and item, the features of each day in the run.

Each day's file is hashed; the hash is that partition's DataVersion and goes into the snapshot
record the model side reads. In a single-run backfill one Output would give every day the same
data version, so this asset writes its days itself and logs one materialization per day.
"""


import datetime as dt
from collections.abc import Iterator

import dagster as dg
import pandas as pd

from retrain_assets.features import feature_math
from retrain_assets.features.content_hash import frame_content_hash
from retrain_assets.features.feature_math import FEATURE_VERSION, LAGS, SERIES
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.features.partitions import DAILY
from retrain_assets.landing import read_manifest_country
from retrain_assets.settings import landing_root
from retrain_assets.store.customers import customer_countries
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshot

ASSET_KEY = dg.AssetKey("store_day_features")
BACKFILL_TAG = "dagster/backfill"


def _countries(db_url: str, customers: set[str]) -> dict[str, str | None]:
    known = customer_countries(db_url)
    root = landing_root()
    return {c: known.get(c) or read_manifest_country(root, c) for c in customers}


def _materialization(
    key: str, day_frame: pd.DataFrame, record: SnapshotRecord, snapshot_id: int, path: str
) -> dg.AssetMaterialization:
    return dg.AssetMaterialization(
        asset_key=ASSET_KEY,
        partition=key,
        metadata={
            "rows": len(day_frame),
            "rows_per_customer": dg.MetadataValue.json(record.rows_per_customer),
            "snapshot_id": snapshot_id,
            "path": dg.MetadataValue.path(path),
            "dagster/row_count": len(day_frame),
        },
        tags={
            "dagster/data_version": record.data_version,
            "dagster/code_version": FEATURE_VERSION,
            "dagster/data_version_is_user_provided": "true",
        },
    )


@dg.asset(
    group_name="features",
    partitions_def=DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    code_version=FEATURE_VERSION,
    kinds={"pandas", "parquet"},
    ins={
        "sales": dg.AssetIn(
            partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-max(LAGS), end_offset=0)
        )
    },
    output_required=False,
)
def store_day_features(
    context: dg.AssetExecutionContext,
    sales: pd.DataFrame,
    project_db: ProjectDatabase,
    partition_storage: PartitionStorage,
) -> Iterator[dg.AssetMaterialization]:
    """Lags 7/14/28, rolling means 7/28, calendar, promotion, price and stock-out flags."""
    db_url, store = project_db.connection_url(), partition_storage.store()
    days = [dt.date.fromisoformat(k) for k in context.partition_keys]
    customers = set(sales["customer"].unique()) if len(sales) else set()
    features = feature_math.store_day_features(sales, days, _countries(db_url, customers))
    by_day = features["date"].dt.strftime("%Y-%m-%d") if len(features) else pd.Series(dtype=str)
    backfill_id = context.run.tags.get(BACKFILL_TAG)
    for key in context.partition_keys:
        day_frame = features[by_day == key].sort_values([*SERIES, "date"])
        day_frame = day_frame.reset_index(drop=True)
        data_version = frame_content_hash(day_frame)
        path = store.write("store_day_features", key, day_frame)
        rows = day_frame.groupby("customer").size() if len(day_frame) else pd.Series(dtype=int)
        record = SnapshotRecord(
            partition_date=dt.date.fromisoformat(key),
            data_version=data_version,
            feature_version=FEATURE_VERSION,
            rows_per_customer={str(k): int(v) for k, v in rows.items()},
            from_backfill=backfill_id is not None,
            backfill_id=backfill_id,
            run_id=context.run.run_id,
        )
        snapshot_id = publish_snapshot(db_url, record)
        yield _materialization(key, day_frame, record, snapshot_id, str(path))
