"""`ProjectDatabase`: asking for the URL starts and migrates nothing; `prepare()` does, once."""

import pytest

from retrain_assets.store.database import transaction
from retrain_assets.store.resource import DatabaseNotPrepared, ProjectDatabase


def test_the_getter_has_no_side_effect():
    resource = ProjectDatabase(url="postgresql+psycopg2://nobody@127.0.0.1:9/none")
    with pytest.raises(DatabaseNotPrepared, match="prepare"):
        resource.connection_url()  # no connection tried: the server does not exist


def test_prepare_migrates_and_the_getter_returns_its_url(empty_db: str):
    resource = ProjectDatabase(url=empty_db)
    assert resource.prepare() == empty_db == resource.connection_url()
    with transaction(empty_db) as cur:
        cur.execute("SELECT count(*) FROM customers")  # the tables exist now
        assert cur.fetchone()[0] == 0
