"""Profile one candidate run (model_candidate + beats_champion + registered_model) in-process.

The models test world (features published for two tenants, the real GPU service, a real MLflow
server, a Postgres-backed Dagster instance; `retrain_assets_tests/models/conftest.py`): a
`training_job` is materialized, the poller is ticked until it requests the candidate run, and
that run is executed as the daemon would launch it (`test_gate_flow.execute`, the request's
selection and checks) under cProfile. It prints the run's wall time and the heaviest calls,
and keeps the profile in `$RETRAIN_PROFILE` (default /tmp/candidate_run.prof). The fixtures
come from the test package, so it runs under pytest:

    .venv/bin/python -m pytest -p retrain_assets_tests.conftest \\
        -p retrain_assets_tests.models.conftest benchmarks/profile_candidate_run.py -s -q
"""

import cProfile
import os
import pstats
import time

from retrain_assets.models.training_job_asset import training_job
from retrain_assets_tests.models.test_gate_flow import STRONG, execute
from retrain_assets_tests.models.test_training_flow import (
    materialize,
    poll_until_requested,
    train_config,
)


def test_profile_candidate_run(model_world):
    instance = model_world.instance
    materialize(instance, [training_job], train_config(**STRONG))
    request = poll_until_requested(instance, seconds=300)
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    result = execute(instance, request)
    profile.disable()
    print(f"\ncandidate run: {time.perf_counter() - started:.2f} s, load {os.getloadavg()[0]:.1f}")
    path = os.environ.get("RETRAIN_PROFILE", "/tmp/candidate_run.prof")
    profile.dump_stats(path)
    pstats.Stats(path).sort_stats("cumulative").print_stats(40)
    assert result.success
