"""A queued Slurm job that will not run until a person acts, and what that person must do.

A held job (priority 0, `hold`, a reason like JobHeldUser or JobHeldAdmin) or one whose only
nodes are drained or down waits in Slurm forever: "waiting in Slurm's queue" for every visit
of POLL_JOB would hide it until the budget ends the run. Measured on the one-node cluster: a
slurmctld killed right after a submit leaves the job PENDING, priority 0, reason JobHeldUser,
"launch failed requeued held", and its node DRAINED ("Duplicate jobid"). `attention` names that
at once, with the commands that let the job go on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrain_assets.gpu.protocol import JobStatus
from retrain_assets.gpu.slurm import states

# Reasons a pending job gives when nothing but a person lets it run (Slurm's state_reason).
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
NODE_REASONS = frozenset({"ReqNodeNotAvail", "NodeDown", "PartitionDown", "PartitionInactive"})
HELD_STATES = frozenset({"REQUEUE_HOLD", "RESV_DEL_HOLD"})
UNUSABLE_NODE_FLAGS = frozenset({"DRAIN", "DOWN", "FAIL"})
NAMED_NODES = 5  # a shared cluster may have many drained nodes: name a few


def is_held(job: dict[str, Any]) -> bool:
    """Return True for a queued job Slurm will not start until it is released."""
    if states.meaning(job).status is not JobStatus.QUEUED:
        return False
    reason = str(job.get("state_reason") or "")
    return (
        job.get("hold") is True
        or job.get("priority") == 0
        or reason in HELD_REASONS
        or states.base_state(job) in HELD_STATES
        or "held" in str(job.get("state_description") or "").lower()
    )


def needs_nodes(job: dict[str, Any]) -> bool:
    """Return True when a queued job waits for nodes that are not usable (down, drained)."""
    reason = str(job.get("state_reason") or "")
    queued = states.meaning(job).status is JobStatus.QUEUED
    return queued and any(reason.startswith(r) for r in NODE_REASONS)


def might_be_stuck(job: dict[str, Any]) -> bool:
    """Return True when `attention` has something to say (the backend then lists the nodes)."""
    return is_held(job) or needs_nodes(job)


def unusable_nodes(nodes: Sequence[dict[str, Any]], partition: str | None) -> list[str]:
    """Return 'name (STATE: reason)' of the partition's nodes that take no job now."""
    found = []
    for node in nodes:
        if partition and node.get("partitions") and partition not in node["partitions"]:
            continue
        flags = {str(f).upper() for f in node.get("state_flags") or []}
        flags.add(str(node.get("state") or "").upper())
        bad = sorted(flags & UNUSABLE_NODE_FLAGS)
        if bad:
            reason = node.get("reason") or "no reason given"
            found.append(f"{node.get('name')} ({'+'.join(bad)}: {reason})")
    return found


def attention(job: dict[str, Any], nodes: Sequence[dict[str, Any]]) -> str | None:
    """Return why the job will not run and the commands that let it, None when it can run.

    `nodes` is slurmrestd's `GET /nodes` (only asked when `might_be_stuck`); the job's
    partition's unusable nodes are named with the `scontrol` line that returns each to service.
    """
    if not might_be_stuck(job):
        return None
    job_id = job.get("job_id")
    why = [f"reason {job.get('state_reason') or 'none'}"]
    if job.get("state_description"):
        why.append(str(job["state_description"]))
    if job.get("priority") == 0:
        why.append("priority 0")
    bad = unusable_nodes(nodes, job.get("partition"))
    held = is_held(job)
    if not held and not bad:
        # e.g. ReqNodeNotAvail for the seconds a restarted slurmctld waits for slurmd to
        # register again (measured): no node is out, so nothing for a person to do yet
        return None
    steps = []
    if bad:
        why.append(f"node(s) {', '.join(bad[:NAMED_NODES])}")
        if len(bad) > NAMED_NODES:
            why.append(f"and {len(bad) - NAMED_NODES} more")
        names = ",".join(entry.split(" ")[0] for entry in bad[:NAMED_NODES])
        steps.append(f"`scontrol update nodename={names} state=resume` (once the node is sound)")
    if held:
        who = "an administrator" if job.get("state_reason") == "JobHeldAdmin" else "a person"
        steps.append(f"`scontrol release {job_id}` ({who})")
    kind = "held" if held else "waiting for nodes that take no job"
    return (
        f"Slurm job {job_id} is {kind} and will not run until someone acts "
        f"({'; '.join(why)}); to go on: {', then '.join(steps)}; or `scancel {job_id}`, and the "
        "run submits a new job"
    )
