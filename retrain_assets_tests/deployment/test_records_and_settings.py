"""Deployment decisions, their rollouts, the writes buffer and the settings, on real Postgres."""

from __future__ import annotations

import dataclasses

import pytest

from retrain_assets.automation.registration_selection import DEPLOY_CHECK, registration_selection
from retrain_assets.deployment.records import (
    DeploymentRefused,
    DeploymentRequest,
    auto_deploy_ready,
    request_abort,
    set_auto_deploy,
    start_deployment,
)
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.deployment.rollout_settings import (
    DEFAULTS,
    rollout_settings,
)
from retrain_assets.deployment.routes import Route, read_routes
from retrain_assets.deployment.writes import AnalysisRow, RolloutWrites
from retrain_assets.machines.engine import AdvanceResult
from retrain_assets.settings_model import SettingsError
from retrain_assets.store.customers import register_customer
from retrain_assets.store.database import transaction


def test_one_rollout_in_progress_per_customer_and_a_reexecution_gets_its_own_decision(world):
    first = world.deploy("acme", "2", champion="1")
    with pytest.raises(DeploymentRefused, match=r"acme has rollout \d+ of version 2 in progress"):
        world.deploy("acme", "3", champion="1")
    again = start_deployment(
        world.db,
        DeploymentRequest(
            "acme",
            "2",
            "rk-2",
            "tester",
            "retry",
            first.decision.gate_result_id,
            "1",
            dagster_run_id="a-re-execution",
        ),
        {first.decision.dagster_run_id},  # its parent is the run that decided
        rollout_machine(world.settings),
    )
    assert not again.new and again.decision == first.decision
    assert again.rollout.id == first.rollout.id
    with transaction(world.db) as cur:
        cur.execute("SELECT count(*) FROM deployment_decisions")
        assert cur.fetchone() == (1,)


def test_an_abort_needs_a_rollout_and_a_reason(world):
    with pytest.raises(DeploymentRefused, match="acme has no rollout in progress"):
        request_abort(world.db, "acme", "why not", "dana")
    world.deploy("acme", "2", champion="1")
    with pytest.raises(DeploymentRefused, match="needs a reason"):
        request_abort(world.db, "acme", "  ", "dana")
    recorded = request_abort(world.db, "acme", "looks odd", "dana")
    assert (recorded.abort_reason, recorded.abort_by) == ("looks odd", "dana")


def test_auto_deploy_is_per_known_customer_and_waits_for_a_rollout_to_end(world):
    with pytest.raises(DeploymentRefused, match="unknown customer 'acme'"):
        set_auto_deploy(world.db, "acme", True, "tester")
    register_customer(world.db, "acme", "US", "test")
    set_auto_deploy(world.db, "acme", True, "tester")
    assert auto_deploy_ready(world.db) == {"acme"}
    world.deploy("acme", "2", champion="1")
    assert auto_deploy_ready(world.db) == set()


def test_rows_of_a_discarded_advance_are_never_written(world):
    writes = RolloutWrites()
    writes.add("acme", Route("acme", "1", "2", 0.1, None, "CANARY_10"))
    writes.add("bolt", Route("bolt", "7"))
    writes.add("bolt", AnalysisRow(1, "CANARY_10", 0, 0, 0, 0, None, None, False, "x"))
    results = {
        "acme": AdvanceResult(busy=False, pointer=None, steps=1),
        "bolt": AdvanceResult(busy=False, pointer=None, steps=0, error="RuntimeError: boom"),
    }
    with transaction(world.db) as cur:
        assert writes.flush(cur, results) == 1
    assert list(read_routes(world.db)) == ["acme"]
    assert writes.pending() == {}


def test_settings_come_from_the_environment_and_bad_values_name_the_variable(monkeypatch):
    assert rollout_settings() == DEFAULTS
    monkeypatch.setenv("RETRAIN_ROLLOUT_STEPS", "0.05,0.25,0.5")
    monkeypatch.setenv("RETRAIN_ROLLOUT_STEP_SECONDS", "90")
    chosen = rollout_settings()
    assert chosen == dataclasses.replace(DEFAULTS, step_weights=(0.05, 0.25, 0.5), step_seconds=90)
    assert list(rollout_machine(chosen).states) == [
        "START",
        "CANARY_5",
        "CANARY_25",
        "CANARY_50",
        "PROMOTE",
        "ROLLBACK",
    ]
    monkeypatch.setenv("RETRAIN_ROLLOUT_STEPS", "0.5,0.1")
    with pytest.raises(SettingsError, match=r"RETRAIN_ROLLOUT_STEPS=0\.5,0\.1: must be .*increas"):
        rollout_settings()
    monkeypatch.delenv("RETRAIN_ROLLOUT_STEPS")
    monkeypatch.setenv("RETRAIN_ROLLOUT_MAX_ERROR_RATE", "lots")
    with pytest.raises(SettingsError, match="RETRAIN_ROLLOUT_MAX_ERROR_RATE=lots: must be a"):
        rollout_settings()
    monkeypatch.setenv("RETRAIN_ROLLOUT_MAX_ERROR_RATE", "1.5")
    with pytest.raises(SettingsError, match=r"=1.5: must be a number in \[0, 1\]"):
        rollout_settings()


def test_registration_runs_leave_the_deploy_time_check_to_deployments():
    plain = registration_selection(auto_deploy=False)
    assert [k.to_user_string() for k in plain["asset_selection"]] == [
        "model_candidate",
        "registered_model",
    ]
    assert DEPLOY_CHECK not in plain["asset_check_keys"]
    assert {k.name for k in plain["asset_check_keys"]} >= {
        "beats_champion",
        "one_version_per_run_key",
    }
    auto = registration_selection(auto_deploy=True)
    assert auto["asset_selection"][-1].to_user_string() == "deployment_decision"
    assert DEPLOY_CHECK in auto["asset_check_keys"]
    assert set(plain["asset_check_keys"]) < set(auto["asset_check_keys"])
