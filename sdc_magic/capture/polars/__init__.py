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

This module is the public face: :class:`PolarsCapture`, its wrappers and when they record.
What an expression reveals is read in :mod:`.plan` (nothing runs there); the facts and the
linking rows polars computes over the data are in :mod:`.evidence`.
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...evidence import row_origins
from ...evidence import rows as row_limits
from ...evidence.in_engine import CountedBases
from .. import contract, read_back
from ..depth import depth as _depth
from ..entries import MAGNITUDE_EVIDENCE
from . import origins
from . import sql as polars_sql
from .derived import (
    DERIVING_METHODS,
    filter_pins,
    frames_in,
    is_aggregate_frame,
    mark_derived,
    one_sided_bounds,
    readable_filter,
    window_columns,
    withhold_describe,
)
from .evidence import (
    fact_exprs,
    facts_from_result,
    group_facts,
    grouped,
    indicator_levels,
    inner_cell_values,
    linking_rows,
    set_indicators,
    settle_runner_up,
    streams_lazy_queries,
)
from .lineage import IN_PLACE, forget, in_engine, row_positions, written_step
from .plan import (
    Plan,
    aggregate_select,
    expression_plans,
    expression_stat,
    keyless,
    plan_expression,
    with_derived,
)


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
        #: id(lazy agg result) -> (weakref, (its LazyGroupBy, the unpatched agg)): a collect() of it
        #: runs that aggregation once with the facts folded in (see :meth:`_folded`)
        self._lazy_aggs: dict[int, tuple[Any, Any]] = {}
        self._recipes: dict[int, tuple[Any, Any]] = {}  # id(captured result) -> (weakref, _Recipe)
        self._counted = CountedBases()  # (bases counted in polars: their smaller tables are too)
        self._sql_shapes: dict[int, tuple[Any, Any]] = {}  # id(lazy SQL result) -> (weakref, (shape, query, frames))
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
        for name in DERIVING_METHODS:
            if name in pl.DataFrame.__dict__:
                self._patch(pl.DataFrame, name, functools.partial(self._deriving, name=name))
        self._patch(pl, "concat", self._concat)
        for name in origins.SCANS:
            if hasattr(pl, name):
                self._patch(pl, name, functools.partial(self._scan, name=name))
        for name in [n for n in read_back.POLARS_READERS if n in vars(pl)]:  # (files this session wrote)
            self._patch(pl, name, read_back.reader_wrapper)
        self._patch(pl, "sql", self._sql)
        self._patch(pl, "from_pandas", origins.from_pandas_wrapper)
        self._patch(pl.DataFrame, "__init__", origins.frame_init_wrapper)
        for name in origins.COPIES:
            self._patch(pl.DataFrame, name, functools.partial(origins.copy_wrapper, registry=self.registry))
        for name in ("__getitem__", "get_column", "to_series"):
            self._patch(pl.DataFrame, name, origins.column_wrapper)
        for owner in (pl.SQLContext, pl.DataFrame, pl.LazyFrame):
            name = "execute" if owner is pl.SQLContext else "sql"
            if name in owner.__dict__:
                self._patch(owner, name, functools.partial(self._sql_method, name=name))
        self._patch(pl.DataFrame, "to_pandas", self._to_pandas)
        self._patch(pl.LazyFrame, "select", self._lazy_select)
        for name in ("filter", "with_columns", "rename", "drop"):
            self._patch(pl.LazyFrame, name, functools.partial(self._lazy_step, name=name))
        self._patch(pl.DataFrame, "lazy", functools.partial(self._lazy_step, name="lazy"))
        for name in IN_PLACE:
            if name in pl.DataFrame.__dict__:
                self._patch(pl.DataFrame, name, self._in_place)
        columns = pl.DataFrame.__dict__.get("columns")
        if isinstance(columns, property) and columns.fset is not None:  # ``df.columns = [...]`` renames in place
            def set_columns(df: Any, value: Any, fset: Callable = columns.fset) -> None:
                fset(df, value)
                forget(df)
            self._saved.append((pl.DataFrame, "columns", columns))
            pl.DataFrame.columns = property(columns.fget, set_columns, columns.fdel, columns.__doc__)
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
        self._lazy_aggs.clear()
        self._recipes.clear()
        self._sql_shapes.clear()
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
        (or the combined call failed), and the caller runs the ordinary path. Polars 2 streams a
        lazy query but runs an eager ``group_by`` in memory (10M rows, string keys: the user's sum
        0.36 s alone, 0.82 s with the facts beside it; the facts alone, lazily, 0.16 s): there the
        user's call runs as written and the facts in a lazy query of their own.
        """
        by = _flatten_by(gb.by)

        def run(exprs: list[Any]) -> Any:
            if not streams_lazy_queries() or getattr(gb, "predicates", None):
                # (``having``: the user's call filters its groups; the facts ride along, filtered alike)
                return original(gb, *aggs, *exprs, **named)
            return original(gb, *aggs, **named), grouped(gb.df.lazy(), by, gb.named_by, exprs).collect()
        return self._folded(gb.df, by, gb.named_by, aggs, named, run)

    def _folded(self, source: Any, by: list[Any], named_by: dict, aggs: tuple, named: dict,
                run: Callable[[list[Any]], Any]) -> Any:
        """The user's aggregation of ``source`` with the facts' expressions added (``run``), split
        into the user's result (returned) and the registered evidence; None when not applicable.

        Shared by eager ``group_by().agg()`` and a lazy one's ``collect()``: either way one
        aggregation computes what the user asked for and what the check needs (a lazy query
        collected, then aggregated again for the facts, read the data twice: 14.5× plain at 10M
        rows, issue 22).
        """
        try:
            rules = self.rules()
            if rules.unit is not None:
                return None
            planned, multi = expression_plans(aggs, named)
            if any(p.derived is not None or p.inner is not None for p in planned.values()):
                return None  # a derived variable or a wrapped aggregate: the ordinary path plans it
            out = {name: (p.var, p.stat) for name, p in planned.items()}
            schema = source.collect_schema() if hasattr(source, "collect_schema") else source.schema
            if multi is not None or not out or all(s in ("size", "count") for _, s in out.values()):
                return None
            variables = sorted({v for v, st in out.values() if v is not None and v in schema and st != "size"})
            magnitudes = {v for v, st in out.values() if v in variables and st in MAGNITUDE_EVIDENCE
                          and _numeric(schema[v])}
            levels = indicator_levels(source.lazy(), magnitudes)
            exprs = fact_exprs(variables, magnitudes, rules.top_k, levels, bounded=True)
        except Exception:
            return None
        _depth.value += 1
        try:
            full = run(exprs)
        except Exception:
            return None
        finally:
            _depth.value -= 1
        import polars as pl

        result, full = full if isinstance(full, tuple) else (None, full)  # (the user's result, the facts')
        if not isinstance(full, pl.DataFrame) or not isinstance(result, pl.DataFrame | None):
            return None
        _depth.value += 1  # our own selects below are not the user's
        try:
            if result is None:
                result = full.select([c for c in full.columns if not c.startswith(contract.PREFIX)])
        finally:
            _depth.value -= 1
        _depth.value += 1
        try:
            keys = [c for c in result.columns if c not in out]
            facts = full.select(keys + [c for c in full.columns if c.startswith(contract.PREFIX)]).to_pandas()
            settle_runner_up(facts, source.lazy(), by, named_by, keys, variables, rules)
            notes: list[str] = []
            ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, None)
            set_indicators(facts, ge, variables, levels)
            n_rows = int(facts[f"{contract.PREFIX}rows"].sum())
            large = n_rows > row_limits.IN_ENGINE_ROWS
            rows = self._counted.keep(in_engine(source, by, named_by, keys, out, ge, facts), large) \
                if isinstance(source, pl.DataFrame | pl.LazyFrame) and self._counted.worth_trying(large, True) else None
            if rows is None:  # (no row leaves polars above; below, or not written over a frame: its rows)
                rows = linking_rows(source.lazy(), by, named_by, keys, out, n_rows, positions=row_positions(source),
                                    notes=notes)

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
                    self._keep(self._lazy_aggs, result, (lgb, original))
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

    def _sql(self, original: Callable) -> Callable:
        """``pl.sql(query)``: marked by what the query's tree says (see :meth:`_mark_sql`)."""
        def sql(query: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(query, *args, **kwargs)
            self._mark_sql(query, result, polars_sql.caller_frames(query, 1) if not _depth.value else {})
            return result
        return sql

    def _sql_method(self, original: Callable, name: str) -> Callable:
        def method(obj: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(obj, query, *args, **kwargs)
            self._mark_sql(query, result, polars_sql.method_frames(obj, kwargs) if name == "sql" else {})
            return result
        return method

    def _mark_sql(self, query: Any, result: Any, frames: dict[str, Any]) -> None:
        """A polars SQL query with aggregates is never row-level data (issue 23.3): its result gets
        the evidence of the same query run again over the same ``frames`` (as polars calls, or in
        DuckDB) when that gives the same rows (:mod:`.sql`), else it is an untraced aggregate
        (counts checked, the rest withheld); rows with window columns withhold those, a shape that
        must not be shown is withheld; a lazy result is marked when it is collected."""
        if _depth.value or not isinstance(query, str):
            return
        try:
            from ..duckdb.plan import untraced_shape, withheld_reason

            shape = withheld_reason(query) or untraced_shape(query)
            if shape is None:
                return
            import polars as pl

            if isinstance(result, pl.LazyFrame):
                self._keep(self._sql_shapes, result, (shape, query, frames))
            elif isinstance(result, pl.DataFrame):
                polars_sql.mark_result(self, result, shape, query, frames, _withhold)
        except Exception as exc:  # the result has no mark: withheld (fail closed)
            self.registry.failures.append(f"polars sql: {type(exc).__name__}: {exc}")
            _withhold(result)

    def _collect(self, original: Callable) -> Callable:
        def collect(lf: Any, *args: Any, **kwargs: Any) -> Any:
            hit = self._lazy.get(id(lf))
            if hit is None or hit[0]() is not lf or _depth.value:
                result = original(lf, *args, **kwargs)
                kept = self._sql_shapes.get(id(lf))
                if kept is not None and kept[0]() is lf and not _depth.value:
                    polars_sql.mark_result(self, result, *kept[1], _withhold)  # (withholds on failure)
                return result
            source, by, named_by, aggs, named = hit[1][:5]
            call = hit[1][5] if len(hit[1]) > 5 else "group_by.agg"
            made = self._lazy_aggs.get(id(lf))
            if made is not None and made[0]() is lf and not args and not kwargs.get("background"):
                lgb, agg = made[1]
                folded = self._folded(source, by, named_by, aggs, named,
                                      lambda exprs: original(agg(lgb, *aggs, *exprs, **named), **kwargs))
                if folded is not None:
                    return folded
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
            if not _depth.value and is_aggregate_frame(obj, self._captured):
                result = self._guarded(lambda: original(obj, *args, **kwargs), lambda result: None)
                withhold_describe(result)
                return result
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
        positions = functools.partial(row_positions, frame)  # (asked only when its rows are read)
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
        derived = {p.var: p.derived for p in planned.values() if p.derived is not None and p.var is not None}
        self._register(call, lf, by, named_by, keys, resolved, measure_of, result, schema, inner=inner,
                       positions=positions, source=frame if isinstance(frame, pl.DataFrame | pl.LazyFrame) else None,
                       derived=derived)

    def _register(self, call: str, lf: Any, by: list[Any], named_by: dict, keys: list[str],
                  resolved: dict[str, tuple[str | None, str]], measure_of: Callable, result: Any,
                  schema: Any, to_shown: Callable[[Any], pd.DataFrame] | None = None,
                  key_casts: dict[str, Any] | None = None,
                  variables: list[str] | None = None, margin_label: str | None = None, link: bool = True,
                  inner: dict[str, Any] | None = None, labels: list[str] | None = None,
                  positions: Any = None, source: Any = None, derived: dict[str, Any] | None = None) -> Any:
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
        levels: dict[str, tuple[float, float]] = {}
        if unit is None and counts_only and (sizes or not resolved) and not key_casts and not inner:
            facts = facts_from_result(result, keys, resolved, variables, sizes)
        else:
            levels = indicator_levels(lf, magnitudes)
            facts = group_facts(lf, by, named_by, keys, variables, magnitudes, unit, rules.top_k, key_casts,
                                levels, rules=rules)
        ge = contract.group_evidence_from_facts(facts, keys, variables, rules.top_k, unit)
        set_indicators(facts, ge, variables, levels)
        rows = None
        n_rows = int(ge.rows.sum()) if ge.rows is not None else 0
        large = n_rows > row_limits.IN_ENGINE_ROWS
        if link and source is not None and self._counted.worth_trying(large, True):
            rows = self._counted.keep(in_engine(source, by, named_by, keys, resolved, ge, facts, derived, unit),
                                      large)  # no row leaves polars
        if link and rows is None:
            rows = linking_rows(lf, by, named_by, keys, resolved, n_rows, positions=positions, notes=notes)
        inner_frame = None
        if inner:
            inner_frame = grouped(lf, by, named_by, [e.alias(c) for c, e in inner.items()]).collect()
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
            wrapped = inner_cell_values(recipe.inner_frame, recipe.keys, result if base is None else base,
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
                        and keyless(aggregate_select(args, kwargs, df.schema), result.height):
                    self._record_group_by(df, [], {}, args, kwargs, result, "select")
            except Exception as exc:  # withheld at display (fail closed)
                self.registry.failures.append(f"polars {name}: {type(exc).__name__}: {exc}")
                _withhold(result)
            finally:
                _depth.value -= 1
            windows = window_columns(args, kwargs) if name == "select" else ()
            self._mark_derived(frames_in(df, args, kwargs), result, name, windows)
            if name == "rename" and args and isinstance(args[0], dict) and contract.one_sided(df):
                # a one-sided bound follows its figure under its new name (filter(len < 10).rename(...))
                contract.mark_one_sided(result, [(args[0].get(c, c), op, b) for c, op, b in contract.one_sided(df)])
            _remember_rows(result, df, name, args, kwargs)
            return result
        return derived

    def same_cells(self, captured: Any, result: Any) -> bool:
        """Give ``result`` the evidence of the captured frame ``captured`` when it holds the same
        cells (the same rows in any order, the same columns: polars SQL, :mod:`.sql`)."""
        hit = self._recipes.get(id(captured))
        if hit is None or hit[0]() is not captured or list(captured.columns) != list(result.columns):
            return False
        self._rearranged(hit[1], captured, result, "sort")
        return self._captured(result)

    def _captured(self, frame: Any) -> bool:
        hit = self._recipes.get(id(frame))
        return hit is not None and hit[0]() is frame

    def _deriving(self, original: Callable, name: str) -> Callable:
        """``with_columns``, ``join``, ``filter``, ... of an aggregate: an aggregate (see :mod:`.derived`)."""
        def deriving(df: Any, *args: Any, **kwargs: Any) -> Any:
            if _depth.value:
                return original(df, *args, **kwargs)
            _depth.value += 1
            try:
                result = original(df, *args, **kwargs)
            finally:
                _depth.value -= 1
            windows = window_columns(args, kwargs) if name in ("with_columns", "with_columns_seq") else ()
            self._mark_derived(frames_in(df, args, kwargs), result, name, windows)
            _remember_rows(result, df, name, args, kwargs)
            if name == "filter" and is_aggregate_frame(df, self._captured):
                try:
                    if filter_pins(df, args, kwargs) or not readable_filter(args, kwargs):
                        contract.mark_selected_by_values(result, "the groups shown were kept by a filter that bounds "
                                                                 "their figures from both sides (==, is_in, is_between)")
                    else:
                        contract.mark_selection_read(result)
                        contract.mark_one_sided(result, [*(contract.one_sided(result) or []),
                                                         *one_sided_bounds(df, args, kwargs)])
                except Exception as exc:  # withheld at display (fail closed)
                    self.registry.failures.append(f"polars filter: {type(exc).__name__}: {exc}")
                    _withhold(result)
            return result
        return deriving

    def _concat(self, original: Callable) -> Callable:
        import polars as pl

        def concat(items: Any, *args: Any, **kwargs: Any) -> Any:
            if _depth.value:
                return original(items, *args, **kwargs)
            items = list(items) if not isinstance(items, list | tuple) else items
            _depth.value += 1
            try:
                result = original(items, *args, **kwargs)
            finally:
                _depth.value -= 1
            frames = [f for f in items if isinstance(f, pl.DataFrame)]
            levels = {tuple(self._recipes[id(f)][1].keys) if self._captured(f) else None for f in frames}
            if any(self._captured(f) for f in frames) and len(levels) > 1:
                # groups and a total (or rows made apart) stacked: the total minus the groups
                # shown gives a left-out one away (red team: A 40, B 30, ALL 73)
                _withhold(result, MIXED_LEVELS_STACKED)
                return result
            self._mark_derived(list(items), result, "concat")
            return result
        return concat

    def _to_pandas(self, original: Callable) -> Callable:
        """The pandas copy of a frame computed from aggregates carries its mark."""
        def to_pandas(df: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(df, *args, **kwargs)
            if _depth.value:
                return result
            if not isinstance(result, pd.DataFrame):
                return result
            columns = contract.untraced_columns(df)
            if columns is not None:
                contract.mark_untraced(result, columns)
            windows = contract.row_window_columns(df)
            if windows is not None:
                contract.mark_row_windows(result, windows)
            selected = contract.selected_by_values(df)
            if selected is not None:
                contract.mark_selected_by_values(result, selected)
            if contract.selection_read(df):
                contract.mark_selection_read(result)
            contract.mark_one_sided(result, contract.one_sided(df) or [])
            contract.mark_origin(result, contract.entry_id_of(df, self.registry))  # (found as its table)
            labels = origins.row_positions(df)  # (rows from pandas go back under their labels)
            if isinstance(labels, pd.Index):
                with contextlib.suppress(Exception):
                    row_origins.rows_labelled(result, labels)
            return result
        return to_pandas

    def _mark_derived(self, inputs: list[Any], result: Any, name: str, windows: tuple[str, ...] = ()) -> None:
        _depth.value += 1
        try:
            # rows chosen by their figures stay so through later steps (filter(len == 2 ...).sort(...))
            chosen = next((r for f in inputs if (r := contract.selected_by_values(f)) is not None), None)
            if chosen is not None and result is not None:
                contract.mark_selected_by_values(result, chosen)
            if name in ("sort", "head", "tail", "slice", "filter", "select", "with_columns", "drop", "unique",
                        "with_row_index", "cast") and inputs and result is not None:
                # (a later filter's own bounds join those of the first: filter(len > 1).filter(len < 10))
                contract.mark_one_sided(result, [*(contract.one_sided(inputs[0]) or []),
                                                 *(contract.one_sided(result) or [])])
            mark_derived(inputs, result, self._captured, windows)
            contract.carry_origin(inputs, result, self.registry)  # (found as its table: sorted, rounded)
        except Exception as exc:  # withheld at display (fail closed)
            self.registry.failures.append(f"polars {name}: {type(exc).__name__}: {exc}")
            _withhold(result)
        finally:
            _depth.value -= 1

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
            if not _depth.value:
                _remember_lazy(result, lf, "select", exprs, named)
            hit = self._lazy.get(id(lf))
            captured = hit is not None and hit[0]() is lf  # an aggregate already: not a population of rows
            if not _depth.value and not captured and aggregate_select(exprs, named, lf.collect_schema):
                self._keep(self._lazy, result, (lf, [], {}, exprs, named, "select"))
            return result
        return select

    def _lazy_step(self, original: Callable, name: str) -> Callable:
        """A lazy step the user takes (``df.lazy()``, ``lf.filter(...)``, ...): remembered for
        linking inside polars (:mod:`.lineage`), nothing else."""
        def lazy_step(obj: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(obj, *args, **kwargs)
            if not _depth.value:
                _remember_lazy(result, obj, name, args, kwargs)
            return result
        return lazy_step

    def _scan(self, original: Callable, name: str) -> Callable:
        """``pl.scan_parquet(...)`` and the like: the lazy frame remembered as a root for linking
        inside polars (:mod:`.lineage`: identified by its files), nothing else."""
        def scan(source: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(source, *args, **kwargs)
            if not _depth.value and not args:
                with contextlib.suppress(Exception):
                    origins.remember_scan(result, name, source, kwargs)
            read_back.remember(result, source)
            return result
        return scan

    def _in_place(self, original: Callable) -> Callable:
        """A DataFrame method that may change the frame in place: its content identity is
        forgotten (:func:`.lineage.forget`), worked out again when a table of it is linked."""
        def in_place(df: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(df, *args, **kwargs)
            finally:
                forget(df)
                contract.changed_in_place(df)  # (a remembered form, e.g. of polars SQL, is stale)
        return in_place

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
                       key_casts={on_col: pl.String}, labels=index,
                       source=df if isinstance(df, pl.DataFrame) else None)  # (counted in polars when large)

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
            from ..pandas import DESCRIBE_STATS, stat_name

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
        frame, stat = s.to_frame(name), "proportion" if kwargs.get("normalize") else "count"
        resolved = {c: (None, stat) for c in result.columns if c != name}
        parent = origins.frame_of(s)  # (a column of a frame: its rows are the frame's, labelled alike)
        entry = self._register("Series.value_counts", frame.lazy(), [name], {}, [name], resolved,
                               lambda m: (None, stat), result, frame.schema,
                               positions=origins.row_positions(parent) if parent is not None else None)
        if entry is not None and kwargs.get("normalize"):
            entry.normalized = ()  # (shares of the whole: they sum to 1, and tell its total)


#: pl.concat of aggregates of different grouping levels (groups, and a total row made apart)
MIXED_LEVELS_STACKED = ("this frame stacks aggregates of different levels (groups, and a total made apart): the "
                        "total minus the groups shown gives a left-out group away, and it cannot be checked as one "
                        "table. Show the groups and the total as separate tables (each is checked and linked).")
CAPTURE_FAILED = "sdc_magic could not check this polars aggregation: not shown (%sdc debug has the details)"


def _withhold(result: Any, reason: str = CAPTURE_FAILED) -> None:
    """Withhold the display of a polars result (its pandas form is marked, so the display shows
    a placeholder with ``reason``, which quotes no data)."""
    try:
        import polars as pl

        if not isinstance(result, pl.DataFrame):
            return
        form = result.to_pandas()
        contract.mark_withheld(form, reason)
        contract.remember(result, form)
    except Exception:  # nothing more to do: the display then checks it as unverified
        pass


#: DataFrame / LazyFrame methods computing one statistic per column over all rows (one group)
FRAME_STATISTICS = ("sum", "mean", "median", "max", "min", "std", "var")


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


def _numeric(dtype: Any) -> bool:
    try:
        return bool(dtype.is_numeric()) or str(dtype) == "Boolean"
    except Exception:
        return False


#: what other modules and the docs name here (the rest is reached in .plan / .evidence)
__all__ = ["FRAME_STATISTICS", "Plan", "PolarsCapture", "plan_expression", "set_indicators"]


def _remember_rows(result: Any, source: Any, name: str, args: tuple, kwargs: dict) -> None:
    """Where ``result``'s rows were in ``source`` (see :mod:`.origins`); never fails the user's call."""
    if name in origins.SAME_ROWS or name in origins.SUBSETS:
        with contextlib.suppress(Exception):
            origins.remember(result, source, name, args, kwargs, written_step(name, args, kwargs))


def _remember_lazy(result: Any, source: Any, name: str, args: tuple, kwargs: dict) -> None:
    """A lazy step (see :func:`.origins.remember_lazy`); never fails the user's call."""
    with contextlib.suppress(Exception):
        origins.remember_lazy(result, source, name, args, kwargs,
                              written_step(name, args, kwargs) if name != "lazy" else None)
