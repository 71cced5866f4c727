import json
import math

import numpy as np
import pytest

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.inputs import (
    InvalidRequest,
    parse_json,
    rows_batch,
    v2_batch,
    v2_inputs,
)

SECRET = 987654.321  # a value that must never be echoed back in an error


def row(**changes):
    base = {"store_id": "S001", "item_id": "I0001", "date": "2026-03-01"}
    base.update({name: float(i) for i, name in enumerate(MODEL_FEATURES)})
    base.update(changes)
    return {k: v for k, v in base.items() if v is not ...}


def refused(call, *args) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(*args)
    return caught.value


def test_rows_become_a_feature_matrix_with_request_keys():
    batch = rows_batch({"rows": [row(), row(store_id=7, lag_7=None, on_promo=True)]}, 10)
    assert batch.keys == ["S001/I0001/2026-03-01", "7/I0001/2026-03-01"]
    assert batch.features.shape == (2, len(MODEL_FEATURES))
    assert batch.features[0].tolist() == [float(i) for i in range(len(MODEL_FEATURES))]
    assert math.isnan(batch.features[1, MODEL_FEATURES.index("lag_7")])  # null: missing value
    assert batch.features[1, MODEL_FEATURES.index("on_promo")] == 1.0


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"rows": [row(lag_7=...)]}, 422, "rows[0].lag_7: missing feature"),
        ({"rows": [row(), row(date="2026-02-30")]}, 422, "rows[1].date: is not a calendar date"),
        ({"rows": [row(date="01/03/2026")]}, 422, "rows[0].date: must be a date YYYY-MM-DD"),
        ({"rows": [row(store_id="S/1")]}, 422, "rows[0].store_id: must not contain '/'"),
        ({"rows": [row(item_id=None)]}, 422, "rows[0].item_id: must be a string"),
        ({"rows": [row(price="cheap")]}, 422, "rows[0].price: must be a number"),
        ({"rows": [row(price=1e400)]}, 422, "rows[0].price: must be a finite number"),
        ({"rows": [row(), 5]}, 422, "rows[1]: must be an object"),
        ({"rows": []}, 422, "the request has no rows"),
        ({"row": []}, 422, 'the body must be an object with "rows"'),
        ({"rows": [row()] * 11}, 413, "11 rows in one request; at most 10"),
    ],
)
def test_bad_rows_are_refused_with_where_and_why(body, status, message):
    error = refused(rows_batch, body, 10)
    assert error.status == status
    assert message in error.message, error.message


def test_many_problems_are_counted_not_all_listed_and_no_value_is_echoed():
    rows = [row(lag_7=..., price="x" * 20 + str(SECRET)) for _ in range(8)]
    error = refused(rows_batch, {"rows": rows}, 100)
    assert error.message.count(";") == 4  # five shown
    assert "(and 11 more problem(s))" in error.message  # 16 in all
    assert str(SECRET) not in error.message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant):
    raw = json.dumps({"rows": [row()]}).replace('"lag_7": 0.0', f'"lag_7": {constant}').encode()
    error = refused(parse_json, raw)
    assert error.status == 422 and f"the body has {constant}" in error.message


def test_a_body_that_is_not_json_says_where():
    error = refused(parse_json, b'{"rows": [}')
    assert error.status == 422 and "line 1 column 11" in error.message


def tensors(count=2, **changes):
    values = {
        "store_id": ("BYTES", ["S001", "S002"][:count]),
        "item_id": ("BYTES", ["I1"] * count),
        "date": ("BYTES", ["2026-03-01"] * count),
        **{name: ("FP64", [1.5] * count) for name in MODEL_FEATURES},
    }
    values.update(changes)
    return {
        "id": "r-1",
        "inputs": [
            {"name": name, "datatype": datatype, "shape": [len(data)], "data": data}
            for name, value in values.items()
            if value is not ...
            for datatype, data in [value]
        ],
    }


def test_v2_tensors_become_the_same_batch():
    request = v2_batch(tensors(on_promo=("BOOL", [True, False])), 10)
    assert request.request_id == "r-1" and request.outputs is None
    assert request.batch.keys == ["S001/I1/2026-03-01", "S002/I1/2026-03-01"]
    promo = request.batch.features[:, MODEL_FEATURES.index("on_promo")]
    assert promo.tolist() == [1.0, 0.0]
    assert np.all(request.batch.features[:, 0] == 1.5)


def test_v2_accepts_rows_by_one_nested_data():
    body = tensors()
    for tensor in body["inputs"]:
        tensor["shape"] = [2, 1]
        tensor["data"] = [[value] for value in tensor["data"]]
    assert len(v2_batch(body, 10).batch) == 2


@pytest.mark.parametrize(
    ("changes", "status", "message"),
    [
        ({"lag_7": ...}, 422, "inputs: missing lag_7"),
        ({"weather": ("FP64", [1.0, 2.0])}, 422, "unknown input"),
        ({"lag_7": ("BYTES", ["1", "2"])}, 422, "inputs[lag_7].datatype: must be BOOL or FP16"),
        ({"store_id": ("FP64", [1.0, 2.0])}, 422, "inputs[store_id].datatype: must be BYTES"),
        ({"lag_7": ("FP64", [1.0])}, 422, "inputs disagree on the number of rows"),
        ({"price": ("FP64", [1.0, "x"])}, 422, "inputs[price].data[1]: must be a number"),
        ({"date": ("BYTES", ["2026-03-01", "tomorrow"])}, 422, "inputs[date].data[1]: must be a"),
    ],
)
def test_bad_v2_requests_are_refused_with_where_and_why(changes, status, message):
    error = refused(v2_batch, tensors(**changes), 10)
    assert error.status == status
    assert message in error.message, error.message


def test_v2_shape_must_match_data_and_rows_are_bounded():
    body = tensors()
    body["inputs"][0]["shape"] = [3]
    assert "shape [3] holds 3 value(s), data has 2" in refused(v2_batch, body, 10).message
    error = refused(v2_batch, tensors(), 1)
    assert error.status == 413 and "2 rows in one request; at most 1" in error.message


def test_v2_inputs_are_the_identity_as_bytes_and_each_feature_as_fp64():
    assert v2_inputs()[:3] == [("store_id", "BYTES"), ("item_id", "BYTES"), ("date", "BYTES")]
    assert v2_inputs()[3:] == [(name, "FP64") for name in MODEL_FEATURES]
