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


class SetsOfAtoms:
    """Sets of atoms with a number of units each (a unit's rows, an engine's signature of units),
    indexed both ways: the units on one side only of two sets of atoms, cheaply.

    ``entry_set``, ``entry_atom``: the entries (a row of a unit, an atom of a signature), each
    with its set and its atom; ``units``: per set, its units."""

    #: Entries of the atoms that differ looked at first; their sets often answer already
    FIRST_ENTRIES = 512

    def __init__(self, entry_set: np.ndarray, entry_atom: np.ndarray, units: np.ndarray, n_atoms: int) -> None:
        self.entry_set = np.asarray(entry_set, dtype=np.int64)
        self.entry_atom = np.asarray(entry_atom, dtype=np.int64)
        self.units = np.asarray(units, dtype=np.int64)
        self.by_atom = by_atom(self.entry_atom, n_atoms)
        order, self.set_start = by_atom(self.entry_set, len(self.units))
        self.set_atom = self.entry_atom[order]
        self.work = 0  # entries looked at so far (a caller's work budget)

    def apart(self, one: np.ndarray, other: np.ndarray, enough: int) -> int:
        """Units of the sets with an atom in exactly one of ``one`` and ``other`` (per atom,
        whether it is on that side), exact below ``enough``, else some number ≥ ``enough``.

        Why this way: a set on one side only has an atom of that side that is not of the other,
        so only the sets of the atoms that differ are candidates, each judged by its own atoms.
        Differencing asks whether two tables differ by fewer than a threshold of units: the
        first sets found often hold that many already (a cell against a margin: every unit
        outside the cell), and the rest is not looked at. Gathering both sides per candidate
        cell took 3-5 s in the last display of a 20-table polars session of distinct firms."""
        one, other = np.asarray(one, bool), np.asarray(other, bool)
        differ = np.flatnonzero(one ^ other)
        starts = self.by_atom[1]
        reach = np.cumsum(starts[differ + 1] - starts[differ])
        split = int(np.searchsorted(reach, self.FIRST_ENTRIES)) + 1
        found, seen = 0, np.zeros(0, dtype=np.int64)
        for atoms in (differ[:split], differ[split:]):
            if not len(atoms):
                continue
            entries = items_of(self.by_atom, atoms)
            self.work += len(entries)
            sets = pd.unique(self.entry_set[entries])
            if len(seen):
                sets = sets[~np.isin(sets, seen)]
            lone = self._on_one_side(sets, one, other)
            found += int(self.units[lone].sum())
            if found >= enough:
                break
            seen = sets
        return found

    def _on_one_side(self, sets: np.ndarray, one: np.ndarray, other: np.ndarray) -> np.ndarray:
        """Of ``sets``, those with an atom in exactly one of ``one`` and ``other``."""
        sets = np.asarray(sets, dtype=np.int64)
        lens = self.set_start[sets + 1] - self.set_start[sets]
        total = int(lens.sum())
        self.work += total
        if not total:
            return sets[:0]
        entries = np.repeat(self.set_start[sets] - np.cumsum(lens) + lens, lens) + np.arange(total)
        owner = np.repeat(np.arange(len(sets)), lens)
        atoms = self.set_atom[entries]
        meets_one = np.bincount(owner[one[atoms]], minlength=len(sets)) > 0
        meets_other = np.bincount(owner[other[atoms]], minlength=len(sets)) > 0
        return sets[meets_one ^ meets_other]
