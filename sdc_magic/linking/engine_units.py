"""Distinct units of rows left in their engine: counted per set of atoms without a row back.

A table of distinct counts (``count(DISTINCT person)``) is linked in the distinct values of the
column it counts against outputs counting the same column (``populations.distinct_counted``):
episodes of two women in a group that three outputs separate together are a group of 2, not of
8 rows. Over a row universe the unit column's row hashes answer "how many units hold a row in
these atoms". An engine universe has no rows; its engine answers instead, in one aggregation
(``InEngineRows.count_units``): per unit, the set of combinations of the session's key and
condition expressions its rows fall in (its *signature*), and per signature the number of units
and the most rows one of them has. One row per (signature, combination) comes back, numbers
only: no unit's value, no row. Every combination is an atom of the table's cut
(``Split.frame_atom``), so the units in any set of atoms are the units of the signatures that
meet it: exact, whatever units span.

Asked only when needed (a distinct-count table beside an earlier one counting the same column),
at most once per display.

Under a declared unit only the small atoms matter, so only they are asked about: a set of atoms
of ``r`` rows holds at least ``r / most`` units (``most``: the most rows one unit has), so
differencing and the joint audit, which look for sets of fewer than ``threshold`` units, need
exact units only of sets of fewer than ``threshold × most`` rows, made of atoms of fewer rows.
The engine finds ``most`` and cuts the units' sets down to those atoms in the same query
(``InEngineRows.count_units`` with :class:`~sdc_magic.evidence.in_engine.SmallAtoms`): units with
no row there are left out, and only the rows there are joined to their combination. The answer
is O(rows in small atoms), not O(units): 1M rows of 333,000 firms of 3 rows in 1,000 cells gave
939,000 (set, combination) rows back, and give none when no atom is small. A set of atoms with
an atom outside them is answered by its rows' bound, which is ``threshold`` or more: never
"few", as the exact count would not be. When the engine cannot answer, or returns more than
:data:`MAX_SIGNATURES` signatures (a work budget, not a time), or its combinations do not hold the
rows linking's count gave them (the base changed in between), the units are unknown and the table
is ``review`` beside such outputs (``Linker.units_note``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.in_engine import SmallAtoms
from .atoms import SetsOfAtoms

#: Signatures (distinct sets of atoms of one unit) read back at most (a fixed work budget).
MAX_SIGNATURES = 1_000_000


def _too_many() -> str:
    return f"more than {MAX_SIGNATURES:,} distinct sets of groups hold its units"


@dataclass
class UnitsMemory:
    """What counts of units found over one base, kept by its universe for later tables."""

    #: per unit (its key, see ``EngineUnits._memory_key``), the expressions of a count that found
    #: more than MAX_SIGNATURES sets: not asked again over those expressions or more (a finer cut
    #: only splits sets; 10M rows of 3.3M firms: 9.7 s per display for the same answer)
    too_many: dict[str, frozenset[str]] = field(default_factory=dict)
    #: per unit expression: (the base's rows and the sum mod 2**64 of its known values' hashes),
    #: then the most rows of one unit with a value and the units. The same rows and sum are the
    #: same multiset of values, hence the same rows per unit: the engine is not asked again (its
    #: count per unit was 0.9 s of a display at 10M rows of 3.3M firms)
    most: dict[str, tuple[tuple[int, int], int, int]] = field(default_factory=dict)


#: The engine's last answer in this display (base identity, expressions, unit) -> its rows:
#: forgotten when a display starts or ends (:func:`new_display`), as the base may change between
_asked: dict[tuple, pd.DataFrame] = {}


def new_display() -> None:
    """A display starts or ends: the engine's answers are asked again (the base may change)."""
    _asked.clear()


class EngineUnits:
    """The distinct units of a draft's atoms, counted in the engine on first use."""

    def __init__(self, count_units: Callable[[list[str], str, int], pd.DataFrame], expressions: list[str],
                 unit: str, frame_atom: np.ndarray, frame_rows: np.ndarray, n_atoms: int,
                 base: str | None = None, declared: bool = False, memory: UnitsMemory | None = None,
                 threshold: int | None = None, base_print: tuple[int, int] | None = None) -> None:
        self._count_units, self._expressions, self._unit = count_units, list(expressions), unit
        #: under a declared unit, the threshold of the questions asked (see the module docstring):
        #: the units of only the atoms of fewer than ``threshold × most`` rows are asked
        self._threshold = threshold if declared and threshold is not None and threshold > 0 else None
        #: the unit was declared: the rows without its value are one unit together, as the table's
        #: facts and linking by rows count them (a distinct count leaves them out)
        self.declared = declared
        #: the universe's memory of what counts of units found (see _load and _ask_engine)
        self._memory = memory
        #: the base's rows and the sum of its unit values' hashes (``UnitsMemory.most``), or None
        self._base_print = base_print
        self._base = base  # (the base rows' identity: one answer per display, see _asked)
        self._frame_atom = np.asarray(frame_atom, dtype=np.int64)  # per combination, its atom
        self._frame_rows = np.asarray(frame_rows, dtype=np.int64)  # per combination, its rows
        self._n_atoms = n_atoms
        self._read = False
        self.problem: str | None = None
        self._start = np.zeros(1, dtype=np.int64)  # signature s's atoms: _atom[_start[s]:_start[s+1]]
        self._atom = np.zeros(0, dtype=np.int64)
        self._units = np.zeros(0, dtype=np.int64)
        self._most = 1
        self._owner = np.zeros(0, dtype=np.int64)  # (per entry, its set)
        self._sets: SetsOfAtoms | None = None
        #: per atom its rows (the combinations' rows): the lower bound of a set's units (see count)
        self._atom_rows = np.bincount(self._frame_atom, weights=self._frame_rows,
                                      minlength=n_atoms).astype(np.int64)[:n_atoms] if len(self._frame_atom) \
            else np.zeros(n_atoms, dtype=np.int64)

    @property
    def _memory_key(self) -> str:
        """The too-many memory's key: the unit, and the threshold its atoms were cut at (a count
        cut at one threshold says nothing of one cut at another)."""
        return self._unit if self._threshold is None else f"{self._unit}\x00threshold {self._threshold}"

    @property
    def known(self) -> bool:
        """Whether the engine told the units (asks it the first time)."""
        self._load()
        return self.problem is None

    @property
    def most_rows(self) -> int:
        """The most rows one unit has in the base (a difference of d rows holds ≥ d / this units)."""
        self._load()
        return self._most

    def count(self, atoms: np.ndarray) -> int:
        """Distinct units with a row in ``atoms``."""
        self._load()
        member = np.zeros(self._n_atoms, dtype=bool)
        member[np.asarray(atoms, dtype=np.int64)] = True
        found = int(self._units[self._meets(member)].sum())
        return max(found, self._at_least(int(self._atom_rows[member].sum())))

    def _at_least(self, rows: np.ndarray | int) -> np.ndarray | int:
        """The fewest units ``rows`` rows can hold (``rows / most``, up): exact counts were asked
        only of atoms of fewer rows than ``threshold × most`` (module docstring), and a set with
        another atom has at least that many rows, hence this bound is ``threshold`` or more."""
        if not self.declared:  # (a distinct count leaves rows without a unit out: no bound)
            return rows * 0
        return -(-rows // self._most)

    def sets(self) -> SetsOfAtoms:
        """The signatures as sets of atoms with their units (``atoms.SetsOfAtoms``: the units on
        one side only of differencing's candidate cells)."""
        self._load()
        if self._sets is None:
            self._sets = SetsOfAtoms(self._owner, self._atom, self._units, self._n_atoms)
        return self._sets

    def per_group(self, group_of_atom: np.ndarray, n_groups: int) -> np.ndarray:
        """Per group (``group_of_atom``: each atom's group, -1 none), its distinct units."""
        self._load()
        if not n_groups:
            return np.zeros(n_groups, dtype=np.int64)
        of_atom = np.asarray(group_of_atom, dtype=np.int64)[: self._n_atoms]
        inside = of_atom >= 0
        rows = np.bincount(of_atom[inside], weights=self._atom_rows[: len(of_atom)][inside],
                           minlength=n_groups).astype(np.int64)
        group = of_atom[self._atom]
        keep = group >= 0
        pairs = pd.unique(self._owner[keep] * n_groups + group[keep])  # (each set counted once per group; a hash, no sort)
        found = np.bincount(pairs % n_groups, weights=self._units[pairs // n_groups],
                            minlength=n_groups).astype(np.int64)
        return np.maximum(found, self._at_least(rows))

    def _meets(self, member: np.ndarray) -> np.ndarray:
        """Per signature: whether one of its atoms is marked in ``member``."""
        if not len(self._atom):
            return np.zeros(len(self._units), dtype=bool)
        hits = np.concatenate([[0], np.cumsum(member[self._atom])])
        return hits[self._start[1:]] > hits[self._start[:-1]]

    def _ask_engine(self) -> pd.DataFrame:
        """The engine's signatures (one aggregation; see ``InEngineRows.count_units``), under a
        declared unit cut down to the small atoms (module docstring), asked once per display for
        the same base, expressions, unit and cut (a polars table and its variant asked the same
        0.4 s aggregation twice)."""
        small = None
        if self._threshold is not None:
            known = self._memory.most.get(self._unit) if self._memory is not None else None
            most, units = (known[1], known[2]) if known is not None and known[0] == self._base_print else (None, None)
            small = SmallAtoms(self._atom_rows[self._frame_atom], self._threshold, most, units)
        cut = None if small is None else (small.threshold, small.most, hashlib.blake2b(small.rows.tobytes(),
                                                                                       digest_size=16).hexdigest())
        key = None if self._base is None else (self._base, tuple(self._expressions), self._unit, cut)
        if key is not None and key in _asked:
            return _asked[key]
        found = self._count_units(self._expressions, self._unit, MAX_SIGNATURES,
                                  *([small] if small is not None else []))
        if key is not None:
            _asked.clear()  # (one display asks about one base's units: the last answer is enough)
            _asked[key] = found
        return found

    def _load(self) -> None:
        if self._read:
            return
        self._read = True
        # a count over expressions that include those of one that found too many sets finds at
        # least as many (a finer cut only splits a unit's set from another's): not asked again
        # (10M rows of 3.3M firms: 9.7 s per display for the same answer; the table is review
        # either way, never a verdict of its own)
        found_before = None if self._memory is None else self._memory.too_many.get(self._memory_key)
        if found_before is not None and found_before <= set(self._expressions):
            self.problem = _too_many()
            return
        try:
            found = self._ask_engine()
        except Exception as exc:  # (the engine could not answer: the units are unknown)
            self.problem = f"the engine could not count distinct units ({type(exc).__name__})"
            return
        self.problem = self._take(found)

    def _take(self, found: pd.DataFrame) -> str | None:
        """Read the engine's answer (``InEngineRows.count_units``); why not, if not."""
        changed = "the base's rows changed while linking counted them"
        kind = found["kind"].to_numpy(dtype=np.int64)
        # (kind 3, from an engine that cut the sets down to small atoms: the units with a value and
        # the most rows one has, over all of them; the sets' own ``most`` covers only theirs.
        # Remembered with the base's fingerprint: UnitsMemory.most)
        most_all = int(found["most"].to_numpy(dtype=np.int64)[kind == 3].max(initial=0))
        if (kind == 3).any() and self._memory is not None and self._base_print is not None:
            self._memory.most[self._unit] = (self._base_print, most_all,
                                             int(found["n"].to_numpy(dtype=np.int64)[kind == 3][0]))
        found = found[kind != 3]
        kind = kind[kind != 3]
        s, r = found["s"].to_numpy(dtype=np.int64), found["r"].to_numpy(dtype=np.int64)
        n, most = found["n"].to_numpy(dtype=np.int64), found["most"].to_numpy(dtype=np.int64)
        if len(r) and (r.min() < 0 or r.max() >= len(self._frame_rows)):
            return changed
        rows = kind == 2
        counted = np.zeros(len(self._frame_rows), dtype=np.int64)
        counted[r[rows]] = n[rows]
        if int(rows.sum()) != len(self._frame_rows) or not np.array_equal(counted, self._frame_rows):
            return changed
        if self.declared and (kind == 1).any():
            # under a declared unit the rows without its value are one unit together, whose set is
            # every position holding one of them (the facts' count, the rows' hashes too)
            alone = kind == 1
            s = np.where(alone, s.max(initial=-1) + 1, s)
            most = np.where(alone, int(n[alone].sum()), most)
            n = np.where(alone, 1, n)
            kind = np.where(alone, 0, kind)
        sets = kind == 0
        ids, first, inverse = np.unique(s[sets], return_index=True, return_inverse=True)
        if len(ids) > MAX_SIGNATURES:
            if self._memory is not None:
                before = self._memory.too_many.get(self._memory_key)
                if before is None or len(self._expressions) < len(before):
                    self._memory.too_many[self._memory_key] = frozenset(self._expressions)
            return _too_many()
        # rows without a unit (of a distinct count): one set per position, of no unit (counted as
        # units, 10 id-less episodes beside C's two women made a group of 12, and 37 − 35 gave the
        # two at pass; red team of stop 59)
        alone = kind == 1
        order = np.argsort(inverse, kind="stable")
        sizes = np.bincount(inverse, minlength=len(ids))
        self._start = np.concatenate([[0], np.cumsum(sizes), len(order) + np.arange(1, int(alone.sum()) + 1)])
        self._atom = self._frame_atom[np.concatenate([r[sets][order], r[alone]])]
        self._units = np.concatenate([n[sets][first], np.zeros(int(alone.sum()))]).astype(np.int64)
        self._owner = np.repeat(np.arange(len(self._units), dtype=np.int64), np.diff(self._start))
        self._most = int(max(most[sets].max(initial=1), most_all, 1))
        return None


def units_of_split(split: Any, unit: Any, declared: bool = False, threshold: int | None = None
                   ) -> EngineUnits | None:
    """The units of ``split``'s atoms in the values of ``unit`` (a column a table counts distinct
    values of, or the declared unit), when the engine can count them; else None. ``threshold``:
    the table's, under a declared unit (only the small atoms' units are then asked)."""
    rows = split.rows
    expression = rows.units.get(str(unit)) if unit is not None else None
    if expression is None or rows.count_units is None or split.frame_atom is None:
        return None
    return EngineUnits(rows.count_units, list(split.expressions), expression, split.frame_atom,
                       split.frame_rows, len(split.atom_size), f"{rows.engine}:{rows.identity}", declared,
                       split.units_memory, threshold, _base_print(split, unit))


def _base_print(split: Any, unit: Any) -> tuple[int, int] | None:
    """(the base's rows, the sum mod 2**64 of the hashes of its unit values): the split's checksums
    of the unit's values per atom (``Split.values``), summed, or None when it has none."""
    found = split.values.get(str(unit)) if split.values else None
    if found is None or split.frame_rows is None:
        return None
    checksums = np.asarray(found[1], dtype=np.uint64)
    return int(np.asarray(split.frame_rows, dtype=np.int64).sum()), int(checksums.sum(dtype=np.uint64))


def unknown_note(units: Any) -> str | None:
    """Why distinct units could not be compared inside the engine (None: they were, or not asked)."""
    problem = getattr(units, "problem", None)
    if problem is None:
        return None
    if getattr(units, "declared", False):
        return (f"units not compared with earlier outputs: {problem} (review; differences between the tables may "
                "single out a few units)")
    return (f"distinct units not compared with earlier outputs counting the same column: {problem} "
            "(review; differences between the tables may single out a few units)")

