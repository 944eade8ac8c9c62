"""Where the rows of a polars frame were in the frame they were taken from.

Why: polars frames have no index, so linking finds their rows by content alone. A filter that
keeps only columns that cannot tell people apart (``p.filter(age >= 60).select(district, sex,
flag)``) could not be placed among the earlier rows, and two such filters were cleared beside
the whole: F 19 + 19 − 37 = 1 (red team round 5). The capture remembers, for the results of
row-keeping methods (``select``, ``with_columns``, ``drop``, ``rename``...) and of ``filter``,
``head`` / ``tail`` / ``slice``, the frame they came from (:func:`remember`); when a table of
such a frame is linked, :func:`positions` gives each row's position in the first frame of the
chain, which then labels its rows (as pandas' index does), and linking places them by it.

The source frames are kept (polars shares their buffers) for the newest :data:`MAX_REMEMBERED`
results still alive; a filter is replayed with a row index only when a table of its result is
linked, never on the user's call.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from ...evidence import row_origins
from ...evidence.weak_table import WeakTable
from .. import contract
from ..depth import depth

#: Results remembered at once (the newest).
MAX_REMEMBERED = 16
#: Methods whose result has the source's rows in the source's order (when the heights agree).
SAME_ROWS = frozenset({"select", "with_columns", "with_columns_seq", "drop", "rename", "cast", "fill_null",
                       "fill_nan", "with_row_index", "clone", "rechunk"})
#: Methods whose result is the same frame's rows and columns (a copy): wrapped only to remember that
#: (:func:`copy_wrapper`), and passed through by :mod:`.lineage`.
COPIES = ("clone", "rechunk")
#: Methods whose result is some of the source's rows, in order.
SUBSETS = frozenset({"filter", "head", "tail", "limit", "slice"})
ROW = "__sdc_magic_row"

_origins = WeakTable(MAX_REMEMBERED)  # result -> (source, method, args, kwargs, written step or None)
#: Lazy steps (``DataFrame.lazy``, ``LazyFrame.filter`` / ``with_columns`` / ``select`` / ``rename`` /
#: ``drop``): read by :mod:`.lineage` only, never replayed for positions.
LAZY_STEPS = frozenset({"lazy", "filter", "with_columns", "select", "rename", "drop"})
#: Lazy results remembered at once: a lazy frame holds its sources anyway (its plan reads them), so
#: many more are kept than eager ones, and ``lf = df.lazy()`` at the top of a notebook is still known
#: after a hundred queries over it.
MAX_LAZY_REMEMBERED = 512
_lazy_origins = WeakTable(MAX_LAZY_REMEMBERED)  # lazy result -> (source, method, args, kwargs, written step)


def remember(result: Any, source: Any, name: str, args: tuple, kwargs: dict, written: dict | None = None) -> None:
    """``result`` was made by ``source.<name>(*args, **kwargs)`` (a row-keeping method or a subset).

    ``written``: the step as :mod:`.lineage` writes it, made when the call was (a list of
    conditions or a rename mapping the user changes afterwards must not change what linking
    replays: red team, a reused list of filters gave C's man at ``pass``)."""
    if name not in SAME_ROWS and name not in SUBSETS:
        return
    import polars as pl

    if not isinstance(result, pl.DataFrame) or not isinstance(source, pl.DataFrame) or result is source:
        return
    if name in SAME_ROWS and result.height != source.height:
        return  # (a select of aggregates: one row)
    _origins.set(result, (source, name, args, kwargs, written, _version(source)))


#: Methods of :data:`SAME_ROWS` whose result keeps the source's order only when every expression is
#: row-wise (``select(pl.all().sort_by("sex"))`` or ``.reverse()`` keep the height and reorder the
#: rows: labelled by their positions, the rows were named as other people, red team of issue 22).
ROW_WISE_ONLY = frozenset({"select", "with_columns", "with_columns_seq"})


def _row_wise_arguments(args: tuple, kwargs: dict) -> bool:
    """Whether every argument of a ``select``/``with_columns`` is a column name, a Series, or a
    row-wise expression (:func:`.plan.row_wise`)."""
    import polars as pl

    from .plan import row_wise

    def flat(values: Any) -> list[Any]:
        out: list[Any] = []
        for v in values:
            out.extend(flat(v) if isinstance(v, list | tuple) else [v])
        return out

    for value in flat([*args, *kwargs.values()]):
        if isinstance(value, str | pl.Series):
            continue
        if not isinstance(value, pl.Expr) or not (_selects_columns(value) or row_wise(value)):
            return False
    return True


def _selects_columns(expr: Any) -> bool:
    """Whether ``expr`` only picks columns (``pl.all()``, ``pl.exclude(...)``, a selector)."""
    try:
        return bool(expr.meta.is_column_selection(allow_aliasing=True))
    except Exception:
        return False


def remember_lazy(result: Any, source: Any, name: str, args: tuple, kwargs: dict, written: dict | None = None
                  ) -> None:
    """``result`` (a LazyFrame) was made by ``source.<name>(*args, **kwargs)`` (:data:`LAZY_STEPS`);
    ``written`` as for :func:`remember`."""
    import polars as pl

    if name in LAZY_STEPS and isinstance(result, pl.LazyFrame) and result is not source:
        _lazy_origins.set(result, (source, name, args, kwargs, written, _version(source)))


#: Lazy scans of local files remembered at once: how each was made (a root for :mod:`.lineage`).
SCANS = ("scan_parquet", "scan_csv", "scan_ipc", "scan_ndjson")
_scans = WeakTable(MAX_LAZY_REMEMBERED)  # scan LazyFrame -> (function name, source, kwargs)


_versions = WeakTable(4096)  # frame -> times it was changed in place (absent: never)


def changed(frame: Any) -> None:
    """``frame`` was changed in place (a DataFrame method that does: :data:`.lineage.IN_PLACE`)."""
    _versions.set(frame, int(_versions.get(frame) or 0) + 1)


def _version(frame: Any) -> int:
    return int(_versions.get(frame) or 0)


def unchanged_since(result: Any) -> bool:
    """Whether the source ``result`` was made from is as it was then (not changed in place since)."""
    import polars as pl

    hit = _lazy_origins.get(result) if isinstance(result, pl.LazyFrame) else _origins.get(result)
    return hit is None or _version(hit[0]) == hit[5]


def remember_scan(result: Any, name: str, source: Any, kwargs: dict) -> None:
    """``result`` is ``pl.<name>(source, **kwargs)``: a lazy frame read from files (see :func:`scan_of`)."""
    import polars as pl

    if isinstance(result, pl.LazyFrame):
        import copy

        # copies: a list of files or an option changed after the call must not change what the
        # scan is said to have read (red team: a source list edited afterwards, C at ``pass``)
        sources = tuple(source) if isinstance(source, list | tuple) else source
        _scans.set(result, (name, copy.deepcopy(sources), copy.deepcopy(dict(kwargs))))


def scan_of(frame: Any) -> tuple[str, Any, dict] | None:
    """(function name, source, kwargs) of the scan that made ``frame``, or None."""
    return _scans.get(frame)


def step(frame: Any) -> tuple[Any, str, tuple, dict, dict | None] | None:
    """(source, method, args, kwargs, written step) of the remembered call that made ``frame``, or None."""
    import polars as pl

    hit = _lazy_origins.get(frame) if isinstance(frame, pl.LazyFrame) else _origins.get(frame)
    return None if hit is None else hit[:5]


#: Frames made by ``pl.from_pandas`` remembered at once, with the labels of the pandas rows they hold.
MAX_FROM_PANDAS = 64
_pandas_labels = WeakTable(MAX_FROM_PANDAS)  # polars frame -> (the pandas rows' labels, its version)


def remember_pandas(result: Any, frame: Any) -> None:
    """``result`` is ``pl.from_pandas(frame)``: its rows are ``frame``'s in order, so they keep the
    labels that name them in pandas (:func:`.row_origins.labels_of`: those before a re-indexing).

    Why: polars frames have no index. A narrow copy of the people in polars (district, sex, flag)
    could not be placed among the rows of a pandas or polars table of a shuffled copy of them, and
    both tables were cleared: 37 − 35 = C's two women (red team of issue 22)."""
    import pandas as pd
    import polars as pl

    if isinstance(result, pl.DataFrame) and isinstance(frame, pd.DataFrame | pd.Series):
        labels = row_origins.labels_of(frame)
        if len(labels) == result.height and labels.is_unique:
            _pandas_labels.set(result, (labels, _version(result)))


def root(frame: Any, depth: int = 0) -> Any:
    """The first frame of the chain of remembered methods ``frame`` was made by (itself if none)."""
    hit = _origins.get(frame)
    return frame if hit is None or depth > 32 else root(hit[0], depth + 1)


def pandas_labels(frame: Any) -> Any:
    """The pandas labels of the rows of the frame ``frame``'s chain starts from (by its positions,
    :func:`positions`), or None when that frame was not made by ``pl.from_pandas`` (or has been
    changed in place since)."""
    hit = _pandas_labels.get(root(frame))
    if hit is None or hit[1] != _version(root(frame)):
        return None
    return hit[0]


def from_pandas(frame: Any, hops: int = 0) -> bool:
    """Whether the first frame of ``frame``'s chain, eager or lazy, was made by ``pl.from_pandas``
    (a cheap walk of remembered steps: nothing is replayed)."""
    import polars as pl

    hit = _lazy_origins.get(frame) if isinstance(frame, pl.LazyFrame) else _origins.get(frame)
    if hit is None or hops > 64:
        return isinstance(frame, pl.DataFrame) and pandas_labels(frame) is not None
    return from_pandas(hit[0], hops + 1)


def row_labels(frame: Any) -> Any:
    """Each row's pandas label when the frame ``frame``'s chain starts from came from pandas
    (:func:`remember_pandas`), as a pandas Index; None otherwise (or when a remembered step could
    not be replayed). Replays filters: call it as the extension's own work (``depth.passthrough``)."""
    import polars as pl

    if not isinstance(frame, pl.DataFrame):
        return None
    labels = pandas_labels(frame)
    if labels is None:
        return None
    at = positions(frame)
    if at is None:
        # the frame itself: its rows are the pandas rows in order (the Index is immutable: shared,
        # not copied, a million labels taken in order cost 3 ms a display)
        return labels if root(frame) is frame else None
    return labels.take(at)


_columns = WeakTable(MAX_FROM_PANDAS)  # Series taken from a frame -> that frame


def remember_column(series: Any, frame: Any) -> None:
    """``series`` is a column of ``frame`` (``frame["x"]``, ``get_column``): its rows are the frame's."""
    import polars as pl

    if isinstance(series, pl.Series) and isinstance(frame, pl.DataFrame) and len(series) == frame.height:
        _columns.set(series, frame)


def frame_of(series: Any) -> Any:
    """The frame a Series was taken from as a whole column (:func:`remember_column`), or None."""
    return _columns.get(series)


def positions(frame: Any, depth: int = 0) -> np.ndarray | None:
    """Each row's position in the first frame of the chain ``frame`` was made by; None when
    ``frame`` was not made by a remembered method (its rows are then its own positions)."""
    hit = _origins.get(frame)
    if hit is None or depth > 32:
        return None
    source, name, args, kwargs = hit[:4]
    if name in ROW_WISE_ONLY and not _row_wise_arguments(args, kwargs):
        return None  # (``select(pl.all().reverse())`` keeps the height, not the order)
    try:
        if name in SAME_ROWS:
            local = np.arange(frame.height, dtype=np.int64)
        else:
            local = _subset(source, name, args, kwargs)
        if local is None or len(local) != frame.height:
            return None
        before = positions(source, depth + 1)
        return local if before is None else before[local]
    except Exception:  # (a replay that fails: the rows are placed by content, as before)
        return None


def _subset(source: Any, name: str, args: tuple, kwargs: dict) -> np.ndarray | None:
    """The positions in ``source`` of the rows ``source.<name>(...)`` kept."""
    import polars as pl

    if name == "filter":
        kept = source.with_row_index(ROW).filter(*args, **kwargs)
        return kept.get_column(ROW).cast(pl.Int64).to_numpy()
    index = pl.DataFrame({ROW: np.arange(source.height, dtype=np.int64)})
    if name in ("head", "limit"):
        kept = index.head(*args, **kwargs)
    elif name == "tail":
        kept = index.tail(*args, **kwargs)
    else:
        kept = index.slice(*args, **kwargs)
    return kept.get_column(ROW).to_numpy()


# ---------------------------------------------------------------- wrappers (installed by the capture)
def row_positions(frame: Any) -> Any:
    """Each row's position in the first frame ``frame`` was made from (None: its own positions),
    or, when that frame came from pandas (``pl.from_pandas``), each row's pandas label (an Index)."""
    depth.value += 1  # (the replayed filter is ours, not the user's)
    try:
        labels = row_labels(frame)
        return labels if labels is not None else positions(frame)
    finally:
        depth.value -= 1


def from_pandas_wrapper(original: Any) -> Any:
    """``pl.from_pandas(frame)``: the result's rows keep the pandas labels that name them, for
    linking (:func:`remember_pandas`), nothing else."""
    def from_pandas(data: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(data, *args, **kwargs)
        if not depth.value:
            with contextlib.suppress(Exception):
                remember_pandas(result, data)
        return result
    return from_pandas


def frame_init_wrapper(original: Any) -> Any:
    """``pl.DataFrame(pandas_frame)``: as :func:`from_pandas_wrapper` (any other data passes straight through)."""
    import pandas as pd

    def init(df: Any, data: Any = None, *args: Any, **kwargs: Any) -> None:
        original(df, data, *args, **kwargs)
        if data is not None and not depth.value and isinstance(data, pd.DataFrame):
            with contextlib.suppress(Exception):
                remember_pandas(df, data)
    return init


def copy_wrapper(original: Any, registry: Any = None) -> Any:
    """``df.clone()`` / ``df.rechunk()``: the copy's rows are the frame's, in order (:func:`remember`),
    and a copy of a captured table is found as it (``contract.carry_origin``, with ``registry``).

    Why: a filter's result cloned lost its positions, its rows were numbered 0..n-1 and taken for
    other people's (B's 30 rows for A's first 30, sex alternating alike on both), and everyone − A
    − B = C went unseen (red team of issue 22)."""
    def copied(df: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(df, *args, **kwargs)
        if not depth.value:
            with contextlib.suppress(Exception):
                remember(result, df, original.__name__, args, kwargs)
            if registry is not None:
                with contextlib.suppress(Exception):
                    contract.carry_origin([df], result, registry)
        return result
    return copied


def column_wrapper(original: Any) -> Any:
    """``df["x"]``, ``df.get_column("x")``, ``df.to_series()``: a whole column remembered with its
    frame (:func:`remember_column`), so that a table of the Series (``value_counts``) places its
    rows as the frame's are; nothing else."""
    def column_of(df: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(df, *args, **kwargs)
        if not depth.value and type(result).__name__ == "Series":
            with contextlib.suppress(Exception):
                remember_column(result, df)
        return result
    return column_of
