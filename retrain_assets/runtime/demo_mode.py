"""The live demo under `up`: when it is on, what it lands, which process keeps it alive.

The demo is on when `up` runs without `--no-demo`, on the local landing zone (never one named
by RETRAIN_LANDING_URL: that belongs to real tenants), and either that zone is empty (the demo
tenants are landed now) or an earlier `up` landed them (a marker under RETRAIN_HOME says so).
Its short intervals are defaults for the children only; a variable set by the user wins, and
the production defaults elsewhere never change.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from retrain_assets.demo.seed import seed_if_empty
from retrain_assets.runtime.supervisor import ChildSpec
from retrain_assets.settings import landing_root, retrain_home

MARKER = "demo-tenants"
DEFAULT_DAY_SECONDS = 20.0

# Demo-only defaults for the children's settings (production defaults live with each setting).
DEMO_ENVIRONMENT = {
    "RETRAIN_POLL_INTERVAL_SECONDS": "5",
    "RETRAIN_POLICY_INTERVAL_SECONDS": "10",
    # a canary step of two demo days, judged on a demo tenant's few dozen forecasts a day
    "RETRAIN_ROLLOUT_INTERVAL_SECONDS": "5",
    "RETRAIN_ROLLOUT_STEP_SECONDS": "40",
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "20",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "20",
    "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS": "120",
}


def demo_day_seconds() -> float:
    """Return RETRAIN_DEMO_DAY_SECONDS: seconds between demo days (default 20; 0: no clock).

    Raises:
        ValueError: the value is not a number >= 0.
    """
    text = os.environ.get("RETRAIN_DEMO_DAY_SECONDS", str(DEFAULT_DAY_SECONDS))
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(
            f"RETRAIN_DEMO_DAY_SECONDS must be a number of seconds, not {text!r}"
        ) from None
    if seconds < 0:
        raise ValueError(f"RETRAIN_DEMO_DAY_SECONDS must be 0 (off) or positive, not {seconds}")
    return seconds


def start_demo(requested: bool, say: Callable[[str], None]) -> bool:
    """Land the demo tenants if this is the demo's first start; return whether the demo is on."""
    if not requested or os.environ.get("RETRAIN_LANDING_URL"):
        return False
    marker = retrain_home() / MARKER
    landed = seed_if_empty(landing_root())
    for spec, days in landed:
        say(f"landed demo tenant {spec.name} ({spec.country}): {len(days)} day(s) "
            f"{days[0]} .. {days[-1]}")
    if landed:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("the demo tenants were landed by `retrain-assets up`\n")
    return marker.exists()


def demo_children(on: bool) -> list[ChildSpec]:
    """Return the demo's own processes: the clock that lands a day every few seconds."""
    if not on or demo_day_seconds() == 0:
        return []
    command = str(Path(sys.executable).parent / "retrain-assets")
    return [ChildSpec(name="demo-clock", argv=(command, "demo-clock"))]


def demo_environment(env: dict[str, str], on: bool) -> dict[str, str]:
    """Return `env` with the demo's short intervals where the user set none."""
    if not on:
        return env
    return {**DEMO_ENVIRONMENT, **env}
