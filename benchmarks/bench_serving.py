"""Benchmark the prediction service: latency and throughput next to the model called in-process.

Setup (not timed): the embedded PostgreSQL in a temporary RETRAIN_HOME (or RETRAIN_PG_URL,
with databases of a fresh prefix), a migrated project database, a real `mlflow server`, one
LightGBM model of the size training makes (200 rounds, 31 leaves, the nine MODEL_FEATURES)
registered as version 1 of customer `bench` (and, with --canary, a version 2 at 50 %), its
`serving_routes` row, and the real `retrain-assets serve` process on loopback.

Measured per batch size (default 1, 100 and 1,000 rows a request):
- in-process: the service's own model call (`Forecaster.predict` on the feature matrix), and
  LightGBM's `Booster.predict` on a pandas frame, as a caller would do it;
- in-process with the log: `Predictor.forecast` (route, predict, log rows, COPY and commit)
  with the real log writer on the same database, i.e. the service's work without HTTP;
- one client, sequential requests on one keep-alive connection: latency p50 / p99, rows/s;
- C concurrent clients: requests/s and rows/s (where group commit of the log pays off).
Every request is a real prediction, logged and committed before its answer. Each measurement
stops at its request count or its time limit, whichever comes first; the script then checks
that `prediction_log` holds every row it was answered for.

With --by-key (issue 24), requests name only store, item and date: the customer has 35 days
of published `store_day_features` (2,000 series, written and recorded as the asset does) and
the service computes the features. Measured per size (default 1, 100, 1,000, 10,000 rows):
the key-only request (p50 / p99, rows/s), the same rows with every feature sent, the model
called in-process, and the lookup alone in-process (`features_by_key`); then the memory of
1,000 customers' feature tables held (100 series each: the tables' own count of bytes, and
the process's resident memory before and after).

    .venv/bin/python benchmarks/bench_serving.py
    .venv/bin/python benchmarks/bench_serving.py --sizes 1,100 --requests 300 --clients 4
    .venv/bin/python benchmarks/bench_serving.py --by-key

With --intervals (issue 26, part 4) the models carry prediction intervals and the service
answers lower/upper at 80 and 95 and logs them; without it the service serves no levels
(RETRAIN_INTERVAL_LEVELS=none), as before intervals existed.

    .venv/bin/python benchmarks/bench_serving.py --intervals
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import gc
import json
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import requests

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the service helpers live in the test package
    sys.path.insert(0, str(ROOT))

from retrain_assets.demo.tenants import TenantSpec  # noqa: E402
from retrain_assets.features.parquet_store import ParquetPartitionStore  # noqa: E402
from retrain_assets.features.training_export import MODEL_FEATURES  # noqa: E402
from retrain_assets.prediction_intervals import METADATA_KEY, IntervalTable  # noqa: E402
from retrain_assets.registry.mlflow_registry import MlflowRegistry  # noqa: E402
from retrain_assets.serving.forecaster import Forecaster  # noqa: E402
from retrain_assets.serving.history import (  # noqa: E402
    HistoryCache,
    ParquetHistory,
    build_features,
)
from retrain_assets.serving.inputs import rows_batch  # noqa: E402
from retrain_assets.serving.key_lookup import features_by_key  # noqa: E402
from retrain_assets.serving.prediction_log import PredictionLogWriter  # noqa: E402
from retrain_assets.serving.predictor import Predictor  # noqa: E402
from retrain_assets.serving.routes import Route, RouteTable  # noqa: E402
from retrain_assets.store.database import transaction  # noqa: E402
from retrain_assets.store.migrations import migrate  # noqa: E402
from retrain_assets.store.server import ensure_database, start_server  # noqa: E402
from retrain_assets_tests.serving.models import feature_frame, train  # noqa: E402
from retrain_assets_tests.serving.published import LATEST, publish  # noqa: E402
from retrain_assets_tests.serving.serving_process import TOKEN, ServingProcess  # noqa: E402
from retrain_assets_tests.support.mlflow_server import running_mlflow  # noqa: E402

CUSTOMER = "bench"


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (0..100) of `values`, in milliseconds."""
    return float(np.percentile(np.array(values) * 1000.0, q))


def rows_body(size: int, start: int) -> bytes:
    """Return a JSON-route body of `size` rows with fresh request keys from `start` on."""
    frame = feature_frame(size, seed=start % 1000)
    rows = [
        {
            "store_id": f"S{(start + i) // 1000}",
            "item_id": f"I{(start + i) % 1000}",
            "date": LATEST.isoformat(),  # a day served: the published day (`measure`)
            **record,
        }
        for i, record in enumerate(frame.to_dict("records"))
    ]
    return json.dumps({"rows": rows}).encode()


def timed_calls(call: Callable[[], None], count: int, limit: float) -> list[float]:
    """Call `call` up to `count` times or for `limit` seconds; return each duration."""
    times: list[float] = []
    deadline = time.monotonic() + limit
    while len(times) < count and time.monotonic() < deadline:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


class Sender:
    """Posts prepared bodies over one keep-alive connection; counts answered rows."""

    def __init__(self, url: str, bodies: list[bytes], size: int) -> None:
        self.session = requests.Session()
        self.session.headers.update(
            {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        )
        self.url, self.bodies, self.size = url, bodies, size
        self.sent = 0

    def __call__(self) -> None:
        body = self.bodies[self.sent % len(self.bodies)]
        response = self.session.post(self.url, data=body, timeout=60)
        if response.status_code != 200:
            raise RuntimeError(f"service answered {response.status_code}: {response.text[:300]}")
        self.sent += 1


def in_process(forecaster: Forecaster, size: int, count: int, limit: float) -> dict[str, float]:
    frame = feature_frame(size, seed=5)
    matrix = frame[MODEL_FEATURES].to_numpy(dtype="float64")
    service_call = timed_calls(lambda: forecaster.predict(matrix), count, limit)
    booster_call = timed_calls(lambda: forecaster.booster.predict(frame), count, limit)
    return {
        "p50": percentile(service_call, 50),
        "p99": percentile(service_call, 99),
        "pandas_p50": percentile(booster_call, 50),
        "rows_per_s": size / statistics.fmean(service_call),
    }


def in_process_logged(
    forecaster: Forecaster, app_db: str, size: int, count: int, limit: float, key_base: int
) -> dict[str, float]:
    """Time the service's work without HTTP: route, predict, log and commit (`Predictor`)."""
    table = RouteTable()
    table.put(Route(CUSTOMER, forecaster.version, None, 0.0, None, None, dt.datetime.now(dt.UTC)))
    table.loaded = True
    writer = PredictionLogWriter(app_db)
    writer.start()
    try:
        predictor = Predictor(
            table, lambda customer, version: forecaster, writer, levels=LEVELS if INTERVALS else ()
        )
        batch = rows_batch(json.loads(rows_body(size, key_base)), size)
        times = timed_calls(lambda: predictor.forecast(CUSTOMER, batch), count, limit)
    finally:
        writer.close()
    return {"p50": percentile(times, 50), "rows": size * len(times)}


def sequential(url: str, size: int, count: int, limit: float, key_base: int) -> dict[str, float]:
    bodies = [rows_body(size, key_base + n * size) for n in range(min(count, 50))]
    sender = Sender(url, bodies, size)
    sender()  # warm the connection and the model
    times = timed_calls(sender, count, limit)
    return {
        "requests": len(times),
        "p50": percentile(times, 50),
        "p99": percentile(times, 99),
        "rows_per_s": size * len(times) / sum(times),
        "rows": size * (len(times) + 1),
    }


def concurrent(
    url: str, size: int, clients: int, count: int, limit: float, key_base: int
) -> dict[str, float]:
    senders = [
        Sender(url, [rows_body(size, key_base + (c * 50 + n) * size) for n in range(10)], size)
        for c in range(clients)
    ]
    errors: list[str] = []

    def run(sender: Sender) -> None:
        deadline = time.monotonic() + limit
        try:
            while sender.sent < count // clients and time.monotonic() < deadline:
                sender()
        except Exception as error:  # reported below: a failed request fails the benchmark
            errors.append(str(error))

    threads = [threading.Thread(target=run, args=(s,)) for s in senders]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed: {errors[0]}")
    done = sum(s.sent for s in senders)
    return {
        "requests": done,
        "requests_per_s": done / elapsed,
        "rows_per_s": done * size / elapsed,
        "rows": done * size,
    }


KEY_SPEC = TenantSpec(CUSTOMER, "US", stores=20, items=100, seed=3)
SMALL_SPEC = TenantSpec("small", "US", stores=5, items=20, seed=4)


def key_rows(table, size: int) -> list[dict]:
    """Return `size` key-only rows: the table's future (store, item, day) keys, in order."""
    latest = table.publication.latest.isoformat()
    keys = [k for k in table.index if k.rsplit("/", 1)[1] > latest][:size]
    return [dict(zip(("store_id", "item_id", "date"), k.split("/"), strict=True)) for k in keys]


def by_key(
    service: ServingProcess, table, forecaster: Forecaster, sizes: list[int], args
) -> tuple[str, int]:
    """Key-only requests beside features sent, the model and the lookup in-process."""
    url = f"{service.url}/forecast/{CUSTOMER}"
    lines = [
        "| rows/request | by key p50 / p99 ms | by key rows/s | features sent p50 / p99 ms "
        "| features sent rows/s | model in-process p50 ms | lookup in-process p50 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    answered = 0
    for size in sizes:
        count = max(30, args.requests // round(size**0.5))
        rows = key_rows(table, size)
        assert len(rows) == size, f"the table has {len(rows)} future keys, not {size}"
        keyed = rows_batch({"rows": rows}, size)
        lookup = timed_calls(lambda keyed=keyed: features_by_key(table, keyed), count, 30)
        batch = features_by_key(table, keyed)
        full = [
            {
                **row,
                **{
                    n: (None if np.isnan(v) else float(v))
                    for n, v in zip(MODEL_FEATURES, batch.features[i], strict=True)
                },
            }
            for i, row in enumerate(rows)
        ]
        model = timed_calls(lambda b=batch: forecaster.predict(b.features), count, 30)
        results = {}
        for name, body in (("key", rows), ("features", full)):
            sender = Sender(url, [json.dumps({"rows": body}).encode()], size)
            sender()
            times = timed_calls(sender, count, args.seconds)
            answered += size * (len(times) + 1)
            results[name] = (
                percentile(times, 50),
                percentile(times, 99),
                size * len(times) / sum(times),
            )
        k, f = results["key"], results["features"]
        lines.append(
            f"| {size:,} | {k[0]:.2f} / {k[1]:.2f} | {k[2]:,.0f} | {f[0]:.2f} / {f[1]:.2f} "
            f"| {f[2]:,.0f} | {percentile(model, 50):.3f} | {percentile(lookup, 50):.3f} |"
        )
        print(lines[-1], flush=True)
    return "\n".join(lines), answered


def history_memory(storage: ParquetPartitionStore, customers: int) -> str:
    """Hold `customers` feature tables of SMALL_SPEC's size; report their bytes and the RSS."""
    publication, _ = publish(storage, SMALL_SPEC)
    history = ParquetHistory(storage)(SMALL_SPEC.name, publication)
    cache = HistoryCache(lambda c, p: history, lambda c: "US", max_bytes=2**40)
    cache.published(publication)
    gc.collect()
    before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    for n in range(customers):
        cache.get(f"c{n:05d}")
    elapsed = time.perf_counter() - started
    gc.collect()
    after = psutil.Process().memory_info().rss
    one = cache.get("c00000")
    return (
        f"{customers:,} customers x {SMALL_SPEC.stores * SMALL_SPEC.items} series "
        f"({len(one.index):,} served (store, item, day) rows each): tables count "
        f"{cache.held_bytes() / 2**20:.1f} MiB ({one.nbytes / 1024:.0f} KiB each); process RSS "
        f"+{(after - before) / 2**20:.1f} MiB; built in {elapsed:.1f} s "
        f"({elapsed / customers * 1000:.1f} ms a customer)"
    )


def register(registry: MlflowRegistry, booster, example: pd.DataFrame) -> str:
    run_key = uuid.uuid4().hex[:16]
    run_id = registry.candidate_run(CUSTOMER, run_key)
    metadata = {METADATA_KEY: WIDTHS.as_metadata()} if INTERVALS else None
    registry.log_candidate(run_id, booster, {"holdout_wape": 0.1}, example, None, metadata)
    return registry.register(CUSTOMER, run_key, run_id)


INTERVALS = False  # --intervals: the models carry WIDTHS and the service answers LEVELS
LEVELS = (80.0, 95.0)
WIDTHS = IntervalTable({"80": 3.0, "95": 7.5}, windows=2, scores=1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1,100,1000", help="rows per request")
    parser.add_argument("--requests", type=int, default=1000, help="at most, per measurement")
    parser.add_argument("--seconds", type=float, default=30.0, help="at most, per measurement")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--canary", action="store_true", help="a canary at 50 %% (shadowed)")
    parser.add_argument("--by-key", action="store_true", help="requests by key (issue 24)")
    parser.add_argument("--customers", type=int, default=1000, help="--by-key: tables held")
    parser.add_argument(
        "--intervals",
        action="store_true",
        help="models carry prediction intervals, answered at 80 and 95 (default: none served)",
    )
    args = parser.parse_args()
    global INTERVALS
    INTERVALS = args.intervals
    if args.by_key and args.sizes == parser.get_default("sizes"):
        args.sizes = "1,100,1000,10000"
    sizes = [int(s) for s in args.sizes.split(",")]

    home = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    # Registered first, so it runs last: after pgserver has stopped the embedded server.
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRAIN_HOME", str(home))
        patch.setenv("RETRAIN_DB_PREFIX", f"bench{uuid.uuid4().hex[:8]}_")
        server = start_server(home)
        app_db = ensure_database(server, "app")
        migrate(app_db)
        (home / "mlflow").mkdir()
        with running_mlflow(server, home / "mlflow") as mlflow_uri:
            print(f"mlflow at {mlflow_uri}; training and registering the model(s)", flush=True)
            registry = MlflowRegistry(mlflow_uri)
            champion = train(1.0, 0.0, rounds=200, leaves=31, rows=20_000)
            example = feature_frame(5)
            version = register(registry, champion, example)
            canary = None
            if args.canary:
                canary = register(
                    registry, train(2.0, 10.0, rounds=200, leaves=31, rows=20_000), example
                )
            with transaction(app_db) as cur:
                cur.execute(
                    "INSERT INTO serving_routes (customer, champion_version, canary_version, "
                    "canary_weight) VALUES (%s, %s, %s, %s)",
                    (CUSTOMER, version, canary, 0.5 if canary else 0.0),
                )
            extra = {
                "RETRAIN_SERVE_MAX_ROWS": str(max(sizes)),
                "RETRAIN_INTERVAL_LEVELS": "80,95" if INTERVALS else "none",
            }
            table = None
            storage = ParquetPartitionStore(str(home / "storage"))
            if args.by_key:
                publication, _ = publish(storage, KEY_SPEC, days=35, db_url=app_db)
                history = ParquetHistory(storage)(CUSTOMER, publication)
                table = build_features(CUSTOMER, history, publication, "US")
                extra["RETRAIN_STORAGE_URL"] = str(home / "storage")
            else:  # one published day: the days served, which rows with features are checked on
                publish(storage, SMALL_SPEC, days=1, db_url=app_db)
            service = ServingProcess(app_db, mlflow_uri, home / "serve", extra_env=extra)
            service.start()
            forecaster = Forecaster.of(CUSTOMER, version, champion, WIDTHS if INTERVALS else None)
            try:
                if table is not None:
                    report, answered = by_key(service, table, forecaster, sizes, args)
                else:
                    report, answered = measure(service, app_db, forecaster, sizes, args)
            finally:
                code = service.stop()
            if args.by_key:
                report += "\n\n" + history_memory(
                    ParquetPartitionStore(str(home / "small")), args.customers
                )
            with transaction(app_db) as cur:
                cur.execute("SELECT count(*) FROM prediction_log WHERE served")
                logged = cur.fetchone()[0]
        print(report)
        batching = re.search(r"stopped after .*", service.log())
        print(f"service log: {batching.group(0) if batching else 'no shutdown line'}")
        print(f"prediction_log: {logged} served rows for {answered} answered; service exit {code}")
        if logged != answered:
            print("MISMATCH: the log does not hold every answered row", file=sys.stderr)
            return 1
    return 0


def measure(
    service: ServingProcess,
    app_db: str,
    forecaster: Forecaster,
    sizes: list[int],
    args: argparse.Namespace,
) -> tuple[str, int]:
    """Run every measurement; return the Markdown table and how many rows were answered."""
    url = f"{service.url}/forecast/{CUSTOMER}"
    lines = [
        f"| rows/request | model in-process p50 / p99 ms | (pandas p50 ms) "
        f"| model + log commit p50 ms | service p50 / p99 ms | service / model p50 "
        f"| sequential rows/s | {args.clients} clients req/s | {args.clients} clients rows/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    key_base, answered = 0, 0
    for size in sizes:
        count = max(50, args.requests // round(size**0.5))
        local = in_process(forecaster, size, max(count, 200), args.seconds)
        logged = in_process_logged(forecaster, app_db, size, count, args.seconds, key_base)
        key_base += 10_000_000
        seq = sequential(url, size, count, args.seconds, key_base)
        key_base += 10_000_000
        par = concurrent(url, size, args.clients, count, args.seconds, key_base)
        key_base += 10_000_000
        answered += int(seq["rows"]) + int(par["rows"]) + int(logged["rows"])
        lines.append(
            f"| {size:,} | {local['p50']:.3f} / {local['p99']:.3f} | {local['pandas_p50']:.3f} "
            f"| {logged['p50']:.2f} | {seq['p50']:.2f} / {seq['p99']:.2f} "
            f"| {seq['p50'] / local['p50']:.0f}x (+{seq['p50'] - local['p50']:.2f} ms) "
            f"| {seq['rows_per_s']:,.0f} "
            f"| {par['requests_per_s']:,.0f} | {par['rows_per_s']:,.0f} |"
        )
        print(
            lines[-1],
            f"({int(seq['requests'])} sequential, {int(par['requests'])} concurrent)",
            flush=True,
        )
    return "\n".join(lines), answered


if __name__ == "__main__":
    sys.exit(main())
