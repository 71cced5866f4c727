"""Choose the training backend: the reference GPU service (default) or a Slurm cluster.

Both implement `protocol.GpuService`, so the training machine and `gpu_job_poller` never know
which one they drive; RETRAIN_TRAINING_BACKEND picks one when a run or tick starts.
"""

from __future__ import annotations

from retrain_assets import settings
from retrain_assets.gpu.client import HttpGpuService
from retrain_assets.gpu.protocol import GpuService
from retrain_assets.gpu.slurm.backend import SlurmBackend, SlurmJobOptions
from retrain_assets.gpu.slurm.rest import SlurmRest


def slurm_backend(timeout: float = 30.0) -> SlurmBackend:
    """Return the Slurm backend the RETRAIN_SLURM_* settings describe."""
    rest = SlurmRest(
        settings.slurm_url(),
        token=settings.slurm_token(),
        user=settings.slurm_user(),
        timeout=timeout,
    )
    options = SlurmJobOptions(
        partition=settings.slurm_partition(),
        time_limit_minutes=settings.slurm_time_limit_minutes(),
        gres=settings.slurm_gres(),
        python=settings.slurm_python(),
        user=settings.slurm_user(),
    )
    return SlurmBackend(rest, settings.slurm_storage(), options)


def training_backend(
    url: str | None = None, token: str | None = None, timeout: float = 30.0
) -> GpuService:
    """Return the backend RETRAIN_TRAINING_BACKEND names (`url`/`token`: the reference's).

    Raises:
        ValueError: the variable names no backend, or a Slurm setting is invalid.
    """
    if settings.training_backend() == "slurm":
        return slurm_backend(timeout)
    return HttpGpuService(
        url or settings.gpu_service_url(), token or settings.gpu_token(), timeout=timeout
    )
