"""A request by key made into features: each row looked up in its customer's served table.

A row's date must lie in the days served: the last published week (to check a forecast
against what was published) up to the furthest forecastable day. The same rule, by the same
code (`date_problem`), holds for rows sent with every feature (`served_rows`), so every form
of request answers the same days (issue 38's one strict schema). A store or an item that is
not in the customer's published history of the held days is refused (422, naming the row); a
known store and item with no sales in the window `rolling_mean_28` covers (34 to 7 days
before the date), or without a row on a published day, gets no prediction and says why (never
a silent zero). A covariate the row sends replaces the table's value; one it leaves out keeps
the latest known value (a published day's own), and the answer names the covariates so
defaulted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

import numpy as np

from retrain_assets.features.feature_math import ANCHOR, LOOKBACK, WINDOWS
from retrain_assets.features.served_features import COVARIATES, HELD_DAYS
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.history import CustomerFeatures, Publication
from retrain_assets.serving.inputs import (
    DATE_FIELD,
    FeatureBatch,
    InvalidRequest,
    KeyBatch,
    Location,
)
from retrain_assets.serving.routing import request_key

MAX_PROBLEMS_SHOWN = 5
_ROLLING_LONGEST = MODEL_FEATURES.index(f"rolling_mean_{max(WINDOWS)}")
_COVARIATE_COLUMNS = {name: MODEL_FEATURES.index(name) for name in COVARIATES}
NO_SALES = f"no sales of this item at this store from {LOOKBACK} to {ANCHOR} days before the date"
NOT_PUBLISHED = "no published sales row for this store and item on that day"


def _refuse(problems: list[str]) -> None:
    if problems:
        more = len(problems) - MAX_PROBLEMS_SHOWN
        tail = f" (and {more} more problem(s))" if more > 0 else ""
        raise InvalidRequest(422, "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + tail)


def date_problem(publication: Publication, day: dt.date) -> str | None:
    """Return why `day` is not a day served (None: it is); the caller says where it was sent."""
    first, last, latest = publication.first_day, publication.last_day, publication.latest
    if first <= day <= last:
        return None
    served = f"days served: {first} to {last}"
    if day > last:
        return (
            f"past the horizon: the furthest forecastable date is {last} "
            f"({(last - latest).days} days after the latest published day {latest}); {served}"
        )
    return f"before the days served: the earliest is {first}; {served}"


def date_problems(publication: Publication, dates: Sequence[dt.date], where: Location) -> list[str]:
    """Return a problem for each date that is not a day served, naming where it was sent."""
    return [
        f"{where(DATE_FIELD, i)}: {problem}"
        for i, day in enumerate(dates)
        if (problem := date_problem(publication, day)) is not None
    ]


def served_rows(publication: Publication, batch: FeatureBatch) -> FeatureBatch:
    """Return rows sent with every feature once each date is a day served.

    Raises:
        InvalidRequest: 422 naming each row whose date is before the days served or past the
            horizon, and the days served.
    """
    _refuse(date_problems(publication, batch.dates, batch.where))
    return batch


def features_by_key(table: CustomerFeatures, keys: KeyBatch) -> FeatureBatch:
    """Return the request's rows with their features, reasons and defaulted covariates.

    Raises:
        InvalidRequest: 422 naming each row whose store or item is unknown, or whose date is
            before the days served or past the horizon (`date_problem`).
    """
    latest = table.publication.latest
    dates = [day if day is not None else table.next_day for day in keys.dates]
    problems: list[str] = []
    for i, (store, item, day) in enumerate(zip(keys.store_ids, keys.item_ids, dates, strict=True)):
        if store not in table.stores:
            problems.append(
                f"{keys.where('store_id', i)}: unknown store: not in {table.customer}'s "
                f"published history of the last {HELD_DAYS} days"
            )
        if item not in table.items:
            problems.append(
                f"{keys.where('item_id', i)}: unknown item: not in {table.customer}'s "
                f"published history of the last {HELD_DAYS} days"
            )
        problem = date_problem(table.publication, day)
        if problem is not None:
            problems.append(f"{keys.where(DATE_FIELD, i)}: {problem}")
    _refuse(problems)
    count = len(keys)
    features = np.full((count, len(MODEL_FEATURES)), math.nan)
    reasons: list[str | None] = [None] * count
    published = np.zeros(count, dtype=bool)
    found = np.full(count, -1, dtype=np.int64)
    for i, (store, item, day) in enumerate(zip(keys.store_ids, keys.item_ids, dates, strict=True)):
        at = table.index.get(request_key(store, item, day))
        if at is None:
            reasons[i] = NOT_PUBLISHED if day <= latest else NO_SALES
        else:
            found[i] = at
    hit = found >= 0
    features[hit] = table.features[found[hit]]
    published[hit] = table.published[found[hit]]
    for i in np.flatnonzero(hit & np.isnan(features[:, _ROLLING_LONGEST])).tolist():
        reasons[i] = NO_SALES
    defaulted: list[list[str]] = [[] for _ in range(count)]
    for name, column in _COVARIATE_COLUMNS.items():
        sent = getattr(keys, name)
        given = ~np.isnan(sent)
        features[given, column] = sent[given]
        for i in np.flatnonzero(~given & ~published).tolist():
            defaulted[i].append(name)
    return FeatureBatch(
        keys.store_ids,
        keys.item_ids,
        dates,
        features,
        reasons=reasons,
        defaulted=[",".join(names) for names in defaulted],
        horizons=[(day - latest).days for day in dates],
    )
