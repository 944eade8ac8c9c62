"""Shares of a count in DuckDB SQL: ``100.0 * count(*) / sum(count(*)) OVER (PARTITION BY a)``.

Why (census of stop 57): "percent of the total" is the commonest derived figure of an analyst's
table, and a window over the groups made the whole query untraced: its counts were checked
without evidence, its shares withheld, the table ``review`` in every session that wrote one.

A projection whose only aggregate is one count (``count(*)``, ``count(x)``) and whose only window
is the sum of that same count over a partition of the table's own keys (or over all of it) shows,
per group, a function of the group's count ``n`` and its partition's total ``S``, with constants
(a share, a percent, ``S - n``, rounded or cast). ``S`` is a margin of the table, which its
protection takes as published; so such a cell tells nothing the count does not, once ``S`` is
known. It is planned as the count itself (its facts, rules and protection are the count's), its
cells hidden exactly where the count's would be: the evidence holds the count
(``duckdb.evidence._unwrap_values``) while the displayed share stays for matching.

Not planned (untraced as before): other window functions, an ORDER BY or a frame in the window,
a partition by anything but the table's keys, a window over another aggregate than the one
divided, grouping sets, sums or other statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: statistics whose shares are planned (counts: their evidence value is the units)
SHARE_STATS = frozenset({"size", "count"})


def share_of(projection: Any, key_nodes: list[Any], keys: list[str]) -> tuple[Any, tuple[str, ...]] | None:
    """(the count aggregate node, the partition's key names) when ``projection`` is a function of
    one count and its sum over a partition of ``keys`` (see the module docstring), else None."""
    from sqlglot import exp

    windows = list(projection.find_all(exp.Window))
    if len(windows) != 1:
        return None
    window = windows[0]
    if window.args.get("order") is not None or window.args.get("spec") is not None \
            or window.args.get("alias") is not None or not isinstance(window.this, exp.Sum):
        return None
    inner = window.this.this
    if not isinstance(inner, exp.Count):
        return None
    outside = [a for a in projection.find_all(exp.AggFunc) if a.find_ancestor(exp.Window) is None
               and a.find_ancestor(exp.AggFunc) is None]
    if not outside or any(a.sql("duckdb") != inner.sql("duckdb") for a in outside):
        return None
    partition = []
    for node in window.args.get("partition_by") or []:
        name = _key_named(node, key_nodes, keys)
        if name is None or name in partition:
            return None
        partition.append(name)
    if not _only_arithmetic(projection, window, outside):
        return None
    return outside[0], tuple(partition)


def plan_shares(select: Any, shared: list[tuple[Any, str]], key_nodes: list[Any], keys: list[str],
                analyse: Callable[[Any], tuple[str | None, str, Any, float, float]],
                measures: dict[str, tuple[str | None, str]], columns: dict[str, Any]) -> dict[str, tuple[str, ...]] | None:
    """Plan each projection with a window (``(projection, output name)``) as the count it is a
    share of (``measures``, ``columns`` filled in); the partition of each, or None when one of
    them is no share of a count, or when the query has a window anywhere else (a subquery) or
    drops rows after the windows are computed (LIMIT, OFFSET, FETCH, DISTINCT: the partition's
    total then holds groups the table does not show, red team of 9b47a47: ``ORDER BY count(*) DESC
    LIMIT 2`` showed 40/73 and 30/73, so C = 3): the query is then untraced, as before."""
    from sqlglot import exp

    windows = sum(1 for _ in select.find_all(exp.Window))
    if windows != sum(1 for projection, _ in shared for _ in projection.find_all(exp.Window)):
        return None
    if shared and any(select.args.get(a) is not None for a in ("limit", "offset", "fetch", "distinct")):
        return None
    shares: dict[str, tuple[str, ...]] = {}
    for projection, name in shared:
        found = share_of(projection, key_nodes, keys)
        if found is None:
            return None
        var, stat, node, _, _ = analyse(found[0])
        if stat not in SHARE_STATS:
            return None
        measures[name], shares[name] = (var, stat), found[1]
        if var is not None and node is not None:
            columns.setdefault(var, node)
    return shares


def _key_named(node: Any, key_nodes: list[Any], keys: list[str]) -> str | None:
    """The table's key a PARTITION BY expression is (by its text or its output name), or None."""
    from sqlglot import exp

    text = node.sql("duckdb")
    for key_node, name in zip(key_nodes, keys, strict=True):
        if text == key_node.unalias().sql("duckdb"):
            return name
        if isinstance(node, exp.Column) and not node.table and node.name in (name, key_node.alias_or_name):
            return name
    return None


def _only_arithmetic(projection: Any, window: Any, aggregates: list[Any]) -> bool:
    """Whether, the window and the aggregates aside, the projection is arithmetic of constants:
    no column, no function of the rows, no subquery (what it shows is then a function of the
    group's count and its partition's total only)."""
    from sqlglot import exp

    allowed = (exp.Alias, exp.Paren, exp.Cast, exp.TryCast, exp.Round, exp.Literal, exp.DataType, exp.Mul,
               exp.Div, exp.Add, exp.Sub, exp.Neg, exp.IntDiv, exp.Identifier)
    skipped = {id(window), *(id(a) for a in aggregates)}

    def walk(node: Any) -> bool:
        if id(node) in skipped:
            return True
        if not isinstance(node, allowed):
            return False
        return all(walk(child) for child in node.iter_expressions())

    return walk(projection)
