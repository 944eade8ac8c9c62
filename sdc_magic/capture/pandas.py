"""Evidence capture: reversible wrappers around pandas' aggregation entry points.

While the extension is loaded, each wrapped call returns exactly what pandas returns
(the same object, untouched) and, on the side, records per output cell the evidence
the rules need (see :mod:`sdc_magic.evidence.facts`). A failure to record never breaks the
user's code: the call's result is returned and the table will simply be shown as
unverified (which is never exportable).

Nested calls (``crosstab`` calls ``pivot_table`` which calls ``groupby``) are recorded
once, at the outermost call, through a thread-local depth counter.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.typing import DataFrameGroupBy, SeriesGroupBy

from ..config import Rules
from ..evidence import row_origins
from ..evidence.facts import GroupEvidence, VarEvidence, group_evidence, merged_sums
from ..evidence.flatten import Flat, flatten
from ..evidence.registry import Registry
from . import read_back
from .column_rows import frame_of_rows, largest_frame_holding, unit_of_rows
from .contract import (
    mark_aggregate,
    mark_selected_by_values,
    mark_withheld,
    selected_by_values,
    withheld_reason,
)
from .custom_stats import probed_measures
from .depth import depth as _depth
from .derivations import Derivations
from .entries import MAGNITUDE_EVIDENCE, Source, build_entry
from .group_sizes import could_be_sizes, size_labels
from .groupings import grouping_of, ids_and_index
from .size_filters import SizeFilters

_PANDAS = (pd.DataFrame, pd.Series)
GROUPBY_METHODS = (
    "size", "count", "sum", "mean", "median", "min", "max", "std", "var", "sem", "first", "last",
    "quantile", "agg", "aggregate", "describe", "value_counts", "nunique", "apply", "unique",
)
LISTS_PER_GROUP = ("lists of each group's values (agg(list), unique()) show individual people's values: not shown, "
                   "nor anything computed from them. Use nunique(), value_counts(), or a checked statistic per group")
EXTREMES_PER_GROUP = ("nlargest / nsmallest per group shows the most extreme people's values beside their row "
                      "labels (who they are): not shown. Use max() or min() per group (checked by their rule), or "
                      "quantiles of groups large enough")

DESCRIBE_STATS = {
    "count": "count", "mean": "mean", "std": "std", "min": "min", "max": "max", "50%": "median",
    "unique": "nunique", "top": "mode", "freq": "count", "first": "first", "last": "last",
}
NUMPY_NAMES = {"sum": "sum", "mean": "mean", "median": "median", "min": "min", "max": "max", "std": "std",
               "var": "var", "amin": "min", "amax": "max", "nansum": "sum", "nanmean": "mean", "len": "size",
               "count_nonzero": "count", "nanmedian": "median", "nanstd": "std", "nanvar": "var",
               "nanmin": "min", "nanmax": "max", "size": "size", "count": "count", "nunique": "nunique"}


#: statistics whose cells get magnitude evidence (totals, largest contributions per unit):
#: sums and means for the dominance and p% rules, and spread statistics because a standard
#: deviation next to a count and a mean gives a dominant value back (issue: std of 28,927
#: with n = 191 recovers a 400,000 contribution within 0.05 %)
#: GroupBy calls on a captured count table that add its cells up (re-aggregation)
REAGGREGATIONS = frozenset({"sum", "agg", "aggregate"})
#: statistics of an indicator (0/1) variable that are counts in disguise


def quantile_stat(q: float) -> str:
    """The statistic a quantile level is: q = 0 is the minimum and q = 1 the maximum (one
    unit's own value); any other level is ``quantile@q`` (see rules.position_rule)."""
    if q <= 0.0:
        return "min"
    if q >= 1.0:
        return "max"
    if q == 0.5:
        return "median"
    return f"quantile@{q:g}"


def _cells_of_rows(entry: Any, positions: np.ndarray) -> np.ndarray | None:
    """Per row of a re-aggregated table (``positions``: its cells' positions in ``entry``, rows ×
    columns), the position of a cell of the same group of the entry's rows; None when its columns
    are cells of different groups (a crosstab's columns are groups of their own: not linked)."""
    first = positions[:, 0]
    if positions.shape[1] == 1:
        return first
    keys = [str(k) for k in (getattr(getattr(entry, "source", None), "keys", None) or [])]
    if (positions < 0).any() or not keys or not all(k in entry.flat.dims for k in keys):
        return None
    for k in keys:
        labels = np.asarray(entry.flat.dims[k], dtype=object)
        if any(not np.array_equal(labels[positions[:, j]], labels[first]) for j in range(1, positions.shape[1])):
            return None
    return first


def stat_name(func: Any) -> str:
    """The statistic an aggregation function computes ("custom" when we cannot tell)."""
    if isinstance(func, str):
        name = func
    else:
        name = getattr(func, "__name__", "") or ""
    name = NUMPY_NAMES.get(name, name)
    if name.endswith("%"):
        try:
            return quantile_stat(float(name[:-1]) / 100.0)
        except ValueError:
            return "quantile"
    return name if name else "custom"


def _lists_only(result: pd.DataFrame | pd.Series) -> bool:
    """Whether every column of an aggregation's result holds lists, arrays or sets of values."""
    dtypes = [result.dtype] if isinstance(result, pd.Series) else list(result.dtypes)
    if not result.size or not all(d == np.dtype(object) for d in dtypes):
        return False  # (a wide table of numbers is answered by its dtypes alone)
    columns = [result] if isinstance(result, pd.Series) else [result.iloc[:, j] for j in range(result.shape[1])]
    listy = (list, tuple, set, frozenset, np.ndarray, pd.api.extensions.ExtensionArray)
    return all(c.dtype == object and all(isinstance(v, listy) for v in c.iloc[:8]) for c in columns)


#: columns of a frame without the unit column compared with the user's frames (``_unit_for``)
MAX_KEYS_COMPARED = 16


class Capture:
    """Installs and removes the wrappers; records evidence into a :class:`Registry`."""

    def __init__(self, registry: Registry, rules: Callable[[], Rules],
                 frame_finder: Callable[[pd.Index, str], pd.DataFrame | None] | None = None) -> None:
        self.registry = registry
        self.rules = rules
        self.frame_finder = frame_finder
        self._saved: list[tuple[object, str, bool, Any]] = []
        self._parents: dict[int, tuple[Any, pd.DataFrame]] = {}
        self.installed = False

    # ------------------------------------------------------------ install / remove
    def install(self) -> None:
        if self.installed:
            return
        read_back.note_start()  # (files modified from now on were written during the session)
        read_back.forget()  # (frames a session read back are none of the next one's)
        for cls in (DataFrameGroupBy, SeriesGroupBy):
            for name in GROUPBY_METHODS:
                if hasattr(cls, name):
                    self._patch(cls, name, self._groupby_wrapper(cls, name))
        self._patch(DataFrameGroupBy, "__getitem__", self._getitem_wrapper(DataFrameGroupBy.__getitem__))
        for name in ("nlargest", "nsmallest"):
            self._patch(SeriesGroupBy, name, self._extremes_wrapper(getattr(SeriesGroupBy, name)))
        self._patch(pd.Series, "value_counts", self._method_wrapper(pd.Series.value_counts, self._series_value_counts))
        self._patch(pd.DataFrame, "value_counts",
                    self._method_wrapper(pd.DataFrame.value_counts, self._frame_value_counts))
        self._patch(pd.DataFrame, "describe", self._method_wrapper(pd.DataFrame.describe, self._describe))
        self._patch(pd.Series, "describe", self._method_wrapper(pd.Series.describe, self._describe))
        self._patch(pd.DataFrame, "pivot_table", self._method_wrapper(pd.DataFrame.pivot_table, self._pivot_table))
        self._patch(pd, "pivot_table", self._function_wrapper(pd.pivot_table, self._pivot_function))
        self._patch(pd, "crosstab", self._function_wrapper(pd.crosstab, self._crosstab))
        self._patch(pd, "cut", self._function_wrapper(pd.cut, self._data_edges, aggregate=False))
        self._patch(pd, "qcut", self._function_wrapper(pd.qcut, self._data_edges, aggregate=False))
        Derivations(self.registry, self._patch).install()
        SizeFilters(self.registry.failures, self._patch).install()
        for name in read_back.PANDAS_READERS:
            if callable(getattr(pd, name, None)):
                self._patch(pd, name, read_back.reader_wrapper(getattr(pd, name)))
        self.installed = True

    def uninstall(self) -> None:
        for owner, name, had_own, original in reversed(self._saved):
            if had_own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._saved.clear()
        self._parents.clear()
        self.installed = False

    def _patch(self, owner: object, name: str, wrapper: Callable) -> None:
        own = owner.__dict__ if isinstance(owner, type) else vars(owner)
        had_own = name in own
        original = own.get(name)
        self._saved.append((owner, name, had_own, original))
        setattr(owner, name, wrapper)

    # ------------------------------------------------------------ wrappers
    def _run(self, call: Callable[[], Any], record: Callable[[Any], None], aggregate: bool = True) -> Any:
        if _depth.value:
            return call()
        _depth.value += 1
        _depth.groupings = []
        try:
            result = call()
        finally:
            _depth.value -= 1
        _depth.value += 1
        try:
            record(result)
        except Exception as exc:  # never break user code; the table will show as unverified
            self.registry.failures.append(f"{type(exc).__name__}: {exc}")
        finally:
            _depth.value -= 1
        if aggregate:
            self._mark_unrecorded(result)
        return result

    def _mark_unrecorded(self, result: Any) -> None:
        """An aggregation's result without evidence is still an aggregation, never row-level data.

        Why (issue 23.3): a date, text or list cell (``agg(["min", "max", "count"])`` of dates,
        ``agg(list)``, ``", ".join``) made such a result look like microdata, which is drawn
        verbatim: counts of 2 and one person's dates on screen.  Marked, it is checked as an
        unverified table: whole numbers as counts, every other value withheld.
        """
        if not isinstance(result, pd.DataFrame | pd.Series):
            return
        try:
            if _lists_only(result):
                # (red team, stop 51: unique() per group, then .explode() or .apply(min), drew incomes)
                mark_withheld(result, LISTS_PER_GROUP)
            elif withheld_reason(result) is None:  # (evidence or not: it may fail to match as a table)
                mark_aggregate(result)
        except Exception as exc:  # never break user code
            self.registry.failures.append(f"{type(exc).__name__}: {exc}")

    def _groupby_wrapper(self, cls: type, name: str) -> Callable:
        original = getattr(cls, name)

        @functools.wraps(original)
        def wrapper(gb: Any, *args: Any, **kwargs: Any) -> Any:
            if _depth.value:
                # nested (e.g. inside pivot_table): remember the grouping so the outer
                # recorder can reuse pandas' factorisation instead of grouping again
                result = original(gb, *args, **kwargs)
                if _depth.groupings is not None and len(_depth.groupings) < 16:
                    _depth.groupings.append(gb)
                return result
            return self._run(lambda: original(gb, *args, **kwargs),
                             lambda result: self._groupby(gb, name, args, kwargs, result))

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def _extremes_wrapper(self, original: Callable) -> Callable:
        """``groupby(...).x.nlargest(k)`` / ``nsmallest(k)``: the k most extreme people per group,
        their values beside their row labels: withheld (red team: the oldest woman's and man's
        ages, 102 and 101, at 'review')."""
        @functools.wraps(original)
        def wrapper(gb: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(gb, *args, **kwargs)
            if not _depth.value and isinstance(result, pd.Series):
                mark_withheld(result, EXTREMES_PER_GROUP)
            return result

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def _getitem_wrapper(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def wrapper(gb: Any, key: Any) -> Any:
            child = original(gb, key)
            if isinstance(gb.obj, pd.DataFrame):
                # weakly: a GroupBy caches its group ids (8 MB per 1M rows), so holding the
                # children strongly grew memory by that much per call (issue 12, item 3)
                if len(self._parents) > 1024:
                    self._parents.clear()
                slot = id(child)

                def forget(ref: Any, slot: int = slot) -> None:
                    if self._parents.get(slot, (None,))[0] is ref:
                        del self._parents[slot]

                self._parents[slot] = (weakref.ref(child, forget), gb.obj)
            return child

        return wrapper

    def _method_wrapper(self, original: Callable, recorder: Callable) -> Callable:
        @functools.wraps(original)
        def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
            return self._run(lambda: original(obj, *args, **kwargs),
                             lambda result: recorder(obj, args, kwargs, result))

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def _data_edges(self, args: tuple, kwargs: dict, result: Any) -> None:
        _record_data_edges(args, kwargs, result, self.rules().threshold)

    def _function_wrapper(self, original: Callable, recorder: Callable, aggregate: bool = True) -> Callable:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self._run(lambda: original(*args, **kwargs), lambda result: recorder(args, kwargs, result),
                             aggregate)

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    # ------------------------------------------------------------ helpers
    def _base_lookup(self, frame: Any) -> Any:
        """A deferred look-up of the user's frame ``frame``'s rows were selected from (see
        ``Source.base``), or None without a namespace to look in."""
        if self.frame_finder is None or not isinstance(frame, pd.DataFrame):
            return None
        return functools.partial(largest_frame_holding, frame.index, self.frame_finder)

    def _unit_for(self, frame: pd.DataFrame | None, index: pd.Index | None, notes: list[str],
                  keys: Iterable[Any] = ()) -> pd.Series | None:
        """The declared unit column at the table's rows: the frame's own, or that of the user's
        frame the key columns ``keys`` (or the frame's columns) fit, at the same labels or a
        filter of it (``column_rows.unit_of_rows``); else None and a note."""
        unit = self.rules().unit
        if unit is None:
            return None
        if frame is not None and unit in frame.columns:
            return frame[unit]
        if index is not None and self.frame_finder is not None:
            if frame is not None:
                keys = [frame[c] for c in frame.columns[~frame.columns.duplicated(keep=False)][:MAX_KEYS_COMPARED]]
            found_unit = unit_of_rows(keys, index, unit, self.frame_finder)
            if found_unit is not None:
                return found_unit
        notes.append(f"unit column {unit!r} not found for this table: rows counted as units")
        return None

    def _register(self, call: str, result: Any, ge: GroupEvidence, key_dims: list[str],
                  measure_of: Callable[[str], tuple[str | None, str]], notes: list[str],
                  margin_label: str | None = None,
                  margin_evidence: Callable[[tuple[str, ...]], GroupEvidence] | None = None,
                  source: Source | None = None, flat_obj: Any = None, flat: Flat | None = None,
                  normalized: tuple[str, ...] | None = None) -> None:
        obj = result if flat_obj is None else flat_obj
        if not isinstance(obj, pd.Series | pd.DataFrame):
            return
        rows_from = None if source is None else (source.frame if source.frame is not None else source.rows)
        chosen = selected_by_values(rows_from) if isinstance(rows_from, pd.DataFrame | pd.Series) else None
        if chosen is not None:  # (rows kept by their groups' sizes: capture/size_filters.py)
            mark_selected_by_values(result, chosen)
        flat = flatten(obj) if flat is None else flat
        entry = build_entry(self.registry.new_id(), call, flat, ge, key_dims, measure_of, notes,
                            self.rules().top_k, margin_label, margin_evidence)
        entry.unit = self.rules().unit if ge.unit_column else None
        entry.source = source
        entry.normalized = normalized
        entry.size_labels = self._size_labels(key_dims, source, entry.flat)
        self.registry.add(entry, result)

    def _size_labels(self, key_dims: list[str], source: Source | None, flat: Flat) -> dict[str, Any] | None:
        """Dimensions whose labels are group sizes (see :mod:`.group_sizes`); never raises."""
        if source is None:
            return None
        found: dict[str, Any] = {}
        for d in key_dims:
            try:
                frame = source.frame
                labels = flat.dims.get(d)
                if labels is None:
                    got = None
                elif isinstance(frame, pd.DataFrame) and d in frame.columns:
                    got = size_labels(frame[d], frame, self.rules().threshold, own_name=d, labels=labels)
                elif isinstance(source.rows, pd.DataFrame) and d in source.rows.columns and self.frame_finder \
                        and could_be_sizes(source.rows[d], self.rules().threshold, labels):
                    rows = self.frame_finder(source.rows.index, None)  # the user's frame these rows are of
                    got = size_labels(source.rows[d], rows, self.rules().threshold, labels=labels) \
                        if rows is not None else None
                else:
                    got = None
            except Exception as exc:  # never break user code; the table is checked as it is
                self.registry.failures.append(f"{type(exc).__name__}: {exc}")
                got = None
            if got is not None:
                found[d] = got
        return found or None

    def _evidence_by_columns(self, frame: pd.DataFrame, keys: list[str], dropna: bool,
                             variables: Iterable[str], unit: pd.Series | None,
                             magnitudes: set[Any] | None = None, reuse: bool = False,
                             within: tuple[np.ndarray, pd.Index] | None = None) -> GroupEvidence:
        """Facts per group of ``frame`` by ``keys``. ``within``: the grouping of the same rows by
        more keys (a margin's groups are unions of the table's: found from its groups, not by
        grouping the rows again)."""
        ids, index = grouping_of(frame, keys, dropna, reuse, within)
        values = {v: frame[v] for v in variables if v in frame.columns}
        return group_evidence(ids, index, values, unit, self.rules().top_k,
                              unit_name=self.rules().unit if unit is not None else None, magnitudes=magnitudes)

    # ------------------------------------------------------------ groupby
    def _groupby(self, gb: Any, name: str, args: tuple, kwargs: dict, result: Any) -> None:
        if not isinstance(result, pd.Series | pd.DataFrame):
            return
        notes: list[str] = []
        obj = gb.obj
        if name in REAGGREGATIONS and self._reaggregate(gb, name, args, kwargs, result):
            return
        parent = self._parents.get(id(gb))
        frame = obj if isinstance(obj, pd.DataFrame) else (parent[1] if parent and parent[0]() is gb else None)
        unit = self._unit_for(frame, obj.index, notes)
        ids, index = ids_and_index(gb)
        # keys without a name (groupby on an unnamed array) are still dimensions
        key_dims = [str(n) if n is not None else f"level_{i}" for i, n in enumerate(index.names)]
        if any(n is None for n in index.names):
            index = index.set_names(key_dims)
        flat_obj = result
        if not getattr(gb, "as_index", True) and isinstance(result, pd.DataFrame):
            present = [k for k in key_dims if k in result.columns]
            flat_obj = result.set_index(present) if present else result
        if name == "value_counts":
            self._groupby_value_counts(gb, frame, obj, unit, kwargs, result, notes, key_dims)
            return
        if name == "apply" and not _one_row_per_group(flat_obj, index):
            return  # rows per group (nlargest, head, a frame each): not a table of groups, unverified
        measure_of = probed_measures(_groupby_measures(name, args, kwargs, obj), name, args, kwargs, obj, ids, notes,
                                     stat_name)
        flat = flatten(flat_obj, index_names=key_dims if getattr(gb, "as_index", True) else None)
        needed = {measure_of(m) for m in set(flat.measure.tolist())}
        wanted = {var for var, stat in needed if var is not None and stat != "size"}
        magnitudes = {var for var, stat in needed if stat in MAGNITUDE_EVIDENCE}
        if isinstance(obj, pd.Series):
            # (an unnamed Series, ``(df.income * (df.district == "C")).groupby(df.sex).sum()``:
            # its measures name no variable, yet its values are the variable; without their
            # evidence its sums were checked as counts and showed C's one man's income, ``pass``)
            own = obj.name in wanted or (obj.name is None and any(var is None and stat != "size"
                                                                  for var, stat in needed))
            variables = {obj.name: obj} if own else {}
        else:
            variables = {c: obj[c] for c in _value_columns(obj, key_dims, gb) if c in wanted}
        ge = group_evidence(ids, index, variables, unit, self.rules().top_k,
                            unit_name=self.rules().unit if unit is not None else None, magnitudes=magnitudes)
        self._register(f"groupby.{name}", result, ge, key_dims, measure_of, notes,
                       source=Source(frame, key_dims, f"groupby.{name}", ids=ids, index=index,
                                     rows=None if frame is not None else obj, base=self._base_lookup(frame)),
                       flat_obj=flat_obj, flat=flat)

    def _reaggregate(self, gb: Any, name: str, args: tuple, kwargs: dict, result: Any) -> bool:
        """A sum over cells of a captured count table is a count table too; over cells of a
        captured table of sums, a table of sums.

        ``counts.groupby(level=0).sum()`` or ``table.groupby(region_of).sum()`` adds up
        published counts; each new cell counts the units of the cells it adds (an upper
        bound when a unit id spans cells, which only makes the check stricter). Sums of sums
        (``df.groupby(["person", "sex"]).income.sum().groupby(level="sex").sum()``) take their
        cells' facts together (:func:`.facts.merged_sums`; only when every row is a unit) and, like
        counts, the rows of the cells they add: before, the finer table was read as microdata, its
        cells taken for people (regions of two cells blocked as "2 contributors") and, for linking,
        for rows: one person's edited income a new person beside the old (red team rt49/11, both
        sums ``pass``). Returns False when the grouped object is not such a table (then it is
        treated as microdata as usual).
        """
        obj = gb.obj
        if name in ("agg", "aggregate"):
            spec = args[0] if args else kwargs.get("func")
            if stat_name(spec) != "sum":
                return False
        cells = obj.size if isinstance(obj, pd.DataFrame) else len(obj)
        if cells > 10 * max(self.registry.max_cells(), 1_000):
            return False  # microdata, not a captured table: flattening 1M rows cost seconds per call
        try:
            match = self.registry.match(flatten(obj), obj)
        except (ValueError, TypeError):
            return False
        if match is None:
            return False
        ev = match.entry.evidence
        found = match.positions >= 0
        stats = set(ev.stat[match.positions[found]].astype(str).tolist())
        counts = stats <= {"count", "size"}
        sums = stats == {"sum"} and self.rules().unit is None and found.all() and (
            ev.ones is None or np.isnan(np.asarray(ev.ones, dtype=float)[match.positions]).all())
        if not found.any() or not (counts or sums) or ev.is_margin[match.positions[found]].any():
            return False
        ids, index = ids_and_index(gb)
        key_dims = [str(n) if n is not None else f"level_{i}" for i, n in enumerate(index.names)]
        if any(n is None for n in index.names):
            index = index.set_names(key_dims)
        rows, cols = (len(obj), 1) if isinstance(obj, pd.Series) else obj.shape
        at = np.where(found, match.positions, 0).reshape(rows, cols)
        units = np.where(found.reshape(rows, cols), ev.units[at], 0.0)
        ngroups = len(index)
        valid = ids >= 0
        columns = [obj.name] if isinstance(obj, pd.Series) else list(obj.columns)
        variables = {}
        top_k = self.rules().top_k
        for j, col in enumerate(columns):
            if sums:
                variables[col] = merged_sums(ids, ev.units[at[:, j]], ev.total[at[:, j]], ev.total_abs[at[:, j]],
                                             ev.negative[at[:, j]], ev.top[at[:, j]], ngroups, top_k)
                continue
            per_group = np.bincount(ids[valid], weights=units[valid, j], minlength=ngroups)
            variables[col] = VarEvidence(units=per_group, total=np.full(ngroups, np.nan),
                                         total_abs=np.full(ngroups, np.nan), negative=np.zeros(ngroups, bool),
                                         top=np.full((ngroups, top_k), np.nan))
        if sums:  # (the rows of a group: each column's cells cover them; the fewest, to be strict)
            total_units = np.min([v.units for v in variables.values()], axis=0)
        else:
            total_units = np.bincount(ids[valid], weights=units[valid].sum(axis=1), minlength=ngroups)
        ge = GroupEvidence(index=index, units=total_units, variables=variables)
        by_name = {str(c): c for c in columns}
        single = columns[0] if len(columns) == 1 else None
        statistic = "sum" if sums else "count"
        what = "sums" if sums else "counts"

        def measure_of(measure: str) -> tuple[str | None, str]:
            parts = measure.split("|") if measure else []
            return next((by_name[p] for p in parts if p in by_name), single), statistic

        flat = flatten(result, index_names=key_dims)
        # linking: the rows behind each new cell are those of the cells it adds (a Series; a frame
        # whose columns are statistics of the same cells, by their first column's cells)
        row_cells = _cells_of_rows(match.entry, match.positions.reshape(rows, cols))
        source = None if row_cells is None else Source(None, key_dims, f"groupby.{name} of {what}", ids=ids,
                                                       index=index, rows=("reaggregate", match.entry, row_cells))
        self._register(f"groupby.{name} of {what}", result, ge, key_dims, measure_of,
                       list(match.entry.notes), source=source, flat=flat)
        return True

    def _groupby_value_counts(self, gb: Any, frame: pd.DataFrame | None, obj: Any, unit: pd.Series | None,
                              kwargs: dict, result: Any, notes: list[str], key_dims: list[str]) -> None:
        if not isinstance(result, pd.Series):
            return
        names = [n for n in result.index.names if n is not None]
        if isinstance(obj, pd.Series):
            tmp = pd.DataFrame({k: v for k, v in zip(key_dims, _key_arrays(gb), strict=False)})
            tmp[obj.name] = obj.to_numpy()
            tmp.index = obj.index
        else:
            tmp = pd.DataFrame({n: _column_or_key(obj, gb, n) for n in names}, index=obj.index)
        ge = self._evidence_by_columns(tmp, names, kwargs.get("dropna", True), [], unit)
        stat = "proportion" if kwargs.get("normalize") else "count"
        groups = tuple(str(n) for n in names[:len(key_dims)]) if kwargs.get("normalize") else None
        self._register("groupby.value_counts", result, ge, names, lambda m: (None, stat), notes,
                       source=Source(frame, names, "groupby.value_counts"), normalized=groups)

    # ------------------------------------------------------------ value_counts / describe
    def _series_value_counts(self, s: pd.Series, args: tuple, kwargs: dict, result: Any) -> None:
        # Series.value_counts(normalize, sort, ascending, bins, dropna)
        bins = kwargs.get("bins", args[3] if len(args) > 3 else None)
        notes: list[str] = []
        name = s.name if s.name is not None else "index"
        unit = self._unit_for(None, s.index, notes, [s])
        if bins is not None:
            # binned counts (issue 23): the groups are the intervals pandas cuts the values into
            # (its own cut, include_lowest as value_counts does), so the table has evidence and
            # its rows take part in linking (two binnings differing in one edge: 434 - 433 = 1)
            binned = pd.cut(s, bins, include_lowest=True)
            if not isinstance(bins, int | np.integer) or isinstance(bins, bool):
                _record_data_edges((s,), {"bins": bins}, None, self.rules().threshold) if _edge_is_data(s, bins) \
                    else None
            else:
                _record_data_edges((s,), {}, None, self.rules().threshold)  # k bins: the data's extremes
            # the values beside their bins: linking matches the rows of two binnings by them
            tmp = pd.DataFrame({name: binned.astype(object).to_numpy(), f"{name} (value)": s.to_numpy()},
                               index=s.index)
        else:
            tmp = pd.DataFrame({name: s.to_numpy()}, index=s.index)
        row_origins.same_rows(tmp, s)  # (a column of a re-indexed frame: its rows' earlier labels)
        dropna = kwargs.get("dropna", args[4] if len(args) > 4 else True)
        ge = self._evidence_by_columns(tmp, [name], dropna, [], unit)
        normalize = kwargs.get("normalize", args[0] if args else False)
        stat = "proportion" if normalize else "count"
        # a column of the user's frame: linking reads that frame's rows (its other columns place
        # them), not a frame of the one column (red team, stop 50: ``df.sex.value_counts()``, 36/36
        # with one sex missing, beside ``df.flag.value_counts()``, 42 + 31: one column each, their
        # rows matched nothing and 73 − 72 told the person whose sex is missing, both ``pass``)
        parent = None if bins is not None or self.frame_finder is None else frame_of_rows(s, self.frame_finder)
        self._register("Series.value_counts", result, ge, [name], lambda m: (None, stat), notes,
                       source=Source(None, [name], "Series.value_counts", rows=tmp if parent is None else parent),
                       flat=flatten(result, index_names=[name]) if isinstance(result, pd.Series) else None,
                       normalized=() if normalize else None)

    def _frame_value_counts(self, df: pd.DataFrame, args: tuple, kwargs: dict, result: Any) -> None:
        subset = kwargs.get("subset", args[0] if args else None)
        cols = list(df.columns) if subset is None else ([subset] if isinstance(subset, str) else list(subset))
        notes: list[str] = []
        unit = self._unit_for(df, df.index, notes)
        dropna = kwargs.get("dropna", True)
        ge = self._evidence_by_columns(df, cols, dropna, [], unit)
        stat = "proportion" if kwargs.get("normalize") else "count"
        self._register("DataFrame.value_counts", result, ge, [str(c) for c in cols], lambda m: (None, stat),
                       notes, source=Source(df, cols, "DataFrame.value_counts"),
                       normalized=() if kwargs.get("normalize") else None)

    def _describe(self, obj: Any, args: tuple, kwargs: dict, result: Any) -> None:
        if self.registry.by_object(obj) is not None or _is_captured_table(obj, self.registry):
            # a summary of a captured table's *cells*: its minimum, quartiles and mean over the
            # cells give hidden cells back (red team: quartiles 5.25 / 15 / 18.75 and a mean
            # of 73 / 6 leave 1 and 2). Withheld: describe the microdata instead.
            mark_withheld(result, "a summary (describe) of an aggregated table's cells reveals the cells its "
                                  "protection hides; describe the microdata instead")
            return
        if isinstance(result, pd.DataFrame | pd.Series) and {"top", "unique", "freq"} & set(map(str, result.index)):
            # include="all" / text columns: the most frequent value of a column of names is a
            # name, its frequency a small count, next to extremes that cannot be matched as a
            # table (issue 23.3): not drawn; the numeric summary and value_counts are
            mark_withheld(result, "describe() of text or mixed columns shows the most frequent value (a name can "
                                  "be one) and extremes; describe the numeric columns (include='number') and "
                                  "count the categories with value_counts()")
            return
        notes: list[str] = []
        frame = obj if isinstance(obj, pd.DataFrame) else obj.to_frame(name=obj.name if obj.name is not None else 0)
        unit = self._unit_for(frame, obj.index, notes)
        ge = self._evidence_by_columns(frame, [], True, list(frame.columns), unit)
        single_var = None if isinstance(obj, pd.DataFrame) else frame.columns[0]
        variables = {str(c): c for c in frame.columns}

        def measure_of(measure: str) -> tuple[str | None, str]:
            parts = measure.split("|") if measure else []
            var = next((variables[p] for p in parts if p in variables), single_var)
            stat = next((DESCRIBE_STATS.get(p, stat_name(p)) for p in parts if p not in variables), "custom")
            return var, stat

        ge_all = ge

        def all_cells(_: tuple[str, ...]) -> GroupEvidence:
            return ge_all

        self._register(f"{type(obj).__name__}.describe", result, ge, [], measure_of, notes,
                       margin_label="__describe__", margin_evidence=all_cells,
                       source=Source(frame, [], "describe"))

    # ------------------------------------------------------------ crosstab / pivot_table
    def _crosstab(self, args: tuple, kwargs: dict, result: Any) -> None:
        if not isinstance(result, pd.DataFrame):
            return
        index = kwargs.get("index", args[0] if args else None)
        columns = kwargs.get("columns", args[1] if len(args) > 1 else None)
        values = kwargs.get("values", args[2] if len(args) > 2 else None)
        aggfunc = kwargs.get("aggfunc")
        margins = kwargs.get("margins", False)
        margins_name = kwargs.get("margins_name", "All")
        dropna = kwargs.get("dropna", True)
        normalize = kwargs.get("normalize", False)
        row_arrays = _as_list(index)
        col_arrays = _as_list(columns)
        row_names = [n for n in result.index.names]
        col_names = [n for n in result.columns.names]
        if len(row_names) != len(row_arrays) or len(col_names) != len(col_arrays) or None in row_names + col_names:
            return
        names = [str(n) for n in row_names + col_names]
        if len(set(names)) != len(names):
            return
        data = {n: a for n, a in zip(names, row_arrays + col_arrays, strict=True)}
        if values is not None:
            data["__values__"] = values
        tmp = pd.DataFrame(data) if any(isinstance(a, pd.Series) for a in data.values()) else pd.DataFrame(
            {k: np.asarray(v) for k, v in data.items()})
        for a in data.values():  # (columns of a re-indexed frame: their rows' earlier labels)
            if isinstance(a, pd.Series):
                if all(v.index.equals(a.index) for v in data.values() if isinstance(v, pd.Series)):
                    row_origins.same_rows(tmp, a)
                else:
                    row_origins.follow(tmp, a)
                break
        chosen = next((r for a in data.values() if isinstance(a, pd.Series)
                       and (r := selected_by_values(a)) is not None), None)
        if chosen is not None:  # (columns of rows kept by their groups' sizes: capture/size_filters.py)
            mark_selected_by_values(tmp, chosen)
        notes: list[str] = []
        unit = self._unit_for(None, tmp.index, notes, [a for a in data.values() if isinstance(a, pd.Series)])
        variables = ["__values__"] if values is not None else []
        magnitudes = {"__values__"} if values is not None and stat_name(aggfunc) in MAGNITUDE_EVIDENCE else set()
        grouping = grouping_of(tmp, names, dropna, True)
        ge = self._evidence_by_columns(tmp, names, dropna, variables, unit, magnitudes, within=grouping)
        if values is None:
            stat = "proportion" if normalize is not False else "count"
            var = None
        else:
            stat = stat_name(aggfunc) if aggfunc is not None else "custom"
            var = "__values__"

        def margin_evidence(fixed: tuple[str, ...]) -> GroupEvidence:
            return self._evidence_by_columns(tmp, list(fixed), dropna, variables, unit, magnitudes, within=grouping)

        self._register("crosstab", result, ge, names, lambda m: (var, stat), notes,
                       margin_label=margins_name if margins else None, margin_evidence=margin_evidence,
                       source=Source(tmp, names, "crosstab", ids=grouping[0], index=grouping[1]),
                       normalized=_normalized_over(normalize, names[:len(row_names)], names[len(row_names):])
                       if values is None or stat in ("sum", "count", "size") else None)  # (shares of means: no total)

    def _pivot_function(self, args: tuple, kwargs: dict, result: Any) -> None:
        kwargs = dict(kwargs)
        if "data" in kwargs:
            data, rest = kwargs.pop("data"), args
        else:
            data, rest = (args[0] if args else None), args[1:]
        if isinstance(data, pd.DataFrame):
            self._pivot_table(data, rest, kwargs, result)

    def _pivot_table(self, df: pd.DataFrame, args: tuple, kwargs: dict, result: Any) -> None:
        if not isinstance(result, pd.DataFrame | pd.Series):
            return
        params = ["values", "index", "columns", "aggfunc", "fill_value", "margins", "dropna", "margins_name"]
        given = dict(zip(params, args, strict=False))
        given.update(kwargs)
        index = _as_names(given.get("index"))
        columns = _as_names(given.get("columns"))
        if index is None or columns is None:
            return  # Groupers / arrays as keys: shown as unverified
        keys = index + columns
        values = given.get("values")
        if values is None:
            value_cols = [c for c in df.columns if c not in keys]
        else:
            value_cols = [values] if not isinstance(values, list | tuple) else list(values)
        aggfunc = given.get("aggfunc", "mean")
        notes: list[str] = []
        unit = self._unit_for(df, df.index, notes)
        dropna = given.get("dropna", True)
        funcs = list(aggfunc.values()) if isinstance(aggfunc, dict) else (
            list(aggfunc) if isinstance(aggfunc, list | tuple) else [aggfunc])
        flat_funcs = [f for fs in funcs for f in (fs if isinstance(fs, list | tuple) else [fs])]
        magnitudes = set(value_cols) if any(stat_name(f) in MAGNITUDE_EVIDENCE for f in flat_funcs) else set()
        grouping = grouping_of(df, keys, dropna, True)
        ge = self._evidence_by_columns(df, keys, dropna, value_cols, unit, magnitudes, within=grouping)
        margins = given.get("margins", False)
        margins_name = given.get("margins_name", "All")
        measure_of = _pivot_measures(value_cols, aggfunc)

        def margin_evidence(fixed: tuple[str, ...]) -> GroupEvidence:
            frame, u = df, unit
            if dropna:  # pandas computes margins only from rows complete in keys and values
                keep = df[[c for c in keys + value_cols if c in df.columns]].notna().all(axis=1)
                if not keep.all():
                    frame, u = df[keep], (unit[keep] if unit is not None else None)
            return self._evidence_by_columns(frame, list(fixed), dropna, value_cols, u, magnitudes,
                                             within=grouping if frame is df else None)

        self._register("pivot_table", result, ge, [str(k) for k in keys], measure_of, notes,
                       margin_label=margins_name if margins else None, margin_evidence=margin_evidence,
                       source=Source(df, keys, "pivot_table", ids=grouping[0], index=grouping[1],
                                     base=self._base_lookup(df)))


# ------------------------------------------------------------------ building entries
# ------------------------------------------------------------------ small helpers
def _key_arrays(gb: Any) -> list[np.ndarray]:
    grouper = gb._grouper
    ids, index = ids_and_index(gb)
    safe = np.where(ids < 0, 0, ids)
    if isinstance(index, pd.MultiIndex):
        out = []
        for i in range(index.nlevels):
            vals = np.asarray(index.get_level_values(i), dtype=object)[safe]
            vals[ids < 0] = None
            out.append(vals)
        return out
    vals = np.asarray(index, dtype=object)[safe]
    vals[ids < 0] = None
    del grouper
    return [vals]


def _column_or_key(obj: pd.DataFrame, gb: Any, name: str) -> Any:
    if name in obj.columns:
        return obj[name]
    _, index = ids_and_index(gb)
    arrays = _key_arrays(gb)
    names = list(index.names)
    return arrays[names.index(name)] if name in names else None


def _value_columns(obj: pd.DataFrame, key_dims: list[str], gb: Any) -> list[Any]:
    selection = getattr(gb, "_selection", None)
    if selection is not None:
        cols = [selection] if not isinstance(selection, list | tuple) else list(selection)
    else:
        cols = [c for c in obj.columns if c not in key_dims]
    return [c for c in cols if c in obj.columns]


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    if isinstance(x, list | tuple):
        return list(x)
    return [x]


def _as_names(x: Any) -> list[str] | None:
    if x is None:
        return []
    items = x if isinstance(x, list | tuple) else [x]
    if all(isinstance(i, str) for i in items):
        return list(items)
    return None


#: The minimum and maximum of variables binned with ``pd.cut`` / ``pd.qcut``: a bin label
#: ending there publishes one person's value (see checking.labels.label_disclosure).
DATA_EDGES: set[float] = set()
_MAX_DATA_EDGES = 4096


def _edge_is_data(values: pd.Series, edges: Any) -> bool:
    """Whether explicit bin edges include the data's own minimum or maximum."""
    try:
        v = pd.to_numeric(values, errors="coerce").dropna()
        e = {float(x) for x in np.asarray(edges, dtype=float).ravel()}
        return bool(len(v)) and (float(v.min()) in e or float(v.max()) in e)
    except (TypeError, ValueError):
        return False


def _record_data_edges(args: tuple, kwargs: dict, result: Any, threshold: int = 5) -> None:
    """Remember the binned variable's minimum and maximum. With a number of bins or quantiles
    the outer edges are those values; with explicit edges they are only when the analyst
    wrote the data's own extreme as an edge, which publishes it just the same."""
    if kwargs.get("labels") is not None:
        return  # named bins: no edge is shown
    x = args[0] if args else kwargs.get("x")
    try:
        values = pd.to_numeric(pd.Series(np.asarray(x).ravel()), errors="coerce").dropna()
        if not len(values):
            return
        if len(DATA_EDGES) > _MAX_DATA_EDGES:
            DATA_EDGES.clear()
        for extreme in (float(values.min()), float(values.max())):
            if int((values == extreme).sum()) < threshold:  # one person's (or a few people's) value
                DATA_EDGES.add(extreme)
    except (TypeError, ValueError):
        return


#: Frames up to this many cells are compared with captured tables before a describe().
DESCRIBED_TABLE_CELLS = 20_000


def _is_captured_table(obj: Any, registry: Registry) -> bool:
    """Whether a small object is a captured aggregate by its labels and values (``to_frame``,
    a renamed copy): its describe() summarises cells, not people."""
    try:
        if obj.size == 0 or obj.size > DESCRIBED_TABLE_CELLS or isinstance(obj.index, pd.RangeIndex):
            return False
        return registry.match(flatten(obj), None) is not None
    except Exception:  # not comparable: judged as microdata
        return False


def _one_row_per_group(result: Any, index: pd.Index) -> bool:
    """Whether a ``GroupBy.apply`` result has exactly the groups as its rows (a value, or a
    row of values, per group), so its cells can be judged by the units of their group."""
    try:
        return isinstance(result, pd.Series | pd.DataFrame) and result.index.nlevels == index.nlevels \
            and len(result) == len(index) and bool(result.index.isin(index).all())
    except (TypeError, ValueError):
        return False


def _groupby_measures(name: str, args: tuple, kwargs: dict, obj: Any) -> Callable[[str], tuple[str | None, str]]:
    """How each output column of a GroupBy call maps to (variable, statistic)."""
    series_var = obj.name if isinstance(obj, pd.Series) else None
    columns = {str(c): c for c in obj.columns} if isinstance(obj, pd.DataFrame) else {}
    if series_var is not None:
        columns.setdefault(str(series_var), series_var)

    def split(measure: str) -> tuple[Any, list[str]]:
        parts = measure.split("|") if measure else []
        var = next((columns[p] for p in parts if p in columns), series_var)
        rest = [p for p in parts if p not in columns]
        return var, rest

    if name in ("agg", "aggregate"):
        spec = args[0] if args else kwargs.get("func")
        named = {k: v for k, v in kwargs.items() if k not in ("func", "engine", "engine_kwargs")}
        if spec is None and named:  # named aggregation: out=(col, func) or out=func (SeriesGroupBy)
            mapping: dict[str, tuple[Any, str]] = {}
            for out, how in named.items():
                if isinstance(how, tuple) and len(how) == 2:
                    mapping[str(out)] = (how[0], stat_name(how[1]))
                else:
                    mapping[str(out)] = (series_var, stat_name(how))

            def named_measure(measure: str) -> tuple[str | None, str]:
                parts = measure.split("|") if measure else []
                hit = next((mapping[p] for p in parts if p in mapping), None)
                return hit if hit is not None else (series_var, "custom")

            return named_measure
        if isinstance(spec, dict):
            per_var = {str(k): v for k, v in spec.items()}

            def dict_measure(measure: str) -> tuple[str | None, str]:
                var, rest = split(measure)
                how = per_var.get(str(var))
                if isinstance(how, list | tuple):
                    return var, stat_name(rest[0]) if rest else "custom"
                return var, stat_name(how) if how is not None else "custom"

            return dict_measure
        if isinstance(spec, list | tuple):
            def list_measure(measure: str) -> tuple[str | None, str]:
                var, rest = split(measure)
                return var, stat_name(rest[0]) if rest else (stat_name(spec[0]) if len(spec) == 1 else "custom")

            return list_measure
        single = stat_name(spec)
        return lambda measure: (split(measure)[0], single)
    if name == "describe":
        def describe_measure(measure: str) -> tuple[str | None, str]:
            var, rest = split(measure)
            return var, DESCRIBE_STATS.get(rest[0], stat_name(rest[0])) if rest else "custom"

        return describe_measure
    if name == "quantile":
        q = args[0] if args else kwargs.get("q", 0.5)
        if np.ndim(q) == 0:
            single_q = quantile_stat(float(q))
            return lambda measure: (split(measure)[0], single_q)

        def quantile_measure(measure: str) -> tuple[str | None, str]:
            var, rest = split(measure)
            try:  # the quantile level is an unnamed level of the result: part of the measure
                return var, quantile_stat(float(rest[-1]))
            except (IndexError, ValueError):
                return var, "quantile"

        return quantile_measure
    if name == "apply":  # any function of a group: its units are known, not what it computes
        return lambda measure: (split(measure)[0], "custom")
    stat = "size" if name == "size" else stat_name(name)
    return lambda measure: (None if stat == "size" else split(measure)[0], stat)


def _pivot_measures(value_cols: list[Any], aggfunc: Any) -> Callable[[str], tuple[str | None, str]]:
    names = {str(v): v for v in value_cols}
    if isinstance(aggfunc, dict):
        per_var = {str(k): v for k, v in aggfunc.items()}
    else:
        per_var = None
    funcs = aggfunc if isinstance(aggfunc, list | tuple) else None

    def measure_of(measure: str) -> tuple[str | None, str]:
        parts = measure.split("|") if measure else []
        var = next((names[p] for p in parts if p in names), value_cols[0] if len(value_cols) == 1 else None)
        rest = [p for p in parts if p not in names]
        if per_var is not None:
            how = per_var.get(str(var))
            if isinstance(how, list | tuple):
                return var, stat_name(rest[0]) if rest else "custom"
            return var, stat_name(how) if how is not None else "custom"
        if funcs is not None:
            return var, stat_name(rest[0]) if rest else (stat_name(funcs[0]) if len(funcs) == 1 else "custom")
        return var, stat_name(aggfunc)

    return measure_of


def _normalized_over(normalize: Any, rows: list[str], columns: list[str]) -> tuple[str, ...] | None:
    """The dimensions a crosstab's shares sum to 1 within (see ``Entry.normalized``)."""
    # (as pandas reads it: a Python bool first, True == 1 was read as "columns"; a numpy bool is an
    # axis, np.False_ the rows, np.True_ the columns; red team of stop 68)
    if normalize is False or normalize is None:
        return None
    if normalize is True or (isinstance(normalize, str) and normalize == "all"):
        return ()
    if normalize in ("index", 0):
        return tuple(rows)
    if normalize in ("columns", 1):
        return tuple(columns)
    return ()  # True / "all": the whole table sums to 1


