"""How deep the capture is inside its own work (one counter per thread).

Why a module of its own: the pandas wrappers (:mod:`.pandas`) and the wrappers of derived
tables (:mod:`.derivations`) must agree on it. While it is above zero, every wrapper passes
straight through to pandas: pandas calling itself inside an aggregation, and the capture's
own recomputations, are not the analyst's calls.
"""

from __future__ import annotations

import threading
from typing import Any


class Depth(threading.local):
    value = 0
    groupings: list[Any] | None = None  # GroupBy objects used by nested calls of the current call


depth = Depth()
