import pytest

from retrain_assets.machines import Machine, MachineDefinitionError, State, Step
from retrain_assets.machines.training import training_machine


def noop(ctx):
    return Step.success()


def build(states, terminal=("DONE", "FAILED"), initial="A", failed="FAILED"):
    return Machine("toy", initial, frozenset(terminal), states, failed=failed)


def test_training_machine_has_the_documented_budgets():
    states = training_machine().states
    assert states["SUBMIT_JOB"].max_visits == 3
    assert states["POLL_JOB"].max_visits == 100
    assert states["POLL_JOB"].may_yield
    assert states["DOWNLOAD_SAVE"].max_visits == 5
    assert states["AWAIT_CANDIDATE"].max_visits == states["AWAIT_GATE"].max_visits == 100
    assert [n for n, s in states.items() if s.may_yield] == [
        "POLL_JOB",
        "AWAIT_CANDIDATE",
        "AWAIT_GATE",
    ]


def test_budgets_are_per_machine_instance():
    small = training_machine(submit_budget=1, poll_budget=7)
    assert small.states["SUBMIT_JOB"].max_visits == 1
    assert small.states["POLL_JOB"].max_visits == 7
    assert training_machine().states["SUBMIT_JOB"].max_visits == 3
    assert small.with_budgets({"DOWNLOAD_SAVE": 2}).states["DOWNLOAD_SAVE"].max_visits == 2
    with pytest.raises(MachineDefinitionError, match="NOPE"):
        small.with_budgets({"NOPE": 2})


@pytest.mark.parametrize(
    ("states", "kwargs", "message"),
    [
        ({"A": State(noop, "ELSE", "FAILED")}, {}, "state A success edge 'ok' -> unknown ELSE"),
        (
            {"A": State(noop, "DONE", "FAILED", branches={"odd": "GONE"})},
            {},
            "state A branch edge 'odd' -> unknown GONE",
        ),
        (
            {"A": State(noop, "DONE", "FAILED"), "DONE": State(noop, "DONE", "DONE")},
            {},
            "terminal state DONE must not have a transition",
        ),
        ({"A": State(noop, "DONE", "FAILED")}, {"initial": "B"}, "initial state B"),
        ({"A": State(noop, "DONE", "DONE")}, {"failed": "DONE2"}, "failed state DONE2"),
        ({"A": State(noop, "DONE", "DONE")}, {}, "state FAILED is unreachable"),
        ({"A": State(None, "DONE", "FAILED")}, {}, "state A has no callable transition"),
        ({"A": State(noop, "DONE", "FAILED", max_visits=0)}, {}, "state A has a budget of 0"),
        (
            {"A": State(noop, "B", "FAILED"), "B": State(noop, "A", "DONE")},
            {},
            "states A -> B -> A form a cycle without a visit budget",
        ),
        (
            {"A": State(noop, "DONE", "FAILED", branches={"a: b": "DONE"})},
            {},
            "branch label 'a: b'",
        ),
    ],
)
def test_inconsistent_tables_are_refused_naming_the_state(states, kwargs, message):
    with pytest.raises(MachineDefinitionError, match="toy") as raised:
        build(states, **kwargs)
    assert message in str(raised.value)


def test_a_budget_anywhere_on_a_cycle_makes_it_acceptable():
    machine = build({"A": State(noop, "B", "FAILED"), "B": State(noop, "A", "DONE", max_visits=2)})
    assert {e.target for e in machine.edges()} == {"A", "B", "DONE", "FAILED"}
