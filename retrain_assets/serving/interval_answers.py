"""Each answered row's prediction intervals: its bounds at every served level, or why not.

The service answers the levels of RETRAIN_INTERVAL_LEVELS. A model carries the widths its
trainer computed (`prediction_intervals.IntervalTable`, from its MLflow metadata); a model
logged before intervals existed, or trained with other levels, still serves its forecasts: the
missing bounds are null and `interval_note` says why, never a made-up width. Each row also says
which widths its bounds carry (`interval_calibration`: the trainer's backtests, widened on the
gate's holdout for a first model whose trainer's widths fell short there, or uncalibrated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retrain_assets.prediction_intervals import IntervalTable, bounds


@dataclass(frozen=True)
class Bounds:
    """One model's bounds for its rows (level name -> array, NaN: none) and its note."""

    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    note: str | None  # why some or all levels are missing (None: every level is there)
    calibration: str | None = None  # the model's IntervalTable.calibration (None: no intervals)


def model_bounds(
    customer: str,
    version: str,
    intervals: IntervalTable | None,
    predictions: np.ndarray,
    levels: Sequence[str],
) -> Bounds:
    """Return the bounds a model gives its predictions at `levels` (names such as "80")."""
    lower: dict[str, np.ndarray] = {}
    upper: dict[str, np.ndarray] = {}
    missing = []
    for name in levels:
        width = intervals.halfwidths.get(name) if intervals is not None else None
        if width is None:
            missing.append(name)
            lower[name] = upper[name] = np.full(len(predictions), np.nan)
        else:
            lower[name], upper[name] = bounds(predictions, width)
    note = None
    if intervals is None and levels:
        note = (
            f"model version {version} of {customer} carries no prediction intervals "
            "(logged before its trainer computed them)"
        )
    elif missing:
        note = (
            f"model version {version} of {customer} has no {', '.join(missing)} % interval "
            f"(it carries {', '.join(intervals.halfwidths) if intervals else 'none'})"
        )
    return Bounds(lower, upper, note, intervals.calibration if intervals is not None else None)


@dataclass(frozen=True)
class RowIntervals:
    """Every row's bounds per level (NaN: none), its note and its model's calibration.

    A note is None when nothing is missing; a calibration None when the row has no bounds.
    """

    levels: tuple[str, ...]
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    notes: list[str | None]
    calibrations: list[str | None] = field(default_factory=list)

    @classmethod
    def empty(cls, rows: int, levels: Sequence[str]) -> RowIntervals:
        """Return `rows` rows without bounds or notes (rows not predicted say why elsewhere)."""
        return cls(
            tuple(levels),
            {name: np.full(rows, np.nan) for name in levels},
            {name: np.full(rows, np.nan) for name in levels},
            [None] * rows,
            [None] * rows,
        )

    def put(self, rows: np.ndarray, given: Bounds) -> None:
        """Fill the rows at positions `rows` from one model's bounds (in the same order)."""
        for name in self.levels:
            self.lower[name][rows] = given.lower[name]
            self.upper[name][rows] = given.upper[name]
        for at in rows.tolist():
            self.notes[at] = given.note
            self.calibrations[at] = given.calibration

    def place(self, rows: np.ndarray, part: RowIntervals) -> None:
        """Fill the rows at positions `rows` from an answer for just those rows."""
        for name in self.levels:
            self.lower[name][rows] = part.lower[name]
            self.upper[name][rows] = part.upper[name]
        for at, note, calibration in zip(rows.tolist(), part.notes, part.calibrations, strict=True):
            self.notes[at] = note
            self.calibrations[at] = calibration


def log_texts(given: Bounds | None, rows: int) -> list[str | None]:
    """Return each row's bounds as the prediction log keeps them: `{"80": [lo, hi], ...}`.

    None for a row with no finite bound (a model without intervals, no prediction); a level
    the model lacks is left out.
    """
    if given is None or not given.lower:
        return [None] * rows
    columns = [
        (name, given.lower[name].tolist(), given.upper[name].tolist()) for name in given.lower
    ]
    texts: list[str | None] = []
    for at in range(rows):
        parts = [
            f'"{name}": [{lower[at]!r}, {upper[at]!r}]'
            for name, lower, upper in columns
            if math.isfinite(lower[at]) and math.isfinite(upper[at])
        ]
        texts.append("{" + ", ".join(parts) + "}" if parts else None)
    return texts
