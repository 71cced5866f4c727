"""The rollout machine on real Postgres: canary steps, analyses, promotion, rollback, budgets.

The prediction log is written the way docs/deployment.md says the service writes it
(`contract.serve_rows`); the registry is a fake with the same alias methods.
"""

from __future__ import annotations

from retrain_assets.deployment.rollout_machine import NAME, rollout_machine
from retrain_assets.deployment.routes import read_routes
from retrain_assets.machines.diagram import mermaid
from retrain_assets.machines.store import history, pointer
from retrain_assets.store.database import transaction


def rows(db: str, sql: str, args: tuple = ()) -> list[tuple]:
    with transaction(db) as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def route_of(world, customer):
    found = read_routes(world.db, [customer])[customer]
    return (found.champion_version, found.canary_version, found.canary_weight, found.step)


def test_a_good_canary_goes_through_both_steps_and_is_promoted_once(world):
    started = world.deploy("acme", "2", champion="1")
    assert started.new and started.decision.rollout_key == f"deploy-{started.decision.id}"
    first = world.advance()
    assert first.results["acme"].pointer.state == "CANARY_10"
    assert route_of(world, "acme") == ("1", "2", 0.10, "CANARY_10")
    assert world.registry.aliases["acme"] == {"canary": "2"}

    models = {"1": world.model("acme", 1.3), "2": world.model("acme", 1.05)}
    world.serve("acme", models)
    world.clock.forward(30)  # inside the step's minimum time: not even visited
    waiting = world.advance()
    assert waiting.results == {} and waiting.waiting == 1
    visits = len(history(world.db, NAME, "acme"))

    world.clock.forward(31)
    second = world.advance()
    assert second.results["acme"].pointer.state == "CANARY_50"
    assert len(history(world.db, NAME, "acme")) == visits + 2  # the analysis, entering 50 %
    assert route_of(world, "acme") == ("1", "2", 0.50, "CANARY_50")
    world.serve("acme", models)
    world.clock.forward(61)
    third = world.advance()
    assert third.results["acme"].pointer.state == "DONE"
    assert route_of(world, "acme") == ("2", None, 0.0, None)
    assert world.registry.aliases["acme"] == {"champion": "2", "previous": "1"}
    assert [c[0] for c in world.registry.calls] == ["set_canary", "promote"]

    analyses = rows(
        world.db,
        "SELECT step, passed, rows_with_actuals, canary_wape, champion_wape"
        " FROM rollout_analyses ORDER BY id",
    )
    assert [(s, p) for s, p, *_ in analyses] == [("CANARY_10", True), ("CANARY_50", True)]
    assert analyses[1][2] > analyses[0][2]  # a row keeps its route: quality rows accumulate
    assert all(canary < champion for *_, canary, champion in analyses)
    assert rows(world.db, "SELECT outcome, reason FROM rollouts") == [
        ("promoted", "promoted after CANARY_10 and CANARY_50 passed")
    ]
    assert rows(world.db, "SELECT from_version, to_version, decision_id FROM champion_moves") == [
        ("1", "2", started.decision.id)
    ]
    assert world.advance().active == 0  # nothing left in progress


def test_a_canary_that_forecasts_worse_is_rolled_back_and_the_champion_stays(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    world.serve("acme", {"1": world.model("acme", 1.1), "2": world.model("acme", 1.6)})
    world.clock.forward(61)
    report = world.advance()
    assert report.results["acme"].pointer.state == "ROLLED_BACK"
    assert route_of(world, "acme") == ("1", None, 0.0, None)
    assert world.registry.aliases["acme"] == {}
    [(outcome, reason)] = rows(world.db, "SELECT outcome, reason FROM rollouts")
    assert outcome == "rolled_back"
    assert reason.startswith("CANARY_10 analysis failed: forecast quality: canary WAPE 0.6")
    assert rows(world.db, "SELECT count(*) FROM champion_moves") == [(0,)]
    [(passed, why)] = rows(world.db, "SELECT passed, reason FROM rollout_analyses")
    assert not passed and "allowed up to" in why


def test_failed_predictions_roll_back_on_the_error_rate(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    world.serve("acme", {"1": world.model("acme"), "2": world.model("acme", fail=True)})
    world.clock.forward(61)
    world.advance()
    [(outcome, reason)] = rows(world.db, "SELECT outcome, reason FROM rollouts")
    assert outcome == "rolled_back"
    assert "error rate 100.0%" in reason and "exceeds 5.0%" in reason


def test_no_data_counts_as_a_failure_after_the_allowed_intervals(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    world.clock.forward(61)
    for interval in (1, 2):
        report = world.advance()
        assert report.results["acme"].pointer.state == "CANARY_10"
        note = history(world.db, NAME, "acme")[-1].note
        assert note == (
            f"waiting for data: 0 of 20 canary predictions, rows with actuals "
            f"not counted yet (interval {interval} of 3)"
        )
        world.clock.forward(1)
    world.advance()
    [(outcome, reason)] = rows(world.db, "SELECT outcome, reason FROM rollouts")
    assert outcome == "rolled_back" and "no data: 0 of 20 canary predictions" in reason
    assert rows(world.db, "SELECT passed, canary_requests FROM rollout_analyses") == [(False, 0)]


def test_served_days_without_actuals_wait_for_them(world, tmp_path):
    world.deploy("acme", "2", champion="1")
    world.advance()
    later = [d.replace(month=4) for d in world.days]  # forecasts for days not materialized yet
    world.actuals.update(
        {(c, s, i, d.replace(month=4)): v for (c, s, i, d), v in list(world.actuals.items())}
    )
    world.serve("acme", {"1": world.model("acme"), "2": world.model("acme")}, days=later)
    world.clock.forward(61)
    report = world.advance()
    assert report.results["acme"].pointer.state == "CANARY_10"
    note = history(world.db, NAME, "acme")[-1].note
    assert note.startswith("waiting for data: ") and " 0 of 20 rows with actuals" in note


def test_a_first_deployment_is_promoted_directly_and_says_so(world):
    started = world.deploy("bolt", "1", champion=None)
    report = world.advance()
    assert report.results["bolt"].pointer.state == "DONE"
    assert route_of(world, "bolt") == ("1", None, 0.0, None)
    assert world.registry.aliases["bolt"] == {"champion": "1"}
    [(outcome, reason)] = rows(world.db, "SELECT outcome, reason FROM rollouts")
    assert outcome == "promoted" and reason.startswith("first deployment: no champion")
    assert rows(world.db, "SELECT from_version, to_version, decision_id FROM champion_moves") == [
        (None, "1", started.decision.id)
    ]


def test_a_promotion_the_registry_keeps_refusing_fails_on_the_safe_side(world):
    world.deploy("acme", "2", champion="1")
    world.advance()
    models = {"1": world.model("acme", 1.3), "2": world.model("acme")}
    world.registry.failing.add("promote")
    for _ in range(2):
        world.serve("acme", models)
        world.clock.forward(61)
        world.advance()
    assert pointer(world.db, NAME, "acme").state == "PROMOTE"
    for _ in range(5):
        world.advance()
    assert pointer(world.db, NAME, "acme").state == "FAILED"
    assert route_of(world, "acme") == ("1", None, 0.0, None)
    assert "canary" not in world.registry.aliases["acme"]
    [(outcome, reason)] = rows(world.db, "SELECT outcome, reason FROM rollouts")
    assert outcome == "failed"
    assert reason.startswith("FAILED: max retries reached: PROMOTE would exceed its budget of 5")
    assert "the registry is unreachable" in reason
    assert rows(world.db, "SELECT count(*) FROM champion_moves") == [(0,)]


def test_the_diagram_is_rendered_from_the_table():
    text = mermaid(rollout_machine())
    for line in (
        "START --> CANARY_10 : ok",
        "CANARY_10 --> CANARY_50 : ok",
        "CANARY_50 --> PROMOTE : ok",
        "PROMOTE --> DONE : ok",
        "CANARY_10 --> ROLLBACK : analysis failed",
        "ROLLBACK --> ROLLED_BACK : ok",
        "START --> PROMOTE : first deployment",
        "CANARY_50 --> ROLLBACK : aborted",
    ):
        assert f"    {line}\n" in text
