import pytest

from retrain_assets.customers import InvalidCustomerName
from retrain_assets.store.customers import (
    customer_countries,
    register_customer,
    register_customers,
)
from retrain_assets.store.database import transaction
from retrain_assets.store.migrations import MIGRATIONS, migrate


def test_migrations_apply_once_on_real_postgres(empty_db):
    assert migrate(empty_db) == len(MIGRATIONS)
    assert migrate(empty_db) == len(MIGRATIONS)
    with transaction(empty_db) as cur:
        cur.execute("SELECT count(*) FROM schema_migrations")
        assert cur.fetchone()[0] == len(MIGRATIONS)
        cur.execute("SELECT to_regclass('feature_snapshots') IS NOT NULL")
        assert cur.fetchone()[0]


def test_customers_register_idempotently_and_keep_their_country(app_db):
    assert register_customer(app_db, "acme", None, "test") is True
    assert register_customer(app_db, "acme", "de", "test") is False
    assert register_customer(app_db, "acme", "US", "test") is False
    assert customer_countries(app_db) == {"acme": "DE"}


def test_many_customers_register_in_one_call_as_one_by_one_would(app_db):
    register_customer(app_db, "acme", None, "test")
    new = register_customers(app_db, {"acme": "de", "beta": "us", "gamma": None}, "discovery")
    assert new == 2  # acme was known: its unknown country is filled in, nothing else changes
    assert register_customers(app_db, {"beta": "JP"}, "discovery") == 0
    assert register_customers(app_db, {}, "discovery") == 0
    assert customer_countries(app_db) == {"acme": "DE", "beta": "US", "gamma": None}


def test_many_customers_refuse_an_unsafe_name_before_writing_any(app_db):
    with pytest.raises(InvalidCustomerName):
        register_customers(app_db, {"fine": "US", "../escape": "US"}, "discovery")
    assert customer_countries(app_db) == {}
