"""Frames whose rows are another frame's rows, in the same order, under new labels.

Why: linking finds the rows behind an output by their index labels (confirmed by a sample of
their values) or by the content of their columns. ``d[mask].reset_index(drop=True)`` keeps the
rows and their order and throws the labels away; when the columns left cannot tell people
apart (district, sex, a flag), the content cannot place them either, and two re-indexed filters
of one frame were matched to other people by rank (F 19 + 19 − 37 = 1, all cleared; red team
round 5). The capture remembers, for such a result, the labels its rows had
(:func:`remember`); linking places the frame by those (:func:`labels_before`).

Only a reference to the earlier index is kept (pandas shares it; nothing is copied), for the
newest :data:`MAX_REMEMBERED` results still alive, and never the frame itself. Lives here,
below capture and linking, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .weak_table import WeakTable

#: Results remembered at once (the newest still alive; a display looks at one or two). DuckDB
#: reading a re-indexed pandas frame takes its columns one by one in Python (71 remembered
#: selections for one query under pandas 2.2): with 32, a table's rows computed before such a query
#: and shown after it had lost their earlier labels (everyone − A − B = C at ``pass`` on pandas 2.2).
MAX_REMEMBERED = 256

_origins = WeakTable(MAX_REMEMBERED)  # result -> (the labels its rows had, confirm them row by row)


def remember(result: Any, source: Any) -> None:
    """``result`` holds ``source``'s rows in ``source``'s order (``reset_index`` of it)."""
    if not isinstance(result, pd.DataFrame | pd.Series) or not isinstance(source, pd.DataFrame | pd.Series):
        return
    if len(result) != len(source):
        return
    labels = labels_before(source)
    if labels is None:
        labels = source.index
    if not labels.is_unique or result.index.equals(labels):
        return
    _keep(result, labels, confirm=needs_confirmation(source))


def follow(result: Any, source: Any, key: Any = None) -> None:
    """``result`` is made of rows of ``source`` found by its labels (a column, a filter, a copy of
    a re-indexed frame): it inherits the labels those rows had before (:func:`remember`).

    ``key``: what selected the rows, when known (``source[key]``). A boolean mask as long as
    ``source`` gives the rows' positions even when the new labels repeat (``set_index("income")``
    with two incomes of 0, then ``d[d.flag == 1]``: red team's chains, 14 − 8 − 5); a column label
    (or a list of them) keeps every row in order.

    A dict look-up when ``source`` was never re-indexed (the hot path of every selection)."""
    if source not in _origins:
        return
    before = labels_before(source)
    if before is None or not isinstance(result, pd.DataFrame | pd.Series) or result is source:
        return
    confirm = needs_confirmation(source)
    at = _mask_positions(key, source, len(result))
    if at is not None:
        _keep(result, before[at], confirm)
        return
    if _selects_columns(key, source):
        same_rows(result, source)  # (its columns: every row, in order, whatever the labels)
        return
    if not source.index.is_unique or not result.index.is_unique:
        return
    at = source.index.get_indexer(result.index)
    if (at < 0).any():
        return
    _keep(result, before[at], confirm)


def same_rows(result: Any, source: Any) -> None:
    """``result`` holds every row of ``source`` in ``source``'s order (a Series made a frame, a
    frame of its columns): it takes the labels they had before a re-indexing, whatever the
    current labels (which may repeat: ``set_index("income")["sex"]``, red team)."""
    before = labels_before(source)
    if before is None or not isinstance(result, pd.DataFrame | pd.Series) or result is source:
        return
    if len(result) == len(source) and result.index.equals(source.index):
        _keep(result, before, needs_confirmation(source))


def _mask_positions(key: Any, source: Any, n_result: int) -> np.ndarray | None:
    """The positions of ``source`` a boolean mask selects, when it selected ``n_result`` rows.

    A Series mask counts only on ``source``'s own labels (pandas aligns any other by label)."""
    if key is None or isinstance(key, str | tuple | slice):
        return None
    if isinstance(key, pd.Series):
        if not pd.api.types.is_bool_dtype(key.dtype) or not (key.index is source.index
                                                              or key.index.equals(source.index)):
            return None
        values = key.to_numpy(dtype=bool)
    elif isinstance(key, np.ndarray) and key.dtype == bool:
        values = key
    else:
        return None
    if values.ndim != 1 or len(values) != len(source):
        return None
    at = np.flatnonzero(values)
    return at if len(at) == n_result else None


def _selects_columns(key: Any, source: Any) -> bool:
    """Whether ``source[key]`` selects columns of a frame (a label or a list of labels): all its
    rows in order (``people.set_index("income")["sex"]``: incomes repeat, the labels cannot say)."""
    if key is None or not isinstance(source, pd.DataFrame):
        return False
    try:
        if isinstance(key, list):
            return bool(key) and all(not isinstance(k, bool) and k in source.columns for k in key)
        return not isinstance(key, bool) and key in source.columns
    except TypeError:  # (an unhashable key: a mask or an array)
        return False


def concatenated(result: Any, objs: Any, axis: Any) -> None:
    """``pd.concat(objs, ...)`` along the rows: the result's rows are those of ``objs``, in order,
    so they keep the labels that named them there (:func:`labels_of`), whatever numbers the result
    gives them (``ignore_index=True``) — when those labels name each row once.

    Why: ``pd.concat([f[f.district == "B"], f[f.district != "B"]], ignore_index=True)`` numbers
    the rows 0..n-1 again, and those numbers name other people than the same numbers in ``f``;
    over columns that cannot tell people apart such a copy was compared with nothing (37 − 35,
    red team of issue 22: 9 of the 20 seeded sessions still leaking). Only lists and tuples of
    pandas objects (a generator is spent by the time the result exists)."""
    if axis not in (0, "index", "rows") or not isinstance(result, pd.DataFrame | pd.Series):
        return
    if isinstance(objs, dict):
        objs = list(objs.values())
    if not isinstance(objs, list | tuple):
        return
    parts = [o for o in objs if o is not None]
    if not parts or not all(isinstance(o, pd.DataFrame | pd.Series) for o in parts):
        return
    labels = [labels_of(o) for o in parts]
    if sum(len(x) for x in labels) != len(result):
        return
    joined = labels[0].append(labels[1:]) if len(labels) > 1 else labels[0]
    if joined.is_unique and not result.index.equals(joined):
        _keep(result, joined, confirm=any(needs_confirmation(o) for o in parts))


_arrays = WeakTable(MAX_REMEMBERED)  # array of a frame's values -> the labels of the frame's rows


def values_of(array: Any, frame: Any) -> None:
    """``array`` is ``frame.to_numpy()`` (or ``frame.values``): row i is the frame's row i."""
    if isinstance(array, np.ndarray) and array.ndim == 2 and isinstance(frame, pd.DataFrame) \
            and len(array) == len(frame) > 0:
        _arrays.set(array, labels_of(frame))


def built_from(result: Any, data: Any, index: Any) -> None:
    """``result`` is ``pd.DataFrame(data)`` of such an array and no ``index``: its rows keep the
    labels they had in the frame the values came from.

    Why: ``pd.DataFrame(f.to_numpy(), columns=f.columns)`` numbers the rows anew (red team of
    issue 22: 11 of the 20 seeded sessions still leaking). An array can be changed in place
    between the two calls (``np.random.shuffle(a)``), so these labels are confirmed row by row by
    their content when linking places the rows (:func:`needs_confirmation`), as rowids are."""
    if index is not None or not isinstance(data, np.ndarray) or not isinstance(result, pd.DataFrame):
        return
    labels = _arrays.get(data)
    if labels is not None and len(labels) == len(result) and labels.is_unique:
        _keep(result, labels, confirm=True)  # (even when the same numbers: they are confirmed)


def needs_confirmation(frame: Any) -> bool:
    """Whether the labels :func:`labels_before` gives for ``frame`` came through an array of its
    values (:func:`built_from`) and must be confirmed row by row by the rows' content."""
    hit = _origins.get(frame)
    return hit is not None and hit[1] and len(hit[0]) == len(frame)


def _keep(result: Any, labels: pd.Index, confirm: bool = False) -> None:
    _origins.set(result, (labels, confirm))


def rows_labelled(result: Any, labels: pd.Index) -> None:
    """``result`` (a pandas frame made by another engine: polars' ``to_pandas``) holds, in order,
    the rows these pandas ``labels`` named; kept like a ``reset_index``'s (:func:`remember`)."""
    if isinstance(result, pd.DataFrame | pd.Series) and len(result) == len(labels) and labels.is_unique \
            and not result.index.equals(labels):
        _keep(result, labels)


def labels_of(frame: pd.DataFrame | pd.Series) -> pd.Index:
    """The labels that name ``frame``'s rows for linking: those before a re-indexing, else its own."""
    before = labels_before(frame)
    return frame.index if before is None else before


def labels_before(frame: Any) -> pd.Index | None:
    """The labels ``frame``'s rows had before a re-indexing (:func:`remember`), or None."""
    hit = _origins.get(frame)
    return hit[0] if hit is not None and len(hit[0]) == len(frame) else None
