"""The joint audit: a new table and related earlier tables audited together.

The new table's and related earlier tables' hidden primary cells are audited together by
an attacker LP over the common refinement of their cells (:class:`CommonCells`; the LPs
are in :mod:`.joint_bounds`). Only what the *new* table makes recoverable counts (a cell
already recoverable from earlier outputs alone is public knowledge: hiding it again
protects nothing); the new table then hides, smallest first, only published cells that
share rows with a failing cell and are not themselves public elsewhere; failing that, it
is blocked.

Besides hidden cells, small groups of rows that the outputs *together* separate are
targets too: everyone (37), A or C (22), B or C (17) hide no small cell, yet
22 + 17 - 37 = 2 is the count of C.

(The module is not called ``joint_audit``: the package re-exports the function
:func:`joint_audit`, which would hide a module of that name.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..protect.lp import ITERATIONS_PER_SECOND, WorkLimit, work_done
from .identity import MISSING
from .joint_units import units_audit
from .linker import Linker
from .names import join_names
from .populations import Draft, Population, shown_groups

#: Common cells up to which the joint audit runs (above: not audited, and the table is
#: ``review``).  With ``joint_bounds`` a 35x28x10 table shown again with margins (8,900
#: common cells) is audited in ~6.5 CPU s; it was 5,000 with two scipy LPs per cell.
MAX_JOINT_CELLS = 12_000
#: The joint audit's work budget in simplex iterations (issue 21: work, never time, so the
#: same notebook gets the same verdicts on any machine under any load): about 10 nominal
#: seconds at :data:`sdc_magic.protect.lp.ITERATIONS_PER_SECOND`.
JOINT_AUDIT_ITERATIONS = 10 * ITERATIONS_PER_SECOND
#: The small groups of rows several outputs separate together (no table's cell) are audited
#: when there are at most this many, within this many simplex iterations of the first audit;
#: beyond either, they are not audited and the table is ``review`` (never cleared unaudited).
MAX_COMMON_TARGETS = 2000
COMMON_ITERATIONS = 2 * ITERATIONS_PER_SECOND
#: Earlier related outputs in the joint audit (the newest first); fewer when their common
#: cells pass MAX_JOINT_CELLS.  Was 4: three ordinary tables between a total and two
#: overlapping filters pushed the total out (red team, round 4).
MAX_JOINT_TABLES = 8
MAX_JOINT_POINTS = 32  # feasible tables carried from one system of the joint audit to the next

#: A target of the audit: (table, its group) for a table's hidden cell; (-1, common cell) for
#: a small common cell; (-2, index in ``JointAudit.coarse``) for a small union of common cells.
Target = tuple[int, int]


def joint_audit(d: Draft, linker: Linker, protection: float, max_tables: int = MAX_JOINT_TABLES,
                budget: float = JOINT_AUDIT_ITERATIONS, siblings: list[Draft] | None = None,
                hidden_flat: np.ndarray | None = None) -> tuple[list[int], list[str], list[str], list[str]]:
    """Audit the new table's and related earlier tables' hidden primaries together.

    ``siblings``: populations the same output published and that are recorded already (its
    rows, when ``d`` is the rows an indicator's mean publishes), with ``hidden_flat`` its
    pattern. They are this output, not earlier ones: a cell hidden for ``d`` hides their cells
    of the same displayed row too, and what they reveal is charged to it.

    Returns (published groups of the new table to hide in addition, problems that remain,
    notes, what could not be proven). Only failures the new table causes count: a cell an
    attacker already recovers from earlier outputs alone is public knowledge (noted, not
    charged to this table). What could not be proven within the work ``budget`` (simplex
    iterations) or the size limits is said in the last list: the table is then ``review``,
    never cleared with a note that something was not audited, never blocked for the
    machine's speed.
    """
    unproven: list[str] = []
    if not len(d.pop.size):
        return [], [], [], []  # (an output of no rows publishes nothing of any row: a flag's sums never at its level)
    end = work_done() + budget
    try:
        added, problems, notes = _audit(d, linker, protection, max_tables, end, unproven,
                                        Siblings(siblings or [], hidden_flat))
        if not problems:  # (distinct units, in the units they count: 20 + 19 − 37 women with both)
            olds = list(reversed(linker.related_besides_repeats(d)))
            more, problems, more_notes, not_proven = units_audit(d, olds, protection / 100.0, end, set(added),
                                                                 max_tables)
            added, notes = added + [g for g in more if g not in added], notes + more_notes
            unproven.extend(not_proven)
    except WorkLimit:
        return [], [], [], [f"the joint audit with earlier outputs used its whole work budget ({int(budget):,} "
                            "simplex iterations) before it could prove that they do not reveal a hidden cell "
                            "together: an output checker decides (aggregate up, or display fewer related tables)"]
    return added, problems, notes, unproven


def _audit(d: Draft, linker: Linker, protection: float, max_tables: int, end: float, unproven: list[str],
           siblings: Siblings) -> tuple[list[int], list[str], list[str]]:
    """The audit with the ``max_tables`` newest related outputs, every population of each (fewer
    outputs while their common cells are too many); ``end``: the work count
    (:func:`.lp.work_done`) it must not pass.

    Outputs, not populations: a table of several indicators publishes up to a dozen populations
    (its rows, each indicator's rows at its level and at its other value, each set of them whose
    rows never meet), and a window of eight populations let one such table push an earlier total
    out of the audit: 23 + 27 + 23 − 70 = C's 3 people at ``pass`` (red team of stop 63)."""
    related = list(reversed(linker.related_besides_repeats(d)))
    newest = list(dict.fromkeys(p.out_id for p in related))[:max_tables]
    olds = [p for p in related if p.out_id in set(newest)]
    if not olds:
        return [], [], []
    common = CommonCells.of(d, [d.pop, *olds])
    if common.n_cells > MAX_JOINT_CELLS:
        if len(newest) > 1:
            return _audit(d, linker, protection, len(newest) - 1, end, unproven, siblings)
        unproven.append(f"the joint audit with earlier outputs was not run: {common.n_cells:,} cells in common "
                        f"(at most {MAX_JOINT_CELLS:,})")
        return [], [], []
    audit = JointAudit(d, common, protection / 100.0, end, unproven, siblings)
    return audit.run(lambda: linker.findings(d, without=d.pop.out_id if siblings.drafts else None)["derivable"])


@dataclass
class Siblings:
    """The recorded populations of the output being audited (see :func:`joint_audit`)."""

    drafts: list[Draft]
    hidden_flat: np.ndarray | None

    def index_in(self, tables: list[Population]) -> dict[int, Draft]:
        """Per position in ``tables`` of a sibling, its draft."""
        return {t: d for t, pop in enumerate(tables) for d in self.drafts if pop is d.pop}

    def published_after(self, sibling: Draft, new: Draft, extra: set[int]) -> np.ndarray:
        """The sibling's published groups once the new population's groups ``extra`` are hidden
        (every displayed cell of theirs)."""
        hidden = np.isin(new.display_group, list(extra))
        if self.hidden_flat is not None and len(self.hidden_flat) == len(hidden):
            hidden |= np.asarray(self.hidden_flat, dtype=bool)
        published, _ = shown_groups(sibling.display_group, len(sibling.pop.labels), hidden)
        return sibling.pop.published & published


@dataclass
class CommonCells:
    """The common refinement of the involved tables' groups: the atoms no table tells apart
    form one common cell (the unknowns of the attacker's LP)."""

    tables: list[Population]  # the new table first
    groups_at: list[np.ndarray]  # per table, its group of each atom of the draft (-1: outside it)
    atoms: np.ndarray  # the atoms inside some table
    cell_of_atom: np.ndarray  # per such atom, its common cell
    n_cells: int

    @classmethod
    def of(cls, d: Draft, tables: list[Population]) -> CommonCells:
        """The common cells of ``tables`` (the draft's population first) over the draft's atoms."""
        groups_at = [d.pop.group, *(p.group[d.parent] for p in tables[1:])]
        involved = np.zeros(len(d.atom_size), dtype=bool)
        for g in groups_at:
            involved |= g >= 0
        atoms = np.flatnonzero(involved)
        code = np.zeros(len(atoms), dtype=np.int64)
        for g, t in zip(groups_at, tables, strict=True):
            code = code * (len(t.labels) + 1) + (g[atoms].astype(np.int64) + 1)
            code = pd.factorize(code)[0].astype(np.int64)
        cell_of_atom, _ = pd.factorize(code)
        n_cells = int(cell_of_atom.max()) + 1 if len(cell_of_atom) else 0
        return cls(tables, groups_at, atoms, cell_of_atom, n_cells)


class JointAudit:
    """One joint audit: its targets, the attacker's systems, and the cells the new table hides.

    :meth:`run` takes these steps: gather the targets (:meth:`targets`), audit them all
    (:meth:`first_audit`), set aside what earlier outputs reveal without this table
    (:meth:`exclude_known`), hide more published cells of the new table until none fails
    (:meth:`hide_more`), then drop the hidden cells the others make unnecessary
    (:meth:`drop_unneeded`).
    """

    def __init__(self, d: Draft, common: CommonCells, m: float, end: float, unproven: list[str],
                 siblings: Siblings | None = None) -> None:
        self.d = d
        self.siblings = siblings or Siblings([], None)
        self.sibling_at = self.siblings.index_in(common.tables)  # tables that are this output too
        # per sibling, (its group, the new table's group) shown in the same displayed cell
        self.sibling_pairs = {t: _shown_together(s.display_group, d.display_group) for t, s in self.sibling_at.items()}
        self.unproven = unproven  # what could not be proven (the table is review)
        self.new = d.pop
        self.tables = common.tables
        self.m = m  # the protection required, as a share of each target's size
        self.end = end  # the work count (simplex iterations) the audit must not pass
        self.n_cells = n_cells = common.n_cells
        self.everything = list(range(len(self.tables)))
        atoms, cell_of_atom = common.atoms, common.cell_of_atom
        self.cell_group = [np.full(n_cells, -1, dtype=np.int64) for _ in self.tables]
        for t, g in enumerate(common.groups_at):
            self.cell_group[t][cell_of_atom] = g[atoms]
        # Common cells that are no table's cell: rows that the outputs *together* separate.
        # Everyone (37), A or C (22), B or C (17): no cell is small, yet 22 + 17 - 37 = 2 is
        # the count of C.  A small common cell is a target too (t = -1, g = its index):
        # the outputs together must not pin it, as they must not pin a hidden cell.
        self.cell_size = np.bincount(cell_of_atom, weights=d.atom_size[atoms], minlength=n_cells)
        # ... and unions of them that an extra key splits (t = -2): the rows in the same outputs
        # with the same labels on this table's keys that earlier outputs share (C's women split
        # by flag in one output: each half can move, their sum 22 + 17 - 37 = 2 cannot); and
        # with the same outputs only (the small group itself, whatever the keys).
        self.coarse: list[np.ndarray] = []
        # with a unit column declared, a group is also small when it holds few units (8 episode
        # rows of 2 people): distinct unit hashes per group of common cells
        self.unit_rows: tuple[np.ndarray, np.ndarray] | None = None
        #: ... or, rows left in their engine, their units counted there: per atom, its common cell
        self.unit_atoms: tuple[Any, np.ndarray] | None = None
        if d.unit is not None and self._units_with(d) and d.engine_units is not None:
            cell_of = np.full(len(d.atom_size), -1, dtype=np.int64)
            cell_of[atoms] = cell_of_atom
            self.unit_atoms = (d.engine_units, cell_of)
        elif d.unit is not None and self._units_with(d) and d.unit in d.universe.hashes \
                and len(d.universe.hashes[d.unit]) == len(d.new_row_atom):
            cell_of = np.full(len(d.atom_size), -1, dtype=np.int64)
            cell_of[atoms] = cell_of_atom
            row_cell = cell_of[d.new_row_atom]
            inside_rows = row_cell >= 0
            self.unit_rows = (row_cell[inside_rows], d.universe.hashes[d.unit][inside_rows])
        self.points: list[np.ndarray] = []  # feasible tables found so far (re-checked for each system)
        self.common_end = np.inf  # the small common groups' own budget, during the first audit
        self.members_of: dict[Target, np.ndarray] = {}

    def _units_with(self, d: Draft) -> bool:
        """Whether the small groups are also judged in units: some related output counts the
        units this one counts (not every one: a count of rows, or distinct households, between
        three tables of distinct people turned units off, and 22 + 17 − 37 gave C's two women;
        red team of stop 58)."""
        return any(d.units_against([t]) for t in self.tables[1:])

    # -------------------------------------------------------- the steps
    def run(self, derivable: Callable[[], np.ndarray]) -> tuple[list[int], list[str], list[str]]:
        """(groups of the new table to hide in addition, problems that remain, notes).

        ``derivable``: per group of the new table, whether earlier outputs make it public
        (asked only when cells must be added: it costs a differencing comparison).
        """
        notes: list[str] = []
        table_targets, common = self.targets(notes)
        if not table_targets + common:
            return [], [], notes
        first = self.first_audit(table_targets, common, notes)
        if first is None:
            return [], [], notes
        all_targets, bad = first
        bad, excluded = self.exclude_known(bad, notes)
        wanted = [tg for tg in all_targets if tg not in excluded]
        extra, added, bad = self.hide_more(bad, wanted, derivable)
        if not bad:
            self.drop_unneeded(extra, added, wanted)
            return added, [], notes
        names = join_names([self.named(t, g) for t, g in bad])
        return added, [f"linked outputs leave hidden cells recoverable ({names})"], notes

    def targets(self, notes: list[str]) -> tuple[list[Target], list[Target]]:
        """The tables' small hidden cells; and the small groups of rows the outputs separate
        together (none, with a note, when there are too many to audit while displaying)."""
        table_targets = [tg for t in self.everything for tg in self.table_targets(t)]
        common = self.common_targets()
        if len(common) <= MAX_COMMON_TARGETS:
            common += self.coarse_targets()
        if len(common) > MAX_COMMON_TARGETS:
            self.unproven.append(f"{len(common):,} small groups of rows that this table and earlier outputs "
                                 f"separate together were not audited (at most {MAX_COMMON_TARGETS:,} are)")
            common = []
        return table_targets, common

    def first_audit(self, table_targets: list[Target], common: list[Target], notes: list[str]
                    ) -> tuple[list[Target], list[Target]] | None:
        """(the targets audited, those failing) with every table as published; None when no
        target is left."""
        all_targets = table_targets + common
        self.common_end = work_done() + COMMON_ITERATIONS
        try:
            bad = self.failing(self.intervals(self.everything, set(), all_targets))
            self.common_end = np.inf  # (the first audit decided: the rest runs to the audit's own budget)
        except WorkLimit:
            if not common or work_done() >= self.end:
                raise
            # the small shared groups are an extra layer: past their budget they are left out
            # and the table is review; the table's own hidden cells keep the whole audit
            self.unproven.append(f"{len(common):,} small groups of rows that this table and earlier outputs "
                                 f"separate together were not all audited within their work budget "
                                 f"({COMMON_ITERATIONS:,} simplex iterations)")
            all_targets = table_targets
            if not all_targets:
                return None
            bad = self.failing(self.intervals(self.everything, set(), all_targets))
        return all_targets, bad

    def exclude_known(self, bad: list[Target], notes: list[str]) -> tuple[list[Target], set[Target]]:
        """Failing targets the earlier outputs reveal without this table: public knowledge, not
        this table's doing (noted). Returns (the other failing targets, those set aside)."""
        if not bad:
            return bad, set()
        earlier = [t for t in self.everything[1:] if t not in self.sibling_at]
        before = set(self.failing(self.intervals(earlier, set(), bad)))
        if before:
            names = join_names([self.named(t, g) for t, g in before])
            notes.append(f"earlier outputs together already reveal {names}; this table adds nothing to that")
        return [x for x in bad if x not in before], before

    def hide_more(self, bad: list[Target], wanted: list[Target], derivable: Callable[[], np.ndarray]
                  ) -> tuple[set[int], list[int], list[Target]]:
        """Hide published cells of the new table (one per failing target and round, at most 12
        rounds) until no target fails. Returns (cells hidden, in the order added, still failing)."""
        extra: set[int] = set()
        added: list[int] = []
        public = derivable() if bad else np.zeros(len(self.new.labels), bool)
        for _ in range(12):
            if not bad:
                break
            progress = False
            for t, g in bad:
                pick = _candidate(self.members(t, g), self.tables, self.cell_group, extra, public, self.hideable)
                if pick is None:
                    continue
                extra.add(pick)
                added.append(pick)
                progress = True
            if not progress:
                break
            bad = self.failing(self.intervals(self.everything, extra, wanted))
        return extra, added, bad

    def hideable(self, cells: np.ndarray) -> np.ndarray:
        """The new table's groups holding rows of the common ``cells``, and those whose displayed
        cells show a group of a sibling population holding such rows (hiding them hides it)."""
        found = [self.cell_group[0][cells]]
        for t, pairs in self.sibling_pairs.items():
            g = self.cell_group[t][cells]
            found.append(pairs[np.isin(pairs[:, 0], g[g >= 0]), 1])
        return np.concatenate(found)

    def drop_unneeded(self, extra: set[int], added: list[int], wanted: list[Target]) -> None:
        """Smallest loss: drop every added cell the others make unnecessary (last added first;
        ``added`` is changed in place)."""
        for g in reversed(list(added)):
            trial = extra - {g}
            if not self.failing(self.intervals(self.everything, trial, wanted)):
                extra = trial
                added.remove(g)

    # -------------------------------------------------------- targets
    def table_targets(self, t: int) -> list[Target]:
        """Table ``t``'s hidden cells below its threshold."""
        pop = self.tables[t]
        hidden = ~pop.published & (pop.size > 0) & (pop.size < pop.threshold)
        return [(t, int(g)) for g in np.flatnonzero(hidden)]

    def few_units(self, group_of_cell: np.ndarray, n_groups: int) -> np.ndarray:
        """Per group of common cells: True when it holds 1 .. threshold-1 distinct units."""
        if self.unit_atoms is not None and n_groups:
            units, cell_of = self.unit_atoms
            if not units.known:  # (Linker.unit_note says so: the table is review)
                return np.zeros(n_groups, dtype=bool)
            found = units.per_group(np.where(cell_of >= 0, group_of_cell[np.maximum(cell_of, 0)], -1), n_groups)
            return (found > 0) & (found < self.new.threshold)
        if self.unit_rows is None or not n_groups:
            return np.zeros(n_groups, dtype=bool)
        g = group_of_cell[self.unit_rows[0]]
        pairs = pd.DataFrame({"g": g, "u": self.unit_rows[1]})
        if not self.d.unit_declared:  # (a distinct count leaves rows without a unit value out)
            pairs = pairs[pairs["u"] != MISSING]
        pairs = pairs.drop_duplicates()
        units = np.bincount(pairs["g"].to_numpy(dtype=np.int64), minlength=n_groups)
        return (units > 0) & (units < self.new.threshold)

    def table_cell_sets(self) -> set[tuple[int, ...]]:
        """The common cells of each table's cell (a union that is a table's cell is no new target)."""
        out: set[tuple[int, ...]] = set()
        for t in range(len(self.tables)):
            g = self.cell_group[t]
            inside = np.flatnonzero(g >= 0)
            order = inside[np.argsort(g[inside], kind="stable")]
            bounds = np.flatnonzero(np.diff(g[order])) + 1
            out.update(tuple(sorted(part.tolist())) for part in np.split(order, bounds))
        return out

    def common_targets(self) -> list[Target]:
        """Small common cells that are no table's cell."""
        cell_size, n_cells = self.cell_size, self.n_cells
        small = (cell_size > 0) & (cell_size < self.new.threshold)
        small |= (cell_size > 0) & self.few_units(np.arange(n_cells), n_cells)
        if not small.any():
            return []
        for t in range(len(self.tables)):  # a common cell that is a cell of some table is judged as that cell
            g = self.cell_group[t]
            inside = g >= 0
            if not inside.any():
                continue  # (a population of no rows: an indicator's flagged rows where nobody is)
            per_group = np.bincount(g[inside], minlength=len(self.tables[t].labels))
            small &= ~(inside & (per_group[np.maximum(g, 0)] == 1))
        return [(-1, int(c)) for c in np.flatnonzero(small)]

    def coarse_targets(self) -> list[Target]:
        """Small unions of common cells in the same outputs (with the same labels on the keys the
        new table shares with earlier ones, then whatever the keys); kept in ``self.coarse``."""
        tables, cell_group, n_cells = self.tables, self.cell_group, self.n_cells
        inside = np.stack([g >= 0 for g in cell_group], axis=1)
        shared_keys = [k for k in self.new.keys if any(k in t.keys for t in tables[1:])]
        label_code = np.zeros(n_cells, dtype=np.int64)
        for k in shared_keys:
            text = np.empty(n_cells, dtype=object)
            for t in range(len(tables)):
                if k not in tables[t].keys:
                    continue
                g = cell_group[t]
                at = tables[t].keys.index(k)
                fill = (g >= 0) & np.equal(text, None)
                text[fill] = [str(tables[t].labels[int(x)][at]) for x in g[fill]]
            label_code = label_code * (n_cells + 1) + pd.factorize(text)[0]
            label_code = pd.factorize(label_code)[0].astype(np.int64)
        member_code = pd.factorize(pd.Index([row.tobytes() for row in inside]))[0].astype(np.int64)
        known = self.table_cell_sets()
        out: list[Target] = []
        for code in (member_code * (n_cells + 1) + label_code, member_code) if shared_keys else (member_code,):
            groups, inverse = np.unique(code, return_inverse=True)
            sizes = np.bincount(inverse, weights=self.cell_size, minlength=len(groups))
            small = (sizes > 0) & ((sizes < self.new.threshold) | self.few_units(inverse, len(groups)))
            for j in np.flatnonzero(small).tolist():
                cells = np.flatnonzero(inverse == j)
                key = tuple(cells.tolist())
                if len(cells) < 2 or key in known:
                    continue  # a common cell (checked above) or a table's own cell
                known.add(key)
                self.coarse.append(cells)
                out.append((-2, len(self.coarse) - 1))
        return out

    def size_of(self, t: int, g: int) -> float:
        if t == -2:
            return float(self.cell_size[self.coarse[g]].sum())
        return float(self.cell_size[g]) if t < 0 else float(self.tables[t].size[g])

    def members(self, t: int, g: int) -> np.ndarray:
        """The common cells a target is made of."""
        if t == -2:
            return self.coarse[g]
        return np.array([g], dtype=np.int64) if t < 0 else np.flatnonzero(self.cell_group[t] == g)

    def named(self, t: int, g: int) -> str:
        tables, cell_group, new = self.tables, self.cell_group, self.new
        if t < 0:
            c = int(self.coarse[g][0]) if t == -2 else g
            return "a small group of rows that this table and earlier outputs separate together (" + \
                join_names(sorted({f"{tables[u].out_id}: {tables[u].name(int(cell_group[u][c]))}" if u else
                                   f"this table: {new.name(int(cell_group[0][c]))}"
                                   for u in range(len(tables)) if cell_group[u][c] >= 0})) + ")"
        return f"{tables[t].title} ({tables[t].out_id}): {tables[t].name(g)}" if t else f"this table: {new.name(g)}"

    # -------------------------------------------------------- the attacker's systems
    def constraints(self, use: list[int], extra: set[int]) -> tuple[Any, np.ndarray]:
        """The published cells and margins of the tables ``use`` as equations over the common
        cells (with ``extra`` cells of the new table hidden)."""
        from scipy.sparse import csr_matrix

        rows, cols, rhs = [], [], []
        for t in use:
            pop = self.tables[t]
            published = None
            if t == 0 and extra:
                published = pop.published.copy()
                published[list(extra)] = False
            elif t in self.sibling_at and extra:
                published = self.siblings.published_after(self.sibling_at[t], self.d, extra)
            for subset in pop.levels():
                mapping, sizes, pub, _ = pop.level_facts(subset, published)
                g = self.cell_group[t]
                s = np.where(g >= 0, mapping[np.maximum(g, 0)], -1)
                ok = s >= 0
                ok &= pub[np.maximum(s, 0)]
                idx = np.flatnonzero(ok)
                if not len(idx):
                    continue
                groups, inverse = np.unique(s[idx], return_inverse=True)
                base = len(rhs)
                rows.extend((base + inverse).tolist())
                cols.extend(idx.tolist())
                rhs.extend(sizes[groups].astype(float).tolist())
        A = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(rhs), self.n_cells))
        return A, np.asarray(rhs)

    def intervals(self, use: list[int], extra: set[int], wanted: list[Target]) -> dict[Target, tuple]:
        """Bounds of each wanted cell: attained values where they meet the requirement, exact otherwise.

        (``joint_bounds``: one warm-started model per system; failures are always decided
        by an exact optimum, so verdicts are those of the exact intervals.)
        """
        from .joint_bounds import JointBounds

        limit = min(self.end, self.common_end) if any(t < 0 for t, _ in wanted) else self.end
        if work_done() >= limit:
            raise WorkLimit("joint audit: work budget spent")
        A, b = self.constraints(use, extra)
        engine = JointBounds(A, b, limit, self.points)
        keys, cells, values = [], [], []
        for t, g in wanted:
            got = self.members_of.get((t, g))
            if got is None:
                got = self.members_of[(t, g)] = self.members(t, g)
            if len(got):
                keys.append((t, g))
                cells.append(got)
                values.append(self.size_of(t, g))
        found = engine.bounds(cells, np.asarray(values), self.m, self.reach)
        self.points[:] = engine.points[-MAX_JOINT_POINTS:]
        return dict(zip(keys, found, strict=True))

    @property
    def reach(self) -> float:
        """How far up a small target's upper bound must reach: the threshold. Every target is a
        group of 1 .. threshold-1 rows, and bounds of [0; 4] under a threshold of 5 prove it small
        (the rule the single-table protection applies to its threshold primaries, issue 23.13)."""
        return float(self.new.threshold)

    def failing(self, found: dict[Target, tuple]) -> list[Target]:
        """Targets an attacker pins, bounds closer than the protection required, or an upper
        bound that proves a small group small (below the threshold)."""
        from .joint_bounds import unprotected

        return [(t, g) for (t, g), (lo, hi) in found.items() if unprotected(lo, hi, self.size_of(t, g), self.m, self.reach)]


def _shown_together(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct (group of ``a``, group of ``b``) pairs of displayed cells in both."""
    both = (a >= 0) & (b >= 0)
    if not both.any():
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.stack([a[both], b[both]], axis=1).astype(np.int64), axis=0)


def _candidate(members: np.ndarray, tables: list[Population], cell_group: list[np.ndarray], extra: set[int],
               derivable: np.ndarray, hideable: Callable[[np.ndarray], np.ndarray]) -> int | None:
    """The published cell of the new table (``tables[0]``) to hide next for a failing cell.

    First the new cells that share rows with it (smallest first); otherwise those that
    share a published constraint with it — a cell or margin of any table containing its
    rows, smallest constraint first (hiding the complement of a hidden cell within its
    total). Cells public elsewhere are never chosen: hiding them protects nothing, unless the
    new table shows shares (a share's count public elsewhere still tells its group's total:
    :mod:`.share_totals`).
    ``hideable``: the new table's groups whose hiding hides rows of the given common cells
    (through the output's other populations too, see :class:`Siblings`).
    """
    new = tables[0]

    def usable(groups: np.ndarray) -> list[int]:
        return [int(x) for x in np.unique(groups) if x >= 0 and new.published[x] and x not in extra
                and (not derivable[x] or bool(new.totals_of))]

    near = usable(hideable(members))
    if near:
        return min(near, key=lambda x: new.size[x])
    options: list[tuple[int, int, int]] = []
    for t, pop in enumerate(tables):
        for subset in pop.levels():
            if t == 0 and subset == pop.keys:
                continue
            mapping, sizes, pub, _ = pop.level_facts(subset)
            g = cell_group[t]
            level = np.where(g >= 0, mapping[np.maximum(g, 0)], -1)
            for s_ in np.unique(level[members]):
                if s_ < 0 or not pub[s_]:
                    continue
                for x in usable(hideable(np.flatnonzero(level == s_))):
                    options.append((int(sizes[s_]), int(new.size[x]), x))
    return min(options)[2] if options else None
