"""WAPE, the seasonal-naive baseline and the verdict, on hand-computed cases."""

import numpy as np
import pandas as pd
import pytest

from retrain_assets.models.scoring import InvalidForecast, judge, seasonal_naive, wape


def test_wape_by_hand():
    assert wape(np.array([10, 0, 30]), np.array([12, 1, 27])) == pytest.approx((2 + 1 + 3) / 40)


@pytest.mark.parametrize(
    ("forecast", "message"),
    [
        ([1.0, np.nan], "non-finite"),
        ([1.0, np.inf], "non-finite"),
        ([1.0, -0.5], "negative"),
        ([1.0], "1 forecasts for 2 actuals"),
    ],
)
def test_unscorable_forecasts_are_refused_with_the_reason(forecast, message):
    with pytest.raises(InvalidForecast, match=message):
        wape(np.array([3.0, 4.0]), np.array(forecast))


def test_an_all_zero_holdout_is_refused():
    with pytest.raises(InvalidForecast, match="sum to zero"):
        wape(np.zeros(3), np.ones(3))


def test_seasonal_naive_is_last_weeks_same_day():
    holdout = pd.DataFrame({"lag_7": [4.0, np.nan, 2.0]})
    assert list(seasonal_naive(holdout)) == [4.0, 0.0, 2.0]


def test_the_margin_is_relative_and_strict():
    assert judge(0.196, 0.20, "champion v3", 0.02).passed  # 0.196 <= 0.20 * 0.98
    failed = judge(0.197, 0.20, "champion v3", 0.02)
    assert not failed.passed and "does not beat champion v3" in failed.reason
    assert not judge(0.20, 0.20, "baseline", 0.0).passed  # equal is not better
