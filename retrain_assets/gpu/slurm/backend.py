"""`SlurmBackend`: `protocol.GpuService` on a Slurm cluster, through slurmrestd.

One Slurm job at a time per run key: the job's name carries the key (`retrain-<run key>`), and
`submit` first looks the key up (`find`), so a retry attaches to a queued or running job,
returns a finished one, and queues a new job only when the last one failed or Slurm no longer
knows it. Training happens in the run key's folder on the shared storage
(`job_files`), so a new job resumes from the checkpoint the last one saved.

Job ids given to the platform are `<slurm job id>:<run key>`: a job Slurm has forgotten (it
purges finished jobs after MinJobAge, and can lose a job submitted just before slurmctld died)
can still be judged by its key's folder: its result means it succeeded, else it is FAILED with
that said, and JOB_FAILED's resubmission looks the key up again.

The key's `result.json` naming the job, with a model that hashes to its sha256, is success
whatever Slurm still says: a slurmctld that crashed while the job ran recovers it as a held,
requeued copy (PENDING, JobHeldUser) of a training already done; that copy is cancelled, so
the crash costs a download, not a day. A queued job that only a person can let run (held, its
nodes drained or down) carries `Job.attention`: Slurm's reason and the commands to run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from retrain_assets.gpu.protocol import Artifact, ArtifactCorrupt, Job, JobStatus
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.slurm import states, stuck
from retrain_assets.gpu.slurm.job_files import (
    ATTEMPT_ENV,
    MODULE,
    JobFiles,
    job_name,
    run_key_of,
    write_json,
)
from retrain_assets.gpu.slurm.rest import SlurmRest, SlurmRestError, UnknownJob

ATTEMPTS_FILE = "attempts"  # one line per Slurm job submitted for the key
SUBMITTING_FILE = "submitting"  # a submit is under way: its job id is not recorded yet
# `statuses` asks a batch of at most this many jobs one `GET /job/{id}` each (a hash lookup on
# slurmctld, whatever else the cluster holds); a larger batch, one `GET /jobs` (every job of the
# cluster). Measured on the one-node cluster holding 10,000 held jobs of another platform
# (benchmarks/bench_slurm_poller.py; BENCHMARKS.md, "Asked by id or listed", 2026-12-08): a
# call by id costs 5 - 7 ms, the listing 2.7 - 3.6 s, and by id stopped being cheaper between
# 400 and 500 jobs beside another benchmark (near 700 alone); 400 was cheaper in every run.
BY_ID_LIMIT = 400


class ArtifactMissing(Exception):
    """A job ended without the result its training writes last: there is nothing to fetch."""


@dataclass(frozen=True)
class SlurmJobOptions:
    """How jobs are submitted: where they queue, for how long, what they ask for, what runs."""

    partition: str | None = None
    time_limit_minutes: int = 360
    gres: str | None = None
    python: str = sys.executable
    cpus: int = 1
    hold: bool = False  # submit held (priority 0): benchmarks, or an operator who releases
    user: str | None = (
        None  # the Slurm user the platform submits as: other users' jobs are not ours
    )


def split_job_id(job_id: str) -> tuple[int, str]:
    """Return the Slurm job id and the run key of a platform job id `<slurm id>:<run key>`.

    Raises:
        ValueError: the id is not of that form, saying what was expected.
    """
    number, _, run_key = job_id.partition(":")
    if not number.isdigit() or not run_key:
        raise ValueError(f"job id {job_id[:120]!r} is not '<slurm job id>:<run key>'")
    return int(number), run_key


def _ours(job_id: str) -> bool:
    try:
        split_job_id(job_id)
    except ValueError:
        return False
    return True


class SlurmBackend:
    """The platform's training jobs as Slurm batch jobs."""

    # never split a poll batch: a small one is asked by id, a large one in one `GET /jobs`, which
    # each slice of a split would repeat
    STATUS_SLICE = 1_000_000

    def __init__(self, rest: SlurmRest, storage: Path, options: SlurmJobOptions) -> None:
        self.rest = rest
        self.storage = storage
        self.options = options
        # in every job's comment: two platforms on one cluster (their own storage each) never
        # take each other's jobs for theirs, even for the same run key
        self.platform = hashlib.sha256(str(storage).encode()).hexdigest()[:12]

    def ours(self, data: dict[str, Any], run_key: str | None = None) -> bool:
        """Return True for a job this platform submitted (for `run_key`, when given).

        Its name carries a run key, its user is the platform's (when RETRAIN_SLURM_USER says
        which), and its comment names this platform (jobs submitted before comments named it
        have no `platform=` and pass on name and user).
        """
        key = run_key_of(data.get("name"))
        if key is None or (run_key is not None and key != run_key):
            return False
        if self.options.user and data.get("user_name") != self.options.user:
            return False
        comment = str(data.get("comment") or "")
        return "platform=" not in comment or f"platform={self.platform}" in comment.split()

    def close(self) -> None:
        """Close the slurmrestd connection."""
        self.rest.close()

    def submit(self, idempotency_key: str, spec: dict[str, Any]) -> Job:
        """Return the key's live or succeeded job, else queue a new one that resumes its folder.

        Raises:
            BadRunKey: Slurm cannot carry the key in a job name.
            ValueError: the spec is not a valid training spec (no job is submitted).
            SlurmRestError: slurmrestd refused the job (e.g. a gres the nodes do not have).
        """
        files = JobFiles.of(self.storage, idempotency_key)
        try:
            checked = TrainingSpec.model_validate(spec)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise ValueError(f"training spec of run key {idempotency_key}: {problems}") from None
        existing = self.find(idempotency_key)
        if existing is not None and existing.status in (JobStatus.QUEUED, JobStatus.RUNNING):
            return existing
        if existing is not None and existing.status is JobStatus.SUCCEEDED:
            return existing
        write_json(files.spec, checked.model_dump(mode="json"))
        attempt = len(self._attempts(files)) + 1
        marker = files.folder / SUBMITTING_FILE
        marker.write_text(f"attempt {attempt}\n")  # until the id is recorded: `find` lists
        slurm_id = self.rest.submit(self._script(files), self._job(files, idempotency_key, attempt))
        self._record_attempt(files, slurm_id)
        return self.get(f"{slurm_id}:{idempotency_key}")

    def _record_attempt(self, files: JobFiles, slurm_id: int) -> None:
        """Append the job's id to the key's attempts (once) and drop the submit marker."""
        if slurm_id not in self._attempts(files):
            with (files.folder / ATTEMPTS_FILE).open("a") as log:
                log.write(f"{slurm_id}\n")
        (files.folder / SUBMITTING_FILE).unlink(missing_ok=True)

    def find(self, idempotency_key: str) -> Job | None:
        """Return the key's newest job: the last one its folder recorded, asked by id.

        One small call, not a listing of the cluster (which costs seconds at 10,000 jobs). Only
        a submit that was interrupted between asking Slurm and recording the id (its marker is
        still there) is looked up by name in the listing of every job.
        """
        files = JobFiles.of(self.storage, idempotency_key)
        if (files.folder / SUBMITTING_FILE).exists():
            mine = [j for j in self.rest.jobs() if self.ours(j, idempotency_key)]
            if mine:
                newest = max(mine, key=lambda job: int(job["job_id"]))
                self._record_attempt(files, int(newest["job_id"]))
                return self._job_of(newest, idempotency_key, files, self._nodes_if_stuck([newest]))
            (files.folder / SUBMITTING_FILE).unlink()  # that submit never reached Slurm
        attempts = self._attempts(files)
        return self.get(f"{attempts[-1]}:{idempotency_key}") if attempts else None

    def get(self, job_id: str) -> Job:
        """Return one job; one Slurm no longer knows, or not ours, is judged by its key's folder."""
        slurm_id, run_key = split_job_id(job_id)
        files = JobFiles.of(self.storage, run_key)
        data = self._our_job(slurm_id, run_key)
        if data is None:
            return self._forgotten(slurm_id, run_key, files)
        return self._job_of(data, run_key, files, self._nodes_if_stuck([data]))

    def _our_job(self, slurm_id: int, run_key: str) -> dict[str, Any] | None:
        """Return Slurm's record of the id when it is this platform's job for `run_key`.

        None when slurmctld forgot the id, or the id now names another job: a slurmctld that
        lost its state hands out ids again (seen: a resubmission got a lost job's id), so a
        recorded id alone never proves the job is still ours.
        """
        data = self._record_of(slurm_id)
        return data if data is not None and self.ours(data, run_key) else None

    def _record_of(self, slurm_id: int) -> dict[str, Any] | None:
        """Return slurmctld's record of the id (`GET /job/{id}`), None when it forgot it."""
        try:
            return self.rest.job(slurm_id)
        except UnknownJob:
            return None

    def statuses(self, job_ids: list[str]) -> dict[str, Job]:
        """Return every asked job; ones Slurm forgot, or not ours, judged by their folder.

        Only this platform's jobs are asked for while the batch is small (`BY_ID_LIMIT`: one
        `GET /job/{id}` each), so a tick does not download a shared cluster's every job; a
        larger batch is one `GET /jobs`. Either way a job counts only when it is `ours` for
        its run key. An id not of this backend's form (a run started on another backend) is
        left out, as the protocol says of unknown ids: its own poll then asks `get`, which
        fails that run alone with the reason, instead of failing the whole batch.

        Raises:
            SlurmRestError: any call but a forgotten id's failed; the batch fails with it.
        """
        wanted = {job_id: split_job_id(job_id) for job_id in job_ids if _ours(job_id)}
        if not wanted:
            return {}
        asked = {slurm_id for slurm_id, _ in wanted.values()}
        known = self._asked_by_id(asked) if len(asked) <= BY_ID_LIMIT else self._listed(asked)
        nodes = self._nodes_if_stuck(list(known.values()))
        found: dict[str, Job] = {}
        for job_id, (slurm_id, run_key) in wanted.items():
            files = JobFiles.of(self.storage, run_key)
            data = known.get(slurm_id)
            if data is not None and self.ours(data, run_key):
                found[job_id] = self._job_of(data, run_key, files, nodes)
            else:
                found[job_id] = self._forgotten(slurm_id, run_key, files)
        return found

    def _asked_by_id(self, asked: set[int]) -> dict[int, dict[str, Any]]:
        """Return the asked jobs of this platform that slurmctld knows, one `GET /job/{id}` each.

        An id slurmctld forgot, or that names another user's or platform's job, is left out.

        Raises:
            SlurmRestError: a call failed (an outage or an answer), as the listing's would.
        """
        known: dict[int, dict[str, Any]] = {}
        for slurm_id in sorted(asked):
            data = self._record_of(slurm_id)
            if data is not None and self.ours(data) and int(data["job_id"]) == slurm_id:
                known[slurm_id] = data
        return known

    def _listed(self, asked: set[int]) -> dict[int, dict[str, Any]]:
        """Return the asked jobs of this platform from one `GET /jobs` (every job it knows)."""
        listed = {int(job["job_id"]): job for job in self.rest.jobs() if self.ours(job)}
        return {slurm_id: job for slurm_id, job in listed.items() if slurm_id in asked}

    def _nodes_if_stuck(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the cluster's nodes when a job might be stuck (one call), else nothing."""
        return self.rest.nodes() if any(stuck.might_be_stuck(job) for job in jobs) else []

    def cancel(self, job_id: str) -> Job:
        """Cancel the job (Slurm kills it after KillWait); a forgotten or foreign one is left be."""
        slurm_id, run_key = split_job_id(job_id)
        if self._our_job(slurm_id, run_key) is not None:  # never another platform's job
            with contextlib.suppress(UnknownJob):  # it went meanwhile: `get` says what became of it
                self.rest.cancel(slurm_id)
        return self.get(job_id)

    def download(self, job_id: str, destination: Path) -> Artifact:
        """Copy the key's model from the shared storage to `destination`, verifying its sha256.

        Raises:
            ArtifactMissing: the job wrote no result (nothing was trained to the end).
            ArtifactCorrupt: the model's bytes do not hash to the result's sha256.
        """
        _, run_key = split_job_id(job_id)
        files = JobFiles.of(self.storage, run_key)
        result = files.read(files.result)
        if result is None or not files.model.is_file():
            raise ArtifactMissing(f"job {job_id} left no model and result under {files.folder}")
        destination.mkdir(parents=True, exist_ok=True)
        final = destination / files.model.name
        partial = destination / f".{files.model.name}.partial"
        shutil.copyfile(files.model, partial)
        actual = hashlib.sha256(partial.read_bytes()).hexdigest()
        if actual != result.get("sha256"):
            partial.unlink(missing_ok=True)
            raise ArtifactCorrupt(
                f"model of job {job_id}: result.json says sha256 {result.get('sha256')}, "
                f"{files.model} hashes to {actual}"
            )
        partial.replace(final)
        metrics = {name: float(value) for name, value in dict(result["metrics"]).items()}
        return Artifact(job_id=job_id, path=final, sha256=actual, metrics=metrics)

    def _script(self, files: JobFiles) -> str:
        return f"#!/bin/sh\nexec {self.options.python} -m {MODULE} {files.folder}\n"

    def _job(self, files: JobFiles, run_key: str, attempt: int) -> dict[str, Any]:
        """Return the job description: name = key, requeue, limits and gres from settings."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(files.folder),
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            ATTEMPT_ENV: str(attempt),
        }
        job: dict[str, Any] = {
            "name": job_name(run_key),
            "comment": f"retrain_assets run_key={run_key} attempt={attempt} "
            f"platform={self.platform}",
            "current_working_directory": str(files.folder),
            "standard_output": files.output_pattern,
            "standard_error": files.output_pattern,
            "open_mode": "append",  # a requeued run adds to the first run's output
            "environment": env,
            "requeue": True,
            "time_limit": self.options.time_limit_minutes,
            "cpus_per_task": self.options.cpus,
            "tasks": 1,
            "nodes": 1,
        }
        if self.options.partition:
            job["partition"] = self.options.partition
        if self.options.gres:
            job["gres"] = self.options.gres
        if self.options.hold:
            job["hold"] = True
        return job

    def _attempts(self, files: JobFiles) -> list[int]:
        try:
            lines = (files.folder / ATTEMPTS_FILE).read_text().split()
        except FileNotFoundError:
            return []
        return [int(line) for line in lines if line.isdigit()]

    def _job_of(
        self,
        data: dict[str, Any],
        run_key: str,
        files: JobFiles,
        nodes: list[dict[str, Any]],
    ) -> Job:
        """Map slurmrestd's job onto `Job` (see the module doc for the result.json rule).

        COMPLETED without a result is FAILED, saying so; a queued job only a person can let
        run carries `attention`, naming the hold and the commands (`nodes`: `GET /nodes`).
        """
        slurm_id = int(data["job_id"])
        status, error = states.meaning(data).status, None
        words = states.describe(data)
        if verified_result(files, slurm_id) is not None:
            if status is not JobStatus.SUCCEEDED:
                words = self._succeeded_anyway(slurm_id, status, words, files)
            return self._record(slurm_id, run_key, files, JobStatus.SUCCEEDED, None, words)
        if status is JobStatus.SUCCEEDED:
            status = JobStatus.FAILED
            words += f"; but it wrote no result under {files.folder}: no artifact"
        if status in (JobStatus.FAILED, JobStatus.CANCELLED):
            tail = files.tail(slurm_id)
            error = f"{words}; output: {tail}" if tail else words
        attention = stuck.attention(data, nodes) if not status.finished else None
        return self._record(slurm_id, run_key, files, status, error, words, attention)

    def _succeeded_anyway(
        self, slurm_id: int, status: JobStatus, words: str, files: JobFiles
    ) -> str:
        """Cancel the copy Slurm still holds or runs of a job whose result is in; say so."""
        said = f"{words}; but {files.result} names job {slurm_id} and its model's sha256 checks"
        if status.finished:
            return f"{said}: succeeded"
        try:
            self.rest.cancel(slurm_id)
        except UnknownJob:
            return f"{said}: succeeded (Slurm forgot the copy meanwhile)"
        except SlurmRestError as error:  # the run goes on; a person can cancel the copy
            return (
                f"{said}: succeeded; cancelling Slurm's copy failed ({error}): `scancel {slurm_id}`"
            )
        return f"{said}: succeeded, Slurm's {status} copy cancelled"

    def _forgotten(self, slurm_id: int, run_key: str, files: JobFiles) -> Job:
        """Judge a job Slurm does not know by its key's folder: a result of it is success."""
        if verified_result(files, slurm_id) is not None:
            words = f"Slurm no longer knows job {slurm_id}; its result is in {files.folder}"
            return self._record(slurm_id, run_key, files, JobStatus.SUCCEEDED, None, words)
        error = (
            f"Slurm no longer knows job {slurm_id} (purged after MinJobAge, or lost when "
            f"slurmctld restarted) and it left no result under {files.folder}; a resubmission "
            "looks the run key up again and resumes from the last checkpoint"
        )
        tail = files.tail(slurm_id)
        error = f"{error}; output: {tail}" if tail else error
        return self._record(slurm_id, run_key, files, JobStatus.FAILED, error, error)

    def _record(
        self,
        slurm_id: int,
        run_key: str,
        files: JobFiles,
        status: JobStatus,
        error: str | None,
        detail: str,
        attention: str | None = None,
    ) -> Job:
        progress = files.read(files.progress) or {}
        total = int(progress.get("total_rounds") or _total_rounds(files))
        done = total if status is JobStatus.SUCCEEDED else int(progress.get("rounds_done") or 0)
        checkpoint = progress.get("last_checkpoint_round")
        return Job(
            id=f"{slurm_id}:{run_key}",
            idempotency_key=run_key,
            status=status,
            attempt=max(len(self._attempts(files)), 1),
            rounds_done=done,
            total_rounds=total,
            last_checkpoint_round=int(checkpoint) if checkpoint is not None else None,
            error=error,
            detail=detail,
            attention=attention,
        )


def verified_result(files: JobFiles, slurm_id: int) -> dict[str, Any] | None:
    """Return the key's result when it names this job and its model hashes to its sha256.

    None otherwise: no result, another job's (an earlier attempt's), or a model that does not
    match (being rewritten by a rerun, or damaged), which Slurm's own state then judges.
    """
    result = files.read(files.result)
    if result is None or str(result.get("job_id")) != str(slurm_id):
        return None
    try:
        actual = hashlib.sha256(files.model.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    return result if actual == result.get("sha256") else None


def _total_rounds(files: JobFiles) -> int:
    spec = files.read(files.spec) or {}
    params = spec.get("params")
    return int(params.get("num_boost_round", 0)) if isinstance(params, dict) else 0
