"""Tables derived from an aggregation's result: marked as aggregations, with their recipe.

What the capture wraps besides the aggregations themselves (:mod:`.pandas`): methods whose
result is computed from an aggregation's cells (``reset_index``, ``merge``, ``concat``,
selections with ``[]``/``.loc``/``.iloc``, arithmetic, ``cumsum``/``diff``/``shift``...), windows
(``rolling``, ``expanding``, ``ewm``) and group-wise running statistics of such a result. Each
result is marked as an aggregation (never drawn as row-level data) and, unless a user callable
is involved, keeps a recipe (:class:`.contract.Recipe`: pandas' own function and its inputs),
from which the check recomputes it with the parent's hidden cells moved
(:mod:`sdc_magic.checking.lineage`, issue 23.4).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.typing import DataFrameGroupBy, Expanding, ExponentialMovingWindow, Rolling, SeriesGroupBy

from ..evidence import row_origins
from ..evidence.registry import Registry
from . import size_filters
from .contract import (
    Recipe,
    carry_origin,
    is_aggregate,
    maker_of,
    mark_aggregate,
    mark_one_sided,
    mark_origin,
    mark_selected_by_values,
    mark_withheld,
    one_sided,
    origin_of,
    record_maker,
    record_recipe,
    selected_by_values,
    withheld_reason,
)
from .depth import depth as _depth

_PANDAS = (pd.DataFrame, pd.Series)

#: Windows and groupings of an aggregation's result whose statistics keep a recipe (issue 23.4,
#: red team round 7: expanding().sum() and groupby(level=...).diff() gave a hidden month back)
WINDOWS = ("rolling", "expanding", "ewm")
WINDOW_METHODS = ("sum", "mean", "median", "min", "max", "std", "var", "count", "sem", "skew", "kurt", "quantile",
                  "rank")
EWM_METHODS = ("mean", "sum", "std", "var")
GROUP_TRANSFORMS = ("cumsum", "cumprod", "cummax", "cummin", "diff", "shift", "pct_change", "rank", "transform")
#: Methods whose result is derived from their inputs' rows: of an aggregation, an aggregation
DERIVED_METHODS = (
    *((pd.DataFrame, m) for m in ("reset_index", "merge", "join", "mask", "where", "assign", "copy", "rename",
                                  "transpose", "astype", "sort_values", "sort_index", "round", "stack", "unstack",
                                  "set_index", "reindex", "head", "tail", "apply", "pipe", "__getitem__",
                                  "rename_axis", "droplevel", "swaplevel", "filter", "nlargest", "nsmallest",
                                  "fillna", "convert_dtypes", "infer_objects", "dropna", "drop", "query", "eval",
                                  "combine", "combine_first", "add_prefix", "add_suffix", "set_axis", "map",
                                  "idxmin", "idxmax", "melt", "explode")),
    *((pd.Series, m) for m in ("reset_index", "to_frame", "mask", "where", "copy", "rename", "astype",
                               "sort_values", "sort_index", "round", "unstack", "reindex", "head", "tail", "apply",
                               "pipe", "rename_axis", "droplevel", "swaplevel", "nlargest", "nsmallest",
                               "__getitem__", "fillna", "convert_dtypes", "infer_objects", "dropna", "drop",
                               "combine", "combine_first", "add_prefix", "add_suffix", "set_axis", "map",
                               "explode")),
)
#: Methods returning their input's rows in order under other labels (see ``row_origins``)
REINDEXING = ("reset_index", "set_index", "set_axis")
#: Methods returning some of their input's rows under their labels, not aggregates of them: only
#: the labels those rows had before a re-indexing follow (``row_origins.follow``). A frame rebuilt
#: from an array (labels 0..n-1, its rows' earlier labels remembered) then shuffled with ``sample``
#: lost them, and a table of it was compared with nothing (red team of issue 22, seed 47: 307)
ROW_SELECTIONS = ("sample", "take", "drop_duplicates")
#: Methods whose ``ignore_index=True`` numbers the rows kept 0..n-1: run with the labels kept, the
#: rows' labels noted (``row_origins.rows_labelled``), then numbered as pandas numbers them. A
#: one-column copy shuffled so (``f[["sex"]].sample(frac=1, ignore_index=True)``) could be placed by
#: nothing else, and its table beside A's and B's gave C away (red team, 2026-12-05)
RENUMBERING = ("sample", "drop_duplicates", "sort_values", "sort_index", "dropna")
#: Arithmetic and running statistics analysts apply to tables (issue 23.4): of an aggregation,
#: an aggregation computed from it, whose recipe lets the check recompute it from the protected parent
_ARITHMETIC = ("add", "sub", "mul", "div", "truediv", "floordiv", "mod", "pow")
#: Comparisons and their combinations: the mask of ``t[t == 2]`` keeps its recipe, so a selection
#: by values can be recomputed with the hidden cells moved (``lineage.labels_pinned``)
_COMPARISONS = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "eq", "ne", "lt", "le", "gt", "ge",
                "between", "isin", "__and__", "__or__", "__xor__", "__invert__")
TRANSFORM_METHODS = tuple(
    (owner, m) for owner in (pd.DataFrame, pd.Series)
    for m in ("cumsum", "cumprod", "cummax", "cummin", "diff", "shift", "pct_change", "rank", "abs", "clip",
              *_ARITHMETIC, *(f"r{op}" for op in _ARITHMETIC),
              *(f"__{op}__" for op in _ARITHMETIC if op != "div"), *(f"__r{op}__" for op in _ARITHMETIC if op != "div"),
              "__neg__", "__abs__", *_COMPARISONS)
)


class Derivations:
    """Installs the wrappers of derived tables through the capture's ``patch`` (which undoes them)."""

    def __init__(self, registry: Registry, patch: Callable[[object, str, Any], None]) -> None:
        self.registry = registry
        self.patch = patch

    def install(self) -> None:
        for owner, name in (*DERIVED_METHODS, *TRANSFORM_METHODS):
            if not hasattr(owner, name):
                continue  # (Series.between has no DataFrame twin)
            self.patch(owner, name, self.derived_wrapper(getattr(owner, name), first_and_other, name))
        # a frame rebuilt from an array of another's values keeps the labels its rows had there
        # (``pd.DataFrame(f.to_numpy(), columns=f.columns)``: row_origins.values_of / built_from)
        for owner in (pd.DataFrame, pd.Series):
            for name in ROW_SELECTIONS:
                self.patch(owner, name, _selection_wrapper(getattr(owner, name)))
        self.patch(pd.DataFrame, "to_numpy", _values_wrapper(pd.DataFrame.to_numpy))
        self.patch(pd.DataFrame, "values", property(_values_wrapper(pd.DataFrame.values.fget)))
        self.patch(pd.DataFrame, "__init__", _init_wrapper(pd.DataFrame.__init__, self.registry))
        # .T is a property over transpose bound when pandas was imported: wrapped on its own
        self.patch(pd.DataFrame, "T", property(self.derived_wrapper(pd.DataFrame.T.fget, first_and_other, "T")))
        for indexer, name in ((pd.core.indexing._LocIndexer, "loc"), (pd.core.indexing._iLocIndexer, "iloc")):
            self.patch(indexer, "__getitem__", self.indexer_wrapper(indexer.__getitem__, name))
        # windows and group-wise running statistics of an aggregation's result (rolling sums,
        # ewm, groupby(level=...).cumsum()): the call that made the window / grouping is kept
        for owner in (pd.Series, pd.DataFrame):
            for name in (*WINDOWS, "groupby"):
                self.patch(owner, name, self.maker_wrapper(getattr(owner, name), name))
        for cls, methods in ((Rolling, WINDOW_METHODS), (Expanding, WINDOW_METHODS),
                             (ExponentialMovingWindow, EWM_METHODS),
                             (SeriesGroupBy, GROUP_TRANSFORMS), (DataFrameGroupBy, GROUP_TRANSFORMS)):
            for name in methods:
                if hasattr(cls, name):
                    self.patch(cls, name, self.made_wrapper(getattr(cls, name), name))
        self.patch(pd, "concat", self.derived_wrapper(pd.concat, concatenated, "concat"))
        self.patch(pd, "merge", self.derived_wrapper(pd.merge, merged, "merge"))
        # (``pd.melt(t)`` as ``t.melt()``: a checked table's cells in a column, not row-level data)
        self.patch(pd, "melt", self.derived_wrapper(pd.melt, first_and_other, "melt"))

    def derived_wrapper(self, original: Callable, inputs: Callable[..., list[Any]], name: str) -> Callable:
        """``reset_index``, ``merge``, ``join``, ``concat``, ``to_frame``, ``cumsum``, arithmetic...
        of aggregation results are aggregation results too (marked, see ``Capture._mark_unrecorded``),
        with their recipe when no user callable is involved (see :class:`.contract.Recipe`);
        anything else passes."""
        registry = self.registry

        # rows kept in their order under new labels: linking places them by the old (row_origins);
        # ``set_index("income")`` moves the column that told rows apart into the labels, and a
        # flagged count over it was compared with nothing (14 − 8 − 5, red team's chains)
        reindexes = name in REINDEXING
        renumbers = name in RENUMBERING
        selects = name == "__getitem__"
        masks = name in ("__getitem__", "loc")  # (a boolean mask's positions: row_origins.follow)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if selects and len(args) == 2 and callable(args[1]) and not _depth.value \
                    and isinstance(args[0], _PANDAS) and (is_aggregate(args[0]) or registry.by_object(args[0]) is not None):
                # t[lambda x: x < 10]: called here, once, as pandas would; its answer (a mask with its
                # own recipe when it compares the table's values) joins the recipe (as .loc[callable])
                args = (args[0], args[1](args[0]))
            renumbered = renumbers and renumbering(kwargs)
            result = renumbered_call(original, args, kwargs) if renumbered else original(*args, **kwargs)
            if _depth.value or not isinstance(result, _PANDAS):
                return result
            if args:
                try:  # rows under new labels: linking places them by the old (see row_origins)
                    if renumbered:
                        pass  # (their labels noted by renumbered_call)
                    elif reindexes:
                        row_origins.remember(result, args[0])
                    elif name == "concat":
                        row_origins.concatenated(result, args[0], kwargs.get("axis", 0))
                    else:
                        row_origins.follow(result, args[0], args[1] if masks and len(args) == 2 else None)
                    chosen = selected_by_values(args[0])  # (rows chosen by figures: kept so, size_filters)
                    if chosen is not None:
                        mark_selected_by_values(result, chosen)
                    bounds = one_sided(args[0])  # (an engine's one-sided filter: set_index, sort_values...)
                    if bounds:
                        mark_one_sided(result, bounds)
                    size_filters.carry(args, result)
                except Exception as exc:  # never break user code
                    registry.failures.append(f"{type(exc).__name__}: {exc}")
            try:
                # the hot path of every arithmetic and selection in the user's code: plain loops
                given = inputs(*args, **kwargs)
                for p in given:
                    # what is computed from a withheld result is withheld (red team, stop 50: the
                    # k lowest incomes per group, withheld, shown with their labels dropped)
                    reason = withheld_reason(p) if isinstance(p, _PANDAS) else None
                    if reason is not None:
                        mark_withheld(result, reason)
                        return result
                origins, aggregate_input = set(), False
                for p in given:
                    if not isinstance(p, _PANDAS):
                        continue
                    entry = registry.by_object(p)
                    origin = entry.id if entry is not None else origin_of(p)
                    if origin is not None:
                        origins.add(origin)
                    aggregate_input = aggregate_input or entry is not None or is_aggregate(p)
                if len(origins) == 1:  # (a copy of one captured table: found as it, contract.mark_origin)
                    mark_origin(result, origins.pop())
                if not aggregate_input:
                    return result
                if withheld_reason(result) is None:
                    mark_aggregate(result)
                    if not any(callable(v) and not isinstance(v, type) for v in (*args, *kwargs.values())):
                        record_recipe(result, Recipe(name, original, args, kwargs))
            except Exception as exc:  # never break user code
                registry.failures.append(f"{type(exc).__name__}: {exc}")
            return result

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def maker_wrapper(self, original: Callable, name: str) -> Callable:
        """``rolling``/``expanding``/``ewm``/``groupby`` of an aggregation's result: the window or
        grouping remembers how it was made (see :meth:`made_wrapper`)."""
        registry = self.registry

        @functools.wraps(original)
        def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
            made = original(obj, *args, **kwargs)
            if not _depth.value and (is_aggregate(obj) or registry.by_object(obj) is not None):
                record_maker(made, (obj, name, args, kwargs))
            return made

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def made_wrapper(self, original: Callable, name: str) -> Callable:
        """A statistic of such a window or grouping: marked, with a recipe that makes the window
        again from the (replaced) parent (:class:`_MadeCall`)."""
        derived_cache: dict[tuple, Callable] = {}

        @functools.wraps(original)
        def wrapper(made: Any, *args: Any, **kwargs: Any) -> Any:
            hit = None if _depth.value else maker_of(made)
            if hit is None:
                return original(made, *args, **kwargs)
            parent, maker, margs, mkwargs = hit
            if any(callable(v) and not isinstance(v, type) for v in (*margs, *mkwargs.values())):
                return original(made, *args, **kwargs)
            key = (maker, name)
            derived = derived_cache.get(key)
            if derived is None:
                derived = derived_cache[key] = self.derived_wrapper(_MadeCall(maker, name), first_and_other, name)
            return derived(parent, _Made(margs, mkwargs), *args, **kwargs)

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper

    def indexer_wrapper(self, original: Callable, name: str) -> Callable:
        """``t.loc[...]`` / ``t.iloc[...]`` of an aggregation's result: marked and with a recipe, as
        :meth:`derived_wrapper` does for methods (the indexer's object is the input)."""
        derived = self.derived_wrapper(_Selection(original, name), first_and_other, name)
        registry = self.registry

        @functools.wraps(original)
        def wrapper(indexer: Any, key: Any) -> Any:
            obj = getattr(indexer, "obj", None)
            if _depth.value or not isinstance(obj, pd.DataFrame | pd.Series):
                return original(indexer, key)
            if callable(key) and (is_aggregate(obj) or registry.by_object(obj) is not None):
                # t.loc[lambda x: x == 2]: pandas calls the function on the object once and selects
                # by its answer; called here instead, the answer (a mask with its own recipe when it
                # compares the table's values) goes into the recipe, so the selection is recomputed
                # with the hidden cells moved (red team: a function's mask could not be replayed)
                key = key(obj)
            if getattr(indexer, "axis", None) == 1 and isinstance(obj, pd.DataFrame):
                # ``t.loc(axis=1)[key]`` (pandas' own ``filter(like=...)``): the same selection as
                # ``t.loc[:, key]``, which the recipe replays (helper-91: it replayed ``t.loc[key]``
                # on the rows and raised IndexError in the user's code)
                key = (slice(None), key)
            return derived(obj, key)

        wrapper.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return wrapper


def renumbering(kwargs: dict[str, Any]) -> bool:
    """Whether a call numbers its rows 0..n-1 (``ignore_index=True``, not in place) at the analyst's level."""
    return kwargs.get("ignore_index") is True and not kwargs.get("inplace") and not _depth.value


def renumbered_call(original: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
    """The call with ``ignore_index=False``, the labels of the rows it keeps noted, then the rows
    numbered 0..n-1 as ``ignore_index=True`` numbers them (see :data:`RENUMBERING`)."""
    result = original(*args, **{**kwargs, "ignore_index": False})
    if isinstance(result, _PANDAS):
        labels = row_origins.labels_of(result)
        result.index = pd.RangeIndex(len(result))
        with contextlib.suppress(Exception):  # never break user code
            row_origins.rows_labelled(result, labels)
    return result


def _selection_wrapper(original: Callable) -> Callable:
    """``sample`` / ``take`` / ``drop_duplicates``: the rows kept carry the labels they had before
    a re-indexing (:data:`ROW_SELECTIONS`), nothing else."""
    @functools.wraps(original)
    def select(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if renumbering(kwargs):
            return renumbered_call(original, (obj, *args), kwargs)
        result = original(obj, *args, **kwargs)
        if not _depth.value:
            with contextlib.suppress(Exception):  # never break user code
                row_origins.follow(result, obj)
        return result

    select.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
    return select


def _values_wrapper(original: Callable) -> Callable:
    """``frame.to_numpy()`` / ``frame.values``: the array remembered with the frame's row labels
    (:func:`.row_origins.values_of`), nothing else."""
    @functools.wraps(original)
    def values(frame: Any, *args: Any, **kwargs: Any) -> Any:
        array = original(frame, *args, **kwargs)
        if not _depth.value:
            with contextlib.suppress(Exception):  # never break user code
                row_origins.values_of(array, frame)
        return array

    values.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
    return values


def _init_wrapper(original: Callable, registry: Registry) -> Callable:
    """``pd.DataFrame(array)`` of such an array: its rows keep their earlier labels
    (:func:`.row_origins.built_from`); ``pd.DataFrame(t)`` of a captured table (or of a copy of
    one) is a copy of it (:func:`.contract.carry_origin`); any other data passes straight through."""
    @functools.wraps(original)
    def init(frame: Any, data: Any = None, index: Any = None, *args: Any, **kwargs: Any) -> None:
        original(frame, data, index, *args, **kwargs)
        if _depth.value:
            return
        if isinstance(data, np.ndarray):
            with contextlib.suppress(Exception):  # never break user code
                row_origins.built_from(frame, data, index)
        elif isinstance(data, _PANDAS):
            with contextlib.suppress(Exception):
                carry_origin([data], frame, registry)

    init.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
    return init


class _Made:
    """The arguments of a ``rolling``/``groupby``... call, carried in a recipe as one value."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple, kwargs: dict) -> None:
        self.args = args
        self.kwargs = kwargs


class _MadeCall:
    """``getattr(parent.<maker>(*made.args, **made.kwargs), method)(*args)``: pandas' own code, what a
    recipe replays for a window or group-wise statistic."""

    def __init__(self, maker: str, method: str) -> None:
        self.maker = maker
        self.method = method

    def __call__(self, parent: Any, made: _Made, *args: Any, **kwargs: Any) -> Any:
        _depth.value += 1  # the capture's wrappers pass straight through: pandas' own code runs
        try:
            window = getattr(parent, self.maker)(*made.args, **made.kwargs)
            return getattr(window, self.method)(*args, **kwargs)
        finally:
            _depth.value -= 1


class _Selection:
    """``obj.loc[key]`` / ``obj.iloc[key]`` as a function of (obj, key), pandas' own code: what a
    recipe replays (see :class:`.contract.Recipe`)."""

    def __init__(self, getitem: Callable, name: str) -> None:
        self.getitem = getitem
        self.name = name

    def __call__(self, obj: Any, key: Any) -> Any:
        return self.getitem(getattr(obj, self.name), key)


def first_and_other(obj: Any = None, other: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
    """The inputs of a method call: the object, and ``other``/``right`` (merge, join)."""
    other = kwargs.get("right", kwargs.get("other", other))
    others = list(other) if isinstance(other, list | tuple) else [other]
    return [obj, *others]


def concatenated(objs: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
    objs = kwargs.get("objs", objs)
    if isinstance(objs, dict):
        return list(objs.values())
    try:
        return list(objs)
    except TypeError:
        return []


def merged(left: Any = None, right: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
    return [kwargs.get("left", left), kwargs.get("right", right)]
