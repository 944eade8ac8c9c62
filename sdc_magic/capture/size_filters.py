"""Rows kept by the size of their group, then tabulated: the groups shown tell their sizes (issue 23).

Red team: ``df.groupby(k).filter(lambda g: len(g) == 2 or len(g) > 15)`` or
``df[df.groupby(k).x.transform("size").isin([2, 20])]``, then ``groupby(k).size()``, drew
"C F ✕" beside A's 20s with B's 15s left out: C F is 2. The table is a new aggregate, not a
selection of a checked one, so neither the lineage nor the selection rules saw it.

The capture marks a group-size column (``transform("size")`` / ``"count"``), the masks computed
from it by comparisons, and the frames a size mask or ``GroupBy.filter`` keeps (:func:`carry`, called
by the derived-table wrappers of :mod:`.derivations` that every comparison and selection passes). When the sizes of
the groups kept and left out interleave (kept on both sides of some left out, no size on both
sides), the frame is marked selected by values (``contract.mark_selected_by_values``): a table of
it that hides any cell is withheld. A one-sided choice (``len(g) >= 5``) is left alone, as for
filters on figures the capture reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.typing import DataFrameGroupBy, SeriesGroupBy

from .contract import mark_selected_by_values, weak_marks
from .depth import depth as _depth

REASON = ("the rows tabulated were kept by the size of their group (a groupby filter or a mask of group sizes) "
          "on both sides of sizes left out")
_sizes = weak_marks()  # group-size column -> True
_size_masks = weak_marks()  # boolean mask -> the group sizes it was computed from (numpy)


def interleaved(kept: np.ndarray, left_out: np.ndarray) -> bool:
    """Whether kept sizes lie on both sides of left-out ones, with no size on both sides."""
    kept, left_out = np.unique(kept), np.unique(left_out)
    if not len(kept) or not len(left_out) or np.intersect1d(kept, left_out).size:
        return False
    return bool(kept.min() < left_out.max() and kept.max() > left_out.min())


class SizeFilters:
    """Installs the wrappers through the capture's ``patch`` (which undoes them)."""

    def __init__(self, failures: list[str], patch: Callable[[object, str, Any], None]) -> None:
        self.failures = failures
        self.patch = patch

    def install(self) -> None:
        """``GroupBy.transform`` / ``filter``; masks and selections are followed by the derived-table
        wrappers pandas' comparisons and selections already pass through (:func:`carry`)."""
        for cls in (DataFrameGroupBy, SeriesGroupBy):
            self.patch(cls, "transform", self._transform(cls.transform))
            self.patch(cls, "filter", self._filter(cls.filter))

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # never break user code
            self.failures.append(f"size filters: {type(exc).__name__}: {exc}")

    def _transform(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def transform(gb: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(gb, func, *args, **kwargs)
            if not _depth.value and func in ("size", "count", len) and isinstance(result, pd.Series):
                self._guard(lambda: _sizes.set(result, True))
            return result
        transform.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return transform

    def _filter(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def filter_(gb: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(gb, func, *args, **kwargs)
            if not _depth.value and isinstance(result, pd.DataFrame | pd.Series):
                self._guard(lambda: self._mark_filtered(gb, result))
            return result
        filter_.__sdc_magic_wrapper__ = True  # type: ignore[attr-defined]
        return filter_

    def _mark_filtered(self, gb: Any, result: Any) -> None:
        _depth.value += 1
        try:
            ids = np.asarray(gb.ngroup(), dtype=np.int64)
            sizes = np.bincount(ids[ids >= 0]) if (ids >= 0).any() else np.zeros(0, dtype=np.int64)
            kept_rows = gb.obj.index.isin(result.index)
        finally:
            _depth.value -= 1
        kept_groups = np.unique(ids[(ids >= 0) & kept_rows])
        left = np.setdiff1d(np.arange(len(sizes)), kept_groups)
        if interleaved(sizes[kept_groups], sizes[left]):
            mark_selected_by_values(result, REASON)


def carry(args: tuple, result: Any) -> None:
    """Follow group sizes through a call the derived-table wrappers saw: a comparison of a size column
    (or a combination of size masks: ``(n == 2) | (n > 15)``, ``~(n != 2)``) is a size mask; the rows
    a size mask selects (``df[mask]``, ``df.loc[mask, ...]``) are marked when the sizes kept and left
    out interleave. Two weak look-ups when nothing is a size (the hot path of every comparison)."""
    if not args or not isinstance(result, pd.DataFrame | pd.Series):
        return
    first = args[0]
    if isinstance(result, pd.Series) and pd.api.types.is_bool_dtype(result.dtype):
        if isinstance(first, pd.Series) and _sizes.get(first):
            _size_masks.set(result, np.asarray(first.to_numpy(), dtype=float))
            return
        for operand in args:
            sizes = _size_masks.get(operand) if isinstance(operand, pd.Series) else None
            if sizes is not None and len(sizes) == len(result):
                _size_masks.set(result, sizes)
                return
    if len(args) < 2:
        return
    key = args[1][0] if isinstance(args[1], tuple) and args[1] else args[1]
    sizes = _size_masks.get(key) if isinstance(key, pd.Series) else None
    if sizes is not None and len(sizes) == len(key):
        mask = np.asarray(key.to_numpy(), dtype=bool)
        if interleaved(sizes[mask], sizes[~mask]):
            mark_selected_by_values(result, REASON)
