"""Journey (b): reading each customer's beats_champion verdict in model_candidate's Checks tab.

Two customers, trained through the real GPU service and the daemon's poller: one candidate
that beats seasonal naive, and one that does not beat the champion it is measured against
(the first customer's kind of candidate, deployed from deploy_model as a person does, then a
barely trained challenger with `auto_deploy` on, so its failed run planned the deployment too).
After that failed gate, `deployed_model`'s partition still says what serves, its freshness
check names the failed gate and its audit passed in that run (issue 27).
"""

import re

import pytest

from retrain_assets.registry.mlflow_registry import CHAMPION, MlflowRegistry, model_name
from retrain_assets_tests.deployment.platform_helpers import (
    check_partition_status,
    cli,
    launch,
    partition_status,
    step_failures,
    wait_for_end,
)
from retrain_assets_tests.support.ui_actions import launch_run, publish_days, wait_for_run
from retrain_assets_tests.support.waiting import wait_until
from retrain_assets_tests.ui.dagster_ui import (
    check_partition_detail,
    freshness_detail,
    partition_detail,
    verdict_tag,
)
from retrain_assets_tests.ui.model_runs import (
    training_run_key,
    verdict,
    wait_for_candidate_run_end,
)
from retrain_assets_tests.ui.tenants import FIRST_FEATURE_DAY, FIRST_LANDED, LAST_DAY, land_many

pytestmark = [pytest.mark.system, pytest.mark.browser]

WEAK = {"num_boost_round": 2, "learning_rate": 0.01}  # barely moves off the mean
AUDIT = "deployments_match_decisions"


def launch_training(platform, customer: str, **params) -> str:
    """Launch training_job for a customer on the journeys' snapshot, as the launchpad would."""
    config = {"first_day": FIRST_FEATURE_DAY, "last_day": LAST_DAY, **params}
    return launch_run(
        platform,
        "__ASSET_JOB",
        {"dagster/partition": customer},
        ["training_job"],
        run_config={"ops": {"training_job": {"config": config}}},
    )


def gated(platform, customer: str, run_id: str) -> tuple[str, str]:
    """Wait for a training run and then for the gate of the candidate it handed off.

    Returns the run key and how its candidate run ended (a failed gate fails that run).
    """
    wait_for_run(platform, run_id)
    key = training_run_key(platform, customer)
    return key, wait_for_candidate_run_end(platform, key, seconds=180)


def train(platform, customer: str, **params) -> tuple[str, str]:
    """Train a customer and wait for the gate (launch_training, then gated)."""
    return gated(platform, customer, launch_training(platform, customer, **params))


def read_gate(journey, customer: str) -> tuple[str, str]:
    """Open beats_champion for the customer's partition; return its verdict tag and text."""
    pane = check_partition_detail(journey, "model_candidate", "beats_champion", customer)
    journey.shot(f"beats_champion of {customer}")
    return verdict_tag(pane), pane.inner_text()


def deploy_first(platform, customer: str, version: str) -> None:
    """Deploy the customer's challenger from deploy_model; wait until it is the champion."""
    run = launch(platform, "deploy_model", customer)
    assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)
    registry = MlflowRegistry(platform.mlflow_url())
    wait_until(
        lambda: registry.aliases(customer).get(CHAMPION) == version,
        120,
        f"{customer}'s first deployment promoted",
    )


def test_each_customers_gate_verdict_reads_the_same_in_the_checks_tab(journey, ui_platform):
    platform = ui_platform
    winner, loser = land_many(platform, "gate-pass", "gate-fail")
    publish_days(platform, "sales", FIRST_LANDED.isoformat(), LAST_DAY)
    publish_days(platform, "store_day_features", FIRST_FEATURE_DAY, LAST_DAY)

    # The winner and the loser's future champion are two customers: they train side by side
    # (one GPU slot each), as two people launching them from the UI would.
    launched = {customer: launch_training(platform, customer) for customer in (winner, loser)}
    winner_key, ended = gated(platform, winner, launched[winner])
    assert ended == "SUCCESS" and verdict(platform, winner_key).passed
    champion_key, ended = gated(platform, loser, launched[loser])
    assert ended == "SUCCESS"
    [champion] = MlflowRegistry(platform.mlflow_url()).versions_of(loser, champion_key)
    deploy_first(platform, loser, champion.version)
    assert cli(platform, "deployments", "auto", loser, "on").returncode == 0
    loser_key, ended = train(platform, loser, **WEAK)
    assert ended == "FAILURE"  # the blocking check failed: registered_model never ran
    # That run shows on the assets it planned, never on what serves: the champion still does.
    assert partition_status(platform, "registered_model", loser) == "failed"
    assert partition_status(platform, "deployment_decision", loser) == "failed"
    wait_until(
        lambda: partition_status(platform, "deployed_model", loser) == "materialized",
        60,
        f"deployed_model of {loser} materialized by its promotion",
    )
    assert check_partition_status(platform, "deployed_model", AUDIT, loser) == "succeeded"
    expected = {winner: verdict(platform, winner_key), loser: verdict(platform, loser_key)}
    assert not expected[loser].passed
    assert f"{model_name(loser)} v{champion.version}" in expected[loser].reason

    for customer, recorded in expected.items():
        tag, text = read_gate(journey, customer)
        assert tag == ("Passed" if recorded.passed else "Failed"), text
        assert recorded.reason in text  # the description, in one sentence
        assert recorded.reference in text  # the metadata: what it was measured against
        assert recorded.dagster_run_id[:8] in text  # the evaluation of this run

    # deployed_model's Partitions and Checks tabs after that failed gate: what serves, fresh,
    # the failed gate named, and the audit evaluated (Passed) in the failed run.
    served = partition_detail(journey, "deployed_model", loser)
    assert re.search(rf"\bversion\s+{champion.version}\s+serving_since", served.inner_text())
    journey.shot(f"deployed_model of {loser}: v{champion.version} serves after a failed gate")
    fresh = freshness_detail(journey, loser)
    journey.wait_visible(fresh.get_by_text("failed its gate"), 90, "the freshness check's cause")
    assert f"serving {champion.version}" in fresh.inner_text()
    journey.shot(f"serving_model_fresh of {loser}: names the failed gate")
    audit = check_partition_detail(journey, "deployed_model", AUDIT, loser)
    assert verdict_tag(audit) == "Passed", audit.inner_text()
    assert expected[loser].dagster_run_id[:8] in audit.inner_text()
    journey.shot(f"{AUDIT} of {loser}: passed in the failed run")
