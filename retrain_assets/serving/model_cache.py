"""A bounded, least-recently-used cache of loaded models, keyed by (customer, version).

Loading a version from the registry takes a round trip to MLflow and a parse of the model, so
it happens once per key: requests that need a model while it is being loaded wait for that one
load (and share its failure) instead of each starting their own. A failed load is not cached:
the next request tries again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

_Model = TypeVar("_Model")
Key = tuple[str, str]


class ModelCache(Generic[_Model]):
    """At most `capacity` models in memory; the least recently used one goes first."""

    def __init__(self, load: Callable[[str, str], _Model], capacity: int) -> None:
        """Load with `load(customer, version)`; keep at most `capacity` (at least 1) models."""
        if capacity < 1:
            raise ValueError(f"the model cache needs room for at least one model, not {capacity}")
        self._load = load
        self.capacity = capacity
        self._lock = threading.Lock()
        self._models: OrderedDict[Key, _Model] = OrderedDict()
        self._loading: dict[Key, Future[_Model]] = {}

    def get(self, customer: str, version: str) -> _Model:
        """Return the model, loading it if it is not in memory (waiting for a load under way).

        Raises:
            Exception: whatever the load raised (to every request that waited for it).
        """
        key = (customer, version)
        with self._lock:
            model = self._models.get(key)
            if model is not None:
                self._models.move_to_end(key)
                return model
            pending = self._loading.get(key)
            owner = pending is None
            if pending is None:
                pending = self._loading[key] = Future()
        if not owner:
            return pending.result()
        try:
            model = self._load(customer, version)
        except BaseException as error:
            with self._lock:
                del self._loading[key]
            pending.set_exception(error)
            raise
        with self._lock:
            self._models[key] = model
            while len(self._models) > self.capacity:
                self._models.popitem(last=False)
            del self._loading[key]
        pending.set_result(model)
        return model

    def loaded(self) -> list[Key]:
        """Return the keys in memory, least recently used first."""
        with self._lock:
            return list(self._models)
