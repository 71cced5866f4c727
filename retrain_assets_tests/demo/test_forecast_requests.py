import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets.demo.forecast_requests import request_rows
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.feature_math import store_day_features
from retrain_assets.features.landing_reader import read_landing_day
from retrain_assets.features.training_export import MODEL_FEATURES

SPEC = TenantSpec("ask-us", "US", stores=2, items=3, seed=5)


def test_request_features_equal_what_the_pipeline_computes_from_the_landed_files(tmp_path):
    day = dt.date(2026, 2, 10)
    history = [day - dt.timedelta(days=n) for n in range(30, -1, -1)]
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
