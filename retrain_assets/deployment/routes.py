"""`serving_routes`: who serves each customer's traffic, as the prediction service reads it.

One row per customer: the champion version, the canary version and its share of requests, and
the rollout step the canary's predictions belong to. Only the rollout writes it (through its
transitions, or `retrain-assets rollback`); the service only reads it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg2.extensions

from retrain_assets.store.database import transaction


@dataclass(frozen=True)
class Route:
    """What one customer's traffic goes to; `canary_weight` is 0 without a canary."""

    customer: str
    champion_version: str | None
    canary_version: str | None = None
    canary_weight: float = 0.0
    rollout_id: int | None = None
    step: str | None = None
    updated_at: dt.datetime | None = None

    def __post_init__(self) -> None:
        """Refuse a weight without a canary or outside [0, 1] (the table would too, later)."""
        if not 0.0 <= self.canary_weight <= 1.0:
            raise ValueError(f"route of {self.customer}: canary weight {self.canary_weight}")
        if self.canary_version is None and self.canary_weight:
            raise ValueError(f"route of {self.customer}: a canary weight without a canary")


_COLUMNS = "customer, champion_version, canary_version, canary_weight, rollout_id, step"


def write_routes(cur: psycopg2.extensions.cursor, routes: Sequence[Route]) -> None:
    """Upsert many routes with one statement of column arrays, in the caller's transaction."""
    if not routes:
        return
    latest = {r.customer: r for r in routes}  # one row per customer in one statement
    cur.execute(
        f"INSERT INTO serving_routes ({_COLUMNS}) SELECT * FROM unnest(%s::text[], %s::text[],"
        " %s::text[], %s::float8[], %s::bigint[], %s::text[]) ON CONFLICT (customer) DO UPDATE"
        " SET champion_version = EXCLUDED.champion_version,"
        " canary_version = EXCLUDED.canary_version, canary_weight = EXCLUDED.canary_weight,"
        " rollout_id = EXCLUDED.rollout_id, step = EXCLUDED.step,"
        " updated_at = clock_timestamp()",
        tuple(
            [getattr(r, column.strip()) for r in latest.values()] for column in _COLUMNS.split(",")
        ),
    )


def read_routes(url: str, customers: Sequence[str] | None = None) -> dict[str, Route]:
    """Return the routes of every customer (or of `customers`) that has one."""
    with transaction(url) as cur:
        cur.execute(
            f"SELECT {_COLUMNS}, updated_at FROM serving_routes"
            " WHERE %s::text[] IS NULL OR customer = ANY(%s) ORDER BY customer",
            (
                None if customers is None else list(customers),
                None if customers is None else list(customers),
            ),
        )
        return {row[0]: Route(*row) for row in cur.fetchall()}
