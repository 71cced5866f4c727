"""Served features equal the published ones; the horizon; the memory bound and its eviction."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.parquet_store import ParquetPartitionStore
from retrain_assets.features.served_features import HORIZON_DAYS, served_days
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.history import (
    HistoryCache,
    HistoryUnavailable,
    ParquetHistory,
    build_features,
)
from retrain_assets.serving.inputs import InvalidRequest, rows_batch
from retrain_assets.serving.key_lookup import NO_SALES, features_by_key
from retrain_assets.serving.routing import request_key
from retrain_assets_tests.serving.published import LATEST, publish

SPEC = TenantSpec("history-test", "US", stores=2, items=6, seed=5)
DROPPED = ("S002", "I0003")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    store = ParquetPartitionStore(str(tmp_path_factory.mktemp("storage")))
    publication, written = publish(store, SPEC, drop=DROPPED)
    history = ParquetHistory(store)(SPEC.name, publication)
    return store, publication, written, build_features(SPEC.name, history, publication, "US")


def _rows(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    days = frame["date"].dt.strftime("%Y-%m-%d")
    keys = [
        request_key(s, i, d)
        for s, i, d in zip(frame["store_id"], frame["item_id"], days, strict=True)
    ]
    return dict(zip(keys, frame[MODEL_FEATURES].to_numpy(dtype="float64"), strict=True))


def test_served_features_of_each_published_day_equal_its_partition_row_for_row(published):
    _, publication, written, table = published
    for day in [d for d in served_days(publication.latest) if d <= publication.latest]:
        partition = _rows(written[written["date"] == pd.Timestamp(day)])
        assert partition, day
        for key, expected in partition.items():
            served = table.features[table.index[key]]
            np.testing.assert_array_equal(served, expected, err_msg=key)
        served_keys = {k for k in table.index if k.endswith(day.isoformat())}
        assert served_keys == set(partition), day


def test_tomorrows_served_features_equal_what_the_asset_publishes_once_it_lands(tmp_path):
    """Every feature but the day's own covariates is known the day before; sent, they match."""
    store = ParquetPartitionStore(str(tmp_path))
    publication, _ = publish(store, SPEC, latest=LATEST)
    table = build_features(
        SPEC.name, ParquetHistory(store)(SPEC.name, publication), publication, "US"
    )
    later = ParquetPartitionStore(str(tmp_path / "later"))
    _, landed = publish(later, SPEC, latest=LATEST + dt.timedelta(days=1))
    tomorrow = landed[landed["date"] == pd.Timestamp(LATEST + dt.timedelta(days=1))]
    rows = [
        {"store_id": s, "item_id": i, "price": p, "on_promo": bool(o)}
        for s, i, p, o in zip(
            tomorrow["store_id"],
            tomorrow["item_id"],
            tomorrow["price"],
            tomorrow["on_promo"],
            strict=True,
        )
    ]
    batch = features_by_key(table, rows_batch({"rows": rows}, 1000))
    assert batch.dates == [LATEST + dt.timedelta(days=1)] * len(rows)  # no date: the next day
    assert batch.reasons == [None] * len(rows) and set(batch.defaulted or []) == {""}
    np.testing.assert_array_equal(batch.features, tomorrow[MODEL_FEATURES].to_numpy(float))


def test_a_request_a_week_ahead_gets_the_features_the_asset_publishes_for_that_day(tmp_path):
    """Day latest + 7 by key: the features training computes once it lands (issue 39)."""
    ahead = HORIZON_DAYS
    store = ParquetPartitionStore(str(tmp_path))
    publication, _ = publish(store, SPEC, latest=LATEST)
    table = build_features(
        SPEC.name, ParquetHistory(store)(SPEC.name, publication), publication, "US"
    )
    later = ParquetPartitionStore(str(tmp_path / "later"))
    day = LATEST + dt.timedelta(days=ahead)
    _, landed = publish(later, SPEC, latest=day)
    that_day = landed[landed["date"] == pd.Timestamp(day)]
    rows = [
        {"store_id": s, "item_id": i, "date": day.isoformat(), "price": p, "on_promo": bool(o)}
        for s, i, p, o in zip(
            that_day["store_id"],
            that_day["item_id"],
            that_day["price"],
            that_day["on_promo"],
            strict=True,
        )
    ]
    batch = features_by_key(table, rows_batch({"rows": rows}, 1000))
    assert batch.horizons == [ahead] * len(rows)
    assert batch.reasons == [None] * len(rows)
    np.testing.assert_array_equal(batch.features, that_day[MODEL_FEATURES].to_numpy(float))


def test_the_horizon_the_defaults_and_the_rows_without_history(published):
    _, publication, written, table = published
    last = publication.latest + dt.timedelta(days=HORIZON_DAYS)
    days = [publication.latest + dt.timedelta(days=n) for n in range(1, HORIZON_DAYS + 1)]
    rows = [{"store_id": "S001", "item_id": "I0001", "date": d.isoformat()} for d in days]
    rows.append({"store_id": DROPPED[0], "item_id": DROPPED[1], "date": days[0].isoformat()})
    rows.append({"store_id": "S001", "item_id": "I0002", "price": 3.5})
    batch = features_by_key(table, rows_batch({"rows": rows}, 1000))
    assert batch.reasons == [None] * HORIZON_DAYS + [NO_SALES, None]
    assert batch.defaulted == ["price,on_promo"] * HORIZON_DAYS + ["price,on_promo", "on_promo"]
    latest_row = written[
        (written["store_id"] == "S001")
        & (written["item_id"] == "I0001")
        & (written["date"] == pd.Timestamp(publication.latest))
    ].iloc[0]
    price = MODEL_FEATURES.index("price")
    assert batch.features[0, price] == latest_row["price"]  # the latest known price
    assert batch.features[-1, price] == 3.5
    lag_7 = MODEL_FEATURES.index("lag_7")
    assert batch.features[HORIZON_DAYS - 1, lag_7] == latest_row["units_sold"]

    def refused(row: dict) -> str:
        with pytest.raises(InvalidRequest) as caught:
            features_by_key(table, rows_batch({"rows": [rows[0], row]}, 10))
        assert caught.value.status == 422
        return caught.value.message

    past = (last + dt.timedelta(days=1)).isoformat()
    message = refused({"store_id": "S001", "item_id": "I0001", "date": past})
    assert f"rows[1].date: past the horizon: the furthest forecastable date is {last}" in message
    early = (publication.latest - dt.timedelta(days=30)).isoformat()
    assert "rows[1].date: before the days served" in refused(
        {"store_id": "S001", "item_id": "I0001", "date": early}
    )
    message = refused({"store_id": "secret-store-77", "item_id": "I0001"})
    assert "rows[1].store_id: unknown store" in message and "secret-store-77" not in message
    assert "rows[1].item_id: unknown item" in refused({"store_id": "S001", "item_id": "I9999"})
    with pytest.raises(InvalidRequest) as caught:
        rows_batch({"rows": [{"store_id": "S001", "item_id": "I0001", "price": -1}]}, 10)
    assert "rows[0].price: out of range" in caught.value.message
    with pytest.raises(InvalidRequest) as caught:
        rows_batch({"rows": [{"store_id": "S001", "item_id": "I0001", "on_promo": 2}]}, 10)
    assert "rows[0].on_promo: out of range" in caught.value.message


def test_tables_past_the_bound_are_dropped_least_recently_used_first_and_rebuilt(published):
    store, publication, _, table = published
    reads: list[str] = []
    history = ParquetHistory(store)

    def read(customer: str, pub):
        reads.append(customer)
        return history(SPEC.name, pub)  # every customer reads the same rows

    cache = HistoryCache(read, lambda _: "US", max_bytes=int(table.nbytes * 2.5))
    with pytest.raises(HistoryUnavailable, match="has not been read yet"):
        cache.get("a")
    cache.published(None)
    with pytest.raises(HistoryUnavailable, match="no day of store_day_features"):
        cache.get("a")
    cache.published(publication)
    for customer in ("a", "b", "a", "c"):
        cache.get(customer)
    assert cache.held() == ["a", "c"] and cache.evictions == 1  # b was the least recent
    cache.get("b")
    assert reads == ["a", "b", "c", "b"] and cache.held() == ["c", "b"]
    moved = type(publication)(publication.latest, publication.versions[:-1])
    assert cache.published(moved) == ["b", "c"]  # stale, most recent first
    cache.refresh(["b"])
    assert reads[-1] == "b" and cache.get("b").publication == moved
