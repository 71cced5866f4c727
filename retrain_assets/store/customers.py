"""The customers table: who the tenants are and which country's holidays apply to them."""

from __future__ import annotations

from retrain_assets.customers import validate_customer_name
from retrain_assets.store.database import one_row, transaction


def register_customer(url: str, name: str, country: str | None, added_by: str) -> bool:
    """Record a customer (idempotent); return True when it was new.

    A later call with a country fills in a country that was unknown; it never overwrites one.
    """
    validate_customer_name(name)
    with transaction(url) as cur:
        cur.execute(
            """
            INSERT INTO customers (name, country, added_by) VALUES (%s, %s, %s)
            ON CONFLICT (name) DO UPDATE SET country = coalesce(customers.country, EXCLUDED.country)
            RETURNING (xmax = 0)
            """,
            (name, country.upper() if country else None, added_by),
        )
        return bool(one_row(cur)[0])


def customer_countries(url: str) -> dict[str, str | None]:
    """Return each known customer's country code (None when unknown)."""
    with transaction(url) as cur:
        cur.execute("SELECT name, country FROM customers ORDER BY name")
        return dict(cur.fetchall())
