"""What the model side's tests start from: two tenants' published days, and the world's parts."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from retrain_assets.demo.tenants import TenantSpec
from retrain_assets_tests.gpu.service_process import ServiceProcess

START = dt.date(2025, 1, 1)
DAYS = 50
TENANTS = (
    TenantSpec("alpha-us", "US", stores=2, items=4, seed=1),
    TenantSpec("beta-de", "DE", stores=2, items=3, seed=2),
)


@dataclass(frozen=True)
class ModelWorld:
    """The `model_world` fixture: features published for DAYS days and the services around them.

    `instance` is Postgres-backed (runs are visible to a webserver), `service` a real GPU
    service process, `db` the project database's URL, `last_day` the last published day.
    """

    instance: dg.DagsterInstance
    service: ServiceProcess
    db: str
    last_day: str
    mlflow_uri: str
    home: Path
