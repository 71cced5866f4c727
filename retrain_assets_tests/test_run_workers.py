"""Dagster runs start as forks of a process with the code location loaded (run_workers).

The code server's own start method is replaced on its class, in the code server process only;
these tests check the replacement still reaches what Dagster's server starts runs with, and
that a worker started from the context Dagster now gets has the code location loaded already.
"""

import inspect
import os
import subprocess
import sys

import dagster._grpc.server
import pytest

from retrain_assets.run_workers import run_start_method
from retrain_assets.settings_model import SettingsError

IN_A_CODE_SERVER = """
import os, sys


def probe(queue):
    queue.put((os.getppid(), "retrain_assets.definitions" in sys.modules))


if __name__ == "__main__":
    import dagster._grpc.server as server
    from multiprocessing import forkserver
    import retrain_assets.definitions  # what the code server loads; installs the run workers

    started_at_load = forkserver._forkserver._forkserver_pid is not None  # before any run
    context = server.DagsterApiServer.__dict__["_mp_ctx"].fget(None)
    queue = context.Queue()
    worker = context.Process(target=probe, args=(queue,))
    worker.start()
    parent, preloaded = queue.get(timeout=60)
    worker.join()
    print(context.get_start_method(), parent != os.getpid(), preloaded, started_at_load)
"""


def test_dagster_s_server_still_starts_runs_with_the_context_we_replace() -> None:
    source = inspect.getsource(dagster._grpc.server.DagsterApiServer)
    assert 'self._mp_ctx = multiprocessing.get_context("spawn")' in source
    assert "self._mp_ctx.Process(" in source


def test_a_run_worker_is_a_fork_of_a_server_with_the_code_location_loaded(tmp_path) -> None:
    script = tmp_path / "server.py"
    script.write_text(IN_A_CODE_SERVER)
    printed = subprocess.run(
        [sys.executable, "-W", "ignore", str(script)],
        env={**os.environ, "RETRAIN_RUN_WORKERS": "forkserver"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split()
    # the forkserver is the worker's parent (not the server), the import was done there, and
    # it started when the code location loaded, not inside the first run's StartRun call
    assert printed == ["forkserver", "True", "True", "True"]


def test_the_setting_picks_the_start_method_and_names_a_bad_value(monkeypatch) -> None:
    monkeypatch.delenv("RETRAIN_RUN_WORKERS", raising=False)
    assert run_start_method() == "spawn"
    monkeypatch.setenv("RETRAIN_RUN_WORKERS", "ForkServer")
    assert run_start_method() == "forkserver"
    monkeypatch.setenv("RETRAIN_RUN_WORKERS", "fork")
    with pytest.raises(SettingsError, match="RETRAIN_RUN_WORKERS=fork: must be one of spawn, fork"):
        run_start_method()
