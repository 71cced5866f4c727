"""The training machine's services for tests: fakes for the GPU service and candidate store.

`services()` builds a TrainingServices of in-memory fakes for a test that drives the machine
directly; `FakeGpuResource` hands the one module-wide `GPU` fake to a sensor under test (the
sensor builds its resources itself), so a test resets it with `GPU.__init__()`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrain_assets.machines.handoff import HandoffView
from retrain_assets.machines.training import TrainingServices
from retrain_assets.models.resources import GpuServiceResource
from retrain_assets_tests.machines.fakes import FakeGpu, MemoryCandidates

SPEC: dict[str, Any] = {"customer": "acme", "snapshot": "s1", "rounds": 10}


def services(
    tmp_path: Path,
    gpu: FakeGpu | None = None,
    candidates: MemoryCandidates | None = None,
    handoff: HandoffView | None = None,
    fetching: bool = False,
) -> TrainingServices:
    """In-memory services for the training machine, downloads under `tmp_path`."""
    return TrainingServices(
        gpu=gpu or FakeGpu(),
        candidates=candidates or MemoryCandidates(),
        download_dir=lambda run_key: tmp_path / "downloads" / run_key,
        handoff=handoff,
        fetching=fetching,
    )


GPU = FakeGpu()


class FakeGpuResource(GpuServiceResource):
    """The poller's GPU resource, handing out the test's fake service."""

    def client(self) -> FakeGpu:  # type: ignore[override]  # the fake, not an HTTP client
        """Return the module-wide fake."""
        return GPU
