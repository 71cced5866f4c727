"""The Open Inference Protocol's binary tensor data extension, both ways.

A binary request is its JSON header (`Inference-Header-Content-Length` bytes) followed by the
raw tensors of the inputs whose `parameters.binary_data_size` is set, in the order the header
lists them: little-endian, row-major, unpadded; a BYTES element is a 4-byte little-endian
length then its bytes. `decode_request` puts each such tensor's values into its `data`, so the
rest of the service reads one shape of body. `encode_response` does the reverse for the
outputs asked for as binary. Every size is checked against the header and the body; a problem
names the input and the sizes, never a value.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from retrain_assets.serving.inputs import InvalidRequest, parse_json

HEADER = "Inference-Header-Content-Length"
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
    if not text.isdigit():
        raise InvalidRequest(400, f"{HEADER}: must be a number of bytes")
    length = int(text)
    if length > body_length:
        raise InvalidRequest(
            400,
            f"{HEADER}: says the JSON header has {length} bytes; the body has only {body_length}",
        )
    return length


def _elements(shape: Any) -> int | None:
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        return None
    return math.prod(shape)


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
        try:
            values.append(bytes(raw[at : at + size]).decode())
        except UnicodeDecodeError:
            values.append(None)  # the row check names it: must be a string
        at += size
    if len(values) != count:
        raise InvalidRequest(
            422, f"inputs[{name}]: its shape holds {count} element(s); the data has {len(values)}"
        )
    return values


def _tensor(raw: memoryview, tensor: dict[str, Any], name: str) -> list[Any]:
    datatype, count = tensor.get("datatype"), _elements(tensor.get("shape"))
    if count is None:
        raise InvalidRequest(422, f"inputs[{name}].shape: must be a list of sizes")
    if datatype == "BYTES":
        return _bytes_elements(raw, name, count)
    dtype = NUMERIC.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise InvalidRequest(422, f"inputs[{name}].datatype: not a datatype of the protocol")
    if len(raw) != count * dtype.itemsize:
        raise InvalidRequest(
            422,
            f"inputs[{name}]: binary_data_size is {len(raw)} bytes; its shape needs {count} "
            f"{datatype} value(s), {count * dtype.itemsize} bytes",
        )
    values = np.frombuffer(raw, dtype=dtype)
    return (values.astype(bool) if datatype == "BOOL" else values).tolist()


def decode_request(raw: bytes, header: str) -> Any:
    """Return a binary request's JSON with every binary input's values put into its `data`.

    Raises:
        InvalidRequest: the header's length or a tensor's size disagrees with the body (400 or
            422, naming the input), or the JSON header is not valid JSON (422).
    """
    length = header_length(header, len(raw))
    body = parse_json(raw[:length])
    inputs = body.get("inputs") if isinstance(body, dict) else None
    if not isinstance(inputs, list):
        return body  # the batch check names what is wrong with it
    sizes: list[tuple[dict[str, Any], str, int]] = []
    for i, tensor in enumerate(inputs):
        parameters = tensor.get("parameters") if isinstance(tensor, dict) else None
        if not isinstance(parameters, dict) or "binary_data_size" not in parameters:
            continue
        name = str(tensor.get("name", i))
        size = parameters["binary_data_size"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidRequest(
                422, f"inputs[{name}].parameters.binary_data_size: must be a number of bytes"
            )
        if "data" in tensor:
            raise InvalidRequest(422, f"inputs[{name}]: has both data and binary_data_size")
        sizes.append((tensor, name, size))
    claimed, carried = sum(size for _, _, size in sizes), len(raw) - length
    if claimed != carried:
        raise InvalidRequest(
            400,
            f"binary tensor data: the inputs' binary_data_size add up to {claimed} bytes; the "
            f"body carries {carried} after its {length}-byte JSON header",
        )
    view, at = memoryview(raw), length
    for tensor, name, size in sizes:
        tensor["data"] = _tensor(view[at : at + size], tensor, name)
        at += size
    return body


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
