"""What the rows a table shows tell: selections by value.

A table's labels are published with its cells. Rows kept by a condition on the figures
(``t[t == 2]``, ``HAVING count(*) = 2``) tell the figures of the hidden cells among them: this
module withholds such tables (:func:`withhold_pinned_labels`, :func:`withhold_if_selected_by_values`).
The order of the rows is :mod:`.row_order`'s. Split from :mod:`.check` (issue 23), which calls it
at the end of every check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.flatten import numeric

ONLY_HIDDEN_ROWS = ("every cell this selection of a table shows is hidden: which rows were chosen can tell their "
                    "figures (t[t == 2], a mask made with numpy or a function). Show the whole table")


def withhold_if_only_hidden_rows(checked: Any, resolved: Any) -> None:
    """Raise :class:`Withheld` when a strict selection of a captured table shows hidden cells only.

    Why (red team, round 8): a mask with no recipe (``t[np.where(t == 2, True, False)]``,
    ``t.loc[lambda s: s == 2]``, ``t.drop(t.index[t != 2])``) cannot be recomputed, and the row
    it keeps, "03 ✕", tells March is 2. A selection that shows nothing but hidden cells publishes
    no figure, so withholding it loses nothing, whatever chose its rows (a positional slice too:
    from the cells alone, ``t.iloc[-1:]`` and ``t[t == 2]`` are the same selection).
    """
    cells = _selected_cells(checked, resolved)
    if cells is None:
        return
    match, kept, hidden = cells
    if not hidden.all():
        return
    if len(kept) and len(kept) < len(match.entry.flat):
        from ..capture.contract import Withheld

        raise Withheld(ONLY_HIDDEN_ROWS)


def _selected_cells(checked: Any, resolved: Any) -> tuple[Any, np.ndarray, np.ndarray] | None:
    """(the match, the parent's cells shown, whether each shown evidence cell is hidden), or None
    when the table is no selection of a captured one."""
    match, flat = getattr(resolved, "match", None), getattr(resolved, "flat", None)
    if match is None or flat is None or checked.hidden.size == 0:
        return None
    positions = np.asarray(match.positions)
    mapped = positions >= 0  # (an engine's key columns are cells of the frame, with no entry cell)
    if len(positions) != len(flat) or not mapped.any():
        return None
    # each evidence cell's place in the displayed grid (an engine's frame has its keys as columns)
    rows = checked.cell_rows if getattr(checked, "cell_rows", None) is not None else flat.row_pos
    cols = checked.cell_cols if getattr(checked, "cell_cols", None) is not None else flat.col_pos
    hidden = np.asarray(checked.hidden)[np.asarray(rows), np.asarray(cols)][mapped]
    return match, np.unique(positions[mapped]), hidden


UNEXPLAINED_SELECTION = ("this table shows some cells of a checked table, hidden cells among them, and neither their "
                         "labels (whole rows or columns), their positions (head, a slice) nor a one-sided bound "
                         "explain which: the rule may be a condition on the figures (n = 2 or n > 15) that tells the "
                         "hidden ones. Show the whole table, or select whole rows or columns by their labels")


def withhold_if_selected_unexplained(frame: Any, checked: Any, resolved: Any) -> None:
    """Raise :class:`Withheld` when a strict selection of a captured table keeps hidden cells beside
    published ones and neither its labels, its positions nor a one-sided bound explain its cells.

    Why (red team, issue 23): ``t.loc[lambda x: (x == 2) | (x > 15)]``, ``t[np.isclose(t, 2) | (t > 15)]``,
    ``t.iloc[np.flatnonzero(...)]``, a list of labels computed from the values, DuckDB's
    ``rel.filter("n = 2 or n > 15")`` of an aggregate, a second query over it, a polars ``filter``
    of ``group_by().len()`` drew "C F ✕" beside A's 20s: with B's 15 left out, C F is 2. Whatever
    chose the cells (a recipe replays the same labels or mask; the rule may be out of reach), the
    cells kept tell how:

    * a *product of labels* (the cells whose label on each dimension is among those kept:
      dropping district B, keeping women in A and C) is what a selection by labels keeps;
    * a run of cells cut by position (``head``, ``tail``, ``iloc`` of a slice) is a selection by position;
    * all kept above all left out, or below them and above :data:`SMALL_FIGURES`, is at most a
      one-sided bound, as for the conditions the capture reads.

    Anything else (cells kept on both sides of cells left out, across labels) is withheld: the
    rule may be a condition on the figures. A condition the capture read (SQL, polars) is judged
    there (``contract.mark_selection_read``). A one-dimensional table is always a product of its
    labels: there a selection by value cannot be told from one by label (known gap).
    """
    from ..capture.contract import Withheld, selection_read

    cells = None if selection_read(frame) else _selected_cells(checked, resolved)
    if cells is None:
        return
    match, kept_at, hidden = cells
    if not hidden.any() or hidden.all():
        return  # (nothing hidden; or hidden cells only: withhold_if_only_hidden_rows)
    parent = match.entry.flat
    kept = np.zeros(len(parent), dtype=bool)
    kept[kept_at] = True
    if kept.all() or _product_of_labels(parent, kept) or (_positional(frame) and _run_of_positions(kept)):
        return
    values = np.asarray(parent.values, dtype=object)
    mine = {_figure(v) for v in values[kept]} - {None}
    left_out = {_figure(v) for v in values[~kept]} - {None}
    if mine and left_out and min(mine) > max(left_out):
        return  # at most a lower bound (t[t > 10]): one-sided, as for a filter we can read
    if mine and left_out and max(mine) < min(left_out) and max(mine) > SMALL_FIGURES:
        return  # at most an upper bound above the small figures (t[t < 20]): one-sided
    raise Withheld(UNEXPLAINED_SELECTION)


#: Rows kept below every row left out, all of them at most this: an upper bound that pins small
#: hidden figures (as ``sql_rewrites.SMALL_UPPER_BOUND`` for a condition we can read).
SMALL_FIGURES = 10


def _product_of_labels(flat: Any, kept: np.ndarray) -> bool:
    """Whether the kept cells are all the cells whose label on every dimension (and measure) is
    one a kept cell has: what a selection by labels keeps."""
    inside = np.ones(len(kept), dtype=bool)
    for labels in (*flat.dims.values(), flat.measure):
        labels = pd.Index(np.asarray(labels, dtype=object))
        inside &= labels.isin(labels[kept])
    return bool(np.array_equal(inside, kept))


def _positional(frame: Any) -> bool:
    """Whether the displayed table was cut by position (``head``, ``tail``, ``iloc`` of a slice):
    only then is a run of cells a selection by position (an engine's rows come in any order, where
    a filter by figures made a run by chance: the red team's filter of a polars ``len`` copy)."""
    from ..capture.contract import recipe_of

    recipe = recipe_of(frame)
    if recipe is None:
        return False
    if recipe.name in ("head", "tail"):
        return True
    key = recipe.args[1] if len(recipe.args) > 1 else None
    return recipe.name == "iloc" and isinstance(key, slice)


def _run_of_positions(kept: np.ndarray) -> bool:
    """The kept cells follow each other in the table's order (with :func:`_positional`: a cut)."""
    at = np.flatnonzero(kept)
    return bool(len(at)) and int(at[-1] - at[0] + 1) == len(at)


def _figure(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(x) else round(x, 9)


def withhold_if_selected_by_values(frame: Any, checked: Any) -> None:
    """Raise :class:`Withheld` when an engine kept the groups shown by a two-sided condition on
    their figures and the check hides some of them (see ``contract.mark_selected_by_values``)."""
    from ..capture.contract import Withheld, selected_by_values

    reason = selected_by_values(frame)
    if reason is not None and np.asarray(checked.hidden).any():
        raise Withheld(f"{reason}: with cells hidden, which groups are shown tells their figures. {PINNED_ADVICE}")


PINNED_ADVICE = "Show the table itself, or select rows by their labels"
PINNED_LABELS = ("which rows or columns this table shows depends on values its parent table hides (a filter "
                 f"on values such as t[t == 2] or between(...)): the labels kept would tell them. {PINNED_ADVICE}")


def withhold_pinned_labels(frame: Any, registry: Any, leaf_hidden: Callable[[Any], np.ndarray | None],
                           revealed: Any = None) -> dict[tuple[str, str], frozenset[str]]:
    """Raise :class:`Withheld` when a table derived from checked ones keeps rows chosen by hidden
    values. ``leaf_hidden(leaf)``: a parent's hidden cells as the check finds them on its own
    (None when it is blocked), given by the caller so this module needs nothing of the check.
    ``revealed`` (a :class:`~.revealed.RevealedSides`, the session's): what earlier outputs told
    of the same hidden cells. Returns the sides this one tells, for the caller to remember once
    the output is shown (an output withheld for any reason tells nothing)."""
    if registry is None or not isinstance(frame, pd.DataFrame | pd.Series):
        return {}
    from ..capture.contract import Withheld, recipe_of

    if recipe_of(frame) is None:
        return {}
    from .lineage import labels_pinned

    told = labels_pinned(frame, lambda x: registry.by_object(x) is not None, leaf_hidden, earlier=revealed)
    if told.pinned:
        raise Withheld(PINNED_ACROSS if told.across else PINNED_UNPROVEN if told.unproven else PINNED_LABELS)
    return told.sides


def sides_of_engine_filters(frame: Any, checked: Any, revealed: Any) -> dict[tuple[str, str], frozenset[str]]:
    """What a one-sided filter an engine applied to an aggregate tells of the hidden figures it
    kept (``contract.one_sided``: polars ``filter(pl.col("len") < 10)``), as
    :func:`.lineage.labels_pinned` finds it for pandas selections: raises :class:`Withheld` when an
    earlier output told the other side of the same cell, else returns the sides told.

    The sides are those of a count table (whole numbers, at least 0): ``< b`` tells
    :data:`~.lineage.ABOVE` when b is at most the probe far above the cell (``max(2v, v + 10)``);
    ``> b`` tells :data:`~.lineage.BELOW` when it leaves out 0 (in a table without zeros, 1 too).
    """
    from ..capture.contract import Withheld, one_sided
    from .lineage import ABOVE, BELOW, NEAR, cell_key

    bounds = one_sided(frame)
    grid = frame.to_frame() if isinstance(frame, pd.Series) else frame
    hidden = np.asarray(getattr(checked, "hidden", np.zeros((0, 0))), dtype=bool)
    if not bounds or not isinstance(grid, pd.DataFrame) or hidden.shape != grid.shape or not hidden.any():
        return {}
    told: dict[tuple[str, str], frozenset[str]] = {}
    counted = _count_columns(checked, grid.shape[1])
    for column, op, b in bounds:
        if column not in grid.columns:
            continue
        j = list(grid.columns).index(column)
        if not counted[j]:
            continue  # (rounded mean ages are whole numbers too: the probes are a count's range)
        values = numeric(np.asarray(grid.iloc[:, j].to_numpy(dtype=object)))
        if values is None:
            continue
        floor = 0.0 if (values == 0).any() else 1.0  # the least a count can be here
        for r in np.flatnonzero(hidden[:, j]):
            v = float(values[r])
            if op in ("<", "<="):
                far = max(2 * v, v + NEAR)
                side = ABOVE if (b <= far if op == "<" else b < far) else None
            else:
                side = BELOW if (b >= floor if op == ">" else b > floor) and v > floor else None
            if side is None:
                continue
            cell = cell_key(grid, int(r), j, v)
            told[cell] = told.get(cell, frozenset()) | {side}
            if revealed is not None and len(told[cell] | revealed(cell)) == 2:
                raise Withheld(PINNED_ACROSS)
            if len(told[cell]) == 2:
                raise Withheld(PINNED_LABELS)
    return told


def _count_columns(checked: Any, n_columns: int) -> np.ndarray:
    """Per displayed column, whether every cell of it the evidence knows is a count."""
    out = np.zeros(n_columns, dtype=bool)
    entry, positions = getattr(checked, "entry", None), getattr(checked, "entry_positions", None)
    cols = getattr(checked, "cell_cols", None)
    if entry is None or positions is None or cols is None:
        return out
    stats = np.asarray(entry.evidence.stat).astype(str)
    positions = np.asarray(positions)
    cols = np.asarray(cols)
    known = positions >= 0
    is_count = np.isin(stats[positions[known]], ("count", "size", "nunique"))
    for j in range(n_columns):
        here = cols[known] == j
        out[j] = bool(here.any() and is_count[here].all())
    return out


PINNED_UNPROVEN = ("which rows this table shows depends on values its parent tables hide, and they hide too many cells "
                   "to check one by one what the labels kept tell of them. Show the table itself, or select rows by "
                   "their labels")
PINNED_ACROSS = ("which rows this table shows depends on values its parent table hides, and an earlier selection of "
                 "the same table bounded them from the other side (t[t > 1], then t[t < 3]): together the labels "
                 f"kept would tell them. {PINNED_ADVICE}")
