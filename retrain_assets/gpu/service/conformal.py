"""The trainer's prediction intervals: refit before each rolling origin, keep the errors after.

For each of `windows` origins (every `window_days` days back from the newest training day) the
model is refit, with the job's own settings, on the rows up to the origin and forecasts the
`window_days` days after it: the forecast horizon the service answers for (no feature looks
less than 7 days back, so a row h days after its origin has the features the service computes
h days past the latest published day). The absolute errors of all windows, each divided by its
forecast's scale (`prediction_intervals.scale_of`; 1 for "absolute"), are the conformity
scores (`prediction_intervals.IntervalTable.from_scores`), pooled and by day ahead. Refits are
deterministic like the model itself, so a resumed job computes the same widths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightgbm as lgb
import numpy as np

from retrain_assets.prediction_intervals import ABSOLUTE, IntervalTable, scale_of
from retrain_assets.settings_model.model import IntervalScale

DAY = np.timedelta64(1, "D")


@dataclass(frozen=True)
class ConformalResult:
    """The widths (None: no level could be backed) and how many windows held rows."""

    table: IntervalTable | None
    windows_used: int

    def as_metrics(self) -> dict[str, float]:
        """Return the artifact's `interval_*` metrics (only `interval_windows` without widths)."""
        if self.table is None:
            return {"interval_windows": float(self.windows_used)}
        return self.table.as_metrics()


def rolling_origin_scores(
    features: np.ndarray,
    labels: np.ndarray,
    days: np.ndarray,
    params: dict[str, Any],
    rounds: int,
    windows: int,
    window_days: int,
    scale: IntervalScale = ABSOLUTE,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Return every window's scaled errors, each one's day ahead, and the windows with rows.

    A window with no rows to train on before its origin, or none after it, is skipped.
    """
    days = days.astype("datetime64[D]")
    newest = days.max()
    scores: list[np.ndarray] = []
    ahead: list[np.ndarray] = []
    used = 0
    for back in range(windows, 0, -1):  # oldest origin first
        origin = newest - back * window_days * DAY
        fit = days <= origin
        judged = (days > origin) & (days <= origin + window_days * DAY)
        if not fit.any() or not judged.any():
            continue
        booster = lgb.train(
            params,
            lgb.Dataset(features[fit], label=labels[fit], free_raw_data=False),
            num_boost_round=rounds,
        )
        forecast = np.asarray(booster.predict(features[judged], num_threads=1), dtype="float64")
        scores.append(np.abs(labels[judged] - forecast) / scale_of(scale, forecast))
        ahead.append(((days[judged] - origin) // DAY).astype(np.int64))
        used += 1
    if not scores:
        return np.empty(0), np.empty(0, dtype=np.int64), used
    return np.concatenate(scores), np.concatenate(ahead), used


def conformal_intervals(
    features: np.ndarray,
    labels: np.ndarray,
    days: np.ndarray,
    params: dict[str, Any],
    rounds: int,
    levels: list[float],
    windows: int,
    window_days: int,
    scale: IntervalScale = ABSOLUTE,
) -> ConformalResult:
    """Return the interval table of `levels`; fewer than two windows with rows back none.

    One window's errors would be a single origin's luck (mlforecast also asks for at least 2).
    """
    scores, ahead, used = rolling_origin_scores(
        features, labels, days, params, rounds, windows, window_days, scale
    )
    if used < 2:
        return ConformalResult(None, used)
    return ConformalResult(IntervalTable.from_scores(scores, levels, used, ahead, scale), used)
