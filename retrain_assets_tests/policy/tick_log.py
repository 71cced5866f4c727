"""The policy's tick evaluated in-process, with the messages its log received."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

from retrain_assets.automation.retraining_policy import retraining_policy
from retrain_assets.features.parquet_store import PartitionStorage
from retrain_assets.store.resource import ProjectDatabase


class Messages(logging.Handler):
    """Keeps every message the tick logs, as the tick's log in the UI shows them."""

    def __init__(self) -> None:
        """Start with none."""
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the message."""
        self.lines.append(record.getMessage())


def logged_tick(
    instance: dg.DagsterInstance, db: str, storage: Path
) -> tuple[dg.SensorResult, list[str]]:
    """Evaluate the sensor once; return its result and its log's messages."""
    resources = {
        "project_db": ProjectDatabase(url=db),
        "partition_storage": PartitionStorage(base_url=str(storage)),
    }
    context = dg.build_sensor_context(instance=instance, resources=resources)
    log = Messages()
    context.log.addHandler(log)
    return retraining_policy(context), log.lines
