"""A DuckDB table's rows as SQL (its lineage), so that linking can count them in the engine.

Kept apart from :mod:`.sql` (the evidence queries) because it answers another question:
not what a table's cells are, but which rows of which relation it covers. Two tables over
the same base relation (a table, view, file or Python frame) are over the same rows; each
is one condition on those rows and its keys. Linking (``linking/in_engine.py``) then counts
the rows of every combination of the tables' groups with one aggregation on the
connection (:func:`lineage_query`), and no row leaves DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sql import Plan


@dataclass
class Lineage:
    """Where a table's rows come from, as SQL: its base rows (``WITH``, ``FROM``, joins, no
    condition), the condition that selects its rows among them, and its keys' expressions.

    Two tables over the same base are tables of the same rows: linking counts the rows of
    every combination of their groups on the connection (:mod:`sdc_magic.evidence.in_engine`),
    and no row leaves DuckDB.
    """

    base: str  # "FROM ... [JOIN ...]": the base rows, without a SELECT list or condition
    condition: str  # a boolean expression over the base's columns ("TRUE": every row)
    keys: list[str]  # per key, its expression over the base's columns


#: the alias every lineage gives its base table, so that tables written ``FROM t``,
#: ``FROM t AS a`` and ``FROM t a`` are over one base (their conditions and keys say ``_sdc_base.x``)
BASE_ALIAS = "_sdc_base"


def lineage(p: Plan, only_known: str | None = None) -> Lineage | None:
    """The :class:`Lineage` of a planned table, or None when it cannot be written so.

    A table read from one relation (a table, view, file or Python frame: ``FROM t``) whose
    rows a condition selects: ``WHERE`` (subqueries included: evaluated per base row), a
    ``SEMI``/``ANTI JOIN`` (as ``[NOT] EXISTS``), a ``FROM (SELECT * FROM t WHERE …)``; its keys
    over the relation's columns. Other joins (they may repeat rows), common table expressions,
    subqueries that compute columns, parameters (``?``, ``$name``), ``QUALIFY`` or ``DISTINCT``
    give None: linking reads such a table's rows instead. ``only_known``: as for :func:`rows_query`.
    """
    from sqlglot import exp

    select = p.select.copy()
    if any(True for _ in select.find_all(exp.Placeholder, exp.Parameter)):
        return None
    if select.args.get("qualify") is not None or select.args.get("distinct") is not None \
            or select.args.get("with") or select.args.get("with_"):
        return None
    flat = _one_relation(select)
    if flat is None:
        return None
    table, aliases, conditions = flat
    def rebased(node: Any) -> Any:
        """The base relation's columns named ``_sdc_base.x``; a subquery's own (it reads a table
        of the same name: ``WHERE person NOT IN (SELECT person FROM df WHERE …)``) left as they are."""
        for column in list(node.find_all(exp.Column)):
            if column.table in aliases and not _inner_scope(column, node):
                column.set("table", exp.to_identifier(BASE_ALIAS))
        return node

    where = select.args.get("where")
    if where is not None:
        conditions.append(where.this)
    if only_known is not None:
        if only_known not in p.columns:
            return None
        conditions.append(exp.Not(this=exp.Is(this=p.columns[only_known].copy(), expression=exp.Null())))
    text = " AND ".join(f"({rebased(c).sql('duckdb')})" for c in conditions) or "TRUE"
    base = table.copy()
    base.set("alias", exp.TableAlias(this=exp.to_identifier(BASE_ALIAS)))
    keys = [rebased(n.unalias().copy()).sql("duckdb") for n in p.key_nodes]
    return Lineage(f"FROM {base.sql('duckdb')}", text, keys)


def _inner_scope(column: Any, root: Any) -> bool:
    """Whether a SELECT between ``column`` and ``root`` reads a table its qualifier names."""
    from sqlglot import exp

    node = column.parent
    while node is not None and node is not root:
        if isinstance(node, exp.Select):
            source = node.args.get("from") or node.args.get("from_")
            named = [source.this] if source is not None else []
            named += [j.this for j in node.args.get("joins") or []]
            if any(t.alias_or_name == column.table for t in named):
                return True
        node = node.parent
    return False


def _one_relation(select: Any) -> tuple[Any, set[str], list[Any]] | None:
    """(the one relation a SELECT reads, the names its columns are qualified by, the conditions
    selecting its rows), or None (see :func:`lineage`). Changes ``select``: its joins go."""
    from sqlglot import exp

    source = select.args.get("from") or select.args.get("from_")
    if source is None:
        return None
    conditions: list[Any] = []
    inner = source.this
    aliases = {inner.alias_or_name}
    while isinstance(inner, exp.Subquery):  # FROM (SELECT * FROM t WHERE …) s
        body = inner.this
        if not isinstance(body, exp.Select) or [type(e) for e in body.expressions] != [exp.Star] \
                or any(body.args.get(a) for a in ("group", "having", "qualify", "distinct", "limit", "offset",
                                                    "joins", "with", "with_")):
            return None
        found = _one_relation(body)
        if found is None:
            return None
        inner, more, extra = found
        aliases |= more
        if body.args.get("where") is not None:
            conditions.append(body.args["where"].this)
        conditions.extend(extra)
    if not isinstance(inner, exp.Table) or inner.args.get("joins"):
        return None
    aliases.add(inner.alias_or_name)
    for join in select.args.get("joins") or []:
        kind = str(join.args.get("kind") or "").upper()
        if kind not in ("SEMI", "ANTI") or join.args.get("side") or join.args.get("method"):
            return None
        other = join.this
        on = join.args.get("on")
        using = join.args.get("using") or []
        if on is None and not using:
            return None
        match = [on] if on is not None else []
        match += [exp.EQ(this=exp.column(u.name, inner.alias_or_name), expression=exp.column(u.name, other.alias_or_name))
                  for u in using]
        inside = exp.select("1").from_(other.copy()).where(exp.and_(*[m.copy() for m in match]))
        test = exp.Exists(this=inside)
        conditions.append(test if kind == "SEMI" else exp.Not(this=test))
    select.set("joins", None)
    return inner, aliases, conditions


def lineage_query(rows: Lineage, expressions: list[str]) -> str:
    """The count of base rows (``n``) of every combination of ``expressions``' values (``g0``, …)."""
    items = ", ".join(f"{e} AS g{i}" for i, e in enumerate(expressions))
    return f"SELECT {items}, count(*) AS n {rows.base} GROUP BY ALL"
