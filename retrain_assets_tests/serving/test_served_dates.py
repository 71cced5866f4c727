"""Every row's date, in every form of request, checked against the days served (issue 38)."""

import datetime as dt
import json

import numpy as np
import pytest

from retrain_assets.features.served_features import HORIZON_DAYS, PUBLISHED_DAYS_SERVED
from retrain_assets.features.training_export import MODEL_FEATURES
from retrain_assets.serving.binary_tensors import decode_request
from retrain_assets.serving.history import HistoryCache, HistoryUnavailable, Publication
from retrain_assets.serving.inputs import (
    FeatureBatch,
    InvalidRequest,
    infer_request,
    rows_batch,
    v2_batch,
)
from retrain_assets.serving.key_lookup import date_problem, served_rows

LATEST = dt.date(2026, 4, 20)
PUBLICATION = Publication(LATEST, ((LATEST, "v1"),))
FIRST = LATEST - dt.timedelta(days=PUBLISHED_DAYS_SERVED - 1)
LAST = LATEST + dt.timedelta(days=HORIZON_DAYS)
DAY = dt.timedelta(days=1)
SERVED = f"days served: {FIRST} to {LAST}"


def test_the_days_served_are_the_last_published_week_up_to_the_horizon():
    served = (PUBLICATION.first_day, PUBLICATION.last_day)
    assert served == (dt.date(2026, 4, 14), dt.date(2026, 4, 27))
    for day in (FIRST, LATEST, LATEST + DAY, LAST):
        assert date_problem(PUBLICATION, day) is None, day
    assert date_problem(PUBLICATION, LAST + DAY) == (
        f"past the horizon: the furthest forecastable date is {LAST} "
        f"(7 days after the latest published day {LATEST}); {SERVED}"
    )
    assert date_problem(PUBLICATION, FIRST - DAY) == (
        f"before the days served: the earliest is {FIRST}; {SERVED}"
    )


def feature_rows(days: list[dt.date]) -> list[dict]:
    return [
        {"store_id": "S1", "item_id": f"I{i}", "date": day.isoformat()}
        | {name: float(i) for name in MODEL_FEATURES}
        for i, day in enumerate(days)
    ]


def json_batch(days: list[dt.date]) -> FeatureBatch:
    batch = rows_batch({"rows": feature_rows(days)}, 100)
    assert isinstance(batch, FeatureBatch)
    return batch


def v2_inputs(days: list[dt.date]) -> list[dict]:
    rows = feature_rows(days)
    names = [("store_id", "BYTES"), ("item_id", "BYTES"), ("date", "BYTES")]
    names += [(name, "FP64") for name in MODEL_FEATURES]
    return [
        {"name": name, "datatype": kind, "shape": [len(rows)], "data": [r[name] for r in rows]}
        for name, kind in names
    ]


def v2_json_batch(days: list[dt.date]) -> FeatureBatch:
    batch = v2_batch({"inputs": v2_inputs(days)}, 100).batch
    assert isinstance(batch, FeatureBatch)
    return batch


def v2_binary_batch(days: list[dt.date]) -> FeatureBatch:
    """Every tensor sent as binary data: BYTES as 4-byte lengths and text, features FP64."""
    header, parts = [], []
    for tensor in v2_inputs(days):
        values = tensor.pop("data")
        if tensor["datatype"] == "BYTES":
            texts = [str(v).encode() for v in values]
            data = b"".join(len(t).to_bytes(4, "little") + t for t in texts)
        else:
            data = np.array(values, "<f8").tobytes()
        header.append({**tensor, "parameters": {"binary_data_size": len(data)}})
        parts.append(data)
    head = json.dumps({"inputs": header}).encode()
    batch = infer_request(decode_request(head + b"".join(parts), str(len(head))), 100).batch
    assert isinstance(batch, FeatureBatch)
    return batch


FORMS = {
    "json": (json_batch, "rows[{i}].date"),
    "v2 json": (v2_json_batch, "inputs[date].data[{i}]"),
    "v2 binary": (v2_binary_batch, "inputs[date].data[{i}]"),
}


@pytest.mark.parametrize("form", FORMS)
def test_rows_with_every_feature_are_served_on_the_days_served_only(form):
    read, where = FORMS[form]
    served = [FIRST, LATEST, LATEST + DAY, LAST]
    assert served_rows(PUBLICATION, read(served)).dates == served  # a client's ordinary days

    with pytest.raises(InvalidRequest) as caught:
        served_rows(PUBLICATION, read([LATEST, LAST + DAY, FIRST - DAY, LATEST - 30 * DAY]))
    error = caught.value
    late = (
        f"past the horizon: the furthest forecastable date is {LAST} "
        f"(7 days after the latest published day {LATEST}); {SERVED}"
    )
    early = f"before the days served: the earliest is {FIRST}; {SERVED}"
    assert error.status == 422
    assert error.message == "; ".join(  # the served row 0 is not named
        [f"{where.format(i=1)}: {late}", *(f"{where.format(i=i)}: {early}" for i in (2, 3))]
    )


def test_the_days_served_are_said_unknown_until_a_day_is_published():
    cache = HistoryCache(lambda customer, publication: None, lambda customer: None, 1)
    with pytest.raises(HistoryUnavailable, match="feature_snapshots has not been read yet"):
        cache.current()
    cache.published(None)
    with pytest.raises(HistoryUnavailable, match="no day of store_day_features"):
        cache.current()
    cache.published(PUBLICATION)
    assert cache.current() is PUBLICATION
