"""The chaos suite's calendar, customers' roles and platform settings, and what a test gets."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.conftest import SHARED_PLATFORM_ENV
from retrain_assets_tests.gpu.restartable_postgres import RestartablePostgres
from retrain_assets_tests.support.platform import STARTUP_SECONDS, RunningPlatform

START, LAST = dt.date(2025, 1, 1), dt.date(2025, 3, 5)
FIRST_FEATURE_DAY = START + dt.timedelta(days=28)
# role -> (stores, items): trainings are small; rollouts need rows enough for their analyses
ROLES = {
    "dcand": (2, 4),  # the code server killed with the candidate run in flight
    "r10": (6, 20),  # dagster-daemon killed in CANARY_10
    "grun": (2, 4),  # gpu-service killed with a job running
    "gqueue": (2, 4),  # gpu-service killed with a job queued behind it
    "mcand": (2, 4),  # MLflow killed when the candidate run is requested or in flight
    "mreg": (2, 4),  # MLflow killed between the passing verdict and the registration
    "pgate": (2, 4),  # Postgres killed while the gate is evaluated
    "r50": (6, 20),  # Postgres killed in CANARY_50
}
CHAOS_ENV = {
    **SHARED_PLATFORM_ENV,
    "RETRAIN_GPU_SLOTS": "1",
    # MLflow alone took over 120 s to answer on a loaded 2-core host: wait as long as the test
    "RETRAIN_READY_TIMEOUT_SECONDS": str(STARTUP_SECONDS),
    # a canary step with no traffic waits (the tests hold a rollout at a step that way)
    "RETRAIN_ROLLOUT_MAX_NO_DATA_INTERVALS": "100000",
}


@dataclass
class ChaosWorld:
    """The chaos platform, its killable Postgres and the customer of each role."""

    platform: RunningPlatform
    postgres: RestartablePostgres
    specs: dict[str, TenantSpec]

    def name(self, role: str) -> str:
        """Return the customer of a role."""
        return self.specs[role].name
