"""Populations: which rows each published cell of an output covers.

Linking is driven by the *rows* behind each published cell (the output's population),
not by the numbers shown. A :class:`Population` is one output's groups over the atoms of
its universe (:mod:`.universes`): one int32 per atom (its group, or -1), with the cells it
published and those it hid. A :class:`Draft` is the population of a table being
displayed, before it is recorded; :func:`draft` builds it from the table's captured
source (a re-aggregation of a count table covers the rows of the cells it adds).

One output can publish more than one population: a mean or sum of a 0/1 flag beside a
count publishes the flagged rows too (:func:`indicator_variables`). And what the
protection of an output hid (:mod:`.hidden_cells`)
is remembered, so that a later output does not publish the same rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd

from ..evidence import row_origins
from ..evidence import rows as row_limits
from ..evidence.facts import indicator_column
from ..evidence.flatten import canonical_labels
from ..evidence.in_engine import MAX_INDICATORS, SETS_LEFT_OUT, VARIANT_KEY, InEngineRows, disjoint_sets
from . import edits, engine_units, in_engine, masked, share_totals
from .atoms import refine, rows_in_order
from .engine_units import EngineUnits, units_of_split
from .identity import frame_hash, group_ids, key_hashes_from_groups, new_display
from .in_engine import Split, counts_agree, groups_agree, one_atom_per_group
from .margin_groups import displayed_margin_groups
from .names import cell_name
from .universes import Universe

MAX_LEVEL_KEYS = 4  # margins at every subset of up to this many keys (else the grand total only)

#: How a frame is placed among the session's universes (``Linker._place``): its universe and
#: the universe row of each of its rows; for rows left in their engine (``InEngineRows``), its
#: engine universe and the table's cut of that universe's atoms (:class:`.in_engine.Split`).
Placer = Callable[[Any, list[str]], tuple[Any, Any] | None]
#: (frame, variable) -> the rows where the variable keeps a column of earlier rows its labels name
#: (see :func:`.masked.kept_in_universes`), or None
KeptElsewhere = Callable[[pd.DataFrame, Hashable], tuple[np.ndarray, Hashable] | None]


# ------------------------------------------------------------------ populations
@dataclass
class Population:
    """One output's groups, over the atoms of its universe."""

    out_id: str
    title: str
    universe: Universe
    keys: tuple[str, ...]
    group: np.ndarray  # int32 per atom: the table's (full) group, -1 outside the table
    labels: list[tuple]  # per group, its key labels
    size: np.ndarray  # rows per group
    published: np.ndarray  # bool per group: a shown, not hidden cell
    hidden_shown: np.ndarray  # bool per group: shown, every cell hidden
    threshold: int = 5
    margins_public: bool = True
    hidden_model: dict[tuple[str, ...], set[int]] = field(default_factory=dict)  # hidden at each level
    #: displayed margins (``margins=True``) the display hid though the protection model published
    #: them: not published, but (unlike ``hidden_model``) no reason to hide the same rows elsewhere
    margins_hidden: dict[tuple[str, ...], set[int]] = field(default_factory=dict)
    #: the column whose distinct values the table counts (``nunique``), else None (see distinct_counted)
    counted: Hashable | None = None
    tells: frozenset[tuple[str, str]] | None = None  # :func:`measures_of` (None: unknown, all)
    foreign: str | None = None  # the folder's other notebook whose output this is (:mod:`.siblings`)
    #: levels whose totals its shares tell, shown or not (:mod:`.share_totals`)
    totals_of: tuple[tuple[str, ...], ...] = ()
    _levels: dict[tuple[str, ...], tuple[np.ndarray, list[tuple]]] = field(default_factory=dict, repr=False)

    def nbytes(self) -> int:
        return self.group.nbytes + self.size.nbytes + 64 * len(self.labels)

    def name(self, g: int) -> str:
        return cell_name(self.labels[g])

    def level(self, subset: tuple[str, ...]) -> tuple[np.ndarray, list[tuple]]:
        """Per group, its group at the coarser level ``subset`` of keys; and those groups' labels."""
        if (hit := self._levels.get(subset)) is not None:
            return hit
        if subset == self.keys:
            hit = (np.arange(len(self.labels), dtype=np.int64), list(self.labels))
        else:
            where = [self.keys.index(k) for k in subset]
            # (a C-level pick per label: a generator per label was 30 ms of 10,000 labels)
            pick = itemgetter(*where) if where else None
            tuples = [() for _ in self.labels] if pick is None else \
                [(pick(lab),) for lab in self.labels] if len(where) == 1 else list(map(pick, self.labels))
            codes, uniq = pd.factorize(pd.Index(tuples, tupleize_cols=False) if tuples else pd.Index([]))
            hit = (np.asarray(codes, dtype=np.int64), [tuple(u) if isinstance(u, tuple) else (u,) for u in uniq]
                   if subset else [()])
            if not subset:
                hit = (np.zeros(len(self.labels), dtype=np.int64), [()])
        self._levels[subset] = hit
        return hit

    def levels(self) -> list[tuple[str, ...]]:
        k = len(self.keys)
        if k <= MAX_LEVEL_KEYS:
            return [s for size in range(k, -1, -1) for s in itertools.combinations(self.keys, size)]
        return [self.keys, *[t for t in self.totals_of if t not in (self.keys, ())], ()]

    def level_facts(self, subset: tuple[str, ...], published: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(group → level group, level sizes, level published, level hidden) at ``subset``. A margin
        is published when every cell in it is, when its shares tell it (:mod:`.share_totals`), or
        when the table displayed its margins and its protection did not hide this one."""
        published = self.published if published is None else published
        mapping, labels = self.level(subset)
        n = len(labels)
        sizes = np.bincount(mapping, weights=self.size, minlength=n).astype(np.int64)
        if subset == self.keys:
            return mapping, sizes, published.copy(), self.hidden_shown | _flags(self.hidden_model.get(subset), n)
        all_pub = np.bincount(mapping, weights=~published, minlength=n) == 0
        hidden = _flags(self.hidden_model.get(subset), n)
        told = share_totals.told(self, subset, published) if self.totals_of else False
        published = all_pub | told | (self.margins_public & ~hidden & ~_flags(self.margins_hidden.get(subset), n))
        return mapping, sizes, published, hidden


def _flags(ids: set[int] | None, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[np.fromiter((i for i in ids or () if 0 <= i < n), dtype=np.int64)] = True
    return out


@dataclass
class Draft:
    """The population of a table being displayed, before it is recorded."""

    pop: Population
    universe: Universe
    version: int
    new_row_atom: np.ndarray
    parent: np.ndarray  # per new atom, its atom before this table
    atom_size: np.ndarray
    display_group: np.ndarray  # per displayed flat cell, its group (-1: none / margin)
    display_margin: np.ndarray | None = None  # displayed flat cells that are margins (crosstab margins=True)
    unit: Hashable | None = None  # the unit column, when the universe holds its values
    #: the unit was declared (it counts against every earlier output), not taken from the column a
    #: table of distinct counts counts (it counts against outputs counting the same column)
    unit_declared: bool = True
    #: what the table publishes of the variables it sums, recorded with it (:mod:`.edits`)
    values: tuple[edits.Values, ...] = ()
    #: the same counted in an engine: per variable, (its expression, per new atom its values'
    #: checksum), and the variables whose values changed since (:mod:`.engine_values`)
    engine_values: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    edited: tuple[str, ...] = ()
    #: the output is cleared (``pass`` or ``suppressed``): what it shows is taken as shown
    cleared: bool = False
    #: rows counted in their engine: the distinct units of the unit column there (:mod:`.engine_units`)
    engine_units: EngineUnits | None = None
    #: per displayed margin, its (level, group) here (:mod:`.margin_groups`; None: not told)
    display_margin_groups: list[tuple[tuple[str, ...], int] | None] | None = None

    def audited_alone(self) -> bool:
        """Whether the joint audit runs even without related earlier outputs: a table of distinct
        units that shows its own margins (a ``ROLLUP``: A 30 + B 33 − total 60 = 3 people in
        both, its margins being no sums of its cells; red team of stop 59)."""
        return self.unit is not None and not self.unit_declared and self.display_margin is not None \
            and bool(len(self.display_margin))

    def units_against(self, others: list[Population]) -> bool:
        """Whether differences with ``others`` are also counted in units (see :func:`distinct_counted`)."""
        if self.unit is None:
            return False
        return self.unit_declared or all(same_column(o.counted, self.unit) for o in others)


def same_column(a: Hashable | None, b: Hashable | None) -> bool:
    """Two column names the same (as saved: a restored population names its column as text)."""
    return a is not None and b is not None and str(a) == str(b)


# ------------------------------------------------------------------ drafts
#: Drafts of the current display (the differencing check, the published-cells lookup and
#: the final record share one), cleared by :func:`clear_cache` after each display.
_drafts: dict[tuple[int, Any], tuple[Any, Any, Draft]] = {}


def clear_cache(display_ends: bool = True) -> None:
    """Forget this display's drafts; with ``display_ends`` (a display starts or ends) the engines'
    counts of its populations too (``in_engine.new_display``: the base may change between displays;
    a trial within one display, ``Linker.within_table``, keeps them)."""
    _drafts.clear()
    _disjoint.clear()
    new_display()
    engine_units.new_display()
    if display_ends:
        in_engine.new_display()


def draft(place: Placer, out_id: str, title: str, entry: Any, positions: np.ndarray | None,
          hidden_flat: np.ndarray | None, threshold: int, flagged: Any = None,
          kept_elsewhere: KeptElsewhere | None = None) -> Draft | None:
    """The population a displayed table publishes; with ``flagged``, the rows at the
    attribute level of that indicator variable (see :func:`indicator_variables`)."""
    if positions is None or entry is None:
        return None
    key = (id(entry), flagged)
    cached = _drafts.get(key)
    if cached is not None and cached[0] is entry and cached[1] is positions \
            and cached[2].version == cached[2].universe.version:
        base = cached[2]
    else:
        base = _base_draft(place, entry, positions, threshold, flagged, kept_elsewhere)
        if base is None:
            return None
        if len(_drafts) >= 8:  # checks outside a display (suggestions, the API) are not cleared after
            _drafts.pop(next(iter(_drafts)))
        _drafts[key] = (entry, positions, base)
    pop = base.pop
    published, hidden_shown = shown_groups(base.display_group, len(pop.labels), hidden_flat)
    if isinstance(flagged, tuple) and flagged[:1] == ("combined",):
        title = f"{title}, its conditional columns together"
    elif _is_kept(flagged):
        title = f"{title}, its rows where {flagged[1]!r} keeps another column's values"
    elif flagged is not None:
        name = flagged[1] if isinstance(flagged, tuple) else flagged
        name = "a condition" if str(name).startswith(("__sdc", ".when")) else repr(name)
        title = f"{title}, its rows with {name} " + ("not set" if _is_other(flagged) else
                                                     "known" if isinstance(flagged, tuple) else "set")
    fresh = Population(out_id=out_id, title=title, universe=pop.universe, keys=pop.keys, group=pop.group,
                       labels=pop.labels, size=pop.size, published=published, hidden_shown=hidden_shown,
                       threshold=threshold, margins_public=pop.margins_public, counted=pop.counted,
                       tells=pop.tells, totals_of=pop.totals_of, _levels=pop._levels)
    return Draft(fresh, base.universe, base.version, base.new_row_atom, base.parent, base.atom_size,
                 base.display_group, base.display_margin, base.unit, base.unit_declared, base.values,
                 base.engine_values, base.edited, engine_units=base.engine_units,
                 display_margin_groups=base.display_margin_groups)


def shown_groups(display_group: np.ndarray, n_groups: int, hidden_flat: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per group of a population: (published: some displayed cell of it is not hidden,
    hidden_shown: displayed, every cell hidden) under the pattern ``hidden_flat``."""
    shown = display_group >= 0
    visible = shown if hidden_flat is None else shown & ~np.asarray(hidden_flat, dtype=bool)
    published = np.bincount(display_group[visible], minlength=n_groups) > 0
    any_shown = np.bincount(display_group[shown], minlength=n_groups) > 0
    return published, any_shown & ~published


def hide_in_recorded(d: Draft, hidden_flat: np.ndarray) -> None:
    """Give a recorded draft's population the pattern ``hidden_flat`` (which only hides more).

    Why: an output publishes several populations (its rows, its indicators' rows); the joint
    audit of a later one can hide more cells of the table after the first was recorded, and a
    population left saying those cells are published would let later outputs treat them as
    public knowledge."""
    published, hidden_shown = shown_groups(d.display_group, len(d.pop.labels), hidden_flat)
    d.pop.published = d.pop.published & published
    d.pop.hidden_shown = d.pop.hidden_shown | hidden_shown


@dataclass
class _EngineGroups:
    """A table's rows counted in their engine (:func:`_counted_in_engine`): the atoms' cut, the
    group of each of its rows, and how the output is recorded."""

    rows: InEngineRows
    universe: Any
    split: Split
    frame: pd.DataFrame  # the engine's labels, one row per (atom, label)
    keys: list[str]  # the table's keys
    ids: np.ndarray  # per row of ``frame``, its group (-1: outside the table)
    index: pd.Index  # the groups' labels (the table's keys)
    combined: list[Any] | None  # disjoint indicators side by side: the indicators
    recorded_as: tuple[pd.Index, np.ndarray] | None  # (the engine's labels, their groups) for them


def _counted_in_engine(place: Placer, entry: Any, engine_rows: InEngineRows, flagged: Any) -> _EngineGroups | None:
    """The groups of a table (or of the population ``flagged`` it publishes) whose rows stay in
    their engine, cut into the universe's atoms there; None when they cannot be counted."""
    if flagged is not None:  # (the rows at its indicator's level or other value: counted there too)
        found = engine_rows.variants.get(flagged) \
            if isinstance(flagged, str) or _is_other(flagged) or _is_combined(flagged) else None
        # (its groups, from the facts, check the engine's count; under a declared unit the facts
        # count units, not rows: the engine's count is taken, as for the table's own cells)
        if found is None or (found.groups is None and not found.units):
            return None
        engine_rows = found
    # (disjoint indicators side by side: one population over (group, indicator), the engine's
    # key VARIANT_KEY telling each row's indicator, as by rows in :func:`_population_rows`)
    combined = list(flagged[1]) if _is_combined(flagged) else None
    keys = [k for k in engine_rows.keys if k != VARIANT_KEY] if combined is not None else list(engine_rows.keys)
    if not set(keys) <= set(entry.flat.dims) or (combined is not None and VARIANT_KEY not in engine_rows.keys):
        return None
    placed_in_engine = place(engine_rows, engine_rows.keys)
    if placed_in_engine is None:
        return None
    universe, split = placed_in_engine
    frame = split.labels
    # the groups are those of the rows in the table only: a label seen only outside it would be
    # a group of no rows that no cell shows, and every margin holding it would count as
    # unpublished (differencing at coarser levels missed: 4 cells found by rows, 1 here)
    inside = np.flatnonzero(split.inside)
    ids = np.full(len(frame), -1, dtype=np.int64)
    if keys:
        ids_in, index = _compute_group_ids(frame.iloc[inside].reset_index(drop=True), keys)
        ids[inside] = ids_in
    else:
        ids[inside], index = 0, pd.Index(["all"])
    recorded_as = None
    if combined is not None:
        member = pd.to_numeric(frame[VARIANT_KEY].iloc[inside], errors="coerce").to_numpy(dtype=float)
        if not np.isin(member, np.arange(len(combined))).all():
            return None  # (a row at no indicator's level inside: not the population asked for)
        ids[inside] = ids[inside] * len(combined) + member.astype(np.int64)
        # (the engine's labels include each row's indicator: the output is recorded under them,
        # each label's group that of its (group, indicator))
        ids_all, index_all = _compute_group_ids(frame.iloc[inside].reset_index(drop=True), list(engine_rows.keys))
        group_of_label = np.full(len(index_all), -1, dtype=np.int64)
        group_of_label[ids_all] = ids[inside]
        recorded_as = (index_all, group_of_label)
    return _EngineGroups(engine_rows, universe, split, frame, keys, ids, index, combined, recorded_as)


def _base_draft(place: Placer, entry: Any, positions: np.ndarray, threshold: int, flagged: Any = None,
                kept_elsewhere: KeptElsewhere | None = None) -> Draft | None:
    """The rows and groups of a displayed table, placed in a universe (what it publishes is
    filled in by :func:`draft`, per hidden pattern)."""
    engine_rows = getattr(getattr(entry, "source", None), "rows", None)
    split: Split | None = None
    if isinstance(engine_rows, InEngineRows):
        # the rows stay in the engine: its atoms are counted there, one row per atom comes back
        counted = _counted_in_engine(place, entry, engine_rows, flagged)
        if counted is None:
            return None
        engine_rows, universe, split = counted.rows, counted.universe, counted.split
        frame, keys, ids, index = counted.frame, counted.keys, counted.ids, counted.index
        combined, recorded_as = counted.combined, counted.recorded_as
    else:
        recorded_as = None
        grouped = _grouped_rows(entry)
        if grouped is None:
            return None
        frame, keys, ids, index = grouped
        rows_of = _population_rows(entry, frame, ids, flagged)
        if rows_of is None:
            return None
        ids, combined = rows_of
        # the variables it sums (each read once: an indicator test converts a whole column)
        averaged = _averaged_variables(entry, frame) if flagged is None else []
        var_of_masking = _summed_variable(entry, averaged)
        masking = None if kept_elsewhere is None or var_of_masking is None \
            else _masks_earlier_rows(entry, frame, var_of_masking, kept_elsewhere)
        if masking is not None:
            ids = np.where(masking[0], ids, -1)
    flat = entry.flat
    # the group of each entry cell (margins excluded), then of each displayed cell
    margin = np.asarray(entry.evidence.is_margin, dtype=bool)
    if keys:
        canon = _canon_index(index, keys)
        arrays = [flat.dims[k] for k in keys]
        wanted = pd.MultiIndex.from_arrays(arrays) if len(keys) > 1 else pd.Index(arrays[0], dtype=object)
        group_of_entry = canon.get_indexer(wanted) if canon.is_unique else np.full(len(flat), -1)
        labels = [tuple(t) if isinstance(t, tuple) else (t,) for t in canon]
    else:
        group_of_entry = np.zeros(len(flat), dtype=np.int64)
        labels = [()]
    group_of_entry = np.where(margin, -1, group_of_entry)
    if combined is not None:
        k = len(combined)
        j_of_cell = _variant_of_cells(entry, combined)
        group_of_entry = np.where((group_of_entry >= 0) & (j_of_cell >= 0), group_of_entry * k + j_of_cell, -1)
        labels = [(*lab, f"column {j + 1}") for lab in labels for j in range(k)]
        keys = [*keys, "__variant"]
    elif flagged is not None:
        # an indicator's rows are published by its means or sums (with the group's count): a group
        # is published while such a cell is shown, hidden when they are (its count may stay)
        j_of_cell = _variant_of_cells(entry, [flagged])
        if (j_of_cell >= 0).any():
            group_of_entry = np.where(j_of_cell >= 0, group_of_entry, -1)
    display_group = np.where(positions >= 0, group_of_entry[np.maximum(positions, 0)], -1)
    # rows of groups the table does not have (keys the call dropped: crosstab, pivot_table and
    # value_counts leave out missing keys) are outside it: a group counted here but shown
    # nowhere would hide the difference those rows make (red team: 37 - 35 = 2 at 'pass')
    in_table = np.zeros(len(labels), dtype=bool)
    in_table[group_of_entry[group_of_entry >= 0]] = True
    ids = np.where((ids >= 0) & in_table[np.clip(ids, 0, max(len(labels) - 1, 0))], ids, -1) \
        if len(labels) and not in_table.all() else ids
    # what an attacker knows of the margins: those displayed (margins=True), and sums of published
    # cells. (The per-table engine assumes every margin known; across tables that would charge a
    # new table for margins nobody can compute.)
    margins_public = bool(((positions >= 0) & margin[np.maximum(positions, 0)]).any())
    n_groups = len(labels)
    values: tuple[edits.Values, ...] = ()
    engine_values: tuple[dict[str, tuple[str, np.ndarray]], tuple[str, ...]] = ({}, ())
    if split is not None:  # one new atom per row of the engine's counts
        group_of = np.where(in_table, np.arange(n_groups), -1) if n_groups else np.zeros(0, dtype=np.int64)
        split, group = one_atom_per_group(split, ids)
        parent, atom_size = split.parent, split.atom_size
        engine_values = (split.values, split.edited)
        if recorded_as is not None:  # (disjoint indicators side by side: labels with each row's indicator)
            index, group_of = recorded_as[0], np.where(recorded_as[1] >= 0, group_of[recorded_as[1]], -1)
        codes = split.atoms(index, group_of, group)
    else:
        placed_keys = [k for k in keys if k != "__variant"]
        if masking is None:
            placed = place(frame, placed_keys)
        else:  # (the rows it kept, under the name of the column it masks: they agree with those rows)
            kept, masked_name = masking
            placed = place(frame[[var_of_masking]].iloc[np.flatnonzero(kept)].set_axis([masked_name], axis=1),
                           placed_keys)
            if placed is not None:
                rows = np.full(len(frame), -1, dtype=np.int64)
                rows[kept] = placed[1]
                placed = (placed[0], rows)
        if placed is None:
            return None
        universe, rows = placed
        if flagged is None and masking is None:
            ids = _rows_left_out_by_values(var_of_masking, frame, ids, universe, rows)
            values, ids, unreadable = edits.edited_values(universe.published, frame, averaged, ids, rows)
            engine_values = ({}, unreadable)
        universe.key_columns.update(k for k in keys if k in frame.columns)
        if rows_in_order(rows, universe.n):  # (the frame is the universe: no scatter of its rows)
            g_u = np.asarray(ids, dtype=np.int64)
        else:
            g_u = np.full(universe.n, -1, dtype=np.int64)
            ok = (rows >= 0) & (ids >= 0)
            g_u[rows[ok]] = ids[ok]
        codes, parent, group, atom_size = refine(universe.row_atom, universe.atom_size, g_u, n_groups)
    size = np.bincount(group[group >= 0], weights=atom_size[group >= 0], minlength=n_groups).astype(np.int64)
    # (a population the table publishes besides its cells, or the sums of a two-valued coding:
    # no cell is its count, its groups are checked against the facts alone)
    cells_counted = not (engine_rows.variant or (engine_rows.flag is not None and engine_rows.level != 1.0)) \
        if split is not None else False
    if split is not None and not ((not cells_counted or counts_agree(entry, group_of_entry, size,
                                                                      engine_rows.flag is not None))
                                  and groups_agree(engine_rows, split)):
        return None  # (not linked: the caller says so, and the table is review beside others)
    pop = Population(out_id="this table", title="", universe=universe, keys=tuple(keys), group=group,
                     labels=labels, size=size, published=np.zeros(n_groups, bool),
                     hidden_shown=np.zeros(n_groups, bool), threshold=threshold,
                     margins_public=margins_public)
    display_margin = np.flatnonzero((positions >= 0) & margin[np.maximum(positions, 0)])
    pop.totals_of, all_told = share_totals.levels_told(entry, pop.keys)
    pop.margins_public = pop.margins_public or all_told
    pop.counted = distinct_counted(entry)
    pop.tells = measures_of(entry)
    found = _unit_of(entry, pop.counted, split, universe, frame, threshold)
    if found is None:
        return None  # (a declared unit the engine cannot count: not linked, review; never compared in rows)
    unit, declared, units = found
    groups = displayed_margin_groups(pop, entry.flat, positions, display_margin, getattr(entry, "margin_label", None)) \
        if len(display_margin) else []
    return Draft(pop, universe, universe.version, codes, parent, atom_size, display_group, display_margin, unit,
                 declared, values, *engine_values, engine_units=units, display_margin_groups=groups)


def _unit_of(entry: Any, counted: Hashable | None, split: Split | None, universe: Any, frame: pd.DataFrame,
             threshold: int | None = None) -> tuple[Hashable | None, bool, EngineUnits | None] | None:
    """(the unit a table is linked in, whether it was declared, its units counted in the engine):
    the declared unit, else the column the table counts distinct values of (:func:`distinct_counted`);
    for rows left in their engine, their units counted there when asked (``engine_units``), by rows
    the universe's hashes of the column. None: a declared unit the engine cannot count (the table is
    not linked, and review: never compared in rows)."""
    unit = getattr(entry, "unit", None)
    declared = unit is not None
    unit = unit if declared else counted
    units = units_of_split(split, unit, declared=declared, threshold=threshold) if split is not None else None
    if declared and split is not None and units is None:
        return None
    if units is None:
        unit = unit if unit is not None and len(universe.hashes.get(unit, ())) and unit in frame.columns else None
    return unit, declared, units


def distinct_counted(entry: Any) -> Hashable | None:
    """The column whose distinct values the table counts (``nunique``), else None.

    Why: such a table counts people (or firms, households) while its rows may be episodes.
    Without a unit declared, linking judged the groups of rows that several outputs separate
    together by their rows: 8 episode rows of 2 women in district C made a common cell of 8,
    not small, and distinct people by sex for everyone (37), A or C (22) and B or C (17) told
    22 + 17 − 37 = 2 women at ``suppressed`` (red team, round 4). The counted column is the
    table's unit for linking against outputs that count the same column's distinct values
    (:meth:`Draft.units_against`): differences and common groups are then also counted in
    them. Not against other outputs: distinct ages are no people, and counting a filter's
    difference in ages blocked ordinary tables. A table with other statistics beside its
    distinct counts (``agg(n=("person", "nunique"), rows=("person", "size"))``) counts that
    column too. Distinct counts of several columns (people and households side by side): the
    column with the most distinct values in the table's cells, the finest units (it was None,
    and the table was compared in rows: 22 + 17 − 37 gave C's two women at ``pass``, red team
    of stop 58, F3c); the others are compared in rows (docs/known-gaps.md).
    """
    ev = getattr(entry, "evidence", None)
    if ev is None:
        return None
    inner = ~np.asarray(ev.is_margin, dtype=bool)
    stats = np.asarray(ev.stat, dtype=object)[inner]
    names = np.asarray(ev.var, dtype=object)[inner]
    values = np.nan_to_num(np.asarray(ev.value, dtype=float)[inner])
    counted: dict[Hashable, float] = {}
    for x, st, v in zip(names, stats, values, strict=True):
        if str(st) == "nunique" and x is not None:
            counted[x] = counted.get(x, 0.0) + float(v)
    if not counted:
        return None
    return max(sorted(counted, key=str), key=lambda x: counted[x])  # (ties: the first by name)


def too_many_rows(entry: Any) -> bool:
    """Whether the rows behind a table are more than linking reads (``MAX_LINKED_ROWS``): it is
    then compared with nothing, and ``Linker.unlinked_note`` says so."""
    source = getattr(entry, "source", None)
    frame = None if source is None else (source.frame if source.frame is not None else getattr(source, "rows", None))
    return isinstance(frame, pd.DataFrame | pd.Series) and len(frame) > row_limits.MAX_LINKED_ROWS


def _grouped_rows(entry: Any) -> tuple[pd.DataFrame, list[str], np.ndarray, pd.Index] | None:
    """The rows behind a table and the group of each (frame, keys, group id per row, group
    labels); None when they are unknown, too many, or do not match the table's dimensions."""
    source = getattr(entry, "source", None)
    if source is None:
        return None
    reaggregated = getattr(source, "rows", None)
    if isinstance(reaggregated, tuple) and reaggregated and reaggregated[0] == "reaggregate":
        source = _compose(source, *reaggregated[1:])
        if source is None:
            return None
    frame = source.frame if source.frame is not None else getattr(source, "rows", None)
    if isinstance(frame, pd.Series):
        frame = _as_frame(frame)
    if not isinstance(frame, pd.DataFrame) or len(frame) > row_limits.MAX_LINKED_ROWS or len(frame) == 0:
        return None
    keys = [str(k) for k in (source.keys or [])]
    ids, index = getattr(source, "ids", None), getattr(source, "index", None)
    if ids is None:
        if keys and not all(k in frame.columns for k in keys):
            return None
        ids, index = _compute_group_ids(frame, keys)
    else:  # (the table's call grouped the rows: the keys' fingerprints come from its labels)
        key_hashes_from_groups(frame, keys, ids, index)
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) != len(frame) or index is None:
        return None
    if not set(keys) <= set(entry.flat.dims):
        return None
    return frame, keys, ids, index


def _population_rows(entry: Any, frame: pd.DataFrame, ids: np.ndarray, flagged: Any
                     ) -> tuple[np.ndarray, list[Any] | None] | None:
    """The group of each row in the population ``flagged`` selects (-1: outside it), and for a
    ``("combined", variants)`` population its variants; None when it cannot be told."""
    combined: list[Any] | None = None
    if flagged is None:
        ids = _restrict_to_variable(entry, frame, ids)
    elif isinstance(flagged, tuple) and flagged[:1] == ("combined",):
        # disjoint variants as one population over (group, variant): sums across them
        combined = list(flagged[1])
        member = np.full(len(frame), -1, dtype=np.int64)
        for j, v in enumerate(combined):
            mask = _variant_rows(frame, v)
            if mask is not None and _is_kept(v):
                # (a row two copies both keep holds the same value in both, a zero mostly: one
                # copy's is enough to tell their sums apart, the first)
                mask = mask & (member < 0)
            if mask is None or (mask & (member >= 0)).any():
                return None  # overlapping rows: not one partition
            member[mask] = j
        ids = np.where((member >= 0) & (ids >= 0), ids * len(combined) + member, -1)
    elif isinstance(flagged, tuple) and flagged[:1] == ("known",):
        if flagged[1] not in frame.columns:
            return None
        ids = np.where(frame[flagged[1]].notna().to_numpy(), ids, -1)
    elif _is_kept(flagged):
        kept = _variant_rows(frame, flagged)
        if kept is None:
            return None
        ids = np.where(kept, ids, -1)
    elif _is_other(flagged):
        found = _indicator_rows(frame, flagged[1])
        if found is None:
            return None
        ids = np.where(found[2], ids, -1)
    else:
        at_level = _at_indicator_level(frame, flagged)
        if at_level is None:
            return None
        ids = np.where(at_level, ids, -1)
    return ids, combined


@dataclass
class _Composed:
    frame: Any
    keys: list[str]
    ids: np.ndarray
    index: pd.Index
    rows: Any = None


def _compose(source: Any, entry: Any, positions: np.ndarray) -> _Composed | None:
    """A re-aggregation of a captured count table (``counts.groupby(level=0).sum()``, districts
    summed into regions) covers the rows of the cells it adds: each row of the original
    frame goes to the new group of its original cell."""
    original = getattr(entry, "source", None)
    ids = getattr(source, "ids", None)
    inner = getattr(original, "rows", None)
    if isinstance(inner, tuple) and inner and inner[0] == "reaggregate" and getattr(original, "frame", None) is None:
        # a re-aggregation of a re-aggregation (three levels, red team stop 49: not linked, both pass)
        original = _compose(original, *inner[1:])
    if original is None or ids is None or getattr(original, "ids", None) is None or original.index is None:
        return None
    frame = original.frame if original.frame is not None else getattr(original, "rows", None)
    if frame is None or len(positions) != len(ids):
        return None
    keys = [str(k) for k in (original.keys or [])]
    if not keys or not set(keys) <= set(entry.flat.dims):
        return None
    canon = _canon_index(original.index, keys)
    arrays = [entry.flat.dims[k] for k in keys]
    wanted = pd.MultiIndex.from_arrays(arrays) if len(keys) > 1 else pd.Index(arrays[0], dtype=object)
    group_of_cell = canon.get_indexer(wanted) if canon.is_unique else np.full(len(entry.flat), -1)
    new_of_old = np.full(len(canon), -1, dtype=np.int64)
    ok = (positions >= 0) & (np.asarray(ids) >= 0)
    old_groups = group_of_cell[np.maximum(positions, 0)]
    ok &= old_groups >= 0
    new_of_old[old_groups[ok]] = np.asarray(ids, dtype=np.int64)[ok]
    row_ids = np.asarray(original.ids, dtype=np.int64)
    composed = np.where(row_ids >= 0, new_of_old[np.maximum(row_ids, 0)], -1)
    if isinstance(frame, pd.Series):
        frame = _as_frame(frame)
    return _Composed(frame=frame, keys=list(source.keys), ids=composed, index=source.index)


#: the column of an unnamed Series's values in the frame linking reads (:func:`_as_frame`)
UNNAMED = "__value__"


def _as_frame(series: pd.Series) -> pd.DataFrame:
    """A Series as a one-column frame, with the labels its rows had before a ``reset_index``
    (linking runs past the capture's wrappers, which carry them on the analyst's calls)."""
    frame = series.to_frame(name=series.name if series.name is not None else UNNAMED)
    row_origins.same_rows(frame, series)
    return frame


def _restrict_to_variable(entry: Any, frame: pd.DataFrame, ids: np.ndarray) -> np.ndarray:
    """A table of one variable's statistics (no row counts) covers the rows where it is known."""
    ev = entry.evidence
    stats = set(np.asarray(ev.stat).astype(str).tolist())
    if stats & {"size"}:
        return ids
    variables = {v for v in np.asarray(ev.var, dtype=object).tolist() if v is not None}
    if len(variables) != 1:
        return ids
    (var,) = variables
    if var not in frame.columns:
        return ids
    found = _indicator_rows(frame, var) if stats <= {"sum", "mean"} else None  # (once: a whole column)
    if stats <= {"sum"} and found is not None and found[1] == 0.0:
        # the sum of an indicator (0/1 flag, boolean, a 0/k coding) counts the rows at its
        # attribute level: those rows are the table's population, as for a count of them (red
        # team: sum(flag) by sex, then a count of flagged rows outside district C). A coding
        # whose other value is not 0 (1/2) sums every known row in too: those are its
        # population, the flagged ones a variant (:func:`indicator_variables`)
        return np.where(found[0], ids, -1)
    known = frame[var].notna().to_numpy()
    if stats <= {"sum", "mean"} and found is None:
        # a masked copy of another column (``income.where(district != "C", 0)``): its sums are
        # those of that column over the rows where it kept its values (see :mod:`.masked`)
        kept = masked.kept_rows(frame, var)
        if kept is not None:
            known = known & kept
    return np.where(known, ids, -1)


def _masks_earlier_rows(entry: Any, frame: pd.DataFrame, var: Hashable, kept_elsewhere: KeptElsewhere
                        ) -> tuple[np.ndarray, Hashable] | None:
    """(the rows a table of one variable's sums or means covers, the column it masks) when that
    variable (``var``, :func:`_summed_variable`) masks a column of rows linking saw before (see
    :mod:`.masked`): a Series with no other column of its own rows to compare it with
    (``income.where(c, 0).groupby(df.sex).sum()``); None otherwise."""
    keys = {str(k) for k in (getattr(entry.source, "keys", None) or [])}
    if any(c != var and str(c) not in keys and pd.api.types.is_numeric_dtype(frame[c].dtype) for c in frame.columns):
        return None  # (other columns of its rows: compared with those, :func:`_restrict_to_variable`)
    return kept_elsewhere(frame, var)


def measures_of(entry: Any) -> frozenset[tuple[str, str]]:
    """What the cells of a table tell of their groups: (statistic, variable) pairs, a group's count
    of rows one measure however it was asked for (``size``, ``count``, a crosstab).

    Why (red team, stop 50): a cell whose rows an earlier output published is public only when
    that output told the same figure of them. Medians by district (C hidden, no secondary) made
    A's and B's *counts* public in the count table shown next, which then hid C alone; its shares
    gave the total (40 / 0.547945 = 73) and C = 73 − 40 − 30 = 3, all three tables cleared."""
    ev = entry.evidence
    out = set()
    for stat, var in set(zip(np.asarray(ev.stat).astype(str).tolist(), np.asarray(ev.var, dtype=object).tolist(),
                             strict=True)):
        # (a count of a variable's values counts the rows holding one, which the population says)
        out.add(("count", "") if stat in ("size", "count") else (stat, "" if var is None else str(var)))
    # two of a variable's count, sum and mean tell the third (n = sum / mean)
    for var in {v for s_, v in out if s_ in ("sum", "mean")}:
        told = {s_ for s_ in ("count", "sum", "mean") if (s_, "" if s_ == "count" else var) in out}
        if len(told) >= 2:
            out |= {("count", ""), ("sum", var), ("mean", var)}
    return frozenset(out)


def _summed_variable(entry: Any, averaged: list[Hashable]) -> Hashable | None:
    """The variable of a table of one variable's sums or means alone (not an indicator, a column
    of its frame: ``averaged``, :func:`_averaged_variables`), else None."""
    ev = entry.evidence
    stats = set(np.asarray(ev.stat).astype(str).tolist())
    if len(set(np.asarray(ev.var, dtype=object).tolist())) != 1 or not stats or not stats <= {"sum", "mean"}:
        return None
    return averaged[0] if len(averaged) == 1 else None


def _rows_left_out_by_values(var: Hashable | None, frame: pd.DataFrame, ids: np.ndarray, universe: Universe,
                             rows: np.ndarray) -> np.ndarray:
    """``ids`` without the rows of a table of one variable's sums or means (``var``) where that
    variable, a masked copy of another column the universe holds for the same rows, overwrote its
    values (:func:`.masked.kept_at_rows`).

    Why (red team, 2026-12-05): a masked copy summed from a frame without the income
    (``d.drop(columns="income").assign(k=...)``, a merge back) has nothing of its own rows to be
    compared with; the sums of the income by sex, then of the copy, told C's one man's income.
    The same column edited (``df2.loc[mask, "income"] = 0``) is compared with the values a table
    showed, not here (:mod:`.edits`)."""
    if var is None or var in universe.hashes:
        return ids  # (the column itself, as linking saw it, or that column edited: not compared)
    found = (rows >= 0) & (ids >= 0)
    if not found.any():
        return ids
    kept = masked.kept_at_rows(universe, np.where(found, rows, -1), frame_hash(frame, var), skip=var)
    return ids if kept is None else np.where(kept, ids, -1)


#: statistics whose tables of edited values differ by what the edit changed: sums, means and the
#: spread (a variance of a copy with one value moved is linear in it, red team)
MOMENTS = ("sum", "mean", "var", "std", "sem")


def _averaged_variables(entry: Any, frame: pd.DataFrame) -> list[Hashable]:
    """The columns of ``frame`` whose sums or means a table shows (beside any other statistic:
    ``describe``, a median, a count), no indicator among them (an indicator's sums are its
    flagged rows' count, linked as rows)."""
    ev = entry.evidence
    stats = np.asarray(ev.stat).astype(str)
    variables = np.asarray(ev.var, dtype=object)
    out = []
    for var in dict.fromkeys(v for v, st in zip(variables.tolist(), stats.tolist(), strict=True)
                             if st in MOMENTS):
        if var is None and list(frame.columns) == [UNNAMED]:
            var = UNNAMED  # (an unnamed Series: ``np.where(...)``, a product with a mask)
        if var in frame.columns and _indicator_rows(frame, var) is None:
            out.append(var)
    return out


def _compute_group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index]:
    found = group_ids(frame, keys)
    if found is not None:
        return found
    gb = frame.groupby(keys, observed=True, dropna=False, sort=False)
    grouper = gb._grouper
    ids = grouper.ids if hasattr(grouper, "ids") else grouper.group_info[0]
    return np.asarray(ids, dtype=np.int64), grouper.result_index


def _canon_index(index: pd.Index, keys: list[str]) -> pd.Index:
    if isinstance(index, pd.MultiIndex):
        names = [str(n) for n in index.names]
        order = [names.index(k) if k in names else i for i, k in enumerate(keys)]
        return pd.MultiIndex.from_arrays([canonical_labels(index.get_level_values(i)) for i in order])
    return pd.Index(canonical_labels(index), dtype=object)


# ------------------------------------------------------------------ indicator variables
def _variant_rows(frame: pd.DataFrame, variant: Any) -> np.ndarray | None:
    """The rows a variant population holds (see :func:`indicator_variables`)."""
    if isinstance(variant, tuple) and variant[:1] == ("known",):
        return frame[variant[1]].notna().to_numpy() if variant[1] in frame.columns else None
    if _is_kept(variant):
        kept = masked.kept_rows(frame, variant[1])
        return None if kept is None else kept & frame[variant[1]].notna().to_numpy()
    if _is_other(variant):
        found = _indicator_rows(frame, variant[1])
        return None if found is None else found[2]
    return _at_indicator_level(frame, variant)


def _is_kept(variant: Any) -> bool:
    """Whether ``variant`` is the rows where a masked copy keeps its column's values
    (``("kept", var)``, see :mod:`.masked`)."""
    return isinstance(variant, tuple) and variant[:1] == ("kept",)


def _is_combined(variant: Any) -> bool:
    """Whether ``variant`` is disjoint indicators side by side as one population
    (``("combined", variants)``, see :func:`indicator_variables`)."""
    return isinstance(variant, tuple) and variant[:1] == ("combined",)


def _is_other(variant: Any) -> bool:
    """Whether ``variant`` is the rows at an indicator's other value (``("other", var)``)."""
    return isinstance(variant, tuple) and variant[:1] == ("other",)


def _variant_of_cells(entry: Any, variants: list[Any]) -> np.ndarray:
    """Per entry cell, which variant its column publishes (-1: none)."""
    ev = entry.evidence
    cell_var = np.asarray(ev.var, dtype=object)
    cell_stat = np.asarray(ev.stat).astype(str)
    out = np.full(len(cell_var), -1, dtype=np.int64)
    for j, v in enumerate(variants):
        out[publishes_variant(cell_var, cell_stat, v) & (out < 0)] = j
    return out


def publishes_variant(cell_var: np.ndarray, cell_stat: np.ndarray, variant: Any) -> np.ndarray:
    """Per cell (its variable and statistic), whether it tells the rows of ``variant``.

    An indicator's rows: every statistic of the indicator but its count of known rows (a
    mean or sum times the count; a standard deviation and a median of a 0/1 flag give its
    mean too: sd² = p(1 − p)·n/(n − 1), the median says which root; red team: the mean hidden,
    C's unflagged woman from the sd and the median). ``("known", var)``: its counts."""
    known = isinstance(variant, tuple) and variant[:1] == ("known",)
    var = variant[1] if isinstance(variant, tuple) else variant
    same = np.fromiter((x == var for x in cell_var), dtype=bool, count=len(cell_var))
    if known:
        return same & (cell_stat == "count")
    return same & ~np.isin(cell_stat, ("count", "size", "nunique"))


def _at_indicator_level(frame: pd.DataFrame, var: Any) -> np.ndarray | None:
    """Rows at the attribute level of an indicator column (None: not an indicator)."""
    found = _indicator_rows(frame, var)
    return None if found is None else found[0]


def _indicator_rows(frame: pd.DataFrame, var: Any) -> tuple[np.ndarray, float, np.ndarray] | None:
    """(rows at the attribute level of an indicator column, its other value: 0 for a 0/1 flag,
    rows at that value), or None when the column is no indicator."""
    if var not in frame.columns:
        return None
    got = indicator_column(frame[var])
    if got is None:
        return None
    values, found = got
    return values == found[0], found[1], values == found[1]


def indicators_left_out(entry: Any) -> list[Any]:
    """The indicators of a table beyond :data:`MAX_INDICATORS`, whose rows are not linked (and,
    when its indicators make more sets whose rows never meet than are linked, those sets)."""
    rows = getattr(getattr(entry, "source", None), "rows", None)
    if isinstance(rows, InEngineRows):
        return list(rows.left_out)  # (the engine's capture decided, see InEngineRows.left_out)
    found = _indicators(entry)
    too_many = len(found) >= 2 and _disjoint_sets(entry, found[:MAX_INDICATORS]) is None
    return found[MAX_INDICATORS:] + ([SETS_LEFT_OUT] if too_many else [])


#: This display's sets of a table's indicators whose rows never meet (:func:`_disjoint_sets`), by entry.
_disjoint: dict[int, tuple[Any, list[tuple[Any, ...]] | None]] = {}


def _disjoint_sets(entry: Any, indicators: list[Any]) -> list[tuple[Any, ...]] | None:
    """The largest sets of ``indicators`` (two or more) whose rows never meet in the table's rows,
    each one population over (group, indicator) (``evidence.in_engine.disjoint_sets``; the engines
    count the same); None when there are too many to link. An indicator whose rows cannot be told
    meets every other (no set holds it)."""
    cached = _disjoint.get(id(entry))
    if cached is not None and cached[0] is entry:
        return cached[1]
    source = getattr(entry, "source", None)
    frame = None if source is None else (source.frame if source.frame is not None else getattr(source, "rows", None))
    masks = [_variant_rows(frame, v) if isinstance(frame, pd.DataFrame) else None for v in indicators]
    k = len(indicators)
    overlaps = np.ones((k, k), dtype=bool)
    for i in range(k):
        for j in range(i + 1, k):
            mi, mj = masks[i], masks[j]
            if mi is not None and mj is not None:
                overlaps[i, j] = overlaps[j, i] = bool((mi & mj).any())
    sets = disjoint_sets(overlaps)
    found = None if sets is None else [tuple(indicators[i] for i in members) for members in sets]
    _disjoint[id(entry)] = (entry, found)
    return found


def indicator_variables(entry: Any) -> list[Any]:
    """Indicator variables whose flagged rows a table publishes *besides* its own population.

    A mean of a 0/1 flag times the group's count (shown beside it, or published elsewhere)
    is the count of the flagged rows; so is a sum of the flag in a table that also counts
    rows. Those flagged rows are a second population of the same output, linked like a
    count of them (red team: count and avg(flag) by sex, then the flagged count outside one
    district differs by one person). A table of the flag's sums alone is already linked as
    the flagged rows (:func:`_restrict_to_variable`); the sums of a coding whose other value is
    not 0 (1/2) are n + n₂: its known rows are its population and its flagged rows one more
    (red team: 1/2 sums outside C, then the flag's sums outside C: C's one man by subtraction).
    """
    source = getattr(entry, "source", None)
    if isinstance(getattr(source, "rows", None), InEngineRows):
        return list(source.rows.variants)  # (made by the engine's capture, counted there)
    indicators = _indicators(entry)[:MAX_INDICATORS]
    out = list(indicators)
    if len(indicators) >= 2:
        # side by side, disjoint variants add up (district A and B beside each other: their sum
        # against a total published elsewhere gives C); one population over (group, variant) for
        # each largest set of them whose rows never meet (one that overlaps, a flag beside a
        # partition of A under 50, A over 50 and B, dropped the set of all: C at pass, red team)
        out += [("combined", members) for members in _disjoint_sets(entry, indicators) or []]
    # the rows at each indicator's other value are published too: the table's (known) rows less
    # the flagged ones (red team: a count of the unflagged by sex, then a count and avg(flag)
    # outside C: 23 - 22 = C's one unflagged woman; and a 1 = yes / 2 = no coding's flagged
    # rows are those at 1, its "other" value)
    out += [("other", v) for v in indicators if not isinstance(v, tuple)]
    # the sums of a masked copy beside other columns: the rows where it kept its values (they
    # overlap the indicators', so they are no part of the combined population above); two or more
    # side by side are one more (kept in A, kept in B, beside the income: total - A - B = C, red team)
    kept = _masked_variables(entry)
    return out + kept + ([("combined", tuple(kept))] if len(kept) >= 2 else [])


def _masked_variables(entry: Any) -> list[Any]:
    """``("kept", var)`` for each variable whose sums or means a table shows beside other
    columns and that is a masked copy of another column of its rows (see :mod:`.masked`; a
    table of that variable alone takes those rows as its population, :func:`_restrict_to_variable`)."""
    ev = getattr(entry, "evidence", None)
    source = getattr(entry, "source", None)
    frame = None if source is None else (source.frame if source.frame is not None else getattr(source, "rows", None))
    if ev is None or not isinstance(frame, pd.DataFrame):
        return []
    stats = np.asarray(ev.stat).astype(str)
    variables = np.asarray(ev.var, dtype=object)
    named = {v for v in variables.tolist() if v is not None and v != ""}
    if len(named) == 1 and set(stats.tolist()) <= {"sum", "mean"}:
        return []  # (one variable's sums or means: its population is those rows already)
    found: dict[Any, tuple[np.ndarray, Hashable, int]] = {}
    for var in dict.fromkeys(v for v, st in zip(variables.tolist(), stats.tolist(), strict=True)
                             if v is not None and st in ("mean", "sum")):
        if var in frame.columns and _indicator_rows(frame, var) is None:
            masks = masked.masking(frame, var)
            if masks is not None:
                found[var] = masks
    # over fewer than five rows two columns mask each other (income beside its copy set to 0 in C:
    # income "wrote" C's three incomes over the copy's zeros): the copy is the one that wrote fewer
    # values (its zeros), not the income, whose cells were hidden too
    return [("kept", var) for var, (_, other, n) in found.items()
            if not (other in found and found[other][1] == var and found[other][2] < n)]


def _indicators(entry: Any) -> list[Any]:
    """A pandas table's indicators (see :func:`indicator_variables`): the variables of its means
    and sums that are indicators, then ``("known", var)`` for its counts of a variable."""
    ev = getattr(entry, "evidence", None)
    source = getattr(entry, "source", None)
    if ev is None or source is None:
        return []
    if isinstance(getattr(source, "rows", None), InEngineRows):
        return []  # (the engine's capture made its populations: see indicator_variables)
    frame = source.frame if source.frame is not None else getattr(source, "rows", None)
    if not isinstance(frame, pd.DataFrame):
        return []
    stats = np.asarray(ev.stat).astype(str)
    variables = np.asarray(ev.var, dtype=object)
    named = {v for v in variables.tolist() if v is not None and v != ""}
    one_variable = len(named) == 1 and "size" not in set(stats.tolist())
    only_sums = set(stats.tolist()) <= {"sum"} and one_variable
    out: list[Any] = []
    for var in dict.fromkeys(v for v, st in zip(variables.tolist(), stats.tolist(), strict=True)
                             if v is not None and st in ("mean", "sum")):
        if var not in frame.columns:
            continue
        found = _indicator_rows(frame, var)
        if found is not None and not (only_sums and found[1] == 0.0):  # (see _restrict_to_variable)
            out.append(var)
    # a count of a variable counts the rows where it is known: beside other columns (a
    # filter inside the aggregation, polars ``col.filter(cond).count()``), a population too
    for var in dict.fromkeys(v for v, st in zip(variables.tolist(), stats.tolist(), strict=True)
                             if v is not None and v != "" and st == "count"):
        if one_variable or var not in frame.columns or var in out:
            continue
        try:
            if frame[var].isna().any():
                out.append(("known", var))
        except (TypeError, ValueError):
            continue
    return out
