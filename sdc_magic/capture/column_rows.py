"""The user's frame whose rows a counted Series holds: linking reads those rows, not one column.

Why (red team, stop 50): ``df.sex.value_counts()`` with one sex missing (36/36) beside
``df.flag.value_counts()`` (42 + 31) told the person whose sex is missing, both ``pass``: each
Series was read as a frame of its one column, whose rows matched nothing. So were a key masked
over a district (``df.sex.where(df.district != "C")``), two districts merged
(``df.district.replace({"B": "BC", "C": "BC"})``) and an age banded under another name
(``pd.cut(df.age, bins).rename("ageband")``), each counted and then compared by subtraction with
the plain counts. Such a Series is a column of a frame of the user's, or a function of one of its
columns at the same labels: linking then places that frame's rows (its other columns tell the
people apart), the Series standing in for its column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

#: Rows a function of a column must be checked on (beyond one per distinct value of the column)
#: before a Series is taken for a recode of it: fewer could be chance.
MIN_REPEATS = 20
#: Columns of a wide frame looked at for a Series under a new name (the first ones).
MAX_COLUMNS = 64

#: (labels, unit column or None[, every]) -> a frame of the user's with those labels (``every``: every
#: frame with them, then those holding them all, as they are asked for), see ``jupyter.extension``
FrameFinder = Callable[..., "pd.DataFrame | None"]


def largest_frame_holding(index: pd.Index, find: FrameFinder) -> pd.DataFrame | None:
    """The largest frame of the user's holding every one of these labels (the frame a filter's
    rows were selected from, when it is still in the namespace), or None. A scan of the
    namespace's frames: asked only when a distinct count's column looks like a category among
    the table's rows (``checking.categories``)."""
    found = None
    for frame in find(index, None, True):
        if found is None or len(frame) > len(found):
            found = frame
    return found


def frame_of_rows(s: pd.Series, find: FrameFinder) -> pd.DataFrame | None:
    """The frame of the user's (``find``: by the Series' labels; several frames may hold them, the
    first that ``s`` is a column or a function of a column of) whose rows ``s`` holds, with ``s`` as
    its column when it is not one of its columns as it is; None when there is none."""
    if s.name is None:
        return None
    for whole in find(s.index, None, True):
        frame = whole if len(whole) == len(s) else whole.loc[s.index]  # (a filter: its rows at these labels)
        rows = _rows_of(s, frame)
        if rows is not None:
            return rows
    return None


def unit_of_rows(series: Iterable[pd.Series], index: pd.Index, unit: str, find: FrameFinder) -> pd.Series | None:
    """The declared unit column at the labels ``index``, read from the user's frame that one of
    ``series`` (the table's key columns) was taken from, or None.

    Why (over-protection, stop 67): ``pd.crosstab(df[df.age > 20].sex, df[df.age > 20].edu)`` and
    ``df[df.age > 30].edu.value_counts()`` with ``unit=hh`` went to ``review`` ("unit column not
    found"): the filtered frame is no variable, and only a frame with the very same labels was
    looked for. A key column found in a frame with the unit column (equal values, or a function of
    a column, at the same labels: :func:`frame_of_rows`) ties the rows to that frame; a Series of
    fewer than ``MIN_REPEATS`` rows could match a frame by chance and is not used.

    Every frame of the user's with the unit column that the Series fits is read: if two give
    different units at these rows (``other = df.assign(hh=...)``), which one the table came from
    is unknown and None is returned (the rows are counted as units and the table goes to review)."""
    for s in series:
        if not isinstance(s, pd.Series) or s.name is None or len(s) < MIN_REPEATS:
            continue
        units: list[pd.Series] = []
        for whole in find(s.index, unit, True):
            frame = whole if len(whole) == len(s) else whole.loc[s.index]
            rows = _rows_of(s, frame)
            found = None if rows is None else rows[unit]
            if isinstance(found, pd.Series):
                units.append(found)
        if not units:
            continue
        if any(not u.equals(units[0]) for u in units[1:]):
            return None
        found = units[0]
        if found.index.equals(index):
            return found
        if not found.index.is_unique or not bool(index.isin(found.index).all()):
            continue
        return found.reindex(index)
    return None


def _rows_of(s: pd.Series, frame: pd.DataFrame) -> pd.DataFrame | None:
    if not frame.columns.is_unique or len(frame) != len(s):
        return None
    if s.name in frame.columns:
        column = frame[s.name]
        if column is s or (column.dtype == s.dtype and column.equals(s)):
            return frame
        sources = [s.name]
    else:
        sources = list(frame.columns[:MAX_COLUMNS])
    if not any(function_of(s, frame[c]) for c in sources):
        return None
    rows = frame.copy(deep=False)
    rows[s.name] = s.to_numpy()
    return rows


def function_of(s: pd.Series, column: pd.Series) -> bool:
    """Whether ``s`` is, where it has a value, a function of ``column`` at the same labels (equal
    values, a merge of categories, bands of a number), on enough repeated values to rule out
    chance, and not a one-to-one relabelling of a column of distinct values (every value its own).

    Looser than :func:`sdc_magic.linking.identity.recoded`, which ties rows of *two* frames by
    their labels (unrelated data sets numbered alike must stay apart): here the frame was found by
    the very labels of ``s`` in the user's namespace, and ``s`` only has to belong to it."""
    if not s.index.equals(column.index):
        return False
    keep = s.notna().to_numpy()
    if int(keep.sum()) < MIN_REPEATS:
        return False
    theirs, _ = pd.factorize(column.to_numpy()[keep], use_na_sentinel=True)
    mine, _ = pd.factorize(s.to_numpy()[keep], use_na_sentinel=True)
    n_theirs = len(np.unique(theirs))
    pairs = np.unique(theirs.astype(np.int64) * (int(mine.max()) + 2) + mine.astype(np.int64) + 1)
    if len(pairs) != n_theirs:
        return False  # a value of the column maps to two of the Series'
    equal_where_kept = bool((column.to_numpy()[keep] == s.to_numpy()[keep]).all()) if s.dtype == column.dtype \
        else False
    return equal_where_kept or int(keep.sum()) - n_theirs >= MIN_REPEATS
