"""Each answered row's prediction intervals: its bounds at every served level, or why not.

The service answers the levels of RETRAIN_INTERVAL_LEVELS. A model carries the widths its
trainer computed (`prediction_intervals.IntervalTable`, from its MLflow metadata); a model
logged before intervals existed, or trained with other levels, still serves its forecasts: the
missing bounds are null and `interval_note` says why, never a made-up width. A row h days past
the latest published day gets the width of h-day-ahead errors when the model carries them, the
pooled width otherwise; `interval_calibration` names which (issue 39), after the model's own
calibration when it is not the trainer's (a first model's widths widened on the gate's holdout,
or uncalibrated).
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
    calibrations: list[str | None] | None = None  # per row, whose widths (None: no bounds)


def model_bounds(
    customer: str,
    version: str,
    intervals: IntervalTable | None,
    predictions: np.ndarray,
    levels: Sequence[str],
    horizons: Sequence[int | None] | None = None,
) -> Bounds:
    """Return the bounds a model gives its predictions at `levels` (names such as "80").

    `horizons`: each row's days past the latest published day (None: unknown), which picks
    the day-ahead widths the model carries for rows 1 .. 7 days out.
    """
    lower: dict[str, np.ndarray] = {}
    upper: dict[str, np.ndarray] = {}
    missing = []
    rows = len(predictions)
    aheads = list(horizons) if horizons is not None else [None] * rows
    calibrations: list[str | None] = [None] * rows
    for name in levels:
        picked = [
            intervals.width(name, ahead) if intervals is not None else (None, None)
            for ahead in aheads
        ]
        if any(width is None for width, _ in picked):
            missing.append(name)
            lower[name] = upper[name] = np.full(rows, np.nan)
            continue
        widths = np.array([width for width, _ in picked], dtype=float)
        assert intervals is not None  # every width was found in it
        lower[name], upper[name] = bounds(
            predictions, intervals.row_halfwidths(widths, predictions)
        )
        calibrations = [named for _, named in picked]
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
    return Bounds(lower, upper, note, calibrations)


@dataclass(frozen=True)
class RowIntervals:
    """Every row's bounds per level (NaN: none), its note and its model's calibration.

    A note is None when nothing is missing; a calibration None when the row has no bounds.
    """

    levels: tuple[str, ...]
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    notes: list[str | None]
    calibrations: list[str | None] = field(default_factory=list)  # per row (None: no bounds)

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
        if given.calibrations is not None:
            for at, named in zip(rows.tolist(), given.calibrations, strict=True):
                self.calibrations[at] = named

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
