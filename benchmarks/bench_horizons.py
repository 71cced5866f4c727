"""Forecasts a week ahead (issue 39): WAPE and interval coverage by day ahead h = 1 .. 7.

Strategies (`horizon_strategies.py`), each trained on the 90 days up to a rolling origin and
forecasting origin + 1 .. + 7 with what the service knows at the origin:

- `as served`: the platform before issue 39 (`store_day_features-v1`, reproduced by
  `horizon_strategies.lag1_rolling`): trained on v1 rows, fed v1 features of the held days with
  future days' sales NaN, one interval width per level for every h (the trainer's method then:
  pooled errors of the 2 previous weekly origins' refits on full-information rows);
- `recursive`: the same model, each day's forecast fed back as the next day's sales;
- `lag-7 windows`: rolling means over the window ending at lag 7 (mlforecast's
  `lag_transforms={7: [RollingMean(7), RollingMean(28)]}`): the same features at every h; since
  issue 39 the platform's own `store_day_features` (v2) and `served_features`;
- `seasonal naive`: the same weekday last week;
- `mlforecast`: `MLForecast` + `LGBMRegressor` (the trainer's parameters), same lags, anchored
  means, weekday and covariates, its conformal intervals `PredictionIntervals(h=7, n_windows)`.

Our own strategies (all but `as served` and `mlforecast`) get split-conformal widths per h from
the errors at h of the previous `windows` weekly origins (the same refits, so no extra cost).
The number of windows, ours and mlforecast's `n_windows` apart, is chosen on the tuning seeds
(`--seeds tuning`: among WINDOW_CHOICES, the closest mean coverage to the levels), then fixed
(`CHOSEN_WINDOWS`) for the held-out seeds.
A scenario is one seed's tenants; figures pool its tenants and origins; min / median / max
across scenarios.

    .venv/bin/python benchmarks/bench_horizons.py --seeds held-out
    .venv/bin/python benchmarks/bench_horizons.py --seeds tuning
    .venv/bin/python benchmarks/bench_horizons.py --feature-cost 100000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from horizon_strategies import (
    HORIZON,
    Tenant,
    anchored,
    as_served,
    feature_cost,
    fit_booster,
    full_information,
    lag1_rolling,
    mlforecast_pipeline,
    recursive,
    seasonal_naive,
    training_rows,
)

from retrain_assets.demo.scenarios import HELD_OUT_SEEDS, TUNING_SEEDS, scenario_tenants
from retrain_assets.demo.simulate import simulated_sales
from retrain_assets.demo.tenants import DEFAULT_START, TenantSpec
from retrain_assets.features.feature_math import store_day_features
from retrain_assets.prediction_intervals import conformal_halfwidth, coverage

LEVELS = (80, 95)
FIRST_EVAL_DAY = 166  # demo day of the first judged origin: room for 6 calibration origins
WINDOW_CHOICES = (2, 3, 4, 6)
# Chosen by `--seeds tuning` (BENCHMARKS.md, "Forecasts a week ahead"): ours, mlforecast's.
CHOSEN_WINDOWS = (3, 6)
PER_H = ("recursive", "lag-7 windows", "seasonal naive")
AS_SERVED_WINDOWS = 2  # the trainer's windows before issue 39 (its default is 3 since)
SHOWN = ("as served", "recursive", "lag-7 windows", "seasonal naive", "mlforecast")


def bench_scenarios(seeds: Sequence[int]) -> list[tuple[TenantSpec, ...]]:
    """Return one scenario (a tuple of tenants) per seed, from the seeded scenario generator."""
    return [scenario_tenants(seed) for seed in seeds]


def load_tenant(spec: TenantSpec, last: dt.date) -> Tenant:
    """Simulate the tenant to `last` and compute its features once."""
    days = [DEFAULT_START + dt.timedelta(days=i) for i in range((last - DEFAULT_START).days + 1)]
    sales = simulated_sales(spec, days)
    full = store_day_features(sales, days, {spec.name: spec.country})
    full = full.astype({"is_holiday": "int8", "on_promo": "int8"})  # as exported
    return Tenant(spec.name, spec.country, sales, full, lag1_rolling(full))


def _day(offset: int) -> dt.date:
    return DEFAULT_START + dt.timedelta(days=offset)


def _with_actuals(frame: pd.DataFrame, tenant: Tenant, origin: dt.date) -> pd.DataFrame:
    frame = frame.assign(date=pd.Timestamp(origin) + pd.to_timedelta(frame["h"], unit="D"))
    actual = tenant.full[["store_id", "item_id", "date", "units_sold"]]
    frame = frame.merge(actual, on=["store_id", "item_id", "date"], how="left")
    return frame.rename(columns={"units_sold": "actual"}).assign(
        tenant=tenant.name, origin=pd.Timestamp(origin)
    )


def tenant_forecasts(tenant: Tenant, origins: list[dt.date]) -> pd.DataFrame:
    """Return every strategy's forecasts at `origins`, but mlforecast's."""
    parts = []
    for origin in origins:
        model = fit_booster(training_rows(tenant.legacy, origin))
        lag7_model = fit_booster(training_rows(tenant.full, origin))
        for frame in (
            as_served(tenant, model, origin),
            recursive(tenant, model, origin),
            full_information(tenant, model, origin),
            anchored(tenant, lag7_model, origin),
            seasonal_naive(tenant, origin),
        ):
            parts.append(_with_actuals(frame, tenant, origin))
    return pd.concat(parts, ignore_index=True)


def _unscaled(forecast: np.ndarray) -> np.ndarray:
    return np.ones_like(forecast)


def _sqrt_scale(forecast: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(forecast, 0.0) + 1.0)


def _linear_scale(forecast: np.ndarray) -> np.ndarray:
    return np.maximum(forecast, 0.0) + 1.0


# Normalized split conformal (scores |error| / scale(forecast), width = quantile x the row's
# scale; MAPIE's GammaConformityScore is the linear one without the + 1): a store selling 2 a
# day and one selling 50 get widths of their own from one customer's pooled scores. Measured
# beside the platform's absolute widths on the lag-7 windows; `--scaled` picks one for them all.
SCALES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "absolute": _unscaled,
    "sqrt": _sqrt_scale,
    "linear": _linear_scale,
}
SCALED_STRATEGY = "lag-7 windows"


def add_bounds(
    frame: pd.DataFrame, judged: list[dt.date], windows: int, scales: Sequence[str] = ()
) -> pd.DataFrame:
    """Return the judged origins' rows with each level's bounds (mlforecast's are its own).

    Per-h strategies: the h errors of the `windows` previous origins. `as served`: one width for
    every h, from the full-information errors of the trainer's default number of windows.
    `scales`: the lag-7 windows again, as `lag-7 windows, <scale>`, with normalized widths.
    """
    out = []
    for (tenant, strategy), rows in frame.groupby(["tenant", "strategy"], sort=False):
        if strategy == "full information":
            continue
        mine = rows[rows["origin"].isin(pd.to_datetime(judged))].copy()
        if strategy == "mlforecast":
            out.append(mine)
            continue
        pooled = strategy == "as served"
        source = frame[(frame["tenant"] == tenant) & (frame["strategy"] == "full information")]
        variants = [("", _unscaled)] + [
            (f"{strategy}, {name}", SCALES[name]) for name in scales if strategy == SCALED_STRATEGY
        ]
        for name, scale in variants:
            bounded = mine.copy() if name else mine
            for origin in pd.to_datetime(judged):
                at = (bounded["origin"] == origin).to_numpy()
                scores = _scores(source if pooled else rows, origin, windows, pooled, scale)
                forecast = bounded.loc[at, "forecast"].to_numpy(dtype=float)
                for level in LEVELS:
                    unit = np.array([_width(scores[h], level) for h in bounded.loc[at, "h"]])
                    width = unit * scale(forecast)
                    bounded.loc[at, f"lower_{level}"] = np.maximum(forecast - width, 0.0)
                    bounded.loc[at, f"upper_{level}"] = forecast + width
            out.append(bounded.assign(strategy=name) if name else bounded)
    return pd.concat(out, ignore_index=True)


def _scores(
    rows: pd.DataFrame,
    origin: pd.Timestamp,
    windows: int,
    pooled: bool,
    scale: Callable[[np.ndarray], np.ndarray] = _unscaled,
) -> dict[int, np.ndarray]:
    """Return each h's conformity scores before `origin` (pooled: every h's, as today)."""
    count = AS_SERVED_WINDOWS if pooled else windows
    earlier = rows[
        (rows["origin"] < origin) & (rows["origin"] >= origin - pd.Timedelta(days=7 * count))
    ]
    if pooled:
        return dict.fromkeys(range(1, HORIZON + 1), _errors(earlier))

    def scored(part: pd.DataFrame) -> np.ndarray:
        return _errors(part) / scale(part["forecast"].to_numpy(dtype=float))

    return {h: scored(earlier[earlier["h"] == h]) for h in range(1, HORIZON + 1)}


def _width(scores: np.ndarray, level: int) -> float:
    width = conformal_halfwidth(scores, level)
    return np.nan if width is None else width


def _errors(rows: pd.DataFrame) -> np.ndarray:
    return np.abs(rows["actual"].to_numpy(dtype=float) - rows["forecast"].to_numpy(dtype=float))


def scenario_figures(bounded: pd.DataFrame) -> pd.DataFrame:
    """Return WAPE and coverage per (scenario, strategy, h), tenants and origins pooled."""
    records = []
    for (scenario, strategy, h), rows in bounded.groupby(["scenario", "strategy", "h"]):
        actual = rows["actual"].to_numpy(dtype=float)
        record = {
            "scenario": scenario,
            "strategy": strategy,
            "h": int(h),
            "wape": float(_errors(rows).sum() / actual.sum()),
        }
        for level in LEVELS:
            record[f"cov_{level}"] = coverage(
                actual, rows[f"lower_{level}"].to_numpy(), rows[f"upper_{level}"].to_numpy()
            )
        records.append(record)
    return pd.DataFrame(records)


def table(figures: pd.DataFrame, scales: Sequence[str] = ()) -> str:
    """Return the markdown table: min / median / max across scenarios, per strategy and h."""

    def spread(values: pd.Series, percent: bool) -> str:
        parts = [values.min(), values.median(), values.max()]
        return " / ".join(f"{v:.1%}" if percent else f"{v:.3f}" for v in parts)

    lines = [
        "| strategy | h | WAPE min / median / max | 80 % coverage | 95 % coverage |",
        "|---|---:|---|---|---|",
    ]
    for strategy in (*SHOWN, *(f"{SCALED_STRATEGY}, {name}" for name in scales)):
        for h in range(1, HORIZON + 1):
            rows = figures[(figures["strategy"] == strategy) & (figures["h"] == h)]
            if rows.empty:
                continue
            lines.append(
                f"| {strategy} | {h} | {spread(rows['wape'], False)} | "
                f"{spread(rows['cov_80'], True)} | {spread(rows['cov_95'], True)} |"
            )
    return "\n".join(lines)


def choose_windows(
    forecasts: pd.DataFrame, judged: list[dt.date], strategies: Sequence[str]
) -> tuple[int, str]:
    """Return the window count whose intervals of `strategies` cover closest to their levels.

    `forecasts` holds mlforecast's rows of every candidate count, told apart by `windows`.
    """
    gaps = {}
    for windows in WINDOW_CHOICES:
        rows = forecasts[forecasts["windows"].isna() | (forecasts["windows"] == windows)]
        figures = scenario_figures(add_bounds(rows, judged, windows))
        figures = figures[figures["strategy"].isin(strategies)]
        gaps[windows] = float(
            np.mean([(figures[f"cov_{lv}"] - lv / 100).abs().mean() for lv in LEVELS])
        )
    best = min(gaps, key=lambda w: gaps[w])
    return best, ", ".join(f"{w}: {g:.2%}" for w, g in gaps.items())


def _tenant_frames(
    job: tuple[int, TenantSpec, list[dt.date], list[dt.date], Sequence[int], dt.date],
) -> tuple[list[pd.DataFrame], float]:
    """Return one tenant's forecasts by every strategy (a worker process's share) and its time."""
    seed, spec, origins, judged, counts, last = job
    started = time.perf_counter()
    tenant = load_tenant(spec, last)
    frames = [tenant_forecasts(tenant, origins).assign(scenario=seed)]
    for count in counts:
        for origin in judged:
            frame = mlforecast_pipeline(tenant, origin, count, LEVELS)
            frame = _with_actuals(frame, tenant, origin)
            frames.append(frame.assign(scenario=seed, windows=count))
    return frames, time.perf_counter() - started


def run(
    seeds: Sequence[int],
    judged_count: int,
    windows: tuple[int, int] | None,
    log: Callable[[str], None],
    scales: Sequence[str] = (),
) -> tuple[pd.DataFrame, tuple[int, int], str]:
    """Run every scenario; return the bounded forecasts, (our, mlforecast's) windows and why.

    `windows` None: choose both counts among WINDOW_CHOICES (the tuning run).
    """
    judged = [_day(FIRST_EVAL_DAY + 7 * i) for i in range(judged_count)]
    ours = max(WINDOW_CHOICES) if windows is None else windows[0]
    calibration = max(ours, AS_SERVED_WINDOWS)
    origins = [_day(FIRST_EVAL_DAY - 7 * back) for back in range(calibration, 0, -1)] + judged
    last = judged[-1] + dt.timedelta(days=HORIZON)
    counts = WINDOW_CHOICES if windows is None else windows[1:]
    work = [
        (seed, spec, origins, judged, counts, last)
        for seed, specs in zip(seeds, bench_scenarios(seeds), strict=True)
        for spec in specs
    ]
    frames = []
    # one tenant a process, as many as the machine has cores: the tenants are independent
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for (seed, spec, *_), (mine, seconds) in zip(
            work, pool.map(_tenant_frames, work), strict=True
        ):
            frames.extend(mine)
            log(f"seed {seed} {spec.name}: {seconds:.1f} s")
    forecasts = pd.concat(frames, ignore_index=True)
    if windows is None:
        mine, why_mine = choose_windows(forecasts, judged, PER_H)
        theirs, why_theirs = choose_windows(forecasts, judged, ("mlforecast",))
        windows = (mine, theirs)
        note = f"chosen by mean |coverage - level|: ours {why_mine}; mlforecast's {why_theirs}"
        forecasts = forecasts[forecasts["windows"].isna() | (forecasts["windows"] == theirs)]
    else:
        note = "fixed before the run"
    return add_bounds(forecasts, judged, windows[0], scales), windows, note


def main(argv: list[str] | None = None) -> int:
    """Run the chosen seeds and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", choices=["tuning", "held-out"], default="held-out")
    parser.add_argument("--origins", type=int, default=4, help="judged weekly origins (4)")
    parser.add_argument(
        "--feature-cost", type=int, metavar="SERIES", help="only time one feature day"
    )
    parser.add_argument("--seed-list", type=int, nargs="*", help="other seeds (development)")
    parser.add_argument(
        "--windows",
        type=int,
        nargs=2,
        help="calibration windows, ours and mlforecast's (held-out default: CHOSEN_WINDOWS)",
    )
    parser.add_argument(
        "--scales",
        nargs="*",
        choices=[name for name in SCALES if name != "absolute"],
        default=[],
        help="the lag-7 windows again with normalized conformal widths (docs: SCALES)",
    )
    args = parser.parse_args(argv)
    if args.feature_cost:
        costs = feature_cost(args.feature_cost)
        print(", ".join(f"{name} {s:.2f} s" for name, s in costs.items()))
        return 0
    started = time.perf_counter()
    seeds = TUNING_SEEDS if args.seeds == "tuning" else HELD_OUT_SEEDS
    seeds = tuple(args.seed_list) if args.seed_list else seeds
    windows = (args.windows[0], args.windows[1]) if args.windows else None
    if windows is None and args.seeds == "held-out":
        windows = CHOSEN_WINDOWS
    bounded, used, note = run(
        seeds, args.origins, windows, lambda s: print(s, file=sys.stderr), args.scales
    )
    source = "scenarios.scenario_tenants"
    print(f"{args.seeds} seeds {tuple(seeds)} ({source}); {args.origins} origins from demo day")
    print(f"{FIRST_EVAL_DAY}, weekly; calibration windows ours / mlforecast's {used}: {note}\n")
    print(table(scenario_figures(bounded), args.scales))
    load = os.getloadavg()[0]
    print(f"\n{time.perf_counter() - started:.1f} s wall, load {load:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
