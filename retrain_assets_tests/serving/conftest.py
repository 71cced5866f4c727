"""A migrated project database for the serving tests (routes and the prediction log)."""

import pytest


@pytest.fixture
def serving_db(app_db: str) -> str:
    """A fresh, migrated project database: `serving_routes` and `prediction_log` exist."""
    return app_db
