"""Cells of a derived table that depend on cells its parents hide: found by recomputing it.

Why (issue 23.4): a table computed from checked aggregates with ``cumsum``, ``shift``,
ratios, ``diff``, ``pct_change``, ``rank``, arithmetic or ``concat`` has no evidence of its
own, and hiding the cells whose *labels* a parent hides is not enough: a cumulative count
at a later label gives the hidden cell back by subtraction (``73 - 70 = 3``), a
month-on-month ratio at the month before it by multiplication (``135 × 0.0148 = 2``).

The capture keeps each such table's recipe (:class:`~sdc_magic.capture.contract.Recipe`:
pandas' own function and its inputs). Here the table is computed again from its leaves
(the aggregation results it comes from), first as they are, which must give the displayed
table back, then with every cell a leaf hides replaced three times (missing, far above,
far below). A displayed cell whose value changes in any of the three depends on a hidden
cell and is hidden: whatever the arithmetic, the derived table then tells no more than its
parents do. Anything that cannot be recomputed (an error, a different result, a leaf whose
cells cannot be placed) hides every cell: fail closed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..capture.contract import is_aggregate, recipe_of

#: Recipes followed at most (a chain of derivations from the leaves to the displayed table).
MAX_NODES = 64
#: How far a hidden cell is moved in the two "far" recomputations.
FAR = 1e9

#: how the caller judges a leaf on its own: its hidden cells as a (rows, columns) grid, or None
#: when it cannot (every cell of the leaf then counts as hidden)
LeafHidden = Callable[[Any], np.ndarray | None]


@dataclass
class Dependence:
    """Per cell of the displayed grid (rows, columns), whether it depends on a hidden cell."""

    hidden: np.ndarray
    parents: list[str]  # how the leaves are described in notes (e.g. "groupby.size by district")
    exact: bool  # False: recomputing failed, every cell is hidden
    #: per cell, whether it is computed from the cells of exactly one leaf (it changes when that
    #: leaf's cells all move, and with no other leaf's): a function of one checked table, which
    #: tells nothing its published cells do not (see :func:`one_leaf_cells`)
    one_leaf: np.ndarray | None = None
    #: per cell, a number that follows no leaf and is no published value or total of one (a
    #: count from the rows joined to the table, ``pd.concat([t, pd.Series({"not C": 70})])``):
    #: nothing checked it, and beside the table it can be a margin that gives a hidden cell back
    #: (70 − 40 = B) or a small difference (everyone 73, under 100 71: two people over 100)
    foreign: np.ndarray | None = None


def grid_shape(obj: pd.DataFrame | pd.Series) -> tuple[int, int]:
    return (len(obj), 1) if isinstance(obj, pd.Series) else obj.shape


def dependence(obj: Any, is_known: Callable[[Any], bool], leaf_hidden: LeafHidden,
               describe: Callable[[Any], str]) -> Dependence | None:
    """Which cells of ``obj`` depend on cells its leaves hide; None when ``obj`` has no recipe.

    ``is_known(x)`` says whether a pandas object is a captured aggregation (a leaf to judge);
    other inputs (row-level columns, constants) are taken as they are.
    """
    if not isinstance(obj, pd.DataFrame | pd.Series) or recipe_of(obj) is None:
        return None
    leaves: dict[int, Any] = {}
    if not _collect(obj, is_known, leaves, [0]):
        return _everything(obj, [])
    names = [describe(leaf) for leaf in leaves.values()]
    masks: dict[int, np.ndarray] = {}
    for key, leaf in leaves.items():
        grid = leaf_hidden(leaf)
        if grid is None or grid.shape != grid_shape(leaf):
            grid = np.ones(grid_shape(leaf), dtype=bool)
        masks[key] = grid
    if not any(m.any() for m in masks.values()):
        follows = _leaf_follows(obj, leaves)
        return Dependence(np.zeros(grid_shape(obj), dtype=bool), names, True,
                          _one_leaf_cells(obj, leaves, masks, follows), _foreign_cells(obj, leaves, masks, follows))
    try:
        base = _replay(obj, {})
        if not _same(base, obj):
            return _everything(obj, names)
        moved = np.zeros(grid_shape(obj), dtype=bool)
        tainted = _tainted_scalars(obj, leaves, masks)
        for how in ("missing", "above", "below"):
            subs: dict[int, Any] = {key: _replaced(leaves[key], masks[key], how) for key in leaves if masks[key].any()}
            for i, (key, value) in enumerate(tainted.items()):
                subs[key] = _moved_scalar(value, how, i)
            try:
                again = _replay(obj, subs)
            except Exception:
                if how == "missing":
                    continue  # e.g. astype(int) of a missing value: the two far values still tell
                raise
            moved |= _differs(base, again)
    except Exception:  # fail closed: a table we cannot recompute hides every cell
        return _everything(obj, names)
    follows = _leaf_follows(obj, leaves)  # (once: both cell sets below read it)
    return Dependence(moved, names, True, _one_leaf_cells(obj, leaves, masks, follows),
                      _foreign_cells(obj, leaves, masks, follows))


def _foreign_cells(obj: Any, leaves: dict[int, Any], masks: dict[int, np.ndarray],
                   follows: np.ndarray | None) -> np.ndarray | None:
    """The cells of ``obj`` that follow no leaf (``follows``, see :func:`_leaf_follows`) and show no
    published value or total of one (see :attr:`Dependence.foreign`); None when they cannot be told."""
    if follows is None:
        return None
    values = _numeric_grid(obj)
    allowed = _published_values(leaves, masks)
    finite = np.isfinite(values)
    known = np.zeros(values.shape, dtype=bool)
    if len(allowed):
        known[finite] = np.isclose(values[finite][:, None], allowed[None, :], rtol=1e-9, atol=1e-12).any(axis=1)
    return (follows == 0) & finite & ~known


#: Hidden cells :func:`labels_pinned` moves, one at a time (two or three recomputations each): a
#: work bound, the same on every machine. A selection by value with more hidden cells than this is
#: not proven harmless and is withheld (``Told.unproven``; red team: with 200 probes, a hidden cell
#: after 200 others was never looked at, and two one-sided selections pinned it)
MAX_PINNED_PROBES = 1000


#: the two sides a selection can tell a hidden cell lies on (see :class:`Told`)
BELOW, ABOVE = "not near 0", "not far above"


@dataclass
class Told:
    """What a selection by values tells of the hidden cells of the tables it selects from.

    ``pinned``: some hidden cell is pinned by this selection alone (or with ``earlier``).
    ``sides``: per hidden cell of a count table (:func:`cell_key`: its labels and value), the sides a
    one-sided selection told: :data:`BELOW` when the cell's row would change at 0 (in a table
    without zeros, also at 1: ``t[t > 1]`` of a 2 or 3, while ``t[t > 0]`` of a groupby tells
    nothing), :data:`ABOVE` when it would change far above its value (``t[t < 3]``). Each side
    alone is a one-sided bound; both, over several outputs, pin it as a two-sided selection does
    (``t[t > 1]`` then ``t[t < 3]``: C is 2).
    """

    pinned: bool = False
    #: pinned only together with what earlier outputs told
    across: bool = False
    #: too many hidden cells to move one by one (:data:`MAX_PINNED_PROBES`): not proven, withheld
    unproven: bool = False
    sides: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)


def labels_pinned(obj: Any, is_known: Callable[[Any], bool], leaf_hidden: LeafHidden,
                  earlier: Callable[[tuple[str, str]], frozenset[str]] | None = None) -> Told:
    """Whether the rows or columns ``obj`` shows are chosen by values its leaves hide, both ways.

    ``t[t == 2]`` shows the one row Z (✕): its label tells Z is 2 (red team, round 6). The
    table is computed again with each hidden cell in turn moved far above, then far below;
    when that cell's own row (or column) label is kept or dropped *both* ways, the selection
    pins its value (an equality, an interval such as ``between(1, 4)``) and nothing of the
    table may be drawn.
    A one-sided selection (``t[t > 0]``, ``t[t >= 5]``, ``nlargest``) only bounds them on one
    side and is left to the protection, as the order of rows is, unless ``earlier(cell)`` says
    an earlier output told the other side of the same cell (``t[t > 1]``, then ``t[t < 3]``).
    The sides told are returned for the caller to remember. Any failure: nothing pinned,
    nothing told (the cells are judged as before).
    """
    told = Told()
    if not isinstance(obj, pd.DataFrame | pd.Series) or recipe_of(obj) is None:
        return told
    leaves: dict[int, Any] = {}
    if not _collect(obj, is_known, leaves, [0]) or not leaves:
        return told
    masks: dict[int, np.ndarray] = {}
    for key, leaf in leaves.items():
        grid = leaf_hidden(leaf)
        if grid is not None and grid.shape == grid_shape(leaf) and grid.any():
            masks[key] = grid
    if not masks:
        return told
    try:
        base = _replay(obj, {})
        if not _same(base, obj):
            return told
        if _labels_carry_values(base, obj, leaves, masks):
            return Told(pinned=True)
        probes = 0
        for key, mask in masks.items():
            leaf = leaves[key]
            columns = list(leaf.columns) if isinstance(leaf, pd.DataFrame) else [leaf.name]
            values = _numeric_grid(leaf)
            finite = values[np.isfinite(values)]
            # sides are remembered for counts only: the probes (0, twice the value) are a count's
            # range; a mean of ages between 30 and 79 is no narrow range of ages
            counts = bool(len(finite)) and bool((finite >= 0).all() and (finite == np.round(finite)).all())
            has_zeros = bool((finite == 0).any())
            shown = set(base.index)
            names: dict[tuple[int, int], tuple[str, str]] = {}

            def name_of(rc: tuple[int, int], leaf: Any = leaf, values: np.ndarray = values,
                        names: dict = names) -> tuple[str, str]:
                if rc not in names:
                    names[rc] = cell_key(leaf, rc[0], rc[1], values[rc])
                return names[rc]

            cells = sorted(zip(*np.nonzero(mask), strict=True),
                           key=lambda rc: (earlier is None or not counts or not earlier(name_of(rc)),
                                           leaf.index[rc[0]] not in shown))
            # (cells an earlier output told a side of first, then rows the selection shows: a pin by
            # presence is the usual one)
            for r, c in cells:
                probes += 1
                if probes > MAX_PINNED_PROBES:
                    # too many to move one by one: a selection whose labels stay when every hidden
                    # cell moves at once (by label, by position) tells nothing; any other is unproven
                    moved_all = [_labels_changed(base, _replay(obj, {k: _all_moved(leaves[k], how)
                                                                     for k in masks})) for how in ("below", "above")]
                    return Told(sides=told.sides) if not any(moved_all) else Told(pinned=True, unproven=True)
                v = float(values[r, c]) if np.isfinite(values[r, c]) else 0.0
                changed = [_labels_changed(base, _replay(obj, {key: _with_cell(leaf, r, c, x)}))
                           for x in (min(0.0, v) - 1e-9 if v <= 0 else 0.0, max(2 * v, v + NEAR))]
                # the moved cell's own row, column, cell or position kept or dropped at both ends
                # of a range around it: an equality or a narrow interval. (``t > 50``: Z moved to
                # 0 stays out, one-sided; a wide band ``between(10, 200)`` keeps June's 25 at 0..50
                # on one side only; another row of the head of a sorted table moves with ties.)
                # Its labels on either axis, and each part of a pair: a transposed or unstacked copy
                # shows them there (``t.to_frame().T.loc[:, mask]``, ``g.unstack()[mask]``)
                own = _own_labels(leaf.index[r], columns[c], int(r))
                sides = frozenset(side for side, moved in zip((BELOW, ABOVE), changed, strict=True) if own & moved)
                if len(sides) == 2:
                    return Told(pinned=True)
                if not sides or not counts:
                    continue
                if sides == {BELOW} and not has_zeros and (v <= 1 or not own & _labels_changed(
                        base, _replay(obj, {key: _with_cell(leaf, r, c, 1.0)}))):
                    # a table without zeros (a groupby lists groups that have someone): every count is
                    # 1 or more, so ``t[t > 0]`` tells nothing; ``t[t > 1]`` does. Where zeros are
                    # shown (a crosstab), ``ct[ct.F > 0]`` tells that Z has a woman at all.
                    continue
                cell = name_of((int(r), int(c)))
                told.sides[cell] = sides
                if earlier is not None and len(sides | earlier(cell)) == 2:
                    return Told(pinned=True, across=True)
    except Exception:
        return Told()
    return told


def _own_labels(row: Any, col: Any, position: int) -> set:
    """The labels under which a cell of a leaf can show in a table made from it (see labels_pinned)."""
    parts = set(row) if isinstance(row, tuple) else {row}
    own = {("row", row), ("col", col), ("row", (row, col)), ("row", position), ("col", row), ("row", col)}
    return own | {("row", x) for x in parts} | {("col", x) for x in parts}


def cell_key(table: pd.DataFrame | pd.Series, r: int, c: int, value: float) -> tuple[str, str]:
    """A cell by its labels (each with its axis' name) and its value: the same figure whichever
    table shows it (``groupby.size``, ``value_counts``, a crosstab and ``groupby([a, b]).size()``
    name Z's 2 alike), for what selections told of it across outputs."""
    grid = table.to_frame() if isinstance(table, pd.Series) else table
    pairs: list[tuple[str, str]] = []
    index = grid.index
    text = [j for j in range(grid.shape[1]) if not pd.api.types.is_numeric_dtype(grid.dtypes.iloc[j])]
    if isinstance(index, pd.RangeIndex) and text:  # keys as columns (as_index=False, polars, DuckDB)
        pairs += [(str(grid.columns[j]), _norm(grid.iat[r, j])) for j in text]
    else:
        label = index[r]
        parts = label if isinstance(label, tuple) else (label,)
        pairs += [(str(n), _norm(x)) for n, x in zip(index.names, parts, strict=False)]
    if isinstance(table, pd.DataFrame) and grid.shape[1] > 1 and any(n is not None for n in grid.columns.names):
        # (a single column names no dimension: crosstab(district, columns="n") is the district counts)
        label = grid.columns[c]
        parts = label if isinstance(label, tuple) else (label,)
        pairs += [(str(n), _norm(x)) for n, x in zip(grid.columns.names, parts, strict=False)]
    return repr(sorted(pairs)), repr(float(value))


def _norm(x: Any) -> str:
    if isinstance(x, bool | np.bool_) or not isinstance(x, int | float | np.integer | np.floating):
        return str(x)
    return repr(float(x))


#: How far above a hidden cell :func:`labels_pinned` moves it at least (twice its value otherwise):
#: a selection that drops it both at 0 and here pins it within a range no wider.
NEAR = 10.0


def _with_cell(leaf: Any, r: int, c: int, value: float) -> Any:
    """A copy of ``leaf`` with one cell set to ``value`` (as a float column)."""
    grid = leaf.to_frame() if isinstance(leaf, pd.Series) else leaf
    out = grid.copy()
    col = pd.to_numeric(grid.iloc[:, c], errors="coerce").astype(float).to_numpy(copy=True)
    col[r] = value
    out.isetitem(c, col)
    return out.iloc[:, 0].rename(leaf.name) if isinstance(leaf, pd.Series) else out


def _labels_carry_values(base: Any, obj: Any, leaves: dict[int, Any], masks: dict[int, np.ndarray]) -> bool:
    """Whether moving the hidden cells far above makes labels appear that are no label of the
    leaves: the labels are values (``t.to_frame("n").set_index("n")`` showed the hidden 2 and 25
    as its index, at ``pass``: an empty table)."""
    for key, mask in masks.items():
        leaf = leaves[key]
        known = set(leaf.index)
        if isinstance(leaf, pd.DataFrame):
            known |= set(leaf.columns)
        again = _replay(obj, {key: _replaced(leaf, mask, "above")})
        appeared = {x for _, x in _labels_changed(base, again)} - set(base.index) - known
        if isinstance(base, pd.DataFrame):
            appeared -= set(base.columns)
        if any(_has_far_number(x) for x in appeared):
            return True
    return False


def _has_far_number(label: Any) -> bool:
    """Whether a label (or a part of a tuple label) is a number as far as a moved cell (≥ FAR / 2)."""
    parts = label if isinstance(label, tuple) else (label,)
    for part in parts:
        try:
            if abs(float(part)) >= FAR / 2:
                return True
        except (TypeError, ValueError):
            continue
    return False


def _labels_changed(a: Any, b: Any) -> set:
    """Row and column labels in one of ``a`` and ``b`` but not the other (all of ``a``'s if ``b`` is no table)."""
    if not isinstance(b, pd.DataFrame | pd.Series):
        return {("row", x) for x in a.index}
    out = {("row", x) for x in set(a.index).symmetric_difference(set(b.index))}
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        out |= {("col", x) for x in set(a.columns).symmetric_difference(set(b.columns))}
    return out


#: Leaves up to which :func:`_one_leaf_cells` recomputes the table once per leaf.
MAX_ONE_LEAF_REPLAYS = 8


def _one_leaf_cells(obj: Any, leaves: dict[int, Any], masks: dict[int, np.ndarray],
                    follows: np.ndarray | None) -> np.ndarray:
    """Per cell of ``obj``, whether it is a function of the published cells of exactly one leaf.

    Why it matters (issue 23, over-protection): ``x.diff(axis=1)`` shows E·M 18 − 17 = 1 and
    ``m / m["01"]`` January 1.0; read as counts of 1 they were primaries, and the tables blocked.
    A function of one checked table's cells tells nothing its published cells do not.

    Two conditions, both needed (a red team found 25 ways through the first version):

    * no *foreign operand* anywhere in the recipe (:func:`_foreign_operands`): an array, list,
      dict, a pandas object that is neither a leaf nor derived from leaves, or a number that is
      not a published value or total of a leaf, given as the other side of arithmetic, ``where``,
      ``fillna``, ``clip``... (``m - women.to_numpy()`` is 2 men; ``m - len(df[...])`` 3): the
      whole table is then checked as counts, as before;
    * each leaf in turn has all its cells moved far above, then far below (each cell by its
      own amount, fixed seed); a cell that changes for exactly one leaf follows that one only
      (``clip(upper=...)`` absorbs one direction, not both). A cell of two leaves
      (``all − resolved`` = 2 unresolved) is a new figure and is checked as a count.

    Any failure: no cell.
    """
    none = np.zeros(grid_shape(obj), dtype=bool)
    if follows is None or _foreign_operands(obj, leaves, masks):
        return none
    return follows == 1


def _leaf_follows(obj: Any, leaves: dict[int, Any]) -> np.ndarray | None:
    """Per cell of ``obj``, how many leaves it follows (it changes when all that leaf's cells move
    far above or far below, each by its own amount); None when it cannot be told."""
    shape = grid_shape(obj)
    if not leaves or len(leaves) > MAX_ONE_LEAF_REPLAYS:
        return None
    try:
        base = _replay(obj, {})
        follows = np.zeros(shape, dtype=np.int64)
        for key, leaf in leaves.items():
            moved = np.zeros(shape, dtype=bool)
            for how in ("above", "below"):  # (not missing: m - m + 2 is NaN then, yet follows no cell)
                moved |= _differs(base, _replay(obj, {key: _all_moved(leaf, how)}))
            follows += moved.astype(np.int64)
    except Exception:
        return None
    return follows


#: Recipes whose arguments after the first are operands (data), not settings such as ``periods``:
#: where a number, array or list there comes from is what :func:`_foreign_operands` asks.
OPERAND_RECIPES = frozenset({"add", "sub", "mul", "div", "truediv", "floordiv", "mod", "pow", "where", "mask",
                             "fillna", "combine_first", "combine", "update", "clip", "eq", "ne", "lt", "le", "gt",
                             "ge"})
#: Keyword arguments that are operands in those recipes.
OPERAND_KEYWORDS = frozenset({"other", "value", "lower", "upper", "fill_value", "cond", "to_replace"})


def _foreign_operands(obj: Any, leaves: dict[int, Any], masks: dict[int, np.ndarray]) -> bool:
    """Whether the recipe under ``obj`` takes data from outside its leaves (see :func:`_one_leaf_cells`)."""
    allowed = _published_values(leaves, masks)
    seen = [0]

    def number_is_foreign(v: Any) -> bool:
        x = float(v)
        return not (np.isfinite(x) and len(allowed) and np.isclose(allowed, x, rtol=1e-9, atol=1e-12).any())

    def is_number(v: Any) -> bool:
        return isinstance(v, int | float | np.number) and not isinstance(v, bool | np.bool_)

    def foreign(node: Any) -> bool:
        seen[0] += 1
        if seen[0] > MAX_NODES:
            return True
        if id(node) in leaves:
            return False
        recipe = recipe_of(node)
        if recipe is None:
            return True  # a table neither checked nor derived from checked ones (built from the rows)
        operands = recipe.name.strip("_").removeprefix("r") in OPERAND_RECIPES
        values = [*enumerate(recipe.args), *recipe.kwargs.items()]
        for where, value in values:
            if isinstance(value, pd.DataFrame | pd.Series):
                if foreign(value):
                    return True
                continue
            if where == 0:
                continue
            # an operand of arithmetic, where, fillna, clip...; or a fill value anywhere (shift,
            # reindex: ``shift(1, fill_value=k)`` brings k in)
            is_operand = (operands and isinstance(where, int)) or where in OPERAND_KEYWORDS
            if isinstance(value, list | tuple | dict):
                items = [*value.keys(), *value.values()] if isinstance(value, dict) else list(value)
                for item in items:
                    if isinstance(item, pd.DataFrame | pd.Series):
                        if foreign(item):
                            return True
                    elif is_number(item):
                        return True  # numbers in a list or mapping (``map({135: k})``, ``isin([2])``)
                continue
            if isinstance(value, np.ndarray) and value.size:
                return True
            if is_operand and is_number(value) and number_is_foreign(value):
                return True
        return False

    try:
        return foreign(obj)
    except Exception:
        return True


def _published_values(leaves: dict[int, Any], masks: dict[int, np.ndarray]) -> np.ndarray:
    """The numbers a leaf publishes: its cells not hidden, and its totals (row, column, grand)."""
    out: list[float] = []
    for key, leaf in leaves.items():
        values = _numeric_grid(leaf)
        hidden = masks.get(key)
        published = values if hidden is None or hidden.shape != values.shape else np.where(hidden, np.nan, values)
        out.extend(published[np.isfinite(published)].tolist())
        finite = values[np.isfinite(values)]
        if len(finite):
            out.append(float(finite.sum()))  # the grand total: a margin the protection assumes known
            # row and column totals only where no cell is hidden (a total of hidden cells is no
            # published number: March's 2, the sum of its two hidden cells, was let in as one)
            clean = ~hidden if hidden is not None and hidden.shape == values.shape else np.ones(values.shape, bool)
            if values.shape[0] > 1:
                out.extend(float(c) for c, ok in zip(np.nansum(values, axis=0), clean.all(axis=0), strict=True) if ok)
            if values.shape[1] > 1:
                out.extend(float(r) for r, ok in zip(np.nansum(values, axis=1), clean.all(axis=1), strict=True) if ok)
    return np.array(out, dtype=float) if out else np.zeros(0)


def _all_moved(leaf: Any, how: str) -> Any:
    """A copy of ``leaf`` with every numeric cell moved far above / below, each by its own amount (from a fixed seed: the same table gets the same answer): a difference of two
    cells (``diff``) or a ratio moves too, which equal shifts per row would cancel."""
    grid = leaf.to_frame() if isinstance(leaf, pd.Series) else leaf
    out = grid.copy()
    rng = np.random.default_rng(20231)
    sign = 1.0 if how == "above" else -1.0
    for j in range(grid.shape[1]):
        col = pd.to_numeric(grid.iloc[:, j], errors="coerce").astype(float).to_numpy(copy=True)
        shift = sign * FAR * (1.0 + rng.random(len(col)))
        out.isetitem(j, np.nan_to_num(col) + shift)
    return out.iloc[:, 0].rename(leaf.name) if isinstance(leaf, pd.Series) else out


#: Statistics of a leaf that a number in a recipe may have been computed from (``t - t.min()``,
#: ``t / t.max()``, ``t - t["C"]``): a number equal to one of them that depends on a hidden cell is
#: moved with the hidden cells. Not the sum or the mean: the total is a margin the protection
#: already assumes known, and shares ``t / t.sum()`` are what analysts publish.
SCALAR_STATS = ("min", "max", "median", "std", "var", "prod")
#: The recipes whose second operand may be such a number.
ARITHMETIC = frozenset({"add", "sub", "mul", "div", "truediv", "floordiv", "mod", "pow", "clip"})


def _tainted_scalars(obj: Any, leaves: dict[int, Any], masks: dict[int, np.ndarray]) -> dict[int, float]:
    """Numbers in the recipes under ``obj`` that equal a hidden cell or a statistic of a leaf that
    depends on its hidden cells (by identity of the number object: the recipe holds it)."""
    numbers: dict[int, float] = {}
    _numbers(obj, numbers, [0])
    if not numbers:
        return {}
    suspects: list[float] = []
    for key, leaf in leaves.items():
        if not masks[key].any():
            continue
        values = _numeric_grid(leaf)
        suspects.extend(values[masks[key] & np.isfinite(values)].tolist())
        # a statistic the hidden cells take part in (without them it is another number); a maximum
        # that a published cell holds only says the hidden cells are not larger
        without = _stats(_numeric_grid(_replaced(leaf, masks[key], "missing")))
        suspects.extend(b for b, o in zip(_stats(values), without, strict=True)
                        if np.isfinite(b) and not (np.isfinite(o) and np.isclose(b, o, rtol=1e-12, atol=0)))
    # any other number pandas or numpy computed (a quarter's total t.iloc[:3].sum(), a quantile, a
    # norm) may hold a hidden cell too: it moves with them unless it is a published cell's value or
    # a statistic of the whole table the protection assumes known (its total, mean, size)
    safe: list[float] = []
    for key, leaf in leaves.items():
        values = _numeric_grid(leaf)
        finite = values[np.isfinite(values)]
        safe.extend(values[~masks[key] & np.isfinite(values)].tolist())
        if len(finite):
            safe.extend([float(finite.sum()), float(finite.mean()), float(len(finite))])
            safe.extend(float(c) for c in np.nansum(values, axis=0))  # column totals
            safe.extend(float(r) for r in np.nansum(values, axis=1))  # row totals
    known = np.array(suspects, dtype=float) if suspects else np.zeros(0)
    allowed = np.array(safe, dtype=float) if safe else np.zeros(0)

    def taints(v: float) -> bool:
        if len(known) and np.isclose(known, v, rtol=1e-9, atol=1e-12).any():
            return True
        return not (len(allowed) and np.isclose(allowed, v, rtol=1e-9, atol=1e-12).any())

    return {key: v for key, v in numbers.items() if taints(v)}


def _numbers(node: Any, out: dict[int, float], count: list[int]) -> None:
    count[0] += 1
    recipe = recipe_of(node)
    if recipe is None or count[0] > MAX_NODES:
        return
    if recipe.name.strip("_").removeprefix("r") in ARITHMETIC:
        # the other operand only (not ``axis=1``), and only a number pandas or numpy computed
        # (``t["C"]``, ``t.min()`` give numpy scalars; a literal ``t - 1`` in the code is a
        # Python int, and so is ``len(df)``, a margin)
        for value in (*recipe.args[1:2], recipe.kwargs.get("other")):
            if isinstance(value, np.integer | np.floating):
                out[id(value)] = float(value)
    for x in recipe.inputs():
        _numbers(x, out, count)


def _stats(values: np.ndarray) -> list[float]:
    v = values[np.isfinite(values)]
    if not len(v):
        return [np.nan] * len(SCALAR_STATS)
    with np.errstate(all="ignore"):
        return [float(np.min(v)), float(np.max(v)), float(np.median(v)),
                float(np.std(v, ddof=1)) if len(v) > 1 else np.nan, float(np.var(v, ddof=1)) if len(v) > 1 else np.nan,
                float(np.prod(v))]


def _numeric_grid(obj: Any) -> np.ndarray:
    grid = obj.to_frame() if isinstance(obj, pd.Series) else obj
    return np.column_stack([pd.to_numeric(grid.iloc[:, j], errors="coerce").astype(float).to_numpy()
                            for j in range(grid.shape[1])]) if grid.shape[1] else np.zeros((len(grid), 0))


def _moved_scalar(value: float, how: str, i: int) -> float:
    if how == "missing":
        return np.nan
    return value + (1.0 if how == "above" else -1.0) * FAR * (1.1 + 0.29 * i)


def _everything(obj: Any, names: list[str]) -> Dependence:
    return Dependence(np.ones(grid_shape(obj), dtype=bool), names, False)


def _collect(node: Any, is_known: Callable[[Any], bool], leaves: dict[int, Any], count: list[int]) -> bool:
    """The leaves under ``node``'s recipe (by identity); False beyond :data:`MAX_NODES`."""
    count[0] += 1
    if count[0] > MAX_NODES:
        return False
    recipe = recipe_of(node)
    if recipe is None:
        if is_known(node) or is_aggregate(node):
            leaves[id(node)] = node
        return True
    return all(_collect(x, is_known, leaves, count) for x in recipe.inputs())


def _replay(node: Any, subs: dict[int, Any]) -> Any:
    """``node`` computed again from its recipe, with leaves ``subs`` (by id) replaced."""
    if id(node) in subs:
        return subs[id(node)]
    recipe = recipe_of(node)
    if recipe is None:
        return node

    def swap(value: Any) -> Any:
        if id(value) in subs and not isinstance(value, str):
            return subs[id(value)]
        if isinstance(value, pd.DataFrame | pd.Series):
            return _replay(value, subs)
        if isinstance(value, list | tuple) and any(isinstance(v, pd.DataFrame | pd.Series) for v in value):
            return type(value)(swap(v) for v in value)
        if isinstance(value, dict) and any(isinstance(v, pd.DataFrame | pd.Series) for v in value.values()):
            return {k: swap(v) for k, v in value.items()}
        return value

    return recipe.func(*[swap(a) for a in recipe.args], **{k: swap(v) for k, v in recipe.kwargs.items()})


def _replaced(leaf: Any, hidden: np.ndarray, how: str) -> Any:
    """A copy of ``leaf`` whose hidden cells are missing, or moved far above / below."""
    grid = leaf.to_frame() if isinstance(leaf, pd.Series) else leaf
    out = grid.copy()
    moved = 0  # (cells moved so far: every hidden cell of the grid gets its own amount)
    for j in range(grid.shape[1]):
        rows = np.flatnonzero(hidden[:, j])
        if not len(rows):
            continue
        col = pd.to_numeric(grid.iloc[:, j], errors="coerce").astype(float).to_numpy(copy=True)
        if how == "missing":
            col[rows] = np.nan
        else:
            sign = 1.0 if how == "above" else -1.0
            # distinct far values: two hidden cells moved by the same amount could cancel out, or
            # tie (idxmax of a row of two hidden cells moved alike kept its answer both ways)
            col[rows] = np.nan_to_num(col[rows]) + sign * FAR * (1.0 + 0.37 * np.arange(moved, moved + len(rows)))
        moved += len(rows)
        out.isetitem(j, col)
    return out.iloc[:, 0].rename(leaf.name) if isinstance(leaf, pd.Series) else out


def _values(obj: Any) -> np.ndarray:
    grid = obj.to_frame() if isinstance(obj, pd.Series) else obj
    return np.asarray(grid.to_numpy(dtype=object))


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b) or grid_shape(a) != grid_shape(b):
        return False
    if not a.index.equals(b.index):
        return False
    if isinstance(a, pd.DataFrame) and not a.columns.equals(b.columns):
        return False
    return not _differs(a, b).any()


def _differs(base: Any, other: Any) -> np.ndarray:
    """Per cell of ``base``'s grid, whether ``other`` shows another value (all cells if reshaped)."""
    if not isinstance(other, pd.DataFrame | pd.Series) or grid_shape(other) != grid_shape(base):
        return np.ones(grid_shape(base), dtype=bool)
    x, y = _values(base), _values(other)
    try:  # numbers (the usual case): vectorised, missing equal to missing
        fx, fy = x.astype(float), y.astype(float)
        return ~((fx == fy) | (np.isnan(fx) & np.isnan(fy)))
    except (TypeError, ValueError):
        pass
    out = np.zeros(x.shape, dtype=bool)
    for idx in np.ndindex(x.shape):
        u, v = x[idx], y[idx]
        u_na, v_na = _missing(u), _missing(v)
        if u_na or v_na:
            out[idx] = u_na != v_na
            continue
        try:
            out[idx] = not bool(u == v)
        except (TypeError, ValueError):
            out[idx] = True
    return out


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False
