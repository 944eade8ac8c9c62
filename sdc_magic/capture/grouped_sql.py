"""A plain grouped SQL query read as the DataFrame calls it stands for (Spark SQL, polars SQL).

Why: ``spark.sql(query)`` and ``df.sql(query)`` / ``pl.sql(query)`` hand back a finished table whose
plan the capture does not read: Spark's aggregates were taken for row-level data (``blocked``,
every figure on the screen), polars' were aggregates without evidence (``review``) and neither was
compared with other tables. A plain query — ``SELECT keys, aggregates FROM table [WHERE condition]
GROUP BY keys`` — is, in the engine's own SQL, exactly ``table.where(condition).groupBy(keys)
.agg(expr(aggregate), ...)`` (Spark: ``F.expr``; polars: ``pl.sql_expr``; the same parser reads
the condition and the aggregates either way). So such a query is captured as that aggregation
(its evidence, its linking rows) by the engine's capture, and anything else is left to the
engine's fallback. Only what the API capture covers is accepted: one table or view (an alias of
it too: ``FROM people p`` with ``p.district``), plain key columns (``GROUP BY district``,
``GROUP BY 1``, ``GROUP BY ALL``; shown as they are or renamed, ``district AS region``: grouped by
a copy of the column under that name), and aggregates whose statistic is known
(``count(*)``, ``count(x)``, ``count(DISTINCT x)``, ``sum``, ``avg``, ``min``, ``max``, ...); no
join, subquery, ``HAVING``, ``LIMIT``, window or set operation; ``ORDER BY`` only of shown columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sql import stat_of
from .sql_rewrites import order_reads_unshown


@dataclass(frozen=True)
class GroupedQuery:
    """A plain grouped query: its table, condition (SQL text or None), keys, and per
    aggregate its position in the select list, its Spark SQL text and its (variable, statistic)."""

    table: str
    where: str | None
    keys: tuple[str, ...]
    aggregates: tuple[tuple[int, str, tuple[str | None, str]], ...]
    width: int
    #: (source column, shown name) of every key the query shows under another name
    #: (``district AS region``); the keys above are the shown names
    renamed: tuple[tuple[str, str], ...] = ()


#: parts of a SELECT that make it something else than a plain grouped query (an ``ORDER BY``
#: without ``LIMIT`` only orders the same rows, whose evidence is found by their labels)
NOT_PLAIN = ("joins", "having", "limit", "offset", "distinct", "qualify", "with", "with_", "laterals",
             "windows", "pivots", "cluster", "distribute", "fetch")


def grouped_query(query: Any, dialect: str) -> GroupedQuery | None:
    """The plain grouped query ``query`` is in ``dialect`` (sqlglot's: ``spark``, ``postgres`` for
    polars), its parts written back in it; or None (see the module docstring)."""
    if not isinstance(query, str):
        return None
    try:
        import sqlglot
        from sqlglot import exp

        trees = sqlglot.parse(query, read=dialect)
    except Exception:
        return None
    if len(trees) != 1 or not isinstance(trees[0], exp.Select):
        return None
    tree = trees[0]
    if any(tree.args.get(part) for part in NOT_PLAIN):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    group = tree.args.get("group")
    if source is None or not isinstance(source.this, exp.Table) or group is None:
        return None
    table = source.this
    if not table.name or set(k for k, v in table.args.items() if v) - {"this", "db", "alias"}:
        return None  # (a catalog, TABLESAMPLE, PIVOT, hints...: not the table itself)
    if any(n is not tree for n in tree.find_all(exp.Select, exp.Subquery)):
        return None  # (a subquery anywhere, in FROM or in a condition: not a plain grouped query)
    if any(isinstance(n, exp.Window) for n in tree.find_all(exp.Window)):
        return None
    unqualified = _unqualified(tree, table)
    if unqualified is None:
        return None
    tree = unqualified
    group = tree.args.get("group")
    if group.args.get("all"):  # GROUP BY ALL: by every projection that is not an aggregate
        if group.expressions:
            return None
        group_cols = [item.this if isinstance(item, exp.Alias) else item for item in tree.expressions
                      if not any(True for _ in item.find_all(exp.AggFunc))]
    else:
        group_cols = [_positional(c, tree.expressions) for c in group.expressions]  # (GROUP BY 1, 2)
    if not group_cols or not all(isinstance(c, exp.Column) and not c.table for c in group_cols) \
            or group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        return None
    keys = tuple(c.name for c in group_cols)
    if len(set(keys)) != len(keys):
        return None
    seen: list[str] = []
    renamed: dict[str, str] = {}
    spelled: dict[str, str] = {}
    aggregates: list[tuple[int, str, tuple[str | None, str]]] = []
    # (Spark reads names whatever their case, and shows a key as the SELECT spells it: SELECT Sex ...
    # GROUP BY sex shows Sex, as groupBy("Sex") does; polars' SQL reads them as written)
    fold = str.lower if dialect == "spark" else str
    for i, item in enumerate(tree.expressions):
        inner = item.this if isinstance(item, exp.Alias) else item
        key = next((k for k in keys if fold(k) == fold(inner.name)), None) \
            if isinstance(inner, exp.Column) and not inner.table else None
        if key is not None:
            spelled[key] = inner.name
            if isinstance(item, exp.Alias) and item.alias != inner.name:
                renamed[key] = item.alias  # (a key shown under another name: a copy of it)
            seen.append(key)
            continue
        if not any(isinstance(n, exp.AggFunc) for n in inner.find_all(exp.AggFunc)):
            return None
        var, stat, _ = stat_of(inner)
        if stat == "custom":
            return None
        aggregates.append((i, inner.sql(dialect=dialect), (var, stat)))
    if sorted(seen) != sorted(keys) or not aggregates:
        return None  # (a key grouped by but not shown: its cells cannot be told apart)
    shown = tuple(renamed.get(k, spelled[k]) for k in keys)
    renamed = {spelled[k]: new for k, new in renamed.items()}
    if order_reads_unshown(tree):
        return None  # (rows sorted by a figure the table does not show: their order tells it)
    # (the columns the query reads; ORDER BY may name the shown one: it only orders the rows)
    parts = [*tree.expressions, tree.args.get("where"), tree.args.get("group")]
    used = {c.name.lower() for part in parts if part is not None for c in part.find_all(exp.Column)}
    if len({k.lower() for k in shown}) != len(shown) or any(new.lower() in used for new in renamed.values()):
        return None  # (a shown name that is another column's: which one a later step reads is unclear)
    name = ".".join(p for p in (table.args.get("db") and table.db, table.name) if p)
    where = tree.args.get("where")
    return GroupedQuery(table=name, where=where.this.sql(dialect=dialect) if where is not None else None,
                        keys=shown, aggregates=tuple(aggregates), width=len(tree.expressions),
                        renamed=tuple(renamed.items()))


def _unqualified(tree: Any, table: Any) -> Any:
    """``tree`` with its columns' table qualifiers dropped (``p.district`` of ``FROM people p``), or
    None when a qualifier names anything else than the one table (by its alias when it has one,
    as SQL resolves it), or the alias renames its columns.

    Why: the query is run again as calls on the table itself, where only bare column names mean
    anything; with one table a qualifier says nothing more (a struct field, ``address.city``, reads
    as a qualifier of another table: not read)."""
    from sqlglot import exp

    alias = table.args.get("alias")
    if alias is not None and (set(k for k, v in alias.args.items() if v) != {"this"} or not alias.name):
        return None  # (``people AS p(a, b)``: columns renamed)
    own = (alias.name if alias is not None else table.name).lower()
    for column in tree.find_all(exp.Column):
        if column.table and (column.table.lower() != own or column.args.get("db") or column.args.get("catalog")):
            return None
    return tree.transform(lambda n: exp.Column(this=n.this.copy()) if isinstance(n, exp.Column) and n.table else n)


def _positional(node: Any, projections: list[Any]) -> Any:
    """``GROUP BY 2``: the second projection (unaliased); any other node as it is."""
    from sqlglot import exp

    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        k = int(node.this)
        if 1 <= k <= len(projections):
            chosen = projections[k - 1]
            return chosen.this if isinstance(chosen, exp.Alias) else chosen
    return node
