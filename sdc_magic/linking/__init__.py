"""Linked outputs: a table is only dangerous in company.

The same people appear in every output of a session. Two defences, both driven by the
*rows* behind each published cell (its population):

* **Differencing** (:mod:`.differencing`): a new cell whose rows differ by 1 to
  ``threshold - 1`` from an earlier published cell, or a sum of them, is made primary; a
  cell with exactly the rows of a cell an earlier output hid is hidden too.
* **Joint audit** (:mod:`.joint`, LPs in :mod:`.joint_bounds`): the new table's and related
  earlier tables' hidden cells are audited together; the new table hides more cells, or is
  blocked, only for what *it* makes recoverable.

The modules, bottom up (each imports only those before it):

* :mod:`.names` — how cells and outputs are named in explanations;
* :mod:`.identity` — row fingerprints (64-bit hashes per column, occurrence rank);
* :mod:`.universes` — the union of rows of related frames, its atoms, placing a frame, merging;
* :mod:`.populations` — which rows each published cell covers (drafts, indicator variables,
  what protection hid);
* :mod:`.differencing` — cells a few units apart, unit gaps, cells public elsewhere;
* :mod:`.persistence` — the memory saved beside the ledger, read after a kernel restart;
* :mod:`.linker` — :class:`Linker`, the session's memory (bounded) tying these together;
* :mod:`.joint_units` — the audit in units of distinct counts (classes of units as LP variables);
* :mod:`.joint` — the joint audit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .differencing import variant_cells
from .hidden_cells import record_hidden_margins, record_hidden_model
from .linker import Linker
from .populations import (
    MAX_INDICATORS,
    clear_cache,
    indicator_variables,
    indicators_left_out,
)

__all__ = [
    "MAX_INDICATORS",
    "Linker",
    "clear_cache",
    "indicator_variables",
    "indicators_left_out",
    "joint_audit",
    "record_hidden_margins",
    "record_hidden_model",
    "variant_cells",
]

if TYPE_CHECKING:
    from .joint import joint_audit


def __getattr__(name: str) -> Any:
    """``joint_audit`` is imported on first use: it needs HiGHS and scipy, which cost 0.2 s at
    ``%load_ext`` and are not needed until a table is linked with earlier outputs (issue 24.9)."""
    if name == "joint_audit":
        from .joint import joint_audit

        return joint_audit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
