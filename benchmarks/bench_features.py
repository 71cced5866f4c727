"""Benchmark `store_day_features` for one daily partition at a given fleet size.

Builds a synthetic typed sales frame (the layout `validation.empty_sales()` describes) holding
day D and the 28 days before it for customers x stores x items series, then times the feature
computation alone (median of `--repeat` runs), measures its tracemalloc peak in a separate run,
and reports the process max RSS.

    .venv/bin/python benchmarks/bench_features.py
    .venv/bin/python benchmarks/bench_features.py --customers 10 --stores 5 --items 20 --repeat 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import platform
import resource
import statistics
import time
import tracemalloc

import numpy as np
import pandas as pd

from retrain_assets.features.feature_math import LAGS, store_day_features
from retrain_assets.features.validation import SALES_COLUMNS, empty_sales

DAY = dt.date(2026, 7, 3)  # a US public holiday (Independence Day observed), not in DE or JP
COUNTRIES = ("US", "DE", "JP")


def build_sales(
    customers: int, stores: int, items: int, day: dt.date, seed: int = 0
) -> tuple[pd.DataFrame, dict[str, str | None]]:
    """Return a typed sales frame for `day` and the `max(LAGS)` days before it, and countries.

    Rows come day by day (as partitions are read), each day holding every
    (customer, store_id, item_id) series; customers' countries cycle through US, DE and JP.
    """
    rng = np.random.default_rng(seed)
    history = max(LAGS)
    dates = pd.date_range(pd.Timestamp(day) - pd.Timedelta(days=history), periods=history + 1)
    names = np.array([f"cust-{c:03d}" for c in range(customers)], dtype=object)
    store_names = np.array([f"S{s + 1:03d}" for s in range(stores)], dtype=object)
    item_names = np.array([f"I{i + 1:04d}" for i in range(items)], dtype=object)
    per_day = customers * stores * items
    rows = per_day * len(dates)
    series = np.arange(rows) % per_day
    sales = pd.DataFrame(
        {
            "customer": names[series // (stores * items)],
            "date": np.repeat(dates.to_numpy(), per_day),
            "store_id": store_names[(series // items) % stores],
            "item_id": item_names[series % items],
            "units_sold": rng.poisson(4.0, rows).astype("int64"),
            "price": np.round(rng.uniform(1.5, 25.0, rows), 2),
            "on_promo": rng.random(rows) < 0.1,
            "stock_on_hand": rng.integers(0, 40, rows).astype("int64"),
        }
    )[SALES_COLUMNS]
    expected = empty_sales().dtypes
    assert (sales.dtypes == expected).all(), f"dtypes differ:\n{sales.dtypes}\n{expected}"
    countries: dict[str, str | None] = {
        name: COUNTRIES[i % len(COUNTRIES)] for i, name in enumerate(names)
    }
    return sales, countries


def _max_rss_mib() -> float:
    """Return the process's max resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    """Parse flags, run the benchmark and print the results table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    sales, countries = build_sales(args.customers, args.stores, args.items, DAY)
    build_s = time.perf_counter() - start
    rss_after_build = _max_rss_mib()
    input_mib = sales.memory_usage(deep=True).sum() / 2**20

    times = []
    out = None
    for _ in range(args.repeat):
        del out
        gc.collect()
        start = time.perf_counter()
        out = store_day_features(sales, [DAY], countries)
        times.append(time.perf_counter() - start)
    series = args.customers * args.stores * args.items
    assert len(out) == series, (len(out), series)
    del out
    gc.collect()

    tracemalloc.start()
    store_day_features(sales, [DAY], countries)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_end = _max_rss_mib()

    print(
        f"store_day_features, one partition ({DAY}): {args.customers} customers x "
        f"{args.stores} stores x {args.items} items = {series:,} series, "
        f"{len(sales):,} input rows ({input_mib:,.0f} MiB deep)"
    )
    print(f"python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    table = [
        ("build input (once)", f"{build_s:.2f} s"),
        (f"features, median of {args.repeat}", f"{statistics.median(times):.2f} s"),
        ("features, all runs", ", ".join(f"{t:.2f}" for t in times) + " s"),
        ("features, tracemalloc peak", f"{peak / 2**20:,.0f} MiB"),
        ("process max RSS after build", f"{rss_after_build:,.0f} MiB"),
        ("process max RSS at end", f"{rss_end:,.0f} MiB"),
    ]
    width = max(len(name) for name, _ in table)
    print(f"| {'measure':<{width}} | value")
    print(f"|{'-' * (width + 2)}|{'-' * 24}")
    for name, value in table:
        print(f"| {name:<{width}} | {value}")


if __name__ == "__main__":
    main()
