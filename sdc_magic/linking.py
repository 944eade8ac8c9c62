"""Linked outputs: a table is only dangerous in company.

The same people appear in every output of a session. Two defences, both driven by
the *rows* behind each published cell (the population), recorded compactly per output
as one integer per row of its source frame (its cell, or -1):

* **Differencing through filters.** When one published cell's population contains
  another's and the difference holds between 1 and ``threshold - 1`` units, the new
  cell is made primary, with an explanation naming both outputs ("cases by sex, minus
  cases by sex outside Mirebalais, would reveal fewer than 5 cases"). This also catches
  overlapping recodings (age bands 0-11/12-17 in one table, 0-5/6-17 in another).
* **Joint audit.** After the new table is protected on its own, its hidden cells and
  those of every related earlier output are audited together: the unknowns are the
  counts of the finest cells both tables define (their common refinement, from the
  rows), the constraints are every published cell and every margin of both tables.
  Where a hidden cell loses its protection, more cells of the *new* table are hidden
  (earlier outputs are never changed after display); if that does not suffice, the
  new output is blocked with the reason.

Rows are identified by their labels in the source frame's index (filters keep them);
two outputs are related only if their sources share labels *and* agree, for those
labels, on the values of at least one common key column (a recoded column may differ),
so an unrelated frame that happens to reuse a RangeIndex is not taken for the same
population.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

MAX_LINKED_ROWS = 5_000_000
MAX_JOINT_CELLS = 5_000


@dataclass
class Population:
    """Which rows lie behind each published cell of one output."""

    out_id: str
    title: str
    labels: pd.Index  # row labels of the source frame
    cell_of_row: np.ndarray  # published cell id per row, -1 if hidden / not shown
    cell_names: list[str]
    sizes: np.ndarray  # rows per published cell
    keys: dict[str, np.ndarray] = field(default_factory=dict)  # key column values per row (relatedness)
    groups: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)  # margin group ids per row
    hidden_groups: dict[tuple[str, ...], set[int]] = field(default_factory=dict)
    group_sizes: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)
    threshold: int = 5
    entry_cells: np.ndarray | None = None  # the entry cell of each published cell
    full: tuple[str, ...] = ()  # the finest grouping (the table's own cells)
    group_of_cell: np.ndarray | None = None  # the group (in ``groups[full]``) of each published cell
    frame: pd.DataFrame | None = None  # the source (margins are grouped lazily, see with_margins)
    group_index: dict[tuple[str, ...], pd.Index] = field(default_factory=dict)  # labels of each grouping's ids
    hidden_model: dict[tuple[str, ...], set[int]] = field(default_factory=dict)  # hidden cells at every grouping


#: Group ids computed during the current display, so that the differencing check, the
#: published-cells lookup and the final record group the source only once.
_ids_cache: dict[tuple[int, tuple[str, ...]], tuple[Any, np.ndarray, pd.Index]] = {}


def clear_cache() -> None:
    _ids_cache.clear()


def _group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index]:
    key = (id(frame), tuple(keys))
    hit = _ids_cache.get(key)
    if hit is not None and hit[0] is frame:
        return hit[1], hit[2]
    ids, index = _compute_group_ids(frame, keys)
    if len(_ids_cache) > 64:
        _ids_cache.clear()
    _ids_cache[key] = (frame, ids, index)
    return ids, index


def _compute_group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index]:
    if not keys:
        return np.zeros(len(frame), dtype=np.int64), pd.Index(["all"])
    gb = frame.groupby(keys, observed=True, dropna=False, sort=False)
    grouper = gb._grouper
    ids = grouper.ids if hasattr(grouper, "ids") else grouper.group_info[0]
    return np.asarray(ids, dtype=np.int64), grouper.result_index


def population_of(out_id: str, title: str, entry: Any, positions: np.ndarray | None,
                  hidden_flat: np.ndarray | None, threshold: int) -> Population | None:
    """The population of each published (shown, not hidden, not margin) cell of a table.

    ``positions`` maps displayed cells to the entry's cells; ``hidden_flat`` says which
    displayed cells are hidden (None: consider every shown cell published).
    """
    source = getattr(entry, "source", None)
    frame = getattr(source, "frame", None)
    if frame is None or positions is None:
        return None
    keys = [k for k in (getattr(source, "keys", None) or []) if k in frame.columns]
    if not keys or len(frame) > MAX_LINKED_ROWS or not frame.index.is_unique or not set(keys) <= set(entry.dims):
        return None
    ids, index = _group_ids(frame, keys)
    canon = _canon_index(index, keys)
    flat = entry.flat
    margin = entry.evidence.is_margin
    shown = positions >= 0
    if hidden_flat is not None:
        shown &= ~np.asarray(hidden_flat, dtype=bool)
    cells = np.unique(positions[shown])
    cells = cells[~margin[cells]]
    arrays = [flat.dims[k][cells] for k in keys]
    wanted = pd.MultiIndex.from_arrays(arrays) if len(keys) > 1 else pd.Index(arrays[0], dtype=object)
    group_of_cell = canon.get_indexer(wanted) if canon.is_unique else np.full(len(cells), -1)
    group_to_cell = np.full(len(index), -1, dtype=np.int64)
    cell_names: list[str] = []
    entry_cells: list[int] = []
    groups_of_cells: list[int] = []
    for k, g in enumerate(group_of_cell):
        if g < 0 or group_to_cell[g] >= 0:
            continue
        group_to_cell[g] = len(cell_names)
        cell_names.append(" / ".join(str(a[k]) for a in arrays))
        entry_cells.append(int(cells[k]))
        groups_of_cells.append(int(g))
    cell_of_row = np.where(ids >= 0, group_to_cell[np.where(ids >= 0, ids, 0)], -1).astype(np.int64)
    sizes = np.bincount(cell_of_row[cell_of_row >= 0], minlength=len(cell_names))
    pop = Population(out_id=out_id, title=title, labels=frame.index, cell_of_row=cell_of_row,
                     cell_names=cell_names, sizes=sizes, threshold=threshold,
                     entry_cells=np.asarray(entry_cells, dtype=np.int64), full=tuple(keys),
                     group_of_cell=np.asarray(groups_of_cells, dtype=np.int64))
    for k in keys:
        pop.keys[k] = np.asarray(frame[k].astype(object))
    pop.groups[tuple(keys)] = ids
    pop.group_sizes[tuple(keys)] = np.bincount(ids[ids >= 0], minlength=len(index))
    pop.group_index[tuple(keys)] = canon
    pop.hidden_groups[tuple(keys)] = {int(g) for g in np.flatnonzero(group_to_cell < 0)}
    pop.frame = frame
    return pop


def with_margins(pop: Population) -> Population:
    """Add the group ids of every margin grouping (computed only when a joint audit needs them)."""
    if pop.frame is None or len(pop.groups) > 1:
        return pop
    keys = list(pop.full)
    for size in range(0, len(keys)):
        for subset in itertools.combinations(keys, size):
            gids, gindex = _group_ids(pop.frame, list(subset))
            pop.groups[subset] = gids
            pop.group_sizes[subset] = np.bincount(gids[gids >= 0], minlength=len(gindex))
            pop.group_index[subset] = _canon_index(gindex, list(subset)) if subset else gindex
    return pop


def record_hidden_model(pop: Population, models: list[dict[str, Any]]) -> None:
    """Remember which cells — inner or margins — the protection of this output hid.

    A later output whose cell has exactly the rows of one of them must hide it too: the
    pattern that protects this output relied on it staying hidden.
    """
    keys = list(pop.full)
    for model in models:
        cells = model["cells"]
        columns = dict(zip(model["dims"], model.get("columns", model["dims"]), strict=True))
        if not set(keys) <= set(columns):
            continue
        hidden = cells[cells["status"].isin(["primary", "secondary"])]
        if hidden.empty:
            continue
        needs_margins = any((hidden[columns[k]] == "Total").any() for k in keys)
        if needs_margins:
            with_margins(pop)
        labels = {k: hidden[columns[k]].astype(object).to_numpy() for k in keys}
        fixed_mask = np.stack([labels[k] != "Total" for k in keys], axis=1)
        for pattern in {tuple(row) for row in fixed_mask.tolist()}:
            subset = tuple(k for k, f in zip(keys, pattern, strict=True) if f)
            if subset not in pop.group_index:
                continue
            rows = np.flatnonzero((fixed_mask == np.array(pattern)).all(axis=1))
            if subset:
                arrays = [np.array([str(v) for v in labels[k][rows]], dtype=object) for k in subset]
                index = pop.group_index[subset]
                wanted = pd.MultiIndex.from_arrays(arrays) if len(subset) > 1 else pd.Index(arrays[0], dtype=object)
                target = pd.MultiIndex.from_arrays([index.get_level_values(i).astype(str) for i in range(len(subset))]) \
                    if len(subset) > 1 else pd.Index(index.astype(str), dtype=object)
                found = target.get_indexer(wanted) if target.is_unique else np.full(len(rows), -1)
                groups = {int(g) for g in found if g >= 0}
            else:
                groups = {0}
            pop.hidden_model.setdefault(subset, set()).update(groups)


def _canon_index(index: pd.Index, keys: list[str]) -> pd.Index:
    from .flatten import canonical_labels

    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_arrays([canonical_labels(index.get_level_values(k)) for k in keys])
    return pd.Index(canonical_labels(index), dtype=object)


def related(a: Population, b: Population) -> np.ndarray | None:
    """Positions of ``b``'s rows in ``a`` (-1 where absent), or None if the populations are unrelated."""
    if a.labels is b.labels:
        return np.arange(len(b.labels))
    try:
        pos = a.labels.get_indexer(b.labels)
    except (TypeError, ValueError, pd.errors.InvalidIndexError):
        return None
    shared = pos >= 0
    if not shared.any():
        return None
    common = set(a.keys) & set(b.keys)
    if not common:
        # no common key column to confirm the rows are the same rows: only trust identical labels objects
        return pos if a.labels is b.labels else None
    # the same rows agree on at least one common key column (a recoded column may differ: that
    # is exactly the overlapping-recoding case we must catch)
    sample = np.flatnonzero(shared)[:: max(1, int(shared.sum()) // 2000)]
    for k in common:
        if np.array_equal(_norm(a.keys[k][pos[sample]]), _norm(b.keys[k][sample])):
            return pos
    return None


def _norm(values: np.ndarray) -> np.ndarray:
    return np.array(["\0nan" if (isinstance(v, float) and np.isnan(v)) or v is None else str(v) for v in values],
                    dtype=object)


@dataclass
class DifferencingHit:
    """A new cell whose population differs from an earlier published cell's by a few units."""

    new_cell: int
    earlier: str
    earlier_title: str
    earlier_cell: str
    new_title: str


def differencing(new: Population, earlier: list[Population]) -> list[DifferencingHit]:
    """New published cells that, against an earlier published cell, isolate 1..threshold-1 rows."""
    hits: list[DifferencingHit] = []
    for old in earlier:
        pos = related(old, new)
        if pos is None:
            continue
        in_new = new.cell_of_row >= 0
        old_cell = np.full(len(new.cell_of_row), -1, dtype=np.int64)
        shared = pos >= 0
        old_cell[shared] = old.cell_of_row[pos[shared]]
        both = in_new & (old_cell >= 0)
        if not both.any():
            continue
        n_new = len(new.sizes)
        pair = old_cell[both] * n_new + new.cell_of_row[both]
        uniq, counts = np.unique(pair, return_counts=True)
        a_cells, b_cells = uniq // n_new, uniq % n_new
        size_a = old.sizes[a_cells]
        size_b = new.sizes[b_cells]
        b_in_a = counts == size_b
        a_in_b = counts == size_a
        diff = np.where(b_in_a, size_a - size_b, np.where(a_in_b, size_b - size_a, 0))
        risky = (b_in_a | a_in_b) & (diff > 0) & (diff < new.threshold)
        for a, b in zip(a_cells[risky], b_cells[risky], strict=True):
            hits.append(DifferencingHit(int(b), old.out_id, old.title, old.cell_names[int(a)], new.title))
    return hits


def hidden_elsewhere(new: Population, earlier: list[Population]) -> list[DifferencingHit]:
    """New cells whose rows are exactly those of a cell an earlier output hid (inner or margin)."""
    hits: list[DifferencingHit] = []
    in_new = new.cell_of_row >= 0
    for old in earlier:
        if not old.hidden_model:
            continue
        pos = related(old, new)
        if pos is None:
            continue
        shared = pos >= 0
        for subset, hidden in old.hidden_model.items():
            gids = old.groups.get(subset)
            if gids is None or not hidden:
                continue
            old_group = np.full(len(new.cell_of_row), -1, dtype=np.int64)
            old_group[shared] = gids[pos[shared]]
            both = in_new & (old_group >= 0)
            n_new = len(new.sizes)
            pair = old_group[both] * n_new + new.cell_of_row[both]
            uniq, counts = np.unique(pair, return_counts=True)
            groups, cells = uniq // n_new, uniq % n_new
            sizes_old = old.group_sizes[subset][groups]
            equal = (counts == new.sizes[cells]) & (counts == sizes_old)
            for g, b in zip(groups[equal], cells[equal], strict=True):
                if int(g) in hidden:
                    label = " × ".join(subset) if subset else "grand total"
                    hits.append(DifferencingHit(int(b), old.out_id, old.title, f"a hidden cell of {label}", new.title))
    return hits


# ------------------------------------------------------------------ joint audit
def joint_intervals(tables: list[Population], hidden: list[dict[tuple[str, ...], set[int]]],
                    targets: list[tuple[int, tuple[str, ...], int]]) -> dict[tuple[int, tuple[str, ...], int],
                                                                             tuple[float, float]]:
    """Attacker intervals of hidden cells when every published cell of every table is known.

    ``tables`` share rows (``tables[0]`` is the reference); the unknowns are the counts
    of the common refinement of all groupings. ``hidden[t][grouping]`` lists the group ids
    of table ``t`` that are hidden; ``targets`` are (table, grouping, group) to bound.
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    ref = tables[0]
    n_rows = len(ref.labels)
    columns = []
    for t, pop in enumerate(tables):
        pos = np.arange(n_rows) if t == 0 else ref.labels.get_indexer(pop.labels)
        for grouping, gids in pop.groups.items():
            col = np.full(n_rows, -1, dtype=np.int64)
            ok = pos >= 0
            col[pos[ok]] = gids[ok]
            columns.append(((t, grouping), col))
    stacked = np.stack([c for _, c in columns], axis=1)
    cover, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse, minlength=len(cover)).astype(float)
    if len(cover) > MAX_JOINT_CELLS:
        raise ValueError(f"joint audit too large ({len(cover)} cells)")
    rows, cols, rhs = [], [], []
    member: dict[tuple[int, tuple[str, ...], int], np.ndarray] = {}
    for c, ((t, grouping), _) in enumerate(columns):
        values = cover[:, c]
        for g in np.unique(values[values >= 0]):
            members = np.flatnonzero(values == g)
            member[(t, grouping, int(g))] = members
            if int(g) in hidden[t].get(grouping, set()):
                continue
            r = len(rhs)
            rows += [r] * len(members)
            cols += members.tolist()
            rhs.append(float(counts[members].sum()))
    A = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(rhs), len(cover)))
    b = np.asarray(rhs)
    out = {}
    for target in targets:
        members = member.get(target)
        if members is None:
            continue
        c = np.zeros(len(cover))
        c[members] = 1.0
        lo = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        hi = linprog(-c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        if lo.status == 0 and hi.status in (0, 3):
            out[target] = (float(lo.fun), np.inf if hi.status == 3 else float(-hi.fun))
    return out


# ------------------------------------------------------------------ session-level steps
def published_elsewhere(new: Population, earlier: list[Population]) -> dict[tuple[str, ...], set[tuple]]:
    """Cells of the new table (inner or margins) whose rows are exactly a cell an earlier
    output published: they are public, so protection must not count on hiding them.

    Returns, per grouping (a subset of the keys), the labels of those cells.
    """
    out: dict[tuple[str, ...], set[tuple]] = {}
    related_pairs = [(old, pos) for old in earlier if len(old.sizes) and (pos := related(old, new)) is not None]
    if not related_pairs:
        return out
    with_margins(new)
    for old, pos in related_pairs:
        shared = pos >= 0
        old_cell = np.full(len(new.labels), -1, dtype=np.int64)
        old_cell[shared] = old.cell_of_row[pos[shared]]
        n_old = len(old.sizes)
        for subset, gids in new.groups.items():
            both = (gids >= 0) & (old_cell >= 0)
            if not both.any():
                continue
            pair = gids[both] * n_old + old_cell[both]
            uniq, counts = np.unique(pair, return_counts=True)
            groups, cells = uniq // n_old, uniq % n_old
            equal = (counts == new.group_sizes[subset][groups]) & (counts == old.sizes[cells])
            if not equal.any():
                continue
            labels = out.setdefault(subset, set())
            index = new.group_index.get(subset)
            for g in groups[equal]:
                if not subset:
                    labels.add(())
                    continue
                label = index[int(g)]
                labels.add(tuple(label) if isinstance(label, tuple) else (label,))
    return out


def differencing_reasons(new: Population, earlier: list[Population], positions: np.ndarray) -> dict[int, list[Any]]:
    """Displayed cells (flat index) to make primary because of differencing, with reasons."""
    from .rules import Reason

    out: dict[int, list[Any]] = {}
    if new.entry_cells is None:
        return out
    for hit in differencing(new, earlier):
        entry_cell = new.entry_cells[hit.new_cell]
        message = (f"{hit.earlier_title} ({hit.earlier}) and this table differ by fewer than {new.threshold} "
                   f"units in {new.cell_names[hit.new_cell]} (vs {hit.earlier_cell}): subtracting one from the "
                   "other would reveal them")
        for i in np.flatnonzero(positions == entry_cell):
            out.setdefault(int(i), []).append(Reason("differencing", message))
    for hit in hidden_elsewhere(new, earlier):
        entry_cell = new.entry_cells[hit.new_cell]
        message = (f"{hit.earlier_title} ({hit.earlier}) hid these same cases ({hit.earlier_cell}) to protect "
                   "its small cells: publishing them here would undo that")
        for i in np.flatnonzero(positions == entry_cell):
            if int(i) not in out:
                out.setdefault(int(i), []).append(Reason("linked", message))
    return out


def joint_audit(new: Population, earlier: list[Population], protection: float, max_tables: int = 3
                ) -> tuple[list[int], list[str]]:
    """Audit the new table's and related earlier tables' hidden primaries together.

    Returns (published cells of the new table to hide in addition, problems that remain).
    Margins that are themselves below the threshold are treated as hidden (as the
    per-table engine does); all other margins as known.
    """
    related_tables = [old for old in earlier if related(old, new) is not None][-max_tables:]
    if not related_tables:
        return [], []
    tables = [with_margins(new), *(with_margins(t) for t in related_tables)]
    m = protection / 100.0

    def hidden_sets(pop: Population, extra: set[int]) -> dict[tuple[str, ...], set[int]]:
        out: dict[tuple[str, ...], set[int]] = {}
        for grouping, sizes in pop.group_sizes.items():
            small = {int(g) for g in np.flatnonzero((sizes > 0) & (sizes < pop.threshold))}
            small |= pop.hidden_model.get(grouping, set())
            if grouping == pop.full:
                small |= pop.hidden_groups.get(grouping, set()) | extra
            out[grouping] = small
        return out

    def targets_of(t: int, pop: Population) -> list[tuple[int, tuple[str, ...], int]]:
        sizes = pop.group_sizes[pop.full]
        return [(t, pop.full, g) for g in sorted(pop.hidden_groups.get(pop.full, set()))
                if 0 < sizes[g] < pop.threshold]

    extra: set[int] = set()
    candidates = sorted((int(g) for g in (new.group_of_cell if new.group_of_cell is not None else [])),
                        key=lambda g: new.group_sizes[new.full][g])
    added: list[int] = []
    for _ in range(12):
        hidden = [hidden_sets(pop, extra if t == 0 else set()) for t, pop in enumerate(tables)]
        targets = [tg for t, pop in enumerate(tables) for tg in targets_of(t, pop)]
        if not targets:
            return added, []
        try:
            intervals = joint_intervals(tables, hidden, targets)
        except ValueError as exc:
            return added, [str(exc)]
        failing = []
        for (t, grouping, g), (lo, hi) in intervals.items():
            v = float(tables[t].group_sizes[grouping][g])
            if hi - lo <= 1e-9 or lo > (1 - m) * v + 1e-9 or hi < (1 + m) * v - 1e-9:
                failing.append((t, g))
        if not failing:
            return added, []
        nxt = next((g for g in candidates if g not in extra), None)
        if nxt is None:
            break
        extra.add(nxt)
        added.append(nxt)
    names = ", ".join(f"{tables[t].out_id}:{g}" for t, g in failing[:5])
    return added, [f"linked outputs leave hidden cells recoverable ({names})"]
