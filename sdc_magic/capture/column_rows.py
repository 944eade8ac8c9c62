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


def unit_of_rows(keys: Iterable[pd.Series], index: pd.Index, unit: str, find: FrameFinder) -> pd.Series | None:
    """The declared unit column at the labels ``index``, read from the user's frame that the
    table's key columns ``keys`` were taken from, or None.

    Why (over-protection, stop 67): ``pd.crosstab(df[df.age > 20].sex, df[df.age > 20].edu)`` and
    ``df[df.age > 30].edu.value_counts()`` with ``unit=hh`` went to ``review`` ("unit column not
    found"): the filtered frame is no variable, and only a frame with the very same labels was
    looked for, whose rows were not checked to be the table's at all.

    A frame of the user's with the unit column is taken when the keys *fit* it (:func:`_fits`):
    every key it has a column of is equal to that column at the keys' labels, and at least one of
    them is not constant over at least ``MIN_REPEATS`` rows (a constant key, ``assign(k="all")``,
    fits any frame; red team of stop 67: a renumbered copy of the adults fitted ``df`` at other
    people's labels). Every frame that fits is read: if two give other households (a copy with one
    household per person), which one the table came from is unknown and None is returned (the rows
    are counted as units and the table goes to review). A frame the finder cannot see (held in a
    dict, or with duplicate labels) is not compared: see docs/known-gaps.md."""
    keys = [k for k in keys if isinstance(k, pd.Series) and k.name is not None]
    probe = next((k for k in keys if len(k) >= MIN_REPEATS and k.nunique(dropna=True) >= 2), None)
    if probe is None:
        return None
    units: list[pd.Series] = []
    for whole in find(probe.index, unit, "any"):
        found = _fits(whole, keys, unit)
        if found is UNREADABLE:
            return None  # (a frame that could be the source, whose rows cannot be placed by label)
        if isinstance(found, pd.Series):
            units.append(found)
    if not units:
        return None
    first = pd.factorize(units[0].to_numpy())[0]
    if any(not np.array_equal(pd.factorize(u.to_numpy())[0], first) for u in units[1:]):
        return None  # (the same partition under another type, hh as float, is the same households)
    found = units[0]
    if found.index.equals(index):
        return found
    if not found.index.is_unique or not bool(index.isin(found.index).all()):
        return None
    return found.reindex(index)


#: :func:`_fits`' answer for a frame with the unit column and the keys' names whose duplicate
#: labels hold the keys' labels: it could be their source, and cannot be compared
UNREADABLE = "unreadable"


def _fits(whole: pd.DataFrame, keys: list[pd.Series], unit: str) -> pd.Series | str | None:
    """``whole``'s unit column at the keys' labels when the keys fit ``whole`` (see
    :func:`unit_of_rows`), :data:`UNREADABLE`, or None."""
    columns = whole.columns
    if not columns.is_unique:
        unique = ~columns.duplicated(keep=False)
        if unit not in set(columns[unique]):
            return None
    else:
        unique = np.ones(len(columns), dtype=bool)
    names = set(columns[unique])
    fitted = False
    for k in keys:
        if k.name not in names:
            continue
        column = whole[k.name]
        if not (column.index is k.index or column.index.equals(k.index)):
            if not bool(k.index.isin(whole.index).all()):
                return None
            if not whole.index.is_unique:
                return UNREADABLE
            column = column.loc[k.index]
        mine, theirs = k.to_numpy(dtype=object), column.to_numpy(dtype=object)
        if len(mine) != len(theirs) or not bool(pd.Series(mine).equals(pd.Series(theirs))):
            return None  # (a key the frame has, with other values at these labels: not its rows)
        fitted = fitted or (len(k) >= MIN_REPEATS and k.nunique(dropna=True) >= 2)
    if not fitted:
        return None
    found = whole[unit]
    probe = keys[0].index
    if not (found.index is probe or found.index.equals(probe)):
        found = found.loc[probe] if whole.index.is_unique and bool(probe.isin(whole.index).all()) else None
    return found


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
