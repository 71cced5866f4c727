"""The `retrain_assets` code location: one Definitions assembled from the modules below it."""

from __future__ import annotations

import dagster as dg

from retrain_assets.automation.customer_discovery import customer_discovery
from retrain_assets.features.parquet_store import DailyParquetIOManager, PartitionStorage
from retrain_assets.features.sales_asset import sales
from retrain_assets.features.store_day_features_asset import store_day_features
from retrain_assets.store.resource import ProjectDatabase


def build_definitions() -> dg.Definitions:
    """Return the code location; resources resolve their environment when a run starts."""
    storage = PartitionStorage()
    return dg.Definitions(
        assets=[sales, store_day_features],
        sensors=[customer_discovery],
        resources={
            "project_db": ProjectDatabase(),
            "partition_storage": storage,
            "io_manager": DailyParquetIOManager(storage=storage),
        },
    )


defs = build_definitions()
