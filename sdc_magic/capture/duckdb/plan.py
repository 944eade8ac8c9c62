"""What a DuckDB query's text reveals before anything runs: whether it aggregates, whether it
is grouped, and whether its shape must be withheld rather than checked.

The query itself is parsed and planned by :mod:`sdc_magic.capture.sql`; these are the
decisions the wrappers (:mod:`sdc_magic.capture.duckdb`) take on the text alone, before any
evidence is bound, and the reasons shown when a result is withheld. Kept apart from the
evidence queries (:mod:`.evidence`) because nothing here touches a connection.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from typing import Any

from ..sql_levels import MIXED_LEVELS, mixed_levels

#: words of a query that may aggregate; a query with none of them is never parsed (row-level)
AGGREGATING = ("group", "pivot", "count(", "sum(", "avg(", "mean(", "min(", "max(", "median(", "quantile",
               "stddev", "var")
RELATION_VIEW = "__sdc_relation"  # the name a captured relation's source takes in its evidence queries
PLANNING_FAILED = ("the evidence of this query could not be prepared, so it cannot be checked: it is not shown "
                   "(%sdc debug shows why). Simplify the query, or aggregate in pandas.")
PIVOT_SEVERAL = ("a PIVOT with several USING aggregates is not checked cell by cell here: pivot one aggregate "
                 "at a time (each is checked and protected), or GROUP BY the keys and the ON column.")
HAVING_UNSHOWN = ("HAVING pins a figure this table does not show (an aggregate or arithmetic of aggregates "
                  "that is not one of its columns, kept within a narrow range), or tests a figure otherwise than "
                  "against a number: the groups kept tell that figure, which the check cannot hide. Show the "
                  "figure as a column and compare it with a number (it is checked), or filter rows with WHERE.")
HAVING_WITH_TOTALS = ("HAVING drops groups that this table's ROLLUP / CUBE / GROUPING SETS totals still "
                      "count, so subtracting the groups shown from a total gives the dropped ones away. Filter rows "
                      "with WHERE, or leave the totals out and let sdc_magic hide the small groups.")


def aggregates(query: str) -> bool:
    """Whether the query may aggregate (a cheap look at its words): only those are parsed and
    planned, every other query runs as the user wrote it and is checked as row-level data.
    Any aggregate function DuckDB knows counts (``histogram(district)`` is a table of counts)."""
    low = query.lower()
    if any(word in low for word in AGGREGATING):
        return True
    if getattr(_reading_catalog, "active", False):
        return False  # (the catalog query of aggregate_names, through the captured execute)
    return _aggregate_call().search(low) is not None


#: Set while :func:`aggregate_names` reads DuckDB's catalog: its query goes through the captured
#: ``execute``, which asked :func:`aggregates` of it, which read the catalog again: 123 nested
#: connections and queries before Python's recursion limit ended it, 7 CPU s on the first
#: aggregating query of a session (every session's first DuckDB display, 2026-12-04).
_reading_catalog = threading.local()


@functools.lru_cache(maxsize=1)
def aggregate_names() -> frozenset[str]:
    """The names of DuckDB's aggregate functions (its catalog; a fixed list without DuckDB)."""
    try:
        import duckdb

        _reading_catalog.active = True
        try:
            con = duckdb.connect()
            try:
                rows = con.execute("select distinct function_name from duckdb_functions() "
                                   "where function_type = 'aggregate'").fetchall()
            finally:
                con.close()
        finally:
            _reading_catalog.active = False  # (also when connecting fails: never left set)
        return frozenset(str(r[0]).lower() for r in rows)
    except Exception:
        return frozenset({"histogram", "list", "array_agg", "string_agg", "group_concat", "listagg", "mode",
                          "entropy", "approx_top_k", "product", "bit_and", "bit_or", "bool_and", "bool_or"})


@functools.lru_cache(maxsize=1)
def _aggregate_call() -> re.Pattern[str]:
    names = sorted(aggregate_names(), key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\s*\(")


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



UNTRACED_TOTALS = ("this query's ROLLUP / CUBE / GROUPING SETS totals sit inside a query sdc_magic cannot plan "
                   "(a filter, join or window around them): a total minus the groups shown gives a dropped group "
                   "away, so it is not shown. Show the grouped query itself (its totals are "
                   "checked with its groups), or filter rows with WHERE before grouping.")
SUMMARY_OF_AGGREGATE = ("SUMMARIZE of an aggregated table summarises its cells (their minimum, their quartiles): "
                        "the very cells its protection would hide, so it is not shown. Show the aggregate itself "
                        "(it is checked), or SUMMARIZE the microdata.")


@dataclass(frozen=True)
class Untraced:
    """A query with aggregates that the capture could not plan (a window over groups, a join of
    aggregates, arithmetic between them): ``computed`` says, per column of the result, whether it
    is computed from aggregates rather than being one (None when the columns are not known)."""

    computed: tuple[bool, ...] | None
    #: no GROUP BY, every aggregate inside a window: the rows themselves, with their groups'
    #: figures beside them (row-level data whose computed columns are withheld)
    per_row: bool = False

    #: ``computed`` describes the last columns only (``SELECT *, ...``)
    after_star: bool = False
    #: per column (as ``computed``), whether it is a column of the source (a group's label)
    keys: tuple[bool, ...] | None = None
    #: an outer WHERE / QUALIFY keeps rows by a subquery's aggregate bounded from both sides
    #: (``where n = 2 or n > 15``): if any cell is hidden, nothing may be drawn (see
    #: :func:`value_pins`)
    pins: bool = False

    def labels(self, names: list[str]) -> tuple[str, ...] | None:
        """The result's columns that are source columns (the groups' labels), None when not known."""
        if self.keys is None or self.after_star or len(self.keys) != len(names):
            return None
        return tuple(str(n) for n, k in zip(names, self.keys, strict=True) if k)

    def columns(self, names: list[str]) -> tuple[str, ...] | None:
        """The result's computed columns by name (None when they cannot be told apart)."""
        if self.computed is None or len(self.computed) > len(names) or (
                not self.after_star and len(self.computed) != len(names)):
            return None
        tail = names[len(names) - len(self.computed):]
        return tuple(str(n) for n, c in zip(tail, self.computed, strict=True) if c)


def untraced_shape(query: str) -> Untraced | str | None:
    """How to show the result of a query the capture could not plan.

    None: no aggregate anywhere in it (row-level data, shown as such). A str: withheld, the
    reason (SUMMARIZE of an aggregate; grouping-set totals inside an outer query). Else an
    :class:`Untraced`, checked as an aggregate without evidence: whole numbers as counts, its
    computed columns and other numbers withheld (:func:`sdc_magic.capture.contract.mark_untraced`).
    The decision is the query's tree's, not its words' (a window over ``count(*)`` is not a
    window over rows). A query sqlglot cannot read is untraced, columns unknown.
    """
    from sqlglot import exp

    from ..sql import parse_last

    try:
        tree = parse_last(query)
    except Exception:
        tree = None
    if tree is None:
        return Untraced(None)
    if not any(True for _ in tree.find_all(exp.AggFunc, exp.Group)) and not _unknown_aggregate(tree):
        return None
    if isinstance(tree, exp.Summarize):
        return SUMMARY_OF_AGGREGATE
    if any(node.find_ancestor(exp.Select) is not tree for node in tree.find_all(exp.Rollup, exp.Cube, exp.GroupingSets)):
        return UNTRACED_TOTALS  # nested: the outer query's filter or join is not modelled
    definitions = _definitions(tree)
    pins = value_pins(tree, definitions)
    if not isinstance(tree, exp.Select):
        return Untraced(None, pins=pins)
    per_row = tree.find(exp.Group) is None and tree.find(exp.Window) is not None and not _unknown_aggregate(tree) \
        and all(a.find_ancestor(exp.Window) is not None for a in tree.find_all(exp.AggFunc))
    projections = _star_expanded(tree) or list(tree.expressions)
    if any(isinstance(p, exp.Star) for p in projections[1:]) or (
            projections and isinstance(projections[0], exp.Star) and not per_row):
        return Untraced(None, pins=pins)
    if projections and isinstance(projections[0], exp.Star):
        # SELECT *, <windows>: the source's columns, then the computed ones (told apart by count)
        return Untraced(tuple(_computed(p, definitions) for p in projections[1:]), per_row=True, after_star=True,
                        pins=pins)
    return Untraced(tuple(_computed(p, definitions) for p in projections), per_row=per_row,
                    keys=tuple(isinstance(p.this if isinstance(p, exp.Alias) else p, exp.Column) for p in projections),
                    pins=pins)


def value_pins(tree: Any, definitions: dict[str, list[Any]] | None = None) -> bool:
    """Whether a WHERE, QUALIFY, HAVING or join condition keeps rows by an aggregate's value in
    a closed range (:func:`..sql_rewrites.two_sided`, read through ``NOT``).

    The aggregate is a column a subquery or CTE computes with an aggregate function
    (``select * from (select district, count(*) n ... ) where n = 2 or n > 15``), or the aggregate
    itself: the rows kept tell their figures, as ``HAVING count(*) = 2`` does (red team, issue
    23: the outer form showed C F hidden beside A's rows, with its value in the query).
    Comparisons on labels (``district = 'A'``) do not count.
    """
    from sqlglot import exp

    from ..sql_rewrites import two_sided

    definitions = _definitions(tree) if definitions is None else definitions
    figures = {name for name, defs in definitions.items()
               if any(d.find(exp.AggFunc) is not None or _unknown_aggregate(d) for d in defs)}
    for alias in tree.find_all(exp.TableAlias):  # with c(d, s, k) as (select ..., count(*) ...)
        inner = alias.parent.this if isinstance(alias.parent, exp.CTE | exp.Subquery) else None
        if isinstance(inner, exp.Select) and alias.columns:
            figures |= {col.name for col, p in zip(alias.columns, inner.expressions, strict=False)
                        if p.find(exp.AggFunc) is not None or _unknown_aggregate(p)}
    for _ in range(8):  # names given to figures again (select n as m, n + 0 as m)
        more = {name for name, defs in definitions.items() if name not in figures
                and any(c.name in figures for d in defs for c in d.find_all(exp.Column))}
        if not more:
            break
        figures |= more

    def is_figure(node: Any) -> bool:
        if node.find(exp.AggFunc) is not None or _unknown_aggregate(node):
            return True
        return any(col.name in figures for col in node.find_all(exp.Column))

    conditions = []
    for select in tree.find_all(exp.Select):
        for clause in ("where", "qualify", "having"):
            cond = select.args.get(clause)
            if cond is not None:
                conditions.append(cond.this if hasattr(cond, "this") else cond)
        for join in select.args.get("joins") or []:
            on, using = join.args.get("on"), join.args.get("using") or []
            if (on is not None and is_figure(on)) or any(getattr(u, "name", None) in figures for u in using):
                return True  # (a join on a figure: the rows of a list of values)
    for minus in tree.find_all(exp.Except):  # (rows taken away by a condition: kept by its negation)
        for select in minus.expression.find_all(exp.Select):
            cond = select.args.get("where")
            if cond is not None:
                conditions.append(exp.Not(this=cond.this))
    # (read together: bounds split between a subquery and its outer query make one range)
    return bool(conditions) and two_sided(exp.and_(*conditions), is_figure)


def _star_expanded(tree: Any) -> list[Any] | None:
    """``SELECT * FROM (<select>)`` (or a CTE): the inner select's projections, else None."""
    from sqlglot import exp

    if [type(p) for p in tree.expressions] != [exp.Star] or tree.args.get("joins"):
        return None
    source = tree.args.get("from")
    source = source.this if source is not None else None
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        inner = source.this
    elif isinstance(source, exp.Table):
        ctes = {c.alias_or_name: c.this for c in tree.find_all(exp.CTE)}
        inner = ctes.get(source.name)
    else:
        inner = None
    if not isinstance(inner, exp.Select) or any(isinstance(p, exp.Star) for p in inner.expressions):
        return None
    return list(inner.expressions)


def _unknown_aggregate(tree: Any) -> bool:
    """A call sqlglot does not know as an aggregate but DuckDB does (``histogram``, ``mode``...)."""
    from sqlglot import exp

    names = aggregate_names()
    return any(str(node.name).lower() in names for node in tree.find_all(exp.Anonymous))


def _definitions(tree: Any) -> dict[str, list[Any]]:
    """What each column name is defined as in the query's subqueries and CTEs (every definition)."""
    from sqlglot import exp

    out: dict[str, list[Any]] = {}
    for select in tree.find_all(exp.Select):
        if select is tree:
            continue
        for p in select.expressions:
            name = p.alias_or_name
            if name and not isinstance(p, exp.Star):
                out.setdefault(name, []).append(p.this if isinstance(p, exp.Alias) else p)
    return out


def _unwrapped(node: Any) -> Any:
    from sqlglot import exp

    while isinstance(node, exp.Alias | exp.Paren | exp.Cast | exp.TryCast):
        if isinstance(node, exp.Cast | exp.TryCast) and node.to.is_type(*exp.DataType.TEXT_TYPES):
            break  # a count written as text is computed from it, not it
        node = node.this
    return node


def _computed(projection: Any, definitions: dict[str, list[Any]], depth: int = 0) -> bool:
    """A result column of an untraced query that is not a count nor a label: withheld.

    Only counts are checked without evidence (whole numbers, by the threshold); a sum, mean or
    maximum of a subquery (``select district, mx from (select district, max(age) mx ...)``: 102,
    one person's age), a window, arithmetic of aggregates or a count cast to text is computed.
    A column is followed through the subqueries and CTEs that define it (every definition must
    be a count or a column); a column no part of the query defines is the data's own (a label,
    or a row's value in a per-row window query).
    """
    from sqlglot import exp

    inner = _unwrapped(projection)
    if isinstance(inner, exp.Literal):
        return False
    if isinstance(inner, exp.Column):
        # its definitions in subqueries and CTEs, but a column passed on under its own name
        found = [d for d in definitions.get(inner.name, [])
                 if not (isinstance(_unwrapped(d), exp.Column) and _unwrapped(d).name == inner.name)]
        if not found or depth > 4:
            return bool(found)  # the data's own column (unknown when nested too deep: withheld)
        return any(_computed(d, definitions, depth + 1) for d in found)
    # a count stays a count; arithmetic, a window, another aggregate or a function of them does not
    return not (isinstance(inner, exp.Count | exp.CountIf) and inner.find(exp.Window) is None)
