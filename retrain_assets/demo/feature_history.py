"""A demo tenant's `store_day_features` rows, simulated from its first day.

What the offline benchmarks (hindsight, intervals) train and judge on without a platform.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from retrain_assets.demo.simulate import simulated_sales
from retrain_assets.demo.tenants import DEFAULT_START, TenantSpec
from retrain_assets.features.feature_math import store_day_features


def tenant_features(spec: TenantSpec, last: dt.date) -> pd.DataFrame:
    """Return the tenant's `store_day_features` rows from the first history day to `last`."""
    days = [DEFAULT_START + dt.timedelta(days=i) for i in range((last - DEFAULT_START).days + 1)]
    features = store_day_features(simulated_sales(spec, days), days, {spec.name: spec.country})
    return features.astype({"is_holiday": "int8", "on_promo": "int8"})  # as exported
