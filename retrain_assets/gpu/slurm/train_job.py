"""The Slurm batch job: `python -m retrain_assets.gpu.slurm.train_job <run key folder>`.

It trains with the reference service's own trainer (`gpu/service/trainer.py`: the same
LightGBM code, chunks and checkpoints, byte-identical models), resuming from the newest
checkpoint in the folder, so a requeued or resubmitted job continues where the last one
stopped. `result.json` is written last; a job that exits 0 without one has no artifact, and
the backend says so. Faults in the spec (`slow_seconds_per_round`, `fail_at_round`) apply to
the attempt they list, as in the reference service, so tests can run a job long or fail it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from retrain_assets.gpu.service.faults import FaultPlan
from retrain_assets.gpu.service.schemas import TrainingSpec
from retrain_assets.gpu.service.trainer import TrainingHooks, checkpoint_file, train
from retrain_assets.gpu.slurm.job_files import MODULE, JobFiles, write_json
from retrain_assets.settings_model import current_settings

_CHECKPOINT = re.compile(r"round-(\d{6})\.txt")


def newest_checkpoint(folder: Path) -> tuple[int, Path | None]:
    """Return the newest checkpoint's round and path, (0, None) when training starts fresh."""
    rounds = [
        int(match.group(1))
        for path in (folder / "checkpoint").glob("round-*.txt")
        if (match := _CHECKPOINT.fullmatch(path.name))
    ]
    if not rounds:
        return 0, None
    newest = max(rounds)
    return newest, checkpoint_file(folder, newest)


def run(folder: Path, job_id: str, attempt: int) -> None:
    """Train the spec in `folder` to its end, resuming from its newest checkpoint."""
    files = JobFiles(folder)
    data = files.read(files.spec)
    if data is None:
        raise FileNotFoundError(f"no training spec at {files.spec}")
    spec = TrainingSpec.model_validate(data)
    start, checkpoint = newest_checkpoint(folder)
    total = spec.params.num_boost_round
    faults = FaultPlan.for_attempt(spec.faults, attempt)

    def progress(rounds_done: int, checkpoint_round: int | None) -> None:
        state = {"job_id": job_id, "rounds_done": rounds_done, "total_rounds": total}
        write_json(files.progress, {**state, "last_checkpoint_round": checkpoint_round})

    def after_round(round_no: int) -> None:
        faults.after_round(round_no)
        if round_no % max(1, spec.checkpoint_every // 5) == 0:
            progress(round_no, None)

    print(f"job {job_id} attempt {attempt}: training from round {start} of {total}", flush=True)
    result = train(
        spec,
        folder,
        start,
        checkpoint,
        TrainingHooks(
            before_round=faults.before_round,
            after_round=after_round,
            on_checkpoint=lambda round_no, _path: progress(round_no, round_no),
        ),
    )
    write_json(
        files.result,
        {
            "job_id": job_id,
            "sha256": result.sha256,
            "size": result.size,
            "metrics": result.metrics,
            "resumed_from_round": start,
        },
    )
    print(f"job {job_id}: model sha256 {result.sha256}, {result.metrics}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the batch job; a failure is printed to the job's output and exits 1."""
    sys.modules.setdefault("sklearn", None)  # type: ignore[arg-type]  # LightGBM's eager import
    parser = argparse.ArgumentParser(prog=MODULE)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    job_id = os.environ.get("SLURM_JOB_ID", "local")
    attempt = current_settings().slurm_attempt
    try:
        run(args.folder, job_id, attempt)
    except Exception as error:
        print(f"job {job_id} failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
