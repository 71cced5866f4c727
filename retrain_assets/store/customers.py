"""The customers table: who the tenants are and which country's holidays apply to them."""

from __future__ import annotations

from psycopg2.extras import execute_values

from retrain_assets.customers import validate_customer_name
from retrain_assets.store.database import transaction


def register_customer(url: str, name: str, country: str | None, added_by: str) -> bool:
    """Record a customer (idempotent); return True when it was new.

    A later call with a country fills in a country that was unknown; it never overwrites one.
    """
    return register_customers(url, {name: country}, added_by) == 1


def customer_countries(url: str) -> dict[str, str | None]:
    """Return each known customer's country code (None when unknown)."""
    with transaction(url) as cur:
        cur.execute("SELECT name, country FROM customers ORDER BY name")
        return dict(cur.fetchall())


def register_customers(url: str, countries: dict[str, str | None], added_by: str) -> int:
    """Record many customers in one statement (idempotent); return how many were new.

    A later call with a country fills in a country that was unknown; it never overwrites one.
    A tick of `customer_discovery` over a landing zone of 100,000 new folders is one statement
    here rather than 100,000 transactions.
    """
    for name in countries:
        validate_customer_name(name)
    if not countries:
        return 0
    rows = [(name, c.upper() if c else None, added_by) for name, c in countries.items()]
    with transaction(url) as cur:
        new = execute_values(
            cur,
            """
            INSERT INTO customers (name, country, added_by) VALUES %s
            ON CONFLICT (name) DO UPDATE SET country = coalesce(customers.country, EXCLUDED.country)
            RETURNING (xmax = 0)
            """,
            rows,
            page_size=1000,
            fetch=True,
        )
    return sum(bool(row[0]) for row in new)
