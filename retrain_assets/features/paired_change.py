"""The paired bootstrap both evidence rules use: the gate's and the canary's.

The gate compares candidate and reference on the holdout, the canary compares canary and
champion shadow on the same logged rows.

`units` is one row per store-day, [challenger's summed absolute error, reference's, ...]:
resampling store-days keeps each day's pair together, so the interval is of the paired
relative WAPE change, not of two independent errors.
"""

from __future__ import annotations

import warnings

import numpy as np


def relative_change(units: np.ndarray) -> float:
    """Return (challenger's summed absolute error - reference's) / reference's: the WAPE change."""
    reference = units[:, 1].sum()
    return float((units[:, 0].sum() - reference) / reference) if reference > 0 else 0.0


def paired_interval(
    units: np.ndarray, confidence: float, resamples: int
) -> tuple[float, float, str] | None:
    """Return the paired bootstrap interval of the relative change and its method.

    BCa, else percentile where BCa's correction is undefined (a few ties); a fixed seed, so a
    verdict re-run on the same rows does not change. None: no finite interval (the reference's
    error sums to 0, overall or in resamples).
    """
    from scipy.stats import DegenerateDataWarning, bootstrap  # here: the code location loads
    # without scipy.stats

    def statistic(c: np.ndarray, r: np.ndarray, axis: int = -1) -> np.ndarray:
        reference = r.sum(axis=axis)
        return (c.sum(axis=axis) - reference) / np.where(reference > 0, reference, np.nan)

    if units[:, 1].sum() <= 0:
        return None
    if np.ptp(units[:, 0] - units[:, 1]) == 0:
        change = relative_change(units)
        return change, change, "none (no spread)"  # every resample gives the same change
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():  # said by the method named instead
            warnings.simplefilter("ignore", DegenerateDataWarning)
            result = bootstrap(
                (units[:, 0], units[:, 1]),
                statistic,
                paired=True,
                vectorized=True,
                confidence_level=confidence,
                n_resamples=resamples,
                method=method,
                rng=np.random.default_rng(26),
            )
        low, high = result.confidence_interval
        if np.isfinite(low) and np.isfinite(high):
            return float(low), float(high), method
    return None
