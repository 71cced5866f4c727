"""`retrain-assets customers add NAME`: a customer added by a person, not by a landing folder.

It writes the same two records the `customer_discovery` sensor writes: the `customers`
dynamic partition in the Dagster instance and the row (with its country) in the project table.
"""

from __future__ import annotations

import os

import dagster as dg

from retrain_assets.customers import CUSTOMER_PARTITIONS, validate_customer_name
from retrain_assets.landing import read_manifest_country
from retrain_assets.runtime.environment import child_environment, prepare_dagster_home, repo_file
from retrain_assets.settings import landing_root
from retrain_assets.store.customers import register_customer
from retrain_assets.store.migrations import migrate
from retrain_assets.store.server import ensure_database, start_server


def add_customer(name: str, country: str | None) -> tuple[bool, bool]:
    """Add `name`; return (new in the project table, new as a Dagster partition).

    Raises:
        InvalidCustomerName: `name` is not a safe slug (nothing is written).
        ValueError: `country` is not a two-letter code.
    """
    validate_customer_name(name)
    if country is not None and (len(country) != 2 or not country.isalpha()):
        raise ValueError(f"--country {country!r} is not a two-letter ISO country code")
    server = start_server()
    ensure_database(server, "dagster")
    app_url = ensure_database(server, "app")
    migrate(app_url)
    new_row = register_customer(
        app_url, name, country or read_manifest_country(landing_root(), name), "cli"
    )
    folders = prepare_dagster_home(repo_file("dagster.yaml"))
    os.environ.update(child_environment(server, folders))
    with dg.DagsterInstance.get() as instance:
        known = instance.has_dynamic_partition(CUSTOMER_PARTITIONS, name)
        if not known:
            instance.add_dynamic_partitions(CUSTOMER_PARTITIONS, [name])
    return new_row, not known
