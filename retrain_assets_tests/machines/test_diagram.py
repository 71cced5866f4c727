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
    assert len(edges) == 16
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
    assert "    class POLL_JOB yields" in text
    assert "    JOB_FAILED : " not in text  # unbudgeted, never yields: no annotation
