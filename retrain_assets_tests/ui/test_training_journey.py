"""Journey (c): training one customer from the UI, followed to its registered candidate.

As the README's "Training a customer from the UI" says: open training_job, choose the
customer's partition, materialize with no config. The run ends in seconds; the poller's run
then fetches, gates and registers the candidate, and both show on their assets' pages.
"""

import pytest

from retrain_assets_tests.support.ui_actions import publish_days
from retrain_assets_tests.ui.dagster_ui import (
    choose_partition,
    follow_run,
    launch_one_run,
    open_materialize_dialog,
    open_run,
    partition_detail,
)
from retrain_assets_tests.ui.model_runs import training_run_key, verdict, wait_for_candidate_run
from retrain_assets_tests.ui.tenants import FIRST_FEATURE_DAY, FIRST_LANDED, LAST_DAY, land

pytestmark = [pytest.mark.system, pytest.mark.browser]


def test_training_a_customer_from_the_ui_ends_with_its_candidate_registered(journey, ui_platform):
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
