"""Prediction intervals (issue 26, part 4): what they cost the trainer, how well they cover.

For each demo tenant (`demo/tenants.py`, simulated offline as `bench_hindsight.py` does), every
`--every` demo days from day `--first` to day `--days`: the policy's 90-day window ending that
day, its newest 7 days held out as the export does, trained as the GPU service trains
(`gpu/service/trainer.py`) once without and once with intervals (the RETRAIN_INTERVAL_*
defaults: levels 80 and 95, two rolling origins of 7 days). Reported per tenant:

- the training time without and with intervals (the refits are the extra cost);
- each level's coverage on the holdout, and the gate's coverage verdict there
  (`models/gate_coverage.py` with RETRAIN_INTERVAL_COVERAGE_TOLERANCE, 0.15 by default);
- each level's coverage on the 28 days after the window: the rows the model would serve.

    .venv/bin/python benchmarks/bench_intervals.py
    .venv/bin/python benchmarks/bench_intervals.py --tenants sakura-jp --every 7
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import lightgbm
import numpy as np
import pandas as pd

from retrain_assets.demo.feature_history import tenant_features
from retrain_assets.demo.tenants import DEFAULT_START, DEMO_TENANTS, TenantSpec
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import train
from retrain_assets.models.gate_coverage import judge_coverage
from retrain_assets.prediction_intervals import (
    IntervalRules,
    IntervalTable,
    bounds,
    coverage,
    coverage_tolerance,
)

WINDOW_DAYS = 90  # the policy's default window
HOLDOUT_DAYS = 7
AHEAD_DAYS = 28


@dataclass
class Window:
    """One training window's figures."""

    tenant: str
    last_day: dt.date
    seconds_plain: float
    seconds_intervals: float
    table: IntervalTable | None
    holdout: dict[str, float]  # level -> coverage on the holdout
    ahead: dict[str, float]  # level -> coverage on the next 28 days
    gate_passed: bool
    gate_reason: str


def judge_window(spec: TenantSpec, frame: pd.DataFrame, last: dt.date, folder: Path) -> Window:
    """Train one window twice (without, with intervals) and measure what the intervals do."""
    end = pd.Timestamp(last)
    window = frame[(frame["date"] > end - pd.Timedelta(days=WINDOW_DAYS)) & (frame["date"] <= end)]
    window = window[window[LABEL].notna()]
    cut = end - pd.Timedelta(days=HOLDOUT_DAYS)
    train_rows, holdout = window[window["date"] <= cut], window[window["date"] > cut]
    ahead = frame[
        (frame["date"] > end) & (frame["date"] <= end + pd.Timedelta(days=AHEAD_DAYS))
    ].dropna(subset=[LABEL])
    dataset = folder / "train.parquet"
    train_rows.reset_index(drop=True).to_parquet(dataset, index=False)
    base = {"customer": spec.name, "dataset_url": str(dataset), "features": MODEL_FEATURES}
    started = time.perf_counter()
    train(TrainingSpec.model_validate(base), folder / "plain")
    plain = time.perf_counter() - started
    started = time.perf_counter()
    intervals = IntervalRules.from_settings().as_spec()
    result = train(TrainingSpec.model_validate({**base, "intervals": intervals}), folder / "iv")
    with_intervals = time.perf_counter() - started
    table = IntervalTable.from_metrics(result.metrics)
    booster = lightgbm.Booster(model_file=str(result.model_path))

    def covered(rows: pd.DataFrame) -> dict[str, float]:
        if table is None or rows.empty:
            return {}
        forecast = np.asarray(booster.predict(rows[MODEL_FEATURES]), dtype=float)
        actual = rows[LABEL].to_numpy(dtype=float)
        return {
            name: coverage(actual, *bounds(forecast, width))
            for name, width in table.halfwidths.items()
        }

    holdout_forecast = np.asarray(booster.predict(holdout[MODEL_FEATURES]), dtype=float)
    gate = judge_coverage(
        holdout[LABEL].to_numpy(dtype=float), holdout_forecast, table, coverage_tolerance()
    )
    return Window(
        spec.name,
        last,
        plain,
        with_intervals,
        table,
        covered(holdout),
        covered(ahead),
        gate.passed,
        gate.reason,
    )


def summary(found: list[Window]) -> str:
    """Return the per-tenant table (means over the windows) and the failing windows."""
    lines = [
        "| tenant | windows | train s (no intervals) | train s (intervals) | extra | "
        "holdout 80 / 95 | next 28 days 80 / 95 | gate coverage fails |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(w.tenant for w in found):
        mine = [w for w in found if w.tenant == name]
        plain = float(np.mean([w.seconds_plain for w in mine]))
        extra = float(np.mean([w.seconds_intervals for w in mine]))

        def mean(part: str, level: str, rows: list[Window] = mine) -> str:
            values = [getattr(w, part)[level] for w in rows if level in getattr(w, part)]
            return f"{np.mean(values):.1%}" if values else "-"

        fails = sum(not w.gate_passed for w in mine)
        lines.append(
            f"| {name} | {len(mine)} | {plain:.2f} | {extra:.2f} | x{extra / plain:.2f} | "
            f"{mean('holdout', '80')} / {mean('holdout', '95')} | "
            f"{mean('ahead', '80')} / {mean('ahead', '95')} | {fails} |"
        )
    failing = [
        f"- {w.tenant} window to {w.last_day}: {w.gate_reason}" for w in found if not w.gate_passed
    ]
    return "\n".join([*lines, "", *(failing or ["- no window fails the gate's coverage"])])


def main(argv: list[str] | None = None) -> int:
    """Replay the windows and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=218, help="last demo day (default 218)")
    parser.add_argument("--first", type=int, default=100, help="first window's last day")
    parser.add_argument("--every", type=int, default=14, help="demo days between windows")
    parser.add_argument("--tenants", nargs="*", default=[t.name for t in DEMO_TENANTS])
    args = parser.parse_args(argv)
    started = time.perf_counter()
    found: list[Window] = []
    last_day = DEFAULT_START + dt.timedelta(days=args.days + AHEAD_DAYS)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in DEMO_TENANTS:
            if spec.name not in args.tenants:
                continue
            frame = tenant_features(spec, last_day)
            for offset in range(args.first, args.days + 1, args.every):
                day = DEFAULT_START + dt.timedelta(days=offset)
                folder = Path(tmp) / spec.name / str(offset)
                folder.mkdir(parents=True)
                window = judge_window(spec, frame, day, folder)
                found.append(window)
                print(
                    f"{spec.name:13} to {day}: {window.seconds_plain:.2f} s / "
                    f"{window.seconds_intervals:.2f} s, holdout "
                    + ", ".join(f"{k}: {v:.1%}" for k, v in window.holdout.items())
                    + ", next 28 days "
                    + ", ".join(f"{k}: {v:.1%}" for k, v in window.ahead.items()),
                    file=sys.stderr,
                )
    print(summary(found))
    load = os.getloadavg()[0]
    print(f"\n{len(found)} windows in {time.perf_counter() - started:.1f} s, load {load:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
