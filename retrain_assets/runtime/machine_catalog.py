"""Every state machine of the platform by name: what the CLI's diagram, status and history use."""

from __future__ import annotations

from collections.abc import Callable

from retrain_assets.deployment.rollout_machine import NAME as ROLLOUT
from retrain_assets.deployment.rollout_machine import rollout_machine
from retrain_assets.machines.table import Machine
from retrain_assets.machines.training import NAME as TRAINING
from retrain_assets.machines.training import training_machine

MACHINES: dict[str, Callable[[], Machine]] = {TRAINING: training_machine, ROLLOUT: rollout_machine}


def machine_named(name: str) -> Machine:
    """Return the machine called `name` with its default budgets.

    Raises:
        ValueError: no machine has that name (the message lists the known ones).
    """
    factory = MACHINES.get(name)
    if factory is None:
        raise ValueError(f"no state machine {name!r}; known: {', '.join(sorted(MACHINES))}")
    return factory()
