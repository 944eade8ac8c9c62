"""Universes whose rows stay in their engine: atoms counted where the data live.

A row universe (:mod:`.universes`) holds a fingerprint per row and the atom of each row.
For a large engine source that meant fetching every row's keys and hashes into Python
(1M rows: most of a DuckDB display's time) and, above ``MAX_LINKED_ROWS``, no linking.
An :class:`EngineUniverse` holds no row at all: the tables of one base (the same
``InEngineRows.identity``) are over the same rows, and each recorded output is one engine
expression naming the group of every base row (NULL outside the output). The atoms of the
universe are the combinations of those expressions' values that occur; each atom is known
by the tuple of its values (:class:`AtomKeys`). A new table splits the atoms by one
aggregation in the engine, ``GROUP BY`` every recorded expression and the new table's
group and keys, ``count(*)``: O(atoms) rows come back (:func:`split`).

Populations over these atoms are the same :class:`.populations.Population` as over row
universes: differencing and the joint audit read atoms and groups only, so they are
unchanged. What an engine universe cannot do: count distinct units (so it is used only for
tables of row counts without a unit), match rows of another engine or of pandas (tables of
the same people in pandas are another universe; above 1M rows only, where they were compared
within one engine before), and survive a kernel restart (its outputs are then named as not
compared, see ``Linker.unlinked``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.in_engine import InEngineRows
from .identity import MISSING, combine


@dataclass(frozen=True)
class AtomKeys:
    """The atoms of an engine universe: per atom, the value of each recorded expression
    (uint64; ``MISSING`` where it is NULL), and the expressions in the order recorded."""

    values: np.ndarray  # (atoms, expressions) uint64
    expressions: tuple[str, ...]

    def index(self) -> pd.Index:
        """Each atom's key: the combination of its values (an empty universe: one atom)."""
        if not self.expressions:
            return pd.Index(np.zeros(len(self.values), dtype=np.uint64))
        return pd.Index(combine([self.values[:, j] for j in range(self.values.shape[1])]))


class EngineUniverse:
    """The rows of one engine base, never fetched: atoms as combinations of expressions' values."""

    in_engine = True

    def __init__(self, rows: InEngineRows) -> None:
        self.identity = (rows.engine, rows.identity)
        self.n = 0  # rows, known after the first count
        self.labels = None  # (rows have no labels of ours: row universes' label matching skips it)
        self.labels_hashed = False
        #: the base's column names, for the notes that name the columns outputs share (no hashes)
        self.hashes: dict[Any, np.ndarray] = {c: np.zeros(0, dtype=np.uint64) for c in sorted(rows.columns)}
        self.key_columns: set[Any] = set(rows.keys)
        self.row_atom = AtomKeys(np.zeros((1, 0), dtype=np.uint64), ())
        self.atom_size = np.zeros(1, dtype=np.int64)
        self.populations: list[Any] = []
        self.version = 0
        self.frames: dict[int, Any] = {}
        self.uid = secrets.token_hex(6)
        self.hashes_saved = True
        self.stale = False  # the base's rows changed under recorded outputs (see split)

    @property
    def n_atoms(self) -> int:
        return len(self.atom_size)

    def nbytes(self) -> int:
        return self.row_atom.values.nbytes + self.atom_size.nbytes + sum(p.nbytes() for p in self.populations)

    def locate(self, frame: Any, keys: list[str]) -> None:
        """Frames of rows are never found here (their universe is a row universe)."""
        return None

    def locate_rows(self, other: Any) -> None:
        return None


@dataclass
class Split:
    """A new table's cut of an engine universe's atoms (one engine aggregation)."""

    labels: pd.DataFrame  # per new atom, the table's keys (NaN/None outside the table)
    inside: np.ndarray  # per new atom: in the table
    atoms: AtomKeys  # the new atoms
    parent: np.ndarray  # per new atom, its atom before this table
    atom_size: np.ndarray  # rows per new atom


def place(universes: list[Any], rows: InEngineRows) -> EngineUniverse:
    """The engine universe of ``rows`` among ``universes`` (a new one appended if none)."""
    identity = (rows.engine, rows.identity)
    for u in universes:
        if getattr(u, "in_engine", False) and u.identity == identity and not u.stale:
            u.key_columns.update(rows.keys)
            return u
    u = EngineUniverse(rows)
    universes.append(u)
    return u


def split(u: EngineUniverse, rows: InEngineRows) -> Split | None:
    """Count the base rows of every (atom, group of the new table) in the engine.

    None when the counts do not add up to the universe's atoms (the base's rows changed since
    the recorded outputs were counted): the universe is marked stale (a new one is started for
    later tables, and the caller names the earlier outputs as not compared).
    """
    recorded = list(u.row_atom.expressions)
    k = len(recorded)
    frame = rows.count([*recorded, rows.group, *rows.labels])
    n = pd.to_numeric(frame["n"]).to_numpy(dtype=np.int64)
    old = np.column_stack([_uint64(frame[f"g{j}"]) for j in range(k)]) if k else np.zeros((len(frame), 0), np.uint64)
    new_group = _uint64(frame[f"g{k}"])
    if k:
        parent = np.asarray(u.row_atom.index().get_indexer(combine([old[:, j] for j in range(k)])), dtype=np.int64)
        sizes = np.bincount(np.maximum(parent, 0), weights=n, minlength=u.n_atoms).astype(np.int64)
        if (parent < 0).any() or not np.array_equal(sizes, u.atom_size):
            u.stale = True
            return None
    else:
        parent = np.zeros(len(frame), dtype=np.int64)
        if not u.populations:
            u.n = int(n.sum())
            u.atom_size = np.array([u.n], dtype=np.int64)
    # the keys are counted as the engine computes them for the table (the same types as the
    # table's own labels), on every row: rows outside the table are merged back per atom
    inside = frame[f"g{k}"].notna().to_numpy()
    rows_in, rows_out = np.flatnonzero(inside), np.flatnonzero(~inside)
    atoms_out, first, which = np.unique(parent[rows_out], return_index=True, return_inverse=True)
    take = np.concatenate([rows_in, rows_out[first]])
    size = np.concatenate([n[rows_in], np.bincount(which, weights=n[rows_out], minlength=len(atoms_out))
                           .astype(np.int64)])
    labels = frame[[f"g{k + 1 + j}" for j in range(len(rows.keys))]].iloc[take].reset_index(drop=True)
    labels.columns = pd.Index(rows.keys)
    values = np.column_stack([old[take], new_group[take]]) if len(take) else np.zeros((0, k + 1), np.uint64)
    return Split(labels, inside[take], AtomKeys(values, (*recorded, rows.group)), parent[take], size)


def _uint64(col: pd.Series) -> np.ndarray:
    """An engine's 64-bit values as uint64, NULL as ``MISSING``."""
    known = col.notna().to_numpy()
    out = np.full(len(col), MISSING, dtype=np.uint64)
    if known.any():
        out[known] = pd.to_numeric(col[known]).to_numpy().astype(np.uint64)
    return out
