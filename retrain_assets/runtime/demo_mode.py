"""The live demo under `up`: when it is on, what it lands, which process keeps it alive.

The demo is on when `up` runs without `--no-demo`, on the local landing zone (never one named
by RETRAIN_LANDING_URL: that belongs to real tenants), and either that zone is empty (the demo
tenants are landed now) or an earlier `up` landed them (a marker under RETRAIN_HOME says so).
Its short intervals are defaults for the children only; a variable set by the user wins, and
the production defaults elsewhere never change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from retrain_assets.demo.seed import seed_if_empty
from retrain_assets.deployment.records import set_auto_deploy
from retrain_assets.policy.thresholds import set_settings
from retrain_assets.runtime.supervisor import ChildSpec
from retrain_assets.settings import landing_root, retrain_home
from retrain_assets.settings_model import FIELDS, current_settings
from retrain_assets.store.customers import register_customer

MARKER = "demo-tenants"
DEFAULT_DAY_SECONDS: float = FIELDS["demo_day_seconds"].default

# Demo-only defaults for the children's settings (production defaults live with each setting).
DEMO_ENVIRONMENT = {
    "RETRAIN_POLL_INTERVAL_SECONDS": "5",
    "RETRAIN_POLICY_INTERVAL_SECONDS": "5",
    # a canary step of two demo days, judged on a demo tenant's few dozen forecasts a day
    # (sakura-jp's 10 % step gets about 5 canary rows a day: 10 of each take two days)
    "RETRAIN_ROLLOUT_INTERVAL_SECONDS": "5",
    "RETRAIN_ROLLOUT_STEP_SECONDS": "40",
    "RETRAIN_ROLLOUT_MIN_PREDICTIONS": "10",
    "RETRAIN_ROLLOUT_MIN_ACTUALS": "10",
    "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS": "120",
    # the demo clock writes whole files at once: a day is ready as soon as it has landed
    "RETRAIN_LANDING_INTERVAL_SECONDS": "5",
    "RETRAIN_LANDING_SETTLE_SECONDS": "1",
    "RETRAIN_SERVING_REPORT_INTERVAL_SECONDS": "5",
}


def demo_day_seconds() -> float:
    """Return RETRAIN_DEMO_DAY_SECONDS: seconds between demo days (default 20; 0: no clock).

    Raises:
        SettingsError: the value is not a number >= 0 (or another setting is bad).
    """
    return current_settings().demo_day_seconds


# What each demo tenant shows (demo/tenants.py has their regimes). northwind-us retrains on
# volume every week of demo days (1500 of its 240 rows a day), never on drift (its price cut is
# the change it learns; no alert); lindenhof-de retrains only on drift (its regime shift raises
# the alert a person approves); sakura-jp retrains every four demo days (180 of its 45 rows a
# day), so one challenger misses its festival and fails the gate, and the next, trained during
# it, meets the ordinary days after it in its canary.
DEMO_POLICY: dict[str, dict[str, float]] = {
    "northwind-us": {"min_new_rows": 1500, "drift_threshold": 100.0},
    "lindenhof-de": {"min_new_rows": 1_000_000},
    "sakura-jp": {"min_new_rows": 180},
}
DEMO_BY = "retrain-assets up (demo)"


def start_demo(requested: bool, app_db_url: str, say: Callable[[str], None]) -> bool:
    """Land the demo tenants if this is the demo's first start; return whether the demo is on.

    On that first start each demo tenant is also registered with its demo settings: its
    retraining policy (DEMO_POLICY) and `auto_deploy` on, so a passing candidate rolls out
    without anyone clicking. Later starts leave the settings as the user left them.
    """
    if not requested or current_settings().landing_url:
        return False
    marker = retrain_home() / MARKER
    landed = seed_if_empty(landing_root())
    for spec, days in landed:
        say(
            f"landed demo tenant {spec.name} ({spec.country}): {len(days)} day(s) "
            f"{days[0]} .. {days[-1]}"
        )
        register_customer(app_db_url, spec.name, spec.country, DEMO_BY)
        if spec.name in DEMO_POLICY:
            set_settings(app_db_url, spec.name, DEMO_POLICY[spec.name], DEMO_BY)
        set_auto_deploy(app_db_url, spec.name, True, DEMO_BY)
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
