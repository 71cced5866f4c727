"""Benchmark `gpu_job_poller`: one tick with N customers waiting, and what waiting costs.

Part 1, per size N (setup not timed): a fresh project database and a fresh GPU-service
database on the embedded PostgreSQL in a temporary RETRAIN_HOME (or on RETRAIN_PG_URL), the
real GPU service (`python -m retrain_assets.gpu.service --slots 1 --allow-faults`), one
blocker job that keeps the only slot busy, then N customers `c00001`... each started with
`start_training` and advanced once, so each waits in POLL_JOB on a real, queued remote job.
Then the sensor is evaluated three times (`build_sensor_context` with an ephemeral instance)
and its pieces are timed separately: the pointers query, the batched status calls, and
`engine.advance_many` as the sensor calls it (its due list `known`, so a poll whose job is
still queued is recorded in SQL, one statement per chunk), the same with every visit through
the trampoline (one locking select, bulk history insert and pointer update per chunk), and
the old way, one `advance` per customer.

Part 2, at N=100: what waiting costs in this design (Dagster runs, processes, Postgres rows)
next to K real processes that each hold a Dagster run polling one job in a loop.

    .venv/bin/python benchmarks/bench_poller.py
    .venv/bin/python benchmarks/bench_poller.py --sizes 100,1000 --blocking 3
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import cProfile
import os
import pstats
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg2

try:
    from peak_rss import peak_mib, reset_peak
except ImportError:  # run as a module from the repository root
    from benchmarks.peak_rss import peak_mib, reset_peak

BLOCKER_SECONDS_PER_ROUND = 10.0  # the service's maximum for `slow_seconds_per_round`
BLOCKER_ROUNDS = 5000  # the service's maximum: the blocker would train for ~14 hours
GIB = 1 << 30
STARTUP_LIMIT_SECONDS = 180.0
ONE_BY_ONE_UP_TO = 1_000  # the old way took 60 s at 10,000 customers (above); not run above
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the service helpers live in the test package
    sys.path.insert(0, str(ROOT))

BLOCKING_RUN = r"""
import sys, time
import dagster as dg
import retrain_assets.definitions  # noqa: F401  (what a code-location run process imports)
from retrain_assets.gpu.client import HttpGpuService

URL, TOKEN, JOB_ID = sys.argv[1:4]

@dg.asset
def wait_for_gpu_job() -> str:
    gpu = HttpGpuService(URL, TOKEN)
    while True:
        job = gpu.get(JOB_ID)
        print(f"poll {job.status.value}", flush=True)
        if job.status.finished:
            return job.id
        time.sleep(1)

dg.materialize([wait_for_gpu_job])
"""


class NoCandidates:
    """A candidate store that holds nothing (a queued job never reaches DOWNLOAD_SAVE)."""

    def has_candidate(self, customer: str, run_key: str) -> bool:
        return False

    def save_candidate(self, customer: str, run_key: str, artifact: Any) -> None:
        raise AssertionError("the benchmark never downloads a candidate")


@dataclass
class World:
    """One size's databases, service and waiting customers."""

    n: int
    prefix: str
    app_url: str
    service: Any
    job_ids: list[str] = field(default_factory=list)
    setup_seconds: float = 0.0


@dataclass
class TickResult:
    """Measurements of part 1 for one size."""

    n: int
    setup_seconds: float
    ticks: list[float]
    deferred: list[int]
    requests: list[int]
    pointers: float
    statuses: float
    status_calls: int
    advance_loop: float
    advance_many: float
    advance_trampoline: float
    table_bytes: int
    history_rows: int
    peaks: list[float] = field(default_factory=list)


def median(values: list[float]) -> float:
    return statistics.median(values)


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = function()
    return time.perf_counter() - started, value


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    from retrain_assets.store.database import transaction

    with transaction(url) as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def drop_database(server: Any, name: str) -> None:
    from retrain_assets.store.server import libpq_url, with_database

    admin = psycopg2.connect(libpq_url(with_database(server.url, "postgres")))
    try:
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


@contextlib.contextmanager
def world(
    server: Any,
    home: Path,
    dataset: Path,
    n: int,
    threads: int,
    on_ready: Callable[[World], None] | None = None,
    real: int | None = None,
) -> Iterator[World]:
    """Start a service on fresh databases and leave n customers waiting in POLL_JOB.

    With `real`, only that many customers are entered through the service and the machine;
    the others are copies of the first one's rows (its pointer, history and remote job, under
    their own customer, run key and job id), written in three statements.
    """
    from retrain_assets.gpu.client import HttpGpuService
    from retrain_assets.machines.engine import advance
    from retrain_assets.machines.training import TrainingServices, start_training
    from retrain_assets.settings import database_name
    from retrain_assets.store.migrations import migrate
    from retrain_assets.store.server import ensure_database
    from retrain_assets_tests.gpu.service_process import ServiceProcess, training_spec

    prefix = f"bp{uuid.uuid4().hex[:8]}_"
    os.environ["RETRAIN_DB_PREFIX"] = prefix
    app_url = ensure_database(server, "app")
    migrate(app_url)
    token = os.environ["RETRAIN_GPU_TOKEN"]
    service = ServiceProcess(
        pg_url=server.url, home=home / f"gpu-{n}", slots=1, token=token, db_prefix=prefix
    )
    service.start()
    here = World(n=n, prefix=prefix, app_url=app_url, service=service)
    try:
        started = time.perf_counter()
        faults = {"slow_seconds_per_round": BLOCKER_SECONDS_PER_ROUND}
        blocker_spec = training_spec(
            dataset,
            customer="blocker",
            faults=faults,
            params={"num_boost_round": BLOCKER_ROUNDS, "num_leaves": 15},
        )
        with service.client() as gpu:
            blocker = gpu.submit("blocker", blocker_spec)
            # After its first round the blocker's worker holds its one database connection,
            # so nothing of the blocker starts later and gets counted as the waiting's cost.
            service.wait_for(blocker.id, lambda job: job["rounds_done"] >= 1, 120)
        print(f"  N={n}: service on :{service.port}, blocker {blocker.id} running", flush=True)
        if on_ready is not None:
            on_ready(here)

        local = threading.local()

        def services() -> TrainingServices:
            if not hasattr(local, "services"):
                gpu = HttpGpuService(service.url, token)
                downloads = home / "downloads"
                local.services = TrainingServices(
                    gpu=gpu, candidates=NoCandidates(), download_dir=lambda key: downloads / key
                )
            return local.services

        def enter(index: int) -> str:
            customer = f"c{index:05d}"
            spec = training_spec(dataset, customer=customer)
            start_training(app_url, customer, f"{customer}-bench", spec)
            result = advance(app_url, _machine(), customer, services())
            pointer = result.pointer
            if pointer is None or pointer.state != "POLL_JOB" or pointer.status != "waiting":
                raise RuntimeError(f"{customer} did not end waiting in POLL_JOB: {result}")
            return str(pointer.payload["job_id"])

        done = 0
        step = max(n // 10, 1)
        entered = n if real is None else min(real, n)
        with ThreadPoolExecutor(threads) as pool:
            for job_id in pool.map(enter, range(1, entered + 1)):
                here.job_ids.append(job_id)
                done += 1
                if done % step == 0 or done == entered:
                    rate = done / (time.perf_counter() - started)
                    print(f"    {done:>6}/{n} waiting ({rate:.0f} customers/s)", flush=True)
        if entered < n:
            here.job_ids += clone_waiting(app_url, server, here.job_ids[0], entered + 1, n)
            print(f"    {n:>6}/{n} waiting ({n - entered} copied in SQL)", flush=True)
        here.setup_seconds = time.perf_counter() - started
        with service.client() as gpu:
            jobs = gpu.statuses(here.job_ids)
        queued = sum(job.status.value == "queued" for job in jobs.values())
        if len(jobs) != n or queued != n:
            raise RuntimeError(f"expected {n} queued remote jobs, found {queued} of {len(jobs)}")
        yield here
    finally:
        service.stop()
        os.environ["RETRAIN_DB_PREFIX"] = prefix
        for purpose in ("app", "gpu"):
            drop_database(server, database_name(purpose))


# c00001 ... c99999, then c100000 ...: what f"c{i:05d}" gives (lpad alone would truncate)
NAME_SQL = "CASE WHEN i < 100000 THEN lpad(i::text, 5, '0') ELSE i::text END"


def clone_waiting(app_url: str, server: Any, job_id: str, first: int, last: int) -> list[str]:
    """Copy customer c00001's waiting rows to c<first>..c<last>; return their job ids."""
    from retrain_assets.store.server import ensure_database

    gpu_url = ensure_database(server, "gpu")
    numbers = (first, last)
    query(
        gpu_url,
        "INSERT INTO jobs (id, idempotency_key, spec, spec_canonical, customer, status,"
        " attempt, rounds_done, total_rounds, created_at, updated_at, queued_at)"
        " SELECT 'bench-' || i, 'c' || " + NAME_SQL + " || '-bench', spec, spec_canonical,"
        " 'c' || " + NAME_SQL + ", status, attempt, rounds_done, total_rounds,"
        " created_at, updated_at, queued_at"
        " FROM jobs, generate_series(%s, %s) AS i WHERE id = %s RETURNING id",
        (*numbers, job_id),
    )
    query(
        app_url,
        "INSERT INTO machine_history (machine, customer, run_key, state, visit, ok, yielded,"
        " next_state, error, note, started_at, finished_at)"
        " SELECT machine, 'c' || " + NAME_SQL + ", 'c' || " + NAME_SQL + " || '-bench',"
        " state, visit, ok, yielded, next_state, error, note, started_at, finished_at"
        " FROM machine_history, generate_series(%s, %s) AS i WHERE customer = 'c00001'"
        " RETURNING id",
        numbers,
    )
    query(
        app_url,
        "INSERT INTO machine_pointers (machine, customer, run_key, state, status, payload,"
        " visits, reason, last_error, started_at, updated_at)"
        " SELECT machine, 'c' || " + NAME_SQL + ", 'c' || " + NAME_SQL + " || '-bench',"
        " state, status, jsonb_set(payload, '{job_id}', to_jsonb('bench-' || i)), visits,"
        " reason, last_error, started_at, updated_at"
        " FROM machine_pointers, generate_series(%s, %s) AS i WHERE customer = 'c00001'"
        " RETURNING customer",
        numbers,
    )
    return [f"bench-{i}" for i in range(first, last + 1)]


def _machine() -> Any:
    from retrain_assets.machines.training import training_machine

    return training_machine()


def db_now(url: str) -> Any:
    return query(url, "SELECT clock_timestamp()")[0][0]


def measure_ticks(here: World, ticks: int, profile: str | None = None) -> TickResult:
    """Time the sensor, then each of its pieces on its own; cProfile the last tick if asked."""
    import dagster as dg

    from retrain_assets.automation.gpu_job_poller import CHUNK, gpu_job_poller
    from retrain_assets.features.parquet_store import PartitionStorage
    from retrain_assets.gpu.client import STATUS_BATCH, HttpGpuService
    from retrain_assets.machines import engine
    from retrain_assets.machines.store import pointers_in_state
    from retrain_assets.machines.training import JOB_ID, NAME
    from retrain_assets.models.resources import GpuServiceResource, training_services
    from retrain_assets.settings import storage_root
    from retrain_assets.store.resource import ProjectDatabase

    os.environ["RETRAIN_APP_PG_URL"] = here.app_url
    os.environ["RETRAIN_GPU_URL"] = here.service.url
    instance = dg.DagsterInstance.ephemeral()
    times, deferred, requests, peaks = [], [], [], []
    for index in range(ticks):
        context = dg.build_sensor_context(
            instance=instance,
            resources={
                "project_db": ProjectDatabase(),
                "partition_storage": PartitionStorage(),
                "gpu_service": GpuServiceResource(),
            },
        )
        before = db_now(here.app_url)
        reset_peak()
        profiler = cProfile.Profile() if profile and index == ticks - 1 else None
        if profiler:
            profiler.enable()
        seconds, result = timed(lambda context=context: gpu_job_poller(context))
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
        peaks.append(peak_mib())
        # A deferred pointer is one the tick did not touch: its updated_at predates the tick.
        (untouched,) = query(
            here.app_url,
            "SELECT count(*) FROM machine_pointers WHERE machine = %s AND state = 'POLL_JOB'"
            " AND updated_at < %s",
            (NAME, before),
        )[0]
        times.append(seconds)
        deferred.append(int(untouched))
        requests.append(len(result.run_requests or []))
        print(
            f"  N={here.n}: tick {index + 1}: {seconds:.2f} s, {untouched} deferred",
            flush=True,
        )
    runs = instance.get_runs_count()
    if runs:
        raise RuntimeError(f"the ticks started {runs} Dagster runs")

    pointer_times, waiting = [], []
    for _ in range(3):
        seconds, waiting = timed(lambda: pointers_in_state(here.app_url, NAME, "POLL_JOB"))
        pointer_times.append(seconds)
    ids = [str(p.payload[JOB_ID]) for p in waiting]
    status_times, jobs = [], {}
    for _ in range(3):
        client = HttpGpuService(here.service.url, os.environ["RETRAIN_GPU_TOKEN"])
        seconds, jobs = timed(lambda client=client: client.statuses(ids))
        client.close()
        status_times.append(seconds)

    machine = _machine()
    gpu = HttpGpuService(here.service.url, os.environ["RETRAIN_GPU_TOKEN"])
    services = training_services(here.app_url, gpu, storage_root())

    def advance_all() -> None:
        for p in waiting:
            engine.advance(here.app_url, machine, p.customer, services, prefetched=jobs)

    loop_seconds, _ = timed(advance_all) if here.n <= ONE_BY_ONE_UP_TO else (float("nan"), 0)

    # What the sensor calls: the pointers it read are `known`, so the waiting polls are
    # recorded in SQL; then, for comparison, every poll through the trampoline.
    waiting = pointers_in_state(here.app_url, NAME, "POLL_JOB")  # the loop above moved them
    customers = [p.customer for p in waiting]
    known = {p.customer: p for p in waiting}
    many_seconds, many = timed(
        lambda: engine.advance_many(
            here.app_url,
            machine,
            customers,
            services,
            prefetched=jobs,
            chunk=CHUNK,
            known=known,
        )
    )
    check_waiting(here.app_url, many, len(waiting))
    trampoline_seconds, many = timed(
        lambda: engine.advance_many(
            here.app_url, machine, customers, services, prefetched=jobs, chunk=CHUNK
        )
    )
    gpu.close()
    check_waiting(here.app_url, many, len(waiting))

    size, history_rows = query(
        here.app_url,
        "SELECT pg_total_relation_size('machine_pointers')"
        " + pg_total_relation_size('machine_history'), (SELECT count(*) FROM machine_history)",
    )[0]
    return TickResult(
        n=here.n,
        setup_seconds=here.setup_seconds,
        ticks=times,
        deferred=deferred,
        requests=requests,
        pointers=median(pointer_times),
        statuses=median(status_times),
        status_calls=-(-len(ids) // STATUS_BATCH),
        advance_loop=loop_seconds,
        advance_many=many_seconds,
        advance_trampoline=trampoline_seconds,
        table_bytes=int(size),
        history_rows=int(history_rows),
        peaks=peaks,
    )


def check_waiting(url: str, results: dict[str, Any], n: int) -> None:
    """Refuse a measurement of `advance_many` that did not leave all n waiting in POLL_JOB."""
    from retrain_assets.machines.store import pointers_in_state
    from retrain_assets.machines.training import NAME

    if sum(r.waiting and r.steps == 1 for r in results.values()) != n:
        raise RuntimeError(f"advance_many left {len(results)} of {n} waiting")
    after = pointers_in_state(url, NAME, "POLL_JOB")
    if len(after) != n or any(p.status != "waiting" for p in after):
        raise RuntimeError("advance_many did not leave every customer in POLL_JOB")


@dataclass
class WaitingCost:
    """Measurements of part 2."""

    n: int
    runs_in_progress: int
    processes_before: int
    processes_after: int
    own_before: int
    own_after: int
    postgres_before: int
    postgres_after: int
    table_bytes: int
    pointer_rows: int
    history_rows: int
    k: int
    rss: list[int]
    uss: list[int]
    polls: list[int]
    first_poll: list[float]
    measured_at: float


def postgres_backends(url: str) -> int:
    sql = "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
    return int(query(url, sql)[0][0])


def own_processes() -> int:
    """Count this benchmark's processes: itself, its children (service, worker), and the
    embedded postmaster with its backends (0 of those for an external RETRAIN_PG_URL)."""
    count = 1 + len(psutil.Process().children(recursive=True))
    pidfile = Path(os.environ["RETRAIN_HOME"]) / "pg" / "postmaster.pid"
    if pidfile.exists():
        with contextlib.suppress(psutil.NoSuchProcess, ValueError):
            postmaster = psutil.Process(int(pidfile.read_text().split()[0]))
            count += 1 + len(postmaster.children(recursive=True))
    return count


def tree_memory(process: psutil.Process) -> tuple[int, int]:
    rss = uss = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            info = member.memory_full_info()
            rss, uss = rss + info.rss, uss + info.uss
    return rss, uss


def blocking_runs(
    here: World, home: Path, k: int, seconds: float
) -> tuple[list[int], list[int], list[int], list[float], float]:
    """Start k processes that each hold a Dagster run polling one job; measure, kill them."""
    env = dict(os.environ)
    env.pop("RETRAIN_APP_PG_URL", None)
    logs = [home / f"blocking-{i}.log" for i in range(k)]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for i in range(k):
            with logs[i].open("wb") as output:
                processes.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-c",
                            BLOCKING_RUN,
                            here.service.url,
                            os.environ["RETRAIN_GPU_TOKEN"],
                            here.job_ids[i],
                        ],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                    )
                )
        started = time.monotonic()
        first_poll: dict[int, float] = {}
        # Measured once each process has run for `seconds` and polled at least once (on a
        # loaded machine the imports alone can take longer than `seconds`).
        while len(first_poll) < k or time.monotonic() - started < seconds:
            for i, (process, log) in enumerate(zip(processes, logs, strict=True)):
                if process.poll() is not None:
                    raise RuntimeError(f"blocking run exited:\n{log.read_text()}")
                if i not in first_poll and "poll queued" in log.read_text():
                    first_poll[i] = time.monotonic() - started
            if time.monotonic() - started > STARTUP_LIMIT_SECONDS:
                raise RuntimeError(f"blocking runs did not poll within {STARTUP_LIMIT_SECONDS} s")
            time.sleep(0.2)
        rss, uss, polls = [], [], []
        for process, log in zip(processes, logs, strict=True):
            used, unique = tree_memory(psutil.Process(process.pid))
            rss.append(used)
            uss.append(unique)
            polls.append(log.read_text().count("poll queued"))
        measured_at = time.monotonic() - started
        return rss, uss, polls, [first_poll[i] for i in range(k)], measured_at
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


_ACTIVE = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"}


def main() -> None:
    """Parse flags, run both parts, print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="setup submissions at once")
    parser.add_argument("--waiting", type=int, default=100, help="N for part 2")
    parser.add_argument("--blocking", type=int, default=5, help="K blocking-run processes")
    parser.add_argument("--blocking-seconds", type=float, default=10.0)
    parser.add_argument("--skip-waiting-cost", action="store_true")
    parser.add_argument(
        "--real",
        type=int,
        default=None,
        help="enter only this many customers through the service; copy the rest in SQL",
    )
    parser.add_argument(
        "--profile",
        help="write a cProfile of the last tick here (of the last size; its time includes"
        " the profiler)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]

    home = Path(tempfile.mkdtemp(prefix="bench-poller-"))
    # Registered first, so it runs last: after pgserver has stopped the embedded server.
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["RETRAIN_HOME"] = str(home)
    os.environ["RETRAIN_GPU_TOKEN"] = secrets.token_hex(16)
    for name in ("RETRAIN_APP_PG_URL", "RETRAIN_GPU_URL", "RETRAIN_STORAGE_URL"):
        os.environ.pop(name, None)

    from retrain_assets.automation.gpu_job_poller import TICK_BUDGET_SECONDS
    from retrain_assets.store.server import start_server
    from retrain_assets_tests.gpu.service_process import write_dataset

    server = start_server(home)
    where = "RETRAIN_PG_URL" if not server.embedded else f"embedded under {home}"
    print(f"PostgreSQL: {where}; {os.cpu_count()} CPUs", flush=True)
    dataset = write_dataset(home / "dataset.parquet")

    results = []
    for n in sizes:
        with world(server, home, dataset, n, args.threads, real=args.real) as here:
            results.append(measure_ticks(here, args.ticks, args.profile))
    cost = None
    if not args.skip_waiting_cost:
        cost = measure_waiting(
            server,
            home,
            dataset,
            args.waiting,
            args.blocking,
            args.blocking_seconds,
            args.threads,
        )
    print()
    print_ticks(results, TICK_BUDGET_SECONDS)
    if cost is not None:
        print()
        print_cost(cost)


def measure_waiting(
    server: Any, home: Path, dataset: Path, n: int, k: int, seconds: float, threads: int
) -> WaitingCost:
    """Part 2, counting processes around the setup of the n waiting customers."""
    import dagster as dg

    marks: dict[str, int] = {}

    def before_customers(here: World) -> None:
        marks["processes"] = len(psutil.pids())
        marks["own"] = own_processes()
        marks["backends"] = postgres_backends(here.app_url)

    with world(server, home, dataset, n, threads, on_ready=before_customers) as here:
        time.sleep(1.0)  # let short-lived connections of the setup close
        processes_after = len(psutil.pids())
        own_after = own_processes()
        backends_after = postgres_backends(here.app_url)
        instance = dg.DagsterInstance.ephemeral()
        active = [status for status in dg.DagsterRunStatus if status.name in _ACTIVE]
        in_progress = instance.get_runs_count(dg.RunsFilter(statuses=active))
        size, pointers, history_rows = query(
            here.app_url,
            "SELECT pg_total_relation_size('machine_pointers')"
            " + pg_total_relation_size('machine_history'),"
            " (SELECT count(*) FROM machine_pointers), (SELECT count(*) FROM machine_history)",
        )[0]
        rss, uss, polls, first_poll, measured_at = blocking_runs(here, home, k, seconds)
    return WaitingCost(
        n=n,
        runs_in_progress=in_progress,
        processes_before=marks["processes"],
        processes_after=processes_after,
        own_before=marks["own"],
        own_after=own_after,
        postgres_before=marks["backends"],
        postgres_after=backends_after,
        table_bytes=int(size),
        pointer_rows=int(pointers),
        history_rows=int(history_rows),
        k=k,
        rss=rss,
        uss=uss,
        polls=polls,
        first_poll=first_poll,
        measured_at=measured_at,
    )


def print_ticks(results: list[TickResult], budget: float) -> None:
    print(f"### gpu_job_poller, one tick (median of {len(results[0].ticks)}; budget {budget:g} s)")
    print()
    print(
        "| N waiting | setup (not timed) | **tick, median** | ticks | per job "
        "| advanced / deferred per tick | pointers query | status calls "
        "| advance one by one | advance_many (as the sensor: waits in SQL) "
        "| advance_many, every visit through the trampoline | pointers + history "
        "| tick peak RSS |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        tick = median(r.ticks)
        ticks = ", ".join(f"{t:.2f}" for t in r.ticks)
        deferred = ", ".join(
            f"{r.n - d - q:,} / {d:,}" for d, q in zip(r.deferred, r.requests, strict=True)
        )
        print(
            f"| {r.n:,} | {r.setup_seconds:.0f} s | **{tick:.2f} s** | {ticks} s "
            f"| {tick / r.n * 1000:.2f} ms | {deferred} | {r.pointers * 1000:.0f} ms "
            f"| {r.statuses * 1000:.0f} ms ({r.status_calls} calls) "
            f"| {r.advance_loop:.2f} s ({r.advance_loop / r.n * 1000:.2f} ms each) "
            f"| {r.advance_many:.2f} s ({r.advance_many / r.n * 1000:.3f} ms each) "
            f"| {r.advance_trampoline:.2f} s "
            f"({r.advance_trampoline / r.n * 1000:.3f} ms each) "
            f"| {r.table_bytes / 1024:,.0f} KiB, {r.history_rows:,} history rows "
            f"| {max(r.peaks):,.0f} MiB |"
        )
    requested = sum(sum(r.requests) for r in results)
    print()
    print(f"run requests over all ticks: {requested} (every job stayed queued)")


def print_cost(c: WaitingCost) -> None:
    rss = statistics.mean(c.rss)
    uss = statistics.mean(c.uss)
    print(f"### What waiting costs ({c.n} customers waiting on a GPU job)")
    print()
    print("| | (a) rows in POLL_JOB + one sensor | (b) one blocking run per waiting job |")
    print("|---|---|---|")
    print(f"| Dagster runs held | {c.runs_in_progress} in progress | one per job ({c.n}) |")
    print(
        f"| processes held | this benchmark's (itself, service + worker, postmaster + "
        f"backends) {c.own_before} before setup, {c.own_after} with {c.n} waiting "
        f"(+{c.own_after - c.own_before}); machine-wide {c.processes_before} -> "
        f"{c.processes_after} (other sessions share the machine); "
        f"Postgres client backends {c.postgres_before} -> {c.postgres_after} "
        f"| one per job: {c.k} measured, each polling once a second "
        f"(first poll after {', '.join(f'{t:.1f}' for t in c.first_poll)} s; measured at "
        f"{c.measured_at:.1f} s after {', '.join(str(p) for p in c.polls)} polls) |"
    )
    print(
        f"| memory held | {c.table_bytes / 1024:,.0f} KiB of Postgres "
        f"(pg_total_relation_size of machine_pointers + machine_history: {c.pointer_rows} "
        f"pointers, {c.history_rows} history rows; "
        f"{c.table_bytes / max(c.n, 1) / 1024:.1f} KiB per waiting customer) "
        f"| RSS {rss / 2**20:,.0f} MiB per job "
        f"({', '.join(f'{r / 2**20:.0f}' for r in c.rss)} MiB; USS {uss / 2**20:,.0f} MiB) |"
    )
    for n in (100, 1_000, 10_000):
        print(
            f"| at {n:,} waiting | 0 runs, 0 processes added | {n:,} runs, {n:,} processes, "
            f"{rss * n / GIB:,.1f} GiB RSS ({uss * n / GIB:,.1f} GiB USS) |"
        )


if __name__ == "__main__":
    main()
