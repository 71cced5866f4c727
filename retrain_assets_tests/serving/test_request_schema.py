"""The one request schema: what it refuses in every form, by path, and the 500s it closed."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.binary_tensors import decode_request, header_length
from retrain_assets.serving.inputs import (
    InvalidRequest,
    infer_request,
    parse_json,
    rows_batch,
    v2_batch,
)

KEY = {"store_id": "S001", "item_id": "I0001"}


def feature_row(**changes):
    row = {**KEY, "date": "2026-03-01", **{name: 1.0 for name in MODEL_FEATURES}}
    return {**row, **changes}


def refused(call, *args) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(*args)
    return caught.value


def rows_body(raw: bytes, max_rows: int = 10):
    return rows_batch(parse_json(raw), max_rows)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"rows": [{**KEY, "weather": 1}]}, "rows[0].weather: unknown field"),
        ({"rows": [feature_row(weather=1)]}, "rows[0].weather: unknown field"),
        ({"rows": [KEY], "extra": 1}, "extra: unknown field"),
        ({"rows": [{**KEY, "price": "1.5"}]}, "rows[0].price: must be a number"),
        ({"rows": [{**KEY, "on_promo": 0.5}]}, "rows[0].on_promo: out of range"),
        ({"rows": [{**KEY, "price": -0.01}]}, "rows[0].price: out of range"),
        ({"rows": [{**KEY, "date": 20260301}]}, "rows[0].date: must be a date YYYY-MM-DD"),
        ({"rows": [{**KEY, "item_id": ""}]}, "rows[0].item_id: must have 1 to 100 characters"),
        ({"rows": [{**KEY, "store_id": True}]}, "rows[0].store_id: must be a string"),
        ({"rows": [{**KEY, "store_id": "\ud800"}]}, "rows[0].store_id: must be valid Unicode"),
        ({"rows": [feature_row(lag_7=[1.0])]}, "rows[0].lag_7: must be a number"),
        ({"rows": [feature_row(date=None)]}, "rows[0].date: must be a date"),
    ],
)
def test_every_row_field_is_strict_and_named_by_its_path(body, message):
    error = refused(rows_batch, body, 10)
    assert error.status == 422 and message in error.message, error.message


def test_a_key_twice_in_one_object_is_refused_with_its_path():
    raw = b'{"rows": [{"store_id": "S1", "item_id": "I1"}, {"store_id": "S1", "item_id": "I1", '
    raw += b'"price": 1, "price": -5}]}'
    error = refused(rows_body, raw)
    assert error.status == 422 and error.message == "rows[1].price: given twice in one object"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than"),  # was a RecursionError: 500
        (b"\xff\xfe{", "not UTF-8 text"),
    ],
)
def test_the_json_itself_is_bounded(raw, message):
    error = refused(parse_json, raw)
    assert error.status == 422 and message in error.message, error.message


def test_nesting_past_the_schema_is_refused_at_its_path():
    error = refused(rows_body, b'{"rows": [[[[[[[1]]]]]]]}')
    assert error.message == "rows[0]: must be an object"
    error = refused(v2_batch, key_tensors(tensor("price", "FP64", [[[1.0]], [[2.0]]])), 10)
    assert "inputs[price].data[0]: must be" in error.message


def test_an_integer_of_ten_thousand_digits_is_not_a_500_but_not_a_finite_number():
    # json.loads raised ValueError (Python's int digit limit): a 500 before
    raw = json.dumps({"rows": [{**KEY, "price": 0}]}).replace(
        '"price": 0', '"price": ' + "9" * 10_000
    )
    error = refused(rows_body, raw.encode())
    assert error.message == "rows[0].price: must be a finite number"


def tensor(name, datatype, data, shape=None):
    return {"name": name, "datatype": datatype, "shape": shape or [len(data)], "data": data}


def key_tensors(*extra):
    return {
        "inputs": [
            tensor("store_id", "BYTES", ["S001", "S002"]),
            tensor("item_id", "BYTES", ["I1", "I2"]),
            *extra,
        ]
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({**key_tensors(), "priority": 1}, "priority: unknown field"),
        (
            key_tensors({**tensor("price", "FP64", [1.0, 2.0]), "extra": 1}),
            "inputs[price].extra: unknown field",
        ),
        (key_tensors(tensor("price", "FP65", [1.0, 2.0])), "inputs[price].datatype:"),
        (key_tensors(tensor("price", "FP64", [1.0, 2.0], [2, 1, 1])), "inputs[price].shape:"),
        (key_tensors(tensor("price", "FP64", [1.0, -2.0])), "inputs[price].data[1]: out of range"),
        (key_tensors(tensor("date", "BYTES", ["2026-02-30", None])), "inputs[date].data[0]: is "),
        ({**key_tensors(), "id": 7}, "id: "),
        ({**key_tensors(), "outputs": [{"name": "forecast", "x": 1}]}, "outputs[0].x: unknown"),
        (
            {**key_tensors(), "parameters": {"binary_data_output": 1}},
            "parameters.binary_data_output",
        ),
    ],
)
def test_every_v2_field_is_strict_and_named_by_its_path(body, message):
    error = refused(v2_batch, body, 10)
    assert error.status == 422 and message in error.message, error.message


def test_binary_data_size_without_the_binary_header_is_a_400_not_a_missing_data():
    body = key_tensors({"name": "price", "datatype": "FP64", "shape": [2]})
    body["inputs"][2]["parameters"] = {"binary_data_size": 16}
    error = refused(v2_batch, body, 10)
    assert error.status == 400 and "needs the Inference-Header-Content-Length" in error.message


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 5000, "-1", "1e3", ""])
def test_a_header_length_that_is_not_ascii_digits_is_a_400(value):
    # "²".isdigit() is true and int("²") raised ValueError: a 500 before
    error = refused(header_length, value, 100)
    assert error.status == 400 and "must be a number of bytes" in error.message


def binary(header: dict, *tensors: bytes) -> tuple[bytes, str]:
    head = json.dumps(header).encode()
    return head + b"".join(tensors), str(len(head))


def strings(*values: bytes) -> bytes:
    return b"".join(len(v).to_bytes(4, "little") + v for v in values)


def binary_tensor(name, datatype, size, shape=(2,)):
    return {
        "name": name,
        "datatype": datatype,
        "shape": list(shape),
        "parameters": {"binary_data_size": size},
    }


def test_binary_tensors_go_into_the_same_schema_nan_as_missing_and_non_text_refused():
    stores, items = strings(b"S001", b"S002"), strings(b"I1", b"I2")
    price = np.array([np.nan, 2.5]).tobytes()
    header = {
        "inputs": [
            binary_tensor("store_id", "BYTES", len(stores)),
            binary_tensor("item_id", "BYTES", len(items)),
            binary_tensor("price", "FP64", len(price)),
        ]
    }
    request = infer_request(decode_request(*binary(header, stores, items, price)), 10)
    assert np.isnan(request.batch.price[0]) and request.batch.price[1] == 2.5
    dates = strings(b"\xff\xfe", b"\xc0\xaf")  # not UTF-8
    header["inputs"].append(binary_tensor("date", "BYTES", len(dates)))
    raw, length = binary(header, stores, items, price, dates)
    error = refused(lambda: infer_request(decode_request(raw, length), 10))
    assert error.message.startswith("inputs[date].data[0]: must be a date YYYY-MM-DD")
    assert "(and" not in error.message and "inputs[date].data[1]" in error.message


def binary_bodies() -> st.SearchStrategy[tuple[bytes, str]]:
    """Well-formed binary requests by key, then mutated: bytes, sizes, shapes, datatypes."""
    datatypes = st.sampled_from(["BYTES", "FP32", "FP64", "INT32", "BOOL", "UINT8", "FP16"])

    @st.composite
    def body(draw) -> tuple[bytes, str]:
        names = ["store_id", "item_id", *draw(st.sets(st.sampled_from(["date", "price"])))]
        header, parts = [], []
        rows = draw(st.integers(1, 3))
        for name in names:
            datatype = draw(datatypes)
            if datatype == "BYTES":
                data = strings(
                    *draw(st.lists(st.binary(max_size=12), min_size=rows, max_size=rows))
                )
            else:
                data = draw(st.binary(min_size=0, max_size=4 * rows + 4))
            shape = draw(st.sampled_from([[rows], [rows, 1], [rows + 1], [0], [rows, 2]]))
            header.append(binary_tensor(name, datatype, len(data), shape))
            parts.append(data)
        raw, length = binary({"inputs": header}, *parts)
        flips = draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255))))
        mutable = bytearray(raw)
        for at, byte in flips[:3]:
            mutable[at] = byte
        claimed = draw(st.sampled_from([length, str(int(length) + 1), str(int(length) - 1)]))
        return bytes(mutable), claimed

    return body()


@settings(max_examples=300, deadline=None)
@given(binary_bodies())
def test_no_binary_body_raises_anything_but_a_4xx_refusal(body):
    raw, length = body
    try:
        infer_request(decode_request(raw, length), 10)
    except InvalidRequest as error:
        assert 400 <= error.status < 500 and error.message
