import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrain_assets.serving.model_cache import ModelCache
from retrain_assets_tests.support.waiting import wait_until


class CountingLoader:
    """Loads `customer@version` strings, counting loads; can hold loads until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.release = threading.Event()
        self.release.set()
        self.failing = False

    def __call__(self, customer: str, version: str) -> str:
        self.calls.append((customer, version))
        self.release.wait()
        if self.failing:
            raise RuntimeError(f"registry unreachable for {customer} v{version}")
        return f"{customer}@{version}"


def test_keeps_at_most_capacity_models_dropping_the_least_recently_used():
    loader = CountingLoader()
    cache = ModelCache(loader, capacity=2)
    assert cache.get("a", "1") == "a@1"
    cache.get("b", "1")
    cache.get("a", "1")  # a is now the most recent
    cache.get("c", "1")  # drops b
    assert cache.loaded() == [("a", "1"), ("c", "1")]
    assert cache.get("b", "1") == "b@1"  # loaded again
    assert loader.calls == [("a", "1"), ("b", "1"), ("c", "1"), ("b", "1")]


def test_concurrent_requests_for_a_loading_model_wait_for_the_one_load():
    loader = CountingLoader()
    loader.release.clear()
    cache = ModelCache(loader, capacity=4)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(cache.get, "a", "7") for _ in range(8)]
        wait_until(lambda: loader.calls, 10, "the first load to start", interval=0.01)
        loader.release.set()
        assert {future.result(timeout=10) for future in futures} == {"a@7"}
    assert loader.calls == [("a", "7")]


def test_a_failed_load_reaches_its_waiters_and_is_tried_again_next_time():
    loader = CountingLoader()
    loader.release.clear()
    loader.failing = True
    cache = ModelCache(loader, capacity=4)
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(cache.get, "a", "1") for _ in range(3)]
        wait_until(lambda: loader.calls, 10, "the first load to start", interval=0.01)
        loader.release.set()
        for future in futures:
            with pytest.raises(RuntimeError, match="registry unreachable for a v1"):
                future.result(timeout=10)
    assert cache.loaded() == []  # a failure is not cached
    loader.failing = False
    assert cache.get("a", "1") == "a@1"
    assert cache.loaded() == [("a", "1")]


def test_capacity_must_hold_a_model():
    with pytest.raises(ValueError, match="at least one model"):
        ModelCache(CountingLoader(), capacity=0)
