"""Group ids per row and group labels for the pandas capture, computed once per call.

Why a module: the evidence of a table (sizes, top contributions) and linking both need the group
of every row; pandas has already grouped the rows for the user's own call (and, for ``crosstab``
and ``pivot_table``, for the nested ``groupby`` they make), so the capture takes that grouping
when it can (:func:`reusable_grouping`), derives coarser ones from it (:func:`coarser_grouping`,
margins) and groups again only when neither works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .depth import depth


def ids_and_index(gb: Any) -> tuple[np.ndarray, pd.Index]:
    """The group id of each row and the groups' labels of a pandas GroupBy (its cached factorisation)."""
    grouper = gb._grouper
    ids = grouper.ids if hasattr(grouper, "ids") else grouper.group_info[0]
    return np.asarray(ids), grouper.result_index


def grouping_of(frame: pd.DataFrame, keys: list[str], dropna: bool, reuse: bool = False,
                within: tuple[np.ndarray, pd.Index] | None = None) -> tuple[np.ndarray, pd.Index]:
    """The group id of each row of ``frame`` by ``keys`` and the groups' labels (pandas' numbering)."""
    if not keys:
        return np.zeros(len(frame), dtype=np.int64), pd.Index(["__all__"])
    if within is not None and [str(n) for n in within[1].names] == [str(k) for k in keys]:
        return within  # (the table's own grouping: nothing to derive)
    found = reusable_grouping(frame, keys) if reuse else None
    if found is None and within is not None:
        found = coarser_grouping(*within, keys)
    if found is None:
        found = ids_and_index(frame.groupby(keys, dropna=dropna, observed=True, sort=False))
    return found


def coarser_grouping(ids: np.ndarray, index: pd.Index, keys: list[str]) -> tuple[np.ndarray, pd.Index] | None:
    """The grouping by ``keys`` derived from a finer one (``ids`` per row, groups ``index`` over
    more keys), as ``groupby(keys, observed=True, sort=False)`` numbers it: groups in order of
    first appearance (the finer groups are, so the first finer group of a coarse one holds its
    first row). None when a row is outside the finer groups (a missing key the coarse grouping
    may keep) or the keys are not its levels. Why: a crosstab with margins grouped its million
    rows once per margin (a third of a skewed crosstab's capture); this is one pass of ``take``.
    """
    ids = np.asarray(ids)
    names = [str(n) for n in index.names]
    if not len(ids) or (ids < 0).any() or not set(keys) <= set(names) or len(set(names)) != len(names):
        return None
    if isinstance(index, pd.MultiIndex):
        levels = [index.get_level_values(names.index(k)) for k in keys]
        coarse = pd.MultiIndex.from_arrays(levels, names=keys) if len(keys) > 1 else levels[0].rename(keys[0])
    else:
        coarse = index.rename(keys[0])
    codes, uniques = coarse.factorize(sort=False)
    if (codes < 0).any():
        return None
    uniques = uniques.set_names(keys) if isinstance(uniques, pd.MultiIndex) else pd.Index(uniques, name=keys[0])
    return codes[ids], uniques


def reusable_grouping(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index] | None:
    """Group ids that a nested call of the current call already computed for these rows and keys."""
    for gb in depth.groupings or []:
        obj = getattr(gb, "obj", None)
        if obj is None or len(obj) != len(frame):
            continue
        try:
            ids, index = ids_and_index(gb)
        except AttributeError:
            continue
        if not (obj.index is frame.index or obj.index.equals(frame.index)):
            continue
        names = [str(n) for n in index.names]
        if names == [str(k) for k in keys]:
            return np.asarray(ids), index
        if _same_key_columns(gb, names, frame, keys):
            return np.asarray(ids), index.set_names(keys)
    return None


def _same_key_columns(gb: Any, names: list[str], frame: pd.DataFrame, keys: list[str]) -> bool:
    """Whether a nested grouping's key columns ``names`` hold, in order, the values of ``frame``'s ``keys``.

    Why: pandas 3's ``crosstab`` groups its arrays under names of its own (``row_0``, ``col_0``)
    before putting the caller's back, so its grouping was not recognised and the capture grouped
    the million rows again (0.05 s of a 1M-row crosstab). Columns compared with ``Series.equals``
    (dtype, labels and values; free when pandas shares the arrays, as it does here).
    """
    obj = gb.obj
    if len(names) != len(keys) or [str(k) for k in getattr(gb, "keys", None) or []] != names:
        return False
    if not isinstance(obj, pd.DataFrame) or not obj.columns.is_unique or not frame.columns.is_unique:
        return False
    try:
        return all(obj[n].equals(frame[k]) for n, k in zip(names, keys, strict=True))
    except (KeyError, TypeError, ValueError):
        return False
