"""Benchmark validating one big landing file, next to a plain pyarrow read of the same file.

Writes one day's file of `--stores` x `--items` rows (default 200 x 10,000 = 2,000,000) from
the demo simulator, once clean and once with `--bad` (default 5 %) of its rows turned into
faults of every kind in retrain_assets/demo/faults.py (wrong values, padded and quoted values,
integers beyond int64, control characters, blank lines, line breaks in quotes, rows with a field
too many or too few, unclosed quotes). Then, per file, each in a fresh process, `--repeat`
times: `read_landing_day` (read, UTF-8 check, validation: what the `sales` asset does per
file) and, for reference, `pyarrow.csv.read_csv` of the same file (types inferred; rows of the
wrong width skipped, without which it cannot read the faulty file at all). Reports the
median wall seconds, the CPU seconds of the process (all its threads: the machine may be
shared), the peak RSS of the process (`VmHWM`) and its RSS after the imports.

    .venv/bin/python benchmarks/bench_validation.py
    .venv/bin/python benchmarks/bench_validation.py --stores 20 --items 1000 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAY = dt.date(2026, 1, 2)
CUSTOMER = "big"


def _status_mib(field: str) -> float:
    """Return a memory figure of this process from /proc (Linux), in MiB.

    `VmHWM` is the peak RSS since this program started; `ru_maxrss` would not do, since Linux
    keeps it across exec, so a child would report the larger parent's peak.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(engine: str, root: str) -> dict[str, float]:
    """Run one engine on the file under `root` in this process; return what it measured."""
    import pyarrow
    import pyarrow.csv

    from retrain_assets.features.landing_reader import read_landing_day
    from retrain_assets.landing import day_file

    imported = _status_mib("VmRSS")
    start, cpu_start = time.perf_counter(), time.process_time()
    if engine == "pyarrow":
        skip = pyarrow.csv.ParseOptions(invalid_row_handler=lambda row: "skip")
        table = pyarrow.csv.read_csv(str(day_file(root, CUSTOMER, DAY)), parse_options=skip)
        counts = {"rows": table.num_rows}
    else:
        outcome = read_landing_day(root, CUSTOMER, DAY)
        assert not outcome.failed, outcome.problems
        counts = {"accepted": len(outcome.accepted), "quarantined": len(outcome.quarantined)}
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak = _status_mib("VmHWM")
    return {"seconds": seconds, "cpu": cpu, "peak_mib": peak, "imported_mib": imported, **counts}


def _in_subprocess(engine: str, root: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--measure", engine, root], capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"{engine} on {root} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def _write_files(
    base: Path, stores: int, items: int, bad: float
) -> dict[str, tuple[str, int, int]]:
    """Write the clean and the faulty file; return case -> (landing root, rows, bytes)."""
    from retrain_assets.demo.faults import FAULTS, with_faults
    from retrain_assets.demo.simulate import simulate_day
    from retrain_assets.demo.tenants import TenantSpec
    from retrain_assets.landing import day_file

    frame = simulate_day(TenantSpec(CUSTOMER, "US", stores=stores, items=items, seed=5), DAY)
    cases = {}
    for case, fraction in (("clean", 0.0), (f"{bad:.0%} bad rows", bad)):
        root = base / case.replace(" ", "_").replace("%", "pct")
        path = day_file(str(root), CUSTOMER, DAY)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = with_faults(frame, fraction, list(FAULTS), seed=1)
        path.write_text(text)
        cases[case] = (str(root), len(frame), path.stat().st_size)
    return cases


def main() -> None:
    """Parse flags, write the files, measure each engine in fresh processes, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--bad", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--measure", nargs=2, metavar=("ENGINE", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)), flush=True)
        # Skip interpreter teardown: pyarrow's thread pool can abort a process at exit
        # ("terminate called without an active exception", apache/arrow#34314).
        os._exit(0)

    import numpy
    import pandas
    import pyarrow

    with tempfile.TemporaryDirectory(prefix="bench_validation_") as base:
        start = time.perf_counter()
        cases = _write_files(Path(base), args.stores, args.items, args.bad)
        print(f"files written in {time.perf_counter() - start:.1f} s (not timed)")
        print(
            f"python {platform.python_version()}, pandas {pandas.__version__}, "
            f"pyarrow {pyarrow.__version__}, numpy {numpy.__version__}"
        )
        print(
            "| file | engine | median s | runs s | CPU s (median) | peak RSS MiB "
            "| after imports MiB | rows |"
        )
        print("|---|---|---:|---|---:|---:|---:|---|")
        for case, (root, rows, size) in cases.items():
            for engine in ("pyarrow", "validate"):
                runs = [_in_subprocess(engine, root) for _ in range(args.repeat)]
                seconds = [run["seconds"] for run in runs]
                last = runs[-1]
                if engine == "pyarrow":
                    result = f"{last['rows']:,} read"
                else:
                    result = f"{last['accepted']:,} accepted, {last['quarantined']:,} quarantined"
                    assert last["accepted"] + last["quarantined"] == rows, "rows were lost"
                print(
                    f"| {case}, {rows:,} rows, {size / 2**20:.0f} MiB | {engine} | "
                    f"{statistics.median(seconds):.2f} | "
                    f"{', '.join(f'{s:.2f}' for s in seconds)} | "
                    f"{statistics.median(run['cpu'] for run in runs):.2f} | "
                    f"{max(run['peak_mib'] for run in runs):,.0f} | "
                    f"{last['imported_mib']:,.0f} | {result} |"
                )


if __name__ == "__main__":
    main()
