"""The service's input rules on their own: strict JSON, spec bounds, bounded error text."""

import json

import pydantic
import pytest

from retrain_assets.gpu.service.http_errors import strict_json_loads
from retrain_assets.gpu.service.job_store import MAX_ERROR_CHARS, bounded_error
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.worker import describe

SPEC = {"customer": "acme", "dataset_url": "/data/train.parquet", "features": ["price"]}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_strict_json_refuses_what_is_not_a_finite_number(literal):
    with pytest.raises(json.JSONDecodeError, match="not valid JSON"):
        strict_json_loads(f'{{"x": [1, {literal}]}}'.encode())


def test_strict_json_reads_ordinary_json():
    assert strict_json_loads(b'{"x": [1, 2.5e10, -0.1, "NaN"]}') == {"x": [1, 2.5e10, -0.1, "NaN"]}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"customer": "abc\n"}, "customer"),
        ({"customer": "../x/y"}, "customer"),
        ({"features": ["price\x00"]}, "features"),
        ({"features": [f"c{n}" for n in range(501)]}, "features"),
        ({"label": "x" * 201}, "label"),
        ({"dataset_url": "/a\nb"}, "dataset_url"),
        ({"params": {"learning_rate": float("nan")}}, "params"),
        ({"params": {"seed": -1}}, "params"),
        ({"faults": {"on_attempts": [1] * 101}}, "faults"),
    ],
)
def test_a_spec_outside_the_bounds_is_refused_naming_the_field(change, field):
    with pytest.raises(pydantic.ValidationError) as refused:
        TrainingSpec.model_validate({**SPEC, **change})
    assert refused.value.errors()[0]["loc"][0] == field


def test_the_customer_refusal_does_not_repeat_the_name():
    with pytest.raises(pydantic.ValidationError) as refused:
        TrainingSpec.model_validate({**SPEC, "customer": "evil-name\n"})
    assert "evil-name" not in refused.value.errors()[0]["msg"]


def test_a_stored_error_is_cut_and_says_how_much():
    assert bounded_error("short") == "short"
    long = describe(KeyError("x" * 100_000))
    assert len(long) < MAX_ERROR_CHARS + 60
    assert long.startswith("KeyError: 'xxx")
    assert long.endswith(f"({len('KeyError: ') + 100_002 - MAX_ERROR_CHARS} more characters cut)")
