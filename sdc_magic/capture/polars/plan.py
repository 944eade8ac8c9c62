"""What a polars aggregation expression reveals, read from its serialized expression tree.

Planning is separate from the capture (:mod:`sdc_magic.capture.polars`) and from the evidence
polars computes (:mod:`.evidence`) because it runs nothing over the data: it only reads an
expression (``pl.col("age").max() + 1``, ``pl.len() * 2``, ``x.sort().last()``) and says
which statistic of which variable the rules must judge (:class:`Plan`). Keeping it apart
lets it be read and tested as the one place that decides what a polars expression means.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any

from .. import contract
from ..entries import MAGNITUDE_EVIDENCE

_NAME = re.compile(r'^col\("((?:[^"\\]|\\.)*)"\)\.(\w+)\((.*)\)$')
_WRAPPERS = re.compile(r'\.(?:alias\("(?:[^"\\]|\\.)*"\)|round\([^()]*\)|name\.\w+\([^()]*\)|(?:strict_)?cast\([^()]*\))')


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
        from ..pandas import quantile_stat

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


def row_wise(expr: Any) -> bool:
    """Whether a polars expression gives each row a value computed from that row alone
    (False for one polars cannot serialize)."""
    try:
        return bool(_row_wise(_tree(expr)))
    except Exception:
        return False


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
    an extreme or a distinct count (a count of ``unique()`` is one), ``filter(cond)`` (the aggregate of ``when(cond).then(x)``:
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
            if fn == "Unique" and stat in ("size", "count"):
                # unique().len() / unique().count(): the distinct values, as n_unique (red team of
                # stop 58: read as a count of rows, 22 + 17 - 37 = C's two women, all pass)
                source, stat = body["input"][0], "nunique"
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
        from ..pandas import quantile_stat

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
    protected through its totals; a sum beside the group's count, its mean (``sum / len``: a
    flag's share, which tells the group's count beside the flagged rows', red team of stop 68).
    Counts only, two magnitude variables, or a part we cannot plan: None (a custom statistic,
    at review)."""
    outer: list[Any] = []
    if not _outer_aggregates(node, outer) or len(outer) < 2:
        return None
    linear = _linear_sum(node)
    if linear is not None:
        return linear
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
    counts = [p for p in parts if p is not None and p.stat in ("size", "count")]
    if first.stat == "sum" and counts and all(p.stat == "count" and p.var == first.var for p in counts):
        return Plan(first.var, "mean", first.derived)  # (``sum / count`` of x is its mean)
    if first.stat == "sum" and counts:
        # a sum beside the group's count (``sum(flag) / len()``): the mean over every row, a missing
        # value counting 0 (a flag's share told the group's total: 226 / 0.368 = 614, stop 68)
        import polars as pl

        filled = (first.derived if first.derived is not None else pl.col(str(first.var))).fill_null(0)
        return Plan(str(filled), "mean", derived=filled)
    return Plan(first.var, first.stat, first.derived)


def _literal_number(node: Any) -> float | None:
    """The value of a numeric literal node (``{"Literal": {"Dyn": {"Int": 2}}}``), else None."""
    if not _literal(node):
        return None
    found: list[float] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("Int", "Float", "Int64", "Float64", "Int32", "UInt32", "UInt64") and isinstance(v, int | float) \
                        and not isinstance(v, bool):
                    found.append(float(v))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(node)
    return found[0] if len(found) == 1 else None


def _linear_sum(node: Any) -> Plan | None:
    """A sum of sums and counts (each with or without ``filter``, times constants) as the sum of
    the per-row expression it is, or None (as ``capture/sql.py`` ``_linear_sum`` for DuckDB).

    Why (issue 23, red team): ``x.sum() - x.filter(c).sum()`` is the x of the rows failing c (one
    man's income) and was drawn at ``review`` as a custom statistic. ``Σ kᵢ · aggᵢ`` is
    ``sum(E)`` with ``E = Σ kᵢ · (xᵢ where its condition holds, else 0)`` per row (xᵢ = 1 for
    a count): a derived column checked by the rules; a row contributing nothing (``|E|`` below
    10⁻⁹) is null there, so the units are the rows that make the figure.
    """
    import polars as pl

    terms: list[tuple[float, Any]] = []

    def add(n: Any, k: float) -> bool:
        if n == "Len":
            terms.append((k, pl.lit(1)))
            return True
        if not isinstance(n, dict) or len(n) != 1:
            return False
        (kind, body), = n.items()
        if kind == "Alias" and isinstance(body, list) and body:
            return add(body[0], k)
        if kind == "BinaryExpr" and isinstance(body, dict):
            op, left, right = body.get("op"), body.get("left"), body.get("right")
            if op in ("Plus", "Minus"):
                return add(left, k) and add(right, -k if op == "Minus" else k)
            if op == "Multiply":
                a, b = _literal_number(left), _literal_number(right)
                if a is not None:
                    return add(right, k * a)
                if b is not None:
                    return add(left, k * b)
            return False
        if kind != "Agg":
            return False
        plan = _plan_aggregate(n)
        if plan is None or plan.stat not in ("sum", "size", "count"):
            return False
        if plan.derived is not None:
            source = plan.derived
        elif plan.var is not None:
            source = pl.col(plan.var)
        elif plan.stat == "size":
            terms.append((k, pl.lit(1)))
            return True
        else:
            return False
        contribution = source.fill_null(0) if plan.stat == "sum" else source.is_not_null().cast(pl.Int64)
        terms.append((k, contribution))
        return True

    try:
        if not add(node, 1.0) or len(terms) < 2:
            return None
        total = terms[0][1] * terms[0][0]
        for k, c in terms[1:]:
            total = total + c * k
        derived = pl.when(total.abs() < 1e-9).then(None).otherwise(total)
        return Plan(str(derived), "sum", derived=derived)
    except Exception:
        return None


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


def aggregate_select(exprs: tuple, named: dict, schema: Any = None) -> int:
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


def keyless(kind: int, height: int) -> bool:
    """Whether a select of this :func:`aggregate_select` kind and result height is one group."""
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
