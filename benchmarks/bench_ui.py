"""Benchmark the Dagster UI's GraphQL queries for `model_candidate` with N customer partitions.

Per size N (setup not timed): a Dagster instance on the embedded PostgreSQL holding N
`customers` partitions, `--materialized` of them with a `model_candidate` materialization and a
`beats_champion` evaluation (reported as runless events), and a real `dagster-webserver` on the
repository's workspace. Headless Chromium (Debian's /usr/bin/chromium under Playwright) opens
the asset page of `model_candidate` (`/assets/model_candidate`), its Partitions tab and its
Checks tab; every GraphQL POST the pages send is recorded with the time the browser waited for
its answer. Each distinct operation is then sent again to the webserver `--repeat` times (the
recorded body, as the UI sent it) and timed; the table shows the median and the largest answer.

    .venv/bin/python benchmarks/bench_ui.py --sizes 1000,100000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PAGES = (
    ("asset page", "/assets/model_candidate"),
    ("partitions tab", "/assets/model_candidate?view=partitions"),
    ("checks tab", "/assets/model_candidate?view=checks"),
)
QUIET_SECONDS = 10.0  # a page is done when no new operation appeared for this long
PAGE_LIMIT_SECONDS = 300.0  # (the UI polls some queries forever)


def seed_instance(home: Path, server, n: int, materialized: int) -> dict[str, str]:
    """Write DAGSTER_HOME's dagster.yaml on a fresh Postgres database; add the partitions."""
    import dagster as dg

    from retrain_assets.customers import CUSTOMERS
    from retrain_assets.store.server import ensure_database

    os.environ["RETRAIN_DB_PREFIX"] = f"bu{uuid.uuid4().hex[:8]}_"
    url = ensure_database(server, "dagster")
    dagster_home = home / f"dagster-{n}"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {json.dumps(url)}\ntelemetry:\n"
        "  enabled: false\n"
    )
    instance = dg.DagsterInstance.from_config(str(dagster_home))
    names = [f"c{i:06d}" for i in range(n)]
    started = time.perf_counter()
    instance.add_dynamic_partitions(CUSTOMERS.name, names)
    added = time.perf_counter() - started
    for name in names[:materialized]:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key="model_candidate", partition=name, metadata={"run_key": f"{name}-k"}
            )
        )
        instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=dg.AssetKey("model_candidate"),
                check_name="beats_champion",
                passed=True,
                partition=name,
                metadata={"run_key": f"{name}-k"},
            )
        )
    instance.dispose()
    print(f"  N={n}: {n:,} partitions added in {added:.1f} s", flush=True)
    return {**os.environ, "DAGSTER_HOME": str(dagster_home)}


def record_pages(port: int, shots: Path) -> list[dict]:
    """Open each page in Chromium; return every GraphQL POST with the browser's wait (s)."""
    from playwright.sync_api import sync_playwright

    from retrain_assets_tests.ui.browser import launch_chromium

    seen: list[dict] = []
    base = f"http://127.0.0.1:{port}"
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_page()
        current = {"page": ""}

        def finished(request) -> None:
            if request.method != "POST" or "/graphql" not in request.url:
                return
            body = request.post_data_json or {}
            timing = request.timing
            seen.append(
                {
                    "page": current["page"],
                    "operation": body.get("operationName") or "?",
                    "body": body,
                    "browser_seconds": (timing["responseEnd"] - timing["requestStart"]) / 1000,
                }
            )

        page.on("requestfinished", finished)
        # the community sign-up note opens over any localhost page; mark it seen, as a person would
        requests.post(
            f"{base}/graphql", json={"query": "mutation { setNuxSeen }"}, timeout=60
        ).raise_for_status()
        for name, path in PAGES:
            current["page"] = name
            started = time.monotonic()
            page.goto(base + path, timeout=600_000)
            page.wait_for_load_state("networkidle", timeout=600_000)
            names: set[str] = set()
            quiet_since = time.monotonic()
            while (
                time.monotonic() - quiet_since < QUIET_SECONDS
                and time.monotonic() - started < PAGE_LIMIT_SECONDS
            ):
                page.wait_for_timeout(500)  # pumps Playwright's events, unlike time.sleep
                now = {e["operation"] for e in seen if e["page"] == name}
                if now != names:
                    names, quiet_since = now, time.monotonic()
            page.screenshot(
                path=str(shots / f"{name.replace(' ', '-')}.png"), full_page=True, timeout=600_000
            )
            print(f"    {name}: quiet after {time.monotonic() - started:.1f} s", flush=True)
        browser.close()
    return seen


def replay(port: int, body: dict, repeat: int) -> tuple[float, int]:
    """POST the body `repeat` times; return the median seconds and the answer's size."""
    times, size = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        response = requests.post(f"http://127.0.0.1:{port}/graphql", json=body, timeout=600)
        times.append(time.perf_counter() - started)
        response.raise_for_status()
        answer = response.json()
        if "errors" in answer:
            raise RuntimeError(f"{body.get('operationName')}: {answer['errors']}")
        size = len(response.content)
    return statistics.median(times), size


def drop_field(query: str, field: str) -> str:
    """Return the query without every `field { ... }` selection (braces matched)."""
    while (start := query.find(f" {field} {{")) >= 0:
        depth, end = 0, query.index("{", start)
        while True:
            depth += {"{": 1, "}": -1}.get(query[end], 0)
            end += 1
            if depth == 0:
                break
        query = query[:start] + query[end:]
    return query


ABLATED = {  # which part of the heaviest query costs what: the same body without these fields
    "AssetGraphLiveQuery": (
        ("without the check's partitionStatuses", ("partitionStatuses",)),
        ("without partitionStats", ("partitionStats",)),
        ("without both", ("partitionStatuses", "partitionStats")),
    ),
    "AssetChecksQuery": (("without the check's partitionStatuses", ("partitionStatuses",)),),
}


def ablate(port: int, seen: list[dict], repeat: int) -> None:
    """Time the heaviest queries again without their partition fields."""
    for operation, variants in ABLATED.items():
        body = next((e["body"] for e in seen if e["operation"] == operation), None)
        if body is None:
            continue
        for label, fields in variants:
            query = body["query"]
            for field in fields:
                query = drop_field(query, field)
            seconds, size = replay(port, {**body, "query": query}, repeat)
            print(f"| {operation} {label} | {seconds:.2f} s | {size / 1024:,.0f} KiB |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--materialized", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the webserver on the way out
    from retrain_assets.store.server import start_server
    from retrain_assets_tests.support.platform import running_webserver

    work = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    os.environ["RETRAIN_HOME"] = str(work)
    server = start_server(work)
    for n in (int(s) for s in args.sizes.split(",")):
        env = seed_instance(work, server, n, min(args.materialized, n))
        with running_webserver(env, work / f"webserver-{n}.log") as port:
            seen = record_pages(port, work)
            print(f"\n### N = {n:,} partitions, load average {os.getloadavg()[0]:.1f}\n")
            print(
                "| page | operation | sent | browser waited (max) | replayed, median "
                f"of {args.repeat} | answer |"
            )
            print("|---|---|---:|---:|---:|---:|")
            done: set[str] = set()
            for entry in seen:
                key = entry["page"] + entry["operation"]
                if key in done:
                    continue
                done.add(key)
                same = [e for e in seen if e["page"] + e["operation"] == key]
                waited = max(e["browser_seconds"] for e in same)
                seconds, size = replay(port, entry["body"], args.repeat)
                flag = " **over 3 s**" if max(seconds, waited) > 3 else ""
                print(
                    f"| {entry['page']} | {entry['operation']} | {len(same)} | {waited:.2f} s "
                    f"| {seconds:.2f} s{flag} | {size / 1024:,.0f} KiB |",
                    flush=True,
                )
            print("\n| query variant | replayed, median | answer |\n|---|---:|---:|")
            ablate(port, seen, args.repeat)
            (work / f"queries-{n}.json").write_text(json.dumps(seen, indent=1))
            print(f"\n(bodies in {work / f'queries-{n}.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
