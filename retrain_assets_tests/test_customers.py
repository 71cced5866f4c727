import dagster as dg
import pytest

from retrain_assets.customers import (
    CUSTOMER_NAME_RULE,
    InvalidCustomerName,
    UnsafeCustomerPartition,
    customer_of,
    split_customer_partitions,
    validate_customer_name,
)

UNSAFE = ["abc\n", "\nabc", "../x/y", "a/b", "a_b", "a%", "a b", "ab\x00", "é", ".", "a.b"]


@pytest.mark.parametrize("name", ["acme", "northwind-us", "a1", "x", "a" * 40])
def test_safe_slugs_are_accepted(name):
    assert validate_customer_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("Acme", "not a safe slug"),
        ("../etc", "not a safe slug"),
        ("-acme", "not a safe slug"),
        ("acme-", "not a safe slug"),
        ("a--b", "double hyphen"),
        ("a" * 41, "at most 40"),
        ("abc\n", "not a safe slug"),  # `$` matches before a trailing newline: fullmatch
        (7, "must be a string"),
    ],
)
def test_unsafe_names_are_refused_with_the_reason(name, why):
    with pytest.raises(InvalidCustomerName, match=why):
        validate_customer_name(name)


@pytest.mark.parametrize("name", UNSAFE)
def test_every_unsafe_name_is_refused(name):
    with pytest.raises(InvalidCustomerName):
        validate_customer_name(name)


def test_a_huge_name_is_not_echoed_whole():
    with pytest.raises(InvalidCustomerName) as refused:
        validate_customer_name("x" * 100_000)
    assert len(str(refused.value)) < 200


def test_partition_keys_are_split_into_safe_names_and_refused_keys():
    assert split_customer_partitions(["b", "../x/y", "a", "abc\n"]) == (
        ["a", "b"],
        ["../x/y", "abc\n"],
    )


def test_customer_of_refuses_an_unsafe_partition_key_naming_the_key_and_the_rule():
    @dg.op
    def needs_a_customer(context: dg.OpExecutionContext) -> str:
        return customer_of(context)

    partitions = dg.StaticPartitionsDefinition(["acme", "../x/y"])

    @dg.job(partitions_def=partitions)
    def one_op():
        needs_a_customer()

    assert (
        one_op.execute_in_process(partition_key="acme").output_for_node("needs_a_customer")
        == "acme"
    )
    with pytest.raises(UnsafeCustomerPartition) as refused:
        one_op.execute_in_process(partition_key="../x/y")
    assert "'../x/y'" in refused.value.description
    assert CUSTOMER_NAME_RULE in refused.value.description
