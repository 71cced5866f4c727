"""Deployments on the real platform: the UI's GraphQL path, the daemon's rollout_controller.

One shared `retrain-assets up --no-demo` (rollout steps of 6 s, analysed on 20 predictions
and 20 rows with actuals, the deploy-time check on the newest 3 days: SHARED_PLATFORM_ENV).
The module lands its own tenants with the simulator (2025-01-01, a Wednesday, to 2025-03-05,
a Wednesday), publishes their features through GraphQL, registers LightGBM versions in the
platform's MLflow, deploys from the UI's path, and sends forecast requests the way a retailer
would: through the platform's prediction service. The tests run in order; the last one audits
everything they did.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import requests

from retrain_assets.demo.forecast_requests import request_rows
from retrain_assets.demo.simulate import land_tenant
from retrain_assets.demo.tenants import TenantSpec
from retrain_assets.features.training_export import LABEL, MODEL_FEATURES
from retrain_assets.registry.mlflow_registry import CHAMPION, MlflowRegistry, model_name
from retrain_assets_tests.deployment.platform_helpers import (
    app,
    check_partition_status,
    cli,
    days,
    features,
    launch,
    partition_status,
    register_version,
    step_failures,
    wait_for_end,
)
from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.ui_actions import (
    launch_backfill,
    publish_days,
    wait_for_backfill_run,
)
from retrain_assets_tests.support.waiting import wait_until
from retrain_assets_tests.ui.dagster_ui import (
    check_partition_detail,
    freshness_detail,
    partition_detail,
    sensor_ticks,
    verdict_tag,
)

pytestmark = pytest.mark.system

START, LAST = dt.date(2025, 1, 1), dt.date(2025, 3, 5)
FIRST_FEATURE_DAY = START + dt.timedelta(days=28)  # features look 28 days of sales back
WEEKEND = days(dt.date(2025, 3, 6), dt.date(2025, 3, 9))  # Thursday .. Sunday
ROLES = ("good", "degraded", "blocked", "busy", "auto")
SHARE_TOLERANCE = 0.05  # canary share of a step's request keys: weight +- 5 points
BATCH = 2000  # rows per forecast request


@dataclass
class World:
    platform: RunningPlatform
    tenants: dict[str, TenantSpec]
    registry: MlflowRegistry

    def name(self, role: str) -> str:
        return self.tenants[role].name


@pytest.fixture(scope="module")
def world(shared_platform: RunningPlatform) -> Iterator[World]:
    """Five tenants of this module landed and their features published on the platform."""
    platform, suffix = shared_platform, uuid.uuid4().hex[:6]
    tenants = {
        role: TenantSpec(f"{role}-{suffix}", "US", stores=6, items=20, seed=60 + i)
        for i, role in enumerate(ROLES)
    }
    for spec in tenants.values():
        land_tenant(str(platform.home / "landing"), spec, days(START, LAST))
    names = sorted(spec.name for spec in tenants.values())
    wait_until(
        lambda: (
            sorted(
                r[0]
                for r in platform.query(
                    "dagster",
                    "SELECT partition FROM dynamic_partitions WHERE partition = ANY(%s)",
                    (names,),
                )
            )
            == names
        ),
        90,
        "customer_discovery adding this module's tenants",
    )
    publish_days(platform, "sales", START.isoformat(), LAST.isoformat())
    publish_days(platform, "store_day_features", FIRST_FEATURE_DAY.isoformat(), LAST.isoformat())
    yield World(platform, tenants, MlflowRegistry(platform.mlflow_url()))


# -- helpers --------------------------------------------------------------------------------


def deploy(world: World, role: str) -> str:
    """Launch the deploy_model job for a tenant, as a person does in the UI; return the run."""
    return launch(world.platform, "deploy_model", world.name(role))


def first_champion(world: World, role: str) -> str:
    """Register a weak first version and deploy it: promoted directly (no champion yet)."""
    customer = world.name(role)
    train = features(world.platform, customer, FIRST_FEATURE_DAY, LAST - dt.timedelta(days=10))
    version = register_version(world.platform, customer, f"{customer}-weak", train, rounds=12)
    run = deploy(world, role)
    assert wait_for_end(world.platform, run) == "SUCCESS", step_failures(world.platform, run)
    assert world.registry.aliases(customer)[CHAMPION] == version
    return version


def strong_version(world: World, role: str, key: str, label=None) -> str:
    customer = world.name(role)
    train = features(world.platform, customer, FIRST_FEATURE_DAY, LAST)
    return register_version(
        world.platform, customer, f"{customer}-{key}", train, rounds=150, label=label
    )


def rollout_of(world: World, role: str) -> tuple | None:
    """Return (id, outcome, reason) of the tenant's latest rollout."""
    rows = app(
        world.platform,
        "SELECT id, outcome, reason FROM rollouts WHERE customer = %s ORDER BY id DESC LIMIT 1",
        (world.name(role),),
    )
    return rows[0] if rows else None


def published_requests(world: World, role: str, first: dt.date, last: dt.date) -> list[dict]:
    """Request rows (identity, day, features) for published days, as a retailer sends them."""
    frame = features(world.platform, world.name(role), first, last)
    rows = []
    for record in frame[["store_id", "item_id", "date", *MODEL_FEATURES]].to_dict("records"):
        row = {
            "store_id": record["store_id"],
            "item_id": record["item_id"],
            "date": record["date"].date().isoformat(),
        }
        row.update({k: None if pd.isna(record[k]) else float(record[k]) for k in MODEL_FEATURES})
        rows.append(row)
    return rows


def send(world: World, role: str, rows: list[dict]) -> None:
    """Ask the platform's prediction service for forecasts of `rows`, as a retailer does."""
    url, token = world.platform.serve_url(), world.platform.serve_token()
    for start in range(0, len(rows), BATCH):
        answer = requests.post(
            f"{url}/forecast/{world.name(role)}",
            json={"rows": rows[start : start + BATCH]},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text


def wait_until_served(world: World, role: str, canary: str | None) -> None:
    """Wait until the prediction service routes the tenant's canary (None: has no canary)."""
    url, token = world.platform.serve_url(), world.platform.serve_token()

    def routed() -> bool:
        answer = requests.get(
            f"{url}/v2/models/{world.name(role)}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        return answer.ok and answer.json()["parameters"]["canary_version"] == canary

    wait_until(routed, 60, f"the prediction service routing {world.name(role)}'s canary")


def shares(world: World, rollout_id: int) -> dict[str, float]:
    """Return each step's canary share of its distinct served request keys."""
    rows = app(
        world.platform,
        """
        SELECT step, count(DISTINCT request_key) FILTER (WHERE alias = 'canary'),
            count(DISTINCT request_key)
        FROM prediction_log WHERE rollout_id = %s AND served GROUP BY step""",
        (rollout_id,),
    )
    return {step: canary / total for step, canary, total in rows}


def keys_routed_both_ways(world: World, rollout_id: int) -> list[tuple]:
    """Return (step, request key) served by both the champion and the canary in one step."""
    return app(
        world.platform,
        """
        SELECT step, request_key FROM prediction_log WHERE rollout_id = %s AND served
        GROUP BY step, request_key HAVING count(DISTINCT alias) > 1""",
        (rollout_id,),
    )


def read_what_serves(journey, world: World, role: str, version: str, reason: str) -> str:
    """Read the tenant's deployed_model partition and freshness check in the UI; return the
    check's text once it says `reason`. The Partitions tab must show `version` serving."""
    platform, customer = world.platform, world.name(role)
    wait_until(
        lambda: partition_status(platform, "deployed_model", customer) == "materialized",
        60,
        f"serving_report materializing deployed_model for {customer}",
    )
    deployed = partition_detail(journey, "deployed_model", customer)
    assert re.search(rf"\bversion\s+{version}\s+serving_since", deployed.inner_text())
    journey.shot(f"deployed_model of {customer}: {version} serves")
    check = freshness_detail(journey, customer)
    journey.wait_visible(check.get_by_text(reason), 60, f"the freshness check saying {reason}")
    journey.shot(f"serving_model_fresh of {customer}")
    return check.inner_text()


# -- tests ----------------------------------------------------------------------------------


def test_a_good_challenger_deployed_from_the_ui_goes_10_then_50_percent_and_is_promoted(world):
    platform, customer = world.platform, world.name("good")
    first = first_champion(world, "good")
    second = strong_version(world, "good", "strong")
    run = deploy(world, "good")
    assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)
    [(decision, by, version, gate_id)] = app(
        platform,
        "SELECT id, decided_by, version, gate_result_id FROM deployment_decisions"
        " WHERE customer = %s AND dagster_run_id = %s",
        (customer, run),
    )
    assert (by, version) == ("a person via the Dagster UI", second)
    assert app(platform, "SELECT gate, passed FROM gate_results WHERE id = %s", (gate_id,)) == [
        ("challenger_beats_champion_now", True)
    ]
    rollout_id = rollout_of(world, "good")[0]
    # the last published week: the published days the service serves (a day before is refused)
    requests = published_requests(world, "good", LAST - dt.timedelta(days=6), LAST)

    def finished() -> bool:
        send(world, "good", requests)
        return rollout_of(world, "good")[1] is not None

    wait_until(finished, 120, "the rollout of the good challenger to finish", interval=1)
    assert rollout_of(world, "good")[1:] == (
        "promoted",
        "promoted after CANARY_10 and CANARY_50 passed",
    )
    assert world.registry.aliases(customer) == {
        "champion": second,
        "previous": first,
        "challenger": second,
    }
    moves = app(
        platform,
        "SELECT from_version, to_version, decision_id FROM champion_moves"
        " WHERE customer = %s ORDER BY id",
        (customer,),
    )
    assert moves == [(None, first, moves[0][2]), (first, second, decision)]  # moved once more
    assert app(
        platform,
        "SELECT champion_version, canary_version, canary_weight FROM"
        " serving_routes WHERE customer = %s",
        (customer,),
    ) == [(second, None, 0.0)]
    measured = shares(world, rollout_id)
    assert set(measured) == {"CANARY_10", "CANARY_50"}
    assert abs(measured["CANARY_10"] - 0.10) <= SHARE_TOLERANCE, measured
    assert abs(measured["CANARY_50"] - 0.50) <= SHARE_TOLERANCE, measured
    assert keys_routed_both_ways(world, rollout_id) == []
    analyses = app(
        platform,
        "SELECT step, passed FROM rollout_analyses WHERE rollout_id = %s ORDER BY id",
        (rollout_id,),
    )
    assert analyses == [("CANARY_10", True), ("CANARY_50", True)]


def _weekend_blind(train: pd.DataFrame) -> np.ndarray:
    """Labels of a model that is right on weekdays and forecasts 2.5 x on weekends."""
    weekend = train["day_of_week"].to_numpy() >= 5
    return train[LABEL].to_numpy(dtype=float) * np.where(weekend, 2.5, 1.0)


@pytest.mark.browser
def test_a_challenger_that_forecasts_badly_on_the_newest_actuals_is_rolled_back(world, journey):
    """It passes registration and the deploy-time check (Monday to Wednesday), then serves
    Thursday to Sunday forecasts that the weekend's actual sales judge."""
    platform, customer = world.platform, world.name("degraded")
    first = first_champion(world, "degraded")
    blind = strong_version(world, "degraded", "weekend-blind", label=_weekend_blind)
    run = deploy(world, "degraded")
    assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)
    rollout_id = rollout_of(world, "degraded")[0]
    spec = world.tenants["degraded"]
    wait_until_served(world, "degraded", blind)
    send(world, "degraded", [row for day in WEEKEND for row in request_rows(spec, day)])
    land_tenant(str(platform.home / "landing"), spec, WEEKEND)
    publish_days(platform, "sales", WEEKEND[0].isoformat(), WEEKEND[-1].isoformat())
    publish_days(platform, "store_day_features", WEEKEND[0].isoformat(), WEEKEND[-1].isoformat())
    wait_until(
        lambda: rollout_of(world, "degraded")[1] is not None, 60, "the degraded rollout to end"
    )
    _, outcome, reason = rollout_of(world, "degraded")
    assert outcome == "rolled_back"
    assert reason.startswith("CANARY_10 analysis failed: forecast quality: canary WAPE")
    assert world.registry.aliases(customer) == {"champion": first, "challenger": blind}
    assert app(
        platform, "SELECT count(*) FROM champion_moves WHERE rollout_id = %s", (rollout_id,)
    ) == [(0,)]
    assert app(
        platform,
        "SELECT champion_version, canary_version, canary_weight FROM"
        " serving_routes WHERE customer = %s",
        (customer,),
    ) == [(first, None, 0.0)]
    # The UI tells the same: the first version still serves, not failed; the check says why
    # nothing newer does.
    assert partition_status(platform, "deployed_model", customer) == "materialized"
    text = read_what_serves(journey, world, "degraded", first, "was rolled back")
    assert f"its last challenger {blind} was rolled back: CANARY_10 analysis failed" in text
    # On the Automation page the rollback is a verdict of rollout_controller's ticks, never a
    # failed tick (it requests no run, so no run of its can show red either).
    ticks = sensor_ticks(journey, "rollout_controller", "0 runs requested")
    assert "Failure" not in ticks, ticks
    journey.shot("rollout_controller's ticks after the rollback: none failed")


@pytest.mark.browser
def test_a_failing_deploy_time_check_stops_the_run_and_a_later_run_alone_refuses(world, journey):
    platform, customer = world.platform, world.name("blocked")
    first_champion(world, "blocked")
    # serving_report materializes deployed_model for that move on a later tick; the audit the
    # refused run evaluates below must be of that materialization, or the newer one would show
    # it missing (seen once, stop 43)
    wait_until(
        lambda: partition_status(platform, "deployed_model", customer) == "materialized",
        60,
        f"deployed_model of {customer} materialized for its first champion",
    )
    inflated = strong_version(
        world, "blocked", "inflated", label=lambda t: t[LABEL].to_numpy(dtype=float) * 1.8
    )
    run = deploy(world, "blocked")
    assert wait_for_end(platform, run) == "FAILURE"
    failed = step_failures(platform, run)
    assert list(failed) == ["registered_model_challenger_beats_champion_now"], failed
    assert app(
        platform, "SELECT count(*) FROM deployment_decisions WHERE customer = %s", (customer,)
    ) == [(1,)]  # the first deployment only
    alone = launch(platform, "__ASSET_JOB", customer, assets=["deployment_decision"])
    assert wait_for_end(platform, alone) == "FAILURE"
    message = step_failures(platform, alone)["deployment_decision"]
    assert f"refusing to deploy {model_name(customer)} v{inflated}" in message
    assert "challenger_beats_champion_now failed: " in message
    assert app(
        platform, "SELECT count(*) FROM deployment_decisions WHERE customer = %s", (customer,)
    ) == [(1,)]
    # Two failed runs planned the decision: that asset shows them, what serves does not. The
    # refused deploy run still evaluated the audit on deployed_model (never "Execution failed").
    assert partition_status(platform, "deployment_decision", customer) == "failed"
    audit = "deployments_match_decisions"
    assert check_partition_status(platform, "deployed_model", audit, customer) == "succeeded"
    first = world.registry.aliases(customer)[CHAMPION]
    read_what_serves(journey, world, "blocked", first, f"serving {first}")
    pane = check_partition_detail(journey, "deployed_model", audit, customer)
    assert verdict_tag(pane) == "Passed", pane.inner_text()
    assert run[:8] in pane.inner_text()  # evaluated in the refused run
    journey.shot(f"{audit} of {customer}: passed in the refused run")
    ticks = sensor_ticks(journey, "serving_report", "0 runs requested")  # nothing new to report
    assert "Failure" not in ticks, ticks
    journey.shot("serving_report's ticks: none failed")


def _rollout_state(world: World, role: str) -> tuple:
    customer = world.name(role)
    [(state, run_key, payload)] = app(
        world.platform,
        "SELECT state, run_key, payload FROM machine_pointers"
        " WHERE machine = 'rollout' AND customer = %s",
        (customer,),
    )
    route = app(
        world.platform,
        "SELECT champion_version, canary_version, canary_weight,"
        " rollout_id, step, updated_at FROM serving_routes WHERE customer = %s",
        (customer,),
    )
    aliases = world.registry.aliases(customer)
    decisions = app(
        world.platform, "SELECT count(*) FROM deployment_decisions WHERE customer = %s", (customer,)
    )
    return (
        state,
        run_key,
        payload["step"],
        payload["step_started_at"],
        route,
        aliases.get("champion"),
        aliases.get("canary"),
        decisions,
    )


def test_a_backfill_and_a_retraining_during_a_rollout_change_nothing_in_it(world):
    platform, customer = world.platform, world.name("busy")
    first = first_champion(world, "busy")
    second = strong_version(world, "busy", "strong")
    run = deploy(world, "busy")
    assert wait_for_end(platform, run) == "SUCCESS", step_failures(platform, run)
    before = _rollout_state(world, "busy")
    assert before[0] == "CANARY_10" and before[6] == second

    backfill = launch_backfill(
        platform,
        ["store_day_features"],
        [d.isoformat() for d in days(LAST - dt.timedelta(days=6), LAST)],
    )
    config = {
        "ops": {
            "training_job": {
                "config": {
                    "first_day": FIRST_FEATURE_DAY.isoformat(),
                    "last_day": LAST.isoformat(),
                    "num_boost_round": 60,
                }
            }
        }
    }
    training = launch(platform, "__ASSET_JOB", customer, ["training_job"], config)
    assert wait_for_end(platform, training) == "SUCCESS", step_failures(platform, training)
    [backfill_run] = wait_for_backfill_run(platform, backfill)
    assert wait_for_end(platform, backfill_run) == "SUCCESS"
    [(run_key,)] = app(
        platform,
        "SELECT run_key FROM machine_pointers WHERE machine = 'training' AND customer = %s",
        (customer,),
    )
    candidate_runs = """SELECT count(*) FROM runs r JOIN run_tags t ON t.run_id = r.run_id
        WHERE t.key = 'retrain/run_key' AND t.value = %s AND r.status IN ('SUCCESS', 'FAILURE')"""
    wait_until(
        lambda: platform.query("dagster", candidate_runs, (run_key,))[0][0] >= 1,
        240,
        "the retrained candidate's gate and registration run",
    )
    after = _rollout_state(world, "busy")
    assert after == before
    assert app(platform, "SELECT count(*) FROM rollouts WHERE customer = %s", (customer,)) == [(2,)]

    done = cli(platform, "rollback", customer, "--reason", "retrained meanwhile", "--by", "ops")
    assert done.returncode == 0, done.stderr
    assert "rolled back: aborted by ops in CANARY_10: retrained meanwhile" in done.stdout
    assert world.registry.aliases(customer)["champion"] == first
    assert "canary" not in world.registry.aliases(customer)
    listed = cli(platform, "deployments", "--customer", customer)
    assert listed.returncode == 0, listed.stderr
    assert "abort requested by ops: retrained meanwhile" in listed.stdout


def test_auto_deploy_takes_a_passing_registration_on_to_deployment(world):
    platform, customer = world.platform, world.name("auto")
    assert cli(platform, "deployments", "auto", customer, "on").returncode == 0
    config = {
        "ops": {
            "training_job": {
                "config": {
                    "first_day": FIRST_FEATURE_DAY.isoformat(),
                    "last_day": LAST.isoformat(),
                }
            }
        }
    }
    training = launch(platform, "__ASSET_JOB", customer, ["training_job"], config)
    assert wait_for_end(platform, training) == "SUCCESS", step_failures(platform, training)
    wait_until(
        lambda: (
            app(
                platform,
                "SELECT count(*) FROM rollouts WHERE customer = %s AND outcome IS NOT NULL",
                (customer,),
            )[0][0]
            == 1
        ),
        240,
        "the auto-deployed first version's rollout",
    )
    [(by, version, dagster_run)] = app(
        platform,
        "SELECT decided_by, version, dagster_run_id FROM deployment_decisions WHERE customer = %s",
        (customer,),
    )
    assert by == "auto_deploy via gpu_job_poller"
    assert world.registry.aliases(customer)[CHAMPION] == version
    assert rollout_of(world, "auto")[1] == "promoted"
    tags = dict(
        platform.query(
            "dagster", "SELECT key, value FROM run_tags WHERE run_id = %s", (dagster_run,)
        )
    )
    assert tags["dagster/sensor_name"] == "gpu_job_poller"


def test_the_audit_passes_after_all_of_this_and_fails_on_a_champion_moved_by_hand(world):
    platform = world.platform
    clean = cli(platform, "audit")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "every champion move matches one deployment decision" in clean.stdout
    customer = world.name("good")
    name = model_name(customer)
    previous = world.registry.aliases(customer)["previous"]
    current = world.registry.aliases(customer)[CHAMPION]
    world.registry.client.set_registered_model_alias(name, CHAMPION, previous)
    try:
        dirty = cli(platform, "audit")
        assert dirty.returncode == 1
        assert f"{customer}: {name} alias champion is on v{previous}" in dirty.stdout
        assert "a champion move without a decision" in dirty.stdout
    finally:
        world.registry.client.set_registered_model_alias(name, CHAMPION, current)
