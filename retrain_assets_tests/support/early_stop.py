"""Stop the session's shared platform once the last test that uses it in this worker has run.

A session fixture lives until its worker's last test. The shared platform's groups take about
half of a worker's session, and after them its daemon and code server go on ticking (about a
tenth of a core) while the worker runs other files, on a 2-core machine the suite keeps busy.
The platform's tests run in a row in one worker (support/worker_groups.py), so the first test
after them that does not use it is the moment to stop it: `stop_after` is called from the
teardown hook with the next test, and `refuse_if_stopped` makes a test that comes later anyway
fail with the reason instead of talking to a stopped platform.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from retrain_assets_tests.support.platform import RunningPlatform
from retrain_assets_tests.support.worker_groups import SHARED_PLATFORM_FIXTURE


@dataclass
class SharedPlatformLife:
    """The worker's shared platform while it runs, and whether it was stopped early."""

    platform: RunningPlatform | None = None
    stopped_early: bool = False

    def stop_after(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Stop the platform if `item` used it and `nextitem` (None: none) does not."""
        if self.platform is None or self.stopped_early or not uses_shared_platform(item):
            return
        if nextitem is not None and uses_shared_platform(nextitem):
            return
        self.stopped_early = True
        code = self.platform.stop()  # SIGTERM: a clean stop
        assert code == 0, f"up exited {code}:\n{self.platform.output.read_text()[-3000:]}"

    def refuse_if_stopped(self, item: pytest.Item) -> None:
        """Fail a test of the shared platform that comes after its early stop."""
        if self.stopped_early and uses_shared_platform(item):
            pytest.fail(
                "the shared platform was stopped after the last of its tests in a row; this "
                "test came later (support/worker_groups.py keeps its users together)"
            )


def uses_shared_platform(item: pytest.Item) -> bool:
    """Return whether a test uses the session's shared platform (directly or through fixtures)."""
    return SHARED_PLATFORM_FIXTURE in getattr(item, "fixturenames", ())


SHARED_PLATFORM_LIFE = SharedPlatformLife()
