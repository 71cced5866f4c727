"""`store_day_features`: per customer, store and item, the features of each day in the run.

Each day's file is hashed; the hash is that partition's DataVersion and goes into the snapshot
record the model side reads. In a single-run backfill one Output would give every day the same
data version, so this asset writes its days itself and logs one materialization per day. The
run's snapshot records are published in one transaction, after every day's file is written.

The first days of a history look back past the first sales day: they are computed from the
days that exist and say so (`partial_history`, `history_days_available`). A day whose sales,
or part of whose look-back after the first sales day, is missing is not published; the run
publishes the other days and then fails naming those days.
"""

import datetime as dt
from collections.abc import Iterator

import dagster as dg
import numpy as np
import pandas as pd

from retrain_assets.asset_keys import SALES, STORE_DAY_FEATURES, name_of
from retrain_assets.features import feature_math
from retrain_assets.features.content_hash import frame_content_hash
from retrain_assets.features.countries import countries_of
from retrain_assets.features.feature_math import FEATURE_VERSION, SERIES
from retrain_assets.features.lookback import LOOKBACK_DAYS, Lookback, lookback
from retrain_assets.features.parquet_store import (
    CATEGORY_COLUMNS,
    CONSUMER_CHECKS_MISSING_DAYS,
    ParquetPartitionStore,
    PartitionStorage,
    rows_by_day,
)
from retrain_assets.features.partitions import DAILY
from retrain_assets.store.resource import ProjectDatabase
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshots

BACKFILL_TAG = "dagster/backfill"


def _materialization(
    record: SnapshotRecord, snapshot_id: int, path: str, history: Lookback
) -> dg.AssetMaterialization:
    rows = sum(record.rows_per_customer.values())
    return dg.AssetMaterialization(
        asset_key=STORE_DAY_FEATURES,
        partition=record.partition_date.isoformat(),
        metadata={
            "rows": rows,
            "rows_per_customer": dg.MetadataValue.json(record.rows_per_customer),
            "snapshot_id": snapshot_id,
            "path": dg.MetadataValue.path(path),
            "history_days_available": history.history_days_available,
            "partial_history": history.partial_history,
            "dagster/row_count": rows,
        },
        tags={
            "dagster/data_version": record.data_version,
            "dagster/code_version": FEATURE_VERSION,
            "dagster/data_version_is_user_provided": "true",
        },
    )


def _lookbacks(keys: list[str], storage: PartitionStorage) -> dict[str, Lookback]:
    """Return each day's look-back, from one listing of the days `sales` has."""
    sales_days = {dt.date.fromisoformat(k) for k in storage.store().present_days(name_of(SALES))}
    first = min(sales_days, default=None)
    return {key: lookback(dt.date.fromisoformat(key), sales_days, first) for key in keys}


def write_feature_days(
    sales: pd.DataFrame,
    keys: list[str],
    countries: dict[str, str | None],
    store: ParquetPartitionStore,
    run_id: str,
    backfill_id: str | None,
) -> tuple[list[SnapshotRecord], list[str]]:
    """Compute the features of `keys`, write one file per day; return their records and paths.

    Plain Python (no Dagster): the asset and the backfill benchmark's reference both call it.
    The features come sorted by series and date, so each day's rows (taken in that order) are
    sorted too.
    """
    days = [dt.date.fromisoformat(k) for k in keys]
    features = feature_math.store_day_features(sales, days, countries)
    positions = rows_by_day(features)
    nothing = np.zeros(0, dtype=np.int64)
    records, paths = [], []
    for key in keys:
        day_frame = features.iloc[positions.get(key, nothing)].reset_index(drop=True)
        paths.append(str(store.write(name_of(STORE_DAY_FEATURES), key, day_frame)))
        rows = day_frame.groupby("customer").size() if len(day_frame) else pd.Series(dtype=int)
        records.append(
            SnapshotRecord(
                partition_date=dt.date.fromisoformat(key),
                data_version=frame_content_hash(day_frame),
                feature_version=FEATURE_VERSION,
                rows_per_customer={str(k): int(v) for k, v in rows.items()},
                from_backfill=backfill_id is not None,
                backfill_id=backfill_id,
                run_id=run_id,
            )
        )
    return records, paths


def _refusal(blocked: list[Lookback], published: int) -> dg.Failure:
    listed = "; ".join(f"{b.day}: {b.problem}" for b in blocked[:10])
    more = f"; and {len(blocked) - 10} more" if len(blocked) > 10 else ""
    return dg.Failure(
        description=(
            f"store_day_features published {published} day(s) and could not compute "
            f"{len(blocked)}: {listed}{more}; materialize those partitions of sales first"
        ),
        metadata={
            "days_not_computed": dg.MetadataValue.json(
                {b.day.isoformat(): b.problem for b in blocked}
            )
        },
    )


@dg.asset(
    key=STORE_DAY_FEATURES,
    group_name="features",
    partitions_def=DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    code_version=FEATURE_VERSION,
    kinds={"pandas", "parquet"},
    ins={
        "sales": dg.AssetIn(
            key=SALES,
            partition_mapping=dg.TimeWindowPartitionMapping(
                start_offset=-LOOKBACK_DAYS,
                end_offset=0,
                allow_nonexistent_upstream_partitions=True,
            ),
            metadata={CONSUMER_CHECKS_MISSING_DAYS: True, CATEGORY_COLUMNS: SERIES},
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
    lookbacks = _lookbacks(list(context.partition_keys), partition_storage)
    blocked = [b for b in lookbacks.values() if b.problem is not None]
    keys = [key for key, b in lookbacks.items() if b.problem is None]
    customers = set(sales["customer"].unique()) if len(sales) else set()
    backfill_id = context.run.tags.get(BACKFILL_TAG)
    records, paths = write_feature_days(
        sales, keys, countries_of(db_url, customers), store, context.run.run_id, backfill_id
    )
    del sales
    snapshot_ids = publish_snapshots(db_url, records)
    for record, snapshot_id, path in zip(records, snapshot_ids, paths, strict=True):
        key = record.partition_date.isoformat()
        yield _materialization(record, snapshot_id, path, lookbacks[key])
    partial = [k for k in keys if lookbacks[k].partial_history]
    if partial:
        context.log.info(
            f"{len(partial)} day(s) at the start of the sales history computed from fewer "
            f"than {LOOKBACK_DAYS} earlier days: {partial[0]} .. {partial[-1]}"
        )
    if blocked:
        raise _refusal(blocked, len(records))
