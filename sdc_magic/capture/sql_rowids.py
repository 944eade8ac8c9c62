"""A table's ``rowid`` carried through the CTE or subquery a DuckDB query reads.

Why: rows read out of a query that computes new columns (``WITH t AS (SELECT sector, turnover /
1000 AS k FROM firms)``) carry nothing of the base's rows: linking cannot tie them to earlier
outputs, and such a table is ``review`` (``evidence.rows.COMPUTED_SOURCE``; red team, stop 56: 15
of 137 honest tables of a census). When the query in between keeps the base's rows one for one
(a plain SELECT of one table, with or without WHERE: no GROUP BY, DISTINCT, window, LIMIT, join
or set operation), each row's ``rowid`` is carried out of it under :data:`CARRIED`, and the rows
are labelled as the table's own rows are (``sql.rows_query``), so the table is compared with
the earlier outputs of the same table.
"""

from __future__ import annotations

from typing import Any

from . import contract

#: the column that carries the base table's rowid out of the CTE or subquery
CARRIED = f"{contract.PREFIX}base_rowid"
_CHANGES_ROWS = ("group", "distinct", "limit", "offset", "qualify", "having", "joins", "with", "with_")


def carry_rowid(select: Any, ctes: Any) -> tuple[Any, str] | None:
    """``(ctes, base)`` once the CTE or subquery ``select`` reads (its FROM) carries :data:`CARRIED`:
    ``ctes`` the WITH clause (a copy, changed) or None, ``base`` the table's name as written (its
    rowids are numbered by it); None when the rows are not the base's one for one. ``select`` (a
    copy of the user's query without its WITH) has its subquery changed in place."""
    from sqlglot import exp

    source = select.args.get("from_") or select.args.get("from")
    if source is None or select.args.get("joins"):
        return None
    read = source.this
    ctes = ctes.copy() if ctes is not None else None
    if isinstance(read, exp.Subquery):
        base = _carried(read.this, ctes)
        return None if base is None else (ctes, base)
    if not isinstance(read, exp.Table) or ctes is None or not isinstance(read.this, exp.Identifier):
        return None
    named = _cte(ctes, read.name)
    base = _carried(named.this, ctes) if named is not None else None
    return None if base is None else (ctes, base)


def _cte(ctes: Any, name: str) -> Any:
    """The one CTE of ``ctes`` named ``name`` (None: none, or several)."""
    if ctes is None:
        return None
    named = [c for c in ctes.expressions if c.alias_or_name.lower() == name.lower()]
    return named[0] if len(named) == 1 else None


def _carried(body: Any, ctes: Any, depth: int = 0) -> str | None:
    """Add :data:`CARRIED` to a plain SELECT of one table, or of another such CTE of ``ctes``
    (``WITH a AS (SELECT * FROM firms WHERE …), b AS (SELECT …, x / 1000 AS k FROM a)``), in
    place; the table's name, or None."""
    from sqlglot import exp

    if depth > 8 or not isinstance(body, exp.Select) or any(body.args.get(a) for a in _CHANGES_ROWS):
        return None
    source = body.args.get("from_") or body.args.get("from")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    if any(e.find(exp.Window, exp.AggFunc) is not None for e in body.expressions):
        return None  # (a window or an aggregate: not the rows one for one)
    if any(e.alias_or_name.lower() in ("rowid", CARRIED.lower()) for e in body.expressions):
        return None  # (a column of the user's under either name would be read instead: helper-63)
    inner = _cte(ctes, table.name) if not table.args.get("db") else None
    if inner is not None:  # (another CTE: its rows carry the base's rowid, if they can)
        base = _carried(inner.this, ctes, depth + 1)
        read = exp.column(CARRIED, table=table.alias_or_name, quoted=True)
    else:
        base = table.copy()
        base.set("alias", None)
        base = base.sql("duckdb")
        read = exp.column("rowid", table=table.alias_or_name)
    if base is None:
        return None
    body.select(exp.alias_(read, CARRIED, quoted=True), copy=False)
    return base
