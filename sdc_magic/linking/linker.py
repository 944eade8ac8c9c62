"""The session's linking memory: the populations of earlier outputs, grouped by universe.

A :class:`Linker` places each displayed table's rows in a universe (:mod:`.universes`),
drafts the population it publishes (:mod:`.populations`), compares it with the earlier
populations (:mod:`.differencing`), and records it once the table is shown. Memory is
capped (``MAX_BYTES``, ``MAX_POPULATIONS``): the oldest populations go first. With a path
attached, the memory is saved beside the ledger after each record (:mod:`.persistence`)
and read back by the next kernel.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..capture.depth import own_work
from ..evidence import row_origins
from ..evidence import rows as row_limits
from ..evidence.in_engine import InEngineRows
from . import differencing, edits, engine_values, persistence
from .differencing import variant_cells
from .engine_units import unknown_note
from .identity import combine, with_index_columns
from .in_engine import EngineUniverse, Split, split
from .in_engine import place as place_in_engine
from .masked import kept_in_universes
from .names import output_order
from .populations import Draft, Population, clear_cache, hide_in_recorded, same_column, too_many_rows
from .populations import draft as draft_population
from .siblings import Siblings
from .universes import MAX_UNIVERSES, Universe, place

MAX_POPULATIONS = 200
MAX_BYTES = 256 * 2**20  # atoms, populations and row hashes of one session
SYNC_SAVE_BYTES = 16 * 2**20  # larger linking memories are saved in a background thread


class Linker:
    """Populations of earlier outputs, grouped by universe, with bounded memory."""

    def __init__(self) -> None:
        self.universes: list[Universe] = []
        self.path: Path | None = None
        self.notes: list[str] = []
        self._loaded = False
        self._saving = threading.Lock()
        self._pending: persistence.Snapshot | None = None
        self._writer: threading.Thread | None = None
        #: pairs of universes found not to overlap (see :func:`.universes.merge_overlapping`)
        self._merge_checked: set[tuple] = set()
        #: (output, columns of its rows) of populations let go to bound the memory (:meth:`unlinked_note`)
        self.forgotten: list[tuple[str, frozenset[str]]] = []
        #: outputs shown whose rows linking could not read (too many, unreadable): compared with nothing
        #: (:meth:`not_linked`); saved, so a later kernel knows of them too
        self.unlinked: list[str] = []
        #: the memories of the folder's other notebooks (:mod:`.siblings`), read before each table
        self.siblings = Siblings()
        #: the table counted in an engine whose populations :meth:`within_table` could not all compare
        #: (this display's, by id with the entry itself: an id alone may be a collected entry's; see
        #: :meth:`side_by_side_unchecked`)
        self._unchecked_side_by_side: dict[int, Any] = {}

    # list-like view of the populations (newest last)
    def _all(self) -> list[Population]:
        self._ensure_loaded()
        pops = [p for u in self.universes for p in u.populations]
        return sorted(pops, key=lambda p: output_order(p.out_id))

    def __len__(self) -> int:
        self._ensure_loaded()
        return sum(len(u.populations) for u in self.universes)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Any:
        return iter(self._all())

    def __getitem__(self, i: Any) -> Any:
        return self._all()[i]

    def nbytes(self) -> int:
        return sum(u.nbytes() for u in self.universes)

    def clear(self) -> None:
        """Forget every population (``%sdc`` reset, tests); the saved file is rewritten empty."""
        self.universes = []
        self.forgotten = []
        self.unlinked = []
        self.siblings = Siblings()
        self._loaded = True
        self.save()

    # -------------------------------------------------------- drafts
    @own_work
    def draft(self, out_id: str, title: str, entry: Any, positions: np.ndarray | None,
              hidden_flat: np.ndarray | None, threshold: int, flagged: Any = None) -> Draft | None:
        """The population a displayed table publishes; with ``flagged``, the rows at the
        attribute level of that indicator variable (see :func:`.populations.indicator_variables`)."""
        return draft_population(self._place, out_id, title, entry, positions, hidden_flat, threshold, flagged,
                                self._kept_elsewhere)

    def _kept_elsewhere(self, frame: pd.DataFrame, var: Any) -> np.ndarray | None:
        """Rows where ``var`` keeps a column of the earlier rows its labels name (:mod:`.masked`)."""
        self._ensure_loaded()
        return kept_in_universes([u for u in self.universes if not isinstance(u, EngineUniverse)], frame, var)

    def _place(self, frame: Any, keys: list[str]) -> tuple[Any, Any] | None:
        self._ensure_loaded()
        if isinstance(frame, InEngineRows):
            return self._place_in_engine(frame)
        view = with_index_columns(frame)
        if view is not frame:
            row_origins.remember(view, frame)  # (the labels its rows had before a reset_index, if any)
        # the other notebooks' universes take part as this kernel's earlier ones (:mod:`.siblings`)
        self.siblings.refresh(self.path, self.universes)
        self.notes.extend(self.siblings.notes)
        self.siblings.notes.clear()
        foreign = tuple(self.siblings.waiting())
        self.universes.extend(foreign)
        placed = None
        try:
            placed = place(self.universes, view, keys, self._merge_checked, self.forgotten, any_size=foreign)
            return placed
        finally:
            for u in foreign:
                if placed is not None and u is placed[0]:
                    self.siblings.take(u)  # a table of this kernel is in it: saved with this memory
                    u.hashes_saved = u.published_saved = False
                elif any(u is x for x in self.universes):
                    self.universes.remove(u)  # (still another notebook's only)
                else:
                    self.siblings.take(u)  # merged into one of this kernel's

    def _place_in_engine(self, rows: InEngineRows) -> tuple[EngineUniverse, Split] | None:
        """The engine universe of rows left in their engine, and the table's cut of its atoms.

        A universe whose base rows changed under its recorded outputs (``split`` finds counts
        that do not add up) is let go and a new one starts with this table; its outputs join
        ``unlinked``, so this table and every later one is ``review``, naming them. (Named only
        while no related output exists, as for outputs let go of for memory, one table was
        ``review`` and the next compared with the new universe alone: an ``INSERT`` between
        outputs, then everyone but C, gave C's 2 and 1 at ``pass``: red team.)
        """
        for _ in range(2):
            u = place_in_engine(self.universes, rows)
            try:
                cut = split(u, rows)
            except Exception:  # e.g. the connection busy with a streaming result: not linked (review, see not_linked)
                if not u.populations and u in self.universes:
                    self.universes.remove(u)
                return None
            if cut is not None:
                if len(self.universes) > MAX_UNIVERSES:
                    dropped = min((x for x in self.universes if x is not u), key=lambda x: (x.n, len(x.populations)))
                    self.universes.remove(dropped)
                    self.forgotten.extend((p.out_id, frozenset(map(str, dropped.hashes))) for p in dropped.populations)
                return u, cut
            self.universes.remove(u)
            self.unlinked.extend(p.out_id for p in u.populations if p.out_id not in self.unlinked)
        return None

    def unlinked_note(self, d: Draft) -> str | None:
        """Why a table with no related earlier output cannot be called compared with them all.

        The memory is bounded (``MAX_BYTES``, ``MAX_POPULATIONS``, ``universes.MAX_UNIVERSES``):
        once it let earlier outputs go, a table that finds no related one may be of their rows
        (sex 37/36, other data sets, then everyone but C 35/35). Such a table is ``review``,
        said in words, when its rows share a column name with the rows let go (the linker finds
        the same people by the columns they share, so a data set with none is not theirs); a
        session that never let anything go is unaffected.
        """
        if self.related(d) or not self.forgotten:
            return None
        columns = set(map(str, d.universe.hashes))
        lost = [out_id for out_id, cols in self.forgotten if cols & columns]
        if not lost:
            return None
        names = ", ".join(list(dict.fromkeys(lost))[-5:])
        return (f"linking memory let go of earlier outputs ({names}) to stay within its memory budget: this "
                "table could not be compared with them (review; show fewer data sets in one session, or "
                "restart the kernel for a new analysis)")

    def unidentified_note(self, d: Draft) -> str | None:
        """Why a table whose rows carry nothing but its own keys cannot be called compared.

        Rows are told apart by index labels or by the content of columns that are no key
        (keys may be recodes). A DuckDB result over ``SELECT sex FROM d`` (or over a one-column
        frame, or with only constant or repeated columns beside the key, ``SELECT sex, 1 AS one``)
        has neither: its rows land in a universe of their own, so after A by sex and B
        by sex, everyone by sex gave C's 2 and 1 away at ``pass`` (red team, round 4). Such a
        table is ``review`` when an earlier output's rows hold the same columns; the note says
        how to make the rows identifiable. So is a pandas table of its keys alone (a Series'
        ``value_counts``, a crosstab of two columns) beside rows read from an engine: its labels
        are nothing to compare them by.
        """
        if self.related(d):
            return None
        u = d.universe
        keys = set(map(str, u.key_columns))
        columns = keys & set(map(str, u.hashes))
        if not columns:
            return None
        # rows with labels of their own were compared by them with the universes that have labels
        # (an unrelated frame numbered alike); not with rows read from an engine, which have none
        # (a DuckDB count by sex outside C, then pandas' ``df.sex.value_counts()``: 37 − 35 = 2)
        # (rows read out of a file this session wrote are labelled anew by the reader: no labels)
        earlier = [p.out_id for v in self.universes if v is not u and _holds(v, u, columns)
                   and not (_labelled(u) and _labelled(v) and not _computed(u) and not _computed(v))
                   for p in v.populations]
        if not earlier:
            return None  # (first: the content test below reads every row)
        content = [c for c in u.hashes if str(c) not in keys]
        # columns a CTE, subquery or view computes (``income * 2 AS i2``) may be any function of
        # another output's rows: on either side they make no data set of its own (red team, stop 56)
        computed = [p.out_id for v in self.universes if v is not u and _computed(v)
                    and _holds(v, u, columns) for p in v.populations]
        if content and u.n >= 2:
            # other columns that tell rows apart make it a data set of its own; constant or
            # repeated ones (``1 AS one``, ``sex AS s2``, ``upper(sex)``: red team) do not
            combined = combine([u.hashes[c] for c in content])
            if 2 * len(pd.unique(combined)) >= len(combined):
                if not (_computed(u) or computed):
                    return None
                return _computed_rows_note(columns, list(dict.fromkeys(earlier if _computed(u) else computed)))
        names = ", ".join(list(dict.fromkeys(earlier))[-5:])
        how = "group the whole frame, e.g. df.groupby('sex').size() rather than df.sex.value_counts()" \
            if _labelled(u) else "compute it from the whole table, e.g. FROM d rather than FROM (SELECT sex FROM d)"
        return (f"the rows behind this table carry only its own key column(s) ({', '.join(sorted(columns))}), so "
                f"they cannot be matched with the rows of earlier outputs of the same column(s) ({names}): "
                f"not compared with them (review; {how})")

    def not_linked(self, out_id: str, entry: Any, notes: list[str]) -> str | None:
        """A table shown without a population (no draft): when linking could not read its rows
        (more than ``MAX_LINKED_ROWS``, or unreadable), remember it and say, when the session has
        shown other outputs, that it was compared with none of them (the caller makes it
        ``review``).

        Why: above the row limit linking silently stopped. Counts by region of 6,000,000 rows,
        then the same without 3 rare rows, were both ``pass``: 1,999,466 − 1,999,464 = 2 people
        (every engine; measured). Whether differencing was caught depended on the data's size.
        """
        said = any(str(n).startswith(row_limits.NOT_LINKED) for n in notes)
        uncounted = isinstance(getattr(getattr(entry, "source", None), "rows", None), InEngineRows)
        if not (said or uncounted or too_many_rows(entry)):
            return None
        if uncounted and not said:
            notes.append(f"{row_limits.NOT_LINKED} (its rows could not be counted in the engine)")
        elif not said:
            notes.append(row_limits.too_many_rows_note())  # (pandas: the engines say it themselves)
        self._ensure_loaded()
        earlier = [p.out_id for p in self._all()] + [o for o in self.unlinked if o != out_id]
        if out_id not in self.unlinked:
            self.unlinked.append(out_id)
            self.save()
        if not earlier:
            return None  # the first output: there is nothing yet to compare it with
        names = ", ".join(list(dict.fromkeys(earlier))[-5:])
        return (f"not compared with earlier outputs ({names}): review, a difference between them may single out "
                "a few people")

    def after_unlinked_note(self, d: Draft) -> str | None:
        """Why a table shown after an output that linking could not read is not called compared."""
        self._ensure_loaded()
        if not self.unlinked:
            return None
        names = ", ".join(self.unlinked[-5:])
        return (f"earlier outputs ({names}) cannot be compared with later tables (their rows were too many, could "
                "not be read, or changed since they were shown): this table was not compared with them (review)")

    def edited_note(self, d: Draft) -> str | None:
        """Why a table of sums is ``review``: the values of a variable it sums changed since the
        latest cleared table of their sums in a way linking cannot compare (counted in an engine,
        :mod:`.engine_values`; most rows changed in no common way, or after a restart, :mod:`.edits`)."""
        if not d.edited:
            return None
        # (a value the query computes, ``sum(income * 2)``, has an internal name: not shown)
        names = ", ".join(dict.fromkeys("a value computed in the query" if str(v).startswith("__sdc_") else repr(v)
                                        for v in d.edited))
        how = ("the engine cannot tell which rows changed" if isinstance(d.universe, EngineUniverse) else
               "most rows changed in no common way (not a rounding, unit change or shift), or after a restart "
               "only their fingerprints are kept")
        return (f"the values of {names} changed since an earlier table published their sums (an UPDATE, the "
                f"column computed again, or a copy of another column that differs from it on some rows): the "
                f"difference between the two tables tells the changed rows' values, "
                f"and {how}: not compared (review)")

    def units_note(self, d: Draft) -> str | None:
        """Why a table of distinct counts left in its engine was not compared in distinct units
        with earlier outputs counting the same column (:mod:`.engine_units`), when it was not."""
        return unknown_note(d.engine_units)

    def across_engine_note(self, d: Draft) -> str | None:
        """Why a table is not called compared with outputs whose rows live elsewhere.

        A universe counted in its engine (:mod:`.in_engine`) knows its rows by their base and
        conditions, not by their content: tables of the same people read as rows (pandas, polars,
        a DuckDB join) or over another base are not compared with it. When the other side has
        outputs whose columns share a name with this table's rows, this table is ``review``
        (the note names them), as for outputs let go of (:meth:`unlinked_note`).
        """
        u = d.universe
        mine = _plain_columns(u.hashes)
        kind = _identified_by(u)
        engine_here = getattr(u, "in_engine", False)
        others = [p.out_id for v in self.universes if v is not u and (engine_here or _identified_by(v) != kind)
                  and _plain_columns(v.hashes) & mine for p in v.populations]
        if not others:
            return None
        names = ", ".join(list(dict.fromkeys(others))[-5:])
        return (f"not compared with earlier outputs ({names}): their rows and this table's are identified in "
                "different ways (counted in an engine, fingerprinted by an engine, or read as values) and cannot be "
                "matched (review; for tables of more than 1M rows, write them as queries over the same table of one "
                "engine, without joins in FROM)")

    # -------------------------------------------------------- comparisons
    def related(self, d: Draft) -> list[Population]:
        return [p for p in d.universe.populations if p.universe is d.universe]

    def related_besides_repeats(self, d: Draft) -> list[Population]:
        """The related earlier outputs, without those that are this draft's output again (see
        :func:`_repeats`): what the joint audit compares the draft with.

        Why: after Restart & Run All (or a re-run in the folder) every table meets its own
        earlier run, restored from the linking memory; audited together, the two are the same
        equations twice, and the joint audit of a 25 × 20 × 10 table with its own earlier run
        solved 8,698 LPs (2.2 CPU s, more than the first display) to find nothing. Only an exact
        repeat is left out, so the system the joint audit solves is the same."""
        return [p for p in self.related(d) if not _repeats(p, d)]

    @own_work
    def findings(self, d: Draft, without: str | None = None) -> dict[str, Any]:
        """Differencing hits, hidden-elsewhere hits and derivable (public) groups of a draft;
        ``without``: an output left out (the draft's own, whose other populations are recorded)."""
        return differencing.findings(d, [p for p in self.related(d) if without is None or p.out_id != without])

    @own_work
    def differencing_reasons(self, d: Draft, positions: np.ndarray) -> dict[int, list[Any]]:
        """Displayed cells (flat index) to make primary, with reasons naming cells by their labels.

        The same table shown earlier is left out (see :meth:`published_elsewhere`): its hidden
        cells made every one of them primary again, so Restart & Run All hid more than the first
        run (12 cells instead of 8) and searched again; the joint audit still compares the two."""
        return differencing.differencing_reasons(d, [p for p in self.related(d) if not _same_table(p, d)])

    @own_work
    def published_elsewhere(self, d: Draft, measure: tuple[str, str] | None = None
                            ) -> dict[tuple[str, ...], set[tuple]]:
        """Cells of the new table whose rows are exactly a cell that earlier outputs published
        (see :func:`.differencing.published_elsewhere`).

        The same table shown earlier (same keys, same groups of rows: Restart & Run All, or a
        re-run in the folder) is left out: it would make the protection a different problem
        (its cells forced published), so the stored pattern of the earlier run was never
        recalled and every re-run searched again (5 CPU s for the seed table). Deterministic
        under the same rules, the protection finds the same pattern; under other rules the joint
        audit still holds this table to what the earlier one published."""
        return differencing.published_elsewhere(d, [p for p in self.related(d) if not _same_table(p, d)], measure)

    # -------------------------------------------------------- recording
    @own_work
    def commit(self, d: Draft, record: bool = True, settle: bool = True) -> None:
        """Remember a draft's population (``record=False``: a trial, see :meth:`within_table`).
        ``settle=False``: more populations of the same output follow, and may hide more of its
        cells; :meth:`settle` finishes the record once they are all in."""
        u = d.universe
        if d.version != u.version:
            return  # the universe changed under the draft (should not happen within one display)
        if not len(d.pop.size):
            # an output of no rows (a flag's sums where it is never at its level) publishes nothing
            # of any row: kept, its empty groups broke every later count of the base (red team of
            # stop 60: every later table not linked, review; or withheld, blocked)
            return
        u.row_atom = d.new_row_atom
        u.atom_size = d.atom_size
        for p in u.populations:
            p.group = p.group[d.parent]
        u.populations.append(d.pop)
        u.version += 1
        if isinstance(u, EngineUniverse):
            # (in a trial too, restored after it: the values' anchors follow the atoms' cut; left
            # behind, the next split of the trial indexed them with the new atoms and failed, and a
            # table's population went uncompared with the others it publishes side by side)
            u.values = engine_values.after(u.values, d.parent, d.engine_values, d.edited, d.pop.group >= 0)
        if not record or not settle:
            return
        _record_values(d)
        self._drop_duplicates(u, d.pop)
        self._bound()
        self.save()

    def settle(self, recorded: list[Draft]) -> None:
        """Finish recording an output's populations (committed with ``settle=False``).

        Why not at each commit: a population equal to an earlier one replaces it (the same table
        shown again), and a later population of the output can still hide cells of this one; an
        earlier table's record was dropped for a copy that then lost a published cell, and the
        session forgot that 37 women had been shown (red team)."""
        for d in recorded:
            if any(d.pop is p for p in d.universe.populations):
                _record_values(d)
                self._drop_duplicates(d.universe, d.pop)
        self._bound()
        self.save()

    def hide_more(self, recorded: list[Draft], hidden_flat: np.ndarray, blocked: bool = False) -> None:
        """Hide more cells of an output whose populations ``recorded`` were committed (a later
        population of the same output was audited with them and needed more hidden); saved by
        :meth:`settle`, which follows. ``blocked``: the output is withheld whole, so its
        populations publish nothing and, as a blocked output that is never recorded, ask no
        later output to hide anything."""
        for d in recorded:
            hide_in_recorded(d, hidden_flat)
            if blocked:
                d.pop.hidden_shown = np.zeros_like(d.pop.hidden_shown)

    def withdraw(self, out_id: str) -> None:
        """An output recorded but then not shown (a better answer whose joint audit hid more of
        it): its populations publish nothing and ask no later output to hide anything."""
        for p in self._all():
            if p.out_id == out_id:
                p.published = np.zeros_like(p.published)
                p.hidden_shown = np.zeros_like(p.hidden_shown)
                p.hidden_model = {}
                p.margins_hidden = {}
                p.margins_public = False
                p.totals_of = ()
                p.universe.version += 1
        self.save()

    @own_work
    def within_table(self, title: str, entry: Any, positions: np.ndarray, threshold: int,
                     variants: list[Any]) -> dict[int, list[Any]]:
        """Differencing between the populations one table publishes side by side.

        A table of counts per sex with the counts of district A and of district B beside them
        (polars ``filter`` inside ``agg``, SQL ``FILTER (WHERE …)``, means of flags) gives
        the rest (C) by subtraction: 37 − 20 − 15 = 2. Each variant (the flagged rows of each
        indicator, then the table's own rows) is compared with those drafted before it, as a
        later output would be; the universe is restored afterwards, so nothing is recorded.
        """
        # (a table counted in an engine drafts every population it publishes in one universe; one
        # that could not be, or landed in another, left the table uncompared side by side: red team,
        # a failed count let the base's record go mid-display, and the table passed, C's people
        # showing by subtraction. Its caller then makes the table review, see side_by_side_unchecked)
        in_engine = isinstance(getattr(getattr(entry, "source", None), "rows", None), InEngineRows)
        self._unchecked_side_by_side = {}  # (one table per display: only this one's is kept)
        first = self.draft("this table", title, entry, positions, None, threshold, flagged=variants[0])
        if first is None:
            if in_engine:
                self._unchecked_side_by_side[id(entry)] = entry
            return {}
        u = first.universe
        saved = (u.row_atom, u.atom_size, u.version, u.populations, [(p, p.group) for p in u.populations],
                 getattr(u, "values", None))
        out: dict[int, list[Any]] = {}
        try:
            u.populations = []  # only this table's populations take part
            for n, variant in enumerate(variants):
                d = first if n == 0 else self.draft("this table", title, entry, positions, None, threshold,
                                                    flagged=variant)
                if d is None or d.universe is not u:
                    if in_engine:
                        self._unchecked_side_by_side[id(entry)] = entry
                    continue
                if u.populations:
                    found = self.differencing_reasons(d, positions)
                    for i, reasons in variant_cells(found, entry, positions, variant).items():
                        out.setdefault(i, []).extend(reasons)
                self.commit(d, record=False)
        finally:
            u.row_atom, u.atom_size, u.version, u.populations = saved[:4]
            for p, group in saved[4]:
                p.group = group
            if isinstance(u, EngineUniverse):
                u.values = saved[5]
            clear_cache(display_ends=False)  # drafts made during the trial describe atoms that no longer exist
        return out

    def side_by_side_unchecked(self, entry: Any) -> str | None:
        """A note when :meth:`within_table` could not compare every population of ``entry`` (a
        table counted in an engine) with the others it publishes side by side; the caller makes
        the table ``review``."""
        if self._unchecked_side_by_side.get(id(entry)) is not entry:
            return None
        return ("the populations this table publishes side by side (its rows, its indicators' rows) "
                "could not all be counted in the engine and compared with each other: review")

    def _drop_duplicates(self, u: Universe, newest: Population) -> None:
        """The same table displayed again replaces its earlier record (it publishes nothing new)."""
        same = [p for p in u.populations if p is not newest and p.keys == newest.keys
                and len(p.labels) == len(newest.labels)
                and np.array_equal(p.size, newest.size) and np.array_equal(p.published, newest.published)
                and p.hidden_model == newest.hidden_model and p.margins_hidden == newest.margins_hidden
                and np.array_equal(p.group, newest.group)]
        if same:
            u.populations = [p for p in u.populations if not any(p is q for q in same)]

    def _bound(self) -> None:
        while len(self) > MAX_POPULATIONS or (self.nbytes() > MAX_BYTES and len(self) > 1):
            oldest = min((p for u in self.universes for p in u.populations), key=lambda p: output_order(p.out_id))
            oldest.universe.populations.remove(oldest)
            self.forgotten.append((oldest.out_id, frozenset(map(str, oldest.universe.hashes))))
        self.universes = [u for u in self.universes if u.populations or u is self.universes[-1]]

    # -------------------------------------------------------- persistence across kernel restarts
    def attach(self, path: Path | None) -> None:
        """Save to / load from ``path`` (next to the session ledger); None: memory only."""
        self.path = path
        self._loaded = False

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.path is None or self.universes:
            return
        try:
            self.universes = persistence.load(self.path)
            self.unlinked = persistence.load_unlinked(self.path)
        except Exception as exc:  # a broken file never stops checking: linking starts afresh
            self.notes.append(f"linking memory of earlier kernels could not be read ({type(exc).__name__})")
            self.universes = []

    def save(self) -> None:
        """Write the linking memory beside the ledger: at once when small, else in a background
        thread (the arrays are replaced, never changed in place, so a snapshot is consistent)."""
        if self.path is None:
            return
        # (another notebook's outputs read into this memory are that notebook's to save)
        snapshot = [(u, u.row_atom, u.atom_size, [(p, p.group) for p in u.populations if p.foreign is None])
                    for u in self.universes]
        if sum(u.nbytes() for u in self.universes) <= SYNC_SAVE_BYTES:
            self._write(snapshot)
            return
        with self._saving:
            self._pending = snapshot
            if self._writer is not None and self._writer.is_alive():
                return
            self._writer = threading.Thread(target=self._drain, name="sdc-magic-linking-save", daemon=True)
            self._writer.start()

    def _drain(self) -> None:
        while True:
            with self._saving:
                snapshot, self._pending = self._pending, None
            if snapshot is None:
                return
            self._write(snapshot)

    def _write(self, snapshot: persistence.Snapshot) -> None:
        path = self.path
        if path is None:
            return
        try:
            persistence.save(path, snapshot, list(self.unlinked))
        except Exception as exc:
            self.notes.append(f"linking memory could not be saved ({type(exc).__name__})")
            self.path = None


def _record_values(d: Draft) -> None:
    """What a cleared table showed of the variables it sums, in the cells it did not hide under
    its final pattern (:mod:`.edits`; nothing of a table ``review`` or blocked)."""
    u = d.universe
    if not d.values or not d.cleared or not isinstance(getattr(u, "published", None), dict):
        return
    for values in d.values:
        group = d.pop.group[u.row_atom[values.rows]]
        shown = (group >= 0) & d.pop.published[np.maximum(group, 0)]
        edits.record(u.published, u.n, values, shown)
    u.published_saved = False


def _labelled(u: Any) -> bool:
    """Whether a universe's rows have labels that name them in other frames too (pandas index
    labels). A DuckDB table's ``rowid`` names rows of that table only: a narrow copy sorted
    otherwise (district, sex, flag) carried rowids, skipped the key-only ``review`` and was
    compared with nothing (37 − 35 = C's two women, red team). Nor do labels an engine's rows took
    from the frame it read (``rows.FRAME_LABELS``): counted as labels, a narrow DuckDB count beside
    a copy rebuilt from ``.values`` and shuffled was compared with nothing (red team of issue 22)."""
    return u.labels is not None and not getattr(u, "rowid_labels", False) and not getattr(u, "frame_labels", False)


def _computed_rows_note(columns: set[str], earlier: list[str]) -> str:
    """The ``review`` note of a table whose rows, or an earlier output's, come out of a CTE, a
    subquery, a view or a file written during the session, with new columns: the two cannot be
    matched row by row."""
    names = ", ".join(earlier[-5:])
    return (f"the rows behind this table and those of earlier outputs with the same column(s) "
            f"({', '.join(sorted(columns))}; {names}) cannot be matched: one of them is read out of a query (a CTE, "
            "a subquery or a view) or out of a file written during this session, whose computed columns name "
            "nothing of the rows it reads: not compared with them (review; compute the new columns in the "
            "aggregate itself, e.g. SELECT sex, sum(income * 2) FROM people, or keep the table's own columns in "
            "the CTE or the file)")


def _holds(v: Any, u: Any, columns: set[str]) -> bool:
    """Whether universe ``v`` holds ``u``'s key ``columns``: by name, or, when either's rows are
    read out of a query or a file (``computed_source``), a key of ``v`` holding every value of
    each (a key renamed on the way: ``rename(columns={"sex": "gender"})`` after a file written
    and read back was compared with nothing, both ``pass``; red team of stop 57)."""
    if columns <= set(map(str, v.hashes)):
        return True
    if not (_computed(u) or _computed(v)):
        return False
    theirs = [_distinct(v, c) for c in v.key_columns if c in v.hashes]
    return all(any(_distinct(u, c) <= values for values in theirs) for c in columns if c in u.hashes)


#: per universe (weakly), per column: (rows, distinct fingerprints)
_DISTINCT: weakref.WeakKeyDictionary[Any, dict[Any, tuple[int, frozenset]]] = weakref.WeakKeyDictionary()


def _distinct(u: Any, column: Any) -> frozenset:
    """The distinct fingerprints of a universe's column, kept with it while its rows are the same."""
    kept = _DISTINCT.setdefault(u, {})
    h = u.hashes[column]
    hit = kept.get(column)
    if hit is None or hit[0] != len(h):
        hit = (len(h), frozenset(pd.unique(h).tolist()))
        kept[column] = hit
    return hit[1]


def _computed(u: Any) -> bool:
    """Whether a universe's rows are read out of a query or a file this session wrote (``computed_source``)."""
    return bool(getattr(u, "computed_source", False))


def _identified_by(u: Any) -> str:
    """How a universe knows its rows: ``"engine"`` (counted in an engine, :mod:`.in_engine`), the
    engine whose hashes fingerprint them (``"duckdb"``, ``"polars"``, ``"spark"``: sources of
    1M–5M rows), or ``""``: fingerprints of the values, comparable across engines and pandas."""
    if getattr(u, "in_engine", False):
        return "engine"
    prefixes = {str(c).split("#", 1)[0] for c in u.hashes} & set(_HASHED_BY)
    return ",".join(sorted(prefixes))


_HASHED_BY = ("duckdb", "polars", "spark")  # engines whose own hashes name columns "<engine>#<column>"


def _plain_columns(hashes: dict) -> set[str]:
    """Column names of a universe's rows, without an engine's hash prefix (``duckdb#x`` is ``x``)."""
    out = set()
    for c in map(str, hashes):
        head, _, rest = c.partition("#")
        out.add(rest if rest and head in _HASHED_BY else c)
    return out


def _repeats(earlier: Population, d: Draft) -> bool:
    """Whether an earlier population publishes exactly what this draft does: the same table
    (:func:`_same_table`) with the same cells published and hidden, at every level of margins.
    Then every equation and every target it gives an attacker, the draft gives too."""
    new = d.pop
    return (_same_table(earlier, d) and np.array_equal(earlier.published, new.published)
            and np.array_equal(earlier.hidden_shown, new.hidden_shown)
            and earlier.hidden_model == new.hidden_model and earlier.margins_hidden == new.margins_hidden
            and earlier.threshold == new.threshold and earlier.totals_of == new.totals_of
            and ((earlier.counted is None and new.counted is None) or same_column(earlier.counted, new.counted)))


def _same_table(earlier: Population, d: Draft) -> bool:
    """Whether an earlier population is this draft's table again: same keys, same groups of rows,
    the same margins shown (a crosstab with its margins after its groupby is another output: it
    publishes the margins, and the groupby's hidden cells must stay hidden in it). Its shares
    are the same table (a crosstab's counts, then its row shares: the shares' differencing with
    the counts made the counts' secondaries primary, and the shares were blocked whole, red team
    of stop 68); what the shares tell besides is compared by the joint audit (:func:`_repeats`)."""
    new = d.pop
    if earlier.keys != new.keys or len(earlier.labels) != len(new.labels) or not np.array_equal(earlier.size, new.size):
        return False
    if earlier.margins_public != new.margins_public or earlier.title != new.title:
        return False  # (the title names the statistic: counts, then means of the same groups, differ)
    try:
        return bool(np.array_equal(earlier.group[d.parent], new.group))
    except (IndexError, ValueError):
        return False
