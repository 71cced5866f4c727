import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets.demo.forecast_requests import key_rows, request_rows
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.feature_math import LOOKBACK, store_day_features
from retrain_assets.features.landing_reader import read_landing_day
from retrain_assets.features.training_export import MODEL_FEATURES

SPEC = TenantSpec("ask-us", "US", stores=2, items=3, seed=5)


def test_request_features_equal_what_the_pipeline_computes_from_the_landed_files(tmp_path):
    day = dt.date(2026, 2, 10)
    history = [day - dt.timedelta(days=n) for n in range(LOOKBACK + 2, -1, -1)]
    land_tenant(str(tmp_path), SPEC, history)
    sales = pd.concat(
        [read_landing_day(str(tmp_path), SPEC.name, d).accepted for d in history],
        ignore_index=True,
    )
    expected = store_day_features(sales, [day], {SPEC.name: "US"})

    rows = request_rows(SPEC, day)

    assert len(rows) == SPEC.stores * SPEC.items
    assert all("units_sold" not in row and row["date"] == "2026-02-10" for row in rows)
    got = pd.DataFrame(rows).sort_values(["store_id", "item_id"]).reset_index(drop=True)
    want = expected.sort_values(["store_id", "item_id"]).reset_index(drop=True)
    assert list(got["store_id"]) == list(want["store_id"])
    for name in MODEL_FEATURES:
        np.testing.assert_allclose(
            got[name].astype(float), want[name].astype(float), equal_nan=True, err_msg=name
        )


def test_the_demo_asks_by_key_with_the_price_and_promotion_it_plans(tmp_path):
    day = dt.date(2026, 2, 10)
    land_tenant(str(tmp_path), SPEC, [day])
    landed = read_landing_day(str(tmp_path), SPEC.name, day).accepted

    rows = key_rows(SPEC, day)

    assert {tuple(row) for row in rows} == {("store_id", "item_id", "date", "price", "on_promo")}
    got = pd.DataFrame(rows).sort_values(["store_id", "item_id"]).reset_index(drop=True)
    want = landed.sort_values(["store_id", "item_id"]).reset_index(drop=True)
    assert list(got["item_id"]) == list(want["item_id"].astype(str))
    assert got["price"].tolist() == want["price"].astype(float).tolist()
    assert got["on_promo"].tolist() == want["on_promo"].astype(bool).tolist()
    assert set(got["date"]) == {"2026-02-10"}
