import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets.features.feature_math import LOOKBACK, store_day_features
from retrain_assets.features.served_features import HORIZON_DAYS, held_days, served_features
from retrain_assets.features.training_export import MODEL_FEATURES

START = dt.date(2026, 3, 2)
DAYS = 80


def _sales() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    days = pd.to_datetime([START + dt.timedelta(days=i) for i in range(DAYS)])
    frames = [
        pd.DataFrame(
            {
                "customer": "acme",
                "store_id": store,
                "item_id": "I1",
                "date": days,
                "units_sold": rng.poisson(6.0, DAYS).astype(float),
                "price": 3.5,  # constant: a future day's price is the latest known one
                "on_promo": False,
                "stock_on_hand": 9.0,
            }
        )
        for store in ("S1", "S2")
    ]
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("ahead", range(1, HORIZON_DAYS + 1))
def test_a_day_h_ahead_gets_the_features_training_computed_for_that_day(ahead):
    """The service's row for latest + h equals the training row of that day once published."""
    sales, countries = _sales(), {"acme": "US"}
    latest = START + dt.timedelta(days=DAYS - 1 - HORIZON_DAYS)
    day = latest + dt.timedelta(days=ahead)
    training = store_day_features(sales, [day], countries)
    held = sales[sales["date"].isin(pd.to_datetime(held_days(latest)))]
    served = served_features(held, latest, countries)
    served = served[served["date"] == pd.Timestamp(day)].reset_index(drop=True)
    assert not served["published"].any()
    pd.testing.assert_frame_equal(
        served[MODEL_FEATURES].astype(float), training[MODEL_FEATURES].astype(float)
    )
    assert training[MODEL_FEATURES].notna().all().all()


def test_lags_and_rolling_means_are_mlforecasts():
    """The windows follow mlforecast's `lag_transforms={7: [RollingMean(7), RollingMean(28)]}`."""
    mlforecast = pytest.importorskip("mlforecast")
    from mlforecast.lag_transforms import RollingMean
    from sklearn.linear_model import LinearRegression

    sales = _sales()
    days = sorted({d.date() for d in sales["date"]})[LOOKBACK:]
    ours = store_day_features(sales, days, {"acme": None})
    forecaster = mlforecast.MLForecast(
        models=[LinearRegression()],
        freq="D",
        lags=[7, 14, 28],
        lag_transforms={7: [RollingMean(7), RollingMean(28)]},
    )
    frame = sales.assign(unique_id=sales["store_id"], ds=sales["date"], y=sales["units_sold"])
    theirs = forecaster.preprocess(frame[["unique_id", "ds", "y"]], static_features=[])
    theirs = theirs.sort_values(["unique_id", "ds"]).reset_index(drop=True)
    names = {
        "lag_7": "lag7",
        "lag_14": "lag14",
        "lag_28": "lag28",
        "rolling_mean_7": "rolling_mean_lag7_window_size7",
        "rolling_mean_28": "rolling_mean_lag7_window_size28",
    }
    assert len(theirs) == len(ours)
    for mine, their in names.items():
        np.testing.assert_allclose(ours[mine].to_numpy(float), theirs[their].to_numpy(float))
