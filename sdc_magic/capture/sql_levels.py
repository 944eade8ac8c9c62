"""Queries that put aggregates of different levels side by side: never planned as one table.

A hand-made table with margins (a ``UNION ALL`` of grouped and total rows, a scalar subquery's
total beside the groups) is no shape :mod:`.sql` plans: subtracting the groups shown from the
total gives a dropped group away. The DuckDB capture withholds such a query with
:data:`MIXED_LEVELS` (``capture/duckdb``).
"""

from __future__ import annotations

from typing import Any

from .sql import parse_last

MIXED_LEVELS = ("this query puts aggregates at different levels side by side (a UNION ALL of grouped and "
                "total rows, or a scalar subquery total beside groups): subtracting the groups shown from the "
                "total would give the others away, and it cannot be checked as one table. Publish the groups "
                "and the total as separate queries (each is checked and linked), or use GROUP BY ROLLUP.")


def mixed_levels(query: str) -> bool:
    """Whether the last statement computes aggregates of different grouping levels whose
    values reach the result.

    Every SELECT of the statement counts (UNION branches, scalar subqueries in projections,
    CTEs, FROM subqueries) except those inside a WHERE, HAVING or QUALIFY condition (their
    values filter rows, they are not shown). Two aggregating SELECTs whose GROUP BY differ
    (one may have none: a total) make a hand-made table with margins that no plan checks:
    subtracting shows a dropped (small) group (red team: HAVING count >= 5 UNION ALL
    'Total', 73 − 40 − 30 = 3; the same total as a scalar subquery, or from a CTE).
    """
    from sqlglot import exp

    stmt = parse_last(query)
    if stmt is None:
        return False
    levels: set[str] = set()
    for scope in stmt.find_all(exp.Select):
        if scope.find_ancestor(exp.Where, exp.Having, exp.Qualify) is not None:
            continue
        if not any(_aggregates_here(p, scope) for p in scope.expressions):
            continue
        group = scope.args.get("group")
        levels.add(group.sql("duckdb") if group is not None else "()")
    return len(levels) > 1


def _aggregates_here(projection: Any, scope: Any) -> bool:
    """An aggregate of this SELECT itself (not of a nested subquery)."""
    from sqlglot import exp

    return any(agg.find_ancestor(exp.Select) is scope for agg in projection.find_all(exp.AggFunc))
