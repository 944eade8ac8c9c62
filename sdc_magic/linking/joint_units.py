"""The joint audit in units: tables of distinct units audited together in the units they count.

Why: distinct counts do not add up like rows. Distinct women with an episode of income above 30
(20), of at most 30 (19), and every woman (37): no cell is small and no two tables differ by a
few women, yet 20 + 19 − 37 = 2 women have episodes on both sides, all three at ``pass`` (red
team of stop 58, F3b). The rows audit (:mod:`.joint`) and differencing see rows, or two tables
at a time.

Method. A unit's *signature* is the set of published cells (of this table and of the related
earlier tables counting the same column, margins included) its rows fall in; the units of one
signature form a *class*, a variable x ≥ 0 (its units). A published distinct count is the sum of
the classes that meet its cell: linear in x, with the true units a solution. The classes of
1 … threshold − 1 units are the targets, bounded by the attacker LP of the rows audit
(:class:`.joint_bounds.JointBounds`); a class pinned, bounded closer than the protection, or
bounded below the threshold fails, as a small group of rows does there. Only what this table
adds counts (a class the earlier tables pin without it is noted, not charged to it); the table
then hides its published cells that failing classes meet, smallest first, and drops again those
the others make unnecessary; a class still failing blocks it.

Signatures are grouped by a 128-bit hash of their cells (two 64-bit sums of mixed cell numbers,
and their count): two different sets of cells would have to collide in both. Units are first
grouped by the common cells their rows fall in (fewer, cheaper), then by published cells.

Bounds (work, never time): at most :data:`MAX_CLASSES` classes and :data:`MAX_TARGETS` targets
(beyond, the tables are not audited in units: docs/known-gaps.md), and the rows audit's work
budget in simplex iterations (beyond, :class:`~sdc_magic.protect.lp.WorkLimit`: ``review``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from . import share_totals
from .atoms import SetsOfAtoms
from .differencing import units_of
from .names import join_names
from .populations import Draft, Population

#: Classes of units (distinct signatures over the published cells) audited at most.
MAX_CLASSES = 20_000
#: Small classes (1 … threshold − 1 units) audited at most.
MAX_TARGETS = 2_000
#: Rounds of hiding more cells of the new table (one per failing class and round).
MAX_ROUNDS = 12

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mixed(values: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of each value (+ seed): well-spread 64-bit numbers whose sums hash a set."""
    with np.errstate(over="ignore"):
        z = (values.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def group_by_members(owner: np.ndarray, member: np.ndarray, n_owners: int) -> np.ndarray:
    """Per owner, a number shared by the owners with the same set of members (``owner``,
    ``member``: distinct pairs), from a 128-bit hash of the set (two sums of mixed members, one
    with their count mixed in). Owners without a member get -1."""
    sums = np.zeros((n_owners, 2), dtype=np.uint64)
    for i, seed in enumerate((1, 2)):
        np.add.at(sums[:, i], owner, _mixed(member, seed))  # (uint64: sums wrap modulo 2**64)
    count = np.bincount(owner, minlength=n_owners)
    with np.errstate(over="ignore"):
        sums[:, 1] += _mixed(count, 3)
    keys = np.ascontiguousarray(sums).view(np.dtype((np.void, 16))).ravel()
    codes = np.unique(keys, return_inverse=True)[1].astype(np.int64).ravel()
    return _renumbered(codes, count > 0)


def _renumbered(codes: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``codes`` of the kept owners renumbered 0, 1, … in order of appearance; -1 elsewhere."""
    out = np.full(len(codes), -1, dtype=np.int64)
    if keep.any():
        out[keep] = pd.factorize(codes[keep])[0]
    return out


def _marked(ids: set[int] | None, n: int) -> np.ndarray:
    """The positions of ``ids`` below ``n`` (a level's hidden or withheld margins)."""
    return np.asarray(sorted(i for i in (ids or ()) if 0 <= i < n), dtype=np.int64)


class UnitsAudit:
    """One audit in units of a new table of distinct units and related earlier ones (see the
    module docstring)."""

    def __init__(self, d: Draft, olds: list[Population], sets: SetsOfAtoms, m: float, end: float,
                 hidden: set[int] | None = None) -> None:
        self.d, self.olds, self.sets, self.m, self.end = d, olds, sets, m, end
        self.hidden = set(hidden or ())  # groups of the new table hidden already (the rows audit's)
        self.tables = [d.pop, *olds]
        self.groups_at = [d.pop.group, *(p.group[d.parent] for p in olds)]
        self.threshold = int(d.pop.threshold)

    # -------------------------------------------------------- classes
    def _common_cells(self) -> tuple[np.ndarray, int]:
        """Per atom, its common cell (the same group in every table; -1 in none)."""
        n_atoms = len(self.groups_at[0])
        code = np.zeros(n_atoms, dtype=np.int64)
        involved = np.zeros(n_atoms, dtype=bool)
        for g, t in zip(self.groups_at, self.tables, strict=True):
            code = pd.factorize(code * (len(t.labels) + 1) + (g.astype(np.int64) + 1))[0].astype(np.int64)
            involved |= g >= 0
        cell, uniques = pd.factorize(np.where(involved, code, -1))
        return np.where(involved, cell, -1).astype(np.int64), len(uniques)

    def published_cells(self, extra: set[int], tables: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
        """The published cells of ``tables`` (the new one with ``extra`` groups hidden, margins
        shown included) over the common cells: (common cell, published cell) pairs, and how many
        published cells."""
        cc_of, pc_of, n_published = [], [], 0
        for t in tables:
            pop = self.tables[t]
            published = None
            if t == 0 and (extra or self.hidden):
                published = pop.published.copy()
                published[list(extra | self.hidden)] = False
            g = self.cell_group[t]
            for subset in pop.levels():
                mapping, _, pub, _ = pop.level_facts(subset, published)
                if subset != pop.keys:
                    # a margin of distinct units is published only when shown: it is no sum of
                    # the cells (cells then a total: A 30 + B 33 − 60 = 3 people in both)
                    pub = np.full(len(pub), bool(pop.margins_public))
                    pub[_marked(pop.hidden_model.get(subset), len(pub))] = False
                    pub[_marked(pop.margins_hidden.get(subset), len(pub))] = False
                    if pop.totals_of:  # (told by shares whatever is hidden: :mod:`.share_totals`)
                        pub |= share_totals.told(pop, subset, pop.published if published is None else published)
                level = np.where(g >= 0, mapping[np.maximum(g, 0)], -1)
                ok = (level >= 0) & pub[np.maximum(level, 0)]
                idx = np.flatnonzero(ok)
                if not len(idx):
                    continue
                cells, inverse = np.unique(level[idx], return_inverse=True)
                cc_of.append(idx)
                pc_of.append(n_published + inverse)
                n_published += len(cells)
        if not cc_of:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
        return np.concatenate(cc_of), np.concatenate(pc_of).astype(np.int64), n_published

    def prepare(self) -> bool:
        """Group the units into classes over the common cells; False when there are too many."""
        atom_cell, n_cells = self._common_cells()
        self.n_common = n_cells
        # per table, its group of each common cell
        self.cell_group = []
        for g in self.groups_at:
            per = np.full(n_cells, -1, dtype=np.int64)
            inside = atom_cell >= 0
            per[atom_cell[inside]] = g[inside]
            self.cell_group.append(per)
        entry_cell = atom_cell[self.sets.entry_atom]
        keep = entry_cell >= 0
        pairs = pd.unique(self.sets.entry_set[keep] * max(n_cells, 1) + entry_cell[keep])
        owner, cell = pairs // max(n_cells, 1), pairs % max(n_cells, 1)
        fine = group_by_members(owner, cell, len(self.sets.units))
        n_fine = int(fine.max(initial=-1)) + 1
        if n_fine > 4 * MAX_CLASSES:
            return False
        self.fine_units = np.bincount(fine[fine >= 0], weights=self.sets.units[fine >= 0], minlength=n_fine)
        fine_pairs = pd.unique(fine[owner] * max(n_cells, 1) + cell)
        self.fine_of, self.fine_cell = fine_pairs // max(n_cells, 1), fine_pairs % max(n_cells, 1)
        self.n_fine = n_fine
        return True

    def equations(self, extra: set[int], tables: list[int]) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """(A, b, per fine class its class): the published cells of ``tables`` (the new table
        with ``extra`` groups hidden) as equations over the classes (the fine classes grouped by
        the published cells they meet; -1: none)."""
        cc, pc, n_published = self.published_cells(extra, tables)
        # per fine class, the published cells it meets (through its common cells)
        order = np.argsort(cc, kind="stable")
        starts = np.searchsorted(cc[order], np.arange(self.n_common + 1))
        lens = starts[self.fine_cell + 1] - starts[self.fine_cell]
        at = np.repeat(starts[self.fine_cell] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        n_pub = max(n_published, 1)
        met = pd.unique(np.repeat(self.fine_of, lens) * n_pub + pc[order[at]])
        owner, cell = met // n_pub, met % n_pub
        klass = group_by_members(owner, cell, self.n_fine)
        n_classes = int(klass.max(initial=-1)) + 1
        units = np.bincount(klass[klass >= 0], weights=self.fine_units[klass >= 0], minlength=n_classes)
        pairs = pd.unique(klass[owner] * n_pub + cell)
        A = sp.csr_matrix((np.ones(len(pairs)), (pairs % n_pub, pairs // n_pub)), shape=(n_published, n_classes))
        return A, np.asarray(A @ units).ravel(), klass

    # -------------------------------------------------------- the audit
    def failing(self, A: sp.csr_matrix, b: np.ndarray, targets: np.ndarray, units: np.ndarray) -> np.ndarray:
        """The target classes an attacker pins, bounds closer than the protection, or bounds below
        the threshold (the rule of :meth:`.joint.JointAudit.failing`)."""
        from .joint_bounds import JointBounds, unprotected

        if not len(targets):
            return targets
        reach = float(self.threshold)
        found = JointBounds(A, b, self.end).bounds([np.array([c]) for c in targets.tolist()], units[targets],
                                                   self.m, reach)
        bad = [c for c, (lo, hi) in zip(targets.tolist(), found, strict=True)
               if unprotected(lo, hi, float(units[c]), self.m, reach)]
        return np.asarray(bad, dtype=np.int64)

    def run(self) -> tuple[list[int], list[str], list[str]] | None:
        """(groups of the new table to hide in addition, problems, notes); None when the units
        are too many classes to audit."""
        if not self.prepare():
            return None
        everything = list(range(len(self.tables)))
        A, b, klass = self.equations(set(), everything)
        units = self._class_units(klass)
        small = np.flatnonzero((units > 0) & (units < self.threshold))
        if A.shape[1] > MAX_CLASSES or len(small) > MAX_TARGETS:
            return None
        bad = self.failing(A, b, small, units)
        if not len(bad):
            return [], [], []
        notes: list[str] = []
        # what the earlier tables reveal without this one is theirs, not this table's doing
        known = self._known(bad, klass)
        if known:
            notes.append(f"earlier outputs together already reveal {len(known)} small group(s) of distinct "
                         f"{self.d.unit} with rows in the same cells; this table adds nothing to that")
        wanted = np.asarray([c for c in bad.tolist() if c not in known], dtype=np.int64)
        added, still = self._hide_more(wanted, klass)
        if still:
            near = self._groups_met(np.concatenate(still), set())[:3]
            where = f", e.g. of {join_names([self.d.pop.name(g) for g in near])}" if near else ""
            return added, [f"linked outputs leave a few distinct {self.d.unit} recoverable together "
                           f"(units with rows in the same cells{where})"], notes
        return added, [], notes

    def _class_units(self, klass: np.ndarray) -> np.ndarray:
        n = int(klass.max(initial=-1)) + 1
        return np.bincount(klass[klass >= 0], weights=self.fine_units[klass >= 0], minlength=n)

    def _known(self, bad: np.ndarray, klass: np.ndarray) -> set[int]:
        """Failing classes the earlier tables alone already pin (their fine classes regrouped
        by the earlier tables' cells only)."""
        A, b, klass_before = self.equations(set(), list(range(1, len(self.tables))))
        units = self._class_units(klass_before)
        known = set()
        for c in bad.tolist():
            fine = np.flatnonzero(klass == c)
            before = np.unique(klass_before[fine])
            # the same units form one class before too, and it fails there: public already
            if len(before) == 1 and before[0] >= 0 and abs(units[before[0]] - self._class_units(klass)[c]) < 1e-9 \
                    and len(self.failing(A, b, before, units)):
                known.add(c)
        return known

    def _groups_met(self, fines: np.ndarray, extra: set[int]) -> list[int]:
        """The new table's published inner groups (``extra`` hidden) that can break the equations
        pinning the fine classes ``fines``: those their units' rows fall in, smallest first (its
        rows), then those sharing an earlier table's cell with them (three people of d299 that a
        filter leaves out are in none of the new table's cells: the new d299 cell beside the old
        one pins them; red team of stop 59), smallest first."""
        cells = self.fine_cell[np.isin(self.fine_of, fines)]
        pop = self.d.pop

        def usable(groups: np.ndarray) -> list[int]:
            found = [int(g) for g in np.unique(groups).tolist()
                     if g >= 0 and pop.published[g] and g not in extra and g not in self.hidden]
            return sorted(found, key=lambda g: (int(pop.size[g]), g))

        direct = usable(self.cell_group[0][cells])
        near = np.zeros(self.n_common, dtype=bool)
        for t in range(1, len(self.tables)):
            old = self.cell_group[t][cells]
            near |= np.isin(self.cell_group[t], old[old >= 0])
        return direct + [g for g in usable(self.cell_group[0][near]) if g not in direct]

    def _hide_more(self, bad: np.ndarray, klass: np.ndarray) -> tuple[list[int], list[np.ndarray]]:
        """Hide published cells of the new table (one per failing class and round) until no class
        fails; then drop those the others make unnecessary. A class is followed by its fine
        classes (hiding cells only merges classes). Returns (added, fine classes still failing)."""
        targets = [np.flatnonzero(klass == c) for c in bad.tolist()]
        extra: set[int] = set()
        added: list[int] = []
        failing = targets
        for _ in range(MAX_ROUNDS):
            if not failing:
                break
            progress = False
            for fines in failing:
                options = self._groups_met(fines, extra)
                if options:
                    extra.add(options[0])
                    added.append(options[0])
                    progress = True
            if not progress:
                break
            failing = self._still_failing(targets, extra)
        if failing:
            return added, failing
        for g in reversed(list(added)):
            trial = extra - {g}
            if not self._still_failing(targets, trial):
                extra = trial
                added.remove(g)
        return added, []

    def _still_failing(self, targets: list[np.ndarray], extra: set[int]) -> list[np.ndarray]:
        """Of ``targets`` (each the fine classes of a class that failed), those whose class
        still fails with ``extra`` groups of the new table hidden."""
        A, b, klass = self.equations(extra, list(range(len(self.tables))))
        units = self._class_units(klass)
        now = [int(klass[f[0]]) for f in targets]
        check = np.asarray(sorted({c for c in now if c >= 0 and 0 < units[c] < self.threshold}), dtype=np.int64)
        bad = set(self.failing(A, b, check, units).tolist())
        return [f for f, c in zip(targets, now, strict=True) if c in bad]


def units_audit(d: Draft, olds: list[Population], m: float, end: float, hidden: set[int] | None = None,
                max_tables: int = 8) -> tuple[list[int], list[str], list[str], list[str]]:
    """The audit in units of ``d`` with the related earlier ``olds`` (newest first; see the module
    docstring), the new table's ``hidden`` groups hidden already: (groups of the new table to hide
    in addition, problems, notes, what could not be proven). The ``max_tables`` newest of the
    tables counting the same column are taken (taken from all related outputs first, eight tables
    of rows between two filters of people and everyone pushed the filters out; red team of stop
    59). Nothing when ``d`` counts no distinct units of a column those tables count; units too
    many classes to audit are said (the table is then ``review``: never cleared unaudited)."""
    if d.unit is None or d.unit_declared:
        return [], [], [], []
    olds = [t for t in olds if d.units_against([t])]
    newest = list(dict.fromkeys(t.out_id for t in olds))[:max_tables]  # (outputs, not populations: joint.py)
    olds = [t for t in olds if t.out_id in set(newest)]
    if not olds and (d.display_margin is None or not len(d.display_margin)):
        return [], [], [], []  # (alone, a table's cells are only its margins' parts when it shows them)
    if d.engine_units is not None and not d.engine_units.known:
        return [], [], [], []  # (the engine could not count them: Linker.units_note makes the table review)
    found = UnitsAudit(d, olds, units_of(d), m, end, hidden).run()
    if found is None:
        return [], [], [], [f"the distinct {d.unit} of this table and {len(olds)} earlier output(s) counting them were "
                            f"not audited together: their units fall into more than {MAX_CLASSES:,} different sets "
                            f"of cells, or more than {MAX_TARGETS:,} small ones (an output checker decides; "
                            "fewer or coarser tables of distinct units can be audited)"]
    return (*found, [])
