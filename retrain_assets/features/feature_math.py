"""Store-day features as pure pandas: lags, rolling means, calendar and stock-out flags.

Each feature for day D uses only that customer's own series and only days before D, so there
is no leakage across customers and none from the future. `units_sold` on D is kept as the label.
No sales feature looks back less than `ANCHOR` (7) days: the rolling means cover the windows
ending at lag 7 (D-13 .. D-7 and D-34 .. D-7, mlforecast's `lag_transforms={7: [RollingMean(7),
RollingMean(28)]}`), so a day up to 7 days past the latest published one gets exactly the
features training computed for its kind of row (issue 39, docs/decisions.md).
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets.features.calendar import is_holiday

FEATURE_VERSION = "store_day_features-v2"
LAGS = (7, 14, 28)
WINDOWS = (7, 28)
ANCHOR = min(LAGS)  # the rolling windows end at this lag
# Days before D that D's features read: the longest lag or the oldest day of a rolling window.
LOOKBACK = max(*LAGS, ANCHOR - 1 + max(WINDOWS))
SERIES = ["customer", "store_id", "item_id"]
CARRIED = [*SERIES, "date", "units_sold", "price", "on_promo", "stock_on_hand"]


def store_day_features(
    sales: pd.DataFrame, days: list[dt.date], countries: dict[str, str | None]
) -> pd.DataFrame:
    """Return one row per series with sales on each of `days`, with its features.

    `sales` must hold the rows of `days` and of the LOOKBACK days before the first; missing
    history gives NaN features, never a value borrowed from another series or a later day.
    The key columns may be text or categoricals of text; they come out as text.
    """
    if sales.empty or not days:
        return _empty()
    frame = sales.reset_index(drop=True)
    frame["day"] = frame["date"].dt.normalize()
    origin = pd.Timestamp(min(days)) - pd.Timedelta(days=LOOKBACK)
    span = (pd.Timestamp(max(days)) - origin).days + 1
    codes, n_series = _series_codes(frame)
    offset = (frame["day"] - origin).dt.days.to_numpy()
    inside = (offset >= 0) & (offset < span)
    grid = np.full((n_series, span), np.nan)
    grid[codes[inside], offset[inside]] = frame["units_sold"].to_numpy(dtype=float)[inside]

    wanted = frame[frame["day"].isin(pd.to_datetime(days))]
    row_codes = codes[wanted.index.to_numpy()]
    col = (wanted["day"] - origin).dt.days.to_numpy()
    out = wanted[CARRIED].copy()
    for column in SERIES:  # keys read as categoricals go out as text, sorted as text
        if isinstance(out[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype(object)
    for lag in LAGS:
        out[f"lag_{lag}"] = grid[row_codes, col - lag]
    cumulative = np.concatenate([np.zeros((n_series, 1)), np.nancumsum(grid, axis=1)], axis=1)
    present = np.concatenate([np.zeros((n_series, 1)), np.cumsum(~np.isnan(grid), axis=1)], axis=1)
    end = col - ANCHOR + 1  # cumulative[:, end] sums the days up to D - ANCHOR
    for window in WINDOWS:
        total = cumulative[row_codes, end] - cumulative[row_codes, end - window]
        count = present[row_codes, end] - present[row_codes, end - window]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"rolling_mean_{window}"] = np.where(count > 0, total / count, np.nan)
    out["day_of_week"] = out["date"].dt.dayofweek.astype("int64")
    out["is_holiday"] = _holiday_flags(out, countries)
    out["stockout"] = out["stock_on_hand"] == 0
    return out.sort_values([*SERIES, "date"]).reset_index(drop=True)


def _series_codes(frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Number each (customer, store, item) series: per-column codes combined, no tuples built."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for column in SERIES:
        codes, uniques = pd.factorize(frame[column])
        # Re-numbering after each column keeps the combined code below rows * uniques.
        combined, _ = pd.factorize(combined * (len(uniques) + 1) + codes)
    return combined, int(combined.max()) + 1 if len(combined) else 0


def _holiday_flags(rows: pd.DataFrame, countries: dict[str, str | None]) -> np.ndarray:
    """Look each (customer, day) pair up once, not once per store and item."""
    pairs = rows[["customer", "date"]].drop_duplicates()
    pairs["is_holiday"] = [
        is_holiday(countries.get(customer), day.date())
        for customer, day in zip(pairs["customer"], pairs["date"], strict=True)
    ]
    return rows.merge(pairs, on=["customer", "date"], how="left")["is_holiday"].to_numpy()


def _empty() -> pd.DataFrame:
    columns = CARRIED + [f"lag_{lag}" for lag in LAGS] + [f"rolling_mean_{w}" for w in WINDOWS]
    return pd.DataFrame(columns=[*columns, "day_of_week", "is_holiday", "stockout"])
