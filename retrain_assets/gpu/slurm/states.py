"""Every Slurm job state, mapped explicitly onto a job status and the words the machine records.

The training machine moves on `JobStatus` alone (the table is in docs/slurm.md): QUEUED and
RUNNING make POLL_JOB wait (its note names the Slurm state and reason), SUCCEEDED moves on to
AWAIT_CANDIDATE, FAILED and CANCELLED take the "remote failed" branch to JOB_FAILED, whose
resubmission looks the run key up again. A state this table does not name is FAILED with that
said, never a wait that could last forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from retrain_assets.gpu.protocol import JobStatus

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
FAILED, CANCELLED = JobStatus.FAILED, JobStatus.CANCELLED


@dataclass(frozen=True)
class StateMeaning:
    """What one Slurm state means for the platform."""

    status: JobStatus
    words: str


STATES: dict[str, StateMeaning] = {
    "PENDING": StateMeaning(QUEUED, "waiting in Slurm's queue"),
    "CONFIGURING": StateMeaning(QUEUED, "allocated, its node is being configured"),
    "REQUEUED": StateMeaning(QUEUED, "requeued by Slurm (node failure or preemption)"),
    "REQUEUE_HOLD": StateMeaning(QUEUED, "requeued and held: an operator must release it"),
    "REQUEUE_FED": StateMeaning(QUEUED, "requeued by the federation"),
    "RESV_DEL_HOLD": StateMeaning(QUEUED, "held after its reservation was deleted"),
    "SUSPENDED": StateMeaning(RUNNING, "suspended by Slurm, resumes where it stopped"),
    "RUNNING": StateMeaning(RUNNING, "training"),
    "COMPLETING": StateMeaning(RUNNING, "ending, Slurm is cleaning up its node"),
    "STAGE_OUT": StateMeaning(RUNNING, "staging out"),
    "SIGNALING": StateMeaning(RUNNING, "being signalled"),
    "RESIZING": StateMeaning(RUNNING, "being resized"),
    "COMPLETED": StateMeaning(JobStatus.SUCCEEDED, "exited 0"),
    "FAILED": StateMeaning(FAILED, "the training exited non-zero"),
    "TIMEOUT": StateMeaning(FAILED, "hit its time limit"),
    "NODE_FAIL": StateMeaning(FAILED, "its node failed"),
    "PREEMPTED": StateMeaning(FAILED, "preempted by a job of higher priority"),
    "OUT_OF_MEMORY": StateMeaning(FAILED, "ran out of memory"),
    "BOOT_FAIL": StateMeaning(FAILED, "its node failed to boot"),
    "DEADLINE": StateMeaning(FAILED, "missed its deadline"),
    "SPECIAL_EXIT": StateMeaning(FAILED, "ended with a special exit"),
    "REVOKED": StateMeaning(FAILED, "revoked by the federation"),
    "STOPPED": StateMeaning(FAILED, "stopped by a signal"),
    "CANCELLED": StateMeaning(CANCELLED, "cancelled (scancel, or the platform's cancel)"),
}


def base_state(job: dict[str, Any]) -> str:
    """Return the job's base state name (`job_state` may carry flags after it)."""
    raw = job.get("job_state")
    state = raw[0] if isinstance(raw, list) and raw else raw
    return str(state or "").replace(",", " ").split(" ")[0].upper()


def meaning(job: dict[str, Any]) -> StateMeaning:
    """Return what the job's state means; an unnamed state is FAILED, saying so."""
    state = base_state(job)
    known = STATES.get(state)
    if known is not None:
        return known
    return StateMeaning(FAILED, f"in state {state or '(none)'!r}, which this backend does not know")


def finished(job: dict[str, Any]) -> bool:
    """Return True when Slurm will not run the job again (an ended state, no COMPLETING)."""
    raw = job.get("job_state")
    flags = " ".join(raw) if isinstance(raw, list) else str(raw or "")
    return meaning(job).status.finished and "COMPLETING" not in flags.upper()


def describe(job: dict[str, Any]) -> str:
    """Return the machine's words for a job: state, meaning, and Slurm's reason and exit code.

    `exit_code` is the raw wait status (`exit 3` reads 768): shown as `exit status:signal`.
    """
    state = base_state(job) or "(no state)"
    words = [f"Slurm {state}: {meaning(job).words}"]
    reason = job.get("state_reason")
    if reason and reason != "None":
        words.append(f"reason {reason}")
    description = job.get("state_description")
    if description:
        words.append(str(description))
    status = job.get("exit_code")
    if isinstance(status, int) and status and meaning(job).status is not RUNNING:
        words.append(f"exit {status >> 8}:{status & 0x7F}")
    if state == "TIMEOUT" and isinstance(job.get("time_limit"), int):
        words.append(f"time limit {job['time_limit']} min")
    if job.get("restart_cnt"):
        words.append(f"requeued {job['restart_cnt']} time(s)")
    return ", ".join(words)
