"""The forecasting strategies `bench_horizons.py` compares, each for days origin + 1 .. + 7.

`feature_math` computes the rolling means over the windows ending at lag 7 since issue 39
(`store_day_features-v2`); the pipeline served before it (v1: means over D-w .. D-1, the days
present) is reproduced here by `lag1_rolling`, so its row of the table can be measured again.

Every strategy sees what the service would know at the origin: sales up to the origin; price
and promotion of a future day are the series' latest known values (`served_features.future_rows`:
requests name only store, item and day); calendar columns are known. The platform's LightGBM
settings come from the GPU trainer (`gpu/service/trainer.lightgbm_params`), never copied.
"""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np
import pandas as pd

from retrain_assets.features.feature_math import LAGS, SERIES, WINDOWS, store_day_features
from retrain_assets.features.served_features import future_rows, held_days, served_features
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.gpu.service.schemas import TrainingParams
from retrain_assets.gpu.service.trainer import lightgbm_params

HORIZON = 7
TRAIN_DAYS = 90  # the retraining policy's default window
ANCHOR = 7  # the lag the anchored rolling windows end at (mlforecast's lag_transforms key)
DEFAULTS = TrainingParams()


@dataclass(frozen=True)
class Tenant:
    """One simulated tenant's sales and its features: today's (v2) and before issue 39 (v1)."""

    name: str
    country: str
    sales: pd.DataFrame
    full: pd.DataFrame  # store_day_features rows (v2: rolling means ending at lag 7)
    legacy: pd.DataFrame  # the same rows with v1's rolling means (ending at lag 1)


def lag1_rolling(frame: pd.DataFrame) -> pd.DataFrame:
    """Return `frame` with v1's rolling means: over D-w .. D-1, averaging the days present.

    Every series must have a row every day (the simulator's do; future days are NaN rows).
    """
    frame = frame.sort_values([*SERIES, "date"]).reset_index(drop=True)
    units = frame.groupby(SERIES, sort=False)["units_sold"]
    for window in WINDOWS:
        frame[f"rolling_mean_{window}"] = units.transform(
            lambda s, w=window: s.shift(1).rolling(w, min_periods=1).mean()
        )
    return frame


def _legacy_features(sales: pd.DataFrame, days: list[dt.date], tenant: Tenant) -> pd.DataFrame:
    """v1's features of `days`: v2's lags and calendar, v1's rolling means over `sales`."""
    rows = store_day_features(sales, days, {tenant.name: tenant.country})
    rolling = [f"rolling_mean_{window}" for window in WINDOWS]
    means = lag1_rolling(sales)[[*SERIES, "date", *rolling]]
    return rows.drop(columns=rolling).merge(means, on=[*SERIES, "date"], how="left")


def fit_booster(rows: pd.DataFrame) -> lgb.Booster:
    """Train the platform's model (the GPU trainer's parameters and rounds) on `rows`."""
    rows = rows[rows[LABEL].notna()]
    data = lgb.Dataset(rows[MODEL_FEATURES].astype(float), label=rows[LABEL].astype(float))
    return lgb.train(lightgbm_params(DEFAULTS), data, num_boost_round=DEFAULTS.num_boost_round)


def training_rows(frame: pd.DataFrame, origin: dt.date) -> pd.DataFrame:
    """Return the TRAIN_DAYS days of rows ending at `origin`."""
    end = pd.Timestamp(origin)
    return frame[(frame["date"] > end - pd.Timedelta(days=TRAIN_DAYS)) & (frame["date"] <= end)]


def _predict(booster: lgb.Booster, rows: pd.DataFrame) -> np.ndarray:
    return np.asarray(booster.predict(rows[MODEL_FEATURES].astype(float)), dtype=float)


def _ahead(rows: pd.DataFrame, origin: dt.date) -> np.ndarray:
    return (rows["date"] - pd.Timestamp(origin)).dt.days.to_numpy()


def _future(frame: pd.DataFrame, origin: dt.date) -> pd.DataFrame:
    """Rows of days origin + 1 .. + HORIZON, price and promotion the origin day's."""
    end = pd.Timestamp(origin)
    rows = frame[(frame["date"] > end) & (frame["date"] <= end + pd.Timedelta(days=HORIZON))]
    known = frame[frame["date"] == end][[*SERIES, "price", "on_promo"]]
    rows = rows.drop(columns=["price", "on_promo"]).merge(known, on=SERIES, how="left")
    return rows.sort_values([*SERIES, "date"]).reset_index(drop=True)


def _held(tenant: Tenant, origin: dt.date) -> pd.DataFrame:
    days = pd.to_datetime(held_days(origin))
    return tenant.sales[tenant.sales["date"].isin(days)]


def forecast_frame(
    rows: pd.DataFrame, origin: dt.date, strategy: str, forecast: np.ndarray
) -> pd.DataFrame:
    """Return one strategy's forecasts as (strategy, h, series key, actual, forecast) rows."""
    return pd.DataFrame(
        {
            "strategy": strategy,
            "h": _ahead(rows, origin),
            "store_id": rows["store_id"].to_numpy(),
            "item_id": rows["item_id"].to_numpy(),
            "forecast": forecast,
        }
    )


def _held_and_future(tenant: Tenant, origin: dt.date) -> tuple[pd.DataFrame, pd.DataFrame]:
    history = _held(tenant, origin)[
        [*SERIES, "date", "units_sold", "price", "on_promo", "stock_on_hand"]
    ]
    history = history.astype({"units_sold": "float64", "stock_on_hand": "float64"})
    return history, future_rows(history, origin)


def as_served(tenant: Tenant, booster: lgb.Booster, origin: dt.date) -> pd.DataFrame:
    """The service before issue 39: v1 features, future days' sales NaN, into a v1 model."""
    history, future = _held_and_future(tenant, origin)
    days = [origin + dt.timedelta(days=ahead) for ahead in range(1, HORIZON + 1)]
    rows = _legacy_features(pd.concat([history, future], ignore_index=True), days, tenant)
    return forecast_frame(rows, origin, "as served", _predict(booster, rows))


def recursive(tenant: Tenant, booster: lgb.Booster, origin: dt.date) -> pd.DataFrame:
    """Each day's forecast becomes the next day's known sales (as mlforecast predicts)."""
    history, future = _held_and_future(tenant, origin)
    parts = []
    for ahead in range(1, HORIZON + 1):
        day = origin + dt.timedelta(days=ahead)
        sales = pd.concat([history, future], ignore_index=True)
        rows = _legacy_features(sales, [day], tenant)
        forecast = _predict(booster, rows)
        parts.append(forecast_frame(rows, origin, "recursive", forecast))
        keyed = rows[SERIES].assign(filled=forecast)
        at_day = future["date"] == pd.Timestamp(day)
        merged = future.loc[at_day, SERIES].merge(keyed, on=SERIES, how="left")
        future.loc[at_day, "units_sold"] = merged["filled"].to_numpy()
    return pd.concat(parts, ignore_index=True)


def anchored(tenant: Tenant, booster: lgb.Booster, origin: dt.date) -> pd.DataFrame:
    """Rolling means ending at lag 7, served by the platform's own `served_features` (v2)."""
    rows = served_features(_held(tenant, origin), origin, {tenant.name: tenant.country})
    rows = rows[rows["date"] > pd.Timestamp(origin)]
    return forecast_frame(rows, origin, "lag-7 windows", _predict(booster, rows))


def seasonal_naive(tenant: Tenant, origin: dt.date) -> pd.DataFrame:
    """The same weekday last week (lag_7 is known for every h <= 7)."""
    rows = _future(tenant.full, origin)
    return forecast_frame(rows, origin, "seasonal naive", rows["lag_7"].to_numpy(dtype=float))


def full_information(tenant: Tenant, booster: lgb.Booster, origin: dt.date) -> pd.DataFrame:
    """v1's calibration forecasts: the next 7 days' exported v1 rows (no NaN future)."""
    end = pd.Timestamp(origin)
    legacy = tenant.legacy
    rows = legacy[(legacy["date"] > end) & (legacy["date"] <= end + pd.Timedelta(days=HORIZON))]
    return forecast_frame(rows, origin, "full information", _predict(booster, rows))


def _mlforecast_frame(tenant: Tenant, first: pd.Timestamp, last: pd.Timestamp) -> pd.DataFrame:
    rows = tenant.full[(tenant.full["date"] >= first) & (tenant.full["date"] <= last)]
    return pd.DataFrame(
        {
            "unique_id": rows["store_id"] + "|" + rows["item_id"],
            "ds": rows["date"],
            "y": rows[LABEL].astype(float),
            "on_promo": rows["on_promo"].astype(float),
            "price": rows["price"].astype(float),
            "is_holiday": rows["is_holiday"].astype(float),
        }
    )


def _fittable(
    history: pd.DataFrame, future: pd.DataFrame, end: pd.Timestamp, days: int
) -> pd.DataFrame:
    """Keep the series mlforecast can fit and forecast: `days` rows or more, open all week.

    mlforecast refuses a series shorter than its conformal windows need (a store or item that
    opened lately, in the scenarios), and predicts only with every future day's covariates (a
    series closing within the week has none); the platform's own strategies forecast them all,
    so mlforecast's figures cover fewer rows.
    """
    counts = history.groupby("unique_id")["ds"].agg(["size", "max"])
    long_enough = counts.index[(counts["size"] >= days) & (counts["max"] == end)]
    week = future.groupby("unique_id").size()
    open_all_week = week.index[week == HORIZON]
    return history[history["unique_id"].isin(long_enough.intersection(open_all_week))]


def mlforecast_pipeline(
    tenant: Tenant, origin: dt.date, windows: int, levels: tuple[int, ...]
) -> pd.DataFrame:
    """mlforecast's own LightGBM pipeline with conformal intervals by horizon.

    The same lags, rolling means anchored at lag 7, weekday, promotion, price and holiday; the
    trainer's parameters; `TRAIN_DAYS` trainable days (plus the days their features look back).
    """
    from lightgbm import LGBMRegressor
    from mlforecast import MLForecast
    from mlforecast.lag_transforms import RollingMean
    from mlforecast.utils import PredictionIntervals

    end = pd.Timestamp(origin)
    need = max(*LAGS, ANCHOR + max(WINDOWS) - 1)  # days the first trainable day looks back
    start = end - pd.Timedelta(days=TRAIN_DAYS + need - 1)
    future = _mlforecast_frame(tenant, end + pd.Timedelta(days=1), end + pd.Timedelta(days=7))
    history = _fittable(
        _mlforecast_frame(tenant, start, end), future, end, windows * HORIZON + need + 1
    )
    params = lightgbm_params(DEFAULTS)
    params["min_child_samples"] = params.pop("min_data_in_leaf")  # the sklearn spelling
    model = LGBMRegressor(n_estimators=DEFAULTS.num_boost_round, **params)
    forecaster = MLForecast(
        models={"lgbm": model},
        freq="D",
        lags=list(LAGS),
        lag_transforms={ANCHOR: [RollingMean(window) for window in WINDOWS]},
        date_features=["dayofweek"],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forecaster.fit(
            history,
            static_features=[],
            prediction_intervals=PredictionIntervals(n_windows=windows, h=HORIZON),
        )
        known = history[history["ds"] == end][["unique_id", "on_promo", "price"]]
        future = future.drop(columns=["y", "on_promo", "price"]).merge(known, on="unique_id")
        answer = forecaster.predict(HORIZON, X_df=future, level=list(levels))
    keys = answer["unique_id"].str.split("|", expand=True)
    frame = pd.DataFrame(
        {
            "strategy": "mlforecast",
            "h": (answer["ds"] - end).dt.days.to_numpy(),
            "store_id": keys[0].to_numpy(),
            "item_id": keys[1].to_numpy(),
            "forecast": answer["lgbm"].to_numpy(dtype=float),
        }
    )
    for level in levels:
        frame[f"lower_{level}"] = answer[f"lgbm-lo-{level}"].to_numpy(dtype=float)
        frame[f"upper_{level}"] = answer[f"lgbm-hi-{level}"].to_numpy(dtype=float)
    return frame


def feature_cost(series: int, seed: int = 0) -> dict[str, float]:
    """Seconds to compute one day's lag and anchored rolling features for `series` series.

    The platform's `store_day_features` (on the days that day looks back at) against
    mlforecast's `preprocess` of the same rows (its features for every row; the day's kept).
    """
    import time

    from mlforecast import MLForecast
    from mlforecast.lag_transforms import RollingMean
    from sklearn.linear_model import LinearRegression

    lookback = max(*LAGS, ANCHOR + max(WINDOWS) - 1)
    days = pd.date_range("2026-01-01", periods=lookback + 1, freq="D")
    rng = np.random.default_rng(seed)
    ids = np.arange(series)
    sales = pd.DataFrame(
        {
            "customer": "c",
            "store_id": np.tile((ids // 100).astype(str), len(days)),
            "item_id": np.tile((ids % 100).astype(str), len(days)),
            "date": np.repeat(days, series),
            "units_sold": rng.poisson(5.0, series * len(days)).astype(float),
            "price": 2.0,
            "on_promo": False,
            "stock_on_hand": 10.0,
        }
    )
    started = time.perf_counter()
    store_day_features(sales, [days[-1].date()], {"c": None})
    ours = time.perf_counter() - started
    frame = pd.DataFrame(
        {
            "unique_id": sales["store_id"] + "|" + sales["item_id"],
            "ds": sales["date"],
            "y": sales["units_sold"],
        }
    )
    forecaster = MLForecast(
        models=[LinearRegression()],
        freq="D",
        lags=list(LAGS),
        lag_transforms={ANCHOR: [RollingMean(window) for window in WINDOWS]},
        date_features=["dayofweek"],
    )
    started = time.perf_counter()
    features = forecaster.preprocess(frame, static_features=[], dropna=False)
    features[features["ds"] == days[-1]]
    theirs = time.perf_counter() - started
    return {"store_day_features": ours, "mlforecast preprocess": theirs}
