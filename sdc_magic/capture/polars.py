"""Evidence capture for polars: group_by(...).agg / len / sum / ..., pivot, value_counts.

Each wrapped call returns polars' own result, untouched. On the side, the facts the
rules need are computed *by polars* with one extra aggregation over the same grouping
(rows, distinct units, per variable: units with a value, total, absolute total, negative
contributions, the k largest contributions per unit with ``top_k``), and only that small
table is converted to Python. Counts need no extra pass at all when no unit column is
declared: the count a user asked for is the number of rows in the cell.

Covered: ``DataFrame.group_by(...)`` then ``agg`` (and ``len``, ``count``, ``sum``, ``mean``,
``median``, ``min``, ``max``, ``n_unique``, ``first``, ``last``, ``quantile``, which polars
routes through ``agg``); ``LazyFrame.group_by(...).agg(...)`` (or ``.len()``), sorted or not,
then ``collect()``; a ``select`` of aggregates only and ``DataFrame/LazyFrame.mean()`` (``sum``,
``max``, ...) without keys (one group); ``DataFrame.pivot``; ``Series.value_counts``;
``describe``. An expression is planned by what it reveals (:func:`plan_expression`), not by
its syntax. ``sort``, ``select`` of columns and ``head``/``tail`` of all rows of a captured
result keep its evidence. Anything else (e.g. a lazy plan filtered after the aggregation)
is displayed as an engine object without evidence: row-level when it has text columns,
unverified otherwise; a captured aggregation whose capture fails is withheld (fail closed).
"""

from __future__ import annotations

import functools
import io
import json
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import contract
from .entries import MAGNITUDE_EVIDENCE

_NAME = re.compile(r'^col\("((?:[^"\\]|\\.)*)"\)\.(\w+)\((.*)\)$')
_WRAPPERS = re.compile(r'\.(?:alias\("(?:[^"\\]|\\.)*"\)|round\([^()]*\)|name\.\w+\([^()]*\)|(?:strict_)?cast\([^()]*\))')


class _Depth(threading.local):
    value = 0


_depth = _Depth()


def expression_stat(expr: Any) -> tuple[str | None, str]:
    """(variable, statistic) of one aggregation expression ("custom" when we cannot tell)."""
    text = _WRAPPERS.sub("", str(expr))
    if text == "len()":
        return None, "size"
    m = _NAME.match(text)
    roots = _roots(expr)
    if m is None:
        return (roots[0] if len(roots) == 1 else None), "custom"
    var, method, arg = m.group(1), m.group(2), m.group(3)
    if method == "quantile":
        from .pandas import quantile_stat

        q = re.search(r"([0-9.]+)\]?$", arg)
        return var, quantile_stat(float(q.group(1))) if q else "custom"
    return var, contract.ENGINE_STATS.get(method, "custom")


def _roots(expr: Any) -> list[str]:
    try:
        return list(expr.meta.root_names())
    except Exception:
        return []


def _output_name(expr: Any) -> str | None:
    try:
        if expr.meta.has_multiple_outputs():
            return None
        return expr.meta.output_name()
    except Exception:
        return None


def measures(aggs: tuple, named: dict[str, Any]) -> tuple[dict[str, tuple[str | None, str]], str | None]:
    """Output column → (variable, statistic), and the statistic of multi-output expressions."""
    planned, multi = expression_plans(aggs, named)
    return {name: (p.var, p.stat) for name, p in planned.items()}, multi


def expression_plans(aggs: tuple, named: dict[str, Any], schema: Any = None,
                     keys: tuple[str, ...] = ()) -> tuple[dict[str, Plan], str | None]:
    """Output column → :class:`Plan`, and the statistic of multi-output expressions.

    With the source ``schema``, a multi-output expression over one selector
    (``pl.col("a", "b").sum() + 100``, ``pl.all().max()``) is expanded into one expression per
    output column, each planned on its own (a wrapped sum then gets its inner values).
    """
    import polars as pl

    out: dict[str, Plan] = {}
    multi: set[str] = set()
    flat: list[Any] = []
    for a in aggs:
        flat.extend(a if isinstance(a, list | tuple) else [a])
    for a in flat:
        expr = pl.col(a) if isinstance(a, str) else a
        if not isinstance(expr, pl.Expr):
            multi.add("custom")
            continue
        name = _output_name(expr)
        if name is None:
            expanded = None
            if schema is not None:  # a schema, or a function giving it (resolved only when needed)
                expanded = _expand(expr, schema() if callable(schema) else schema, keys)
            if expanded is None:
                multi.add(_multi_stat(expr))
            else:
                out.update({n: plan_expression(e) for n, e in expanded.items()})
            continue
        out[name] = plan_expression(expr) if isinstance(a, pl.Expr) else Plan(a, "custom")
    for name, a in named.items():
        expr = pl.col(a) if isinstance(a, str) else a
        out[str(name)] = plan_expression(expr) if isinstance(expr, pl.Expr) else Plan(None, "custom")
    return out, (multi.pop() if len(multi) == 1 else ("custom" if multi else None))


def _expand(expr: Any, schema: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """One expression per output of a multi-output expression with a single selector, whose
    outputs keep their columns' names; None otherwise (its statistic is then planned as one)."""
    import polars as pl

    def substitute(node: Any, name: str) -> Any:
        if isinstance(node, list):
            return [substitute(n, name) for n in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Selector"}:
            return {"Column": name}
        return {k: substitute(v, name) for k, v in node.items()}

    try:
        tree = _tree(expr)
        text = json.dumps(tree)
        if text.count('{"Selector":') != 1 or '{"Column":' in text:
            return None
        names = pl.LazyFrame(schema=schema).select(expr).collect_schema().names()
        out: dict[str, Any] = {}
        for name in names:
            if name in keys:
                continue
            single = _as_expr(substitute(tree, name))
            if _output_name(single) != name:
                return None
            out[name] = single
        return out
    except Exception:
        return None


def _multi_stat(expr: Any) -> str:
    """The statistic of an expression with several outputs (``pl.all().max()``,
    ``pl.col("a", "b").sum()``), peeled of its wrappers as :func:`plan_expression` does. A
    wrapped additive statistic is "custom" (the inner values per output are not computed: its
    protection model would add transformed values); a wrapped extreme stays an extreme."""
    try:
        node, wrapped = _peel(_tree(expr))
        if isinstance(node, dict) and set(node) == {"Agg"} and isinstance(node["Agg"], dict) \
                and len(node["Agg"]) == 1:
            (agg, payload), = node["Agg"].items()
            stat = _AGGS.get(agg, "custom")
            if agg == "Count" and isinstance(payload, dict) and payload.get("include_nulls"):
                stat = "size"
            source = payload.get("input") if isinstance(payload, dict) and "input" in payload else \
                payload[0] if isinstance(payload, list) and payload else payload
            if wrapped and stat not in _EXTREME_STATS:
                return "custom"
            if isinstance(source, dict) and set(source) <= {"Selector", "Column"}:
                return stat
    except Exception:
        pass
    text = _WRAPPERS.sub("", str(expr))
    m = re.search(r"\.(\w+)\(\)$", text)
    return contract.ENGINE_STATS.get(m.group(1), "custom") if m else "custom"


# ------------------------------------------------------------------ planning what an expression reveals
@dataclass(frozen=True)
class Plan:
    """What one aggregation expression reveals, whatever its syntax.

    ``var``/``stat`` name the aggregate the rules check. ``derived`` is the per-row
    expression behind ``var`` when it is not a plain column (a boolean condition, a
    product): it is materialised under the name ``var`` so the facts and the linking rows
    see it (a sum of a condition is then an indicator sum: a count of the rows where it
    holds). ``inner`` is the bare aggregate when the shown value is a transform of it
    (``agg * c + d``, a cast, a rounding): the table is checked and protected with the
    inner aggregate's values, never with the transformed ones (an affine map with an
    offset is not additive).
    """

    var: str | None
    stat: str
    derived: Any = None
    inner: Any = None
    several: bool = False  # top_k(k) / sort().tail(k) without an aggregate: k values, each one unit's


_AGGS = {"Max": "max", "Min": "min", "Sum": "sum", "Mean": "mean", "Median": "median", "Count": "count",
         "NUnique": "nunique", "First": "first", "Last": "last", "Std": "std", "Var": "var"}
_ARITHMETIC = {"Plus", "Minus", "Multiply", "TrueDivide", "Divide", "FloorDivide"}
#: functions of one value (further arguments constant) that give the aggregate back, exactly or nearly
_TRANSFORMS = {"Round", "Floor", "Ceil", "RoundSF", "Negate", "Abs", "FillNull", "Clip", "Pow", "Log", "Log1p",
               "Exp", "Sqrt", "Cbrt", "SumHorizontal", "MaxHorizontal", "MinHorizontal", "MeanHorizontal"}
#: per-row nodes a derived variable may contain (no aggregation, window, sort or gather)
_ROW_WISE = {"Column", "Literal", "BinaryExpr", "Cast", "Ternary", "Function", "Alias"}
_ROW_FUNCTIONS = {"Boolean", "Abs", "Round", "Floor", "Ceil", "FillNull", "StringExpr", "Negate", "Clip"}


def _tree(expr: Any) -> Any:
    return json.loads(expr.meta.serialize(format="json"))


def _as_expr(node: Any) -> Any:
    import polars as pl

    return pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")


def _literal(node: Any) -> bool:
    return isinstance(node, dict) and set(node) == {"Literal"}


def _function_name(fn: Any) -> str:
    return fn if isinstance(fn, str) else next(iter(fn)) if isinstance(fn, dict) and fn else ""


def _row_wise(node: Any) -> bool:
    """Whether a subtree computes one value per row (so it can be materialised as a column)."""
    if isinstance(node, list):
        return all(_row_wise(n) for n in node)
    if not isinstance(node, dict):
        return True
    if len(node) != 1:
        return False
    (kind, body), = node.items()
    if kind not in _ROW_WISE:
        return False
    if kind in ("Column", "Literal"):
        return True
    if kind == "Function":
        return _function_name(body.get("function")) in _ROW_FUNCTIONS and _row_wise(body.get("input", []))
    if kind == "Cast":
        return _row_wise(body.get("expr"))
    if kind == "BinaryExpr":
        return _row_wise(body.get("left")) and _row_wise(body.get("right"))
    if kind == "Ternary":
        return all(_row_wise(body.get(k)) for k in ("predicate", "truthy", "falsy"))
    return _row_wise(body[0]) if kind == "Alias" and isinstance(body, list) else False


def _column(node: Any) -> str | None:
    return node["Column"] if isinstance(node, dict) and set(node) == {"Column"} and \
        isinstance(node["Column"], str) else None


def _extreme(kind: str, source: Any) -> tuple[str | None, str] | None:
    """first()/last() of a sorted column or of a top_k: the maximum or the minimum (an
    extreme is one unit's own value, checked like max/min whichever rank is picked)."""
    if not isinstance(source, dict) or len(source) != 1:
        return None
    (inner_kind, body), = source.items()
    if inner_kind == "Slice" and isinstance(body, dict):  # sort().slice(-1, 1).first(): near the end
        offset = _int_literal(body.get("offset"))
        if offset is None:
            return None
        return _extreme("Last" if offset < 0 else "First", body.get("input"))
    if inner_kind == "Function" and isinstance(body, dict) and _function_name(body.get("function")) == "Reverse" \
            and len(body.get("input") or []) == 1:
        return _extreme("First" if kind == "Last" else "Last", body["input"][0])
    if inner_kind == "Gather" and isinstance(body, dict):  # gather(0).first(): one row's value
        position = _int_literal(body.get("idx"))
        if position is None:
            return None
        hit = _extreme("First" if position >= 0 else "Last", body.get("expr"))
        var = _column(body.get("expr"))
        return hit if hit is not None else ((var, "first") if var is not None else None)
    if inner_kind == "Sort" and isinstance(body, dict):
        var = _column(body.get("expr"))
        descending = bool((body.get("options") or {}).get("descending"))
        if var is None:
            return None
        return var, ("max" if (kind == "Last") != descending else "min")
    if inner_kind == "SortBy" and isinstance(body, dict):  # x.sort_by(y).last(): x of the unit with the largest y
        var = _column(body.get("expr"))
        order = (body.get("sort_options") or {}).get("descending")
        descending = bool(order[0]) if isinstance(order, list) and order else bool(order)
        if var is None:
            return None
        return var, ("max" if (kind == "Last") != descending else "min")
    if inner_kind == "Function" and isinstance(body, dict) and _function_name(body.get("function")) in ("TopK",
                                                                                                          "TopKBy"):
        inputs = body.get("input") or []
        var = _column(inputs[0]) if inputs else None
        if var is None:
            return None
        fn = body["function"]
        option = next(iter(fn.values()), {}) if isinstance(fn, dict) else {}
        order = option.get("descending") if isinstance(option, dict) else None
        smallest = bool(order[0]) if isinstance(order, list) and order else bool(order)
        return var, ("min" if smallest else "max")
    return None


def _int_literal(node: Any) -> int | None:
    if not _literal(node):
        return None
    lit = node["Literal"]
    value = next(iter((lit.get("Dyn") or lit.get("Scalar") or {}).values()), None) if isinstance(lit, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _peel_source(source: Any, stat: str) -> tuple[Any, str, Any]:
    """The per-row input of an aggregate without what only selects rows: ``drop_nulls()`` (the
    statistic ignores nulls anyway; a row count becomes a count of values), ``unique()`` before
    an extreme or a distinct count, ``filter(cond)`` (the aggregate of ``when(cond).then(x)``:
    the same rows, as a derived variable, returned third). (None, stat, None) when a selection
    cannot be planned."""
    import polars as pl

    while isinstance(source, dict) and len(source) == 1:
        (kind, body), = source.items()
        if kind == "Function" and isinstance(body, dict) and len(body.get("input") or []) == 1:
            fn = _function_name(body.get("function"))
            if fn == "DropNulls":
                source, stat = body["input"][0], ("count" if stat == "size" else stat)
                continue
            if fn == "Unique" and stat in ("max", "min", "nunique"):
                source = body["input"][0]
                continue
            return source, stat, None
        if kind == "Filter" and isinstance(body, dict):
            inner, by = body.get("input"), body.get("by")
            if not (_row_wise(inner) and _row_wise(by)):
                return None, stat, None
            return source, ("count" if stat == "size" else stat), pl.when(_as_expr(by)).then(_as_expr(inner))
        return source, stat, None
    return source, stat, None


def _plan_aggregate(node: dict) -> Plan | None:
    """The plan of a bare aggregate node (no wrapper), or None when it is not one."""
    (kind, body), = node.items()
    if kind == "Slice" or (kind == "Function" and isinstance(body, dict)
                           and _function_name(body.get("function")) in ("TopK", "TopKBy")):
        # a selection of the largest / smallest values (top_k(k), sort().tail(k)): each one unit's
        hit = _extreme("First", node) if kind == "Function" else \
            _extreme("Last" if (_int_literal(body.get("offset")) or 0) < 0 else "First", body.get("input"))
        return Plan(*hit, several=True) if hit is not None else None
    if kind == "Len":
        return Plan(None, "size")
    if kind == "Gather" and isinstance(body, dict) and body.get("returns_scalar"):
        position = _int_literal(body.get("idx"))
        if position in (0, -1):  # sort().get(0) / get(-1): an end of the sorted column
            hit = _extreme("First" if position == 0 else "Last", body.get("expr"))
            if hit is not None:
                return Plan(*hit)
        var, idx = _column(body.get("expr")), body.get("idx")
        if var is not None and isinstance(idx, dict) and "Function" in idx:
            fn = _function_name(idx["Function"].get("function"))
            by = [_column(i) for i in idx["Function"].get("input", [])]
            if fn in ("ArgMax", "ArgMin") and len(by) == 1 and by[0] is not None:
                # x.get(y.arg_max()): x of the unit with the largest y, one unit's value
                return Plan(var, "max" if fn == "ArgMax" else "min")
        return None
    if kind == "Function" and isinstance(body, dict) and _function_name(body.get("function")) == "NullCount":
        inputs = body.get("input") or []
        var = _column(inputs[0]) if len(inputs) == 1 else None
        if var is None:
            return None
        import polars as pl

        missing = pl.col(var).is_null()  # a count of the rows lacking the value: an indicator sum
        return Plan(str(missing), "sum", derived=missing)
    if kind == "Function" and isinstance(body, dict) and _function_name(body.get("function")) == "Quantile":
        from .pandas import quantile_stat

        inputs = body.get("input") or []
        var = _column(inputs[0]) if inputs else None
        q = inputs[1].get("Literal", {}) if len(inputs) > 1 and _literal(inputs[1]) else {}
        value = next(iter((q.get("Dyn") or q.get("Scalar") or {}).values()), None) if isinstance(q, dict) else None
        if var is None or not isinstance(value, int | float):
            return None
        return Plan(var, quantile_stat(float(value)))
    if kind != "Agg" or not isinstance(body, dict) or len(body) != 1:
        return None
    (agg, payload), = body.items()
    stat = _AGGS.get(agg)
    if stat is None:
        return None
    source = payload
    if isinstance(payload, dict) and "input" in payload:
        source = payload["input"]
    elif isinstance(payload, list) and payload:  # Std / Var: [input, ddof]
        source = payload[0]
    if agg == "Count" and isinstance(payload, dict) and payload.get("include_nulls"):
        stat = "size"
    if stat in ("first", "last"):
        hit = _extreme(agg, source)
        if hit is not None:
            return Plan(*hit)
    source, stat, filtered = _peel_source(source, stat)
    if source is None:
        return None
    if filtered is not None:
        return Plan(str(filtered), stat, derived=filtered)
    var = _column(source)
    if var is not None:
        return Plan(var, stat)
    if stat == "size":
        return Plan(None, "size")
    if isinstance(source, dict) and _row_wise(source) and stat in ("sum", "mean", "count", "min", "max", "median",
                                                                   "std", "var", "nunique"):
        derived = _as_expr(source)
        return Plan(str(derived), stat, derived=derived)
    return None


#: statistics that are one unit's value, whatever a composite combines them with
_EXTREME_STATS = ("max", "min", "first", "last", "mode", "median")


def _outer_aggregates(node: Any, out: list[Any]) -> bool:
    """Collect the aggregates of ``node`` not nested in another one, through arithmetic, casts,
    conditions and value functions only; False for anything else (a window, a cumulative or
    rolling function): the composite is then not planned."""
    if node == "Len":
        out.append(node)
        return True
    if isinstance(node, list):
        return all(_outer_aggregates(n, out) for n in node)
    if not isinstance(node, dict):
        return True
    if len(node) != 1:
        return all(_outer_aggregates(v, out) for v in node.values())
    (kind, body), = node.items()
    if kind in ("Agg", "Gather") or (kind == "Function" and isinstance(body, dict)
                                     and _function_name(body.get("function")) == "Quantile"):
        out.append(node)
        return True
    if kind in ("Column", "Literal"):
        return True
    if kind == "Function" and isinstance(body, dict):
        fn = _function_name(body.get("function"))
        return fn in _TRANSFORMS | {"Coalesce"} and _outer_aggregates(body.get("input"), out)
    if kind in ("BinaryExpr", "Cast", "Alias", "Ternary"):
        return _outer_aggregates(body, out)
    return False  # a window (over), a cumulative or rolling function, ...: not planned


def _composite(node: Any) -> Plan | None:
    """A function of several aggregates of the group (``mean * len()``, ``sum - min``,
    ``sum / count``), planned by its most revealing part, as for DuckDB: an extreme (or a
    median) makes it that unit's value; else one magnitude variable (sum, mean, std of x,
    with any counts) makes it that variable's statistic, checked with its dominance and
    protected through its totals. Counts only, two magnitude variables, or a part we cannot
    plan: None (a custom statistic, at review)."""
    outer: list[Any] = []
    if not _outer_aggregates(node, outer) or len(outer) < 2:
        return None
    parts = [Plan(None, "size") if n == "Len" else _plan_aggregate(n) for n in outer]
    if any(p is None or p.stat == "custom" for p in parts):
        return None
    if all(p is not None and p.stat == "size" for p in parts):
        import polars as pl

        # len() * len(), len() ** 2 + 1: a function of the group's row count, checked and
        # protected with the count's values
        return Plan(None, "size", inner=pl.len())
    for p in parts:
        if p is not None and (p.stat in _EXTREME_STATS or p.stat.startswith("quantile")):
            return Plan(p.var, p.stat, p.derived)
    magnitude = [p for p in parts if p is not None and p.var is not None and p.stat in MAGNITUDE_EVIDENCE]
    if len({p.var for p in magnitude}) != 1:
        return None
    first = magnitude[0]
    return Plan(first.var, first.stat, first.derived)


def _peel(node: Any) -> tuple[Any, bool]:
    """The node inside alias, cast, value functions with constant arguments and arithmetic with
    a constant; and whether anything but an alias was peeled (the value shown is transformed)."""
    wrapped = False
    while isinstance(node, dict) and len(node) == 1:
        (kind, body), = node.items()
        if kind == "Alias" and isinstance(body, list) and body:
            node = body[0]
        elif kind == "Cast" and isinstance(body, dict):
            node, wrapped = body.get("expr"), True
        elif kind == "Function" and isinstance(body, dict) and _function_name(body.get("function")) in _TRANSFORMS \
                and len([i for i in body.get("input") or [] if not _literal(i)]) == 1:
            node, wrapped = next(i for i in body["input"] if not _literal(i)), True
        elif kind == "BinaryExpr" and isinstance(body, dict) and body.get("op") in _ARITHMETIC \
                and (_literal(body.get("left")) != _literal(body.get("right"))):
            node, wrapped = (body["right"] if _literal(body.get("left")) else body["left"]), True
        else:
            break
    return node, wrapped


def plan_expression(expr: Any) -> Plan:
    """What one aggregation expression reveals (see :class:`Plan`); "custom" when we cannot tell.

    Wrappers are peeled first (alias, cast, rounding, arithmetic with a constant on either
    side): the value shown is then a transform of the aggregate inside, which the rules
    judge (``max(age) + 0`` is one person's age like ``max(age)``).
    """
    try:
        node = _tree(expr)
    except Exception:
        var, stat = expression_stat(expr)
        return Plan(var, stat)
    node, wrapped = _peel(node)
    try:
        planned = Plan(None, "size") if node == "Len" else \
            _plan_aggregate(node) if isinstance(node, dict) and len(node) == 1 else None
        if planned is None and node is not None:
            planned = _composite(node)
            wrapped = False  # judged by its most revealing part; the values shown are what it is
    except Exception:  # an unexpected tree: the expression is unknown to the rules
        planned = None
    if planned is None:
        var, stat = expression_stat(expr)
        return Plan(var, stat)
    if wrapped:
        try:
            inner = _as_expr(node)
        except Exception:
            return Plan(planned.var, "custom")
        return Plan(planned.var, planned.stat, planned.derived, inner)
    return planned


def _flatten_by(by: tuple) -> list[Any]:
    out: list[Any] = []
    for b in by:
        out.extend(b if isinstance(b, list | tuple) else [b])
    return out


@dataclass
class _Recipe:
    """What registering a captured result (or a frame derived from it) needs."""

    call: str
    ge: Any
    keys: list[str]
    measure_of: Callable[[str], tuple[str | None, str]]
    notes: list[str]
    rows: pd.DataFrame | None
    margin_label: str | None
    to_shown: Callable[[Any], pd.DataFrame]
    inner: dict[str, Any]
    inner_frame: Any
    derive: bool = True
    labels: tuple[str, ...] = ()  # the result's columns that are the pandas form's index


class PolarsCapture:
    """Installs and removes the polars wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, Any]] = []
        self._lazy: dict[int, tuple[Any, Any]] = {}  # id(lazy result) -> (weakref, recipe)
        self._lazy_groups: dict[int, tuple[Any, Any]] = {}  # id(LazyGroupBy) -> (weakref, (lf, by, named))
        self._recipes: dict[int, tuple[Any, Any]] = {}  # id(captured result) -> (weakref, _Recipe)
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        import polars as pl
        from polars.dataframe.group_by import GroupBy
        from polars.lazyframe.group_by import LazyGroupBy

        self._patch(GroupBy, "agg", self._eager_agg)
        self._patch(pl.DataFrame, "pivot", self._pivot)
        self._patch(pl.Series, "value_counts", self._value_counts)
        self._patch(pl.LazyFrame, "group_by", self._lazy_group_by)
        self._patch(LazyGroupBy, "agg", self._lazy_agg)
        self._patch(LazyGroupBy, "len", self._lazy_len)
        self._patch(pl.LazyFrame, "collect", self._collect)
        for owner in (pl.DataFrame, pl.LazyFrame, pl.Series):
            self._patch(owner, "describe", self._describe)
        for name in ("sort", "select", "head", "tail", "limit", "rename"):
            self._patch(pl.DataFrame, name, functools.partial(self._derived, name=name))
        self._patch(pl.LazyFrame, "select", self._lazy_select)
        self._patch(pl.LazyFrame, "sort", self._lazy_sort)
        for name in FRAME_STATISTICS:
            self._patch(pl.DataFrame, name, functools.partial(self._frame_statistic, name=name))
            self._patch(pl.LazyFrame, name, functools.partial(self._lazy_statistic, name=name))
        self.installed = True

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self._lazy.clear()
        self._lazy_groups.clear()
        self._recipes.clear()
        self.installed = False

    def _patch(self, owner: type, name: str, make: Callable[[Any], Callable]) -> None:
        original = owner.__dict__[name]
        wrapper = functools.wraps(original)(make(original))
        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        self._saved.append((owner, name, original))
        setattr(owner, name, wrapper)

    def _guarded(self, call: Callable[[], Any], record: Callable[[Any], None], withhold: bool = False) -> Any:
        """Run the user's call, then record its evidence; a failure to record never breaks user
        code. ``withhold``: an aggregation whose unverified check could show what it should hide
        (a wrapped count, a max) is withheld instead when its capture fails (fail closed)."""
        if _depth.value:
            return call()
        _depth.value += 1
        try:
            result = call()
        finally:
            _depth.value -= 1
        _depth.value += 1
        try:
            record(result)
        except Exception as exc:  # never break user code; the table will show without evidence
            self.registry.failures.append(f"polars: {type(exc).__name__}: {exc}")
            if withhold:
                _withhold(result)
        finally:
            _depth.value -= 1
        return result

    # ------------------------------------------------------------ wrappers
    def _eager_agg(self, original: Callable) -> Callable:
        def agg(gb: Any, *aggs: Any, **named: Any) -> Any:
            if not _depth.value:
                combined = self._combined(gb, aggs, named, original)
                if combined is not None:
                    return combined
            return self._guarded(lambda: original(gb, *aggs, **named),
                                 lambda result: self._record_group_by(gb.df, _flatten_by(gb.by), gb.named_by,
                                                                      aggs, named, result, "group_by.agg"),
                                 withhold=True)
        return agg

    def _combined(self, gb: Any, aggs: tuple, named: dict, original: Callable) -> Any:
        """Magnitudes without a unit column: the facts ride along in the user's own aggregation.

        One group_by computes the user's columns and the facts; the user gets exactly the
        columns they asked for (in their order), the facts stay here. None: not applicable
        (or the combined call failed), and the caller runs the ordinary path.
        """
        try:
            rules = self.rules()
            if rules.unit is not None:
                return None
            planned, multi = expression_plans(aggs, named)
            if any(p.derived is not None or p.inner is not None for p in planned.values()):
                return None  # a derived variable or a wrapped aggregate: the ordinary path plans it
            out = {name: (p.var, p.stat) for name, p in planned.items()}
            schema = gb.df.schema
            if multi is not None or not out or all(s in ("size", "count") for _, s in out.values()):
                return None
            variables = sorted({v for v, st in out.values() if v is not None and v in schema and st != "size"})
            magnitudes = {v for v, st in out.values() if v in variables and st in MAGNITUDE_EVIDENCE
                          and _numeric(schema[v])}
            exprs = _fact_exprs(variables, magnitudes, rules.top_k, indicator_levels(gb.df.lazy(), magnitudes))
        except Exception:
            return None
        _depth.value += 1
        try:
            full = original(gb, *aggs, *exprs, **named)
        except Exception:
            return None
        finally:
            _depth.value -= 1
        _depth.value += 1  # our own selects below are not the user's
        try:
            result = full.select([c for c in full.columns if not c.startswith(contract.PREFIX)])
        finally:
            _depth.value -= 1
        _depth.value += 1
        try:
            keys = [c for c in result.columns if c not in out]
            facts = full.select(keys + [c for c in full.columns if c.startswith(contract.PREFIX)]).to_pandas()
            notes: list[str] = []
            ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, None)
            set_indicators(facts, ge, variables)
            rows = _linking_rows(gb.df.lazy(), _flatten_by(gb.by), gb.named_by, keys, out,
                                 int(facts[f"{contract.PREFIX}rows"].sum()))

            def to_shown(res: Any) -> pd.DataFrame:
                return contract.keyed(res.to_pandas(), keys)

            recipe = _Recipe("polars group_by.agg", ge, keys, lambda m: out.get(m, (None, "custom")), notes, rows,
                             None, to_shown, {}, None, False, tuple(keys))
            self._publish(recipe, result, to_shown(result))
        except Exception as exc:  # the user's result stands; it is withheld at display (fail closed)
            self.registry.failures.append(f"polars: {type(exc).__name__}: {exc}")
            _withhold(result)
        finally:
            _depth.value -= 1
        return result

    def _lazy_group_by(self, original: Callable) -> Callable:
        def group_by(lf: Any, *by: Any, **kwargs: Any) -> Any:
            lgb = original(lf, *by, **kwargs)
            if not _depth.value:
                named = {k: v for k, v in kwargs.items() if k != "maintain_order"}
                self._keep(self._lazy_groups, lgb, (lf, _flatten_by(by), named))
            return lgb
        return group_by

    def _lazy_agg(self, original: Callable) -> Callable:
        def agg(lgb: Any, *aggs: Any, **named: Any) -> Any:
            result = original(lgb, *aggs, **named)
            if not _depth.value:
                hit = self._lazy_groups.get(id(lgb))
                if hit is not None and hit[0]() is lgb:
                    self._keep(self._lazy, result, (*hit[1], aggs, named))
            return result
        return agg

    def _lazy_len(self, original: Callable) -> Callable:
        def length(lgb: Any, name: str | None = None) -> Any:
            import polars as pl

            result = original(lgb, name)
            if not _depth.value:
                hit = self._lazy_groups.get(id(lgb))
                if hit is not None and hit[0]() is lgb:
                    self._keep(self._lazy, result, (*hit[1], (pl.len().alias(name or "len"),), {}))
            return result
        return length

    def _collect(self, original: Callable) -> Callable:
        def collect(lf: Any, *args: Any, **kwargs: Any) -> Any:
            hit = self._lazy.get(id(lf))
            if hit is None or hit[0]() is not lf or _depth.value:
                return original(lf, *args, **kwargs)
            source, by, named_by, aggs, named = hit[1][:5]
            call = hit[1][5] if len(hit[1]) > 5 else "group_by.agg"
            return self._guarded(lambda: original(lf, *args, **kwargs),
                                 lambda result: self._record_group_by(source, by, named_by, aggs, named, result,
                                                                      call), withhold=True)
        return collect

    def _pivot(self, original: Callable) -> Callable:
        def pivot(df: Any, on: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(df, on, *args, **kwargs),
                                 lambda result: self._record_pivot(df, on, kwargs, result))
        return pivot

    def _value_counts(self, original: Callable) -> Callable:
        def value_counts(s: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(s, *args, **kwargs),
                                 lambda result: self._record_value_counts(s, kwargs, result))
        return value_counts

    def _describe(self, original: Callable) -> Callable:
        """``describe`` of a DataFrame, LazyFrame (eager result) or Series: evidence per column.

        DataFrame.describe runs LazyFrame.describe and Series.describe runs DataFrame.describe:
        only the outermost call records (depth guard), on the object the user sees.
        """
        def describe(obj: Any, *args: Any, **kwargs: Any) -> Any:
            return self._guarded(lambda: original(obj, *args, **kwargs),
                                 lambda result: self._record_describe(obj, result))
        return describe

    def _keep(self, store: dict, obj: Any, value: Any) -> None:
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda _r: store.pop(key, None))
        except TypeError:
            return
        if len(store) > 1024:
            store.clear()
        store[key] = (ref, value)

    # ------------------------------------------------------------ recording
    def _record_group_by(self, frame: Any, by: list[Any], named_by: dict, aggs: tuple, named: dict,
                         result: Any, call: str) -> None:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        lf = frame.lazy()
        keys = lf.group_by(*by, **named_by).agg([]).collect_schema().names() if by or named_by else []
        planned, multi = expression_plans(aggs, named, lf.collect_schema(), tuple(keys))
        out = {name: (p.var, p.stat) for name, p in planned.items()}
        lf = with_derived(lf, planned)
        schema = lf.collect_schema()
        inner = {name: p.inner for name, p in planned.items() if p.inner is not None and name in result.columns}

        def measure_of(measure: str) -> tuple[str | None, str]:
            if not keys and measure not in out and re.match(r"\d+\|", measure):
                # one group without keys: its row label (0, or 0..k-1 for top_k(k)) is part of the measure
                measure = measure.split("|", 1)[1]
            if measure in out:
                return out[measure]
            if multi is not None and measure in schema:
                return measure, multi
            return None, "custom"

        present = [c for c in result.columns if c not in keys]
        resolved = {c: measure_of(c) for c in present}
        self._register(call, lf, by, named_by, keys, resolved, measure_of, result, schema, inner=inner)

    def _register(self, call: str, lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], measure_of: Callable, result: Any,
                  schema: Any, to_shown: Callable[[Any], pd.DataFrame] | None = None,
                  key_casts: dict[str, Any] | None = None,
                  variables: list[str] | None = None, margin_label: str | None = None, link: bool = True,
                  inner: dict[str, Any] | None = None, labels: list[str] | None = None) -> Any:
        rules = self.rules()
        notes: list[str] = []
        unit = rules.unit
        if unit is not None and unit not in schema:
            notes.append(f"unit column {unit!r} not found for this table: rows counted as units")
            unit = None
        if variables is None:
            variables = sorted({v for v, s in resolved.values() if v is not None and v in schema and s != "size"})
        magnitudes = {v for v, s in resolved.values() if v in variables and s in MAGNITUDE_EVIDENCE
                      and _numeric(schema[v])}
        # a derived frame (sorted, ...) of a plain group_by result is found by its labels and values
        # (keys as columns, as displayed); one whose values are not what the evidence holds (a wrapped
        # aggregate) or whose layout the labels do not give back (pivot, describe) is registered
        derive = to_shown is not None or bool(inner)
        if to_shown is None:
            def to_shown(res: Any) -> pd.DataFrame:
                return contract.keyed(res.to_pandas(), keys)
        shown = to_shown(result)
        counts_only = all(s in ("size", "count") for _, s in resolved.values())
        sizes = [c for c, (_, s) in resolved.items() if s == "size"]
        if unit is None and counts_only and (sizes or not resolved) and not key_casts and not inner:
            facts = _facts_from_result(result, keys, resolved, variables, sizes)
        else:
            facts = _facts(lf, by, named_by, keys, variables, magnitudes, unit, rules.top_k, key_casts,
                           indicator_levels(lf, magnitudes))
        ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, unit)
        set_indicators(facts, ge, variables)
        rows = None
        if link:
            rows = _linking_rows(lf, by, named_by, keys, resolved, int(ge.rows.sum()) if ge.rows is not None else 0)
        inner_frame = None
        if inner:
            inner_frame = _grouped(lf, by, named_by, [e.alias(c) for c, e in inner.items()]).collect()
            notes.append(f"{', '.join(sorted(inner))}: a transform of an aggregate (arithmetic with constants, "
                         "cast or rounding), checked and protected as that aggregate")
        recipe = _Recipe(f"polars {call}", ge, keys, measure_of, notes, rows, margin_label, to_shown,
                         inner or {}, inner_frame, derive, tuple(keys if labels is None else labels))
        return self._publish(recipe, result, shown)

    def _publish(self, recipe: _Recipe, result: Any, shown: pd.DataFrame, base: Any = None) -> Any:
        """Register ``result`` (pandas form ``shown``) with the recipe's evidence, and keep the
        recipe with it so that a frame derived from it keeping its cells keeps its evidence.
        ``base``: the captured frame with its labels, when ``result`` lost them (same rows)."""
        wrapped = None
        if recipe.inner:  # before registering: a failure withholds the table (fail closed)
            wrapped = _inner_cell_values(recipe.inner_frame, recipe.keys, result if base is None else base,
                                         recipe.inner, shown)
        entry = contract.register(self.registry, self.rules(), recipe.call, shown, recipe.ge, recipe.keys,
                                  recipe.measure_of, list(recipe.notes), engine_object=result,
                                  margin_label=recipe.margin_label, rows=recipe.rows)
        if wrapped is not None:
            mask, values = wrapped
            value = np.asarray(entry.evidence.value, dtype=float).copy()
            value[mask] = values[mask]
            entry.evidence.value = value
        self._keep(self._recipes, result, recipe)
        return entry

    def _derived(self, original: Callable, name: str) -> Callable:
        """``sort``, ``select`` of columns, ``head`` / ``tail`` / ``limit`` of all rows of a captured
        result: the same cells in another order or layout, registered with the same evidence
        (over-protection otherwise: ``pivot(...).sort(...)`` was shown as row-level data)."""
        def derived(df: Any, *args: Any, **kwargs: Any) -> Any:
            if _depth.value:
                return original(df, *args, **kwargs)
            _depth.value += 1  # limit() calls head(): only the outermost call records
            try:
                result = original(df, *args, **kwargs)
            finally:
                _depth.value -= 1
            _depth.value += 1
            try:
                import polars as pl

                hit = self._recipes.get(id(df))
                if hit is not None and hit[0]() is df:  # a captured result: never a population of its own
                    self._rearranged(hit[1], df, result, name)
                elif name == "select" and isinstance(result, pl.DataFrame) and result.height >= 1 \
                        and _keyless(_aggregate_select(args, kwargs, df.schema), result.height):
                    self._record_group_by(df, [], {}, args, kwargs, result, "select")
            except Exception as exc:  # withheld at display (fail closed)
                self.registry.failures.append(f"polars {name}: {type(exc).__name__}: {exc}")
                _withhold(result)
            finally:
                _depth.value -= 1
            return result
        return derived

    def _rearranged(self, recipe: _Recipe, df: Any, result: Any, name: str) -> None:
        """Register ``result``, the same cells as the captured ``df`` (sorted, some columns, all
        rows), when its labels and values alone would not find the evidence back: a pivot, a
        describe, a wrapped aggregate, or a select that dropped the label columns (the group
        labels then stay the pandas form's index, as in pandas: the cells are the same)."""
        import polars as pl

        if not isinstance(result, pl.DataFrame) or result.height != df.height:
            return
        if name == "rename":
            recipe = _renamed(recipe, df, result)
            if recipe is not None:
                self._publish(recipe, result, recipe.to_shown(result))
            return
        if not set(result.columns) <= set(df.columns):
            return
        if name == "select" and not result.equals(df.select(result.columns)):
            return  # not the same cells (e.g. pl.col("n") * 2 keeps the name "n")
        if all(c in result.columns for c in recipe.labels):
            if recipe.derive:
                self._publish(recipe, result, recipe.to_shown(result))
            else:  # found by its labels and values; kept for what may be derived from it next
                self._keep(self._recipes, result, recipe)
            return
        if name != "select":
            return
        full = recipe.to_shown(df)
        values = [c for c in result.columns if c not in recipe.labels]
        if not values or not all(c in full.columns for c in values):
            return
        self._publish(recipe, result, full[values], base=df)

    def _frame_statistic(self, original: Callable, name: str) -> Callable:
        """``DataFrame.mean()`` (``sum``, ``max``, ...): one row of one statistic per column over
        the whole frame, i.e. ``select(pl.col(c).<name>() ...)`` without keys: one group."""
        def statistic(df: Any, *args: Any, **kwargs: Any) -> Any:
            import polars as pl

            return self._guarded(lambda: original(df, *args, **kwargs),
                                 lambda result: self._record_group_by(
                                     df, [], {}, tuple(getattr(pl.col(c), name)() for c in df.columns), {},
                                     result, name) if self._recipes.get(id(df)) is None else None, withhold=True)
        return statistic

    def _lazy_select(self, original: Callable) -> Callable:
        """``LazyFrame.select`` of aggregates only (one group): recorded at ``collect()``."""
        def select(lf: Any, *exprs: Any, **named: Any) -> Any:
            result = original(lf, *exprs, **named)
            hit = self._lazy.get(id(lf))
            captured = hit is not None and hit[0]() is lf  # an aggregate already: not a population of rows
            if not _depth.value and not captured and _aggregate_select(exprs, named, lf.collect_schema):
                self._keep(self._lazy, result, (lf, [], {}, exprs, named, "select"))
            return result
        return select

    def _lazy_sort(self, original: Callable) -> Callable:
        """``sort`` of a lazy aggregation before ``collect()``: the same groups, recorded at collect
        (the evidence is aligned by the group labels, so the order does not matter)."""
        def sort(lf: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(lf, *args, **kwargs)
            hit = self._lazy.get(id(lf))
            if not _depth.value and hit is not None and hit[0]() is lf:
                self._keep(self._lazy, result, hit[1])
            return result
        return sort

    def _lazy_statistic(self, original: Callable, name: str) -> Callable:
        """``LazyFrame.mean()`` (``sum``, ``max``, ...): recorded at ``collect()`` as one group."""
        def statistic(lf: Any, *args: Any, **kwargs: Any) -> Any:
            import polars as pl

            result = original(lf, *args, **kwargs)
            if not _depth.value:
                aggs = tuple(getattr(pl.col(c), name)() for c in lf.collect_schema().names())
                self._keep(self._lazy, result, (lf, [], {}, aggs, {}, name))
            return result
        return statistic

    def _record_pivot(self, df: Any, on: Any, kwargs: dict, result: Any) -> None:
        import polars as pl

        index = kwargs.get("index")
        values = kwargs.get("values")
        on_cols = [on] if isinstance(on, str) else list(on) if isinstance(on, list | tuple) else None
        index = [index] if isinstance(index, str) else list(index) if isinstance(index, list | tuple) else None
        if on_cols is None or len(on_cols) != 1 or index is None or not all(isinstance(c, str) for c in index):
            return  # selectors or several 'on' columns: shown without evidence
        if isinstance(values, list | tuple):
            if len(values) != 1:
                return
            values = values[0]
        if values is None:
            rest = [c for c in df.columns if c not in index and c not in on_cols]
            if len(rest) != 1:
                return
            values = rest[0]
        if not isinstance(values, str):
            return
        agg = kwargs.get("aggregate_function")
        stat = "first" if agg is None else (contract.ENGINE_STATS.get(agg, "custom") if isinstance(agg, str)
                                           else expression_stat(agg)[1])
        var = None if stat == "size" else values
        on_col = on_cols[0]

        def to_shown(res: Any) -> pd.DataFrame:
            shown = res.to_pandas().set_index(index)
            shown.columns = pd.Index([str(c) for c in shown.columns], name=on_col)
            return shown

        keys = [*index, on_col]
        schema = df.collect_schema() if hasattr(df, "collect_schema") else df.schema
        self._register("pivot", df.lazy(), [*index, pl.col(on_col).cast(pl.String)], {}, keys,
                       {"": (var, stat)}, lambda m: (var, stat), result, schema, to_shown=to_shown,
                       key_casts={on_col: pl.String}, labels=index)

    def _record_describe(self, obj: Any, result: Any) -> None:
        """Evidence of ``describe``: one group (the whole frame), per column its units, its
        magnitudes (mean, std are magnitude statistics), and its missing values (a
        ``null_count`` is a count of the units lacking the value: a pseudo-variable)."""
        import polars as pl

        if not isinstance(result, pl.DataFrame) or "statistic" not in result.columns:
            return
        if isinstance(obj, pl.Series):
            name = obj.name
            frame = obj.to_frame(name).lazy()
            columns = [name]
        else:
            frame = obj.lazy()
            columns = [c for c in result.columns if c != "statistic"]
        schema = frame.collect_schema()
        if not all(c in schema for c in columns):
            return
        nulls = {c: f"{contract.PREFIX}null_{c}" for c in columns}
        lf = frame.with_columns([pl.when(pl.col(c).is_null()).then(pl.lit(1)).alias(n) for c, n in nulls.items()])
        variables = {c: c for c in columns}
        single = columns[0] if isinstance(obj, pl.Series) else None

        def measure_of(measure: str) -> tuple[str | None, str]:
            from .pandas import DESCRIBE_STATS, stat_name

            parts = measure.split("|") if measure else []
            if single is not None:  # a Series' describe: its one value column is "value"
                parts = [q for q in parts if q != "value"] or parts
            var = next((variables[q] for q in parts if q in variables), single)
            rest = [q for q in parts if q not in variables or variables[q] != var] if var else parts
            if len(rest) != 1 or var is None:
                return var, "custom"
            stat = rest[0]
            if stat == "null_count":
                return nulls[var], "count"
            return var, DESCRIBE_STATS.get(stat, stat_name(stat))


        def to_shown(res: Any) -> pd.DataFrame:
            shown = res.to_pandas().set_index("statistic")
            shown.index.name = None
            return shown

        resolved = {f"{st}|{c}": measure_of(f"{st}|{c}") for c in columns for st in ("count", "mean")}
        full_schema = lf.collect_schema()
        self._register("describe", lf, [], {}, [], resolved, measure_of, result, full_schema, to_shown=to_shown,
                       variables=[*columns, *nulls.values()], labels=["statistic"])

    def _record_value_counts(self, s: Any, kwargs: dict, result: Any) -> None:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        name = s.name or ""
        frame = s.to_frame(name)
        count_col = [c for c in result.columns if c != name]
        stat = "proportion" if kwargs.get("normalize") else "count"
        resolved = {c: (None, stat) for c in count_col}
        self._register("Series.value_counts", frame.lazy(), [name], {}, [name], resolved,
                       lambda m: (None, stat), result, frame.schema)


def _withhold(result: Any) -> None:
    """Withhold the display of a polars result whose capture failed (its pandas form is
    marked, so the display shows a placeholder; the reason quotes no data)."""
    try:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        form = result.to_pandas()
        contract.mark_withheld(form, "sdc_magic could not check this polars aggregation: not shown "
                                     "(%sdc debug has the details)")
        contract.remember(result, form)
    except Exception:  # nothing more to do: the display then checks it as unverified
        pass


#: DataFrame / LazyFrame methods computing one statistic per column over all rows (one group)
FRAME_STATISTICS = ("sum", "mean", "median", "max", "min", "std", "var")


def _aggregate_select(exprs: tuple, named: dict, schema: Any = None) -> int:
    """Whether a ``select`` computes aggregates only, each of a known kind: 0 no, 1 yes (one row:
    one group), 2 yes with selections of several extreme values (``top_k(k)``: k rows)."""
    import polars as pl

    flat: list[Any] = []
    for e in exprs:
        flat.extend(e if isinstance(e, list | tuple) else [e])
    flat += list(named.values())
    if not flat or not all(isinstance(e, pl.Expr) for e in flat):
        return 0
    planned, multi = expression_plans(tuple(e for e in exprs), named, schema)
    if multi in ("custom",) or not (planned or multi) or any(p.stat == "custom" for p in planned.values()):
        return 0
    return 2 if any(p.several for p in planned.values()) else 1


def _keyless(kind: int, height: int) -> bool:
    """Whether a select of this :func:`_aggregate_select` kind and result height is one group."""
    return (kind == 1 and height == 1) or kind == 2


def with_derived(lf: Any, planned: dict[str, Plan]) -> Any:
    """``lf`` with the derived variables of ``planned`` as columns, first (so that linking,
    which reads the first columns, sees them): a sum of a condition is then an indicator sum
    over a real column, counted and linked as the rows where the condition holds."""
    import polars as pl

    derived = {p.var: p.derived for p in planned.values() if p.derived is not None and p.var is not None}
    if not derived:
        return lf
    return lf.select([*(e.alias(v) for v, e in derived.items()), pl.all()])


def _renamed(recipe: _Recipe, df: Any, result: Any) -> _Recipe | None:
    """The recipe of ``df.rename(...)`` when only measure columns were renamed (a label or a
    pivot's category renamed changes the cells' labels: None, found by values or not at all)."""
    import dataclasses

    if len(df.columns) != len(result.columns):
        return None
    mapping = {old: new for old, new in zip(df.columns, result.columns, strict=True) if old != new}
    if not mapping or any(old in recipe.labels for old in mapping) or set(recipe.keys) - set(recipe.labels):
        return None  # labels renamed, or a pivot (its columns are the categories of a key)
    inverse = {new: old for old, new in mapping.items()}
    measure_of = recipe.measure_of

    def renamed_measure(measure: str) -> tuple[str | None, str]:
        return measure_of("|".join(inverse.get(part, part) for part in measure.split("|")))

    inner = {mapping.get(c, c): e for c, e in recipe.inner.items()}
    frame = recipe.inner_frame.rename({c: mapping[c] for c in recipe.inner if c in mapping}) \
        if recipe.inner_frame is not None else None
    return dataclasses.replace(recipe, measure_of=renamed_measure, inner=inner, inner_frame=frame, derive=True)


def _inner_cell_values(values: Any, keys: list[str], result: Any, inner: dict[str, Any],
                       shown: pd.DataFrame) -> tuple[Any, Any]:
    """Per cell of ``shown`` (flattened): whether it is wrapped, and its inner aggregate's value.

    The protection model adds cells up (a margin is the sum of its cells): ``len() * 2 + 1``
    is not additive, its inner count is. The displayed values stay as they are (matching a
    derived frame by values uses them); only what the rules and the protection see changes.
    Any failure raises: the capture then fails and the table is checked as unverified.
    """
    import polars as pl

    from ..evidence.flatten import flatten, numeric

    rest = result.drop(list(inner))
    if keys:
        idx = f"{contract.PREFIX}pos"
        joined = rest.with_row_index(idx).join(values, on=keys, how="left", nulls_equal=True).sort(idx).drop(idx)
    else:
        if values.height != 1 or result.height != 1:
            raise ValueError("a wrapped aggregate without keys gave more than one row")
        joined = pl.concat([rest, values], how="horizontal")
    joined = joined.select(result.columns)
    inner_shown = contract.keyed(joined.to_pandas(), keys) if keys else joined.to_pandas()
    inner_shown = inner_shown[list(shown.columns)]  # a select may have kept some columns, in its order
    inner_shown.index = shown.index
    inner_shown.columns = shown.columns
    flat, flat_inner = flatten(shown), flatten(inner_shown)
    if len(flat_inner) != len(flat) or not np.array_equal(flat_inner.measure.astype(str), flat.measure.astype(str)):
        raise ValueError("the inner aggregates do not line up with the table")
    parts = [set(str(m).split("|")) for m in flat.measure]
    mask = np.array([bool(p & set(inner)) for p in parts], dtype=bool)
    inner_values = numeric(flat_inner.values)
    if inner_values is None:
        raise ValueError("the inner aggregates are not numbers")
    return mask, np.asarray(inner_values, dtype=float)


def _numeric(dtype: Any) -> bool:
    try:
        return bool(dtype.is_numeric()) or str(dtype) == "Boolean"
    except Exception:
        return False


def _facts_from_result(result: Any, keys: list[str], resolved: dict, variables: list[str],
                       sizes: list[str]) -> pd.DataFrame:
    """Counts without a unit column: the counts asked for are the facts (no second pass)."""
    cols = [*keys]
    frame = result.select(keys + [c for c in resolved if c in result.columns]).to_pandas()
    out = frame[cols].copy()
    if sizes:
        out[f"{contract.PREFIX}rows"] = frame[sizes[0]].to_numpy()
    for i, v in enumerate(variables):
        col = next((c for c, (var, s) in resolved.items() if var == v and s == "count"), None)
        if col is not None:
            out[contract.fact_names(i)["n"]] = frame[col].to_numpy()
    if not sizes:
        n_cols = [c for c in out.columns if c.startswith(f"{contract.PREFIX}n_")]
        out[f"{contract.PREFIX}rows"] = out[n_cols].max(axis=1) if n_cols else 0
    return out


def indicator_levels(lf: Any, magnitudes: set[str]) -> dict[str, float]:
    """The attribute level of each magnitude variable that is an indicator (only 0/1, or two
    values, as :func:`sdc_magic.evidence.facts.indicator_level`), by one pass over those columns:
    per group only the units at that level are then counted, for indicators only."""
    import polars as pl

    if not magnitudes:
        return {}
    cols = sorted(magnitudes)
    exprs = []
    for j, v in enumerate(cols):
        x = pl.col(v).cast(pl.Float64)
        exprs += [x.min().alias(f"lo{j}"), x.max().alias(f"hi{j}"),
                  ((x != x.min()) & (x != x.max())).any().alias(f"other{j}")]
    row = lf.select(exprs).collect().row(0, named=True)
    out: dict[str, float] = {}
    for j, v in enumerate(cols):
        lo, hi, other = row[f"lo{j}"], row[f"hi{j}"], row[f"other{j}"]
        if lo is None or hi is None or other or lo != lo or hi != hi:
            continue
        if lo >= 0.0 and hi <= 1.0 and {lo, hi} <= {0.0, 1.0}:
            out[v] = 1.0
        elif lo != hi:
            out[v] = float(hi)
    return out


def _fact_exprs(variables: list[str], magnitudes: set[str], k: int, levels: dict[str, float] | None = None
                ) -> list[Any]:
    """The facts of each group as polars expressions (no unit column)."""
    import polars as pl

    p = contract.PREFIX
    exprs = [pl.len().alias(f"{p}rows")]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        exprs.append(pl.col(v).count().alias(names["n"]))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            exprs += [x.sum().alias(names["t"]), x.abs().sum().alias(names["ta"]),
                      (x < 0).any().alias(names["neg"]), x.abs().drop_nulls().top_k(k).alias(names["top"])]
            if levels and v in levels:  # an indicator: its sum is a count of the rows at the level
                exprs.append((x == levels[v]).sum().alias(f"{p}ones_{i}"))
    return exprs


def _grouped(lf: Any, by: list[Any], named_by: dict, exprs: list[Any]) -> Any:
    """``lf.group_by(by).agg(exprs)``; without keys, one group (a constant key, dropped after)."""
    import polars as pl

    if by or named_by:
        return lf.group_by(*by, **named_by).agg(exprs)
    key = f"{contract.PREFIX}all"
    return lf.group_by(pl.lit(0).alias(key)).agg(exprs).drop(key)


def _facts(lf: Any, by: list[Any], named_by: dict, keys: list[str], variables: list[str], magnitudes: set[str],
           unit: str | None, k: int, key_casts: dict[str, Any] | None = None,
           levels: dict[str, float] | None = None) -> pd.DataFrame:
    """One extra aggregation in polars; only the per-group facts come back.

    With a unit column, one pre-aggregation to (keys, unit) — rows and per variable its
    count, sum, min and max — then the facts per group from that much smaller table.
    """
    import polars as pl

    p = contract.PREFIX
    if unit is None:
        return _grouped(lf, by, named_by, _fact_exprs(variables, magnitudes, k, levels)).collect().to_pandas()
    if not magnitudes:
        # counts only: distinct units by a hash distinct per group (about 2x cheaper than a
        # pre-aggregation to (keys, unit) when nearly every pair is distinct); a variable
        # without missing values has every unit of its group
        nulls = lf.select([pl.col(v).null_count() for v in variables]).collect().row(0) if variables else ()
        exprs = [pl.len().alias(f"{p}rows"), pl.col(unit).n_unique().alias(f"{p}units")]
        for i, (v, missing) in enumerate(zip(variables, nulls, strict=True)):
            u = pl.col(unit).n_unique() if not missing else pl.col(unit).filter(pl.col(v).is_not_null()).n_unique()
            exprs.append(u.alias(contract.fact_names(i)["n"]))
        return _grouped(lf, by, named_by, exprs).collect().to_pandas()
    inner = [pl.len().alias(f"{p}r")]
    for i, v in enumerate(variables):
        inner.append(pl.col(v).count().alias(f"{p}c{i}"))
        if v in magnitudes:
            x = pl.col(v).cast(pl.Float64)
            inner.append(x.sum().alias(f"{p}s{i}"))
            if levels and v in levels:  # a unit has the attribute if one of its rows has it
                inner.append((x == levels[v]).any().alias(f"{p}a{i}"))
    per_unit = _grouped(lf, [*by, pl.col(unit).alias(f"{p}u")], named_by, inner)
    outer = [pl.col(f"{p}r").sum().alias(f"{p}rows"), pl.len().alias(f"{p}units")]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        outer.append((pl.col(f"{p}c{i}") > 0).sum().alias(names["n"]))
        if v in magnitudes:
            x = pl.when(pl.col(f"{p}c{i}") > 0).then(pl.col(f"{p}s{i}"))
            outer += [x.sum().alias(names["t"]), x.abs().sum().alias(names["ta"]),
                      (x < 0).any().alias(names["neg"]), x.abs().drop_nulls().top_k(k).alias(names["top"])]
            if levels and v in levels:
                outer.append(pl.col(f"{p}a{i}").fill_null(False).sum().alias(f"{p}ones_{i}"))
    return _grouped(per_unit, keys, {}, outer).collect().to_pandas()


def set_indicators(facts: pd.DataFrame, ge: Any, variables: list[str]) -> None:
    """Mark indicator variables (only 0/1, or two values, over the whole aggregation) with the
    units having the attribute per group (``VarEvidence.ones``), as the pandas path does
    (:func:`sdc_magic.evidence.facts.indicator_level`): their sums and means are counts."""
    import numpy as np

    p = contract.PREFIX

    def num(name: str) -> np.ndarray:
        if name not in facts.columns:
            return np.zeros(len(facts))
        return pd.to_numeric(facts[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    for i, v in enumerate(variables):
        if f"{p}ones_{i}" in facts.columns and v in ge.variables:  # counted by the engine (polars)
            ge.variables[v].ones = np.nan_to_num(num(f"{p}ones_{i}")).astype(np.int64)
            continue
        if f"{p}lo_{i}" not in facts.columns or f"{p}sq_{i}" not in facts.columns or v not in ge.variables:
            continue
        lo_g, hi_g = num(f"{p}lo_{i}"), num(f"{p}hi_{i}")
        has = np.isfinite(lo_g) & np.isfinite(hi_g)
        # every row at its group's min or max <=> the sum of (x - lo)(hi - x) >= 0 terms is 0,
        # i.e. -Σx² + (lo + hi)Σx - lo·hi·n = 0; then (Σx - lo·n) / (hi - lo) rows are at hi
        n = np.nan_to_num(num(f"{p}cnt_{i}") if f"{p}cnt_{i}" in facts.columns else num(contract.fact_names(i)["n"]))
        t, sq = np.nan_to_num(num(contract.fact_names(i)["t"])), np.nan_to_num(num(f"{p}sq_{i}"))
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = np.where(has, -sq + (lo_g + hi_g) * t - lo_g * hi_g * n, 0.0)
            at_hi = np.where(has & (hi_g > lo_g), np.rint((t - lo_g * n) / (hi_g - lo_g)), n)
        if not has.any() or (np.abs(spread) > 1e-9 * np.maximum(np.abs(sq), 1.0)).any():
            continue
        lo, hi = float(lo_g[has].min()), float(hi_g[has].max())
        if not (np.isin(lo_g[has], [lo, hi]).all() and np.isin(hi_g[has], [lo, hi]).all()):
            continue
        if lo >= 0.0 and hi <= 1.0 and {lo, hi} <= {0.0, 1.0}:
            level = 1.0
        elif lo != hi:
            level = hi
        else:
            continue
        # units at the attribute: counted per unit in a unit path, else the rows at the maximum
        chi = np.nan_to_num(num(f"{p}chi_{i}")).astype(np.int64) if f"{p}chi_{i}" in facts.columns \
            else at_hi.astype(np.int64)
        ge.variables[v].ones = np.where(has & (hi_g == level), chi, 0).astype(np.int64)


#: Up to this many source rows linking reads the values themselves (see _linking_rows).
RAW_LINKED_ROWS = 1_000_000


def _linking_rows(lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], n_rows: int) -> pd.DataFrame | None:
    """The rows behind a table for linking (:func:`contract.register`'s ``rows``), or None.

    One row per source row that reached the aggregation: the grouping keys as the table
    shows them, and per other column a 64-bit hash computed by polars (the values never
    leave polars). Skipped above ``evidence.rows.MAX_LINKED_ROWS`` rows (linking is not
    attempted there for pandas either) and if anything fails: the table is then checked
    on its own. A table of one variable's statistics covers the rows where it is known.
    """
    import polars as pl

    from ..evidence import rows as row_limits

    if n_rows <= 0 or n_rows > row_limits.MAX_LINKED_ROWS:
        return None
    try:
        schema = lf.collect_schema()
        key_exprs = [pl.col(b) if isinstance(b, str) else b for b in by]
        key_exprs += [(pl.col(e) if isinstance(e, str) else e).alias(str(n)) for n, e in named_by.items()]
        # linking reads the first row_limits.MAX_HASHED_COLUMNS columns: hash no more than it reads
        room = max(row_limits.MAX_HASHED_COLUMNS - len(keys), 1)
        names = [c for c in schema.names() if c not in keys and not c.startswith(contract.PREFIX)][:room]
        if n_rows <= RAW_LINKED_ROWS:
            # the values (in-process): fingerprinted like pandas rows, so pandas, polars and
            # DuckDB tables of the same people are compared (red team: a polars count, then
            # a DuckDB count without district C, gave C's 2 and 1)
            hashes = [pl.col(c) for c in names]
        else:
            hashes = [pl.col(c).hash(seed=0).alias(f"polars#{c}") for c in names]
        stats = {st for _, st in resolved.values()}
        variables = {v for v, _ in resolved.values() if v is not None}
        query = lf
        if "size" not in stats and len(variables) == 1 and next(iter(variables)) in schema:
            query = query.filter(pl.col(next(iter(variables))).is_not_null())
        rows = query.select([*key_exprs, *hashes]).collect().to_pandas()
        return rows if len(rows) <= row_limits.MAX_LINKED_ROWS else None
    except Exception:
        return None
