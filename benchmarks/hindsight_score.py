"""The decision benchmark's hindsight: each decision, what was served, and how fast changes landed.

Every model's absolute error is computed once per tenant and demo day (`DailyErrors`), so a
decision's next 28 days, a regime's served WAPE and an oracle are sums over days. A decision is
counted only where its two models differ by more than `DECISIVE` over those 28 days: within
that, neither choice is called right (it is excluded, and the number excluded is shown).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from retrain_assets.features.training_export import LABEL

HINDSIGHT_DAYS = 28
DECISIVE = 0.02  # models closer than 2 % WAPE over the next 28 days: the decision is not counted

Predict = Callable[[pd.DataFrame], np.ndarray]


@dataclass(frozen=True)
class Model:
    """A model as the replay knows it: a name, how it forecasts, the days it was made from."""

    name: str
    predict: Predict
    decided: dt.date | None = None  # None: seasonal naive
    trained_through: dt.date | None = None  # the last day of its training part (not holdout)


@dataclass
class Judged:
    """One decision and its hindsight: the candidate and what it would replace, next 28 days."""

    tenant: str
    kind: str  # "gate", "deploy" (the deploy-time check) or "canary"
    day: dt.date  # the decision's day (the last day with actuals it saw)
    candidate: str
    replaced: str
    passed: bool  # gate, deploy: passed; canary: promoted
    reason: str
    candidate_wape: float = float("nan")  # hindsight, next 28 days, all rows
    replaced_wape: float = float("nan")
    first_deployment: bool = False
    deployed: bool = False  # gate only: a canary (or a first promotion) followed
    rows_decided_on: int = 0  # canary only: rows with actuals at the deciding analysis
    rule: str = ""  # gate: the rule that decided; canary: analysis.StepVerdict.rule
    canary_days: int = 0  # canary only: demo days from its deployment to its outcome
    inconclusive: int = 0  # canary only: its inconclusive analyses (each extended a step)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def relative(self) -> float:
        """Return how much worse (+) or better (-) the candidate was, relative."""
        return self.candidate_wape / self.replaced_wape - 1.0

    @property
    def decisive(self) -> bool:
        """Return whether the two models differ by more than DECISIVE: the decision counts."""
        return abs(self.relative) > DECISIVE

    @property
    def right(self) -> bool:
        """Return whether the decision chose the model with the lower WAPE (docs/decisions.md)."""
        return self.passed == (self.candidate_wape < self.replaced_wape)

    @property
    def moved(self) -> bool:
        """Return whether the champion moved to the candidate (first deployment or promotion)."""
        return self.first_deployment or (self.kind == "canary" and self.passed)


class DailyErrors:
    """Each model's sum of absolute errors per demo day, and each day's sum of |actual|."""

    def __init__(self, frame: pd.DataFrame, first: dt.date, last: dt.date) -> None:
        """Keep the tenant's rows of `first` .. `last` (the demo days and the 28 after)."""
        dates = frame["date"].dt.date
        self.rows = frame[(dates >= first) & (dates <= last)].reset_index(drop=True)
        self.first = first
        self.size = (last - first).days + 1
        self.index = np.asarray([(d - first).days for d in self.rows["date"].dt.date], dtype=int)
        self.actual = self.rows[LABEL].to_numpy(dtype=float)
        self.volume = self._by_day(np.abs(self.actual))
        self._errors: dict[str, np.ndarray] = {}

    def _by_day(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.index, weights=values, minlength=self.size)

    def errors(self, model: Model) -> np.ndarray:
        """Return the model's sum |error| per day (computed once per model)."""
        if model.name not in self._errors:
            forecast = np.asarray(model.predict(self.rows), dtype=float)
            self._errors[model.name] = self._by_day(np.abs(self.actual - forecast))
        return self._errors[model.name]

    def span(self, first: dt.date, days: int) -> slice:
        """Return the day positions of `days` days from `first`."""
        start = (first - self.first).days
        return slice(start, start + days)

    def wape(self, model: Model, first: dt.date, days: int = HINDSIGHT_DAYS) -> float:
        """Return the model's WAPE over `days` days from `first`, every row."""
        chosen = self.span(first, days)
        return float(self.errors(model)[chosen].sum() / self.volume[chosen].sum())

    def served(self, by_day: Mapping[dt.date, Model]) -> tuple[float, float]:
        """Return (sum |error|, sum |actual|) of serving `by_day`'s model on each of its days."""
        error = volume = 0.0
        for day, model in by_day.items():
            position = (day - self.first).days
            error += float(self.errors(model)[position])
            volume += float(self.volume[position])
        return error, volume


def judge(judged: Judged, errors: DailyErrors, models: Mapping[str, Model]) -> None:
    """Score the candidate and what it would replace on the 28 days after the decision."""
    after = judged.day + dt.timedelta(days=1)
    judged.candidate_wape = errors.wape(models[judged.candidate], after)
    judged.replaced_wape = errors.wape(models[judged.replaced], after)


def regimes(
    days: Sequence[dt.date],
    served: Mapping[dt.date, str],
    candidates: Sequence[Model],
    models: Mapping[str, Model],
    naive: Model,
    errors: DailyErrors,
) -> dict[str, dict[dt.date, Model]]:
    """Return what each regime serves on each of `days` (seasonal naive where it has no model).

    platform: its champion of the day. oracle: starting from seasonal naive, each trained
    candidate replaces the model it serves from the next day whenever it forecasts the next 28
    days better (hindsight). never: the platform's first champion from its first day, never
    replaced. newest: each candidate from the day after it was trained, gate or no gate.
    """
    platform = {day: models[served[day]] if day in served else naive for day in days}
    first = [(day, models[served[day]]) for day in sorted(served)][:1]
    oracle = _switches(candidates, naive, errors, hindsight=True)
    newest = _switches(candidates, naive, errors, hindsight=False)
    return {
        "platform": platform,
        "oracle": {day: _serving(oracle, day, naive) for day in days},
        "never": {day: _serving(first, day, naive) for day in days},
        "newest": {day: _serving(newest, day, naive) for day in days},
    }


def _switches(
    candidates: Sequence[Model], naive: Model, errors: DailyErrors, hindsight: bool
) -> list[tuple[dt.date, Model]]:
    """Return (first day served, model) of each switch of a regime, in order."""
    current, found = naive, []
    for candidate in candidates:
        assert candidate.decided is not None
        after = candidate.decided + dt.timedelta(days=1)
        if not hindsight or errors.wape(candidate, after) < errors.wape(current, after):
            current = candidate
            found.append((after, candidate))
    return found


def _serving(switches: list[tuple[dt.date, Model]], day: dt.date, naive: Model) -> Model:
    chosen = naive
    for first, model in switches:
        if first > day:
            break
        chosen = model
    return chosen


def change_lag(
    first_day: dt.date, served: Mapping[dt.date, str], models: Mapping[str, Model]
) -> int | None:
    """Return the demo days from a change's first day to the first day a model trained on data
    including it served as champion (None: none did within the replay)."""
    for day in sorted(d for d in served if d >= first_day):
        through = models[served[day]].trained_through
        if through is not None and through >= first_day:
            return (day - first_day).days
    return None
