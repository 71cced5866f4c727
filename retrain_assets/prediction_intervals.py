"""Prediction intervals: split-conformal widths from rolling-origin residuals (issue 26, part 4).

The trainer refits the model on the rows before each of `windows` rolling origins, forecasts the
`window_days` days after it, and keeps the absolute errors (the conformity scores mlforecast and
statsforecast use). For a level of 80 the interval's half-width is the ceil((n + 1) x 0.80)-th
smallest of the n scores, so on exchangeable rows at least 80 % of actuals fall within it. The
bounds are the forecast minus and plus that width, the lower one clipped at 0 (demand is never
negative). The widths travel with the model: in the artifact's metrics (`interval_*`), in the
registered MLflow model's metadata, and the gate checks their coverage on the holdout. A first
model whose widths fall short there is served with widths the gate widened on that holdout
(`models/interval_widening.py`); `calibration` says which widths a table holds. Why not
mlforecast itself or quantile objectives: docs/decisions.md, issue 26 part 4.

By day ahead (issue 39): each error also says how many days after its origin its row lies, and
the table carries one half-width per day ahead h and level beside the pooled one, so a forecast
h days past the latest published day gets the width of h-day-ahead errors (the features of a
day h <= 7 ahead are those of the backtest's rows h days after their origin).

Per series (issue 39): with a `scale` other than "absolute", each score is the absolute error
divided by a scale of its forecast (`linear`: forecast + 1, normalized split conformal, as
MAPIE's GammaConformityScore without the + 1), and a row's half-width is the table's width times
its own forecast's scale: a store selling 2 a day and one selling 50 no longer share one width.
Chosen on the tuning scenarios (BENCHMARKS.md, "Forecasts a week ahead"); a table logged before
has no scale and stays absolute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import get_args

import numpy as np

from retrain_assets.settings_model import FIELDS, current_settings
from retrain_assets.settings_model.model import IntervalScale

# the entry's `scale` says what each absolute error was divided by ("absolute": nothing)
METHOD = "split conformal: absolute errors of rolling-origin refits, over their scale"
METADATA_KEY = "prediction_intervals"  # the registered MLflow model's metadata entry
_PREFIX = "interval_"  # the artifact's metrics: interval_halfwidth_80, interval_windows, ...
TRAINER_BACKTESTS = "trainer backtests"  # the widths as the trainer computed them
UNCALIBRATED = "uncalibrated"  # a label's prefix: widths that fell short and could not be widened
_BY_HORIZON = "interval_h"  # interval_h3_halfwidth_80: day ahead 3, level 80
_SCALE = "interval_scale_"  # interval_scale_linear: 1.0 (absent: absolute)
POOLED = "conformal, all days ahead pooled"  # a row's calibration, as the answer names it


ABSOLUTE: IntervalScale = "absolute"
SCALE_WORDS = {"absolute": "", "sqrt": "x sqrt(forecast + 1)", "linear": "x (forecast + 1)"}


def scale_of(scale: IntervalScale, predictions: np.ndarray) -> np.ndarray:
    """Return each prediction's scale: what its half-width multiplies (1 for `absolute`).

    A prediction that is not finite gets a scale that is not finite (its bounds are NaN).
    """
    predictions = np.asarray(predictions, dtype=float)
    if scale == "absolute":
        return np.where(np.isfinite(predictions), 1.0, np.nan)
    base = np.maximum(predictions, 0.0) + 1.0
    return np.sqrt(base) if scale == "sqrt" else base


def level_name(level: float) -> str:
    """Return how a level is spelt in field names: 80 -> "80", 97.5 -> "97.5"."""
    return f"{level:g}"


@dataclass(frozen=True)
class IntervalRules:
    """Which levels to compute and from how many rolling-origin windows (RETRAIN_INTERVAL_*)."""

    levels: tuple[float, ...] = FIELDS["interval_levels"].default
    windows: int = FIELDS["interval_windows"].default
    window_days: int = FIELDS["interval_window_days"].default
    scale: IntervalScale = FIELDS["interval_scale"].default

    @classmethod
    def from_settings(cls) -> IntervalRules:
        """Return the rules the settings hold (SettingsError names a bad one)."""
        settings = current_settings()
        return cls(
            settings.interval_levels,
            settings.interval_windows,
            settings.interval_window_days,
            settings.interval_scale,
        )

    def as_spec(self) -> dict[str, object] | None:
        """Return the GPU job's `intervals` object, or None when no levels are asked for."""
        if not self.levels:
            return None
        return {
            "levels": list(self.levels),
            "windows": self.windows,
            "window_days": self.window_days,
            "scale": self.scale,
        }


def coverage_tolerance() -> float:
    """Return how far below its level an interval's holdout coverage may fall (default 0.10).

    0.10 lets an 80 % interval cover 70 % of the holdout's actuals and no less (back from the
    demo's 0.15 once the features of every day ahead are those training saw: issue 39,
    docs/decisions.md).

    Raises:
        SettingsError: not a number in [0, 1) (or another setting is bad).
    """
    return current_settings().interval_coverage_tolerance


def conformal_halfwidth(scores: np.ndarray, level: float) -> float | None:
    """Return the split-conformal quantile of `scores` for `level`, None with too few scores.

    The ceil((n + 1) x level / 100)-th smallest score: with fewer than that many scores no
    finite width guarantees the level, so there is none.
    """
    finite = np.sort(np.asarray(scores, dtype=float)[np.isfinite(scores)])
    rank = math.ceil((len(finite) + 1) * level / 100.0)
    if rank > len(finite) or rank < 1:
        return None
    return float(finite[rank - 1])


@dataclass(frozen=True)
class IntervalTable:
    """What a model carries: the half-width per level and the evidence behind it.

    `by_horizon`: day ahead -> level name -> half-width (empty for a model trained before
    issue 39, whose rows get the pooled width).
    """

    halfwidths: Mapping[str, float]  # level name ("80") -> half-width in units
    windows: int
    scores: int  # how many rolling-origin errors the widths rest on
    # which widths these are, in words: TRAINER_BACKTESTS, widened on the gate's holdout, or
    # UNCALIBRATED (the service answers it next to the bounds)
    calibration: str = TRAINER_BACKTESTS
    by_horizon: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    # what a half-width multiplies per row (`scale_of`); "absolute": the width itself
    scale: IntervalScale = ABSOLUTE

    @classmethod
    def from_scores(
        cls,
        scores: np.ndarray,
        levels: Sequence[float],
        windows: int,
        horizons: np.ndarray | None = None,
        scale: IntervalScale = ABSOLUTE,
    ) -> IntervalTable | None:
        """Return the table of every level `scores` can back, None when they back none.

        `horizons`: each score's day ahead; each day ahead gets the widths its scores back.
        """
        widths = _widths(scores, levels)
        if not widths:
            return None
        by_horizon: dict[int, dict[str, float]] = {}
        if horizons is not None:
            for ahead in sorted(set(np.asarray(horizons).tolist())):
                mine = _widths(np.asarray(scores)[np.asarray(horizons) == ahead], levels)
                if mine:
                    by_horizon[int(ahead)] = mine
        scored = int(np.isfinite(scores).sum())
        return cls(widths, windows, scored, by_horizon=by_horizon, scale=scale)

    def width(self, name: str, ahead: int | None) -> tuple[float | None, str | None]:
        """Return a level's half-width for a row `ahead` days out, and the calibration's name.

        The day-ahead width when the table has one, else the pooled one; (None, None) when the
        table lacks the level. The name says which errors the width comes from, after the
        table's own calibration when that is not the trainer's (widened by the gate, say).
        """
        if ahead is not None and name in self.by_horizon.get(ahead, {}):
            return self.by_horizon[ahead][name], self._named(horizon_calibration(ahead))
        width = self.halfwidths.get(name)
        return (width, self._named(POOLED)) if width is not None else (None, None)

    def _named(self, errors: str) -> str:
        """Return a row's calibration: its errors and scale, after a calibration of its own."""
        if self.scale != ABSOLUTE:
            errors = f"{errors}, {SCALE_WORDS[self.scale]}"
        return errors if self.calibration == TRAINER_BACKTESTS else f"{self.calibration} ({errors})"

    def row_halfwidths(self, widths: np.ndarray | float, predictions: np.ndarray) -> np.ndarray:
        """Return each row's half-width: the table's width(s) times the row's scale."""
        return np.asarray(widths, dtype=float) * scale_of(self.scale, predictions)

    def as_metrics(self) -> dict[str, float]:
        """Return the table as the artifact's float metrics (`interval_halfwidth_80`, ...)."""
        return {
            **{f"{_PREFIX}halfwidth_{name}": w for name, w in self.halfwidths.items()},
            f"{_PREFIX}windows": float(self.windows),
            f"{_PREFIX}scores": float(self.scores),
            **({f"{_SCALE}{self.scale}": 1.0} if self.scale != ABSOLUTE else {}),
            **{
                f"{_BY_HORIZON}{ahead}_halfwidth_{name}": w
                for ahead, widths in self.by_horizon.items()
                for name, w in widths.items()
            },
        }

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float]) -> IntervalTable | None:
        """Return the table an artifact's metrics carry, None for a model without intervals."""
        marker = f"{_PREFIX}halfwidth_"
        widths = {
            k.removeprefix(marker): float(v) for k, v in metrics.items() if k.startswith(marker)
        }
        if not widths:
            return None
        by_horizon: dict[int, dict[str, float]] = {}
        for key, value in metrics.items():
            ahead, _, name = key.removeprefix(_BY_HORIZON).partition("_halfwidth_")
            if key.startswith(_BY_HORIZON) and name and ahead.isdigit():
                by_horizon.setdefault(int(ahead), {})[name] = float(value)
        scales = [k.removeprefix(_SCALE) for k in metrics if k.startswith(_SCALE)]
        return cls(
            widths,
            int(metrics.get(f"{_PREFIX}windows", 0)),
            int(metrics.get(f"{_PREFIX}scores", 0)),
            by_horizon=by_horizon,
            scale=_known_scale(scales[0] if scales else ABSOLUTE),
        )

    def as_metadata(self) -> dict[str, object]:
        """Return the table as the registered model's metadata entry (JSON)."""
        entry: dict[str, object] = {
            "method": METHOD,
            "halfwidths": dict(self.halfwidths),
            "windows": self.windows,
            "scores": self.scores,
            "calibration": self.calibration,
            "scale": self.scale,
        }
        if self.by_horizon:
            entry["halfwidths_by_horizon"] = {
                str(ahead): dict(widths) for ahead, widths in self.by_horizon.items()
            }
        return entry

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object] | None) -> IntervalTable | None:
        """Return the table of a registered model's metadata, None when it has none.

        An entry logged before `calibration` existed holds the trainer's widths.

        Raises:
            ValueError: the entry is there but malformed (a corrupt artifact, said so).
        """
        entry = (metadata or {}).get(METADATA_KEY)
        if entry is None:
            return None
        try:
            widths = entry["halfwidths"]  # type: ignore[index]
            calibration = entry.get("calibration", TRAINER_BACKTESTS)  # type: ignore[attr-defined]
            if not isinstance(calibration, str) or not calibration:
                raise ValueError(f"calibration is {calibration!r}, not a label")
            by_horizon = entry.get("halfwidths_by_horizon") or {}  # type: ignore[attr-defined]
            table = cls(
                {str(k): float(v) for k, v in widths.items()},
                int(entry["windows"]),  # type: ignore[index]
                int(entry["scores"]),  # type: ignore[index]
                calibration=calibration,
                by_horizon={
                    int(ahead): {str(k): float(v) for k, v in mine.items()}
                    for ahead, mine in by_horizon.items()
                },
                scale=_known_scale(entry.get("scale", ABSOLUTE)),  # type: ignore[attr-defined]
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                f"malformed {METADATA_KEY} in the model's metadata: {error}"
            ) from error
        every = [*table.halfwidths.values()]
        every += [w for mine in table.by_horizon.values() for w in mine.values()]
        if any(not (math.isfinite(w) and w >= 0) for w in every):
            raise ValueError(f"{METADATA_KEY}: a half-width is negative or not finite")
        return table


def _known_scale(name: object) -> IntervalScale:
    """Return `name` as a scale; ValueError for one this version does not know."""
    for scale in get_args(IntervalScale):
        if name == scale:
            return scale
    raise ValueError(f"scale {name!r} is none of {', '.join(get_args(IntervalScale))}")


def horizon_calibration(ahead: int) -> str:
    """Return the name of the calibration of a row `ahead` days past the latest published day."""
    return f"conformal, day ahead {ahead}"


def _widths(scores: np.ndarray, levels: Sequence[float]) -> dict[str, float]:
    widths = {}
    for level in levels:
        width = conformal_halfwidth(scores, level)
        if width is not None:
            widths[level_name(level)] = width
    return widths


def bounds(predictions: np.ndarray, halfwidth: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (lower, upper) around `predictions`; the lower bound is clipped at 0.

    `halfwidth`: one width, or one per prediction (each row's day ahead).

    A prediction that is not finite has bounds that are not finite either (NaN).
    """
    predictions = np.asarray(predictions, dtype=float)
    finite = np.isfinite(predictions)
    lower = np.where(finite, np.maximum(predictions - halfwidth, 0.0), np.nan)
    upper = np.where(finite, predictions + halfwidth, np.nan)
    return lower, upper


def coverage(actual: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Return the share of actuals within [lower, upper] (NaN bounds never cover)."""
    actual = np.asarray(actual, dtype=float)
    if len(actual) == 0:
        return math.nan
    inside = (actual >= lower) & (actual <= upper)
    return float(np.mean(inside))
