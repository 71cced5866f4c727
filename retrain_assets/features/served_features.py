"""The features of the days a client may ask about, computed by the code that publishes them.

The prediction service answers requests that name only a store, an item and a day. Their
features are made here with `feature_math.store_day_features`, the function the
`store_day_features` asset runs: the customer's published rows of the last `HELD_DAYS` days,
plus one row per series for each day after the latest published one whose units sold are
unknown (NaN: missing, exactly as a hole in the history is) and whose price and promotion are
the series' latest known values. So a published day's features are that day's partition, and
a future day's are what the asset will compute for it.

The furthest forecastable day is the shortest lag past the latest published day: `lag_7` of
day latest + 7 is the latest day's sales; a day further out would have no lag at all. No sales
feature looks back less than 7 days (the rolling means end at lag 7), so the unknown days
never enter a feature: a day h <= 7 days out gets exactly the sales features the asset computes
for a published day (issue 39); only its price and promotion are the latest known.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets.features.feature_math import CARRIED, LAGS, SERIES, store_day_features
from retrain_assets.features.lookback import LOOKBACK_DAYS

HORIZON_DAYS = min(LAGS)
# Published days a client may ask about again (to check a forecast against what was published).
PUBLISHED_DAYS_SERVED = 7
# Days of history held per customer: the look-back of the oldest published day served.
HELD_DAYS = LOOKBACK_DAYS + PUBLISHED_DAYS_SERVED
COVARIATES = ("price", "on_promo")


def held_days(latest: dt.date) -> list[dt.date]:
    """Return the days whose published rows the service holds, oldest first."""
    return [latest - dt.timedelta(days=back) for back in range(HELD_DAYS - 1, -1, -1)]


def served_days(latest: dt.date) -> list[dt.date]:
    """Return the days a client may ask about: the last published week, then the horizon."""
    first = latest - dt.timedelta(days=PUBLISHED_DAYS_SERVED - 1)
    last = latest + dt.timedelta(days=HORIZON_DAYS)
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def future_rows(history: pd.DataFrame, latest: dt.date) -> pd.DataFrame:
    """Return one row per series of `history` for each day after `latest` up to the horizon.

    Units sold and stock are unknown (NaN); price and promotion are the series' values on its
    latest published row.
    """
    if history.empty:
        return history.iloc[0:0]
    last = history.sort_values("date", kind="stable").drop_duplicates(SERIES, keep="last")
    frames = []
    for ahead in range(1, HORIZON_DAYS + 1):
        day = last.copy()
        day["date"] = pd.Timestamp(latest + dt.timedelta(days=ahead))
        frames.append(day)
    rows = pd.concat(frames, ignore_index=True)
    rows["units_sold"] = np.nan
    rows["stock_on_hand"] = np.nan
    return rows


def served_features(
    history: pd.DataFrame, latest: dt.date, countries: dict[str, str | None]
) -> pd.DataFrame:
    """Return the features of every row a client may ask about, with `published` per row.

    `history` holds the customer's published rows (at least the CARRIED columns) of
    `held_days(latest)`. Published days give the series with a row that day; future days give
    every series of the history.
    """
    frame = history[CARRIED].reset_index(drop=True)
    for column in SERIES:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object)
    future = future_rows(frame, latest)
    sales = pd.concat([frame, future], ignore_index=True) if len(future) else frame
    sales = sales.astype({"units_sold": "float64", "stock_on_hand": "float64"})
    features = store_day_features(sales, served_days(latest), countries)
    features["published"] = features["date"] <= pd.Timestamp(latest)
    return features
