"""How deep the capture is inside its own work (one counter per thread).

Why a module of its own: the pandas wrappers (:mod:`.pandas`) and the wrappers of derived
tables (:mod:`.derivations`) must agree on it. While it is above zero, every wrapper passes
straight through to pandas: pandas calling itself inside an aggregation, and the capture's
own recomputations, are not the analyst's calls.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class Depth(threading.local):
    value = 0
    groupings: list[Any] | None = None  # GroupBy objects used by nested calls of the current call


depth = Depth()


@contextlib.contextmanager
def passthrough() -> Iterator[None]:
    """The extension's own work: every wrapper passes straight through for the duration.

    Why: checking and linking call pandas (``value_counts`` of a million row fingerprints,
    groupbys of the rows behind a table); through the capture's wrappers each such call was
    recorded as if the analyst had made it — a second table of a crosstab spent 6.6 of its
    10 CPU s registering linking's own value counts, and such entries crowd the analyst's
    out of the registry. Linking's entry points and checking's label and margin-row steps use it;
    the rest of checking relies on the wrappers (a displayed polars frame converted to pandas keeps
    its marks through them), and suggestions need their candidate tables captured.
    """
    depth.value += 1
    try:
        yield
    finally:
        depth.value -= 1


def own_work(method: Callable[..., T]) -> Callable[..., T]:
    """Decorator: ``method`` runs inside :func:`passthrough` (linking's entry points use it)."""
    @functools.wraps(method)
    def run(*args: Any, **kwargs: Any) -> T:
        with passthrough():
            return method(*args, **kwargs)
    return run
