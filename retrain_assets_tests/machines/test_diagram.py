from retrain_assets.machines.diagram import mermaid
from retrain_assets.machines.training import training_machine


def table_edges(machine):
    """The edges read straight off the State rows (not through Machine.edges)."""
    for name, state in machine.states.items():
        yield name, state.on_success, "ok"
        yield name, state.on_failure, "failed"
        for label, target in state.branches.items():
            yield name, target, label


def test_every_table_edge_appears_in_the_diagram():
    machine = training_machine()
    lines = mermaid(machine).splitlines()
    assert lines[0] == "stateDiagram-v2"
    edges = list(table_edges(machine))
    assert len(edges) == 24
    for source, target, label in edges:
        prefix = f"    {source} --> {target} : {label}"
        assert any(line == prefix or line.startswith(prefix + " (") for line in lines), prefix


def test_diagram_shows_yields_budgets_start_and_ends():
    text = mermaid(training_machine(poll_budget=42))
    assert "    [*] --> INITIAL" in text
    assert "    DONE --> [*]" in text
    assert "    FAILED --> [*]" in text
    assert "    POLL_JOB : POLL_JOB (yields, max 42 visits)" in text
    assert "    SUBMIT_JOB : SUBMIT_JOB (max 3 visits)" in text
    assert "    POLL_JOB --> FAILED : over budget (42)" in text
    assert "    POLL_JOB --> POLL_JOB : yield (waits for the next advance)" in text
    assert "    POLL_JOB --> POLL_JOB : failed (waits for the next advance)" in text
    assert "    class POLL_JOB,AWAIT_CANDIDATE,AWAIT_GATE yields" in text
    assert "    JOB_FAILED : " not in text  # unbudgeted, never yields: no annotation


def test_the_hand_off_is_drawn_from_the_table():
    text = mermaid(training_machine(handoff_budget=7))
    assert "    POLL_JOB --> AWAIT_CANDIDATE : ok" in text
    assert "    AWAIT_CANDIDATE : AWAIT_CANDIDATE (yields, max 7 visits)" in text
    assert "    AWAIT_GATE : AWAIT_GATE (yields, max 7 visits)" in text
    assert "    DOWNLOAD_SAVE --> AWAIT_GATE : ok" in text
    assert "    AWAIT_GATE --> DONE : gate failed" in text
    assert "    AWAIT_GATE --> FAILED : attempts spent" in text
    assert "    CHECK_LAST_TRAIN --> AWAIT_GATE : candidate saved" in text
    assert "    CHECK_LAST_TRAIN --> AWAIT_CANDIDATE : remote succeeded" in text
    assert "    class POLL_JOB,AWAIT_CANDIDATE,AWAIT_GATE yields" in text
    # every way into DONE passes the gate
    assert [line for line in text.splitlines() if "--> DONE" in line] == [
        "    AWAIT_GATE --> DONE : ok",
        "    AWAIT_GATE --> DONE : gate failed",
    ]
