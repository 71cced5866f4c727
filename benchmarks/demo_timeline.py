"""Measure the live demo's timeline: `retrain-assets up` with the demo, nothing else, a clock.

Starts `up` in a fresh temporary RETRAIN_HOME (free ports, the demo's default settings, the
demo clock at its default RETRAIN_DEMO_DAY_SECONDS) and prints each milestone of the README's
"first ten minutes" when the platform first records it
(retrain_assets_tests/support/demo_milestones.py):
minutes after `up` was started, and the simulated days landed by then (a figure a loaded
machine does not stretch). Stops when all are reached or after --minutes; prints the load
average at the end, since a loaded machine stretches every time.

    .venv/bin/python benchmarks/demo_timeline.py
    .venv/bin/python benchmarks/demo_timeline.py --minutes 15 --keep
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the platform helpers live in the test package
    sys.path.insert(0, str(ROOT))

from retrain_assets.demo.simulate import landed_days  # noqa: E402
from retrain_assets.demo.tenants import DEMO_TENANTS  # noqa: E402
from retrain_assets.runtime.demo_mode import DEFAULT_DAY_SECONDS  # noqa: E402
from retrain_assets_tests.support.demo_milestones import (  # noqa: E402
    FIRST_SIMULATED_DAY,
    MILESTONES,
    reached,
    timeline,
)
from retrain_assets_tests.support.platform import running_platform  # noqa: E402


def simulated_days_landed(landing: str) -> int:
    """Return how many simulated days the demo clock has landed (its slowest tenant's count)."""
    return min(
        sum(day >= FIRST_SIMULATED_DAY for day in landed_days(landing, spec.name))
        for spec in DEMO_TENANTS
    )


def main() -> None:
    """Run the demo until every milestone is reached (or the time is up); print the timeline."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=20.0, help="give up after this long")
    parser.add_argument("--keep", action="store_true", help="keep the temporary RETRAIN_HOME")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="demo-timeline-"))
    started = dt.datetime.now(dt.UTC)
    env = {"RETRAIN_DEMO_DAY_SECONDS": os.environ.get("RETRAIN_DEMO_DAY_SECONDS", "")}
    env["RETRAIN_DEMO_DAY_SECONDS"] = env["RETRAIN_DEMO_DAY_SECONDS"] or str(DEFAULT_DAY_SECONDS)
    try:
        with running_platform(folder, env=env) as platform:
            print(f"ready after {(dt.datetime.now(dt.UTC) - started).total_seconds():.0f} s")
            seen: dict[str, float] = {}
            deadline = time.monotonic() + args.minutes * 60
            while len(seen) < len(MILESTONES) and time.monotonic() < deadline:
                now = reached(lambda purpose, sql: platform.query(purpose, sql), started)
                days = simulated_days_landed(str(platform.home / "landing"))
                for name in sorted(set(now) - set(seen), key=now.get):
                    print(f"+{now[name] / 60:5.1f} min  {name}  (by day {days})", flush=True)
                seen = now
                time.sleep(5)
            print("\ntimeline (minutes:seconds after `up` started):")
            print(timeline(seen))
            missing = [name for name in MILESTONES if name not in seen]
            if missing:
                print(f"not reached within {args.minutes:g} min: {', '.join(missing)}")
            print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(f"up's output: {platform.output}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {folder}")


if __name__ == "__main__":
    main()
