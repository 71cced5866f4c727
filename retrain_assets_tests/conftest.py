import uuid
from collections.abc import Iterator

import pytest

from retrain_assets.store.server import PostgresServer, ensure_database, start_server
from retrain_assets_tests.mlflow_server import running_mlflow


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> PostgresServer:
    """A real PostgreSQL: RETRAIN_PG_URL when set, else the embedded server in a temp home."""
    return start_server(tmp_path_factory.mktemp("home"))


@pytest.fixture
def app_db(pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh project database for one test."""
    monkeypatch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
    return ensure_database(pg_server, "app")


@pytest.fixture(scope="session")
def mlflow_uri(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A real `mlflow server` on its own database of pg_server, shared by the whole session.

    Tests share it, so each one works under its own run keys and customers' state it sets.
    """
    with running_mlflow(pg_server, tmp_path_factory.mktemp("mlflow")) as uri:
        yield uri
