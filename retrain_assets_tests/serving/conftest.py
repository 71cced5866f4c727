"""A migrated project database for the serving tests (routes and the prediction log)."""

import pytest

from retrain_assets.store.migrations import migrate


@pytest.fixture
def serving_db(app_db: str) -> str:
    """A fresh, migrated project database: `serving_routes` and `prediction_log` exist."""
    migrate(app_db)
    return app_db
