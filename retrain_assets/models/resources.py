"""Resources of the model side: the training backend's client and the machine's services.

The GPU resource resolves its backend, URL and token when a run or tick starts (`up` exports
them), so the same code location talks to the local reference service, a remote one, or a
Slurm cluster (RETRAIN_TRAINING_BACKEND=slurm, `gpu/backends.py`).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from retrain_assets.gpu.backends import training_backend
from retrain_assets.gpu.protocol import GpuService
from retrain_assets.machines.handoff import HandoffView
from retrain_assets.machines.training import TrainingServices
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.settings import retrain_home


class GpuServiceResource(dg.ConfigurableResource):
    """The training backend: the remote GPU training service (HTTP), or Slurm when chosen.

    `definitions.py` sets the URL and token from RETRAIN_GPU_URL and RETRAIN_GPU_TOKEN
    (`dg.EnvVar`; `up` exports both). Left unset (a resource built by hand), they default to
    `settings.gpu_service_url()` and `settings.gpu_token()`, the one place that resolves them.
    """

    url: str | None = Field(default=None, description="Default: settings.gpu_service_url()")
    token: str | None = Field(default=None, description="Default: settings.gpu_token()")
    timeout_seconds: float = 30.0

    def client(self) -> GpuService:
        """Return a client of the backend RETRAIN_TRAINING_BACKEND names (default: HTTP)."""
        return training_backend(self.url, self.token, self.timeout_seconds)


def training_services(
    db_url: str,
    gpu: GpuService,
    storage_root: str,
    *,
    handoff: HandoffView | None = None,
    fetching: bool = False,
) -> TrainingServices:
    """Return what the training machine's transitions use, for one run or tick.

    `storage_root`: the `partition_storage` resource's root (candidates are stored under it);
    `handoff`: the sensor's hand-off facts; `fetching`: True in the candidate run only.
    """
    downloads = retrain_home() / "downloads"
    return TrainingServices(
        gpu=gpu,
        candidates=CandidateTable(db_url, storage_root),
        download_dir=lambda run_key: Path(downloads) / run_key,
        handoff=handoff,
        fetching=fetching,
    )
