"""What a DuckDB query's text reveals before anything runs: whether it aggregates, whether it
is grouped, and whether its shape must be withheld rather than checked.

The query itself is parsed and planned by :mod:`sdc_magic.capture.sql`; these are the
decisions the wrappers (:mod:`sdc_magic.capture.duckdb`) take on the text alone, before any
evidence is bound, and the reasons shown when a result is withheld. Kept apart from the
evidence queries (:mod:`.evidence`) because nothing here touches a connection.
"""

from __future__ import annotations

import re

from ..sql import MIXED_LEVELS, mixed_levels

#: words of a query that may aggregate; a query with none of them is never parsed (row-level)
AGGREGATING = ("group", "pivot", "count(", "sum(", "avg(", "mean(", "min(", "max(", "median(", "quantile",
               "stddev", "var")
RELATION_VIEW = "__sdc_relation"  # the name a captured relation's source takes in its evidence queries
PLANNING_FAILED = ("the evidence of this query could not be prepared, so it cannot be checked: it is not shown "
                   "(%sdc debug shows why). Simplify the query, or aggregate in pandas.")
PIVOT_SEVERAL = ("a PIVOT with several USING aggregates is not checked cell by cell here: pivot one aggregate "
                 "at a time (each is checked and protected), or GROUP BY the keys and the ON column.")
HAVING_WITH_TOTALS = ("HAVING drops groups that this table's ROLLUP / CUBE / GROUPING SETS totals still "
                      "count, so subtracting the groups shown from a total gives the dropped ones away. Filter rows "
                      "with WHERE, or leave the totals out and let sdc_magic hide the small groups.")


def aggregates(query: str) -> bool:
    """Whether the query may aggregate (a cheap look at its words): only those are parsed and
    planned, every other query runs as the user wrote it and is checked as row-level data."""
    low = query.lower()
    return any(word in low for word in AGGREGATING)


def mixed_levels_safe(query: str) -> bool:
    """:func:`sdc_magic.capture.sql.mixed_levels`, False when the query cannot be read."""
    try:
        return mixed_levels(query)
    except Exception:
        return False


def withheld_reason(query: str) -> str | None:
    """Why a query we cannot plan must not be shown at all (None: check it as usual).

    Fail closed for shapes whose cells are related in ways no plan models: aggregates of
    different grouping levels side by side, and PIVOTs of several aggregates.
    """
    try:
        if mixed_levels(query):
            return MIXED_LEVELS
        if re.search(r"\bpivot\b", query, re.IGNORECASE) and _pivot_aggregates(query) > 1:
            return PIVOT_SEVERAL
    except Exception:  # a parse we cannot read: the usual (unverified) path
        return None
    return None


def _pivot_aggregates(query: str) -> int:
    """The number of USING aggregates of the query's PIVOT (0 when there is none)."""
    from sqlglot import exp

    from ..sql import parse_last, pivot_node

    stmt = parse_last(query)
    node = pivot_node(stmt) if stmt is not None else None
    if node is None and stmt is not None:
        node = next((p for p in stmt.find_all(exp.Pivot)), None)
    return len(node.args.get("using") or []) if node is not None else 0


def grouped(query: str) -> bool:
    """A grouped query (GROUP BY or PIVOT), not a window over rows (those are row-level)."""
    return bool(re.search(r"\bgroup\s+by\b|\bpivot\b", query, re.IGNORECASE)) and \
        not re.search(r"\bover\s*\(", query, re.IGNORECASE)

