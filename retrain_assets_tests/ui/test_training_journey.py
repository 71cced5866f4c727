"""Journey (c): training one customer from the UI, followed to its registered candidate and on
to its deployment.

As docs/policy.md's "Training a customer from the UI" says: open training_job, choose the
customer's partition, materialize with no config. The run ends in seconds; the poller's run
then fetches, gates and registers the candidate, and both show on their assets' pages. Then,
as "Deploying a model" says: deploy_model's launchpad, the customer's partition, Launch
Run. The run evaluates the deploy-time check and records the deployment; the
customer has no champion yet, so `rollout_controller` promotes the version directly, and the
rollout's moves show on `deployment_decision`'s partition; `deployed_model`'s partition then
says the version that serves, and its freshness check that the version is fresh.
"""

import pytest

from retrain_assets_tests.deployment.platform_helpers import partition_status
from retrain_assets_tests.support.ui_actions import publish_days
from retrain_assets_tests.support.waiting import wait_until
from retrain_assets_tests.ui.dagster_ui import (
    choose_partition,
    follow_run,
    freshness_detail,
    launch_from_launchpad,
    launch_one_run,
    open_job_launchpad,
    open_materialize_dialog,
    open_run,
    partition_detail,
)
from retrain_assets_tests.ui.model_runs import training_run_key, verdict, wait_for_candidate_run
from retrain_assets_tests.ui.tenants import FIRST_FEATURE_DAY, FIRST_LANDED, LAST_DAY, land

pytestmark = [pytest.mark.system, pytest.mark.browser]


def rollout_of(platform, customer: str) -> tuple | None:
    """Return the customer's latest rollout: (decision's run, version, outcome, reason)."""
    rows = platform.query(
        "app",
        "SELECT d.dagster_run_id, r.version, r.outcome, r.reason FROM rollouts r "
        "JOIN deployment_decisions d ON d.id = r.decision_id WHERE r.customer = %s "
        "ORDER BY r.id DESC LIMIT 1",
        (customer,),
    )
    return rows[0] if rows else None


def test_training_a_customer_from_the_ui_ends_with_its_candidate_registered_and_deployed(
    journey, ui_platform
):
    platform = ui_platform
    customer = land(platform, "train")
    publish_days(platform, "sales", FIRST_LANDED.isoformat(), LAST_DAY)
    publish_days(platform, "store_day_features", FIRST_FEATURE_DAY, LAST_DAY)

    dialog = open_materialize_dialog(journey, "training_job")
    journey.shot("training_job: the materialize dialog")
    choose_partition(journey, dialog, customer)
    journey.shot(f"{customer} chosen, no config")
    run_id = launch_one_run(journey, dialog)
    follow_run(journey, run_id, seconds=120)
    key = training_run_key(platform, customer)
    journey.wait_visible(
        journey.page.get_by_text(key, exact=True), 60, f"run key {key} in the run's log"
    )
    journey.shot("training_job succeeded: the run ended, the GPU job goes on")
    decided = platform.query(
        "app",
        "SELECT policy, decided_by, first_day::text, last_day::text FROM retraining_decisions "
        "WHERE customer = %s AND dagster_run_id = %s",
        (customer, run_id),
    )
    # no config: the policy's window, the unbroken published days ending at the latest
    [(policy, decided_by, first_day, last_day)] = decided
    assert (policy, decided_by, last_day) == ("manual", "manual via the Dagster UI", LAST_DAY)
    assert first_day <= FIRST_FEATURE_DAY

    candidate_run_id = wait_for_candidate_run(platform, key, seconds=180)
    open_run(journey, candidate_run_id)
    follow_run(journey, candidate_run_id, seconds=300)
    journey.shot("the poller's candidate run succeeded")
    assert verdict(platform, key).passed

    candidate = partition_detail(journey, "model_candidate", customer)
    assert key in candidate.inner_text()
    journey.shot(f"model_candidate of {customer}")
    registered = partition_detail(journey, "registered_model", customer)
    shown = registered.inner_text()
    assert key in shown and "challenger" in shown and f"demand_forecast.{customer}" in shown
    journey.shot(f"registered_model of {customer}")

    # Deploying it, as docs/deployment.md says: deploy_model's launchpad, the partition, Launch Run.
    open_job_launchpad(journey, "deploy_model")
    journey.shot("deploy_model: the launchpad")
    deploy_run_id = launch_from_launchpad(journey, customer)
    follow_run(journey, deploy_run_id, seconds=180)
    journey.shot("deploy_model succeeded: the check passed, the rollout started, the run ended")
    checked = platform.query(
        "app",
        "SELECT passed FROM gate_results WHERE run_key = %s "
        "AND gate = 'challenger_beats_champion_now' AND dagster_run_id = %s",
        (key, deploy_run_id),
    )
    assert checked == [(True,)], checked

    # No champion yet: rollout_controller promotes the first deployment without a canary.
    wait_until(
        lambda: (rollout_of(platform, customer) or (None,) * 3)[2] is not None,
        120,
        f"the rollout of {customer} finishing",
        detail=lambda: str(rollout_of(platform, customer)),
    )
    run_id_of_decision, version, outcome, reason = rollout_of(platform, customer)
    assert (run_id_of_decision, outcome) == (deploy_run_id, "promoted"), reason
    assert "first deployment" in reason
    decided = partition_detail(journey, "deployment_decision", customer)
    journey.wait_visible(
        decided.get_by_text("DONE", exact=True), 60, "the rollout's last move (DONE)"
    )
    assert key in decided.inner_text()
    journey.shot(f"deployment_decision of {customer}: version {version}, rollout DONE")

    # What serves: deployed_model is materialized by the champion's move, with its version,
    # and the customer's freshness check says it is fresh.
    wait_until(  # the pane shows what was there when it opened
        lambda: partition_status(platform, "deployed_model", customer) == "materialized",
        60,
        f"serving_report materializing deployed_model for {customer}",
    )
    deployed = partition_detail(journey, "deployed_model", customer)
    assert version in deployed.inner_text() and key in deployed.inner_text()
    journey.shot(f"deployed_model of {customer}: version {version} serves")
    fresh = freshness_detail(journey, customer)
    journey.wait_visible(fresh.get_by_text(f"serving {version}"), 60, "the freshness verdict")
    assert "published day(s) behind" in fresh.inner_text()
    journey.shot(f"serving_model_fresh of {customer}")
