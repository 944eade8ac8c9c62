"""Hidden cells a derived table inherits from the captured table it was computed from.

A table computed *from* a captured aggregate with arithmetic pandas does not record
(``cumsum``, ``diff``, ``pct_change``, ``s / len(df)``, ``np.log(s)``, ``s.max() - s``,
``shift``, ``rolling``) has no evidence of its own: it is checked as ``unverified``, whole
numbers as counts. Its values can still give back the small cell the captured table hid:
a cumulative count ``40, 70, 73`` gives ``C = 73 - 70 = 3``; a share ``0.041`` of 73
people is 3. (Red team, pandas: 13 of 31 transforms of a count table showed a figure
recovering a hidden cell, at ``review``.)

Such a table carries the labels of its parent. Its cells are hidden where the parent,
protected on its own, hides a cell with the same labels (whatever the measure), and
wherever it shows a number equal to a value the parent hides (``shift`` moves a hidden
value under another label). The table stays ``review``: this is damage limitation for
what is on screen, not a proof; only tables with evidence are cleared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.flatten import Flat, numeric

#: Larger unverified tables are not matched to a parent (they are checked as counts only).
MAX_DERIVED_CELLS = 100_000
#: Captured entries looked at, most recently used first.
MAX_PARENTS = 32
#: Parents larger than this are judged by their primary cells only (no secondary run).
MAX_PROTECTED_PARENT_CELLS = 5_000
#: Protected parents remembered (per entry object).
_CACHE_SIZE = 16
_cache: dict[int, tuple[Any, Any, frozenset[tuple], np.ndarray, int | None]] = {}


@dataclass
class Inherited:
    """Cells of the derived table to hide (per flat cell), and why."""

    hidden: np.ndarray
    parent_call: str
    note: str


#: how the caller protects a parent on its own: ``hidden_of(entry, protect)`` gives the entry's
#: hidden cells (``protect`` False: primary cells only, for parents too large to protect here)
HiddenOf = Callable[[Any, bool], np.ndarray]


def inherit(flat: Flat, registry: Any, rules: Any, hidden_of: HiddenOf, recorded: bool = False
            ) -> Inherited | None:
    """The hidden cells ``flat`` inherits from its most likely parent, or None.

    The parent's own protection comes from ``hidden_of`` (the checking pipeline passes it), so
    this module needs nothing of the pipeline that calls it. ``recorded``: the table has a recipe
    (its replay finds exactly what moves, :mod:`.lineage`); without one, a table that is not a
    cell-by-cell function of its parent hides every number that is not the parent's own."""
    if flat is None or len(flat) == 0 or not flat.dims or len(flat) > MAX_DERIVED_CELLS:
        return None
    shown = numeric(flat.values)
    best: tuple[float, int, Any, np.ndarray] | None = None
    for rank, entry in enumerate(registry.entries()[:MAX_PARENTS]):
        mapped = _map_labels(flat, entry.flat)
        if mapped is None:
            continue
        found, keys = mapped
        score = float(found.mean())
        if score < 0.5 or (int(found.sum()) < 2 and len(flat) > 1):
            continue
        if best is None or score > best[0]:
            best = (score, rank, entry, keys)
    if best is None:
        return None
    _, _, entry, keys = best
    hidden_keys, hidden_values = _parent_hidden(entry, rules, hidden_of)
    if not hidden_keys:
        return None
    hidden = np.fromiter((k in hidden_keys for k in keys), dtype=bool, count=len(keys))
    if shown is not None and len(hidden_values):
        finite = np.isfinite(shown)
        # a hidden value moved under another label (shift, reversed values): hidden too
        same = np.zeros(len(shown), dtype=bool)
        same[finite] = np.isin(np.round(shown[finite], 6), np.round(hidden_values, 6))
        hidden |= same
    mixed = None if recorded else _not_cellwise(shown, keys, entry, np.asarray(flat.col_pos))
    if mixed is not None:
        # not a function of each cell alone (a running total, differences of neighbours, made
        # with numpy and wrapped back): a number that is not the parent's own may hold a hidden one
        hidden |= mixed
    if not hidden.any():
        return None
    note = (f"computed from {entry.call}, which hides {len(hidden_keys)} cell(s) on its own: the same rows are "
            "hidden here, and any number equal to a hidden value (this table has no evidence of its own)")
    if mixed is not None and mixed.any():
        note += ("; its numbers are not a function of each cell alone (a running total or differences?), so "
                 "those that are not the parent's own published values are hidden too")
    return Inherited(hidden=hidden, parent_call=entry.call, note=note)


def _not_cellwise(shown: np.ndarray | None, keys: list[tuple], entry: Any, columns: np.ndarray
                  ) -> np.ndarray | None:
    """Cells to hide when the table is not a cell-by-cell function of its parent, else None.

    Why (red team, round 7): ``pd.Series(t.values.cumsum(), index=t.index)`` carries no recipe;
    its April shows 397 beside February's 255, and April's own 140 is published: March = 2.
    A cell-by-cell transform (a scale, a log, a rank) maps equal parent values to equal values
    and keeps or reverses their order; a running total or a difference of neighbours does not.
    Then every cell that is not the parent's own published value at its labels is hidden.
    Judged column by column: a column copied from the parent beside a computed one is cellwise.
    """
    if shown is None or len(shown) < 3 or any(None in k for k in keys):
        return None
    parent = numeric(entry.flat.values)
    if parent is None:
        return None
    index = {tuple(entry.flat.dims[p][i] for p in entry.flat.dim_names): float(parent[i]) for i in range(len(parent))}
    theirs = np.array([index.get(k, np.nan) for k in keys], dtype=float)
    usable = np.isfinite(theirs) & np.isfinite(shown)
    out = np.zeros(len(shown), dtype=bool)
    for col in np.unique(columns):
        here = usable & (columns == col)
        if here.sum() >= 3 and not _monotone(theirs[here], shown[here]):
            out |= here & ~np.isclose(shown, theirs, rtol=1e-9, atol=1e-9)
    return out if out.any() else None


def _monotone(p: np.ndarray, d: np.ndarray) -> bool:
    """``d`` is a function of ``p`` that keeps or reverses its order (equal p, equal d)."""
    order = np.lexsort((d, p))
    p, d = p[order], d[order]
    same_p = np.diff(p) == 0
    steps = np.diff(d)
    tol = 1e-9 * np.abs(d[1:]).clip(min=1)
    if (same_p & (np.abs(steps) > tol)).any():
        return False
    steps, tol = steps[~same_p], tol[~same_p]
    return bool((steps >= -tol).all()) or bool((steps <= tol).all())


def _map_labels(flat: Flat, parent: Flat) -> tuple[np.ndarray, list[tuple]] | None:
    """Per displayed cell, whether its labels are a parent cell's labels, and its key in the
    parent's dimension order. Dimensions are matched by name, or, when the names differ
    (an unnamed index after arithmetic), by the labels they hold."""
    names = list(flat.dim_names)
    pnames = list(parent.dim_names)
    if not names or not pnames or len(names) > len(pnames) or len(pnames) > 4:
        return None
    plabels = {p: set(pd.unique(pd.Index(parent.dims[p], dtype=object))) for p in pnames}
    order: list[str] | None = None
    if set(names) <= set(pnames):
        order = names
    else:
        best = -1
        for cand in permutations(pnames, len(names)):
            hits = sum(int(pd.Index(flat.dims[n], dtype=object).isin(list(plabels[c])).sum())
                       for n, c in zip(names, cand, strict=True))
            if hits > best:
                best, order = hits, list(cand)
    assert order is not None
    cols = [pd.Index(flat.dims[n], dtype=object) for n in names]
    found = np.ones(len(flat), dtype=bool)
    for idx, c in zip(cols, order, strict=True):
        found &= np.asarray(idx.isin(list(plabels[c])))
    # a key over the parent's dimensions: the displayed ones, the others left open (None)
    positions = {c: i for i, c in enumerate(order)}
    open_dim = [None] * len(flat)
    keys = list(zip(*[cols[positions[p]].tolist() if p in positions else open_dim for p in pnames], strict=True))
    return found, keys


def _parent_hidden(entry: Any, rules: Any, hidden_of: HiddenOf) -> tuple[frozenset[tuple], np.ndarray]:
    """The parent's hidden cells, protected on its own: their label keys (with every partial
    key a derived table of fewer dimensions would use) and their values."""
    cached = _cache.get(id(entry))
    marks = entry.displayed_hidden
    # (a display marks more cells after the look-up: helper-91, a parent looked up before its
    # display kept its old answer and a rebuild of its hidden margin showed 614)
    stamp = None if marks is None else int(np.count_nonzero(marks))
    if cached is not None and cached[0] is entry and cached[1] is rules and cached[4] == stamp:
        return cached[2], cached[3]
    hidden = hidden_of(entry, len(entry.flat) <= MAX_PROTECTED_PARENT_CELLS)
    pnames = list(entry.flat.dim_names)
    keys: set[tuple] = set()
    for i in np.flatnonzero(hidden):
        full = tuple(entry.flat.dims[p][i] for p in pnames)
        keys.add(full)
        n = len(full)
        for mask in range(1, 1 << n):  # partial keys: a derived table over some of the dimensions
            keys.add(tuple(full[j] if mask >> j & 1 else None for j in range(n)))
    values = numeric(entry.flat.values)
    hidden_values = values[hidden & np.isfinite(values)] if values is not None else np.zeros(0)
    hidden_values = hidden_values[hidden_values != 0]  # a zero is everywhere in derived tables
    out = (frozenset(keys), np.unique(hidden_values))
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[id(entry)] = (entry, rules, *out, stamp)
    return out


def remember_displayed_hidden(checked: Any) -> None:
    """Mark on the displayed table's entry the cells its final decision hides (every cell it
    displays when it is blocked), so that a selection or a function of the table object hides them too
    (``Entry.displayed_hidden``): the table's own protection recomputed for the parent does not
    know the cells the joint audit with earlier outputs hid."""
    entry = getattr(checked, "entry", None)
    positions = getattr(checked, "entry_positions", None)
    if entry is None or getattr(checked, "kind", None) != "table":
        return
    n = len(entry.flat)
    marked = np.zeros(n, dtype=bool) if entry.displayed_hidden is None or len(entry.displayed_hidden) != n \
        else entry.displayed_hidden.copy()
    if positions is not None and checked.status == "blocked":
        # (the cells it displayed: a blocked selection of two cells hid nothing else of its parent,
        # which its other displays judge; helper-91)
        at = np.asarray(positions)
        marked[at[(at >= 0) & (at < n)]] = True
    elif checked.status == "blocked":
        marked[:] = True
    elif positions is not None and getattr(checked, "hidden_flat", None) is not None:
        at = np.asarray(positions)
        hidden = np.asarray(checked.hidden_flat, dtype=bool)
        if len(at) == len(hidden):
            chosen = at[hidden & (at >= 0)]
            marked[chosen[chosen < n]] = True
    entry.displayed_hidden = marked

