"""Each customer's country, for its holidays: the one lookup the asset and the service share."""

from __future__ import annotations

from collections.abc import Iterable

from retrain_assets.landing import read_manifest_country
from retrain_assets.settings import landing_root
from retrain_assets.store.customers import customer_countries


def countries_of(db_url: str, customers: Iterable[str]) -> dict[str, str | None]:
    """Return each customer's country: the `customers` table's, else its landing manifest's."""
    known = customer_countries(db_url)
    root = landing_root()
    return {c: known.get(c) or read_manifest_country(root, c) for c in customers}
