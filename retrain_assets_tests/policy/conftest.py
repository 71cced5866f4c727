"""A project database with published snapshot records, for the policy's decision logic."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import pytest

from retrain_assets.customers import CUSTOMERS
from retrain_assets.store.customers import register_customer
from retrain_assets.store.snapshots import SnapshotRecord, publish_snapshot
from retrain_assets_tests.policy.days import day

Publish = Callable[..., None]


@pytest.fixture
def db(app_db: str) -> str:
    """A migrated project database with customers `acme` and `bolt`."""
    for name in ("acme", "bolt"):
        register_customer(app_db, name, "US", "test")
    return app_db


@pytest.fixture
def publish(db: str) -> Publish:
    """Publish days [first, last] with `rows` per customer, as store_day_features does."""

    def _publish(
        first: int,
        last: int,
        rows: dict[str, int],
        backfill: str | None = None,
        version: str = "v1",
    ) -> None:
        for n in range(first, last + 1):
            publish_snapshot(
                db,
                SnapshotRecord(
                    partition_date=day(n),
                    data_version=f"{version}-{n}",
                    feature_version="f1",
                    rows_per_customer=rows,
                    from_backfill=backfill is not None,
                    backfill_id=backfill,
                    run_id="run",
                ),
            )

    return _publish


@pytest.fixture
def instance(dagster_instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """A Dagster instance for test that knows customers `acme` and `bolt`."""
    dagster_instance.add_dynamic_partitions(CUSTOMERS.name, ["acme", "bolt"])
    return dagster_instance
