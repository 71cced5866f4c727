"""Private Dagster names live in one module, and an upgrade that changes them fails here.

`retrain_assets/dagster_private.py` (a layer of its own, below every other module) names each
private name the package uses; these tests fail when any other module names `dagster._`, when
the installed Dagster is not the version those names were read in, and when one of them is
gone or has another shape.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import dagster as dg
import dagster._grpc.server as code_server
import dagster_postgres
import pytest

from retrain_assets import dagster_private

PACKAGE = Path(__file__).resolve().parent.parent / "retrain_assets"
ALLOWED = PACKAGE / "dagster_private.py"
PRIVATE = re.compile(r"^dagster(_postgres|_shared)?\._")


def private_uses(package: Path) -> list[str]:
    """Return `file:line name` of every private Dagster import or module name outside ALLOWED.

    Imports (`import dagster._x`, `from dagster._x import y`, `from dagster import _x`) and
    string constants naming a private module (looked up in `sys.modules`, imported by name).
    """
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]
            for name in names:
                if PRIVATE.match(name):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} {name}")
    return found


def test_no_module_but_dagster_private_names_a_private_dagster_module():
    assert private_uses(PACKAGE) == [], "move it into retrain_assets/dagster_private.py"


def test_the_check_sees_each_kind_of_private_use(tmp_path: Path):
    fake = tmp_path / "retrain_assets"
    fake.mkdir()
    (fake / "dagster_private.py").write_text("import dagster._core\n")  # not PACKAGE's: counted
    (fake / "a.py").write_text(
        "import dagster\nfrom dagster._serdes import X\nfrom dagster import _check\n"
        "import dagster_postgres.utils\nMODULE = 'dagster._grpc.server'\n"
    )
    assert private_uses(fake) == [
        "retrain_assets/a.py:2 dagster._serdes",
        "retrain_assets/a.py:2 dagster._serdes.X",
        "retrain_assets/a.py:3 dagster._check",
        "retrain_assets/a.py:5 dagster._grpc.server",
        "retrain_assets/dagster_private.py:1 dagster._core",
    ]


def test_the_installed_dagster_is_the_version_the_private_names_were_read_in():
    assert dg.__version__ == dagster_private.CHECKED_AGAINST, (
        f"Dagster {dg.__version__} installed: re-read each name in retrain_assets/"
        f"dagster_private.py in its source, then set CHECKED_AGAINST"
    )


def test_the_check_target_is_the_record_evaluations_take():
    fields = dagster_private.CheckTarget.__annotations__
    assert sorted(fields) == ["run_id", "storage_id", "timestamp"]
    target = dagster_private.CheckTarget(storage_id=1, run_id="r", timestamp=0.0)
    evaluation = dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("a"), check_name="c", passed=True, target_materialization_data=target
    )
    assert evaluation.target_materialization_data == target


def test_the_backfill_names_are_what_get_backfills_takes_and_returns():
    assert dagster_private.BulkActionStatus.REQUESTED.value == "REQUESTED"
    get_backfills = inspect.signature(dg.DagsterInstance.get_backfills)
    assert "status" in get_backfills.parameters
    fields = set(inspect.signature(dagster_private.PartitionBackfill).parameters)
    assert {"backfill_id", "status", "asset_selection", "partition_set_origin"} <= fields


def test_the_launcher_health_names_are_what_run_launchers_return():
    result = dagster_private.CheckRunHealthResult(dagster_private.WorkerStatus.FAILED, "gone")
    assert (result.status, result.msg) == (dagster_private.WorkerStatus.FAILED, "gone")
    assert {"RUNNING", "FAILED", "SUCCESS"} <= set(dagster_private.WorkerStatus.__members__)
    hook = inspect.signature(dg.DefaultRunLauncher.check_run_worker_health)
    assert list(hook.parameters) == ["self", "run"]


def test_the_code_server_still_sets_the_context_it_starts_runs_from():
    assert dagster_private.code_server_class() is code_server.DagsterApiServer  # loaded above
    source = inspect.getsource(code_server.DagsterApiServer)
    attribute = dagster_private.MP_CONTEXT_ATTRIBUTE
    assert f'self.{attribute} = multiprocessing.get_context("spawn")' in source
    assert f"self.{attribute}.Process(" in source


def test_dagster_postgres_still_keeps_its_engine_and_event_log_where_we_reach_them():
    engine = dagster_private.ENGINE_ATTRIBUTE
    for storage in (
        dagster_postgres.PostgresEventLogStorage,
        dagster_postgres.PostgresRunStorage,
        dagster_postgres.PostgresScheduleStorage,
    ):
        assert f"self.{engine} = create_pg_engine(" in inspect.getsource(
            storage.optimize_for_webserver
        )
    init = inspect.getsource(dagster_postgres.DagsterPostgresStorage.__init__)
    assert f"self.{dagster_private.EVENT_LOG_ATTRIBUTE} = PostgresEventLogStorage(" in init
    with pytest.raises(TypeError, match="has no '_engine'"):
        dagster_private.storage_engine(object())
    with pytest.raises(TypeError, match="has no '_event_log_storage'"):
        dagster_private.replace_event_log_storage(object(), None)
