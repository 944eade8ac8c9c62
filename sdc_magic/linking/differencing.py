"""Differencing through filters: cells whose rows differ from published cells by a few units.

A new cell whose rows differ by 1 to ``threshold - 1`` from those of an earlier published
cell — or of a *sum* of earlier published cells (districts D51 + D52 against a filtered
region R5, a filtered total against the grand total), at any level of the earlier table
(inner cells and margins) — is made primary, with an explanation naming both outputs and
the cells by their labels (:func:`findings`, :func:`differencing_reasons`). This also
catches overlapping recodings (0-11/12-17 then 0-5/6-17; ``pd.cut`` bands (59,120] then
(64,120]). A new cell with exactly the rows of a cell an earlier output *hid* (inner or
margin: ``describe()``, a constant key, ``groupby(np.zeros(n))`` publishing a hidden
grand total) is hidden too.

With a unit column declared, the difference is also counted in distinct units
(:class:`_UnitGaps`). A cell with exactly the rows of a cell published earlier is public
knowledge (:func:`published_elsewhere`): never worth hiding. Populations one table
publishes side by side are compared by ``Linker.within_table``; :func:`variant_cells`
says which of a table's cells publish each of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .atoms import SetsOfAtoms, by_atom, items_of
from .identity import MISSING
from .level_pairs import LevelPairs, cross, draft_pairs, level_pairs, pair_keys
from .names import cell_name, join_names
from .populations import Draft, Population, publishes_variant


# ------------------------------------------------------------------ pairs of groups
def _gaps(xu: np.ndarray, yu: np.ndarray, ww: np.ndarray, size_x: np.ndarray, size_y: np.ndarray,
          pub_x: np.ndarray, ny: int) -> tuple[np.ndarray, np.ndarray]:
    """For each y, how far it is from the sum of the published x cells it touches.

    ``(xu, yu, ww)``: rows shared by x and y cells (only pairs that share rows). When every
    touched x is published and either y lies within their union (gap = sum x - y) or each
    touched x lies within y (gap = y - sum x), an attacker who knows how the cells are
    defined learns the gap exactly. Returns (gap, 0 where not derivable; y exactly a sum).
    """
    touched = np.bincount(yu, minlength=ny)
    unpub = np.bincount(yu, weights=~pub_x[xu], minlength=ny)
    shared = np.bincount(yu, weights=ww, minlength=ny)
    total = np.bincount(yu, weights=size_x[xu], minlength=ny)
    partial = np.bincount(yu, weights=ww != size_x[xu], minlength=ny)
    ok = (touched > 0) & (unpub == 0) & (size_y > 0)
    covered = ok & (shared == size_y)
    within = ok & (partial == 0)
    gap = np.zeros(ny, dtype=np.int64)
    gap[covered] = (total - size_y)[covered]
    gap[within & ~covered] = (size_y - total)[within & ~covered]
    exact = (covered | within) & (total == size_y)
    return gap, exact


def _two_sided(xu: np.ndarray, yu: np.ndarray, ww: np.ndarray, size_x: np.ndarray, size_y: np.ndarray,
               pub_x: np.ndarray, ny: int, threshold: int) -> np.ndarray:
    """Per y: it and the published x cells it touches differ by 1..threshold−1 rows on *each* side.

    Why (red team, stop 51): neither holds the other, so :func:`_gaps` tells nothing, yet their
    difference is (rows of the x outside y) − (rows of y outside the x), two small groups: with A/C
    (42) and A (40) published, A/C − A = C − (person 6, alone in a hidden cell of his own), and he
    reads C = 3. Made primary like a gap (the attacker who knows one side learns the other).
    """
    if not len(yu):
        return np.zeros(ny, dtype=bool)
    pub = pub_x[xu]
    outside_y = np.bincount(yu, weights=np.where(pub, size_x[xu] - ww, 0), minlength=ny)
    shared_pub = np.bincount(yu, weights=np.where(pub, ww, 0), minlength=ny)
    outside_x = size_y - shared_pub
    return (shared_pub > 0) & (outside_y > 0) & (outside_y < threshold) & (outside_x > 0) & (outside_x < threshold)


class _UnitGaps:
    """Differences between two tables counted in distinct units, not rows.

    With a unit column declared, a filter that removes 6 episodes of 2 people leaves a row
    difference of 6 (not below the threshold) but isolates 2 units: the two published counts
    then describe a cell of 2 people. For a pair already derivable in rows (``_gaps``), the
    rows that differ are the symmetric difference of the new cell and the old cells it
    touches; their distinct units are counted from the unit column's row hashes.
    """

    #: Row differences larger than this are not recounted in units (cost bound).
    MAX_ROWS = 200_000
    #: Candidate cells recounted per comparison (cost bound; beyond, rows decide).
    MAX_CANDIDATES = 256
    #: Rows of units (or the engine's entries of sets of atoms) looked at per comparison to count
    #: the units on one side only (a work budget, ``atoms.SetsOfAtoms.apart``;
    #: beyond, the units of the rows that differ are counted, as before stop 58: 20 tables of 1M
    #: rows, every 4th of distinct firms scattered over the cells, took 8-19 s for the last display
    #: when both sides were gathered cell by cell without a budget)
    MAX_APART_WORK = 4_000_000

    def __init__(self, d: Draft, threshold: int) -> None:
        self.d = d
        self.threshold = threshold
        #: rows left in their engine: their units counted there (asked at the first candidate)
        self.engine = d.engine_units
        self.hashes = d.universe.hashes[d.unit] if self.engine is None else None
        self._csr: tuple[np.ndarray, np.ndarray] | None = None
        self._most: int | None = None
        self._units_sets: SetsOfAtoms | None = None  # (see _sets)

    @property
    def most_rows(self) -> int:
        if self._most is None:
            self._most = self.engine.most_rows if self.engine is not None \
                else self.d.universe.most_rows_per_unit(self.d.unit)
        return self._most

    def _rows_of(self, atoms: np.ndarray) -> np.ndarray:
        if self._csr is None:
            self._csr = by_atom(self.d.new_row_atom, len(self.d.atom_size))
        return items_of(self._csr, atoms)

    def count(self, atoms: np.ndarray) -> int:
        """Distinct units among the rows of ``atoms`` (a row without a unit value counts as one)."""
        if self.engine is not None:
            return self.engine.count(atoms)
        values = self.hashes[self._rows_of(atoms)]
        known = values != MISSING
        # (a row without a unit value: anyone under a declared unit; left out of a distinct count)
        return int(len(np.unique(values[known])) + ((~known).sum() if self.d.unit_declared else 0))

    def _sets(self) -> SetsOfAtoms:
        """The units of the draft's atoms (:func:`units_of`), made once per comparison."""
        if self._units_sets is None:
            self._units_sets = units_of(self.d)
        return self._units_sets

    def apart(self, one: np.ndarray, other: np.ndarray) -> int:
        """Units with a row on one side only (``one``, ``other``: per atom, in that side), exact
        below the threshold: what two tables of distinct units differ by. Not the units of the
        rows that differ: a woman of A with an episode in C is in both everyone and everyone but
        C, and the 2 of 6 such units left were C's two women (red team of stop 58: 37 − 35 at
        ``pass``)."""
        return self._sets().apart(one, other, self.threshold)

    def few(self, gap: np.ndarray, su: np.ndarray, bu: np.ndarray, old: Population, mapping: np.ndarray,
            forward: bool) -> np.ndarray:
        """Cells (new cells if ``forward``, else old level cells) whose row gap is at least the
        threshold but whose units differ by fewer than threshold (:meth:`apart`)."""
        T = self.threshold
        if self.engine is not None and not (((gap >= T) & (gap <= self.MAX_ROWS)).any() and self.engine.known):
            return np.zeros(0, dtype=np.int64)  # (units the engine could not count: Linker.unit_note)
        d = self.d
        # d differing rows hold at least d / (most rows of one unit) units: with a unit declared the
        # tables publish rows, and the units of the rows that differ are the small cell. Tables of
        # distinct units publish units: those on one side only (:meth:`apart`) are the difference,
        # and units with rows on both sides can make it small whatever the gap in rows (counted while
        # the work budget lasts)
        distinct = not d.unit_declared
        pruned = (gap < T * self.most_rows) | distinct
        cands = np.flatnonzero((gap >= T) & (gap <= self.MAX_ROWS) & pruned)[: self.MAX_CANDIDATES]
        if not len(cands):
            return np.zeros(0, dtype=np.int64)
        spent_before = self._sets().work if distinct else 0
        old_group = old.group[d.parent]
        old_level = np.where(old_group >= 0, mapping[np.maximum(old_group, 0)], -1)
        new_group = d.pop.group
        out = []
        for c in cands:
            if forward:  # new cell c against the old cells it touches
                in_old = np.isin(old_level, np.unique(su[bu == c]))
                in_new = new_group == c
            else:  # old cell c against the new cells it touches
                in_old = old_level == c
                in_new = np.isin(new_group, np.unique(bu[su == c]))
            if distinct and self._sets().work - spent_before < self.MAX_APART_WORK:
                n = self.apart(in_old, in_new)
            elif gap[c] < T * self.most_rows:
                n = self.count(np.flatnonzero(in_old ^ in_new))
            else:
                continue
            if 0 < n < T:
                out.append(int(c))
        return np.asarray(out, dtype=np.int64)


def units_of(d: Draft) -> SetsOfAtoms:
    """The distinct units of a draft's atoms as sets of atoms: the engine's signatures (rows
    left in their engine), or each unit of the universe's rows with its rows' atoms. A row
    without a unit value is a set of its own: a unit when the unit was declared (it may be
    anyone), none for a distinct count, which leaves it out (10 id-less episodes beside C's two
    women made a group of 12; red team of stop 59). For differencing and the audit in units."""
    if d.engine_units is not None:
        return d.engine_units.sets()
    hashes = d.universe.hashes[d.unit]
    codes, uniques = pd.factorize(np.where(hashes == MISSING, 0, hashes))
    alone = hashes == MISSING
    unit = np.where(alone, len(uniques) + np.cumsum(alone) - 1, codes).astype(np.int64)
    units = np.concatenate([np.ones(len(uniques)), np.full(int(alone.sum()), 1.0 if d.unit_declared else 0.0)])
    return SetsOfAtoms(unit, d.new_row_atom, units, len(d.atom_size))


# ------------------------------------------------------------------ findings
@dataclass
class _OldLevel:
    """One level (inner cells, or margins over ``subset``) of an earlier table, paired with the
    new table's cells: ``(su, bu, ww)`` = (old level cell, new cell, shared rows)."""

    old: Population
    subset: tuple[str, ...]
    mapping: np.ndarray
    sizes: np.ndarray
    pub: np.ndarray
    hidden: np.ndarray
    su: np.ndarray
    bu: np.ndarray
    ww: np.ndarray


class _Findings:
    """Differencing hits, hidden-elsewhere hits and derivable (public) groups of a draft,
    gathered by comparing it with each earlier population (:meth:`compare`)."""

    def __init__(self, d: Draft) -> None:
        new = d.pop
        self.d = d
        self.new = new
        self.nb = len(new.labels)
        self.T = new.threshold
        self.candidate = new.published if new.published.any() else np.ones(self.nb, bool)
        self.hits: dict[int, list[tuple[str, str]]] = {}
        self.margins: list[tuple[tuple[str, ...], int, str]] = []  # risky margins of the new table
        self.new_levels: list[tuple[tuple[str, ...], np.ndarray, list[tuple], np.ndarray, np.ndarray]] = []
        for nsub in new.levels()[1:]:
            nmap, nlabels = new.level(nsub)
            nsizes = np.bincount(nmap, weights=new.size, minlength=len(nlabels)).astype(np.int64)
            npub = np.bincount(nmap, weights=~self.candidate, minlength=len(nlabels)) == 0
            self.new_levels.append((nsub, nmap, nlabels, nsizes, npub))
        self.derivable = np.zeros(self.nb, dtype=bool)
        self.all_units = _UnitGaps(d, self.T) if d.unit is not None else None
        self.units = self.all_units  # (per earlier table: see compare)

    def result(self) -> dict[str, Any]:
        return {"hits": self.hits, "derivable": self.derivable, "margins": self.margins}

    def compare(self, old: Population, only: set[tuple[str, ...]] | None = None) -> None:
        """The new table against every level of ``old`` (``only``: those levels, see :meth:`screen`)."""
        a, b, w = draft_pairs(self.d, old)
        if not len(a):
            return
        self.units = self.all_units if self.d.units_against([old]) else None
        # when every cell of the old table is published, its margins are sums of published cells:
        # a new cell (or margin) against them is already checked against the cells themselves
        fully = bool(old.published.all()) and not old.hidden_model and not old.hidden_shown.any()
        for subset in old.levels():
            if only is not None and subset not in only:
                continue
            coarse = subset != old.keys
            mapping, sizes, pub, hidden = old.level_facts(subset)
            if subset == old.keys:
                su, bu, ww = a, b, w
            else:
                su, bu, ww = cross(np.where(a >= 0, mapping[np.maximum(a, 0)], -1), len(sizes), b, self.nb, w)
            inside = (su >= 0) & (bu >= 0)
            level = _OldLevel(old, subset, mapping, sizes, pub, hidden, su[inside], bu[inside], ww[inside])
            self._forward(level, skip=fully and coarse)
            self._reverse(level)
            if not (fully and coarse):
                self._new_margins(level)
            if hidden.any():
                self._hidden_cells(level)

    def screen(self, lp: LevelPairs) -> np.ndarray:
        """Per level of ``lp``: whether :meth:`compare` could find anything there; and the groups
        derivable from all of them (``self.derivable``), all levels at once.

        Why: asked level by level, a display of a long session paid for ~600 levels of which a
        handful hold a hit (see :mod:`.level_pairs`). Each test below is the condition under which
        ``_forward``, ``_reverse``, ``_new_margins`` or ``_hidden_cells`` adds a hit or a margin, or
        a weaker one, so comparing only the flagged levels gives the same findings. Not for a draft
        counted in units (its unit gaps are found by comparison only).
        """
        T, nb, su, bu, ww = self.T, self.nb, lp.su, lp.bu, lp.ww
        flagged = np.zeros(len(lp.level_old), dtype=bool)
        level = lp.cell_level[su]
        kept = ~lp.level_skip[level]  # forward and margins: levels that _forward/_new_margins compare
        # _forward: a new cell against the sum of an old level's published cells it touches
        key, key_level, key_group = pair_keys(level[kept], bu[kept], nb)
        x, w = su[kept], ww[kept]
        size_y = self.new.size[key_group]
        gap, exact = _gaps(x, key, w, lp.sizes, size_y, lp.pub, len(key_level))
        self.derivable[key_group[exact]] = True
        near = ((gap > 0) & (gap < T)) | _two_sided(x, key, w, lp.sizes, size_y, lp.pub, len(key_level), T)
        flagged[key_level[near & self.candidate[key_group]]] = True
        # _reverse: an old published cell against the sum of the new cells it touches
        rgap, _ = _gaps(bu, su, ww, self.new.size, lp.sizes, self.candidate, lp.n_cells)
        flagged[lp.cell_level[(rgap > 0) & (rgap < T) & lp.pub]] = True
        # _hidden_cells: a cell an earlier output hid, here with exactly its rows
        flagged[level[(ww == self.new.size[bu]) & (ww == lp.sizes[su]) & lp.hidden[su]]] = True
        # _new_margins: the new table's margins against the old cells (and their hidden cells)
        shown_margins = self.d.display_margin is not None and len(self.d.display_margin) > 0
        for _nsub, nmap, _nlabels, nsizes, npub in self.new_levels:
            xu, yu, xw = cross(su[kept], lp.n_cells, nmap[bu[kept]], len(nsizes), ww[kept])
            mkey, mlevel, mgroup = pair_keys(lp.cell_level[xu], yu, len(nsizes))
            msize = nsizes[mgroup]
            mgap, _ = _gaps(xu, mkey, xw, lp.sizes, msize, lp.pub, len(mlevel))
            close = ((mgap > 0) & (mgap < T)) | _two_sided(xu, mkey, xw, lp.sizes, msize, lp.pub, len(mlevel), T)
            flagged[mlevel[close & (npub[mgroup] | shown_margins)]] = True
            flagged[lp.cell_level[xu[(xw == nsizes[yu]) & (xw == lp.sizes[xu]) & lp.hidden[xu]]]] = True
        return flagged

    def _forward(self, lv: _OldLevel, skip: bool) -> None:
        """A new cell against the sum of the old published cells it touches."""
        new, nb, su, bu = self.new, self.nb, lv.su, lv.bu
        gap, exact = _gaps(su, bu, lv.ww, lv.sizes, new.size, lv.pub, nb) if not skip else (
            np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=bool))
        self.derivable |= exact
        few_units = self.units.few(gap, su, bu, lv.old, lv.mapping, forward=True) if self.units is not None else ()
        if not skip:
            few_units = np.union1d(few_units, np.flatnonzero(_two_sided(su, bu, lv.ww, lv.sizes, new.size, lv.pub, nb,
                                                                        self.T)))
        for g in np.union1d(np.flatnonzero((gap > 0) & (gap < self.T) & self.candidate), few_units).astype(int):
            if not self.candidate[g]:
                continue
            parts = np.unique(su[bu == g])
            self.hits.setdefault(int(g), []).append(("differencing", _message(lv.old, lv.subset, parts, new, [g])))

    def _reverse(self, lv: _OldLevel) -> None:
        """An old published cell against the sum of the new cells it touches."""
        new, su, bu = self.new, lv.su, lv.bu
        rgap, _ = _gaps(bu, su, lv.ww, new.size, lv.sizes, self.candidate, len(lv.sizes))
        few_units = self.units.few(rgap, su, bu, lv.old, lv.mapping, forward=False) if self.units is not None else ()
        for s_ in np.union1d(np.flatnonzero((rgap > 0) & (rgap < self.T) & lv.pub), few_units).astype(int):
            if not lv.pub[s_]:
                continue
            parts = np.unique(bu[su == s_])
            if any(int(g) in self.hits for g in parts):
                continue
            g = int(parts[np.argmin(new.size[parts])])
            self.hits.setdefault(g, []).append(("differencing", _message(lv.old, lv.subset, [s_], new, parts)))

    def _new_margins(self, lv: _OldLevel) -> None:
        """Margins of the new table (derivable from its cells, or displayed) against the old cells."""
        new, old, subset, sizes, hidden = self.new, lv.old, lv.subset, lv.sizes, lv.hidden
        candidate, hits = self.candidate, self.hits
        for nsub, nmap, nlabels, nsizes, npub in self.new_levels:
            xu, yu, xw = cross(lv.su, len(sizes), nmap[lv.bu], len(nlabels), lv.ww)
            inner = (xu >= 0) & (yu >= 0)
            mgap, _ = _gaps(xu[inner], yu[inner], xw[inner], sizes, nsizes, lv.pub, len(nlabels))
            # (a margin differing from the old cells by a few rows on each side: _two_sided)
            close = ((mgap > 0) & (mgap < self.T)) | _two_sided(xu[inner], yu[inner], xw[inner], sizes, nsizes,
                                                                lv.pub, len(nlabels), self.T)
            for m_ in np.flatnonzero(close & (npub | bool(len(self.d.display_margin)))):
                inside_m = np.flatnonzero((nmap == m_) & candidate & (new.size > 0))
                if not len(inside_m):
                    continue
                parts = np.unique(xu[inner & (yu == m_)])
                where = cell_name(nlabels[int(m_)]) if nsub else "total"
                text = _message(old, subset, parts, new, []).replace("with this table's ", "with this table's "
                                                                     f"{where}")
                self.margins.append((nsub, int(m_), text))
                g = int(inside_m[np.argmin(new.size[inside_m])])
                if g not in hits:
                    hits[g] = [("differencing", text)]
            # a margin of the new table with exactly the rows of a cell an earlier output hid
            # (e.g. its grand total): publishing it would undo that output's protection
            if hidden.any():
                xs, ys, xws = xu[inner], yu[inner], xw[inner]
                exact = (xws == nsizes[ys]) & (xws == sizes[xs]) & hidden[xs]
                for s_, m_ in zip(xs[exact], ys[exact], strict=True):
                    where = cell_name(old.level(subset)[1][int(s_)]) if subset else "its grand total"
                    text = (f"{old.title} ({old.out_id}) hid these same cases ({where}) to protect its "
                            "small cells: publishing them here would undo that")
                    self.margins.append((nsub, int(m_), text))
                    inside_m = np.flatnonzero((nmap == m_) & candidate & (new.size > 0))
                    if len(inside_m):
                        g = int(inside_m[np.argmin(new.size[inside_m])])
                        hits.setdefault(g, [("linked", text)])

    def _hidden_cells(self, lv: _OldLevel) -> None:
        """A cell an earlier output hid, published here with exactly its rows."""
        old, subset, su, bu, ww = lv.old, lv.subset, lv.su, lv.bu, lv.ww
        same = (ww == self.new.size[bu]) & (ww == lv.sizes[su]) & lv.hidden[su]
        for s_, g in zip(su[same], bu[same], strict=True):
            if int(g) in self.hits:
                continue
            where = cell_name(old.level(subset)[1][int(s_)]) if subset else "its grand total"
            self.hits.setdefault(int(g), []).append(("linked", (
                f"{old.title} ({old.out_id}) hid these same cases ({where}) to protect its small cells: "
                "publishing them here would undo that")))


def findings(d: Draft, related: list[Population]) -> dict[str, Any]:
    """Differencing hits, hidden-elsewhere hits and derivable (public) groups of a draft.

    ``related``: the earlier populations of the draft's universe, oldest first (compared
    newest first). Returns ``{"hits": {group: [(rule, message)]}, "derivable": bool per
    group, "margins": [(level, margin, message)]}``.
    """
    found = _Findings(d)
    olds = list(reversed(related))
    if d.unit is not None or not olds:
        for old in olds:
            found.compare(old)
        return found.result()
    lp = level_pairs(d, olds)
    flagged = found.screen(lp)
    for o in np.unique(lp.level_old[flagged]).tolist():
        found.compare(olds[o], lp.subsets_of(o, flagged))
    return found.result()


def _message(old: Population, subset: tuple[str, ...], olds: Any, new: Population, news: Any) -> str:
    names = old.level(subset)[1]
    left = join_names([cell_name(names[int(s)]) if subset else "its total" for s in olds])
    right = join_names([new.name(int(g)) for g in news]) if len(news) else ""
    return (f"{old.title} ({old.out_id}) publishes {left}; with this table's {right} the two differ "
            f"by fewer than {new.threshold} units: subtracting one from the other would reveal them")


def differencing_reasons(d: Draft, related: list[Population]) -> dict[int, list[Any]]:
    """Displayed cells (flat index) to make primary, with reasons naming cells by their labels."""
    from ..rules import Reason

    out: dict[int, list[Any]] = {}
    found_all = findings(d, related)
    for g, found in found_all["hits"].items():
        for i in np.flatnonzero(d.display_group == g):
            out.setdefault(int(i), []).extend(Reason(rule, message) for rule, message in found[:2])
    if found_all["margins"] and d.display_margin is not None and len(d.display_margin):
        # a displayed margin that differs from earlier cells by a few units: the displayed margins
        # are hidden (the sibling margins would add up to it), its smallest cell is protected. Only
        # the risky ones fail the rule: the others are hidden beside them, as secondary cells
        # (a sibling the shown cells pin sent the table to review, "a hidden cell that fails a rule
        # is determined exactly": 38 of 842 random tables, red team of stop 66)
        risky: dict[tuple[tuple[str, ...], int], str] = {}
        for subset, m, text in found_all["margins"]:
            risky.setdefault((tuple(subset), int(m)), text)
        message = found_all["margins"][0][2]
        checked_levels = set(d.pop.levels())
        groups = d.display_margin_groups or [None] * len(d.display_margin)
        for i, at in zip(d.display_margin.tolist(), groups, strict=True):
            if at is None or at in risky or at[0] not in checked_levels:
                out.setdefault(int(i), []).append(Reason("differencing", risky.get(at, message) if at else message))
            else:
                out.setdefault(int(i), []).append(Reason("secondary", COMPANION))
    return out


#: why a displayed margin is hidden beside one that differs from earlier outputs by a few units
COMPANION = ("hidden with the margin beside it that differs from earlier outputs by a few units, "
             "so that it cannot be recovered from the other margins")


def published_elsewhere(d: Draft, related: list[Population], measure: tuple[str, str] | None = None
                        ) -> dict[tuple[str, ...], set[tuple]]:
    """Cells of the new table (inner, or margins) whose rows are exactly a cell that earlier
    outputs published with the same figures (statistics and variables): public knowledge, never
    worth hiding.

    Only single cells: a cell equal to a *sum* of published cells is public too, but pinning
    every such sum leaves the per-table engine too little room (it then blocks tables whose
    small cells are already public); the joint audit accounts for those sums instead.
    """
    out: dict[tuple[str, ...], set[tuple]] = {}
    new = d.pop
    # (only outputs that told the same figures of their groups: a median's rows published tell
    # nobody their count, see :func:`.populations.measures_of`; with ``measure``, the cells of that
    # one figure: a table of a flag's sums and counts after the counts has public counts)
    olds = [o for o in reversed(related) if o.tells is None or (
        measure in o.tells if measure is not None else new.tells is None or new.tells <= o.tells)]
    if not olds:
        return out
    lp = level_pairs(d, olds)
    for subset in new.levels():
        mapping, labels = new.level(subset)
        nsizes = np.bincount(mapping, weights=new.size, minlength=len(labels)).astype(np.int64)
        # (old level cell, new level cell) pairs, keyed per old level: a new cell is public when,
        # at some old level, one published cell touches it and they hold the same rows
        su, yu, ww = cross(lp.su, lp.n_cells, mapping[lp.bu], len(labels), lp.ww)
        key, _, key_group = pair_keys(lp.cell_level[su], yu, len(labels))
        one = np.bincount(key, minlength=len(key_group)) == 1
        same = _gaps(su, key, ww, lp.sizes, nsizes[key_group], lp.pub, len(key_group))[1] & one
        public = np.zeros(len(labels), dtype=bool)
        public[key_group[same]] = True
        if public.any():
            out[subset] = {tuple(labels[g]) for g in np.flatnonzero(public)}
    return out


def variant_cells(found: dict[int, Any], entry: Any, positions: np.ndarray, variant: Any) -> dict[int, Any]:
    """Of the cells a differencing hit names (every cell of a group), those publishing the
    variant population (its variable's cells); all of them if none does or for ``None``."""
    if variant is None or not found or (isinstance(variant, tuple) and variant[:1] == ("combined",)):
        return found  # a combined population's groups are already its variants' cells
    try:
        at = np.maximum(np.asarray(positions), 0)
        cell_var = np.asarray(entry.evidence.var, dtype=object)[at]
        cell_stat = np.asarray(entry.evidence.stat).astype(str)[at]
    except (AttributeError, IndexError, TypeError):
        return found
    publishing = publishes_variant(cell_var, cell_stat, variant)
    mine = {i: rs for i, rs in found.items() if i < len(publishing) and publishing[i]}
    return mine or found
