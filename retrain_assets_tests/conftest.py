import uuid

import pytest

from retrain_assets.store.server import PostgresServer, ensure_database, start_server


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> PostgresServer:
    """A real PostgreSQL: RETRAIN_PG_URL when set, else the embedded server in a temp home."""
    return start_server(tmp_path_factory.mktemp("home"))


@pytest.fixture
def app_db(pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh project database for one test."""
    monkeypatch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
    return ensure_database(pg_server, "app")
