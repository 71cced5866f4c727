"""A run key's folder on the shared storage: spec, checkpoints, progress, model and result.

The folder is named by the run key, not by a Slurm job id: every Slurm job submitted for the
key (a resubmission after a failure, a job Slurm lost) trains in the same folder, so it resumes
from the last checkpoint the one before saved. The submitting side and the batch job agree on
these names and on nothing else.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrain_assets.gpu.client import MODEL_FILE

# What a Slurm job name can carry without quoting trouble, and what the platform's run keys
# are (16 hex characters); anything else is refused before a job is submitted.
RUN_KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
JOB_NAME_PREFIX = "retrain-"
# The batch job's module and the variable carrying its attempt number. Named here, not in
# train_job, so the submitting side does not import LightGBM (every Dagster run imports it).
MODULE = "retrain_assets.gpu.slurm.train_job"
ATTEMPT_ENV = "RETRAIN_SLURM_ATTEMPT"


class BadRunKey(ValueError):
    """A run key Slurm job names (and our folder names) cannot carry."""


def checked_run_key(run_key: str) -> str:
    """Return the key when Slurm can carry it in a job name; else raise BadRunKey saying why."""
    if not RUN_KEY_PATTERN.fullmatch(run_key):
        raise BadRunKey(
            f"run key {run_key[:120]!r} cannot name a Slurm job: 1 to 100 of A-Z a-z 0-9 . _ -,"
            " starting with a letter or digit"
        )
    return run_key


def job_name(run_key: str) -> str:
    """Return the Slurm job name that carries the run key."""
    return JOB_NAME_PREFIX + checked_run_key(run_key)


def run_key_of(name: object) -> str | None:
    """Return the run key a job name carries, None for a job that is not ours."""
    if isinstance(name, str) and name.startswith(JOB_NAME_PREFIX):
        key = name[len(JOB_NAME_PREFIX) :]
        return key if RUN_KEY_PATTERN.fullmatch(key) else None
    return None


@dataclass(frozen=True)
class JobFiles:
    """The files of one run key under the shared storage folder."""

    folder: Path

    @classmethod
    def of(cls, storage: Path, run_key: str) -> JobFiles:
        """Return the files of `run_key` under `storage`."""
        return cls(storage / checked_run_key(run_key))

    @property
    def spec(self) -> Path:
        """The training spec the batch job reads (written before each submit)."""
        return self.folder / "spec.json"

    @property
    def model(self) -> Path:
        """The trained model (LightGBM text), written by the trainer."""
        return self.folder / MODEL_FILE

    @property
    def result(self) -> Path:
        """sha256, size, metrics and the Slurm job id, written last: its presence is success."""
        return self.folder / "result.json"

    @property
    def progress(self) -> Path:
        """Rounds done and the last checkpoint round, rewritten as training goes."""
        return self.folder / "progress.json"

    def output(self, job_id: int) -> Path:
        """The batch job's stdout and stderr."""
        return self.folder / f"slurm-{job_id}.out"

    @property
    def output_pattern(self) -> str:
        """The `standard_output` pattern given to Slurm (`%j` is the job id)."""
        return str(self.folder / "slurm-%j.out")

    def read(self, path: Path) -> dict[str, Any] | None:
        """Return a JSON file's object, None when it is missing; raise naming it when it is bad."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not JSON: {error}") from error
        if not isinstance(data, dict):
            raise ValueError(f"{path} holds {type(data).__name__}, not a JSON object")
        return data

    def tail(self, job_id: int, lines: int = 8) -> str:
        """Return the last lines of a job's output ('' when there is none)."""
        try:
            text = self.output(job_id).read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a JSON file atomically (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, sort_keys=True))
    os.replace(partial, path)
