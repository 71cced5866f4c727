"""The data side's outputs are exactly those of the code before the backfill speed-up.

`golden/feature_outputs.json` was written by `feature_outputs.py` run against the code before
the change (main at 0d8c2ed): a shuffled input with bad rows of every kind, a missing file and
a non-UTF-8 file, run as one range and then as one day. Rewritten for `store_day_features-v2`
(issue 39: rolling means ending at lag 7, a 34-day look-back); only the feature partitions'
hashes, data versions, snapshots and look-back metadata changed.
"""

import json
from pathlib import Path

import pytest

from retrain_assets_tests.features.feature_outputs import feature_outputs

GOLDEN = Path(__file__).parent / "golden" / "feature_outputs.json"


def test_feature_outputs_match_the_golden_outputs(
    tmp_path, pg_server, app_db, dagster_db, monkeypatch
):
    for name in ("RETRAIN_LANDING_URL", "RETRAIN_STORAGE_URL", "RETRAIN_APP_PG_URL"):
        monkeypatch.setenv(name, "")  # feature_outputs sets them; monkeypatch puts them back
    outputs = json.loads(json.dumps(feature_outputs(tmp_path, pg_server), sort_keys=True))
    golden = json.loads(GOLDEN.read_text())
    assert outputs.keys() == golden.keys()
    for part, expected in golden.items():
        assert outputs[part] == expected, part
    assert any(q[4].startswith("duplicate of line") for q in golden["quarantined_rows"])
    assert any(p[3] == "error" for p in golden["file_problems"])
    assert pytest.approx(0) != len(golden["partitions"])
