"""`retrain-assets customers add`: the instance partition and the project row, or a refusal."""

import dagster as dg
import pytest

from retrain_assets.cli import main
from retrain_assets.customers import CUSTOMERS
from retrain_assets.runtime.customers_admin import add_customer
from retrain_assets.store.customers import customer_countries


def test_add_registers_the_partition_and_the_row_once(platform_env):
    assert add_customer("acme-fr", "fr") == (True, True)
    assert add_customer("acme-fr", None) == (False, False)
    with dg.DagsterInstance.get() as instance:
        assert "postgres" in type(instance.run_storage).__module__
        assert instance.get_dynamic_partitions(CUSTOMERS.name) == ["acme-fr"]
    assert customer_countries(platform_env.database_url("app")) == {"acme-fr": "FR"}


def test_the_cli_refuses_a_bad_name_with_the_reason_and_writes_nothing(
    platform_env, capsys, tmp_path
):
    assert main(["customers", "add", "Acme Corp"]) == 2
    assert "not a safe slug" in capsys.readouterr().err
    assert main(["customers", "add", "acme", "--country", "France"]) == 2
    assert "two-letter" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()  # refused before any database or instance is touched


@pytest.mark.parametrize("name", ["abc\n", "../x/y", "a_b"])
def test_the_cli_refuses_names_that_only_look_safe(platform_env, capsys, tmp_path, name):
    assert main(["customers", "add", name]) == 2
    assert "not a safe slug" in capsys.readouterr().err
    assert not (tmp_path / "home").exists()
