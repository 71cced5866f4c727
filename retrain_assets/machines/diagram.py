"""Render a machine's table as a Mermaid state diagram, so the picture cannot drift from code."""

from __future__ import annotations

from retrain_assets.machines.table import Machine


def mermaid(machine: Machine) -> str:
    """Return `stateDiagram-v2` text: every table edge, yield states and budgets annotated.

    Success edges are labelled "ok", failure edges "failed", named branches by their name; a
    yield state gets its implicit "yield" self-edge and a budgeted state its implicit "over
    budget" edge into the machine's failed state (both are the engine's, not the table's).
    """
    lines = ["stateDiagram-v2", f"    %% machine {machine.name}, rendered from its table"]
    lines.append(f"    [*] --> {machine.initial}")
    for name, state in machine.states.items():
        traits = (["yields"] if state.may_yield else []) + (
            [f"max {state.max_visits} visits"] if state.max_visits is not None else []
        )
        if traits:
            lines.append(f"    {name} : {name} ({', '.join(traits)})")
    for edge in machine.edges():
        pauses = edge.source == edge.target and machine.states[edge.source].may_yield
        suffix = " (waits for the next advance)" if pauses else ""
        lines.append(f"    {edge.source} --> {edge.target} : {edge.label}{suffix}")
    for name, state in machine.states.items():
        if state.may_yield:
            lines.append(f"    {name} --> {name} : yield (waits for the next advance)")
        if state.max_visits is not None:
            lines.append(f"    {name} --> {machine.failed} : over budget ({state.max_visits})")
    for name in sorted(machine.terminal):
        lines.append(f"    {name} --> [*]")
    yielding = [name for name, state in machine.states.items() if state.may_yield]
    if yielding:
        lines.append("    classDef yields fill:#fff3c4,stroke:#b08800")
        lines.append(f"    class {','.join(yielding)} yields")
    return "\n".join(lines) + "\n"
