"""Evidence capture for DuckDB: ``duckdb.sql`` / ``duckdb.query`` and a connection's
``sql`` / ``query`` with a ``GROUP BY``.

The query is parsed with sqlglot. Its last statement, when it is a ``SELECT`` with a
``GROUP BY`` whose every group key is a column of the result, gets one *evidence query*
beside it, run by DuckDB:

* without a unit column: the user's own select with the facts appended as extra columns
  (``count(*)``, per variable ``count(x)``, ``sum(x)``, ``sum(abs(x))``, ``bool_or(x < 0)`` and
  ``max(abs(x), k)``, DuckDB's top-k aggregate): one pass gives the user's table *and* its
  facts, so displaying or fetching the result costs one query, not two;
* with a unit column: ``count(DISTINCT unit)``; for magnitudes the contributions are first
  summed per (group, unit) in a sub-query, then aggregated per group.

Only the per-group facts come back to Python; the microdata never leave DuckDB. The
evidence query is *bound* when the user's relation is created (so Python objects that
DuckDB finds by variable name resolve exactly as in the user's query), and *run* when the
relation is first displayed or fetched (``df``, ``pl``, ``arrow``...), whose result is then
taken from that same run. A relation displayed is the result of that run, computed when
it was first needed.

Anything else (a query we cannot parse, a window function, ``GROUPING SETS``, a group key
that is not a result column) is left alone: its table is displayed without evidence.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import contract

_CALL = compile("__sdc_call__(*__sdc_args__, **__sdc_kwargs__)", "<sdc_magic>", "eval")
#: fetches answered from the evidence run (their result is a frame we can cut to the user's columns);
#: any other fetch (arrow readers, fetchall, ...) runs the user's own query untouched
FETCHERS = ("df", "to_df", "fetchdf", "pl")

_lock = threading.RLock()  # weakref callbacks may run while it is held
_pending: dict[int, tuple[Any, Pending]] = {}


@dataclass
class Pending:
    """A captured relation: its evidence query, bound, not yet run."""

    combined: Any  # relation: the user's columns + facts (None when the facts have their own query)
    facts: Any  # relation of facts when they need their own query (unit + magnitudes), else None
    user_cols: list[str]
    keys: list[str]
    measures: dict[str, tuple[str | None, str]]
    variables: list[str]
    unit: str | None
    notes: list[str] = field(default_factory=list)
    form: pd.DataFrame | None = None
    registered: bool = False
    lock: Any = field(default_factory=threading.Lock)


def _drop(key: int) -> None:
    try:
        with _lock:
            _pending.pop(key, None)
    except Exception:  # interpreter shutdown
        pass


def captured_form(rel: Any) -> pd.DataFrame | None:
    """The checked pandas form of a captured relation (runs its evidence query once)."""
    with _lock:
        hit = _pending.get(id(rel))
    if hit is None or hit[0]() is not rel:
        return None
    return _CAPTURE.materialise(hit[1], rel) if _CAPTURE is not None else None


_CAPTURE: DuckDBCapture | None = None


def in_caller_frame(depth: int) -> Callable[..., Any]:
    """A runner that calls a function as if from the user's frame ``depth`` levels up.

    DuckDB finds Python objects named in a query (``FROM df``) in the calling frame; a
    wrapper's own frame would hide the user's variables, so the call is evaluated with the
    caller's globals and locals.
    """
    frame = sys._getframe(depth + 1)
    glb = frame.f_globals
    loc = dict(frame.f_locals)

    def run(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        ns = dict(loc)
        ns.update(__sdc_call__=fn, __sdc_args__=args, __sdc_kwargs__=kwargs)
        return eval(_CALL, glb, ns)

    return run


def _stat_of(node: Any) -> tuple[str | None, str, Any]:
    """(variable name, statistic, column node) of one aggregate projection."""
    from sqlglot import exp

    while isinstance(node, exp.Alias | exp.Round | exp.Cast | exp.TryCast | exp.Paren):
        node = node.this
    name = type(node).__name__.lower()
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Star) or arg is None:
            return None, "size", None
        if isinstance(arg, exp.Distinct):
            cols = arg.expressions
            if len(cols) == 1 and isinstance(cols[0], exp.Column):
                return cols[0].name, "nunique", cols[0]
            return None, "custom", None
        if isinstance(arg, exp.Column):
            return arg.name, "count", arg
        return None, "custom", None
    if not isinstance(node, exp.AggFunc):
        return None, "custom", None
    arg = node.this
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc | exp.Quantile | exp.ApproxQuantile):
        from .pandas import quantile_stat

        q = node.args.get("quantile") or node.expression
        try:
            stat = quantile_stat(float(q.name)) if q is not None else "custom"
        except (TypeError, ValueError):
            stat = "custom"
        return (arg.name if isinstance(arg, exp.Column) else None), stat, arg if isinstance(arg, exp.Column) else None
    aliases = {"avg": "mean", "stddevsamp": "std", "stddevpop": "std", "variancepop": "var", "variance": "var",
               "anyvalue": "first", "arbitrary": "first"}
    stat = contract.ENGINE_STATS.get(aliases.get(name, name), aliases.get(name, "custom"))
    if stat not in contract.ENGINE_STATS.values():
        stat = "custom"
    if isinstance(arg, exp.Column) and not node.args.get("expressions"):
        return arg.name, stat, arg
    return None, "custom", None


@dataclass
class Plan:
    """How to compute the evidence of one parsed SELECT."""

    select: Any
    keys: list[str]  # output names of the key columns
    key_nodes: list[Any]
    measures: dict[str, tuple[str | None, str]]
    columns: dict[str, Any]  # variable -> column node


def plan(query: str, out_cols: list[str]) -> Plan | None:
    """Parse the last statement; None when it is not a plain grouped SELECT we understand."""
    import sqlglot
    from sqlglot import exp

    try:
        statements = [s for s in sqlglot.parse(query, read="duckdb") if s is not None]
    except Exception:
        return None
    if not statements or not isinstance(statements[-1], exp.Select):
        return None
    select = statements[-1]
    group = select.args.get("group")
    if group is None or select.find(exp.Window) is not None:
        return None
    if group.args.get("grouping_sets") or group.args.get("cube") or group.args.get("rollup"):
        return None
    projections = select.expressions
    if len(projections) != len(out_cols) or any(isinstance(p, exp.Star) for p in projections):
        return None
    keys, key_nodes, measures, columns = [], [], {}, {}
    for p, name in zip(projections, out_cols, strict=True):
        if p.find(exp.AggFunc) is None:
            keys.append(name)
            key_nodes.append(p)
            continue
        var, stat, node = _stat_of(p)
        measures[name] = (var, stat)
        if var is not None and node is not None:
            columns.setdefault(var, node)
    if not keys or not measures:
        return None
    # every GROUP BY expression must be a key column of the result (else rows lack labels)
    shown = {p.unalias().sql("duckdb") for p in key_nodes} | {p.alias_or_name for p in key_nodes}
    for g in group.expressions:
        text = g.sql("duckdb")
        if isinstance(g, exp.Literal) and g.is_int:
            continue
        if text not in shown and g.name not in shown:
            return None
    return Plan(select, keys, key_nodes, measures, columns)


def _sql_of(node: Any) -> str:
    return node.sql("duckdb")


def combined_query(p: Plan, variables: list[str], magnitudes: set[str], unit: str | None, k: int) -> str:
    """The user's select with the facts appended (no unit, or a unit and counts only)."""
    import sqlglot

    pre = contract.PREFIX
    extra = [f"count(*) AS {pre}rows"]
    if unit is not None:
        extra.append(f'count(DISTINCT "{unit}") AS {pre}units')
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        col = _sql_of(p.columns[v])
        if unit is None:
            extra.append(f"count({col}) AS {names['n']}")
        else:
            extra.append(f'count(DISTINCT CASE WHEN {col} IS NOT NULL THEN "{unit}" END) AS {names["n"]}')
        if v in magnitudes and unit is None:
            x = f"CAST({col} AS DOUBLE)"
            extra += [f"sum({x}) AS {names['t']}", f"sum(abs({x})) AS {names['ta']}",
                      f"bool_or({x} < 0) AS {names['neg']}", f"max(abs({x}), {int(k)}) AS {names['top']}"]
    select = p.select.copy()
    for e in extra:
        select = select.select(sqlglot.parse_one(e, read="duckdb"), copy=False)
    return select.sql("duckdb")


def facts_query(p: Plan, variables: list[str], magnitudes: set[str], unit: str, k: int) -> str:
    """Facts with a unit column: contributions summed per (group, unit), then per group."""
    import sqlglot
    from sqlglot import exp

    pre = contract.PREFIX
    inner = p.select.copy()
    inner.set("expressions", [])
    for arg in ("having", "order", "limit", "offset", "qualify", "distinct"):
        inner.set(arg, None)
    items = [f"{_sql_of(n.unalias())} AS {pre}k{j}" for j, n in enumerate(p.key_nodes)]
    items += [f'"{unit}" AS {pre}u', f"count(*) AS {pre}r"]
    for i, v in enumerate(variables):
        col = _sql_of(p.columns[v])
        items.append(f"count({col}) AS {pre}c{i}")
        if v in magnitudes:
            items.append(f"sum(CAST({col} AS DOUBLE)) AS {pre}s{i}")
    for e in items:
        inner = inner.select(sqlglot.parse_one(e, read="duckdb"), copy=False)
    inner.set("group", exp.Group(expressions=[exp.Literal.number(j + 1) for j in range(len(p.key_nodes) + 1)]))
    outer = [f'{pre}k{j} AS "{name}"' for j, name in enumerate(p.keys)]
    outer += [f"sum({pre}r) AS {pre}rows", f"count(*) AS {pre}units"]
    for i, v in enumerate(variables):
        names = contract.fact_names(i)
        outer.append(f"count(*) FILTER (WHERE {pre}c{i} > 0) AS {names['n']}")
        if v in magnitudes:
            x = f"{pre}s{i}"
            outer += [f"sum({x}) AS {names['t']}", f"sum(abs({x})) AS {names['ta']}",
                      f"bool_or({x} < 0) AS {names['neg']}", f"max(abs({x}), {int(k)}) AS {names['top']}"]
    keys = ", ".join(f"{pre}k{j}" for j in range(len(p.keys)))
    return f"SELECT {', '.join(outer)} FROM ({inner.sql('duckdb')}) AS {pre}per_unit GROUP BY {keys}"


class DuckDBCapture:
    """Installs and removes the DuckDB wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, Any]] = []
        self.installed = False

    def install(self) -> None:
        global _CAPTURE
        if self.installed:
            return
        import duckdb

        module_sql = duckdb.sql
        self._patch(duckdb, "sql", self._module_wrapper(module_sql))
        self._patch(duckdb, "query", self._module_wrapper(duckdb.query))
        conn = duckdb.DuckDBPyConnection
        for name in ("sql", "query"):
            if name in conn.__dict__:
                self._patch(conn, name, self._connection_wrapper(conn.__dict__[name]))
        rel = duckdb.DuckDBPyRelation
        for name in FETCHERS:
            if name in rel.__dict__:
                self._patch(rel, name, self._fetch_wrapper(rel.__dict__[name], name))
        _CAPTURE = self
        self.installed = True

    def uninstall(self) -> None:
        global _CAPTURE
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        with _lock:
            _pending.clear()
        if _CAPTURE is self:
            _CAPTURE = None
        self.installed = False

    def _patch(self, owner: Any, name: str, wrapper: Callable) -> None:
        self._saved.append((owner, name, getattr(owner, name) if not isinstance(owner, type)
                            else owner.__dict__[name]))
        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)

    # ------------------------------------------------------------ wrappers
    def _module_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def sql(query: Any, *args: Any, **kwargs: Any) -> Any:
            run = in_caller_frame(1)
            rel = run(original, query, *args, **kwargs)
            self._capture(rel, query, lambda q: run(original, q, *args, **kwargs))
            return rel

        return sql

    def _connection_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def sql(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            run = in_caller_frame(1)
            rel = run(original, con, query, *args, **kwargs)
            self._capture(rel, query, lambda q: run(original, con, q, *args, **kwargs))
            return rel

        return sql

    def _fetch_wrapper(self, original: Callable, name: str) -> Callable:
        @functools.wraps(original)
        def fetch(rel: Any, *args: Any, **kwargs: Any) -> Any:
            with _lock:
                hit = _pending.get(id(rel))
            if hit is None or hit[0]() is not rel:
                return original(rel, *args, **kwargs)
            pending = hit[1]
            try:
                self.materialise(pending, rel)
                result = None
                if pending.facts is None and not kwargs.get("lazy"):
                    # one run: the user's columns of the combined query are the user's result
                    full = getattr(pending.combined, name)(*args, **kwargs)
                    result = _select(full, pending.user_cols)
                if result is None:
                    result = original(rel, *args, **kwargs)
            except Exception as exc:
                self.registry.failures.append(f"duckdb fetch: {type(exc).__name__}: {exc}")
                return original(rel, *args, **kwargs)
            if pending.form is not None and not isinstance(result, pd.DataFrame):
                contract.remember(result, pending.form)
            return result

        return fetch

    # ------------------------------------------------------------ capture
    def _capture(self, rel: Any, query: Any, run: Callable[[str], Any]) -> None:
        if rel is None or not isinstance(query, str) or "group" not in query.lower():
            return
        try:
            pending = self._prepare(rel, query, run)
        except Exception as exc:  # never break user code: shown without evidence
            self.registry.failures.append(f"duckdb: {type(exc).__name__}: {exc}")
            return
        if pending is None:
            return
        key = id(rel)
        try:
            ref = weakref.ref(rel, lambda _r: _drop(key))
        except TypeError:
            return
        with _lock:
            if len(_pending) > 512:
                _pending.pop(next(iter(_pending)))
            _pending[key] = (ref, pending)

    def _prepare(self, rel: Any, query: str, run: Callable[[str], Any]) -> Pending | None:
        rules = self.rules()
        out_cols = list(rel.columns)
        p = plan(query, out_cols)
        if p is None:
            return None
        variables = sorted({v for v, s in p.measures.values() if v is not None and s != "size"})
        magnitudes = {v for v, s in p.measures.values() if v in variables and s in contract.MAGNITUDE_EVIDENCE}
        unit = rules.unit
        notes: list[str] = []
        facts = None
        if unit is not None:
            try:
                if magnitudes:
                    facts = run(facts_query(p, variables, magnitudes, unit, rules.top_k))
                    combined = None  # the user's own relation gives the table (never held here)
                else:
                    combined = run(combined_query(p, variables, magnitudes, unit, rules.top_k))
            except Exception:
                notes.append(f"unit column {unit!r} not found for this table: rows counted as units")
                unit, facts = None, None
        if unit is None:
            try:
                combined = run(combined_query(p, variables, magnitudes, None, rules.top_k))
            except Exception:
                if not magnitudes:
                    raise
                magnitudes = set()  # e.g. a non-numeric variable: counts only
                combined = run(combined_query(p, variables, magnitudes, None, rules.top_k))
        return Pending(combined, facts, out_cols, p.keys, p.measures, variables, unit, notes)

    def materialise(self, pending: Pending, rel: Any) -> pd.DataFrame | None:
        with pending.lock:
            if pending.registered:
                return pending.form
            pending.registered = True
            rules = self.rules()
            if pending.facts is None:
                full = pending.combined.df()
                user = full[pending.user_cols]
                facts = full
            else:
                user = self._original_df(rel)
                facts = pending.facts.df()
            shown = contract.keyed(user.copy(), pending.keys)
            ge = contract.group_evidence_from_facts(facts, pending.keys, pending.variables, rules.top_k,
                                                    pending.unit)
            measures = pending.measures

            def measure_of(m: str) -> tuple[str | None, str]:
                return measures.get(m, (None, "custom"))

            contract.register(self.registry, rules, "duckdb sql", shown, ge, pending.keys, measure_of,
                              list(pending.notes))
            pending.form = shown
            return shown

    def _original_df(self, rel: Any) -> pd.DataFrame:
        for owner, name, original in self._saved:
            if name == "df" and isinstance(owner, type):
                return original(rel)
        return rel.df()


def _select(result: Any, cols: list[str]) -> Any:
    """The user's columns of an evidence run, or None (never the facts themselves)."""
    if isinstance(result, pd.DataFrame):
        return result[cols]
    if type(result).__name__ == "DataFrame" and type(result).__module__.startswith("polars"):
        return result.select(cols)
    return None
