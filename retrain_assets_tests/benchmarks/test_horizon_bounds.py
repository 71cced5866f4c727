"""The week-ahead benchmark's interval widths: per day ahead, absolute or normalized by a scale."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from retrain_assets_tests.benchmarks.bench_path import bench_module

bench = bench_module("bench_horizons")
ORIGINS = [dt.date(2026, 5, d) for d in (1, 8, 15, 22)]  # three calibration origins, one judged


def forecasts() -> pd.DataFrame:
    """One tenant's lag-7 forecasts: a small series (level 2) and a large one (level 50).

    Each is off by a tenth of its level at every h, so absolute scores mix two sizes and
    linear-normalized ones are all about the same.
    """
    rows = []
    for origin in ORIGINS:
        for series, level in (("small", 2.0), ("large", 50.0)):
            for h in range(1, 8):
                rows.append(
                    {
                        "tenant": "acme",
                        "strategy": "lag-7 windows",
                        "series": series,
                        "origin": pd.Timestamp(origin),
                        "h": h,
                        "forecast": level,
                        "actual": level * 1.1,
                    }
                )
    return pd.DataFrame(rows)


def test_absolute_widths_are_one_per_h_and_normalized_ones_follow_each_rows_scale() -> None:
    bounded = bench.add_bounds(forecasts(), [ORIGINS[-1]], windows=3, scales=["linear"])
    absolute = bounded[bounded["strategy"] == "lag-7 windows"]
    scaled = bounded[bounded["strategy"] == "lag-7 windows, linear"]
    assert len(absolute) == len(scaled) == 14  # the judged origin's rows only, twice

    width = (absolute["upper_80"] - absolute["forecast"]).to_numpy()
    assert np.allclose(width, width[0])  # one width for both series
    # the large series' error: the scores are 0.2 and 5.0, and 80 % of 6 is the largest
    assert width[0] == pytest.approx(5.0)

    ratio = ((scaled["upper_80"] - scaled["forecast"]) / (scaled["forecast"] + 1.0)).to_numpy()
    assert np.allclose(ratio, ratio[0])  # quantile x (forecast + 1): one scale per row
    small = scaled[scaled["series"] == "small"]
    assert (small["upper_80"] - small["forecast"]).max() < 1.0  # not the large series' 5
