"""The atoms of a universe: the finest partition of its rows that every table shown cuts.

Each published cell is a union of atoms; differencing and the joint audit work on atom counts
(O(atoms), never O(rows)). A new table's grouping splits the atoms it cuts (:func:`refine`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def refine(row_atom: np.ndarray, atom_size: np.ndarray, g: np.ndarray, n_groups: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split the atoms by a new grouping ``g`` of the rows (-1: outside it).

    Returns (new atom of each row, parent atom of each new atom, group of each new atom,
    rows per new atom). Only atoms the grouping cuts are factorised again: a table over
    keys the session has already seen costs a few vector passes over the rows.
    """
    n_atoms = len(atom_size)
    if n_atoms == 1 and len(g) and (g != g[0]).any():
        # a universe's first table: every row is in atom 0, which the grouping splits into one atom
        # per group (and one for the rows outside it); the same partition as below, its atoms
        # numbered by group, without its passes over the rows (a 1M-row display: 42 -> 6 ms)
        shifted = np.asarray(g, dtype=np.int64) + 1
        counts = np.bincount(shifted, minlength=n_groups + 1)
        used = counts > 0
        renumber = (np.cumsum(used) - 1).astype(np.int32)
        return (renumber[shifted], np.zeros(int(used.sum()), dtype=np.int64),
                (np.flatnonzero(used) - 1).astype(np.int32), counts[used].astype(np.int64))
    rep = np.full(n_atoms, -1, dtype=np.int64)
    rep[row_atom] = g
    differs = g != rep[row_atom]
    if not differs.any():
        return row_atom, np.arange(n_atoms, dtype=np.int64), rep.astype(np.int32), atom_size
    is_split = np.zeros(n_atoms, dtype=bool)
    is_split[row_atom[differs]] = True
    rows = np.flatnonzero(is_split[row_atom])
    pair = row_atom[rows].astype(np.int64) * (n_groups + 1) + (g[rows] + 1)
    local, uniq = pd.factorize(pair, sort=False)
    new_atom = row_atom.astype(np.int64)
    new_atom[rows] = n_atoms + local
    parent = np.concatenate([np.arange(n_atoms, dtype=np.int64), uniq // (n_groups + 1)])
    group = np.concatenate([rep, uniq % (n_groups + 1) - 1])
    keep = np.ones(len(parent), dtype=bool)
    keep[np.flatnonzero(is_split)] = False  # the split atoms live on in their pieces
    renumber = np.cumsum(keep) - 1
    codes = renumber[new_atom].astype(np.int32)
    sizes = np.bincount(codes, minlength=int(keep.sum())).astype(np.int64)
    return codes, parent[keep], group[keep].astype(np.int32), sizes


def rows_in_order(rows: np.ndarray, n: int) -> bool:
    """Whether ``rows`` (each row's universe row) is 0, 1, …, n − 1: a frame that is its universe's
    rows in order (its first table), whose grouping is the universe's without a scatter."""
    return len(rows) == n and (n == 0 or (int(rows[0]) == 0 and bool((np.diff(rows) == 1).all())))


def by_atom(atom_of: np.ndarray, n_atoms: int) -> tuple[np.ndarray, np.ndarray]:
    """An index of items by their atom (``atom_of``: each item's atom): (items ordered by atom,
    where each atom's items start), for :func:`items_of`."""
    order = np.argsort(atom_of, kind="stable")
    return order, np.searchsorted(np.asarray(atom_of)[order], np.arange(n_atoms + 1))


def items_of(index: tuple[np.ndarray, np.ndarray], atoms: np.ndarray) -> np.ndarray:
    """The items (rows, entries) of ``atoms`` through an index made by :func:`by_atom`."""
    order, starts = index
    lens = starts[atoms + 1] - starts[atoms]
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    return order[np.repeat(starts[atoms] - np.cumsum(lens) + lens, lens) + np.arange(total)]


def on_one_side(mine: np.ndarray, theirs: np.ndarray, side: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The ids (units, sets of atoms) found on one side only, each once, from two lists of ids
    with repeats; ``side`` (int8, zero) and ``last`` (int64) are scratch arrays over every id,
    zero again after. A mark per id and no sort: asked per candidate cell of differencing."""
    side[mine] = 1
    side[theirs] |= 2
    touched = np.concatenate([mine, theirs])
    lone = touched[(side[touched] == 1) | (side[touched] == 2)]
    side[touched] = 0
    at = np.arange(len(lone), dtype=np.int64)
    last[lone] = at  # (each id once: the last of its entries)
    return lone[last[lone] == at]
