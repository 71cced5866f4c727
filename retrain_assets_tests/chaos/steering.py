"""Steering a chaos customer to a wait point: a training of a chosen pace, a held rollout.

A training is launched from the launchpad's path with its days and, for a slow remote job,
the GPU service's `slow_seconds_per_round` fault. A rollout is held at its canary step by
sending it no traffic (a step without data waits) and let go by a retailer that asks for
forecasts of days whose sales have landed.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

import requests

from retrain_assets.demo.forecast_requests import request_rows
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.chaos.end_state import pointer
from retrain_assets_tests.chaos.world import FIRST_FEATURE_DAY, LAST, ChaosWorld
from retrain_assets_tests.deployment.platform_helpers import (
    features,
    launch,
    register_version,
    step_failures,
    wait_for_end,
)
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.waiting import wait_until


def launch_training(
    platform: RunningPlatform, customer: str, rounds: int = 40, slow: float | None = None
) -> str:
    """Launch training_job for the customer over the published days; return the run id."""
    config: dict = {
        "first_day": (LAST - dt.timedelta(days=27)).isoformat(),
        "last_day": LAST.isoformat(),
        "num_boost_round": rounds,
        "checkpoint_every": 10,
    }
    if slow:
        config["faults"] = {"slow_seconds_per_round": slow, "on_attempts": [1]}
    run_config = {"ops": {"training_job": {"config": config}}}
    return launch(platform, "__ASSET_JOB", customer, ["training_job"], run_config)


def wait_for(condition: Callable[[], object], seconds: float, what: str) -> None:
    """Wait for a wait point, checking often: some are only seconds long."""
    wait_until(condition, seconds, what, interval=0.1)


def state_of(platform: RunningPlatform, machine: str, customer: str) -> str | None:
    """Return the state of the customer's machine (None before it has one)."""
    found = pointer(platform, machine, customer)
    return found[0] if found else None


def gpu_job_status(platform: RunningPlatform, customer: str) -> str | None:
    """Return the status of the customer's newest GPU job, read from the service's table."""
    rows = platform.query(
        "gpu",
        "SELECT status FROM jobs WHERE customer = %s ORDER BY created_at DESC LIMIT 1",
        (customer,),
    )
    return rows[0][0] if rows else None


def deploy_all(platform: RunningPlatform, customers: list[str]) -> None:
    """Launch `deploy_model` for every customer at once (one run each); wait for them all."""
    runs = [launch(platform, "deploy_model", customer) for customer in customers]
    for run in runs:
        assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)


def canaries(world: ChaosWorld, roles: list[str]) -> None:
    """Deploy a weak first version (promoted directly), then a strong one: each in CANARY_10.

    The customers' runs go side by side; each rollout is then held in CANARY_10 (no traffic).
    """
    platform = world.platform
    names = [world.name(role) for role in roles]
    for customer in names:
        early = features(platform, customer, FIRST_FEATURE_DAY, LAST - dt.timedelta(days=10))
        register_version(platform, customer, f"{customer}-weak", early, rounds=12)
    deploy_all(platform, names)
    for customer in names:
        train = features(platform, customer, FIRST_FEATURE_DAY, LAST)
        register_version(platform, customer, f"{customer}-strong", train, rounds=150)
    deploy_all(platform, names)
    for customer in names:
        assert state_of(platform, "rollout", customer) == "CANARY_10", customer


class Retailer(threading.Thread):
    """Asks the prediction service for forecasts of landed days while `sending` is set."""

    def __init__(self, platform: RunningPlatform, spec: TenantSpec) -> None:
        super().__init__(daemon=True)
        self.url = f"{platform.serve_url()}/forecast/{spec.name}"
        self.token = platform.serve_token()
        days = [LAST - dt.timedelta(days=back) for back in range(6)]
        self.rows = [row for day in days for row in request_rows(spec, day)]
        self.sending, self.stopped = threading.Event(), threading.Event()
        self.answers: list[int] = []

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token}"
        while not self.stopped.wait(1.0):
            if not self.sending.is_set():
                continue
            try:
                answer = session.post(self.url, json={"rows": self.rows}, timeout=60)
                self.answers.append(answer.status_code)
            except requests.RequestException:
                self.answers.append(0)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=90)
