import pytest

from retrain_assets.customers import InvalidCustomerName, validate_customer_name


@pytest.mark.parametrize("name", ["acme", "northwind-us", "a1", "x"])
def test_safe_slugs_are_accepted(name):
    assert validate_customer_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("Acme", "not a safe slug"),
        ("../etc", "not a safe slug"),
        ("-acme", "not a safe slug"),
        ("a--b", "double hyphen"),
        ("a" * 41, "at most 40"),
    ],
)
def test_unsafe_names_are_refused_with_the_reason(name, why):
    with pytest.raises(InvalidCustomerName, match=why):
        validate_customer_name(name)
