"""The Open Inference Protocol's binary tensor data extension, both ways.

A binary request is its JSON header (`Inference-Header-Content-Length` bytes) followed by the
raw tensors of the inputs whose `parameters.binary_data_size` is set, in the order the header
lists them: little-endian, row-major, unpadded; a BYTES element is a 4-byte little-endian
length then its bytes. `decode_request` puts each such tensor's values into its `data`, so the
rest of the service reads one shape of body. `encode_response` does the reverse for the
outputs asked for as binary. Every size is checked against the header and the body; a problem
names the input and the sizes, never a value.

The header is read through the request schema (serving.request_schema's InferenceRequest) and
the decoded values go into that same model's tensors, so the values are then checked exactly as
a JSON request's are. A NaN in a binary float tensor is a missing value (JSON sends null);
bytes that are not UTF-8 text stay bytes, which the schema refuses as not text.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from retrain_assets.serving.inputs import inference_request
from retrain_assets.serving.refusal import InvalidRequest
from retrain_assets.serving.request_schema import InferenceRequest, InputTensor
from retrain_assets.serving.strict_json import parse_json

HEADER = "Inference-Header-Content-Length"
MAX_HEADER_DIGITS = 18  # past any body the guard lets through
NUMERIC: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype("<u1"),  # one byte, 0 or 1
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}


def header_length(text: str, body_length: int) -> int:
    """Return the JSON header's length from the header's value.

    Raises:
        InvalidRequest: 400 when it is not a number, or claims more bytes than the body has.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_HEADER_DIGITS:
        raise InvalidRequest(400, f"{HEADER}: must be a number of bytes (0-9)")
    length = int(text)
    if length > body_length:
        raise InvalidRequest(
            400,
            f"{HEADER}: says the JSON header has {length} bytes; the body has only {body_length}",
        )
    return length


def _bytes_elements(raw: memoryview, name: str, count: int) -> list[Any]:
    values: list[Any] = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise InvalidRequest(422, f"inputs[{name}]: a BYTES element's length is cut short")
        size = int.from_bytes(raw[at : at + 4], "little")
        at += 4
        if at + size > len(raw):
            raise InvalidRequest(
                422, f"inputs[{name}]: element {len(values)} claims more bytes than the tensor has"
            )
        element = bytes(raw[at : at + size])
        try:
            values.append(element.decode())
        except UnicodeDecodeError:
            values.append(element)  # not text: the schema refuses it, naming the element
        at += size
    if len(values) != count:
        raise InvalidRequest(
            422, f"inputs[{name}]: its shape holds {count} element(s); the data has {len(values)}"
        )
    return values


def _tensor(raw: memoryview, tensor: InputTensor) -> list[Any]:
    name, datatype, count = tensor.name, tensor.datatype, math.prod(tensor.shape)
    if datatype == "BYTES":
        return _bytes_elements(raw, name, count)
    dtype = NUMERIC[datatype]
    if len(raw) != count * dtype.itemsize:
        raise InvalidRequest(
            422,
            f"inputs[{name}]: binary_data_size is {len(raw)} bytes; its shape needs {count} "
            f"{datatype} value(s), {count * dtype.itemsize} bytes",
        )
    values = np.frombuffer(raw, dtype=dtype)
    if datatype == "BOOL":
        return values.astype(bool).tolist()
    if dtype.kind == "f":
        return [None if math.isnan(value) else value for value in values.tolist()]
    return values.tolist()


def decode_request(raw: bytes, header: str) -> InferenceRequest:
    """Return a binary request read through the schema, its binary tensors' values in `data`.

    Raises:
        InvalidRequest: the header's length or a tensor's size disagrees with the body (400 or
            422, naming the input), or the JSON header is not a valid request (422).
    """
    length = header_length(header, len(raw))
    request = inference_request(parse_json(raw[:length]))
    sizes: list[tuple[InputTensor, int]] = []
    for i, tensor in enumerate(request.inputs):
        size = tensor.parameters.binary_data_size if tensor.parameters is not None else None
        if size is None:
            continue
        if tensor.data is not None:
            raise InvalidRequest(422, f"inputs[{i}]: has both data and binary_data_size")
        sizes.append((tensor, size))
    claimed, carried = sum(size for _, size in sizes), len(raw) - length
    if claimed != carried:
        raise InvalidRequest(
            400,
            f"binary tensor data: the inputs' binary_data_size add up to {claimed} bytes; the "
            f"body carries {carried} after its {length}-byte JSON header",
        )
    view, at = memoryview(raw), length
    for tensor, size in sizes:
        tensor.data = _tensor(view[at : at + size], tensor)
        at += size
    return request


def _encoded(datatype: str, data: list[Any]) -> bytes:
    if datatype == "BYTES":
        parts = []
        for value in data:
            text = (value if isinstance(value, str) else str(value)).encode()
            parts += [len(text).to_bytes(4, "little"), text]
        return b"".join(parts)
    values = [math.nan if value is None else value for value in data]
    return np.asarray(values, dtype=NUMERIC[datatype]).tobytes()


def encode_response(answer: dict[str, Any], binary: set[str]) -> tuple[bytes, int | None]:
    """Return the response body and its JSON header's length (None: all JSON, no extension).

    The outputs named in `binary` lose their `data` and gain `parameters.binary_data_size`;
    their raw tensors follow the JSON header in the order of `outputs`.
    """
    tensors = []
    for output in answer["outputs"]:
        if output["name"] in binary:
            data = _encoded(output["datatype"], output.pop("data"))
            output.setdefault("parameters", {})["binary_data_size"] = len(data)
            tensors.append(data)
    head = json.dumps(answer).encode()
    if not tensors:
        return head, None
    return b"".join([head, *tensors]), len(head)
