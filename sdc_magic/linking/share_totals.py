"""Totals a table of shares tells: a share beside any count of its group gives the group's total.

Why (red team of stop 67, helper-90): linking modelled a share cell as publishing its count,
like a count table, and its group's total as unpublished, as for any table that shows no margins.
But a group's shares sum to 1 and each is ``n / N``: with one count ``n`` of the group known (any
earlier or later output, or the same rows counted again), ``N = n / s`` (226 / 0.368078 = 614,
then 320 + 296 − 614 = 2 women in district C). So a table of shares is linked as publishing the
total of every group it shows a share of some rows in (``Population.totals_of``); a total is no
longer told once every share of its group is hidden, which is how the joint audit protects it
(it hides the new table's cells one by one, and the published totals follow). Conservative: the
shares alone tell only ratios, but almost every session shows the same rows counted somewhere.

The groups are those of ``normalize=`` (pandas ``crosstab``, ``value_counts``) and of the
partition of a DuckDB share window (``count(*) / sum(count(*)) OVER (PARTITION BY sex)``, the
entry's ``totals_shown``). When they are not levels of the population's keys, every margin of
the table counts as published (``margins_public``): never less than the shares tell.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def levels_told(entry: Any, keys: tuple[str, ...]) -> tuple[tuple[tuple[str, ...], ...], bool]:
    """(levels of ``keys`` whose totals the entry's shares tell, True when some shares' groups are
    no level of ``keys``: then every margin counts as told)."""
    wanted: list[tuple[str, ...]] = list(getattr(entry, "totals_shown", ()) or ())
    normalized = getattr(entry, "normalized", None)
    if normalized is not None:
        wanted.append(tuple(normalized))
    names = [str(k) for k in keys]
    levels: list[tuple[str, ...]] = []
    unplaced = False
    for within in wanted:
        if not {str(d) for d in within} <= set(names):
            unplaced = True
            continue
        level = tuple(k for k in keys if str(k) in {str(d) for d in within})
        if level not in levels:
            levels.append(level)
    return tuple(levels), unplaced


def told(pop: Any, subset: tuple[str, ...], published: np.ndarray) -> np.ndarray:
    """Per group of ``pop``'s level ``subset``: whether its total is told by the shares, i.e.
    every group of a shares level inside it shows a cell of some rows (a share of 0 tells no
    total); the grand total also when a displayed margin of some rows is shown (``margins=True``:
    the All row of ``normalize="all"`` shows 416 / 1203, and 416 is public)."""
    mapping, labels = pop.level(subset)
    out = np.zeros(len(labels), dtype=bool)
    if not subset and _a_margin_shown(pop):
        out[:] = True
    shown = np.asarray(published, dtype=bool) & (np.asarray(pop.size) > 0)
    for within in pop.totals_of:
        if not set(subset) <= set(within):
            continue
        fine, fine_labels = pop.level(within)
        fine_told = np.bincount(fine, weights=shown, minlength=len(fine_labels)) > 0
        out |= np.bincount(mapping, weights=~fine_told[fine], minlength=len(labels)) == 0
    return out


def _a_margin_shown(pop: Any) -> bool:
    """Whether the table displays a margin of some rows that its display did not hide (a share of
    a margin tells the grand total it is a share of: red team of stop 68)."""
    if not pop.margins_public:
        return False
    for level in pop.levels():
        if level in (pop.keys, ()):
            continue
        mapping, labels = pop.level(level)
        sizes = np.bincount(mapping, weights=pop.size, minlength=len(labels))
        shown = sizes > 0
        for hidden in (pop.hidden_model.get(level), pop.margins_hidden.get(level)):
            for g in hidden or ():
                if 0 <= g < len(shown):
                    shown[g] = False
        if shown.any():
            return True
    return False
