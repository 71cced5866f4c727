"""The traffic split: which rows of a request go to the canary (docs/deployment.md).

A row goes to the canary when `bucket(customer, request_key) < canary_weight`. The bucket is a
pure function of the customer and the request key, so the same store, item and day always go
the same way within a step, whichever replica answers, and a row in the canary at 10 % stays
in it at 50 % (the canary's rows only grow as its weight does).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence

import numpy as np

_SCALE = float(2**64)


def request_key(store_id: str, item_id: str, forecast_date: dt.date | str) -> str:
    """Return the request key `<store_id>/<item_id>/<YYYY-MM-DD>` that routing and the log use."""
    day = forecast_date if isinstance(forecast_date, str) else forecast_date.isoformat()
    return f"{store_id}/{item_id}/{day}"


def bucket(customer: str, key: str) -> float:
    """Return the row's place in [0, 1): sha256(`customer/key`)'s first 8 bytes over 2**64."""
    digest = hashlib.sha256(f"{customer}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def canary_mask(customer: str, keys: Sequence[str], canary_weight: float) -> np.ndarray:
    """Return, per request key, whether that row goes to the canary at `canary_weight`.

    A weight of 0 sends nothing to the canary and 1 sends everything; no hash is computed for
    either.
    """
    if canary_weight <= 0.0:
        return np.zeros(len(keys), dtype=bool)
    if canary_weight >= 1.0:
        return np.ones(len(keys), dtype=bool)
    return np.fromiter(
        (bucket(customer, key) < canary_weight for key in keys), dtype=bool, count=len(keys)
    )
