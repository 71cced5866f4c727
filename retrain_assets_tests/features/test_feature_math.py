import datetime as dt

import numpy as np
import pandas as pd

from retrain_assets.features.feature_math import store_day_features

START = dt.date(2026, 6, 1)


def _sales(customer: str, units: list[int], stock: int = 5) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "customer": customer,
            "date": pd.to_datetime([START + dt.timedelta(days=i) for i in range(len(units))]),
            "store_id": "S1",
            "item_id": "I1",
            "units_sold": units,
            "price": 2.0,
            "on_promo": False,
            "stock_on_hand": stock,
        }
    )


def test_lags_and_rolling_means_match_hand_computed_values():
    units = list(range(1, 31))  # day i (0-based) sold i + 1
    target = START + dt.timedelta(days=29)  # sold 30
    row = store_day_features(_sales("a", units), [target], {"a": "US"}).iloc[0]
    assert row["units_sold"] == 30
    assert (row["lag_7"], row["lag_14"], row["lag_28"]) == (23, 16, 2)
    assert row["rolling_mean_7"] == np.mean(range(17, 24))  # days D-13 .. D-7
    assert row["rolling_mean_28"] == np.mean(range(1, 24))  # D-34 .. D-7: the days there are
    assert row["day_of_week"] == pd.Timestamp(target).dayofweek


def test_no_leakage_from_the_future_or_from_another_customer():
    units = [1] * 30
    alone = store_day_features(_sales("a", units), [START + dt.timedelta(days=29)], {})
    noisy = pd.concat([_sales("a", [*units, 999, 999]), _sales("b", [500] * 32)], ignore_index=True)
    mixed = store_day_features(noisy, [START + dt.timedelta(days=29)], {})
    mine = mixed[mixed["customer"] == "a"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, mine)


def test_missing_history_is_nan_and_rolling_means_use_the_days_present():
    row = store_day_features(_sales("a", list(range(1, 11))), [dt.date(2026, 6, 10)], {}).iloc[0]
    assert row["lag_7"] == 3
    assert np.isnan(row["lag_14"]) and np.isnan(row["lag_28"])
    assert row["rolling_mean_28"] == np.mean(range(1, 4))  # days 1 .. 3 end at D-7


def test_holiday_of_the_customers_country_and_stockout_flags():
    july_3 = dt.date(2026, 7, 3)  # US observed Independence Day (the 4th is a Saturday)
    sales = pd.concat([_sales("us", [4] * 33, stock=0), _sales("de", [4] * 33)], ignore_index=True)
    rows = store_day_features(sales, [july_3], {"us": "US", "de": "DE"}).set_index("customer")
    assert bool(rows.loc["us", "is_holiday"]) and not bool(rows.loc["de", "is_holiday"])
    assert bool(rows.loc["us", "stockout"]) and not bool(rows.loc["de", "stockout"])
