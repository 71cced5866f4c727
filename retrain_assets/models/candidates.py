"""Candidates: the verified model file of each run key, stored once under the run key.

The table's primary key is the run key, so a retried download, a re-run of `model_candidate`
or two replicas racing can never leave two candidates for one run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from psycopg2.extras import Json
from upath import UPath

from retrain_assets.gpu.protocol import Artifact
from retrain_assets.store.database import one_row, transaction

if TYPE_CHECKING:  # lightgbm (with scikit-learn and scipy) is imported where a model is loaded
    import lightgbm


@dataclass(frozen=True)
class Candidate:
    """One stored candidate."""

    run_key: str
    customer: str
    job_id: str
    sha256: str
    path: str
    metrics: dict[str, float]

    def load_model(self) -> lightgbm.Booster:
        """Return the stored LightGBM model (local folder or object storage)."""
        import lightgbm

        return lightgbm.Booster(model_str=UPath(self.path).read_text())


class CandidateTable:
    """Candidate files under `<storage>/candidates/<customer>/<run key>/`, rows in Postgres."""

    def __init__(self, db_url: str, storage_url: str) -> None:
        """Keep where rows and files go."""
        self.db_url, self.storage = db_url, UPath(storage_url) / "candidates"

    def has_candidate(self, customer: str, run_key: str) -> bool:
        """Return True when this run key's candidate is already stored."""
        return self.get(run_key) is not None

    def get(self, run_key: str) -> Candidate | None:
        """Return the candidate of a run key, if stored."""
        with transaction(self.db_url) as cur:
            cur.execute(
                "SELECT run_key, customer, job_id, sha256, path, metrics "
                "FROM model_candidates WHERE run_key = %s",
                (run_key,),
            )
            row = cur.fetchone()
        return Candidate(*row) if row else None

    def save_candidate(self, customer: str, run_key: str, artifact: Artifact) -> None:
        """Copy the verified file under the run key and record it (first writer wins)."""
        folder = self.storage / customer / run_key
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "model.txt"
        with target.open("wb") as handle:
            handle.write(artifact.path.read_bytes())
        (folder / "candidate.json").write_text(
            json.dumps(
                {"sha256": artifact.sha256, "job_id": artifact.job_id, "metrics": artifact.metrics}
            )
        )
        with transaction(self.db_url) as cur:
            cur.execute(
                """
                INSERT INTO model_candidates (run_key, customer, job_id, sha256, path, metrics)
                VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_key) DO NOTHING
                """,
                (
                    run_key,
                    customer,
                    artifact.job_id,
                    artifact.sha256,
                    str(target),
                    Json(artifact.metrics),
                ),
            )

    def count_for(self, run_key: str) -> int:
        """Return how many candidates a run key has (the audit expects exactly one)."""
        with transaction(self.db_url) as cur:
            cur.execute("SELECT count(*) FROM model_candidates WHERE run_key = %s", (run_key,))
            return int(one_row(cur)[0])
