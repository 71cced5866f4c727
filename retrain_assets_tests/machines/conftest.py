import pytest


@pytest.fixture
def db(app_db: str) -> str:
    """A fresh, migrated project database."""
    return app_db
