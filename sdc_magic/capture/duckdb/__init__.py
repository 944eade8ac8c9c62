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

This module is the public face: :class:`DuckDBCapture`, its wrappers, when evidence is bound
and run, and the display hook :func:`captured_form`. The decisions taken on a query's text
alone are in :mod:`.plan`; the evidence queries and what their runs register are in
:mod:`.evidence`.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd

from ...evidence.in_engine import CountedBases
from .. import contract
from ..sql import single_query
from ..sql_levels import MIXED_LEVELS
from ..sql_rewrites import having_reads_unshown
from . import python_frames
from .evidence import Pending, Recorder, prepare
from .plan import (
    HAVING_UNSHOWN,
    HAVING_WITH_TOTALS,
    PLANNING_FAILED,
    RELATION_VIEW,
    Untraced,
    aggregates,
    mixed_levels_safe,
    untraced_shape,
    withheld_reason,
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

_lock = threading.RLock()  # weakref callbacks may run while it is held
_pending: dict[int, tuple[Any, Pending]] = {}
_executed: dict[int, tuple[Any, Pending]] = {}  # connection -> evidence of its last execute()
_executed_unplanned: dict[int, Any] = {}  # connection whose last execute() aggregates without evidence
_unplanned: dict[int, Any] = {}  # relations that aggregate without evidence (weak refs): True or a withheld reason


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
            _mark_planned(form, pending)
            return form
    unplanned = _lookup(_unplanned, rel)
    if isinstance(unplanned, str):
        raise contract.Withheld(unplanned)  # an unplanned shape that must not be shown (the reason says why)
    if pending is not None:  # planned, but its evidence failed or did not give a form
        return _unverified_form(rel, pending.computed, labels=pending.labels)
    if isinstance(unplanned, Untraced):
        computed = unplanned.columns(list(rel.columns))
        if unplanned.per_row and computed is not None:
            frame = rel.limit(max(int(pd.get_option("display.max_rows") or 60), 1) + 1).df()
            contract.mark_row_windows(frame, computed)
            _mark_pins(frame, unplanned)
            return frame
        form = _unverified_form(rel, computed, labels=unplanned.labels(list(rel.columns)))
        _mark_pins(form, unplanned)
        return form
    if unplanned is not None:
        return _unverified_form(rel, (), untraced=False)
    return None


def query_form(query: str, names: dict[str, Any]) -> tuple[pd.DataFrame, Any] | None:
    """DuckDB's checked pandas form of ``query`` over the Python frames ``names`` (name in the
    query -> frame), and the user columns of that run; None when the DuckDB capture is not
    installed, the query has no plan, or DuckDB cannot run it.

    Why: polars SQL (``df.sql``, ``pl.sql``) has no evidence of its own, and every such table
    was ``review`` (55 of 66 honest sequences a red team's 2,000 sessions left unpassed). A plain
    grouped query is run again as polars calls (``capture/polars/sql.py``); its other shapes
    (joins, subqueries, ``HAVING``, ``LIMIT``) mostly mean the same in DuckDB, which reads polars
    and pandas frames where they are (replacement scans): the evidence and the linking rows come
    from DuckDB's run of the same query over the same frames, exactly as for
    ``duckdb.sql(query).pl()``. The caller compares DuckDB's result with its own and uses the form
    only when they hold the same rows (a dialect difference is then caught, and the table stays
    ``review``).
    """
    if not aggregates(query) or mixed_levels_safe(query) or withheld_reason(query) is not None:
        return None
    try:
        import duckdb  # (a first import installs the session's DuckDB capture: lazy.AfterImport)
    except ImportError:
        return None
    capture = _CAPTURE
    if capture is None or not capture.installed:
        return None
    con = duckdb.connect()
    sql = _true(type(con).sql)
    frames = dict(names)

    def run(q: str) -> Any:
        # evaluated with the frames as the caller's names: DuckDB's replacement scans find them there
        ns = {**frames, "__sdc_call__": sql, "__sdc_args__": (con, q), "__sdc_kwargs__": {}}
        return eval(_CALL, {"__builtins__": {}}, ns)

    rel = run(query)
    pending = capture._prepare(rel, query, run, python_frames.resolver(con, frames.get))
    if pending is None:
        return None
    shape = untraced_shape(query)
    if isinstance(shape, Untraced):
        pending.computed, pending.labels = shape.columns(list(rel.columns)), shape.labels(list(rel.columns))
    else:
        pending.computed = ()
    form = capture.materialise(pending, rel)  # (raises Withheld for a shape that must not be shown)
    if form is None:
        return None
    full, pending.full = pending.full, None
    user = full[pending.user_cols] if full is not None else capture._user_df(rel, pending)
    _mark_planned(form, pending)
    return form, user


def _mark_planned(result: Any, pending: Pending) -> None:
    """A planned query's result is an aggregate: if it does not match its evidence (a count
    written as ``'3 people'``), it is checked as an untraced one, never as row-level data."""
    if isinstance(result, pd.DataFrame) and contract.withheld_reason(result) is None \
            and not contract.is_aggregate(result):
        contract.mark_untraced(result, pending.computed)
    if pending.form is not None and result is not pending.form:
        # the fetched frame says what the registered form says of how its groups were chosen
        # (red team: HAVING count(*) = 2 withheld the relation but drew .df() at 'suppressed')
        contract.mark_one_sided(result, contract.one_sided(pending.form) or [])  # (HAVING count(*) < 13)
        chosen = contract.selected_by_values(pending.form)
        if chosen is not None:
            contract.mark_selected_by_values(result, chosen)


def mark_unplanned(result: Any, unplanned: Any) -> None:
    """Mark a fetched result of a query with aggregates but no evidence (see ``plan.untraced_shape``):
    a pandas frame, or another engine's result (polars SQL's, ``capture/polars/sql.py``)."""
    if isinstance(unplanned, Untraced):
        computed = unplanned.columns([str(c) for c in result.columns])
        if unplanned.per_row and computed is not None:
            contract.mark_row_windows(result, computed)
        else:
            contract.mark_untraced(result, computed)
        _mark_pins(result, unplanned)
    else:
        contract.mark_aggregate(result)


def _mark_pins(result: Any, unplanned: Untraced) -> None:
    """Rows kept by an aggregate's value bounded from both sides (``plan.value_pins``)."""
    if result is None:
        return
    if unplanned.pins:
        contract.mark_selected_by_values(result, "the rows shown were kept by a condition that bounds an "
                                                 "aggregate from both sides (=, IN, BETWEEN) in an outer query")
    else:
        contract.mark_selection_read(result)


def _unverified_form(rel: Any, computed: tuple[str, ...] | None, *, untraced: bool = True,
                     labels: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The first rows of an aggregate without evidence, its ``labels`` (else its text columns but
    the ``computed`` ones) as the index; marked untraced (``contract.mark_untraced``) unless told otherwise."""
    rows = pd.get_option("display.max_rows") or 60
    frame = rel.limit(max(int(rows), 1) + 1).df()
    if computed is None:  # which columns are labels is not known: resolve() tells them by type
        contract.mark_untraced(frame, None)
        return frame
    # text columns are the labels, but not those computed (``count(*)::varchar``) nor, when the
    # query tells, those that are not source columns (a ``string_agg`` is people's values)
    labels = [c for c in frame.columns
              if not (pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]))
              and str(c) not in set(computed) and (labels is None or str(c) in set(labels))]
    if labels and len(labels) < frame.shape[1]:
        frame = frame.set_index(labels)
    if untraced:
        contract.mark_untraced(frame, computed)
    return frame


_CAPTURE: DuckDBCapture | None = None  # the installed capture, read by captured_form at display


def _statement_ran(con: Any, query: Any, lookup: Callable[[str], Any] | None) -> None:
    """A statement ran on ``con``: copies of frames into tables noted (:mod:`.python_frames`)."""
    with contextlib.suppress(Exception):
        python_frames.executed(con, query, lookup)


def _registering(original: Callable, note: Callable[..., None]) -> Callable:
    """``con.register(name, obj)`` / ``con.unregister(name)``, noted (:mod:`.python_frames`)."""
    @functools.wraps(original)
    def registering(con: Any, name: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(con, name, *args, **kwargs)
        with contextlib.suppress(Exception):
            note(con, name, *args, **kwargs)
        return result

    return registering


def _from_frame(original: Callable, method: bool) -> Callable:
    """``duckdb.from_df(df)`` / ``con.from_df(df)``: the relation noted as the frame's rows
    (:func:`.python_frames.from_frame`), nothing else."""
    @functools.wraps(original)
    def from_df(*args: Any, **kwargs: Any) -> Any:
        rel = original(*args, **kwargs)
        data = args[1 if method else 0] if len(args) > (1 if method else 0) else kwargs.get("df")
        if data is not None:
            with contextlib.suppress(Exception):
                python_frames.from_frame(rel, data)
        return rel

    return from_df


def _relation_step(original: Callable, note: Callable[[Any, Any, tuple, dict], None]) -> Callable:
    """``rel.filter(...)`` / ``rel.project(...)`` / ``rel.set_alias(...)``: called as from the
    user's frame (a condition may name a Python frame, ``IN (SELECT d FROM keep)``, which DuckDB
    looks up where it is called: red team of issue 22), then noted (:mod:`.python_frames`: a
    relation of a frame's rows stays one)."""
    @functools.wraps(original)
    def step(rel: Any, *args: Any, **kwargs: Any) -> Any:
        text = " ".join(a for a in (*args, *kwargs.values()) if isinstance(a, str))
        result = in_caller_frame(1, text)(original, rel, *args, **kwargs)
        with contextlib.suppress(Exception):
            note(result, rel, args, kwargs)
        return result

    return step


def _filtered(result: Any, rel: Any, args: tuple, kwargs: dict) -> None:
    python_frames.filtered(result, rel, args[0] if args else kwargs.get("filter_expr"))


def _same_rows(result: Any, rel: Any, args: tuple, kwargs: dict) -> None:
    if not kwargs:
        python_frames.same_rows(result, rel, args)


def in_caller_frame(depth: int, query: Any = None) -> Callable[..., Any]:
    """A runner that calls a function as if from the user's frame ``depth`` levels up.

    DuckDB finds Python objects named in a query (``FROM df``) in the calling frame; a
    wrapper's own frame would hide the user's variables, so the call is evaluated with the
    caller's globals and locals. Of the locals only those the query names are kept (the
    evidence and linking queries name no others): the runner lives as long as the table's
    evidence (linking counts a large table's rows with it at display), and a copy of every
    local, in a notebook every variable of the session, kept frames the user had deleted alive.
    """
    frame = sys._getframe(depth + 1)
    glb = frame.f_globals
    if isinstance(query, str):
        named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
        loc = {k: v for k, v in frame.f_locals.items() if k in named}
    else:
        loc = dict(frame.f_locals)

    def run(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        ns = dict(loc)
        ns.update(__sdc_call__=fn, __sdc_args__=args, __sdc_kwargs__=kwargs)
        return eval(_CALL, glb, ns)

    def lookup(name: str) -> Any:
        """The Python object a query's ``FROM name`` would read (a replacement scan), or None."""
        return loc[name] if name in loc else glb.get(name)

    run.lookup = lookup  # type: ignore[attr-defined]
    return run


class DuckDBCapture:
    """Installs and removes the DuckDB wrappers; records evidence into a Registry."""

    def __init__(self, registry: Any, rules: Callable[[], Any]) -> None:
        self.registry = registry
        self.rules = rules
        self._saved: list[tuple[Any, str, Any]] = []
        self._counted = CountedBases(count_bases=True)  # (large bases, and those counted on a connection)
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
        for name, note in (("register", python_frames.registered), ("unregister", python_frames.unregistered)):
            if name in conn.__dict__:
                self._patch(conn, name, _registering(t(conn.__dict__[name]), note))
        for owner, name in ((duckdb, "from_df"), (duckdb, "df"), (conn, "from_df")):
            original = getattr(owner, name, None) if owner is duckdb else owner.__dict__.get(name)
            if original is not None:
                self._patch(owner, name, _from_frame(t(original), method=owner is conn))
        for name, note in (("filter", _filtered), ("project", _same_rows), ("select", _same_rows),
                           ("set_alias", _same_rows)):
            if name in rel.__dict__:
                self._patch(rel, name, _relation_step(t(rel.__dict__[name]), note))
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
            import duckdb

            run = in_caller_frame(1, query)
            rel = run(original, query, *args, **kwargs)
            con = kwargs.get("connection") or duckdb.default_connection()
            _statement_ran(con, query, run.lookup)
            self._capture(rel, query, lambda q: run(original, q, *args, **kwargs),
                          python_frames.resolver(con, run.lookup))
            return rel

        return sql

    def _connection_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def sql(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            run = in_caller_frame(1, query)
            rel = run(original, con, query, *args, **kwargs)
            _statement_ran(con, query, run.lookup)
            self._capture(rel, query, lambda q: run(original, con, q, *args, **kwargs),
                          python_frames.resolver(con, run.lookup))
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
                group_by = f"GROUP BY {groups.strip() or 'ALL'}"
                frame = python_frames.relation_of(src)
                if frame is not None:
                    # a relation of a Python frame (``from_df``, then filters): the evidence reads the
                    # frame's relation itself, with the filters as WHERE, so that its rows come with
                    # their positions in the frame (python_frames.from_frame)
                    root, rows, conditions = frame
                    # (each on lines of its own: a condition may end in a ``--`` comment)
                    where = " WHERE (" + "\n) AND (".join(conditions) + "\n)" if conditions else ""
                    self._capture(rel, f"SELECT {aggr} FROM {RELATION_VIEW}{where} {group_by}",
                                  lambda q: root.query(RELATION_VIEW, q),
                                  lambda name: rows if name.lower() == RELATION_VIEW else None)
                else:
                    self._capture(rel, f"SELECT {aggr} FROM {RELATION_VIEW} {group_by}",
                                  lambda q: src.query(RELATION_VIEW, q))
            elif rel is not None:
                _remember(_unplanned, rel, True)  # expressions objects: checked as unverified
            return rel

        return aggregate

    def _execute_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def execute(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            run = in_caller_frame(1, query)
            return self._executing(con, query, run, args, kwargs,
                                   lambda: run(original, con, query, *args, **kwargs))

        return execute

    def _module_execute_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
            import duckdb

            run = in_caller_frame(1, query)
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
        _statement_ran(con, query, getattr(run, "lookup", None))
        if isinstance(pending, str) and out is not None:
            _remember(_executed_unplanned, out, pending)
        elif pending is not None and out is not None:
            _remember(_executed, out, pending)
        elif out is not None and isinstance(query, str) and aggregates(query):
            shape = withheld_reason(query) or untraced_shape(query)
            if shape is not None:
                _remember(_executed_unplanned, out, shape)
        return out

    def _prepare_execute(self, con: Any, query: Any, run: Callable, args: tuple, kwargs: dict
                         ) -> Pending | str | None:
        """Bind the evidence of an ``execute()`` before the statement runs (binding later
        would end the user's pending result). A string: why its result must be withheld."""
        if not isinstance(query, str) or not aggregates(query) or not single_query(query):
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
            pending = self._prepare(rel, query, bind, python_frames.resolver(con, getattr(run, "lookup", None)))
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
                    mark_unplanned(result, unplanned)  # checked as unverified, never as row-level data
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
            _mark_planned(result, pending)
            if pending.form is not None and result is not pending.form:
                contract.carry_origin([pending.form], result, self.registry)  # (found as its table)
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
                    mark_unplanned(result, unplanned)  # checked as unverified, never as row-level data
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
    def _capture(self, rel: Any, query: Any, run: Callable[[str], Any],
                 lookup: Callable[[str], python_frames.FrameRows | None] | None = None) -> None:
        if rel is None or not isinstance(query, str) or not aggregates(query):
            return
        if mixed_levels_safe(query):
            _remember(_unplanned, rel, MIXED_LEVELS)
            return
        failed = False
        try:
            pending = self._prepare(rel, query, run, lookup)
        except Exception as exc:  # never break user code; its display is checked as unverified
            self.registry.failures.append(f"duckdb: {type(exc).__name__}: {exc}")
            pending, failed = None, True
        if pending is None:
            reason = withheld_reason(query)
            if failed:
                # fail closed: an unverified check could pass a wrapped small count (7 = 2·3 + 1)
                reason = reason or PLANNING_FAILED
            shape = reason or untraced_shape(query)
            if shape is not None:
                _remember(_unplanned, rel, shape)
            return
        shape = untraced_shape(query)
        if isinstance(shape, Untraced):
            pending.computed, pending.labels = shape.columns(list(rel.columns)), shape.labels(list(rel.columns))
        else:
            pending.computed = ()
        _remember(_pending, rel, pending)

    def _prepare(self, rel: Any, query: str, run: Callable[[str], Any],
                 lookup: Callable[[str], python_frames.FrameRows | None] | None = None) -> Pending | None:
        """Bind the evidence queries of a captured query (see :func:`.evidence.prepare`)."""
        return prepare(self.rules(), rel, query, run, lookup)

    def materialise(self, pending: Pending, rel: Any) -> pd.DataFrame | None:
        """Run the evidence once, register it, and return the checked pandas form."""
        with pending.lock:
            if pending.registered:
                if pending.withheld:
                    raise contract.Withheld(pending.withheld)
                return pending.form
            pending.registered = True
            recorder = Recorder(self.registry, self.rules, self._counted)
            p = pending.plan
            if p.pivot is not None:
                user = self._user_df(rel, pending)
                facts = pending.facts.df() if pending.facts is not None else pending.combined.df()
                pending.form = recorder.register_pivot(pending, user, facts)
                return pending.form
            if pending.facts is None:
                facts = user = pending.combined.df()  # one run: the user's columns and the facts
                pending.full = facts  # answers the first pandas fetch (then dropped)
            else:
                facts = pending.facts.df()
                user = pending.combined.df() if pending.combined is not None else self._user_df(rel, pending)
            if p.having and having_reads_unshown(p.select):
                pending.withheld = HAVING_UNSHOWN
                raise contract.Withheld(HAVING_UNSHOWN)
            if p.grouping and p.having:
                # its totals count the groups HAVING drops: total − shown groups = a dropped
                # (small) group.  Withheld rather than shown (red team: C = 73 − 40 − 30)
                pending.withheld = HAVING_WITH_TOTALS
                raise contract.Withheld(HAVING_WITH_TOTALS)
            if p.grouping:
                pending.form = recorder.register_grouping(pending, user, facts)
            else:
                pending.form = recorder.register_plain(pending, user[pending.user_cols], facts)
            return pending.form

    def _user_df(self, rel: Any, pending: Pending) -> pd.DataFrame:
        """The user's own table, run by DuckDB (an execute()'s: its query bound as a relation)."""
        rel = rel if rel is not None else pending.user_rel
        if rel is None:
            raise ValueError("no relation to fetch")
        original = self._original("DuckDBPyRelation", "df")
        return original(rel) if original is not None else rel.df()


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
