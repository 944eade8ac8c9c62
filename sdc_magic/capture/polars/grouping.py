"""Linking's polars count grouped first by the columns its expressions read, when those are few
(the polars side of ``capture/duckdb/grouping.py``).

Why: each display of a long session counts the root's rows by every recorded output's keys and
conditions, five per table of two rates; by the 30th table that is a ``group_by`` of ~100
boolean expressions over 1M rows, 0.39 CPU s of a 1.1 s display (stop 65). Grouped first by the
few columns they read, the expressions are computed on the groups instead of on every row.

Only when the result is the same frame: every expression is elementwise, told from its
serialized tree against a list of node kinds known to compute one value per row from that row
(anything else, or a tree this polars writes otherwise, is counted the direct way); the columns
read are of types whose equal values are one group (no float: ``-0.0`` and ``0.0``; nothing
nested); their approximate distinct counts multiply to at most the bound of
``capture/grouping_rule.py`` (asked once per root, its steps and column, kept by the root's content
identity).
"""

from __future__ import annotations

import json
from typing import Any

from .. import grouping_rule

#: Tree nodes computing one value per row from that row (polars' serialized JSON).
_ELEMENTWISE = frozenset({"Column", "Literal", "BinaryExpr", "Cast", "Ternary", "Function", "Alias"})
#: ... and of ``Function``, these functions (a plain name, or the one key of a mapping).
_FUNCTIONS = frozenset({"FillNull", "Boolean"})
_BOOLEAN = frozenset({"IsNull", "IsNotNull", "Not", "IsIn", "AllHorizontal", "AnyHorizontal", "IsBetween"})
#: Types grouped first (one group holds one value).
_EXACT = ("Int", "UInt", "Boolean", "String", "Date", "Datetime", "Time", "Categorical", "Enum", "Decimal")
_distinct: dict[tuple[str, str, str, str], int] = {}
_rows: dict[tuple[str, str], int] = {}


def _elementwise(node: Any) -> bool:
    """Whether a serialized expression tree is made of elementwise nodes only."""
    if isinstance(node, list):
        return all(_elementwise(x) for x in node)
    if not isinstance(node, dict) or len(node) != 1:
        return False
    (kind, body), = node.items()
    if kind not in _ELEMENTWISE:
        return False
    if kind == "Column":
        return isinstance(body, str)
    if kind == "Literal":  # (a Series literal lines up with the rows by position: not elementwise here)
        return not (isinstance(body, dict) and "Series" in body)
    if kind == "BinaryExpr":
        return _elementwise(body.get("left")) and _elementwise(body.get("right"))
    if kind == "Cast":
        return _elementwise(body.get("expr"))
    if kind == "Ternary":
        return all(_elementwise(body.get(k)) for k in ("predicate", "truthy", "falsy"))
    if kind == "Alias":
        return isinstance(body, list) and len(body) == 2 and _elementwise(body[0])
    function = body.get("function")
    name = function if isinstance(function, str) else next(iter(function)) if isinstance(function, dict) and \
        len(function) == 1 else None
    if name not in _FUNCTIONS:
        return False
    if name == "Boolean":
        inner = function["Boolean"]
        boolean = inner if isinstance(inner, str) else next(iter(inner)) if isinstance(inner, dict) and \
            len(inner) == 1 else None
        if boolean not in _BOOLEAN:
            return False
    return _elementwise(body.get("input"))


def failures() -> tuple[type[BaseException], ...]:
    """What a polars query may raise: its errors, and its panics (a ``BaseException``: a column whose
    data is not of the type polars reports made ``approx_n_unique`` panic, red team of stop 65)."""
    import polars as pl

    return (Exception, pl.exceptions.PanicException)


def columns_read(exprs: list[Any]) -> list[str] | None:
    """The columns the expressions read when every one is elementwise, else None."""
    names: dict[str, None] = {}
    for expr in exprs:
        try:
            if not _elementwise(json.loads(expr.meta.serialize(format="json"))):
                return None
            for name in expr.meta.root_names():
                names.setdefault(name)
        except Exception:  # (a polars that cannot write or name it: the direct count)
            return None
    return list(names)


def first_by(frame: Any, identity: str, steps_key: str, exprs: list[Any]) -> list[str] | None:
    """The columns of ``frame`` (the root through its steps, lazy) to group by first, or None."""
    import polars as pl

    if not grouping_rule.worth_asking(len(exprs)):
        return None
    columns = columns_read(exprs)
    if not columns or any(c.startswith("_sdc_") for c in columns):
        return None  # (``_sdc_…``: the names of the first grouping's own sums)
    try:
        schema = frame.collect_schema()
        if not all(c in schema for c in columns):
            return None
        types = {c: str(schema[c]) for c in columns}
        if not all(t.startswith(_EXACT) for t in types.values()):
            return None
        if len(_distinct) > grouping_rule.MAX_KEPT:
            _distinct.clear()
            _rows.clear()
        keys = {c: (identity, steps_key, c, types[c]) for c in columns}
        missing = [c for c in columns if keys[c] not in _distinct]
        if missing or (identity, steps_key) not in _rows:
            got = frame.select(pl.len().alias("__n"), *[pl.col(c).approx_n_unique().alias(f"d{i}")
                                                        for i, c in enumerate(missing)]).collect()
            _rows[(identity, steps_key)] = int(got["__n"][0])
            for i, c in enumerate(missing):
                _distinct[keys[c]] = int(got[f"d{i}"][0])
    except failures():  # (a frame polars cannot describe, or panics on: the direct count)
        return None
    if not grouping_rule.pays([_distinct[keys[c]] for c in columns], _rows[(identity, steps_key)]):
        return None
    return columns


def grouped_count(frame: Any, first: list[str], exprs: list[tuple[str, Any]], values: list[tuple[str, Any]]) -> Any:
    """The count of ``frame`` over ``exprs`` (names g<i>) with the hash sums of ``values`` (c<j>),
    grouped first by ``first``: the frame the direct ``group_by`` gives, row for row and type for type."""
    import polars as pl

    hashes = [e.hash(seed=0).sum().alias(f"_sdc_c{j}") for j, (_, e) in enumerate(values)]
    inner = frame.group_by(first).agg(pl.len().alias("_sdc_n"), *hashes)
    names = [n for n, _ in exprs]
    outer = inner.with_columns([e.alias(n) for n, e in exprs]) \
        .group_by(names).agg(pl.col("_sdc_n").sum().alias("n"),
                             *[pl.col(f"_sdc_c{j}").sum().alias(f"c{j}") for j in range(len(values))])
    return outer.sort(names, nulls_last=True).collect()
