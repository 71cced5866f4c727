"""Resources of the model side: the GPU service client and the training machine's services.

The GPU resource resolves its URL and token when a run or tick starts (`up` exports them), so
the same code location talks to the local reference service or a real remote one.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from retrain_assets.gpu.client import HttpGpuService
from retrain_assets.machines.handoff import HandoffView
from retrain_assets.machines.training import TrainingServices
from retrain_assets.models.candidates import CandidateTable
from retrain_assets.settings import retrain_home, storage_root

DEFAULT_GPU_URL = "http://127.0.0.1:8765"


class GpuServiceResource(dg.ConfigurableResource):
    """The remote GPU training service (HTTP); default URL and token from the environment."""

    url: str | None = Field(default=None, description="Default: $RETRAIN_GPU_URL")
    token: str | None = Field(default=None, description="Default: $RETRAIN_GPU_TOKEN")
    timeout_seconds: float = 30.0

    def client(self) -> HttpGpuService:
        """Return an HTTP client for the service."""
        url = self.url or os.environ.get("RETRAIN_GPU_URL") or DEFAULT_GPU_URL
        token = self.token or os.environ.get("RETRAIN_GPU_TOKEN") or "dev-token"
        return HttpGpuService(url, token, timeout=self.timeout_seconds)


def training_services(
    db_url: str,
    gpu: HttpGpuService,
    *,
    handoff: HandoffView | None = None,
    fetching: bool = False,
) -> TrainingServices:
    """Return what the training machine's transitions use, for one run or tick.

    `handoff`: the sensor's hand-off facts; `fetching`: True in the candidate run only.
    """
    downloads = retrain_home() / "downloads"
    return TrainingServices(
        gpu=gpu,
        candidates=CandidateTable(db_url, storage_root()),
        download_dir=lambda run_key: Path(downloads) / run_key,
        handoff=handoff,
        fetching=fetching,
    )
