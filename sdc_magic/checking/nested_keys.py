"""Keys that nest (a district within its region) protected as one dimension with a hierarchy.

Why: ``groupby(["district", "edu", "sex", "band", "region"])`` has a key, ``region``, that the
district decides. Modelled as a dimension of its own, every margin over it is a copy of a
cell (district D0 over every region *is* D0 in R1) and the model doubles: the red team's
five-key table of sums had 1,084 cells and 1,639 relations, and took 11–15 CPU s to protect,
where the same table without ``region`` took 1.9. The two models are the same system of
equations: every margin of the nested keys is either a cell of the finest key (whatever the
coarser keys say), a sub-total of the coarser key (a hierarchy node) or the total. So the
coarser keys become levels of a hierarchy of the finest one (``protect(hierarchies=...)``),
and the pattern found is written back onto every copy of each cell.

Only exact nestings are collapsed: over every inner cell of the table (zeros included), each
label of the finest key has one label of each coarser key, the coarser keys nest in one
another, no label is shared between the levels or missing, and the margin rows the caller
added (primary or published margins) are copies of a cell, a sub-total or the total with the
same value. Anything else keeps the model as it was (:func:`plan` returns None).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from itertools import pairwise, product

import numpy as np
import pandas as pd

TOTAL = "Total"
#: flags of the protection's input rows that merge by "or" when copies of one cell meet
FLAGS = ("primary", "publish")


@dataclass
class Nesting:
    """The finest key ``child`` and its coarser keys ``parents`` (finest first), with the
    parent of every label one level up (``up[j]``: label at level j -> label at level j + 1;
    level 0 is the child's)."""

    child: str
    parents: list[str]
    up: list[dict[Hashable, Hashable]]

    def ancestors(self, label: Hashable, level: int) -> list[Hashable]:
        """The labels above ``label`` (of level ``level``), one per coarser level, nearest first."""
        out = []
        for j in range(level, len(self.parents)):
            label = self.up[j][label]
            out.append(label)
        return out

    def hierarchy(self) -> dict[Hashable, list[Hashable]]:
        """``{parent: [parts]}`` over every level (the form of ``protect(hierarchies=...)``)."""
        tree: dict[Hashable, list[Hashable]] = {}
        for level in range(len(self.parents)):
            for label, parent in self.up[level].items():
                tree.setdefault(parent, []).append(label)
        return tree


def _is_total(values: np.ndarray) -> np.ndarray:
    """The margin marks of one dimension column (one comparison per distinct label, not per cell:
    this runs for every protected table)."""
    codes, uniques = pd.factorize(values)
    marks = np.array([isinstance(v, str) and v == TOTAL for v in uniques.tolist()] + [False], dtype=bool)
    return marks[codes]


def _determines(child: np.ndarray, parent: np.ndarray) -> bool:
    """True when each code of ``child`` comes with one code of ``parent`` (codes ≥ 0)."""
    pairs = np.unique(child.astype(np.int64) * (int(parent.max(initial=0)) + 1) + parent)
    return len(pairs) == len(np.unique(child))


def plan(cells: pd.DataFrame, dims: list[str]) -> Nesting | None:
    """The nesting to collapse in ``cells`` (the protection's input), or None.

    One chain per call: the key with the most labels among those that decide another key,
    and every key it decides, which must nest in one another. Labels that cannot be told
    apart by hashing (unhashable ones) leave the model as it is.
    """
    try:
        return _plan(cells, dims)
    except TypeError:
        return None


def _plan(cells: pd.DataFrame, dims: list[str]) -> Nesting | None:
    if len(dims) < 2 or not len(cells):
        return None
    totals = np.column_stack([_is_total(cells[d].to_numpy(dtype=object)) for d in dims])
    inner = cells.loc[~totals.any(axis=1), dims]
    if not len(inner):
        return None
    codes = {}
    for d in dims:
        values = inner[d].to_numpy(dtype=object)
        if pd.isna(values).any():
            return None  # a missing label: equality is not the labels' own
        codes[d], _ = pd.factorize(values)
    n_labels = {d: int(codes[d].max()) + 1 for d in dims}
    decided = {d: [p for p in dims if p != d and _determines(codes[d], codes[p])] for d in dims}
    candidates = [d for d in dims if decided[d]]
    if not candidates:
        return None
    child = max(candidates, key=lambda d: (n_labels[d], -dims.index(d)))
    parents = sorted(decided[child], key=lambda p: (-n_labels[p], dims.index(p)))
    chain = [child, *parents]
    for finer, coarser in pairwise(chain):
        if not _determines(codes[finer], codes[coarser]):
            return None  # two groupings that do not nest: left as they are
    up = []
    for finer, coarser in pairwise(chain):
        pairs = inner[[finer, coarser]].drop_duplicates()
        up.append(dict(zip(pairs[finer].tolist(), pairs[coarser].tolist(), strict=True)))
    labels = [set(inner[d].tolist()) for d in chain]
    every = set().union(*labels)
    if sum(len(s) for s in labels) != len(every) or any(isinstance(v, str) and v == TOTAL for v in every):
        return None  # a label at two levels (D1 a district and a region): one dimension cannot hold both
    nesting = Nesting(child, parents, up)
    return nesting if _codes(cells, nesting) is not None else None


def _codes(cells: pd.DataFrame, nesting: Nesting) -> list[Hashable] | None:
    """Each row's code in the collapsed dimension (a leaf, a node or Total), or None when some
    row is no copy of one (a margin row that does not follow the nesting)."""
    chain = [nesting.child, *nesting.parents]
    columns = [cells[d].to_numpy(dtype=object).tolist() for d in chain]
    top = set(nesting.up[-1].values())  # (once, not once per row of the top level: n² for n labels)
    out: list[Hashable] = []
    for row in zip(*columns, strict=True):
        level = next((j for j, v in enumerate(row) if not (isinstance(v, str) and v == TOTAL)), None)
        if level is None:
            out.append(TOTAL)
            continue
        label = row[level]
        if level < len(nesting.parents) and label not in nesting.up[level]:
            return None
        if level == len(nesting.parents) and label not in top:
            return None
        above = nesting.ancestors(label, level)
        for given, truth in zip(row[level + 1:], above, strict=True):
            if not (isinstance(given, str) and given == TOTAL) and given != truth:
                return None
        out.append(label)
    return out


def collapse(cells: pd.DataFrame, dims: list[str], nesting: Nesting) -> tuple[pd.DataFrame, list[str]] | None:
    """``cells`` with the coarser keys folded into the child's column (one row per cell), and
    the remaining dimensions; None when copies of one cell disagree."""
    codes = _codes(cells, nesting)
    if codes is None:
        return None
    kept = [d for d in dims if d not in nesting.parents]
    out = cells.drop(columns=nesting.parents).copy()
    out[nesting.child] = pd.Series(codes, index=out.index, dtype=object)
    key = out[kept].astype(object).apply(tuple, axis=1) if len(kept) > 1 else out[kept[0]].astype(object)
    first = ~key.duplicated().to_numpy()
    if first.all():
        return out, kept
    group = pd.factorize(key)[0]
    values = [c for c in out.columns if c not in kept and c not in FLAGS]
    for c in values:
        col = out[c].to_numpy()
        if col.dtype.kind in "fiub":
            kept_first = pd.Series(col).groupby(group).transform("first").to_numpy()
            if not np.allclose(col.astype(float), kept_first.astype(float), rtol=1e-12, atol=0.0, equal_nan=True):
                return None
    for flag in FLAGS:
        if flag in out.columns:
            out[flag] = pd.Series(out[flag].to_numpy(dtype=bool)).groupby(group).transform("max").to_numpy(dtype=bool)
    return out.loc[first].reset_index(drop=True), kept


def expand(result_cells: pd.DataFrame, nesting: Nesting, dims: list[str]) -> pd.DataFrame:
    """The protection's cells written back onto the nested keys: every copy of a cell gets its
    status, value and interval (a leaf is itself under each coarser key and under their totals;
    a sub-total under its own coarser keys and their totals). ``dims``: the keys as the caller
    had them, in its order, first."""
    chain_parents = nesting.parents
    leaves = set(nesting.up[0]) if nesting.up else set()
    level_of: dict[Hashable, int] = {label: 0 for label in leaves}
    for j in range(len(chain_parents)):
        for parent in set(nesting.up[j].values()):
            level_of[parent] = j + 1
    rows: list[int] = []
    child_col: list[Hashable] = []
    parent_cols: list[list[Hashable]] = [[] for _ in chain_parents]
    codes = result_cells[nesting.child].to_numpy(dtype=object).tolist()
    for i, code in enumerate(codes):
        if isinstance(code, str) and code == TOTAL:
            rows.append(i)
            child_col.append(TOTAL)
            for col in parent_cols:
                col.append(TOTAL)
            continue
        level = level_of[code]
        fixed = [TOTAL] * (level - 1) + [code] if level > 0 else []
        above = nesting.ancestors(code, level)
        for choice in product(*[(a, TOTAL) for a in above]):
            rows.append(i)
            child_col.append(code if level == 0 else TOTAL)
            for col, v in zip(parent_cols, [*fixed, *choice], strict=True):
                col.append(v)
    out = result_cells.iloc[rows].reset_index(drop=True).copy()
    out[nesting.child] = pd.Series(child_col, dtype=object)
    for name, col in zip(chain_parents, parent_cols, strict=True):
        out[name] = pd.Series(col, dtype=object)
    return out[[*dims, *[c for c in out.columns if c not in dims]]]
