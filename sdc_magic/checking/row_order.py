"""The order a checked table's rows are drawn in: only what its published cells explain.

Why: the order of rows is information too. Sorted by a column the table shows, a hidden cell
between two published values is bounded by them (✕ between 3 and 2 is 2 or 3), and hidden cells
listed in value order bound each other (issue 23.13). Sorted by anything else, the order tells
that thing: ``ORDER BY CASE WHEN district = 'C' AND sex = 'M' THEN avg(age) ELSE t END`` put C's
hidden row first when his age is below t (red team, helper-40: t = 70.5, then 71.5, gave 71), and
a key built from hidden figures can place published rows (two of A's rows swapped by C's mean,
helper-41), through ``sort_values``, ``reindex``, ``iloc[argsort]``, a stable re-sort's ties,
polars' ``sort``, DuckDB's ``ORDER BY``, a subquery: no capture can follow every way. So the
order is judged on what is displayed, whatever made it:

* rows in ascending label order (a categorical's order) stay as they are;
* rows in the order of a column the table shows, judged on its *published* values only (a test
  that read the hidden ones told whether they broke the order, helper-41), are kept in that order,
  and rows with hidden cells go last in label order (with a note, whenever the table has such
  rows: a note only when rows moved would tell whether they were in place);
* any other order is replaced by label order, silently (with a note only for some tables, its
  presence would tell which).

Labels are the index, or for a frame with a default integer index (a polars, DuckDB or Spark result
shown with its keys as columns) its text columns and the numeric columns it shows whole.
``describe`` tables keep their rows: statistics in their own order, not groups. Every grid of the
decision is permuted with the frame, so render, CSV and certificate agree.

What it does not close (decided, docs/known-gaps.md): an order built on purpose to be label order
or a shown column's order depending on a figure can still carry that one bit per table, and the
order of ties in a shown column's order is the analyst's; what it closes is an analyst's sort by
something the table does not show, which no longer shows. Rows the analyst sorted by descending
labels are drawn ascending (over-protection, decided: see above).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..evidence.flatten import numeric

HIDDEN_LAST_NOTE = ("rows were ordered by value: rows with hidden cells are listed last, in label order, "
                    "so that their position reveals nothing about their values")


def settle_row_order(checked: Any) -> Any:
    """``checked`` with its rows in an order its published cells explain (see the module docstring).

    Margin rows (a crosstab's ``All``, a rollup's totals) come after the others, in label order
    (kept in their places, a rollup sorted by an unshown figure placed C's margin by it); labels
    that repeat (``pd.concat([t, t])``) keep their order among themselves (left as they were, a
    table concatenated with one of its own rows kept any order).
    """
    grid = checked.frame.to_frame() if isinstance(checked.frame, pd.Series) else checked.frame
    hidden = np.asarray(checked.hidden, dtype=bool)
    if len(grid) < 2 or hidden.shape != grid.shape or "describe" in str(getattr(checked, "call", "") or ""):
        return checked
    margin = _margin_rows(checked, grid)
    labels = _row_labels(grid, hidden)
    rank = _label_rank(labels)
    body, totals = np.flatnonzero(~margin), np.flatnonzero(margin)
    totals = totals[np.argsort(rank[totals], kind="stable")]
    if _monotone(labels[body]) and (not len(totals) or margin.argmax() > body.max(initial=-1)):
        # ordered by label: the order says nothing about values. (A sort by value that the labels
        # happen to follow, C ✕, B ✕, A 40, tells C ≤ B; moving such rows reordered honest tables
        # sorted by month whenever a column grew month by month: left, a known gap.)
        return _reorder_rows(checked, np.concatenate([body, totals]), None)
    if len(body) < 2 or _published_order(grid.iloc[body], hidden[body]) is None:
        return _reorder_rows(checked, np.concatenate([body[np.argsort(rank[body], kind="stable")], totals]), None)
    # in a shown column's order: published rows as they are, rows with hidden cells last in label order
    rows_hidden = hidden[body].any(axis=1)
    later = body[rows_hidden]
    later = later[np.argsort(rank[later], kind="stable")]
    note = HIDDEN_LAST_NOTE if len(later) else None
    return _reorder_rows(checked, np.concatenate([body[~rows_hidden], later, totals]), note)


def _margin_rows(checked: Any, grid: pd.DataFrame) -> np.ndarray:
    """Rows every displayed cell of which is a margin of the captured table (evidence), or, without
    evidence, rows labelled ``All`` or ``Total`` at some level."""
    n = len(grid)
    entry = getattr(checked, "entry", None)
    positions, rows = getattr(checked, "entry_positions", None), getattr(checked, "cell_rows", None)
    margin = getattr(getattr(entry, "evidence", None), "is_margin", None)
    if margin is not None and positions is not None and rows is not None:
        margin = np.asarray(margin, dtype=bool)
        positions, rows = np.asarray(positions), np.asarray(rows)
        ok = positions >= 0
        cell_is_margin = np.zeros(len(positions), dtype=bool)
        cell_is_margin[ok] = margin[positions[ok]]
        any_cell = np.bincount(rows, minlength=n) > 0
        not_margin = np.bincount(rows[~cell_is_margin], minlength=n) > 0
        return any_cell & ~not_margin
    out = np.zeros(n, dtype=bool)
    for i, label in enumerate(grid.index):
        parts = label if isinstance(label, tuple) else (label,)
        out[i] = any(isinstance(p, str) and p.rstrip("\u200b") in ("All", "Total") for p in parts)
    return out


def _row_labels(grid: pd.DataFrame, hidden: np.ndarray) -> pd.Index:
    """The labels of the rows: the index, or for a frame with a default integer index its text
    columns followed by the numeric columns it shows whole (no hidden cell in them)."""
    if not isinstance(grid.index, pd.RangeIndex):
        return grid.index
    text = [c for c in grid.columns
            if not (pd.api.types.is_numeric_dtype(grid[c]) and not pd.api.types.is_bool_dtype(grid[c]))]
    whole = [c for j, c in enumerate(grid.columns)
             if c not in text and not hidden[:, j].any() and pd.api.types.is_integer_dtype(grid[c])]
    columns = text + whole
    if not columns or not grid.columns.is_unique:
        return grid.index
    for frame in (grid[columns], grid[columns].astype(str)):  # (categories keep their order; else as text)
        try:
            index = pd.MultiIndex.from_frame(frame) if len(columns) > 1 else pd.Index(frame.iloc[:, 0])
            _ = index.is_monotonic_increasing
            return index
        except (TypeError, ValueError):
            continue
    return grid.index


def _monotone(labels: pd.Index) -> bool:
    """Ascending label order. (Descending too gave an order two ways to stand: a sort of two groups
    by an unshown figure, the mean incomes of women and men, is always one or the other, and a
    polars sort by a shown count whose ties an unshown key broke came out exactly descending in the
    red team's table for one threshold only.)"""
    try:
        return bool(labels.is_monotonic_increasing)
    except TypeError:
        return False


def _label_rank(labels: pd.Index) -> np.ndarray:
    """Each row's place in label order (as the labels sort: 2 before 10; as text when they do not)."""
    try:  # (stable: repeated labels keep their order among themselves)
        order = np.asarray(labels.argsort() if isinstance(labels, pd.MultiIndex) else labels.argsort(kind="stable"),
                           dtype=np.int64)
    except (TypeError, ValueError):
        try:
            order = np.argsort(labels.map(str).to_numpy(dtype=str), kind="stable")
        except (TypeError, ValueError):
            order = np.arange(len(labels))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _published_order(grid: pd.DataFrame, hidden: np.ndarray) -> tuple[int, int] | None:
    """(column, +1 ascending / −1 descending) of the first column whose published values, rows with
    hidden cells left out, follow the displayed order (at least three, not all equal); or None."""
    published_rows = ~hidden.any(axis=1)
    for j in range(grid.shape[1]):
        values = numeric(np.asarray(grid.iloc[:, j].to_numpy(dtype=object)))
        if values is None:
            continue
        seen = values[published_rows]
        seen = seen[np.isfinite(seen)]
        if len(seen) < 3 or np.all(seen == seen[0]):
            continue
        steps = np.diff(seen)
        if (steps >= 0).all():
            return j, 1
        if (steps <= 0).all():
            return j, -1
    return None


def _reorder_rows(checked: Any, perm: np.ndarray, note: str | None) -> Any:
    """``checked`` with its rows in the order ``perm`` (every grid of the decision with them)."""
    perm = np.asarray(perm, dtype=np.int64)
    if note is not None and note not in checked.notes:
        checked.notes.append(note)
    if (perm == np.arange(len(perm))).all():
        return checked
    new_of_old = np.empty_like(perm)
    new_of_old[perm] = np.arange(len(perm))
    synthetic = isinstance(checked.frame.index, pd.RangeIndex)
    checked.frame = checked.frame.iloc[perm]
    if synthetic:  # row numbers, not labels: renumbered, or they would tell the sorted order
        checked.frame = checked.frame.set_axis(pd.RangeIndex(len(perm)), axis=0)
    checked.hidden = checked.hidden[perm]
    if checked.unverified is not None:
        checked.unverified = checked.unverified[perm]
    checked.reasons = {(int(new_of_old[r]), c): v for (r, c), v in checked.reasons.items()}
    checked.intervals = {(int(new_of_old[r]), c): v for (r, c), v in checked.intervals.items()}
    if checked.cell_rows is not None:
        checked.cell_rows = new_of_old[checked.cell_rows]
    return checked
