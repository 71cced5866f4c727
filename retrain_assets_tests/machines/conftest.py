import pytest


@pytest.fixture
def db(app_db: str) -> str:
    """A fresh, migrated project database."""
    return app_db


@pytest.fixture(autouse=True)
def retries_due_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait no time here (still one advance each); test_retry_waits times the waits."""
    monkeypatch.setenv("RETRAIN_RETRY_FIRST_SECONDS", "0")
    monkeypatch.setenv("RETRAIN_RETRY_MAX_SECONDS", "0")
