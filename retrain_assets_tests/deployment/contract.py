"""The prediction service's side of docs/deployment.md, for tests of the rollout on its own.

`serve_rows` does what the contract says the service does with a batch of requests: read the
customer's `serving_routes` row, send a request key to the canary when its bucket is below the
canary weight, predict it with the champion too (a shadow row, `served = false`), and log every
prediction to `prediction_log` with the route's rollout and step. Tests of the whole platform
use the real service instead.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable

from psycopg2.extras import execute_values

from retrain_assets.store.database import transaction

Predict = Callable[[str, str, dt.date], float]  # store, item, forecast day -> forecast


def bucket(customer: str, request_key: str) -> float:
    """Return the contract's bucket: sha256(customer/request_key)'s first 8 bytes over 2^64."""
    digest = hashlib.sha256(f"{customer}/{request_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def serve_rows(
    url: str,
    customer: str,
    keys: Iterable[tuple[str, str, dt.date]],
    models: dict[str, Predict],
    served_at: dt.datetime | None = None,
) -> int:
    """Serve (store, item, day) requests as the service would; return canary-routed requests.

    `models` maps a version to its forecaster; a forecaster that raises logs an error row.
    """
    with transaction(url) as cur:
        cur.execute(
            "SELECT champion_version, canary_version, canary_weight, rollout_id, step"
            " FROM serving_routes WHERE customer = %s",
            (customer,),
        )
        champion, canary, weight, rollout_id, step = cur.fetchone()
        at = served_at or dt.datetime.now(dt.UTC)
        rows, to_canary = [], 0
        for store, item, day in keys:
            key = f"{store}/{item}/{day.isoformat()}"
            goes_to_canary = canary is not None and bucket(customer, key) < weight
            if goes_to_canary:
                to_canary += 1
                rows.append(
                    _row(
                        customer,
                        canary,
                        "canary",
                        True,
                        key,
                        store,
                        item,
                        day,
                        models[canary],
                        rollout_id,
                        step,
                        at,
                    )
                )
                rows.append(
                    _row(
                        customer,
                        champion,
                        "champion",
                        False,
                        key,
                        store,
                        item,
                        day,
                        models[champion],
                        rollout_id,
                        step,
                        at,
                    )
                )
            else:
                rows.append(
                    _row(
                        customer,
                        champion,
                        "champion",
                        True,
                        key,
                        store,
                        item,
                        day,
                        models[champion],
                        rollout_id,
                        step,
                        at,
                    )
                )
        execute_values(
            cur,
            "INSERT INTO prediction_log (customer, model_version, alias, served, request_key,"
            " store_id, item_id, forecast_date, prediction, error, rollout_id, step, served_at)"
            " VALUES %s",
            rows,
        )
    return to_canary


def _row(
    customer: str,
    version: str,
    alias: str,
    served: bool,
    key: str,
    store: str,
    item: str,
    day: dt.date,
    predict: Predict,
    rollout_id: int | None,
    step: str | None,
    at: dt.datetime,
) -> tuple:
    try:
        value, error = float(predict(store, item, day)), None  # NaN/inf logged as such
    except Exception as err:  # a failed prediction is a logged error row, as in the service
        value, error = None, f"{type(err).__name__}: {err}"
    return (
        customer,
        version,
        alias,
        served,
        key,
        store,
        item,
        day,
        value,
        error,
        rollout_id,
        step,
        at,
    )
