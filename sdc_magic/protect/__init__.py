"""Secondary cell suppression with audited protection intervals.

The model
---------
A table is its inner cells over N dimensions plus every margin an attacker may know:
totals over every subset of dimensions and the sub-totals of declared hierarchies.
All cells ``a`` satisfy linear relations ``M·a = 0`` (total − Σ parts = 0), see
:mod:`.model`.  Hiding a set of cells publishes, for each hidden cell, an *interval of
possibles*: the min and max of its value over all tables that agree with the
published cells, satisfy the relations and respect the a-priori bounds (inner cells
≥ 0, plus any declared bounds).

A primary cell (one that fails a rule of :mod:`sdc_magic.rules`, or is flagged by the
caller) is protected when its interval covers its *protection interval*
``[v − LPL, v + UPL]`` (INSEE: ±10 %; rule-derived levels for dominance and p %, see
:mod:`.levels`).  Secondary suppression hides further cells, at least cost (cell
value by default, as in tau-Argus), until every primary is protected — against the
outsider and, by default, against every single contributor of a hidden cell, who
knows that cell's value.

Methods: an optimal MIP with attacker cuts (:mod:`.mip`), a fast cover-and-repair
heuristic for large tables (:mod:`.heuristic`); both end with the audit
(:mod:`.audit`), and a pattern is only reported safe when it passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Protection", "audit", "protect", "protection_levels"]

if TYPE_CHECKING:
    from .api import Protection, audit, protect
    from .levels import protection_levels


def __getattr__(name: str) -> Any:
    """The search and its solvers (HiGHS, scipy, PuLP: 0.5 s of imports) load on first use, not
    when a module only needs the certificate's plain functions (issue 24.9: ``%load_ext``
    should cost imports of what a first table needs)."""
    if name in ("Protection", "audit", "protect"):
        from . import api

        return getattr(api, name)
    if name == "protection_levels":
        from .levels import protection_levels

        return protection_levels
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
