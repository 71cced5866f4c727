"""A first model's prediction intervals widened on the gate's holdout when the trainer's fall short.

A customer without a champion is served nothing until a first model passes the gate. When that
model beats the seasonal naive forecast but its trainer's widths cover less of the holdout than
their level, the forecasts are fine and the widths are wrong: refusing the model would serve
nothing at all. So each level's half-width becomes the larger of the trainer's and the
split-conformal quantile of the holdout's absolute errors (the ceil((n + 1) x level)-th
smallest of n: rows the candidate never saw, so on rows like them at least that share of
actuals falls within), and the table's `calibration` says so. The widened widths serve every
day ahead (the holdout pools them): the trainer's day-ahead widths are dropped. When the
holdout has too few errors for a level, no width can promise it: the trainer's widths are kept,
labelled UNCALIBRATED, and served with that label.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from retrain_assets.prediction_intervals import (
    UNCALIBRATED,
    IntervalTable,
    bounds,
    conformal_halfwidth,
    coverage,
    scale_of,
)


def widen_on_holdout(
    actual: np.ndarray, forecast: np.ndarray, intervals: IntervalTable
) -> IntervalTable:
    """Return `intervals` with each level widened to cover its share of the holdout's errors.

    A level that already covers keeps its width (never narrowed: the holdout is one sample).
    """
    actual, forecast = np.asarray(actual, dtype=float), np.asarray(forecast, dtype=float)
    errors = np.abs(actual - forecast) / scale_of(intervals.scale, forecast)  # as the trainer's
    errors = errors[np.isfinite(errors)]
    measured = _measured(actual, forecast, intervals)
    widths: dict[str, float] = {}
    for name, width in intervals.halfwidths.items():
        quantile = conformal_halfwidth(errors, float(name))
        if quantile is None:
            label = (
                f"{UNCALIBRATED}: the trainer's widths {measured}, and {len(errors)} holdout "
                f"error(s) are too few to widen the {name} % interval by (the trainer's widths "
                "are served as they are)"
            )
            return dataclasses.replace(intervals, calibration=label)
        widths[name] = max(width, quantile)
    changed = ", ".join(
        f"{widths[name]:.4g} at {name} % (was {width:.4g})"
        if widths[name] > width
        else f"{width:.4g} at {name} % (kept)"
        for name, width in intervals.halfwidths.items()
    )
    label = f"widened on the gate's holdout: {measured}; half-widths now {changed}"
    # the holdout pools every day ahead, so the widened widths serve every day ahead: a
    # day-ahead width kept beside them would serve the trainer's short width after all
    return dataclasses.replace(intervals, halfwidths=widths, calibration=label, by_horizon={})


def _measured(actual: np.ndarray, forecast: np.ndarray, intervals: IntervalTable) -> str:
    """Return what the trainer's widths covered, in words: "covered 63.7 % at 80 %, ..."."""
    if len(actual) == 0:
        return "were never checked (the holdout has no rows)"
    shares = ", ".join(
        f"{_covered(actual, forecast, intervals, width) * 100:.1f} % at {name} %"
        for name, width in intervals.halfwidths.items()
    )
    return f"covered {shares} of {len(actual)} holdout actuals"


def _covered(actual: np.ndarray, forecast: np.ndarray, table: IntervalTable, width: float) -> float:
    """Return the share of actuals within one level's bounds (each row's width scaled)."""
    return coverage(actual, *bounds(forecast, table.row_halfwidths(width, forecast)))
