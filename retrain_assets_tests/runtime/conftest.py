"""Fixtures of the runtime tests (the operator commands and `up`)."""

import os
import uuid
from collections.abc import Iterator

import pytest

from retrain_assets.store.server import PostgresServer


@pytest.fixture
def platform_env(
    tmp_path, pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PostgresServer]:
    """A fresh RETRAIN_HOME on the shared test server; os.environ restored afterwards."""
    saved = dict(os.environ)
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RETRAIN_PG_URL", pg_server.url)
    monkeypatch.setenv("RETRAIN_DB_PREFIX", f"t{uuid.uuid4().hex[:10]}_")
    yield pg_server
    os.environ.clear()
    os.environ.update(saved)
