"""Processes killed at each wait point of a training and a rollout; nothing stuck or doubled.

One chaos platform (conftest) for the module. Each test steers its customers to wait points,
kills one process there (`up` restarts it; Postgres is started again by the test), and checks
the end state: every machine terminal, per run key one GPU job, at most one candidate, one
MLflow run and one version (exactly one of each, and a version only on a pass, when DONE),
every failure's reason in `retrain-assets history`, `retrain-assets audit` clean.

The matrix (RELIABILITY.md has the figures):

| wait point                              | killed         | customer |
| --------------------------------------- | -------------- | -------- |
| AWAIT_CANDIDATE, candidate run running  | code-server    | dcand    |
| CANARY_10                               | dagster-daemon | r10      |
| POLL_JOB, job running on the service    | gpu-service    | grun     |
| job submitted, queued behind another    | gpu-service    | gqueue   |
| candidate run requested or in flight    | mlflow         | mcand    |
| AWAIT_GATE, gate passed, registering    | mlflow         | mreg     |
| AWAIT_GATE, gate being evaluated        | postgres       | pgate    |
| CANARY_50                               | postgres       | r50      |
"""

from __future__ import annotations

import time

import pytest
import requests

from retrain_assets.automation.handoff import RUN_KEY_TAG
from retrain_assets_tests.chaos.end_state import (
    TERMINAL,
    assert_reasons_in_history,
    assert_training_promises,
    pointer,
    training_outcome,
    wait_terminal,
)
from retrain_assets_tests.chaos.faults import Recovery, crash_postgres, kill_child
from retrain_assets_tests.chaos.steering import (
    Retailer,
    gpu_job_status,
    launch_training,
    state_of,
    wait_for,
)
from retrain_assets_tests.chaos.world import ChaosWorld
from retrain_assets_tests.deployment.platform_helpers import cli
from retrain_assets_tests.support.waiting import wait_until

pytestmark = [pytest.mark.system, pytest.mark.chaos]


def report(point: str, recovery: Recovery, outcome: str, since: float) -> None:
    """Print one row of the report (pytest -rP shows it)."""
    print(
        f"CHAOS | {point} | {recovery.process} pid {recovery.old_pid} -> {recovery.new_pid}, "
        f"back in {recovery.seconds_to_restart} s | {outcome} | terminal "
        f"{time.monotonic() - since:.0f} s after the kill"
    )


def finish_training(world: ChaosWorld, role: str, point: str, recovery: Recovery, t0: float):
    """Wait for the customer's training to end; check and report its promises."""
    customer = world.name(role)
    wait_terminal(world.platform, "training", customer, 300)
    outcome = training_outcome(world.platform, customer)
    report(point, recovery, outcome.figures(), t0)
    assert_training_promises(outcome)
    assert_reasons_in_history(world.platform, customer)
    return outcome


def rollout_step(platform, customer: str) -> tuple:
    """Return the rollout's state, run key, step start and weight, as its pointer holds them."""
    [(state, run_key, payload)] = platform.query(
        "app",
        "SELECT state, run_key, payload FROM machine_pointers"
        " WHERE machine = 'rollout' AND customer = %s",
        (customer,),
    )
    return state, run_key, payload.get("step_started_at"), payload.get("weight")


def steps_entered(platform, customer: str) -> list[str]:
    """Return the rollout states the customer's newest rollout entered, in order (visit 1)."""
    rows = platform.query(
        "app",
        "SELECT state FROM machine_history WHERE machine = 'rollout' AND customer = %s"
        " AND visit = 1 AND run_key = (SELECT run_key FROM machine_pointers"
        " WHERE machine = 'rollout' AND customer = %s) ORDER BY id",
        (customer, customer),
    )
    return [state for (state,) in rows]


def finish_rollout(
    world: ChaosWorld, role: str, point: str, recovery: Recovery, t0: float
) -> list[int]:
    """Send the rollout its traffic until it ends; check and report it; return the answers."""
    platform, customer = world.platform, world.name(role)
    retailer = Retailer(platform, world.specs[role])
    retailer.sending.set()
    retailer.start()
    try:
        wait_terminal(platform, "rollout", customer, 300)
    finally:
        retailer.stop()
    state, _, _, reason = pointer(platform, "rollout", customer)
    moves = platform.query(
        "app", "SELECT count(*) FROM champion_moves WHERE customer = %s", (customer,)
    )[0][0]
    report(point, recovery, f"{customer}: {state}, champion moves {moves}; {reason}", t0)
    assert moves == (2 if state == "DONE" else 1)  # the first champion, then at most this one
    assert_reasons_in_history(platform, customer)
    return retailer.answers


# A candidate run of a run key in STARTED, read from Dagster's run storage: one SQL read, where
# the webserver's GraphQL took long enough to miss a run STARTED for 3 s (a test's read only).
STARTED_CANDIDATE_RUNS = """
    SELECT count(*) FROM runs r JOIN run_tags t ON t.run_id = r.run_id
    WHERE t.key = %s AND t.value = %s AND r.status = 'STARTED'"""


def candidate_wait(platform, customer: str) -> tuple | None:
    """The pointer while the customer's candidate run is requested or in flight, else None.

    The run is in flight from AWAIT_CANDIDATE until its verdict. A machine that ended (DONE,
    FAILED) before a wait saw it there fails the wait at once, not at its deadline.
    """
    found = pointer(platform, "training", customer)
    if found and found[0] in TERMINAL:
        pytest.fail(f"{customer}'s training ended {found[0]} before its candidate run was seen")
    return found if found and found[0] in ("AWAIT_CANDIDATE", "AWAIT_GATE") else None


def candidate_run_requested(platform, customer: str) -> bool:
    """Whether the customer's candidate run is requested or in flight."""
    return candidate_wait(platform, customer) is not None


def candidate_run_started(platform, customer: str) -> bool:
    """Whether the customer's candidate run is in flight (STARTED) now."""
    found = candidate_wait(platform, customer)
    if found is None:
        return False
    return platform.query("dagster", STARTED_CANDIDATE_RUNS, (RUN_KEY_TAG, found[2]))[0][0] > 0


def test_the_code_server_killed_with_a_candidate_run_in_flight_and_the_daemon_in_canary_10(
    chaos: ChaosWorld,
) -> None:
    platform, customer = chaos.platform, chaos.name("dcand")
    launch_training(platform, customer, rounds=40)
    wait_for(lambda: candidate_run_started(platform, customer), 300, f"{customer}'s candidate run")
    held = rollout_step(platform, chaos.name("r10"))
    assert held[0] == "CANARY_10" and held[3] == 0.1  # held: no traffic
    t0 = time.monotonic()
    # runs are processes of the code server: its group takes the candidate run with it
    code_server = kill_child(platform, "code-server")
    daemon = kill_child(platform, "dagster-daemon")
    # the kill changed nothing of the step (its start, its weight); the end shows it resumed
    assert rollout_step(platform, chaos.name("r10")) == held
    outcome = finish_training(chaos, "dcand", "AWAIT_CANDIDATE (run in flight)", code_server, t0)
    assert outcome.state == "DONE", outcome.figures()
    answers = finish_rollout(chaos, "r10", "CANARY_10", daemon, t0)
    # the prediction service never depended on the daemon: every forecast asked was answered;
    # and no step was entered twice (the restart resumed CANARY_10, it did not start it again)
    assert answers and set(answers) == {200}, answers
    entered = steps_entered(platform, chaos.name("r10"))
    assert entered[:2] == ["START", "CANARY_10"] and len(entered) == len(set(entered)), entered
    assert rollout_step(platform, chaos.name("r10"))[1] == held[1]  # the same rollout, resumed


def test_the_gpu_service_killed_with_one_job_running_and_one_queued(chaos: ChaosWorld) -> None:
    platform = chaos.platform
    customers = [chaos.name("grun"), chaos.name("gqueue")]
    for customer in customers:  # side by side: the first submitted runs, the other queues
        launch_training(platform, customer, rounds=40, slow=0.5)
    wait_for(
        lambda: (
            all(state_of(platform, "training", c) == "POLL_JOB" for c in customers)
            and sorted(gpu_job_status(platform, c) or "" for c in customers)
            == ["queued", "running"]
        ),
        240,
        "one job running and the other queued behind it (one GPU slot)",
    )
    queued = next(c for c in customers if gpu_job_status(platform, c) == "queued")
    t0 = time.monotonic()
    recovery = kill_child(platform, "gpu-service", f"{platform.gpu_url()}/healthz")
    for role in ("grun", "gqueue"):
        point = "queued" if chaos.name(role) == queued else "running"
        outcome = finish_training(chaos, role, f"job submitted, {point} (POLL_JOB)", recovery, t0)
        assert outcome.state == "DONE", outcome.figures()


def test_mlflow_killed_when_the_candidate_run_started_and_when_registering(
    chaos: ChaosWorld,
) -> None:
    platform, first, second = chaos.platform, chaos.name("mcand"), chaos.name("mreg")
    launch_training(platform, first, rounds=40)
    # From the candidate run's request to the verdict: 10 s on a quiet machine. The run itself
    # is STARTED for 3 s of it, too short to be caught reliably through GraphQL; the pointer
    # is one SQL read, so the kill lands inside the candidate run's life, wherever in it.
    wait_for(lambda: candidate_run_requested(platform, first), 300, f"{first}'s candidate run")
    t0 = time.monotonic()
    recovery = kill_child(platform, "mlflow", f"{platform.mlflow_url()}/health")
    launch_training(platform, second, rounds=60)
    point = "AWAIT_CANDIDATE or AWAIT_GATE (candidate run requested or in flight)"
    finish_training(chaos, "mcand", point, recovery, t0)

    def registering() -> bool:
        found = pointer(platform, "training", second)
        if not found or found[0] != "AWAIT_GATE":
            return False
        verdict = platform.query(
            "app",
            "SELECT passed FROM gate_results WHERE run_key = %s AND gate = 'beats_champion'",
            (found[2],),
        )
        assert not verdict or verdict[0][0], f"{second}'s gate failed: nothing to register"
        return bool(verdict)

    wait_for(registering, 300, f"{second}'s passing verdict")
    t0 = time.monotonic()
    recovery = kill_child(platform, "mlflow", f"{platform.mlflow_url()}/health")
    outcome = finish_training(chaos, "mreg", "AWAIT_GATE (passed, registering)", recovery, t0)
    assert outcome.state == "DONE" and outcome.versions == 1, outcome.figures()


def test_postgres_killed_while_the_gate_is_evaluated_and_in_canary_50(chaos: ChaosWorld) -> None:
    platform, held, customer = chaos.platform, chaos.name("r50"), chaos.name("pgate")
    launch_training(platform, customer, rounds=40)
    retailer = Retailer(platform, chaos.specs["r50"])
    retailer.sending.set()
    retailer.start()
    try:
        wait_for(lambda: state_of(platform, "rollout", held) == "CANARY_50", 300, "CANARY_50")
    finally:
        retailer.stop()  # held in CANARY_50 from here: no more traffic
    wait_for(
        lambda: state_of(platform, "training", customer) == "AWAIT_GATE", 300, "pgate at its gate"
    )
    assert state_of(platform, "rollout", held) == "CANARY_50"

    def outage_noticed() -> bool:
        try:
            return requests.get(f"{platform.gpu_url()}/healthz", timeout=5).status_code == 503
        except requests.RequestException:
            return False

    t0 = time.monotonic()
    recovery = crash_postgres(platform, chaos.postgres, outage_noticed)
    wait_until(lambda: _webserver_answers(platform), 180, "the webserver answering again")
    finish_training(chaos, "pgate", "AWAIT_GATE (gate being evaluated)", recovery, t0)
    finish_rollout(chaos, "r50", "CANARY_50", recovery, t0)


def _webserver_answers(platform) -> bool:
    """True once the webserver reads its run storage again (`{ version }` needs no database)."""
    try:
        runs = platform.graphql("{ runsOrError(limit: 1) { __typename } }")["runsOrError"]
        return runs["__typename"] == "Runs"
    except (requests.RequestException, AssertionError):
        return False


def test_the_registry_and_the_deployments_audit_clean_after_every_fault(chaos: ChaosWorld) -> None:
    # One audit of every customer on the platform (only the chaos roles' are): one CLI process,
    # not one per customer. Each fault's test has already read its customers' history.
    audit = cli(chaos.platform, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "(every customer" in audit.stdout, audit.stdout
    audited = chaos.platform.query("app", "SELECT DISTINCT customer FROM machine_pointers")
    assert {customer for (customer,) in audited} == {chaos.name(role) for role in chaos.specs}
