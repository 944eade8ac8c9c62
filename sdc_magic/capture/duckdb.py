"""Evidence capture for DuckDB: ``duckdb.sql`` / ``duckdb.query`` / ``duckdb.execute`` and a
connection's ``sql`` / ``query`` / ``execute``, for ``GROUP BY`` (with ``ROLLUP``, ``CUBE``,
``GROUPING SETS``) and ``PIVOT``.

The query is parsed with sqlglot (:mod:`.sql`). Its last statement, when it is a grouped
``SELECT`` whose every group key is a column of the result, or a ``PIVOT ... ON ... USING
... GROUP BY``, gets one *evidence query* beside it, run by DuckDB:

* without a unit column: the user's own select with the facts appended as extra columns
  (``count(*)``, per variable ``count(x)``, ``sum(x)``, ``sum(abs(x))``, ``bool_or(x < 0)`` and
  ``max(abs(x), k)``, DuckDB's top-k aggregate): one pass gives the user's table *and* its
  facts, so displaying or fetching the result costs one query, not two;
* with a unit column: ``count(DISTINCT unit)``; for magnitudes the contributions are first
  summed per (group, unit) in a sub-query, then aggregated per group;
* grouping sets add ``GROUPING(key)`` per key: a NULL made by the grouping is a margin
  (labelled ``"Total"`` in the checked form, the label the pandas path's margins get in the
  protection engine), a NULL with ``GROUPING() = 0`` is real data and stays a label;
* a PIVOT is planned as the long ``SELECT keys, on, agg GROUP BY ALL`` whose groups are
  its cells; the checked form is the wide result with the columns' level named by ``on``.

Only the per-group facts come back to Python; the microdata never leave DuckDB. For linking
(:mod:`sdc_magic.linking`) a third query returns, when the source has at most
``MAX_LINKED_ROWS`` rows, one row per source row with the keys and DuckDB's ``hash()`` of
every source column (64-bit fingerprints, never values).

The evidence queries are *bound* when the user's relation is created (so Python objects
that DuckDB finds by variable name resolve exactly as in the user's query), and *run* when
the relation is first displayed or fetched, whose result is then taken from that same run.
``execute()`` runs the user's statement at once: its evidence is bound before it and run
after the user's fetch (``df``, ``fetchdf``, ``fetchall``, ...), so the user's result is
DuckDB's own, untouched.

Anything else (a query we cannot parse, a window function, a group key that is not a result
column) gets no evidence: a displayed relation of it is shown in a form the pipeline checks
as unverified (text columns as labels, whole numbers as counts), never raw.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import contract
from .entries import MAGNITUDE_EVIDENCE
from .sql import (
    INDICATOR,
    MIXED_LEVELS,
    Plan,
    combined_query,
    facts_query,
    mixed_levels,
    plan,
    rows_query,
    single_query,
    stat_of,
)

_CALL = compile("__sdc_call__(*__sdc_args__, **__sdc_kwargs__)", "<sdc_magic>", "eval")
#: relation fetches answered from the evidence run (their result is a frame we can cut to the
#: user's columns); any other fetch runs the user's own query untouched (the facts never reach
#: the user), then the evidence is registered and the result remembered with it
FETCHERS = ("df", "to_df", "fetchdf", "pl")
OTHER_FETCHERS = ("arrow", "fetch_arrow_table", "to_arrow_table", "fetchall", "fetchnumpy")
#: connection fetches that consume a whole ``execute()`` result
CONNECTION_FETCHERS = ("df", "fetchdf", "fetch_df", "pl", "arrow", "fetch_arrow_table", "to_arrow_table",
                       "fetchall", "fetchnumpy")
#: connection fetches that take part of a result: the evidence of that execute is dropped
PARTIAL_FETCHERS = ("fetchone", "fetchmany", "fetch_df_chunk", "fetch_record_batch", "to_arrow_reader")
MAX_HASHED = 15  # source columns fingerprinted for linking (linking reads at most 16 columns)
MARGIN = "Total"  # the pandas path's margin label inside the protection engine
_AGGREGATING = ("group", "pivot", "count(", "sum(", "avg(", "mean(", "min(", "max(", "median(", "quantile",
                "stddev", "var")

_lock = threading.RLock()  # weakref callbacks may run while it is held
_pending: dict[int, tuple[Any, Pending]] = {}
_executed: dict[int, tuple[Any, Pending]] = {}  # connection -> evidence of its last execute()
_executed_unplanned: dict[int, Any] = {}  # connection whose last execute() aggregates without evidence
_unplanned: dict[int, Any] = {}  # relations that aggregate without evidence (weak refs): True or a withheld reason

# kept under its old name: the Spark capture reads statistics of SQL aggregates through it
_stat_of = stat_of


@dataclass
class Pending:
    """A captured query: its evidence queries, bound, not yet run."""

    plan: Plan
    combined: Any  # relation: the user's columns + facts (+ GROUPING flags); for a PIVOT the long query
    facts: Any  # relation of facts when they need their own query (unit + magnitudes), else None
    rows: Any  # relation of row fingerprints for linking, or None
    user_cols: list[str]
    variables: list[str]
    unit: str | None
    notes: list[str] = field(default_factory=list)
    form: pd.DataFrame | None = None
    registered: bool = False
    full: pd.DataFrame | None = None  # the combined run, until the first pandas fetch takes it
    user_rel: Any = None  # an execute()'s own query, bound (a PIVOT's wide table is fetched from it)
    lock: Any = field(default_factory=threading.Lock)
    withheld: str | None = None  # why the result must not be shown at all (see contract.Withheld)
    rows_raw: Any = None  # the same rows with the source values themselves (small sources, see _rows)


def _drop(table: dict[int, Any], key: int) -> None:
    try:
        with _lock:
            table.pop(key, None)
    except Exception:  # interpreter shutdown
        pass


def _remember(table: dict[int, Any], obj: Any, value: Any) -> None:
    key = id(obj)
    try:
        ref = weakref.ref(obj, lambda _r: _drop(table, key))
    except TypeError:
        return
    with _lock:
        if len(table) > 512:
            table.pop(next(iter(table)))
        table[key] = (ref, value)


def _lookup(table: dict[int, Any], obj: Any) -> Any:
    with _lock:
        hit = table.get(id(obj))
    if hit is None or hit[0]() is not obj:
        return None
    return hit[1]


def captured_form(rel: Any) -> pd.DataFrame | None:
    """The checked pandas form of a displayed relation (runs its evidence query once).

    A relation that aggregates but has no evidence gets a form with its text columns as
    labels, so that the pipeline checks its numbers as unverified (whole numbers as
    counts) instead of taking the table for row-level data shown as it is.
    """
    pending = _lookup(_pending, rel)
    if pending is not None and _CAPTURE is not None:
        try:
            form = _CAPTURE.materialise(pending, rel)
        except contract.Withheld:
            raise  # shown as a blocked placeholder with the reason
        except Exception as exc:  # evidence we cannot trust: the table is checked as unverified
            _CAPTURE.registry.failures.append(f"duckdb evidence: {type(exc).__name__}: {exc}")
            form = None
        if form is not None:
            return form
    unplanned = _lookup(_unplanned, rel)
    if isinstance(unplanned, str):
        raise contract.Withheld(unplanned)  # an unplanned shape that must not be shown (the reason says why)
    if pending is not None or unplanned is not None:
        return _unverified_form(rel)
    return None


def _unverified_form(rel: Any) -> pd.DataFrame:
    rows = pd.get_option("display.max_rows") or 60
    frame = rel.limit(max(int(rows), 1) + 1).df()
    labels = [c for c in frame.columns
              if not (pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))]
    if labels and len(labels) < frame.shape[1]:
        frame = frame.set_index(labels)
    return frame


_CAPTURE: DuckDBCapture | None = None
#: Up to this many source rows, linking gets the rows' values (in-process: the source is a
#: pandas or polars frame or a local table), so that DuckDB, pandas and polars tables of the
#: same people are compared; above it, DuckDB's own hashes (DuckDB tables among themselves).
RAW_LINKED_ROWS = 1_000_000
HAVING_WITH_TOTALS = ("HAVING drops groups that this table's ROLLUP / CUBE / GROUPING SETS totals still "
                      "count, so subtracting the groups shown from a total gives the dropped ones away. Filter rows "
                      "with WHERE, or leave the totals out and let sdc_magic hide the small groups.")


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


def _as_pandas(result: Any, columns: list[str]) -> pd.DataFrame | None:
    """A fetched result as pandas (for remembering the form of a polars/arrow result)."""
    if isinstance(result, pd.DataFrame):
        return result
    module = type(result).__module__ or ""
    if module.startswith(("polars", "pyarrow")) and hasattr(result, "to_pandas"):
        return result.to_pandas()
    return None


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

        # wrappers go around DuckDB's own methods, never around another session's wrappers
        # still installed (one capture at a time; stacked, a session's uninstall restored a dead
        # session's wrappers and every later DuckDB table was checked without evidence)
        t = _true
        self._patch(duckdb, "sql", self._module_wrapper(t(duckdb.sql)))
        self._patch(duckdb, "query", self._module_wrapper(t(duckdb.query)))
        if hasattr(duckdb, "execute"):
            self._patch(duckdb, "execute", self._module_execute_wrapper(t(duckdb.execute)))
        conn = duckdb.DuckDBPyConnection
        for name in ("sql", "query"):
            if name in conn.__dict__:
                self._patch(conn, name, self._connection_wrapper(t(conn.__dict__[name])))
        if "execute" in conn.__dict__:
            self._patch(conn, "execute", self._execute_wrapper(t(conn.__dict__["execute"])))
        for name in CONNECTION_FETCHERS:
            if name in conn.__dict__:
                self._patch(conn, name, self._connection_fetch_wrapper(t(conn.__dict__[name]), full=True))
        for name in PARTIAL_FETCHERS:
            if name in conn.__dict__:
                self._patch(conn, name, self._connection_fetch_wrapper(t(conn.__dict__[name]), full=False))
        rel = duckdb.DuckDBPyRelation
        for name in FETCHERS:
            if name in rel.__dict__:
                self._patch(rel, name, self._fetch_wrapper(t(rel.__dict__[name]), name))
        for name in OTHER_FETCHERS:
            if name in rel.__dict__:
                self._patch(rel, name, self._other_fetch_wrapper(t(rel.__dict__[name])))
        if "aggregate" in rel.__dict__ and "query" in rel.__dict__:
            self._patch(rel, "aggregate", self._relation_aggregate_wrapper(t(rel.__dict__["aggregate"])))
        self._previous = _CAPTURE if _CAPTURE is not self else None
        _CAPTURE = self
        self.installed = True

    def uninstall(self) -> None:
        global _CAPTURE
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        with _lock:
            _pending.clear()
            _executed.clear()
            _executed_unplanned.clear()
            _unplanned.clear()
        if _CAPTURE is self:  # a session installed before (and still installed) takes over again
            previous = getattr(self, "_previous", None)
            _CAPTURE = previous if previous is not None and previous.installed else None
        self.installed = False

    def _patch(self, owner: Any, name: str, wrapper: Callable) -> None:
        self._saved.append((owner, name, getattr(owner, name) if not isinstance(owner, type)
                            else owner.__dict__[name]))
        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)

    def _original(self, owner_name: str, name: str) -> Callable | None:
        """DuckDB's own method: past every wrapper, ours or another session's installed before
        (calling another session's wrapper from inside a check ran that check again and
        deadlocked on the evidence lock)."""
        for owner, n, original in self._saved:
            if n == name and isinstance(owner, type) and owner.__name__ == owner_name:
                while getattr(original, "__sdc_magic_wrapper__", False) and hasattr(original, "__wrapped__"):
                    original = original.__wrapped__
                return original
        return None

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

    def _relation_aggregate_wrapper(self, original: Callable) -> Callable:
        """``rel.aggregate("district, count(*) n", "district")``: captured as the SQL it is,
        ``SELECT <aggr> FROM <rel> GROUP BY <groups>`` (``GROUP BY ALL`` without groups, as
        DuckDB does), its evidence run over the source relation under a view name (red team:
        the relational API was shown as row-level, every honest count withheld)."""
        @functools.wraps(original)
        def aggregate(src: Any, *args: Any, **kwargs: Any) -> Any:
            rel = original(src, *args, **kwargs)
            aggr = args[0] if args else kwargs.get("aggr_expr")
            groups = args[1] if len(args) > 1 else kwargs.get("group_expr", "")
            if isinstance(aggr, str) and isinstance(groups, str) and rel is not None:
                query = f"SELECT {aggr} FROM {RELATION_VIEW} GROUP BY {groups.strip() or 'ALL'}"
                self._capture(rel, query, lambda q: src.query(RELATION_VIEW, q))
            elif rel is not None:
                _remember(_unplanned, rel, True)  # expressions objects: checked as unverified
            return rel

        return aggregate

    def _execute_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def execute(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            run = in_caller_frame(1)
            return self._executing(con, query, run, args, kwargs,
                                   lambda: run(original, con, query, *args, **kwargs))

        return execute

    def _module_execute_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
            import duckdb

            run = in_caller_frame(1)
            con = kwargs.get("connection") or duckdb.default_connection()
            bind_kwargs = {k: v for k, v in kwargs.items() if k != "connection"}
            return self._executing(con, query, run, args, bind_kwargs,
                                   lambda: run(original, query, *args, **kwargs))

        return execute

    def _executing(self, con: Any, query: Any, run: Callable, args: tuple, kwargs: dict,
                   statement: Callable[[], Any]) -> Any:
        """One ``execute()``: bind its evidence, run the user's statement, remember both."""
        _drop(_executed, id(con))  # a new statement ends the previous result
        _drop(_executed_unplanned, id(con))
        pending = self._prepare_execute(con, query, run, args, kwargs)
        out = statement()
        if isinstance(pending, str) and out is not None:
            _remember(_executed_unplanned, out, pending)
        elif pending is not None and out is not None:
            _remember(_executed, out, pending)
        elif out is not None and isinstance(query, str) and _aggregates(query):
            _remember(_executed_unplanned, out, _withheld_reason(query) or True)
        return out

    def _prepare_execute(self, con: Any, query: Any, run: Callable, args: tuple, kwargs: dict
                         ) -> Pending | str | None:
        """Bind the evidence of an ``execute()`` before the statement runs (binding later
        would end the user's pending result). A string: why its result must be withheld."""
        if not isinstance(query, str) or not _aggregates(query) or not single_query(query):
            return None  # binding anything but one query would run it (CREATE ... AS, several statements)
        if mixed_levels_safe(query):
            return None  # remembered as withheld after the statement (see _executing)
        sql = self._original("DuckDBPyConnection", "sql")
        if sql is None:
            return None
        params = args[0] if args else kwargs.get("parameters")

        def bind(q: str) -> Any:
            return run(sql, con, q, params=params) if params is not None else run(sql, con, q)

        try:
            rel = bind(query)
        except Exception as exc:  # never break user code: the fetched table has no evidence
            self.registry.failures.append(f"duckdb execute: {type(exc).__name__}: {exc}")
            return None
        try:
            pending = self._prepare(rel, query, bind)
        except Exception as exc:  # fail closed, as for a relation (see _capture)
            self.registry.failures.append(f"duckdb execute: {type(exc).__name__}: {exc}")
            return PLANNING_FAILED
        if pending is not None and pending.plan.pivot is not None:
            pending.user_rel = rel
        return pending

    def _fetch_wrapper(self, original: Callable, name: str) -> Callable:
        @functools.wraps(original)
        def fetch(rel: Any, *args: Any, **kwargs: Any) -> Any:
            pending = _lookup(_pending, rel)
            if pending is None:
                result = original(rel, *args, **kwargs)
                unplanned = _lookup(_unplanned, rel)
                if isinstance(unplanned, str):
                    contract.mark_withheld(result, unplanned)
                elif isinstance(result, pd.DataFrame) and unplanned is not None:
                    contract.mark_aggregate(result)  # checked as unverified, never as row-level data
                return result
            try:
                self.materialise(pending, rel)
            except contract.Withheld as exc:
                result = original(rel, *args, **kwargs)
                contract.mark_withheld(result, str(exc))
                return result
            except Exception:
                pass  # (the fetch below records the failure)
            try:
                self.materialise(pending, rel)
                result = None
                full, pending.full = pending.full, None
                if full is not None and name in ("df", "to_df", "fetchdf") and not args and not kwargs:
                    # the run that made the evidence gave the user's columns too: not run twice
                    result = full[pending.user_cols].copy()
                elif pending.facts is None and pending.plan.pivot is None and not kwargs.get("lazy"):
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

    def _other_fetch_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def fetch(rel: Any, *args: Any, **kwargs: Any) -> Any:
            pending = _lookup(_pending, rel)
            if pending is not None:
                # the evidence runs first: a result DuckDB streams (2.x: .arrow() is a
                # RecordBatchReader) keeps the connection busy until the user drains it
                try:
                    self.materialise(pending, rel)
                except contract.Withheld:
                    pass  # marked on the result by _register_result below
                except Exception as exc:  # the result stays without evidence: never shown raw
                    self.registry.failures.append(f"duckdb fetch: {type(exc).__name__}: {exc}")
            result = original(rel, *args, **kwargs)
            if pending is not None:
                self._register_result(pending, rel, result)
            else:
                unplanned = _lookup(_unplanned, rel)
                if isinstance(unplanned, str):
                    contract.mark_withheld(result, unplanned)
            return result

        return fetch

    def _connection_fetch_wrapper(self, original: Callable, full: bool) -> Callable:
        @functools.wraps(original)
        def fetch(con: Any, *args: Any, **kwargs: Any) -> Any:
            pending = _lookup(_executed, con)
            if pending is None:
                result = original(con, *args, **kwargs)
                unplanned = _lookup(_executed_unplanned, con)
                if isinstance(unplanned, str):
                    contract.mark_withheld(result, unplanned)
                elif isinstance(result, pd.DataFrame) and unplanned is not None:
                    contract.mark_aggregate(result)  # checked as unverified, never as row-level data
                return result
            _drop(_executed, id(con))
            result = original(con, *args, **kwargs)  # the user's result, as DuckDB gives it
            if full:
                self._register_result(pending, None, result)
            return result

        return fetch

    def _register_result(self, pending: Pending, rel: Any, result: Any) -> None:
        """Evidence for a result fetched by the user's own query (run after it)."""
        try:
            form = self.materialise(pending, rel)
        except contract.Withheld as exc:
            if result is not None:
                contract.mark_withheld(result, str(exc))
            return
        except Exception as exc:
            self.registry.failures.append(f"duckdb fetch: {type(exc).__name__}: {exc}")
            return
        if form is not None and result is not None and not isinstance(result, pd.DataFrame | list | dict | tuple):
            contract.remember(result, form)

    # ------------------------------------------------------------ capture
    def _capture(self, rel: Any, query: Any, run: Callable[[str], Any]) -> None:
        if rel is None or not isinstance(query, str) or not _aggregates(query):
            return
        if mixed_levels_safe(query):
            _remember(_unplanned, rel, MIXED_LEVELS)
            return
        failed = False
        try:
            pending = self._prepare(rel, query, run)
        except Exception as exc:  # never break user code; its display is checked as unverified
            self.registry.failures.append(f"duckdb: {type(exc).__name__}: {exc}")
            pending, failed = None, True
        if pending is None:
            reason = _withheld_reason(query)
            if failed:
                # fail closed: an unverified check could pass a wrapped small count (7 = 2·3 + 1)
                reason = reason or PLANNING_FAILED
            if reason is not None:
                _remember(_unplanned, rel, reason)
            elif _grouped(query):
                _remember(_unplanned, rel, True)
            return
        _remember(_pending, rel, pending)

    def _prepare(self, rel: Any, query: str, run: Callable[[str], Any]) -> Pending | None:
        rules = self.rules()
        out_cols = list(rel.columns)
        p = plan(query, out_cols)
        if p is None:
            return None
        variables = sorted({v for v, s in p.measures.values() if v is not None and s != "size"})
        magnitudes = {v for v, s in p.measures.values() if v in variables and s in MAGNITUDE_EVIDENCE}
        unit = rules.unit
        notes: list[str] = []
        facts = combined = None
        if unit is not None:
            try:
                if magnitudes:
                    facts = run(facts_query(p, variables, magnitudes, unit, rules.top_k))
                    if p.grouping:  # the GROUPING flags tell the table's margins apart
                        combined = run(combined_query(p, [], set(), None, rules.top_k))
                else:
                    combined = run(combined_query(p, variables, magnitudes, unit, rules.top_k))
            except Exception:
                notes.append(f"unit column {unit!r} not found for this table: rows counted as units")
                unit, facts, combined = None, None, None
        if unit is None:
            try:
                combined = run(combined_query(p, variables, magnitudes, None, rules.top_k))
            except Exception:
                if not magnitudes:
                    raise
                magnitudes = set()  # e.g. a non-numeric variable: counts only
                combined = run(combined_query(p, variables, magnitudes, None, rules.top_k))
        rows = rows_raw = None
        stats = {s for _, s in p.measures.values()}
        only = variables[0] if len(variables) == 1 and "size" not in stats else None
        try:
            text = rows_query(p, only)
            rows = run(text) if text is not None else None
            hashed = [c for c in list(rows.columns)[len(p.keys):] if not str(c).startswith(INDICATOR)] \
                if rows is not None else []
            once = None
            if len(hashed) > MAX_HASHED:  # binding only: nothing ran yet
                once = [c for c in dict.fromkeys(hashed) if hashed.count(c) == 1][:MAX_HASHED]
                text = rows_query(p, only, once)
                rows = run(text) if text is not None else None
            raw_text = rows_query(p, only, once, raw=True)
            rows_raw = run(raw_text) if raw_text is not None and rows is not None else None
        except Exception:
            rows = rows_raw = None  # linking only: the table is still checked
        if rows is None:
            notes.append("not linked with other tables (its source rows could not be fingerprinted)")
        pending = Pending(p, combined, facts, rows, out_cols, variables, unit, notes)
        pending.rows_raw = rows_raw
        return pending

    def materialise(self, pending: Pending, rel: Any) -> pd.DataFrame | None:
        """Run the evidence once, register it, and return the checked pandas form."""
        with pending.lock:
            if pending.registered:
                if pending.withheld:
                    raise contract.Withheld(pending.withheld)
                return pending.form
            pending.registered = True
            p = pending.plan
            if p.pivot is not None:
                user = self._user_df(rel, pending)
                facts = pending.facts.df() if pending.facts is not None else pending.combined.df()
                pending.form = self._register_pivot(pending, user, facts)
                return pending.form
            if pending.facts is None:
                facts = user = pending.combined.df()  # one run: the user's columns and the facts
                pending.full = facts  # answers the first pandas fetch (then dropped)
            else:
                facts = pending.facts.df()
                user = pending.combined.df() if pending.combined is not None else self._user_df(rel, pending)
            if p.grouping and p.having:
                # its totals count the groups HAVING drops: total − shown groups = a dropped
                # (small) group.  Withheld rather than shown (red team: C = 73 − 40 − 30)
                pending.withheld = HAVING_WITH_TOTALS
                raise contract.Withheld(HAVING_WITH_TOTALS)
            if p.grouping:
                pending.form = self._register_grouping(pending, user, facts)
            else:
                pending.form = self._register_plain(pending, user[pending.user_cols], facts)
            return pending.form

    def _user_df(self, rel: Any, pending: Pending) -> pd.DataFrame:
        """The user's own table, run by DuckDB (an execute()'s: its query bound as a relation)."""
        rel = rel if rel is not None else pending.user_rel
        if rel is None:
            raise ValueError("no relation to fetch")
        original = self._original("DuckDBPyRelation", "df")
        return original(rel) if original is not None else rel.df()

    # ------------------------------------------------------------ registration
    def _measure_of(self, pending: Pending) -> Callable[[str], tuple[str | None, str]]:
        measures = pending.plan.measures

        def measure_of(m: str) -> tuple[str | None, str]:
            # a scalar query's cells are measured "<row>|<column>" (no dimension names the row)
            return measures.get(m) or measures.get(str(m).rsplit("|", 1)[-1], (None, "custom"))

        return measure_of

    def _register(self, pending: Pending, shown: pd.DataFrame, ge: Any, keys: list[str],
                  measure_of: Callable[[str], tuple[str | None, str]], rows: pd.DataFrame | None,
                  margin_label: str | None = None, margin_evidence: Callable | None = None,
                  notes: list[str] | None = None) -> Any:
        """As contract.register, plus the evidence of margins (grouping sets), and refused when
        a shown value found no facts (a layout we misread must not pass as empty cells)."""
        from ..evidence.flatten import flatten
        from .entries import Source, build_entry

        rules = self.rules()
        entry = build_entry(self.registry.new_id(), "duckdb sql", flatten(shown), ge, keys, measure_of,
                            list(notes if notes is not None else pending.notes), rules.top_k, margin_label,
                            margin_evidence)
        _unwrap_values(entry, pending.plan.affine)
        _check_consistent(entry)
        entry.unit = rules.unit if ge.unit_column else None
        if rows is not None:
            entry.source = Source(None, list(keys), "duckdb sql", rows=rows)
        self.registry.add(entry, shown)
        return entry

    def _evidence(self, pending: Pending, facts: pd.DataFrame, keys: list[str]) -> Any:
        ge = contract.group_evidence_from_facts(facts, keys, pending.variables, self.rules().top_k, pending.unit)
        _mark_indicators(facts, ge, pending.variables)
        return ge

    def _register_plain(self, pending: Pending, user: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
        keys = pending.plan.keys
        shown = contract.keyed(user.copy(), keys)
        ge = self._evidence(pending, facts, keys)
        rows = self._rows(pending, facts, shown)
        self._register(pending, shown, ge, keys, self._measure_of(pending), rows)
        return shown

    def _register_grouping(self, pending: Pending, user: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
        """ROLLUP / CUBE / GROUPING SETS: rows with a grouping NULL are margins."""
        from ..evidence.flatten import MISSING_LABEL

        p = pending.plan
        keys = p.keys
        flags = _flags(facts, len(keys))
        base = ~flags.any(axis=1)
        user_flags = _flags(user, len(keys))  # the combined run always carries the GROUPING flags
        label = _margin_label(user, keys, user_flags)
        table = user[pending.user_cols].copy()
        for j, k in enumerate(keys):
            if user_flags[:, j].any():
                col = table[k].astype(object)
                col[user_flags[:, j]] = label
                table[k] = col
        shown = contract.keyed(table, keys)
        ge_base = self._evidence(pending, facts[base].reset_index(drop=True), keys)
        cache: dict[tuple[str, ...], Any] = {}

        def margin_evidence(fixed: tuple[str, ...]) -> Any:
            if fixed not in cache:
                want = np.array([k not in fixed for k in keys])
                sel = (flags == want).all(axis=1)
                cache[fixed] = self._evidence(pending, facts[sel].reset_index(drop=True), list(fixed))
            return cache[fixed]

        rows = self._rows(pending, facts[base])
        measure_of = self._measure_of(pending)
        self._register(pending, shown, ge_base, keys, measure_of, rows, label, margin_evidence)
        # the frame DuckDB itself returns (df(), fetchdf(), execute().df()) shows a margin as a
        # NULL: registered too, unless a real NULL label makes such rows ambiguous
        real_null = any((~user_flags[:, j] & user[k].isna().to_numpy()).any() for j, k in enumerate(keys))
        if not real_null:
            raw = contract.keyed(user[pending.user_cols].copy(), keys)
            self._register(pending, raw, ge_base, keys, measure_of, rows, MISSING_LABEL, margin_evidence)
        else:
            pending.notes.append("margins and real missing labels look alike in the fetched frame: "
                                 "display the relation to see them told apart")
        return shown

    def _register_pivot(self, pending: Pending, user: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
        """PIVOT: the wide table, its columns' level named by the ON column (a dimension)."""
        p = pending.plan
        assert p.pivot is not None
        if p.pivot.aliases:
            return self._register_pivot_several(pending, user, facts)
        row_keys, on = p.pivot.row_keys, p.pivot.on
        keys = p.keys
        ((var, stat),) = p.measures.values()
        shown = contract.keyed(user.copy(), row_keys)
        suffix = f"_{p.pivot.alias}" if p.pivot.alias else ""
        shown.columns = pd.Index([str(c)[:-len(suffix)] if suffix and str(c).endswith(suffix) else str(c)
                                  for c in shown.columns], dtype=object, name=on)
        ge = self._evidence(pending, facts, keys)
        rows = self._rows(pending, facts)
        self._register(pending, shown, ge, keys, lambda _m: (var, stat), rows)
        # DuckDB's own frame (fetched): value columns unnamed, one measure per column
        wide = contract.keyed(user.copy(), row_keys)
        ge_wide, measure_of = _wide_evidence(ge, wide, row_keys, var, stat, suffix)
        self._register(pending, wide, ge_wide, row_keys, measure_of, None)
        return shown

    def _register_pivot_several(self, pending: Pending, user: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
        """PIVOT ... USING agg1 AS a1, agg2 AS a2: every cell is checked by its own aggregate's
        rule (red team: count(*) AS n, sum(income) AS s was unverified and showed the one man
        of C's income).

        Displayed as DuckDB lays it out (columns "<value>_<alias>", each its own measure with
        the facts of its (row, value) cell: protected column by column, not linked); the same
        table with two column levels, the ON column (a dimension) and the aggregate (the
        measure), is registered too, with its rows for linking, for pandas reshapes of it.
        """
        p = pending.plan
        assert p.pivot is not None
        row_keys, on, aliases = p.pivot.row_keys, p.pivot.on, p.pivot.aliases
        by_alias = dict(zip(aliases, p.measures.values(), strict=True))
        wide = contract.keyed(user.copy(), row_keys)
        split: dict[Any, tuple[str, str]] = {}
        for c in wide.columns:
            text = str(c)
            hit = max((a for a in aliases if text.endswith("_" + a)), key=len, default=None)
            if hit is None:
                raise ValueError("a PIVOT column that names no USING aggregate")
            split[c] = (text[:-len(hit) - 1], hit)
        shown = wide.copy()
        shown.columns = pd.MultiIndex.from_tuples([split[c] for c in wide.columns], names=[on, None])
        ge = self._evidence(pending, facts, p.keys)
        rows = self._rows(pending, facts)

        def measure_of(m: str) -> tuple[str | None, str]:
            return by_alias.get(str(m).rsplit("|", 1)[-1], (None, "custom"))

        self._register(pending, shown, ge, p.keys, measure_of, rows)
        # DuckDB's own frame (fetched): one measure per column, the facts of its (row, value) cell
        per_column = {c: (value, *by_alias[alias]) for c, (value, alias) in split.items()}
        ge_wide, wide_measure = _wide_evidence_columns(ge, wide, row_keys, per_column)
        self._register(pending, wide, ge_wide, row_keys, wide_measure, None,
                       notes=[*pending.notes, "a PIVOT of several aggregates is not linked with other tables"])
        return wide

    def _rows(self, pending: Pending, facts: pd.DataFrame, shown: pd.DataFrame | None = None
              ) -> pd.DataFrame | None:
        """The row fingerprints for linking (None with a note when too many or not available)."""
        from ..evidence import rows as row_limits

        if pending.rows is None:
            return None
        if pending.plan.having and pending.plan.grouping:
            return None
        n = int(pd.to_numeric(facts[f"{contract.PREFIX}rows"], errors="coerce").fillna(0).sum())
        if n > row_limits.MAX_LINKED_ROWS:
            pending.notes.append(f"not linked with other tables (more than {row_limits.MAX_LINKED_ROWS:,} source rows)")
            return None
        raw = pending.rows_raw is not None and n <= RAW_LINKED_ROWS
        try:
            frame = (pending.rows_raw if raw else pending.rows).df()
        except Exception as exc:
            self.registry.failures.append(f"duckdb rows: {type(exc).__name__}: {exc}")
            return None
        keys = pending.plan.keys
        hashed = list(frame.columns[len(keys):])
        out: dict[str, Any] = {}
        for name, col in zip(hashed, range(len(keys), frame.shape[1]), strict=True):
            if raw:
                # the values: linking fingerprints them as it does pandas' (same rows, same
                # fingerprints, whichever engine made the table)
                if name not in out and name not in keys:
                    out[name] = frame.iloc[:, col].to_numpy()
                continue
            if str(name).startswith(INDICATOR):  # a condition's indicator: its 0/1 values
                out[name] = frame.iloc[:, col].to_numpy()
                continue
            label = f"duckdb#{name}"
            if label not in out:
                out[label] = frame.iloc[:, col].to_numpy(dtype=np.uint64, na_value=0)
        for j, k in enumerate(keys):
            out[k] = frame.iloc[:, j].to_numpy()
        rows = pd.DataFrame(out)
        if pending.plan.having and shown is not None and keys:
            # HAVING drops groups: the table's population is the rows of the groups it shows
            # (a later total then differs from their sum by the dropped rows: differencing)
            kept = pd.MultiIndex.from_frame(shown.index.to_frame(index=False).astype(object)) if len(keys) > 1 \
                else pd.Index(shown.index.astype(object))
            mine = pd.MultiIndex.from_arrays([rows[k].astype(object) for k in keys]) if len(keys) > 1 \
                else pd.Index(rows[keys[0]].astype(object))
            rows = rows[mine.isin(kept)]
        # rows are matched across tables by content, never by position (DuckDB's row order is
        # not a row identity): a non-unique index keeps linking from aligning them by label
        rows.index = pd.Index(np.zeros(len(rows), dtype=np.int8))
        return rows


#: statistics whose displayed value the protection model takes as the cell's value (sums and
#: means are modelled by their facts' totals, whatever is displayed)
_VALUE_MODELLED = frozenset({"count", "size", "nunique", "proportion", "percent"})


def _unwrap_values(entry: Any, affine: dict[str, tuple[float, float]]) -> None:
    """Give the rules and the protection model the inner aggregate's values.

    A cell showing ``a * count + b`` is a count: the rules judge it by its facts (units), but
    the additive model and the distinct-count rule read the cell's value, and with b ≠ 0
    the displayed values do not add up (red team: ``count(*) * 2 + 1`` had no secondary
    suppression; C = 73 − 40 − 30). The value recorded for the check is ``(y − b) / a``,
    rounded for counts; the displayed values stay in ``values2d`` for matching.
    """
    if not affine:
        return
    ev = entry.evidence
    measures = np.asarray(entry.flat.measure).astype(str)
    names = np.array([m.rsplit("|", 1)[-1] for m in measures], dtype=object)
    value = np.asarray(ev.value, dtype=float).copy()
    for name, (a, b) in affine.items():
        sel = ((measures == name) | (names == name)) & np.isin(ev.stat.astype(str), list(_VALUE_MODELLED))
        if sel.any():
            value[sel] = np.round((value[sel] - b) / a)
    ev.value = value


def _check_consistent(entry: Any) -> None:
    """Every cell showing a value other than 0 must have found its group's facts.

    A cell whose labels matched no group gets no units, which the rules read as an empty
    cell; if it shows a number, the layout was misread: the table must not be cleared on
    such evidence (it is checked as unverified instead).
    """
    from ..evidence.flatten import numeric

    values = numeric(entry.flat.values)
    if values is None:
        raise ValueError("a DuckDB table with non-numeric cells")
    units = np.asarray(entry.evidence.units, dtype=float)
    lost = (units == 0) & ~np.isnan(values) & (values != 0) & ~np.asarray(entry.evidence.is_margin, dtype=bool)
    if lost.any():
        raise ValueError(f"{int(lost.sum())} cells of a DuckDB table found no evidence")


def _flags(frame: pd.DataFrame, n: int) -> np.ndarray:
    """GROUPING(key) != 0 per row and key: the key is a margin there."""
    pre = contract.PREFIX
    return np.stack([pd.to_numeric(frame[f"{pre}g{j}"]).to_numpy() != 0 for j in range(n)], axis=1)


PLANNING_FAILED = ("the evidence of this query could not be prepared, so it cannot be checked: it is not shown "
                   "(%sdc debug shows why). Simplify the query, or aggregate in pandas.")
RELATION_VIEW = "__sdc_relation"  # the name a captured relation's source takes in its evidence queries
PIVOT_SEVERAL = ("a PIVOT with several USING aggregates is not checked cell by cell here: pivot one aggregate "
                 "at a time (each is checked and protected), or GROUP BY the keys and the ON column.")


def mixed_levels_safe(query: str) -> bool:
    """:func:`.sql.mixed_levels`, False when the query cannot be read."""
    try:
        return mixed_levels(query)
    except Exception:
        return False


def _withheld_reason(query: str) -> str | None:
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

    from .sql import parse_last, pivot_node

    stmt = parse_last(query)
    node = pivot_node(stmt) if stmt is not None else None
    if node is None and stmt is not None:
        node = next((p for p in stmt.find_all(exp.Pivot)), None)
    return len(node.args.get("using") or []) if node is not None else 0


def _grouped(query: str) -> bool:
    """A grouped query (GROUP BY or PIVOT), not a window over rows (those are row-level)."""
    return bool(re.search(r"\bgroup\s+by\b|\bpivot\b", query, re.IGNORECASE)) and \
        not re.search(r"\bover\s*\(", query, re.IGNORECASE)


def _aggregates(query: str) -> bool:
    low = query.lower()
    return any(word in low for word in _AGGREGATING)


def _margin_label(user: pd.DataFrame, keys: list[str], flags: np.ndarray) -> str:
    """"Total", unless a real label is called so (then a label no real one uses)."""
    real = set()
    for j, k in enumerate(keys):
        if k in user.columns:
            values = user[k].to_numpy(dtype=object)[~flags[:, j]]
            real.update(v for v in values if isinstance(v, str))
    for label in (MARGIN, "All", "Total (all)", "Σ"):
        if label not in real:
            return label
    return MARGIN + "\u2009(margin)"


def _wide_evidence(ge: Any, wide: pd.DataFrame, row_keys: list[str], var: str | None, stat: str,
                   suffix: str = "") -> tuple[Any, Callable[[str], tuple[str | None, str]]]:
    """Evidence of DuckDB's wide PIVOT frame: one measure per value column, each its own
    variable whose facts are those of the (row keys, column) cell."""
    per_column = {c: (str(c)[:-len(suffix)] if suffix and str(c).endswith(suffix) else str(c), var, stat)
                  for c in wide.columns}
    return _wide_evidence_columns(ge, wide, row_keys, per_column)


def _wide_evidence_columns(ge: Any, wide: pd.DataFrame, row_keys: list[str],
                           per_column: dict[Any, tuple[str, str | None, str]]
                           ) -> tuple[Any, Callable[[str], tuple[str | None, str]]]:
    """As :func:`_wide_evidence`, each column given as (ON value, variable, statistic)."""
    from ..evidence.facts import GroupEvidence, VarEvidence
    from ..evidence.flatten import canonical_labels

    index = wide.index
    n_keys = len(row_keys)
    canon_rows = [canonical_labels(index.get_level_values(i) if isinstance(index, pd.MultiIndex) else index)
                  for i in range(n_keys)]
    long_index = ge.index
    variables: dict[Any, VarEvidence] = {}
    stats: dict[str, str] = {}
    width = ge.variables[next(iter(ge.variables))].top.shape[1] if ge.variables else 1
    for c in wide.columns:
        value, var, stat = per_column[c]
        arrays = [*canon_rows, np.full(len(index), value, dtype=object)]
        pos = long_index.get_indexer(pd.MultiIndex.from_arrays(arrays))
        taken = ge.take(pos, pd.RangeIndex(len(pos)))
        if var is not None and var in taken.variables:
            variables[str(c)] = taken.variables[var]
        else:
            units = taken.units
            variables[str(c)] = VarEvidence(units=units, total=np.full(len(pos), np.nan),
                                            total_abs=np.full(len(pos), np.nan),
                                            negative=np.zeros(len(pos), dtype=bool),
                                            top=np.full((len(pos), width), np.nan))
        # a count(*) cell counts its rows: as a count of the column's own "variable"
        stats[str(c)] = "count" if stat == "size" else stat
    if n_keys > 1:
        ev_index = pd.MultiIndex.from_arrays(canon_rows, names=row_keys)
    else:
        ev_index = pd.Index(canon_rows[0], dtype=object, name=row_keys[0])
    units = np.zeros(len(index), dtype=np.int64)
    out = GroupEvidence(index=ev_index, units=units, variables=variables, unit_column=ge.unit_column, rows=None)

    def measure_of(m: str) -> tuple[str | None, str]:
        return (str(m), stats[str(m)]) if str(m) in variables else (None, "custom")

    return out, measure_of


def _select(result: Any, cols: list[str]) -> Any:
    """The user's columns of an evidence run, or None (never the facts themselves)."""
    if isinstance(result, pd.DataFrame):
        return result[cols]
    if type(result).__name__ == "DataFrame" and type(result).__module__.startswith("polars"):
        return result.select(cols)
    return None


def _true(fn: Any) -> Any:
    """DuckDB's own function behind any sdc_magic wrappers."""
    while getattr(fn, "__sdc_magic_wrapper__", False) and hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _mark_indicators(facts: pd.DataFrame, ge: Any, variables: list[str]) -> None:
    """Sums and means of a 0/1 (or two-valued) column are counts on both sides, as in pandas
    (a DuckDB ``sum(flag)`` of 38 among 40 people was cleared: 2 people without the flag).

    The evidence query gives, per group and variable, the minimum, maximum, sum of squares
    and count of the row values (see ``sql.combined_query`` / ``facts_query``); with a unit
    column, also the sum and count of each unit's largest row value, from which the units
    at the attribute level follow once the variable's two levels are known (every unit's
    largest value is one of them). :func:`polars.set_indicators` then decides, as for the
    other engines, whether the variable is an indicator and sets its ``ones``.
    """
    from .polars import set_indicators

    p = contract.PREFIX
    facts = facts.copy()
    for i, _ in enumerate(variables):
        lo_name, hi_name, hsum, hcnt = f"{p}lo_{i}", f"{p}hi_{i}", f"{p}hsum_{i}", f"{p}hcnt_{i}"
        if hsum not in facts.columns or lo_name not in facts.columns:
            continue
        lo_g = pd.to_numeric(facts[lo_name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        hi_g = pd.to_numeric(facts[hi_name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not np.isfinite(lo_g).any():
            continue
        lo, hi = float(np.nanmin(lo_g)), float(np.nanmax(hi_g))
        if hi <= lo:
            continue
        level = 1.0 if lo >= 0.0 and hi <= 1.0 else hi
        s_ = pd.to_numeric(facts[hsum], errors="coerce").to_numpy(dtype=float, na_value=0.0)
        n_ = pd.to_numeric(facts[hcnt], errors="coerce").to_numpy(dtype=float, na_value=0.0)
        other = 0.0 if level == 1.0 else lo
        with np.errstate(invalid="ignore", divide="ignore"):
            facts[f"{p}chi_{i}"] = np.rint(np.where(n_ > 0, (s_ - other * n_) / (level - other), 0.0))
    set_indicators(facts, ge, variables)
