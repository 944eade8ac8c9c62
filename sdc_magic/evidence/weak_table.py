"""A value per live object, by identity, held weakly, the newest ``limit`` of them.

Why one class: the capture marks results (aggregates, withheld tables, selections by value), the
linking caches column hashes per frame, and both remember where re-indexed rows came from; frames
are not hashable, must not be kept alive by us, and an id is reused once its object is gone. Each
entry holds a weak reference and is dropped when its object dies (checked against the object on
every read, so a reused id never returns another object's value). Lives here, below capture and
linking, which both use it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_lock = threading.RLock()  # weakref callbacks may run while it is held


class WeakTable:
    """``set(obj, value)`` / ``get(obj)``; at most ``limit`` entries, the oldest dropped first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._table: dict[int, tuple[Any, Any]] = {}

    def set(self, obj: Any, value: Any) -> bool:
        """Remember ``value`` for ``obj``; False when ``obj`` cannot be referenced weakly."""
        key = id(obj)

        def forget(ref: Any, key: int = key) -> None:
            try:
                with _lock:
                    current = self._table.get(key)
                    if current is not None and current[0] is ref:
                        self._table.pop(key, None)
            except Exception:  # interpreter shutdown
                pass

        try:
            ref = weakref.ref(obj, forget)
        except TypeError:
            return False
        with _lock:
            self._table.pop(key, None)
            self._table[key] = (ref, value)
            while len(self._table) > self.limit:
                self._table.pop(next(iter(self._table)))
        return True

    def get(self, obj: Any) -> Any:
        """The value remembered for ``obj`` (None when none, or when it was another object's)."""
        with _lock:
            hit = self._table.get(id(obj))
        return None if hit is None or hit[0]() is not obj else hit[1]

    def discard(self, obj: Any) -> None:
        """Forget the value remembered for ``obj`` (nothing when there is none)."""
        with _lock:
            hit = self._table.get(id(obj))
            if hit is not None and hit[0]() is obj:
                self._table.pop(id(obj), None)

    def clear(self) -> None:
        """Forget every value (a benchmark's first display in a fresh kernel starts from none)."""
        with _lock:
            self._table.clear()

    def __contains__(self, obj: Any) -> bool:
        return self.get(obj) is not None

    def __len__(self) -> int:
        return len(self._table)
