"""Which pytest-xdist worker runs which tests, and in what order, for `make test`.

`make test` runs the suite in several workers (`--dist loadgroup`). A group runs whole in one
worker, so:
- every test that uses the session's `shared_platform` is in one of two groups: the rollouts
  and the UI journeys, and the rest (training admin, windows and outages, feature backfill).
  A group runs whole in one worker, whose session starts its platform once; the two groups
  usually land in two workers, so two platforms run side by side (one group of all of them
  had become the suite's critical path: 18 minutes of tests in a row);
- every other test stays with its file: a module-scoped platform (the policy daemon's, the
  chaos suite's) is started once too.
Groups are handed out in the order of the collection, so the longest go first (longest
processing time first): the worker that takes the last group takes a short one, and no worker
starts a five-minute group when the others are nearly done. The order of tests inside a file
never changes (some files are a sequence).
"""

from __future__ import annotations

import pytest

SHARED_PLATFORM_FIXTURE = "shared_platform"
SHARED_PLATFORM_GROUP = "shared-platform"  # the rest of the platform's users
ROLLOUTS_AND_UI_GROUP = "shared-platform-rollouts-ui"
# the files of the second group, by path prefix (each file stays whole: module fixtures)
ROLLOUTS_AND_UI = (
    "retrain_assets_tests/deployment/test_rollout_daemon.py",
    "retrain_assets_tests/ui/",
)
# The groups measured longest (docs/tests.md has the figures), longest first. A group not
# named here comes after them, system tests before the rest. pytest-xdist hands a worker its
# next group while 2 tests of its current one are left, so a one-test group (the live demo)
# comes with the group after it: the live demo follows the Slurm cluster's many tests, or the
# worker that finished the shared platform's group first took the live demo and the Slurm
# cluster both (865 s against 843 s for the others, stop 43).
LONGEST_GROUPS = (
    ROLLOUTS_AND_UI_GROUP,
    SHARED_PLATFORM_GROUP,
    "retrain_assets_tests/chaos/test_chaos_system.py",
    "retrain_assets_tests/gpu/slurm/test_slurm_system.py",
    "retrain_assets_tests/runtime/test_live_demo_system.py",
    "retrain_assets_tests/serving/test_service_system.py",
)


def group_of(item: pytest.Item) -> str:
    """Return the group of a test: one of the shared platform's two, else its file's."""
    if SHARED_PLATFORM_FIXTURE in getattr(item, "fixturenames", ()):
        if item.nodeid.startswith(ROLLOUTS_AND_UI):
            return ROLLOUTS_AND_UI_GROUP
        return SHARED_PLATFORM_GROUP
    return item.nodeid.split("::", 1)[0]


def rank_of(group: str, system: bool) -> tuple[int, int]:
    """Return a sort key: the longest groups in their order, then system files, then the rest."""
    if group in LONGEST_GROUPS:
        return (0, LONGEST_GROUPS.index(group))
    return (1, 0) if system else (2, 0)


def assign_groups(items: list[pytest.Item]) -> None:
    """Mark each test with its xdist group and sort the groups longest first, in place."""
    groups = {id(item): group_of(item) for item in items}
    system_groups = {groups[id(item)] for item in items if item.get_closest_marker("system")}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    # sorted() is stable: the tests of one file keep their order
    items.sort(key=lambda item: rank_of(groups[id(item)], groups[id(item)] in system_groups))


def check_groups_reached_xdist(node_ids: list[str]) -> None:
    """Fail loudly if pytest-xdist did not carry the groups in the node ids (it says nothing).

    With pytest 9.2 and pytest-xdist 3.8 the `@group` suffix never reaches the node id
    (pytest-dev/pytest-xdist#1386): every test would be scheduled alone, and the shared platform
    and the chaos platform started once per worker, on a 2-core machine.
    """
    ungrouped = [node_id for node_id in node_ids if "@" not in node_id.rsplit("]", 1)[-1]]
    if ungrouped:
        pytest.exit(
            f"--dist loadgroup lost the test groups ({len(ungrouped)} tests, e.g. "
            f"{ungrouped[0]}): this pytest and pytest-xdist do not carry them "
            "(pytest-dev/pytest-xdist#1386); install the versions pyproject.toml pins",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
