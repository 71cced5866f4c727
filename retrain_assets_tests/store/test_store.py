from retrain_assets.store.customers import customer_countries, register_customer
from retrain_assets.store.database import transaction
from retrain_assets.store.migrations import MIGRATIONS, migrate


def test_migrations_apply_once_on_real_postgres(app_db):
    assert migrate(app_db) == len(MIGRATIONS)
    assert migrate(app_db) == len(MIGRATIONS)
    with transaction(app_db) as cur:
        cur.execute("SELECT count(*) FROM schema_migrations")
        assert cur.fetchone()[0] == len(MIGRATIONS)
        cur.execute("SELECT to_regclass('feature_snapshots') IS NOT NULL")
        assert cur.fetchone()[0]


def test_customers_register_idempotently_and_keep_their_country(app_db):
    migrate(app_db)
    assert register_customer(app_db, "acme", None, "test") is True
    assert register_customer(app_db, "acme", "de", "test") is False
    assert register_customer(app_db, "acme", "US", "test") is False
    assert customer_countries(app_db) == {"acme": "DE"}
