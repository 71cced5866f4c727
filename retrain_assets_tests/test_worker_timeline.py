"""The workers' timelines printed at the end of `make test` (support/worker_timeline)."""

from __future__ import annotations

from retrain_assets_tests.support.worker_timeline import WorkerTimeline, group_of_node_id


def test_a_group_is_read_from_the_node_id_and_a_file_without_one_is_its_own_group() -> None:
    assert group_of_node_id("a/test_x.py::test_y@shared-platform") == "shared-platform"
    assert group_of_node_id("a/test_x.py::test_y[p@q]") == "a/test_x.py"
    assert group_of_node_id("a/test_x.py::test_y[p]@a/test_x.py") == "a/test_x.py"


def test_each_worker_says_when_it_finished_and_its_longest_groups_first() -> None:
    timeline = WorkerTimeline()
    timeline.add("gw0", "shared-platform", 100.0, 160.0)
    timeline.add("gw0", "shared-platform", 160.0, 400.0)
    timeline.add("gw0", "a/test_fast.py", 400.0, 410.0)
    timeline.add("gw1", "a/test_chaos.py", 105.0, 300.0)
    assert timeline.lines() == [
        "gw0: done at 310 s, busy 310 s in 2 groups: shared-platform 300 s (from 0), "
        "test_fast.py 10 s (from 300)",
        "gw1: done at 200 s, busy 195 s in 1 groups: test_chaos.py 195 s (from 5)",
    ]
    assert WorkerTimeline().lines() == []
