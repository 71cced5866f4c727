"""Scoring forecasts on a holdout: WAPE, the seasonal-naive baseline, and the gate's verdict.

The gate compares numbers computed now, on the same rows, for both sides: the candidate and
the champion (or, without one, last week's same weekday) are scored on the holdout that the
candidate never trained on. A recorded metric from the past is never an input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


class InvalidForecast(ValueError):
    """Forecasts that cannot be scored: wrong length, non-finite or negative values."""


def wape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Return sum(|actual - forecast|) / sum(|actual|): weighted absolute percentage error.

    Raises:
        InvalidForecast: lengths differ, a value is not finite or negative, or actuals sum to 0.
    """
    actual, forecast = np.asarray(actual, dtype=float), np.asarray(forecast, dtype=float)
    if actual.shape != forecast.shape:
        raise InvalidForecast(f"{len(forecast)} forecasts for {len(actual)} actuals")
    if not np.isfinite(forecast).all():
        raise InvalidForecast(f"{int((~np.isfinite(forecast)).sum())} non-finite forecast(s)")
    if (forecast < 0).any():
        raise InvalidForecast(f"{int((forecast < 0).sum())} negative forecast(s)")
    total = np.abs(actual).sum()
    if total == 0:
        raise InvalidForecast("the holdout's actual units sum to zero; WAPE is undefined")
    return float(np.abs(actual - forecast).sum() / total)


def seasonal_naive(holdout: pd.DataFrame) -> np.ndarray:
    """Return last week's same weekday (`lag_7`) as the forecast; unknown history forecasts 0."""
    return holdout["lag_7"].fillna(0.0).to_numpy(dtype=float)


@dataclass(frozen=True)
class Verdict:
    """The gate's decision and the numbers behind it."""

    passed: bool
    candidate_wape: float
    reference_wape: float
    reference: str
    margin: float
    reason: str


def judge(candidate_wape: float, reference_wape: float, reference: str, margin: float) -> Verdict:
    """Pass when the candidate's WAPE is lower than the reference's by at least `margin`.

    `margin` is relative: 0.02 means at least 2% lower than the reference's WAPE.
    """
    needed = reference_wape * (1.0 - margin)
    passed = candidate_wape <= needed and candidate_wape < reference_wape
    comparison = "beats" if passed else "does not beat"
    reason = (
        f"candidate WAPE {candidate_wape:.4f} {comparison} {reference} WAPE "
        f"{reference_wape:.4f} by the margin {margin:.1%} (needs <= {needed:.4f})"
    )
    return Verdict(passed, candidate_wape, reference_wape, reference, margin, reason)
