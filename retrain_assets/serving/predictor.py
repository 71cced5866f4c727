"""Answering one request: route each row, predict, log every prediction, then answer.

For each row the customer's route decides champion or canary (routing.canary_mask). Rows
served by the champion are logged with alias champion, served true; a row routed to the canary
is logged twice: the canary's prediction (served) and the champion's shadow prediction
(served false), so the rollout's analysis compares both on the same rows. Every row carries
the route's rollout id and step, and the bounds its model gave at the served levels. The
answer is given only after the log has committed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from retrain_assets.customer_names import InvalidCustomerName, validate_customer_name
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.prediction_intervals import level_name
from retrain_assets.serving.forecaster import Forecaster, PredictionFailed
from retrain_assets.serving.inputs import FeatureBatch
from retrain_assets.serving.interval_answers import Bounds, RowIntervals, log_texts, model_bounds
from retrain_assets.serving.prediction_log import LogRow, LogUnavailable, PredictionLogWriter
from retrain_assets.serving.routes import Route, RouteTable
from retrain_assets.serving.routing import canary_mask

CHAMPION = "champion"
CANARY = "canary"


class ServingError(Exception):
    """A request the service cannot answer: `status` and the reason."""

    def __init__(self, status: int, message: str) -> None:
        """Keep the HTTP status with the message."""
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Forecast:
    """The answer to one request, row by row (predictions may be NaN or infinite)."""

    customer: str
    keys: list[str]
    predictions: np.ndarray
    versions: list[str]
    aliases: list[str]
    route: Route
    batch: FeatureBatch | None = None  # the rows asked for (features, reasons, defaults)
    intervals: RowIntervals | None = None  # bounds per served level (None: no levels served)

    def interval_rows(self) -> RowIntervals:
        """Return the rows' bounds and notes (no levels when the service serves none)."""
        return self.intervals or RowIntervals.empty(len(self.keys), ())

    def reasons(self) -> list[str | None]:
        """Return, per row, why it has no prediction (None: it has one)."""
        if self.batch is None or self.batch.reasons is None:
            return [None] * len(self.keys)
        return self.batch.reasons

    def defaulted(self) -> list[str]:
        """Return, per row, the covariates that took their latest known value ("" for none)."""
        if self.batch is None or self.batch.defaulted is None:
            return [""] * len(self.keys)
        return self.batch.defaulted

    def horizons(self) -> list[int | None]:
        """Return, per row, its days past the latest published day (None: not known)."""
        if self.batch is None or self.batch.horizons is None:
            return [None] * len(self.keys)
        return self.batch.horizons

    def covariate(self, name: str) -> list[float]:
        """Return, per row, the value of a feature the prediction used (NaN: none)."""
        if self.batch is None:
            return [math.nan] * len(self.keys)
        return self.batch.features[:, MODEL_FEATURES.index(name)].tolist()


@dataclass
class _Outcome:
    """One model's predictions for some rows (with their bounds), or why it made none."""

    predictions: np.ndarray | None
    error: str | None
    bounds: Bounds | None = None


def _predict(
    model: Forecaster,
    features: np.ndarray,
    levels: Sequence[str],
    horizons: Sequence[int | None] | None,
) -> _Outcome:
    try:
        predictions = model.predict(features)
    except PredictionFailed as failure:
        return _Outcome(None, str(failure))
    given = model_bounds(
        model.customer, model.version, model.intervals, predictions, levels, horizons
    )
    return _Outcome(predictions, None, given)


class Predictor:
    """Routes, predicts and logs; the HTTP layer only translates bodies and errors."""

    def __init__(
        self,
        routes: RouteTable,
        models: Callable[[str, str], Forecaster],
        log: PredictionLogWriter,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        levels: Sequence[float] = (),
    ) -> None:
        """Answer from `routes`, with models from `models(customer, version)`, into `log`.

        `levels`: the prediction intervals every answer carries (RETRAIN_INTERVAL_LEVELS).
        """
        self.routes = routes
        self.models = models
        self.log = log
        self.clock = clock
        self.levels = tuple(level_name(level) for level in levels)

    def route(self, customer: str) -> Route:
        """Return the customer's route with a champion.

        Raises:
            ServingError: 404 for a name that is not a customer slug or has no route; 409
                when the route has no champion yet; 503 before the route table was read.
        """
        try:
            validate_customer_name(customer)
        except InvalidCustomerName as error:
            raise ServingError(404, f"unknown customer: {error}") from None
        if not self.routes.loaded:
            raise ServingError(503, "the route table has not been read yet; try again shortly")
        route = self.routes.get(customer)
        if route is None:
            raise ServingError(
                404, f"unknown customer {customer!r}: no serving route (nothing deployed)"
            )
        if route.champion_version is None:
            raise ServingError(
                409, f"customer {customer!r} has no champion yet: deploy a model first"
            )
        return route

    def _model(self, customer: str, version: str) -> Forecaster:
        try:
            return self.models(customer, version)
        except Exception as error:  # MLflow down, version deleted, corrupt artifact
            raise ServingError(
                503, f"model version {version} of {customer} could not be loaded: {error}"
            ) from error

    def forecast(self, customer: str, batch: FeatureBatch) -> Forecast:
        """Predict every row, log all predictions (committed), and return the served ones.

        A row with a reason (no sales history) is neither predicted nor logged: it is answered
        with its reason, no prediction, no version.

        Raises:
            ServingError: the route's errors (`route`); 503 when a model cannot be loaded or
                the log cannot commit (nothing acknowledged); 500 naming the reason when the
                model serving a row failed to predict (the failure is logged first).
        """
        answerable = batch.answerable()
        if answerable.all():
            return replace(self._forecast(customer, batch), batch=batch)
        route = self.route(customer)
        predictions = np.full(len(batch), math.nan)
        versions, aliases = [""] * len(batch), [""] * len(batch)
        intervals = RowIntervals.empty(len(batch), self.levels)
        if answerable.any():
            part = self._forecast(customer, batch.subset(answerable))
            predictions[answerable] = part.predictions
            intervals.place(np.flatnonzero(answerable), part.interval_rows())
            for at, version, alias in zip(
                np.flatnonzero(answerable).tolist(), part.versions, part.aliases, strict=True
            ):
                versions[at], aliases[at] = version, alias
            route = part.route
        return Forecast(
            customer, batch.keys, predictions, versions, aliases, route, batch, intervals
        )

    def _forecast(self, customer: str, batch: FeatureBatch) -> Forecast:
        route = self.route(customer)
        champion_version, canary_version = _versions(route)
        to_canary = (
            canary_mask(customer, batch.keys, route.canary_weight)
            if canary_version is not None
            else np.zeros(len(batch), dtype=bool)
        )
        champion = self._model(customer, champion_version)
        canary = (
            self._model(customer, canary_version)
            if canary_version is not None and to_canary.any()
            else None
        )
        served_at = self.clock()
        horizons = batch.horizons
        by_champion = _predict(champion, batch.features, self.levels, horizons)
        by_canary = (
            _predict(
                canary,
                batch.features[to_canary],
                self.levels,
                [horizons[i] for i in np.flatnonzero(to_canary)] if horizons else None,
            )
            if canary is not None
            else None
        )
        rows = _log_rows(customer, batch, route, to_canary, by_champion, by_canary, served_at)
        try:
            self.log.write(rows)
        except LogUnavailable as error:
            raise ServingError(503, f"nothing was answered: {error}") from error
        served = _served(customer, batch, route, to_canary, by_champion, by_canary)
        return replace(served, intervals=_intervals(self.levels, to_canary, by_champion, by_canary))


def _intervals(
    levels: tuple[str, ...],
    to_canary: np.ndarray,
    by_champion: _Outcome,
    by_canary: _Outcome | None,
) -> RowIntervals:
    """Return each served row's bounds: the canary's for its rows, the champion's for the rest."""
    rows = RowIntervals.empty(len(to_canary), levels)
    if by_canary is not None and by_canary.bounds is not None:
        rows.put(np.flatnonzero(to_canary), by_canary.bounds)
        if by_champion.bounds is not None:
            mine = np.flatnonzero(~to_canary)
            rows.put(mine, _subset(by_champion.bounds, mine))
    elif by_champion.bounds is not None:
        rows.put(np.arange(len(to_canary)), by_champion.bounds)
    return rows


def _subset(given: Bounds, rows: np.ndarray) -> Bounds:
    """Return one model's bounds of some of its rows."""
    return Bounds(
        {name: values[rows] for name, values in given.lower.items()},
        {name: values[rows] for name, values in given.upper.items()},
        given.note,
        [given.calibrations[i] for i in rows.tolist()] if given.calibrations else None,
    )


def _versions(route: Route) -> tuple[str, str | None]:
    """Return the route's (champion, canary) versions; `Predictor.route` made sure of a champion."""
    if route.champion_version is None:
        raise ServingError(409, f"customer {route.customer!r} has no champion yet")
    return route.champion_version, route.canary_version


def _log_rows(
    customer: str,
    batch: FeatureBatch,
    route: Route,
    to_canary: np.ndarray,
    by_champion: _Outcome,
    by_canary: _Outcome | None,
    served_at: dt.datetime,
) -> list[LogRow]:
    """Return one row per served prediction, plus the champion's shadow of each canary row."""
    champion, canary = route.champion_version or "", route.canary_version or ""
    nothing: list[float | None] = [None] * len(batch)
    champion_values = (
        by_champion.predictions.tolist() if by_champion.predictions is not None else nothing
    )
    champion_bounds = log_texts(by_champion.bounds, len(batch))
    canary_values: list[float | None] = nothing
    canary_bounds: list[str | None] = [None] * len(batch)
    if by_canary is not None and by_canary.predictions is not None:
        canary_values = nothing.copy()
        canary_rows = np.flatnonzero(to_canary)
        texts = log_texts(by_canary.bounds, len(canary_rows))
        for at, value, text in zip(canary_rows, by_canary.predictions.tolist(), texts, strict=True):
            canary_values[at], canary_bounds[at] = value, text
    rows: list[LogRow] = []
    for i, (key, store, item, day) in enumerate(
        zip(batch.keys, batch.store_ids, batch.item_ids, batch.dates, strict=True)
    ):
        if by_canary is not None and to_canary[i]:
            rows.append(
                LogRow(
                    customer,
                    canary,
                    CANARY,
                    True,
                    key,
                    store,
                    item,
                    day,
                    canary_values[i],
                    by_canary.error,
                    route.rollout_id,
                    route.step,
                    served_at,
                    canary_bounds[i],
                )
            )
            served = False  # the champion's prediction of this row is its shadow
        else:
            served = True
        rows.append(
            LogRow(
                customer,
                champion,
                CHAMPION,
                served,
                key,
                store,
                item,
                day,
                champion_values[i],
                by_champion.error,
                route.rollout_id,
                route.step,
                served_at,
                champion_bounds[i],
            )
        )
    return rows


def _served(
    customer: str,
    batch: FeatureBatch,
    route: Route,
    to_canary: np.ndarray,
    by_champion: _Outcome,
    by_canary: _Outcome | None,
) -> Forecast:
    """Return what each row was served, or raise 500 if a serving model failed."""
    uses_champion = not (by_canary is not None and to_canary.all())
    failures = [by_champion.error if uses_champion else None]
    failures.append(by_canary.error if by_canary is not None else None)
    reasons = [reason for reason in failures if reason]
    if reasons:
        raise ServingError(500, "; ".join(reasons))
    predictions = by_champion.predictions.copy() if by_champion.predictions is not None else None
    if predictions is None:  # every row went to the canary, whose predictions are all there
        predictions = np.full(len(batch), math.nan)
    champion_version, canary_version = _versions(route)
    versions = [champion_version] * len(batch)
    aliases = [CHAMPION] * len(batch)
    if by_canary is not None and by_canary.predictions is not None and canary_version is not None:
        predictions[to_canary] = by_canary.predictions
        for i in np.flatnonzero(to_canary):
            versions[i] = canary_version
            aliases[i] = CANARY
    return Forecast(customer, batch.keys, predictions, versions, aliases, route)
