"""The registry's names are built only from safe customer names."""

import pytest

from retrain_assets.customers import InvalidCustomerName
from retrain_assets.registry.mlflow_registry import experiment_name, model_name


def test_names_of_a_safe_customer():
    assert experiment_name("acme-fr") == "demand_forecast/acme-fr"
    assert model_name("acme-fr") == "demand_forecast.acme-fr"


@pytest.mark.parametrize("customer", ["a%", "a_b", "x/../y", "abc\n", "", "Acme"])
def test_an_unsafe_customer_never_becomes_a_registry_name(customer):
    # `%` and `_` would widen the audit's LIKE search to other customers' models
    with pytest.raises(InvalidCustomerName):
        experiment_name(customer)
    with pytest.raises(InvalidCustomerName):
        model_name(customer)
