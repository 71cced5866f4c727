import datetime as dt
import hashlib

import numpy as np
import pytest

from retrain_assets.serving.routing import bucket, canary_mask, request_key

KEYS = [request_key(f"S{s:03d}", f"I{i:04d}", "2026-03-01") for s in range(20) for i in range(500)]
# The share of 10,000 keys in a bucket below w is binomial: its standard deviation is at most
# sqrt(0.25 / 10,000) = 0.005, so 0.02 is four standard deviations.
TOLERANCE = 0.02


def test_request_key_names_store_item_and_day():
    assert request_key("S001", "I0042", dt.date(2026, 3, 1)) == "S001/I0042/2026-03-01"
    assert request_key("S001", "I0042", "2026-03-01") == "S001/I0042/2026-03-01"


def test_bucket_is_the_first_eight_bytes_of_sha256_as_a_fraction():
    digest = hashlib.sha256(b"acme/S001/I0042/2026-03-01").digest()
    assert bucket("acme", "S001/I0042/2026-03-01") == int.from_bytes(digest[:8], "big") / 2**64
    assert 0.0 <= bucket("acme", "S001/I0042/2026-03-01") < 1.0


def test_the_same_key_always_goes_the_same_way():
    first = canary_mask("acme", KEYS, 0.3)
    again = canary_mask("acme", KEYS[::-1], 0.3)[::-1]  # another batch order
    assert np.array_equal(first, again)
    one_by_one = np.array([canary_mask("acme", [key], 0.3)[0] for key in KEYS[:500]])
    assert np.array_equal(first[:500], one_by_one)  # a row's fate does not depend on its batch


def test_customers_split_independently():
    acme, other = canary_mask("acme", KEYS, 0.5), canary_mask("globex", KEYS, 0.5)
    assert not np.array_equal(acme, other)


def test_canary_rows_only_grow_with_the_weight():
    at_10, at_50 = canary_mask("acme", KEYS, 0.1), canary_mask("acme", KEYS, 0.5)
    assert at_10.sum() > 0
    assert np.all(at_50[at_10])  # every row in the canary at 10 % is still there at 50 %


@pytest.mark.parametrize("weight", [0.1, 0.5])
def test_observed_share_matches_the_weight(weight):
    share = canary_mask("acme", KEYS, weight).mean()
    assert abs(share - weight) < TOLERANCE, share


def test_weight_zero_and_one_need_no_hash():
    assert not canary_mask("acme", KEYS, 0.0).any()
    assert canary_mask("acme", KEYS, 1.0).all()
