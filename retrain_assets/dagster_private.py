"""Every private Dagster name the package uses, in one module, checked against one version.

Dagster 1.13 offers no public way for these five needs; every other module uses Dagster's
public API only (`retrain_assets_tests/test_dagster_private.py` fails when another module
names `dagster._`, and when the installed Dagster is not `CHECKED_AGAINST` or one of these
names changed, so an upgrade breaks loudly here instead of quietly somewhere else):

- `CheckTarget`: the materialization a check evaluation is aimed at. The UI shows a check's
  partition passed or failed only when its latest evaluation targets the partition's latest
  materialization; `dg.AssetCheckEvaluation` takes one, but its type is not exported.
- `BulkActionStatus`, `PartitionBackfill`: `DagsterInstance.get_backfills` filters by the
  first and returns the second; neither is exported (`policy/settled.py`).
- `CheckRunHealthResult`, `WorkerStatus`: what `RunLauncher.check_run_worker_health`
  returns; the public `dg.RunLauncher` names them, Dagster does not export them
  (`runtime/run_launcher.py`).
- `code_server_class`, `MP_CONTEXT_ATTRIBUTE`: the code server's class and the attribute its
  constructor sets to the "spawn" context it starts runs from (`run_workers.py`).
- `storage_engine`, `replace_event_log_storage`: the SQLAlchemy engine dagster-postgres keeps
  as `_engine` (the pooled storage pings it on checkout), and the attribute
  `DagsterPostgresStorage` keeps its event log in (`_event_log_storage`), replaced by the one
  that caches the catalog's answers (`runtime/dagster_storage.py`).
"""

from __future__ import annotations

import sys
from typing import Any

from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData as CheckTarget,
)
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

CHECKED_AGAINST = "1.13.27"  # the Dagster version whose source these names were read in
CODE_SERVER_MODULE = "dagster._grpc.server"
CODE_SERVER_CLASS = "DagsterApiServer"
MP_CONTEXT_ATTRIBUTE = "_mp_ctx"
ENGINE_ATTRIBUTE = "_engine"
EVENT_LOG_ATTRIBUTE = "_event_log_storage"

__all__ = [
    "CHECKED_AGAINST",
    "BulkActionStatus",
    "CheckRunHealthResult",
    "CheckTarget",
    "PartitionBackfill",
    "WorkerStatus",
    "code_server_class",
    "replace_event_log_storage",
    "storage_engine",
]


def code_server_class() -> type | None:
    """Return Dagster's code server class if this process loaded it (the code server), else None.

    Looked up, never imported: importing it elsewhere would load the gRPC server for nothing.
    """
    module = sys.modules.get(CODE_SERVER_MODULE)
    return None if module is None else getattr(module, CODE_SERVER_CLASS)


def storage_engine(storage: object) -> Any:
    """Return the SQLAlchemy engine of a dagster-postgres run, event log or schedule storage.

    Raises:
        TypeError: `storage` keeps no engine under the name this Dagster version uses.
    """
    engine = getattr(storage, ENGINE_ATTRIBUTE, None)
    if engine is None:
        raise TypeError(
            f"{type(storage).__name__} has no {ENGINE_ATTRIBUTE!r}: dagster-postgres changed "
            f"since {CHECKED_AGAINST} (retrain_assets/dagster_private.py)"
        )
    return engine


def replace_event_log_storage(storage: object, event_log: object) -> None:
    """Make a dagster-postgres `DagsterPostgresStorage` use `event_log` as its event log.

    Raises:
        TypeError: `storage` keeps no event log under the name this Dagster version uses.
    """
    if not hasattr(storage, EVENT_LOG_ATTRIBUTE):
        raise TypeError(
            f"{type(storage).__name__} has no {EVENT_LOG_ATTRIBUTE!r}: dagster-postgres changed "
            f"since {CHECKED_AGAINST} (retrain_assets/dagster_private.py)"
        )
    setattr(storage, EVENT_LOG_ATTRIBUTE, event_log)
