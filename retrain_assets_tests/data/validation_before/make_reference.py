"""Save the original validator's outputs on shuffled landing files with truthful faults.

Run once, before the validator was rewritten, from the repository root:

    PYTHONPATH=$PWD .venv/bin/python retrain_assets_tests/data/validation_before/make_reference.py
"""

import datetime as dt
import json
from pathlib import Path

import pandas as pd

from retrain_assets.demo.faults import TRUTHFUL_BEFORE, with_faults
from retrain_assets.demo.simulate import simulate_day
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.feature_math import store_day_features
from retrain_assets.features.validation import validate_file

HERE = Path(__file__).parent
SPEC = TenantSpec("acme", "US", stores=4, items=150, seed=7)
DAYS = [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(8)]


def main() -> None:
    accepted, quarantined = [], []
    for day in DAYS:
        text = with_faults(simulate_day(SPEC, day), 0.15, TRUTHFUL_BEFORE, day.toordinal(), True)
        (HERE / f"{day}.csv").write_text(text)
        outcome = validate_file(text, SPEC.name, day, f"acme/{day}.csv")
        assert not outcome.problems, outcome.problems
        accepted.append(outcome.accepted)
        quarantined += [
            {"day": str(day), "line": q.line, "reason": q.reason, "raw": q.raw}
            for q in outcome.quarantined
        ]
    sales = pd.concat(accepted, ignore_index=True)
    sales.to_parquet(HERE / "accepted.parquet")
    (HERE / "quarantined.jsonl").write_text("".join(json.dumps(q) + "\n" for q in quarantined))
    features = store_day_features(sales, [DAYS[-1]], {SPEC.name: SPEC.country})
    features.to_parquet(HERE / "features.parquet")
    print(len(sales), "accepted;", len(quarantined), "quarantined")


if __name__ == "__main__":
    main()
