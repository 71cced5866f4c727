import pytest

from retrain_assets.store.migrations import migrate


@pytest.fixture
def db(app_db: str) -> str:
    """A fresh, migrated project database."""
    migrate(app_db)
    return app_db
