"""Every level of the earlier outputs paired with a new table's groups, in one set of arrays.

Why: differencing and "published elsewhere" compare a new table with each level (inner cells,
each margin) of each earlier population of its universe. Done one level at a time, a display's
cost grew with the session: a session of 30 related tables on 1M rows held ~150 populations of
4 levels each, and the per-level loops cost 0.7 CPU s of a 1.7 s display (stop 65), most of it
the fixed cost of small numpy calls. Here every level gets a range of *global* cell ids, and the
pairs (earlier level cell, new group, rows shared) of all levels are built once, merged by one
:func:`cross`; a question asked of every level is then a few vectorised calls whose keys are
(level, new group) pairs (:func:`pair_keys`), compacted to the pairs that occur, so that memory
stays O(pairs) whatever the number of levels or of new groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .populations import Draft, Population


def cross(a: np.ndarray, na: int, b: np.ndarray, nb: int, w: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty pairs (a, b) with their summed weights (-1: outside that table; both -1 dropped)."""
    code = (a.astype(np.int64) + 1) * (nb + 1) + (b.astype(np.int64) + 1)
    span = (na + 1) * (nb + 1)
    if span <= max(4 * len(code), 1 << 16):
        counts = np.bincount(code, weights=w, minlength=span)
        counts[0] = 0
        nz = np.flatnonzero(counts)
        return nz // (nb + 1) - 1, nz % (nb + 1) - 1, counts[nz].astype(np.int64)
    codes, uniq = pd.factorize(code)
    counts = np.bincount(codes, weights=w, minlength=len(uniq))
    keep = (uniq != 0) & (counts > 0)
    uniq, counts = uniq[keep], counts[keep]
    return uniq // (nb + 1) - 1, uniq % (nb + 1) - 1, counts.astype(np.int64)


def draft_pairs(d: Draft, old: Population) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(old group, new group, rows) for every pair of groups sharing rows, or lying outside
    the other table (-1), from the refined atoms."""
    return cross(old.group[d.parent], len(old.labels), d.pop.group, len(d.pop.labels), d.atom_size)


@dataclass
class LevelPairs:
    """The levels of ``olds`` (each old's ``levels()`` in order) as ranges of global cell ids,
    with the facts of every global cell and the merged pairs shared with the new groups."""

    olds: list[Population]
    level_old: np.ndarray  # per level: its population's index in olds
    level_subset: list[tuple[str, ...]]  # per level: the subset of keys
    level_skip: np.ndarray  # per level: a margin of a table whose every cell is published
    cell_level: np.ndarray  # per global cell: its level
    sizes: np.ndarray  # per global cell: rows
    pub: np.ndarray  # per global cell: published (see Population.level_facts)
    hidden: np.ndarray  # per global cell: hidden by its output
    su: np.ndarray  # pairs: global cell (both sides inside their tables)
    bu: np.ndarray  # pairs: the new table's group
    ww: np.ndarray  # pairs: rows shared

    @property
    def n_cells(self) -> int:
        return len(self.cell_level)

    def subsets_of(self, o: int, flagged: np.ndarray) -> set[tuple[str, ...]]:
        """The subsets of the ``o``-th old whose level is flagged."""
        return {self.level_subset[j] for j in np.flatnonzero(flagged & (self.level_old == o))}


def level_pairs(d: Draft, olds: list[Population]) -> LevelPairs:
    """Build :class:`LevelPairs` of a draft against ``olds`` (see the module's docstring)."""
    level_old: list[int] = []
    level_subset: list[tuple[str, ...]] = []
    level_skip: list[bool] = []
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("level", "sizes", "pub", "hidden", "su", "bu", "ww")}
    offset = 0
    for o, old in enumerate(olds):
        a, b, w = draft_pairs(d, old)
        inside = (a >= 0) & (b >= 0)
        a, b, w = a[inside], b[inside], w[inside]
        # every cell of the old table published: its margins are sums of published cells (see
        # differencing._Findings.compare, which skips their forward and margin comparisons)
        fully = bool(old.published.all()) and not old.hidden_model and not old.hidden_shown.any()
        for subset in old.levels():
            mapping, sizes, pub, hidden = old.level_facts(subset)
            j = len(level_old)
            level_old.append(o)
            level_subset.append(subset)
            level_skip.append(fully and subset != old.keys)
            parts["level"].append(np.full(len(sizes), j, dtype=np.int64))
            parts["sizes"].append(sizes)
            parts["pub"].append(pub)
            parts["hidden"].append(hidden)
            parts["su"].append(mapping[a] + offset)
            parts["bu"].append(b)
            parts["ww"].append(w)
            offset += len(sizes)
    cat = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in parts.items()}
    su, bu, ww = cross(cat["su"], offset, cat["bu"], len(d.pop.labels), cat["ww"])
    return LevelPairs(olds, np.asarray(level_old, dtype=np.int64), level_subset, np.asarray(level_skip, dtype=bool),
                      cat["level"], cat["sizes"].astype(np.int64), cat["pub"].astype(bool),
                      cat["hidden"].astype(bool), su, bu, ww)


def pair_keys(level: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compact keys of (level, group) pairs: (key per pair, level per key, group per key)."""
    codes, uniq = pd.factorize(level.astype(np.int64) * max(n_groups, 1) + group)
    uniq = np.asarray(uniq, dtype=np.int64)
    return np.asarray(codes, dtype=np.int64), uniq // max(n_groups, 1), uniq % max(n_groups, 1)
