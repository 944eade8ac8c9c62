"""Distinct counts of categories or of units: whether a ``nunique`` cell counts people.

``nunique`` of ``household`` is a number of households (a count: 2 households is a small cell);
``nunique`` of ``sex`` is 1 or 2 whatever the group's size, and hiding it as a small count
blocked every such table (red team, DuckDB ``count(distinct sex)``). The check asks this module
which distinct counts count units (:func:`distinct_counts_units`); the rules judge those by the
threshold.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..config import Rules
from ..evidence.in_engine import InEngineRows, distinct_values

#: A column with at most this share of distinct values among its known values is a
#: categorical variable: a distinct count of it counts categories, not people.
CATEGORY_SHARE = 0.05


def distinct_counts_units(ev: Any, entry: Any, rules: Rules | None) -> np.ndarray | None:
    """Per cell, whether a distinct count counts units rather than categories.

    A variable is categorical when the rules declare it so (``categories``), or when the source
    shows it, over all rows, with at most
    ``CATEGORY_SHARE`` distinct values per known value, and so does the user's frame the rows
    were selected from (``Source.base``; in the engine, the whole base: three people of C with 30
    visits each are 3 values in C's 90 rows, red team of stop 58, R2b), its values recur across
    the table's groups (the cells' distinct counts add up to at least twice its distinct values: a
    unit belongs to a group, a category spans them; three people of 30 visits each were read as a
    category, red team of stop 58), and it is not the declared unit column; when the source is not
    at hand, the distinct count counts units (the stricter reading). The cell's own units are
    judged by the threshold either way.
    """
    stat = np.asarray(ev.stat).astype(str)
    distinct = stat == "nunique"
    if not distinct.any() or entry is None:
        return None
    source = getattr(entry, "source", None)
    frame = getattr(source, "frame", None) if source is not None else None
    if frame is None:
        frame = getattr(source, "rows", None)
    out = np.ones(len(stat), dtype=bool)
    variables = np.asarray(ev.var, dtype=object)
    unit = rules.unit if rules is not None else None
    declared = {str(c) for c in rules.categories} if rules is not None else set()
    for var in {v for v in variables[distinct].tolist() if v is not None and str(v) in declared}:
        out[distinct & (variables == var)] = False  # (declared categories: the user's word decides)
    if isinstance(frame, InEngineRows):  # (the rows left in their engine: asked there)
        for var in {v for v in variables[distinct].tolist()
                    if v is not None and v != "" and v != unit and str(v) not in declared}:
            if _categories_in_engine(ev, distinct & (variables == var), frame, var):
                out[distinct & (variables == var)] = False
        return out
    if not isinstance(frame, pd.DataFrame):
        return out if declared else None
    base: pd.DataFrame | None = None
    for var in {v for v in variables[distinct].tolist() if v is not None and v != ""}:
        if var == unit or var not in frame.columns or str(var) in declared:
            continue
        try:
            found = _share_is_small(frame[var])
            categories = found is not None and _recurring(ev, distinct & (variables == var), found)
            if categories:
                if base is None:
                    base = _base_of(source, frame)
                categories = base is None or var not in base.columns or _share_is_small(base[var]) is not None
        except (TypeError, ValueError):
            continue
        if categories:
            out[distinct & (variables == var)] = False
    return out


def with_categories_read(ev: Any, counts_units: np.ndarray | None, rules: Rules) -> tuple[Rules, list[str]]:
    """The rules the table was checked under, with the columns its distinct counts were read as
    categories of (not declared) added to ``categories``, and those columns.

    Why: the record and the certificate state the rules a release was judged by; an output
    checker (and ``verify``, which judges published counts by the certificate's own rules) must
    see that ``nunique`` of ``village`` was read as categories, not find a count of 4 villages
    below a threshold of 5 and nothing saying why."""
    if counts_units is None:
        return rules, []
    stat = np.asarray(ev.stat).astype(str)
    variables = np.asarray(ev.var, dtype=object)
    read = sorted({str(v) for v in variables[(stat == "nunique") & ~np.asarray(counts_units, dtype=bool)].tolist()
                   if v is not None} - set(rules.categories))
    if not read:
        return rules, []
    return dataclasses.replace(rules, categories=(*rules.categories, *read)), read


def _share_is_small(column: pd.Series) -> int | None:
    """The column's distinct known values when they are at most ``CATEGORY_SHARE`` of its known
    values and the median value has at least 1 / ``CATEGORY_SHARE`` rows (a category's spread),
    else None. (The median: one placeholder id on 2,000 rows made people a category by their
    mean alone; red team of stop 59, F5.)"""
    counts = column.value_counts(dropna=True)
    known, found = int(counts.sum()), len(counts)
    if known <= 0 or found > CATEGORY_SHARE * known or float(counts.median()) < 1 / CATEGORY_SHARE:
        return None
    return found


def _base_of(source: Any, frame: pd.DataFrame) -> pd.DataFrame | None:
    """The user's frame ``frame``'s rows were selected from (``Source.base``: the largest frame
    in the namespace holding all its labels, asked only now), when its values agree on them."""
    find = getattr(source, "base", None)
    if not callable(find):
        return None
    try:
        base = find()
    except Exception:  # (a lookup that fails leaves the frame's own judgment)
        return None
    if not isinstance(base, pd.DataFrame) or len(base) <= len(frame):
        return None
    shared = [c for c in frame.columns if c in base.columns]
    try:
        if not shared or not base[shared].reindex(frame.index).equals(frame[shared]):
            return None
    except (TypeError, ValueError):
        return None
    return base


def _recurring(ev: Any, cells: np.ndarray, distinct: float) -> bool:
    """Whether a variable's ``distinct`` values recur across the table's groups: its cells'
    distinct counts (``cells``, margins aside) add up to at least twice as many."""
    inner = cells & ~np.asarray(ev.is_margin, dtype=bool)
    with np.errstate(invalid="ignore"):
        total = float(np.nan_to_num(np.asarray(ev.value, dtype=float)[inner]).sum())
    return distinct > 0 and total >= 2 * distinct


def _categories_in_engine(ev: Any, cells: np.ndarray, rows: InEngineRows, var: Any) -> bool:
    """Whether ``var`` is categorical (see :func:`distinct_counts_units`) over rows left in their
    engine. The table's cells bound it: its distinct values are at least the largest cell's and
    at most their sum, over the cells' known rows; only when they cannot decide is the engine
    asked (the table's rows and the whole base's)."""
    inner = cells & ~np.asarray(ev.is_margin, dtype=bool)
    with np.errstate(invalid="ignore"):
        values = np.nan_to_num(np.asarray(ev.value, dtype=float)[inner])
        known = float(np.nan_to_num(np.asarray(ev.units, dtype=float)[inner]).sum())
    largest = values.max(initial=0)
    if known <= 0 or largest > CATEGORY_SHARE * known or values.sum() < 2 * largest:
        return False  # (more values than a category has, or too few groups share them)
    counted = distinct_values(rows, str(var))
    if counted is None:
        return False
    found, known, found_in_base, known_in_base = counted
    return known > 0 and found <= CATEGORY_SHARE * known and found_in_base <= CATEGORY_SHARE * known_in_base \
        and _recurring(ev, cells, found)
