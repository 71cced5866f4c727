"""Keep `$RETRAIN_HOME/platform.json` in step with what `up` runs (runtime/platform_file.py).

`up` calls `update` after each start, once ready and on every turn of its watch loop; the file
is rewritten only when something changed (a restarted child has a new pid), so `down` and the
reaper always find the processes that run now.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from retrain_assets.runtime.platform_file import (
    PlatformRecord,
    RecordedProcess,
    write_platform_file,
)
from retrain_assets.runtime.supervisor import Supervisor


@dataclass
class PlatformRecorder:
    """The record of this `up`: the servers it started itself, its children, its endpoints."""

    home: Path
    up: RecordedProcess = field(default_factory=lambda: RecordedProcess.of("up", os.getpid()))
    servers: list[RecordedProcess] = field(default_factory=list)
    endpoints: Mapping[str, str] = field(default_factory=dict)
    ready: bool = False
    _known: dict[int, RecordedProcess] = field(default_factory=dict)
    _written: PlatformRecord | None = None

    def update(self, supervisor: Supervisor) -> None:
        """Write the record when it differs from the one on disk."""
        record = PlatformRecord(
            up=self.up,
            ready=self.ready,
            processes=(*self.servers, *self._children(supervisor)),
            endpoints=dict(self.endpoints),
        )
        if record != self._written:
            write_platform_file(self.home, record)
            self._written = record

    def _children(self, supervisor: Supervisor) -> list[RecordedProcess]:
        children = []
        for child in supervisor.children:
            pid = child.process.pid
            if pid not in self._known:
                try:
                    self._known[pid] = RecordedProcess.of(child.spec.name, pid)
                except psutil.NoSuchProcess:
                    continue  # it crashed already; its restart is recorded
            children.append(self._known[pid])
        return children
