"""A customer's published feature days, made as the data side makes them, for serving tests."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from retrain_assets.demo import simulate
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.store_day_features_asset import write_feature_days
from retrain_assets.serving.history import Publication
from retrain_assets.store.snapshots import publish_snapshots

LATEST = dt.date(2026, 4, 20)
DAYS = 45


def simulated_sales(
    spec: TenantSpec, days: list[dt.date], drop: tuple[str, str] | None = None
) -> pd.DataFrame:
    """Return the tenant's sales of `days` as `sales` holds them (`drop`: a series left out)."""
    sales = simulate.simulated_sales(spec, days)
    if drop is not None:
        sales = sales[(sales["store_id"] != drop[0]) | (sales["item_id"] != drop[1])]
    return sales.reset_index(drop=True)


def publish(
    store: ParquetPartitionStore,
    spec: TenantSpec,
    latest: dt.date = LATEST,
    days: int = DAYS,
    drop: tuple[str, str] | None = None,
    db_url: str | None = None,
    others: tuple[TenantSpec, ...] = (),
) -> tuple[Publication, pd.DataFrame]:
    """Write the feature days ending at `latest` (the asset's code); return the publication.

    `others` are published in the same days (a day's file holds every customer). With `db_url`
    the days are also recorded in `feature_snapshots`, as the asset does. Returns the
    publication and the features written.
    """
    dates = [latest - dt.timedelta(days=back) for back in range(days - 1, -1, -1)]
    sales = pd.concat(
        [simulated_sales(spec, dates, drop), *(simulated_sales(o, dates) for o in others)],
        ignore_index=True,
    )
    keys = [day.isoformat() for day in dates]
    countries = {s.name: s.country for s in (spec, *others)}
    records, _ = write_feature_days(sales, keys, countries, store, "test", None)
    if db_url is not None:
        publish_snapshots(db_url, records)
    versions = tuple(sorted((r.partition_date, r.data_version) for r in records))
    written = pd.concat(
        [pd.read_parquet(store.path("store_day_features", key)) for key in keys],
        ignore_index=True,
    )
    return Publication(latest, versions), written
