"""A canary analysis records how often the canary's prediction intervals held the actuals."""

from __future__ import annotations

import time
from types import SimpleNamespace

from retrain_assets.deployment.mirror import mirror_analyses
from retrain_assets.store.database import transaction
from retrain_assets_tests.deployment.test_canary_evidence_rollout import LoggedBatches
from retrain_assets_tests.deployment.test_rollout_machine import rows

# What the prediction service logs for a canary row whose model carries intervals
# (`prediction_log.intervals`); `contract.serve_rows` logs none, so they are added here: an
# 80 % interval of +-10 % around the forecast and a 95 % one of +-1 %.
BOUNDS = (
    "UPDATE prediction_log SET intervals = jsonb_build_object("
    "'80', jsonb_build_array(prediction * 0.9, prediction * 1.1),"
    "'95', jsonb_build_array(prediction * 0.99, prediction * 1.01))"
    " WHERE alias = 'canary'"
)


def test_each_analysis_records_the_canarys_coverage_on_its_rows_with_actuals(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    # the canary forecasts 5 % above the actual: inside +-10 %, outside +-1 % (unless 0)
    world.serve("acme", {"1": world.model("acme", 1.3), "2": world.model("acme", 1.05)})
    with transaction(world.db) as cur:
        cur.execute(BOUNDS)
        cur.execute("SELECT count(*) FROM prediction_log WHERE alias = 'canary' AND prediction = 0")
        zeros = cur.fetchone()[0]  # a forecast of 0 for an actual of 0: inside both
    world.clock.forward(61)
    assert world.advance().results["acme"].pointer.state == "CANARY_50"
    [(coverage, counted, passed)] = rows(
        world.db, "SELECT canary_coverage, rows_with_actuals, passed FROM rollout_analyses"
    )
    assert passed  # recorded beside the analysis, not a reason to fail it
    assert coverage["rows"] == counted > 0
    assert coverage["80"] == 1.0
    assert coverage["95"] == round(zeros / counted, 4)
    with transaction(world.db) as cur:  # the decision's MLflow run, as deploy_model opens it
        cur.execute("UPDATE deployment_decisions SET mlflow_run_id = 'run-1'")
    client = LoggedBatches()  # the mirror logs it with the analysis's other numbers
    mirror_analyses(world.db, SimpleNamespace(client=client), time.monotonic() + 30)
    [(_, metrics, _)] = client.batches
    assert metrics["CANARY_10/coverage_80"] == 1.0
    assert metrics["CANARY_10/coverage_rows"] == counted


def test_a_canary_that_logged_no_bounds_records_no_coverage(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    world.serve("acme", {"1": world.model("acme", 1.3), "2": world.model("acme", 1.05)})
    world.clock.forward(61)
    world.advance()
    assert rows(world.db, "SELECT canary_coverage FROM rollout_analyses") == [(None,)]
