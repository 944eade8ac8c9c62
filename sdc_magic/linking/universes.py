"""Universes: the union of rows of related frames, and the atoms their outputs cut them into.

A session keeps a few *universes*: the union of rows of related frames, each row
fingerprinted by a 64-bit hash of its value per column (:mod:`.identity`). A frame is
placed in a universe (:func:`place`) by its index labels when a sample of rows confirms
that the values agree (fast path), otherwise by a content hash over the columns common to
the frame and the universe that are no output's grouping key (keys may be recodings),
with duplicate rows told apart by their occurrence rank. Rows of a related frame that the
universe lacks are appended. Two universes that a later frame shows to hold mostly the
same rows are merged (:func:`merge_overlapping`).

**Atoms.** Each universe keeps the common refinement of every population recorded in it
(``row_atom``: one int32 per row; :func:`refine` splits the atoms by a new grouping); a
population is one int32 per atom (its group, or -1). Comparing a new table with an
earlier one is then a weighted count over atoms, not over rows, and no frame is kept
alive by the session.
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..evidence import row_origins
from ..evidence import rows as row_limits
from ..evidence.rows import DISTINCT_SHARE, MIN_RANKED_ROWS
from . import edits, identity
from .atoms import refine
from .edits import Published
from .identity import MISSING, combine, frame_hash, hash_column, hash_labels, hashed_columns, with_rank
from .names import output_order
from .read_back import from_a_written_file, read_back_frame

#: Universes a session keeps (the smallest goes first when a new one is needed); their bytes are
#: bounded too (``linker.MAX_BYTES``). Was 4: a red team showed four other small data sets
#: between two tables of the same people, and the second was cleared without comparison.
MAX_UNIVERSES = 12
#: A frame of repeated rows is matched as a sub-multiset (``Universe._by_multiset``) only when
#: our rows repeat each content at most this often on average, and at most this share of its
#: rows are not among ours.
#: Universes are tied by rows found by their content, fewer than half of them, when at least this
#: many are found, each unique, over columns that tell this share of the rows apart on both sides
#: (``Universe.tells_apart``)
MIN_DISTINCT_MATCHES = 5
MULTISET_MAX_REPEATS = 10
MULTISET_NEW_SHARE = 0.02


def _distinct(values: np.ndarray) -> int:
    """How many distinct values (a hash table: numpy 2.4's ``np.unique`` took 1 s for a million
    row hashes, pandas' 0.06 s; a DuckDB table of 1M rows spent half its linking time there)."""
    return len(pd.unique(values))


class Recorded(Protocol):
    """What a universe uses of a population recorded in it (:class:`.populations.Population`).

    A protocol rather than the class itself: populations are defined over universes, so
    this module cannot import them.
    """

    out_id: str
    labels: list[tuple]
    group: np.ndarray
    universe: Universe

    def nbytes(self) -> int: ...


class Universe:
    """The union of rows of related frames, with the common refinement of their populations."""

    def __init__(self, frame: pd.DataFrame, keys: list[str]) -> None:
        self.n = len(frame)
        # the labels its rows had before a ``reset_index`` (row_origins) when known: those name
        # the rows in other frames (A and B reset, then the flagged rows: 14 − 8 − 5, red team)
        before = row_origins.labels_before(frame)
        index = before if before is not None and len(before) == len(frame) else frame.index
        self.labels: pd.Index | None = index if index.is_unique else None
        #: labels that name rows by position in a DuckDB table (``rowid``): checked row by row
        self.rowid_labels = bool(frame.attrs.get(row_limits.ROWID_LABELS)) and self.labels is not None
        #: labels an engine's rows took from the Python frame it read (``FRAME_LABELS``)
        self.frame_labels = (bool(frame.attrs.get(row_limits.FRAME_LABELS))
                             or (before is not None and row_origins.needs_confirmation(frame))) \
            and self.labels is not None
        #: True when ``labels`` are the hashes of an earlier kernel's labels (:meth:`restore`)
        self.labels_hashed = False
        #: rows read out of a query (``COMPUTED_SOURCE``): its columns do not make it a data set of its own
        self.hashes: dict[Hashable, np.ndarray] = {c: frame_hash(frame, c) for c in hashed_columns(frame)}
        #: ... or out of a file this session wrote (:mod:`.read_back`)
        self.computed_source = bool(frame.attrs.get(row_limits.COMPUTED_SOURCE)) \
            or from_a_written_file(self.hashes, self.n)
        self.key_columns: set[Hashable] = set(keys)
        self.row_atom = np.zeros(self.n, dtype=np.int32)
        self.atom_size = np.array([self.n], dtype=np.int64)
        self.populations: list[Recorded] = []
        self.version = 0
        self._combined: dict[tuple, tuple[pd.Index, np.ndarray]] = {}
        self.frames: dict[int, tuple[Any, tuple, np.ndarray]] = {}  # frame -> rows (weak)
        self.uid = secrets.token_hex(6)
        self.hashes_saved = False
        #: per variable summed by a recorded table, the values it published (:mod:`.edits`)
        self.published: dict[str, Published] = {}
        self.published_saved = True

    @classmethod
    def restore(cls, uid: str, n: int, hashes: dict[Hashable, np.ndarray], key_columns: set[Hashable],
                row_atom: np.ndarray, atom_size: np.ndarray, label_hashes: np.ndarray | None = None) -> Universe:
        """A universe saved by an earlier kernel (its populations are appended by the caller).

        The earlier kernel's index labels come back as their hashes (``label_hashes``, see
        :meth:`saved_label_hashes`): a frame of the new kernel is found by its labels, hashed
        the same way, as within one kernel. Without them (an older file, rows without unique
        labels) rows are found by content hashes only, which cannot tell apart rows whose
        columns repeat (a filtered copy of ``sex``/``age`` after a restart: 407 − 406 = 1).
        """
        u = cls.__new__(cls)
        u.n = n
        u.uid = uid
        u.hashes_saved = True
        u.labels = None
        u.labels_hashed = False
        u.rowid_labels = False  # (not saved: a later kernel's DuckDB rows are checked row by row again)
        u.frame_labels = False
        u.computed_source = False  # (saved: persistence sets it)
        if label_hashes is not None and len(label_hashes) == n:
            restored = pd.Index(np.asarray(label_hashes, dtype=np.uint64))
            if restored.is_unique:
                u.labels, u.labels_hashed = restored, True
        u.hashes = hashes
        u.published = {}
        u.published_saved = True
        u.key_columns = key_columns
        u.row_atom = row_atom
        u.atom_size = atom_size
        u.version = 0
        u._combined = {}
        u.frames = {}
        u.populations = []
        return u

    def saved_label_hashes(self) -> np.ndarray | None:
        """The hashes of every row's label, to save (None: some rows have no label of ours)."""
        if self.labels is None or len(self.labels) != self.n:
            return None
        return np.asarray(self.labels, dtype=np.uint64) if self.labels_hashed else hash_labels(self.labels)

    def _comparable(self, index: pd.Index) -> pd.Index:
        """``index`` in the form of this universe's labels (hashed for a restored universe)."""
        return pd.Index(hash_labels(index)) if self.labels_hashed else index

    @property
    def n_atoms(self) -> int:
        return len(self.atom_size)

    def nbytes(self) -> int:
        return (self.row_atom.nbytes + self.atom_size.nbytes + sum(h.nbytes for h in self.hashes.values())
                + sum(p.nbytes() for p in self.populations))

    # -------------------------------------------------------- placing a frame
    def locate(self, frame: pd.DataFrame, keys: list[str]) -> np.ndarray | None:
        """Universe row of each row of ``frame`` (-1: not found), or None if not comparable."""
        present = set(hashed_columns(frame))
        common = [c for c in self.hashes if c in present]
        if not common:
            return None
        exclude = self.key_columns | set(keys)
        content = [c for c in common if c not in exclude]
        # labels are confirmed by the content columns, not the keys (a recoded key under its own
        # name outvoted them, and keys agreeing on the sample are no evidence: a sorted frame's
        # copy numbered 0..n again agrees on its keys at shifted rows, red team of issue 22)
        # rows re-indexed (reset_index, set_index, a polars round trip): placed by the labels they
        # had first (row_origins), their new ones only where those place more. New labels 0..n-1
        # name other rows by chance: B's rows after a polars round trip, numbered 0..29, were
        # taken for A's first 30 (a constant district left sex alone to confirm them, and it
        # agreed), and everyone − A − B = C went unseen (red team of issue 22)
        earlier = row_origins.labels_before(frame)
        pos = self._by_labels(frame, content or common, index=earlier,
                              row_by_row=row_origins.needs_confirmation(frame)) if earlier is not None else None
        # (with its earlier labels known, the new ones are confirmed only by content columns: A's
        # rows of a copy re-indexed after B's, numbered 30..69 again, were taken for B's 40..69 by
        # their sex alone, and everyone − A − B = C went unseen; red team of issue 22, seed 46: 1872)
        if (pos is None or (pos < 0).any()) and (earlier is None or content):
            again = self._by_labels(frame, content or common)
            if again is not None and (pos is None or (again >= 0).sum() > (pos >= 0).sum()):
                pos = again
        if (pos is None or (pos < 0).any()) and content:
            by_content = self._by_content(frame, content)
            if by_content is not None and (pos is None or not (pos >= 0).any()):
                pos = by_content
            elif by_content is not None:
                # rows found by labels stay where their labels put them, completed by content only
                # where it names one row on both sides: matched by occurrence rank or by an equal
                # income, two of B's flagged rows were taken for A's, outnumbered the 17 found by
                # their labels, and 14 − 8 − 5 went unseen (red team)
                pos = _fill(pos, np.where(self._told_apart(frame, content), by_content, -1))
        if pos is None or 2 * int((pos >= 0).sum()) < len(frame):
            # (rows of nothing but the table's keys are matched only as before: placed in the
            # universe of some earlier outputs by their keys alone, a total by sex after A's and
            # B's counts escaped the key-only review, ``Linker.unidentified_note``, red team round 4)
            by_multiset = self._by_multiset(frame, common, every_column=len(common) == len(self.hashes),
                                            widely=bool(content))
            if by_multiset is not None and (pos is None or (by_multiset >= 0).sum() > (pos >= 0).sum()):
                pos = by_multiset
        if pos is not None and (pos < 0).any() and 10 * int((pos >= 0).sum()) >= 9 * len(frame):
            pos = self._with_edited_rows(frame, pos, common)
        if pos is not None and (pos < 0).any() and 2 * int((pos >= 0).sum()) >= len(frame):
            pos = self._with_labelled_rows(frame, pos)
        return pos

    def _with_labelled_rows(self, frame: pd.DataFrame, pos: np.ndarray) -> np.ndarray:
        """``pos`` with each row left unplaced given the row of ours its label names, when the
        labels name exactly the rows content found for every placed row (at least
        :data:`LABELLED_MIN_ROWS`), no placed row holds that row, and the two differ in one
        column at most.

        Why (stop 50): a masked Series first (``income.where(district != "C", 0).groupby(df.sex)``),
        then the income's own sums: the frame's 70 rows equal to the Series' were found by their
        income, C's three, whose income is no longer 0, were appended as new people beside their
        masked rows, and the two tables swapped them (531.80 − 513.75 = C's man's income, both
        ``pass``). One column cannot confirm labels that differ on 4 % of the rows
        (:meth:`_by_labels`), but labels agreeing with content on every row content placed do:
        C's rows are then the same people with an edited value, which :mod:`.edits` compares."""
        if self.labels is None or not frame.index.is_unique:
            return pos
        placed = np.flatnonzero(pos >= 0)
        if len(placed) < LABELLED_MIN_ROWS:
            return pos
        named = self.rows_of_labels(frame.index)
        if named is None or not (named[placed] == pos[placed]).all():
            return pos
        claimed = np.zeros(self.n, dtype=bool)
        claimed[pos[placed]] = True
        missing = np.flatnonzero(pos < 0)
        take = missing[(named[missing] >= 0) & ~claimed[np.maximum(named[missing], 0)]]
        if not len(take):
            return pos
        # each such row differs from the row its label names in one column at most (its edited
        # value): rows appended under labels that continue the frame's numbering (``concat`` with
        # ``ignore_index``, dummy rows) differ in most and stay new rows
        wrong = np.zeros(len(take), dtype=np.int64)
        for c in (c for c in self.hashes if c in set(hashed_columns(frame))):
            mine, theirs = self.hashes[c][named[take]], frame_hash(frame, c)[take]
            wrong += (mine != theirs) & (mine != MISSING)
        take = take[wrong <= 1]
        if not len(take):
            return pos
        pos = pos.copy()
        pos[take] = named[take]
        return pos

    def _with_edited_rows(self, frame: pd.DataFrame, pos: np.ndarray, columns: list[Hashable]) -> np.ndarray:
        """``pos`` with each row left unplaced given the row of ours it equals in every column but
        one, when exactly one row that no other row of the frame took does.

        Why: a frame placed by its content (no labels of ours: a polars or re-aggregated copy)
        made a row whose income was edited a new person beside the old one, and two sums of the
        same people, before and after, told his income by subtraction, both ``pass`` (red team
        rt49/11). Paired, his row is the same person with an edited value, which :mod:`.edits`
        compares. Only a few rows (:data:`MAX_EDITED_ROWS`, at most 5 % of the frame, which must
        be nine tenths placed) and at least three columns compared (two of them agreeing)."""
        missing = np.flatnonzero(pos < 0)
        if len(columns) < 3 or len(missing) > min(MAX_EDITED_ROWS, 0.05 * len(frame)):
            return pos
        claimed = np.zeros(self.n, dtype=bool)
        claimed[pos[pos >= 0]] = True
        free = np.flatnonzero(~claimed)
        if not len(free):
            return pos
        theirs = {c: frame_hash(frame, c)[missing] for c in columns}
        agree = np.zeros(len(free), dtype=np.int64)
        for c in columns:  # (agreeing with some unplaced row: a superset of each row's candidates)
            agree += np.isin(self.hashes[c][free], theirs[c])
        candidates = free[agree >= len(columns) - 1]
        if not len(candidates):
            return pos
        paired: dict[int, list[int]] = {}
        for i, row in enumerate(missing.tolist()):
            hits = np.zeros(len(candidates), dtype=np.int64)
            for c in columns:
                hits += self.hashes[c][candidates] == theirs[c][i]
            match = candidates[hits >= len(columns) - 1]
            if len(match) == 1:
                paired.setdefault(int(match[0]), []).append(row)
        pos = pos.copy()
        for ours, rows in paired.items():
            if len(rows) == 1:  # (two unplaced rows for one of ours: neither is paired)
                pos[rows[0]] = ours
        return pos

    def _by_multiset(self, frame: pd.DataFrame, columns: list[Hashable], every_column: bool = True,
                     widely: bool = True) -> np.ndarray | None:
        """Rows that no label or distinct content places, when they are (nearly) a sub-multiset of
        ours, or hold (nearly) all of ours (:func:`_holds`: then the rest are new rows).

        Why: a filtered copy whose labels were replaced (``ignore_index``, ``set_axis``, a frame
        rebuilt from ``.values`` or records, a DuckDB or polars copy back in pandas) of columns
        that cannot tell people apart (sex and an age) was found by nothing, and its table was
        cleared beside the whole (407 − 406 = 1). When ``frame`` has every column this universe
        fingerprints (``every_column``), or (``widely``) the atoms here follow the content of the
        columns it has (:meth:`_atoms_follow_content`), its rows identical in them are interchangeable for
        every population recorded here, so matching them by occurrence rank loses nothing. Taken only
        when chance cannot explain it: at least :data:`MIN_RANKED_ROWS` rows, at least half of
        ours, on average at most :data:`MULTISET_MAX_REPEATS` rows per distinct content of ours
        (two unrelated samples of few values contain each other: admin2 alone, round 5), and at
        most :data:`MULTISET_NEW_SHARE` of its rows not among ours (an unrelated sample of the
        same columns leaves 8-17 % out; a few appended rows, 2 %, are allowed).
        """
        n = len(frame)
        if n < MIN_RANKED_ROWS:
            return None
        cols = tuple(sorted(columns, key=str))
        index, rows = self._content_index(cols, ranked=False)
        if n < 0.5 * len(rows):
            return None
        ours, our_counts = np.unique(np.asarray(index), return_counts=True)
        if not len(ours) or not (every_column or widely):
            return None
        relaxed = not every_column or len(rows) > MULTISET_MAX_REPEATS * len(ours)
        if relaxed and not (widely and self._atoms_follow_content(np.asarray(index), rows, len(ours))):
            return None
        # exact counts, never a sample: a sample of rows can be gamed (rows of a made-up value
        # at the sampled positions made a copy of 2 % new rows look unrelated, red team)
        mine = combine([frame_hash(frame, c) for c in cols])
        theirs, their_counts = np.unique(mine, return_counts=True)
        held = _count_of(theirs, ours, our_counts)
        extra = int(np.clip(their_counts - held, 0, None).sum())
        if extra > MULTISET_NEW_SHARE * n:
            if not (widely and _holds(theirs, their_counts, ours, our_counts, n)):
                return None
            relaxed = True
        if relaxed and _splits_a_content(theirs, their_counts, ours, our_counts):
            return None
        ranked, ranked_rows = self._content_index(cols)
        found = ranked.get_indexer(with_rank(mine))
        return np.where(found >= 0, ranked_rows[np.maximum(found, 0)], -1).astype(np.int64)

    def _atoms_follow_content(self, content: np.ndarray, rows: np.ndarray, distinct: int) -> bool:
        """Whether rows of equal content (``content``: of universe rows ``rows``, ``distinct`` values)
        always share one atom, and every universe row has that content: then the session's
        populations here are unions of contents, and rows matched by occurrence rank among equal
        contents give every one of them the same counts whoever is whom.

        Why: over columns that cannot tell people apart (district, sex: a dozen rows per
        content) a copy whose labels name other people could not be matched by rank (chance could
        explain the containment), and everyone counted after those outside C was compared with
        nothing (37 − 35, red team of issue 22). When the atoms follow the content, matching by
        rank loses nothing for the populations recorded here; were the rows other people's, the
        tables are compared with tables they are unrelated to (over-protection: the same chance
        limits as any multiset match decide whether they could be the same rows)."""
        if len(rows) != self.n:
            return False
        pairs = combine([content, self.row_atom[rows].astype(np.uint64)])
        return len(np.unique(pairs)) == distinct

    def _by_labels(self, frame: pd.DataFrame, check: list[Hashable], index: pd.Index | None = None,
                   row_by_row: bool = False) -> np.ndarray | None:
        """Universe row of each row of ``frame`` by its labels (``index``: other labels of its rows;
        ``row_by_row``: confirmed row by row, as labels that came through an array of its values)."""
        index = frame.index if index is None else index
        if self.labels is None or not index.is_unique:
            return None
        if index is self.labels:
            pos = np.arange(len(frame), dtype=np.int64)
        elif not self.labels_hashed and (lookup := self._integer_lookup()) is not None \
                and pd.api.types.is_integer_dtype(index.dtype) and not isinstance(index, pd.MultiIndex):
            values = np.asarray(index, dtype=np.int64)
            inside = (values >= 0) & (values < len(lookup))
            pos = np.where(inside, lookup[np.where(inside, values, 0)], -1)
        else:
            pos = _positions(self.labels, self._comparable(index))
            if pos is None:
                return None
        sample = _sample(pos)
        if sample is None:
            return None
        # the same rows when most of their columns agree: a column recoded between two outputs
        # (astype(float), round, str.lower, a value set to missing) does not make new people
        # (red team: a recode between two counts hid a difference of 2 from linking)
        theirs = {c: hash_column(frame[c].iloc[sample]) for c in check}
        # a column constant on the sample (a country code) agrees whatever the rows: it is no
        # evidence (red team: two data sets numbered alike, both with country "UG", were "the same
        # people" although their ages differed); when every checked column is constant there,
        # the other common columns (the keys too) are compared
        telling = [c for c in check if len(np.unique(theirs[c])) > 1]
        if not telling:
            others = [c for c in self.hashes if c in frame.columns and c not in theirs]
            theirs.update({c: hash_column(frame[c].iloc[sample]) for c in others})
            telling = [c for c in others if len(np.unique(theirs[c])) > 1] or list(check)
        # a column either side does not hold for a sampled row (rows of a narrower frame appended
        # here) is no evidence either way: compared where both hold it (it disagreed, and a filter of
        # the whole frame after a narrow copy's table was compared with nothing: 23 − 22, red team)
        agree = compared = 0
        for c in telling:
            mine, other = self.hashes[c][pos[sample]], theirs[c]
            both = (mine != MISSING) & (other != MISSING)
            if not both.any():
                continue
            compared += 1
            agree += _column_agrees(mine[both], other[both]) or identity.recoded(mine[both], other[both])
        if agree == 0 or 2 * agree < compared:
            return None
        if self.rowid_labels or frame.attrs.get(row_limits.ROWID_LABELS) or self.frame_labels \
                or frame.attrs.get(row_limits.FRAME_LABELS) or row_by_row:
            # (labels an engine's rows took from a frame: that frame may have been rebuilt and
            # numbered anew, and a sample missed the rows it moved, red team of issue 22)
            pos = _rows_agreeing(pos, {c: frame_hash(frame, c) for c in telling}, self.hashes)
        return pos

    def rows_of_labels(self, index: pd.Index) -> np.ndarray | None:
        """The row each label names (-1: none), not confirmed by any content (a restored universe's
        by their hashes); None when the rows have no labels to compare
        (:func:`.masked.kept_in_universes` confirms by its own test)."""
        if self.labels is None or not index.is_unique:
            return None
        return _positions(self.labels, self._comparable(index))

    def _integer_lookup(self) -> np.ndarray | None:
        """Row of each non-negative integer label (a direct array: no hashing of a million labels)."""
        labels = self.labels
        if labels is None or not pd.api.types.is_integer_dtype(labels.dtype) or isinstance(labels, pd.MultiIndex):
            return None
        cached = getattr(self, "_lookup", None)
        if cached is not None and cached[0] is labels:
            return cached[1]
        values = np.asarray(labels, dtype=np.int64)
        if not len(values) or values.min() < 0 or values.max() >= 4 * len(values) + 1024:
            return None
        lookup = np.full(int(values.max()) + 1, -1, dtype=np.int64)
        lookup[values] = np.arange(len(values))
        self._lookup = (labels, lookup)
        return lookup

    def _told_apart(self, frame: pd.DataFrame, columns: list[Hashable]) -> np.ndarray:
        """Per row of ``frame``, whether its content over ``columns`` occurs once there and at most
        once here, over two or more columns that tell :data:`DISTINCT_SHARE` of the rows apart on
        both sides (a match by content then names the same row, not the k-th of equal ones, nor
        someone else with the same income)."""
        cols = tuple(sorted(columns, key=str))
        theirs = combine([frame_hash(frame, c) for c in cols])
        if len(cols) < 2:  # (one column: two people's equal incomes, red team's 14 − 8 − 5)
            return np.zeros(len(theirs), dtype=bool)
        index, _ = self._content_index(cols, ranked=False)
        if _distinct(theirs) < DISTINCT_SHARE * len(theirs) or _distinct(np.asarray(index)) < DISTINCT_SHARE * len(index):
            return np.zeros(len(theirs), dtype=bool)
        ours = pd.Series(np.asarray(index)).value_counts()
        counts = pd.Series(theirs).value_counts()
        return (counts.reindex(theirs).to_numpy() == 1) & (ours.reindex(theirs).fillna(0).to_numpy() <= 1)

    def _by_content(self, frame: pd.DataFrame, columns: list[Hashable]) -> np.ndarray | None:
        cols = tuple(sorted(columns, key=str))
        combined = combine([frame_hash(frame, c) for c in cols])
        if len(combined) >= MIN_RANKED_ROWS and 2 * _distinct(combined) < len(combined):
            # mostly repeated rows (shared columns such as admin2 only): matching them by rank
            # made the k-th household of a survey the k-th case of the referrals, tying
            # unrelated data sets together (red team, round 5)
            return None
        index, rows = self._content_index(cols)
        found = index.get_indexer(with_rank(combined))
        return np.where(found >= 0, rows[np.maximum(found, 0)], -1).astype(np.int64)

    def locate_rows(self, other: Universe) -> tuple[np.ndarray | None, bool]:
        """This universe's row of each row of ``other`` (-1: not here): by index labels when both
        have them and the columns both know agree, else by content hashes; and whether labels
        placed them."""
        by_labels = self._rows_by_labels(other)
        if by_labels is not None:
            return by_labels, True
        return self._rows_by_content(other), False

    def frame_tells_apart(self, frame: pd.DataFrame, keys: list[str], pos: np.ndarray) -> bool:
        """:meth:`tells_apart` for a frame being placed (its rows found here at ``pos``)."""
        present = set(hashed_columns(frame))
        common = [c for c in self.hashes if c in present]
        content = [c for c in common if c not in (self.key_columns | set(keys))]
        if not content:
            return False
        theirs = {c: frame_hash(frame, c) for c in content}
        return self._distinct_matches(theirs, content, pos >= 0, pos)

    def tells_apart(self, other: Universe, found: np.ndarray, to_u: np.ndarray) -> bool:
        """Whether the rows of ``other`` found here by content are the same people beyond chance:
        at least :data:`MIN_DISTINCT_MATCHES` of them, each content unique on both sides, over
        columns that tell at least :data:`DISTINCT_SHARE` of either side's rows apart (an id, an
        income to the cent: chance cannot make rows equal in all of them).

        Why: by content, half of a universe's rows had to be found for two universes to be tied;
        B's 30 rows, 13 of them among the flagged ones read from another engine, never were, and
        14 − 8 − 5 gave C's flagged woman away (red team: chains mixing engines and re-indexed
        copies)."""
        common = [c for c in self.hashes if c in other.hashes]
        content = [c for c in common if c not in (self.key_columns | other.key_columns)] or common
        if not content:
            return False
        return self._distinct_matches({c: other.hashes[c] for c in content}, content, found, to_u)

    def _distinct_matches(self, their_hashes: dict[Hashable, np.ndarray], content: list[Hashable],
                          found: np.ndarray, to_u: np.ndarray) -> bool:
        if int(found.sum()) < MIN_DISTINCT_MATCHES:
            return False
        theirs = combine([their_hashes[c] for c in content])
        mine = combine([self.hashes[c] for c in content])
        if _distinct(theirs) < DISTINCT_SHARE * len(theirs) or _distinct(mine) < DISTINCT_SHARE * len(mine):
            return False
        # each matched content unique on both sides (not told apart by its occurrence rank)
        counts_theirs = pd.Series(theirs).value_counts()
        counts_mine = pd.Series(mine).value_counts()
        at = np.flatnonzero(found)
        return bool((counts_theirs.reindex(theirs[at]).to_numpy() == 1).all()
                    and (counts_mine.reindex(mine[to_u[at]]).fillna(0).to_numpy() == 1).all())

    def _rows_by_content(self, other: Universe) -> np.ndarray | None:
        """Rows of ``other`` found here by the content of the columns both hold; where some rows of
        either lack a column (appended from a frame without it: ``MISSING``) and fewer than all are
        found, by the columns every row of both holds, when those find more.

        Why the second try: the flagged rows of ``people.set_index("age").rename_axis("years")``
        joined A's universe without an age; B's universe, holding ages, then matched none of
        them on every column, and 14 − 8 − 5 gave C's flagged woman away (red team)."""
        common = [c for c in self.hashes if c in other.hashes]
        content = [c for c in common if c not in (self.key_columns | other.key_columns)] or common
        if not content:
            return None
        found = self._content_rows(other, content)
        if found is not None and (found >= 0).all():
            return found
        complete = [c for c in content if not (self.hashes[c] == MISSING).any()
                    and not (other.hashes[c] == MISSING).any()]
        if not complete or len(complete) == len(content):
            return found
        again = self._content_rows(other, complete)
        if again is not None and (found is None or (again >= 0).sum() > (found >= 0).sum()):
            return again
        return found

    def _content_rows(self, other: Universe, content: list[Hashable]) -> np.ndarray | None:
        cols = tuple(sorted(content, key=str))
        combined = combine([other.hashes[c] for c in cols])
        if 2 * _distinct(combined) < len(combined):
            return None  # mostly repeated rows (a constant column): the content tells no rows apart
        index, rows = self._content_index(cols)
        found = index.get_indexer(with_rank(combined))
        return np.where(found >= 0, rows[np.maximum(found, 0)], -1).astype(np.int64)

    def _rows_by_labels(self, other: Universe) -> np.ndarray | None:
        """Rows of ``other`` found by their labels, when the columns both hold agree on them.

        A column counts where both sides hold it for the sampled rows (a frame of the key
        column alone, ``df.sex.value_counts()``, extends a universe with that column only)
        and it is not constant there: at least one such column, and at least half of them
        equal on the sample, as when a frame is placed by its labels (``_by_labels``).
        Two unrelated frames numbered 0, 1, 2, ... agree only by chance, on 256 rows.
        """
        if self.labels is None or other.labels is None or len(self.labels) != self.n \
                or len(other.labels) != other.n:
            return None
        mine_labels, other_labels = self.labels, other.labels
        if self.labels_hashed != other.labels_hashed:  # (one from an earlier kernel: compare hashes)
            mine_labels = mine_labels if self.labels_hashed else pd.Index(hash_labels(self.labels))
            other_labels = other_labels if other.labels_hashed else pd.Index(hash_labels(other.labels))
        pos = _positions(mine_labels, other_labels)
        sample = None if pos is None else _sample(pos)
        if sample is None:
            return None
        compared = agree = 0
        for c in self.hashes:
            if c not in other.hashes:
                continue
            mine, theirs = self.hashes[c][pos[sample]], other.hashes[c][sample]
            both = (mine != MISSING) & (theirs != MISSING)
            if not both.all():
                if not both.any():
                    continue
                mine, theirs = mine[both], theirs[both]
            if len(np.unique(theirs)) < 2:
                continue  # a constant column (a country code) agrees whatever the rows
            compared += 1
            agree += bool(np.array_equal(mine, theirs))
        if compared == 0 or 2 * agree < compared:
            return None
        if self.rowid_labels or getattr(other, "rowid_labels", False) or self.frame_labels \
                or getattr(other, "frame_labels", False):
            pos = _rows_agreeing(pos, {c: other.hashes[c] for c in self.hashes if c in other.hashes}, self.hashes)
        return pos

    def extend_rows(self, other: Universe, rows: np.ndarray) -> None:
        """Append rows of ``other`` (their hashes; one new atom outside every population)."""
        k = len(rows)
        if k:
            self._append(lambda c: other.hashes[c][rows] if c in other.hashes else None, k)

    def _append(self, hashes_of: Callable[[Hashable], np.ndarray | None], k: int) -> None:
        """Append k rows (their hash per column, None: missing) as one new atom outside every population."""
        for var, pub in list(self.published.items()):
            self.published[var] = pub.grown(self.n + k)
        for c, h in list(self.hashes.items()):
            add = hashes_of(c)
            self.hashes[c] = np.concatenate([h, np.full(k, MISSING, dtype=np.uint64) if add is None else add])
        self.row_atom = np.concatenate([self.row_atom, np.full(k, self.n_atoms, dtype=np.int32)])
        self.atom_size = np.concatenate([self.atom_size, [k]])
        for p in self.populations:
            p.group = np.concatenate([p.group, np.array([-1], dtype=p.group.dtype)])
        self.n += k
        self.hashes_saved = False
        self.version += 1
        self._combined.clear()
        self.frames.clear()

    def _content_index(self, cols: tuple, ranked: bool = True) -> tuple[pd.Index, np.ndarray]:
        """The rows' content hashes over ``cols`` (told apart by occurrence rank unless ``ranked`` is
        False, then repeated) and the rows they belong to; rows missing a column are left out."""
        if not ranked:
            hashes = [self.hashes[c] for c in cols]
            valid = np.ones(self.n, dtype=bool)
            for h in hashes:
                valid &= h != MISSING
            rows = np.flatnonzero(valid)
            return pd.Index(combine([h[rows] for h in hashes])), rows
        hit = self._combined.get(cols)
        if hit is None:
            hashes = [self.hashes[c] for c in cols]
            valid = np.ones(self.n, dtype=bool)
            for h in hashes:
                valid &= h != MISSING
            rows = np.flatnonzero(valid)
            mine = with_rank(combine([h[rows] for h in hashes]))
            index = pd.Index(mine)
            if not index.is_unique:
                keep = ~index.duplicated()
                index, rows = index[keep], rows[keep]
            if len(self._combined) > 4:
                self._combined.clear()
            hit = (index, rows)
            self._combined[cols] = hit
        return hit

    def extend(self, frame: pd.DataFrame, pos: np.ndarray, labelled: bool) -> np.ndarray:
        """Append the rows of ``frame`` this universe lacks (one new atom outside every population)."""
        new = np.flatnonzero(pos < 0)
        if not len(new) or self.n + len(new) > row_limits.MAX_LINKED_ROWS:
            return pos
        k = len(new)
        present = set(hashed_columns(frame))
        index = row_origins.labels_before(frame)
        index = frame.index if index is None else index
        if labelled and self.labels is not None and index.is_unique:
            extended = self.labels.append(self._comparable(index[new]))
            if extended.is_unique and len(extended) == self.n + k:
                self.labels = extended
        # (otherwise the new rows have no label of ours: labels stay for the first rows only)
        pos = pos.copy()
        pos[new] = np.arange(self.n, self.n + k)
        self._append(lambda c: frame_hash(frame, c)[new] if c in present else None, k)
        return pos

    # -------------------------------------------------------- units
    def most_rows_per_unit(self, unit: Hashable) -> int:
        """The largest number of rows one unit has in the universe (cached per universe size)."""
        cache = self.__dict__.setdefault("_most_rows", {})
        hit = cache.get(unit)
        if hit is not None and hit[0] == self.n:
            return hit[1]
        h = self.hashes[unit]
        known = h[h != MISSING]
        most = int(np.unique(known, return_counts=True)[1].max()) if len(known) else 1
        cache[unit] = (self.n, most)
        return most


def _positions(labels: pd.Index, wanted: pd.Index) -> np.ndarray | None:
    """Position of each wanted label among ``labels`` (-1: absent), None when they cannot be compared."""
    try:
        return np.asarray(labels.get_indexer(wanted), dtype=np.int64)
    except (TypeError, ValueError, pd.errors.InvalidIndexError):
        return None


def _fill(pos: np.ndarray, more: np.ndarray) -> np.ndarray:
    """``pos`` with its unfound rows (-1) taken from ``more`` where that names a universe row no
    row of ``pos`` holds: rows found by labels and the rest by content (a universe whose rows
    carry DuckDB rowids for some, pandas labels for others: B's unflagged rows found by neither
    alone, 23 − 22 = C's unflagged woman, red team)."""
    gaps = (pos < 0) & (more >= 0)
    if not gaps.any():
        return pos
    taken = np.zeros(int(max(pos.max(initial=-1), more.max(initial=-1))) + 1, dtype=bool)
    taken[pos[pos >= 0]] = True
    candidates = np.flatnonzero(gaps)
    free = ~taken[more[candidates]]
    candidates = candidates[free]
    # (one universe row for one frame row: the first frame row naming it)
    _, first = np.unique(more[candidates], return_index=True)
    candidates = candidates[first]
    pos = pos.copy()
    pos[candidates] = more[candidates]
    return pos


def _count_of(contents: np.ndarray, distinct: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """How many rows of each of ``contents`` a side holds, given its sorted ``distinct`` contents
    and their ``counts`` (0 where it has none)."""
    at = np.minimum(np.searchsorted(distinct, contents), len(distinct) - 1)
    return np.where(distinct[at] == contents, counts[at], 0)


def _splits_a_content(theirs: np.ndarray, their_counts: np.ndarray, ours: np.ndarray, our_counts: np.ndarray
                      ) -> bool:
    """Whether a frame holds some but not all of our rows of one content (sorted distinct contents
    with their counts on both sides).

    Why: rows matched by rank among equal contents give every recorded population the same
    counts only when each content's rows come whole; the people under 60 outside C of a copy
    rebuilt through CSV, matched so, took arbitrary people of each (district, sex), the atoms no
    longer followed the content, the next table (the people under 60) was compared with nothing
    and 18 − 16 gave C's two women (red team of issue 22). Such a frame is matched only by the
    plain multiset rule (every column, at most ten rows per content), or not at all."""
    there = _count_of(ours, theirs, their_counts)
    return bool(((there > 0) & (there < our_counts)).any())


def _holds(theirs: np.ndarray, their_counts: np.ndarray, ours: np.ndarray, our_counts: np.ndarray, n: int) -> bool:
    """Whether a frame of ``n`` rows (distinct contents ``theirs``, sorted, with their counts) holds
    (nearly) every row of ours and ours make at least half of it: a superset of the same people.

    Why: everyone counted after a table of those outside C, both over copies whose labels name
    other people (rebuilt with ``ignore_index``, from ``.values``): the earlier rows were a
    sub-multiset of the new frame, not the other way round, and the new table was compared with
    nothing (37 − 35 = C's two women; red team of issue 22, most of the 38 sessions still leaking
    of 2,000). Its rows of our content are matched by rank, the others are new rows. The same
    chance limits as a subset: ours at least half of theirs, at most :data:`MULTISET_NEW_SHARE` of
    ours missing there."""
    ours_n = int(our_counts.sum())
    if ours_n < 0.5 * n:
        return False
    there = _count_of(ours, theirs, their_counts)
    missing = int(np.clip(our_counts - there, 0, None).sum())
    return missing <= MULTISET_NEW_SHARE * ours_n


def _column_agrees(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether a column's sampled values say the rows its labels name are ours: all equal, but for
    at most 2 % of them (one from 20 rows).

    Why not all: the income sums of one column's universe (``df.income.groupby(df.sex)``), then
    his income edited and the sums re-aggregated from a per-person table: the income, the only
    column to confirm the labels with, differed on his row, the whole frame was taken for other
    people, his row a new person beside the old one, and the two sums told his income, both
    ``pass`` (review of stop 49). Placed by their labels, his row is the same person with an
    edited value (:mod:`.edits`); unrelated rows numbered alike agree on a telling column on far
    fewer rows."""
    allowed = max(1 if len(mine) >= 20 else 0, int(0.02 * len(mine)))
    return int(np.count_nonzero(mine != theirs)) <= allowed


#: Labels complete a frame's placement (:meth:`Universe._with_labelled_rows`) only when they agree
#: with content on at least this many placed rows.
LABELLED_MIN_ROWS = 20
#: At most this many rows of a frame are paired to edited rows of ours (:meth:`Universe._with_edited_rows`).
MAX_EDITED_ROWS = 256


def _rows_agreeing(pos: np.ndarray, theirs: dict[Hashable, np.ndarray], ours: dict[Hashable, np.ndarray]
                   ) -> np.ndarray:
    """``pos`` with -1 where a row found by its label disagrees with the row it names in most
    columns known on both sides (rowid labels: another person at that position)."""
    found = np.flatnonzero(pos >= 0)
    if not len(found):
        return pos
    agree = np.zeros(len(found), dtype=np.int64)
    known = np.zeros(len(found), dtype=np.int64)
    for c, h in theirs.items():
        mine, other = ours[c][pos[found]], h[found]
        both = (mine != MISSING) & (other != MISSING)
        known += both
        agree += both & (mine == other)
    wrong = 2 * agree < known
    if not wrong.any():
        return pos
    pos = pos.copy()
    pos[found[wrong]] = -1
    return pos


def _sample(pos: np.ndarray) -> np.ndarray | None:
    """Up to ~256 evenly spread rows found by their labels (where their columns are compared)."""
    ok = np.flatnonzero(pos >= 0)
    return ok[:: max(1, len(ok) // 256)] if len(ok) else None


# ------------------------------------------------------------------ the session's universes
def place(universes: list[Universe], frame: pd.DataFrame, keys: list[str], checked: set[tuple],
          forgotten: list[tuple[str, frozenset[str]]] | None = None, any_size: tuple[Universe, ...] = ()
          ) -> tuple[Universe, np.ndarray]:
    """The universe of ``frame`` among ``universes`` (changed in place: a new universe, rows
    appended, universes merged) and the universe row of each of its rows.

    ``checked``: pairs of universes already found not to overlap (see :func:`merge_overlapping`).
    ``forgotten`` collects (output, columns) of the populations of a universe dropped to make room.
    """
    best: tuple[Universe, np.ndarray] | None = None
    # rows out of a file this session wrote, numbered anew by the reader (0, 1, 2...): their labels name
    # nobody (:mod:`.read_back`), they are placed only where their content tells them apart (labels
    # the file kept, ``index_col`` or a pickle of filtered rows, are labels)
    written = isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1 \
        and read_back_frame(frame)
    for u in universes:
        cached = u.frames.get(id(frame))
        if cached is not None and cached[0]() is frame and len(cached[2]) == len(frame):
            return u, cached[2]
        pos = u.locate(frame, keys)
        if pos is None:
            continue
        matched = int((pos >= 0).sum())
        if written and not (matched and u.frame_tells_apart(frame, keys, pos)):
            continue
        if matched and (matched >= 0.5 * len(frame) or matched >= 0.5 * u.n or u.frame_tells_apart(frame, keys, pos)):
            best = (u, pos)
            break
    if best is None and not written:
        # Two filters of one frame that overlap only a little (districts A or C, then B
        # or C) are the same people where they overlap: rows found by their index labels
        # with their content agreeing (``_by_labels``) join that universe, however few.
        # Otherwise a third output (everyone) links each of them, but not them together,
        # and 22 + 17 - 37 = 2 gave C's count away at 'pass' (red team, round 3).
        for u in universes:
            pos = u._by_labels(frame, [c for c in u.hashes if c in set(hashed_columns(frame))],
                               index=row_origins.labels_before(frame)) if u.labels is not None else None
            if pos is not None and (pos >= 0).any():
                best = (u, pos)
                break
    if best is None and not written:
        best = _by_transformed_labels(universes, frame)
    if best is None:
        if len(universes) >= MAX_UNIVERSES:
            # the smallest goes (an aggregated frame shown as a table), never the microdata's
            dropped = min(universes, key=lambda x: (x.n, len(x.populations)))
            universes.remove(dropped)
            if forgotten is not None:
                forgotten.extend((p.out_id, frozenset(map(str, dropped.hashes))) for p in dropped.populations)
        u = Universe(frame, keys)
        universes.append(u)
        best = (u, np.arange(len(frame), dtype=np.int64))
        _merge_transformed(universes, u, frame)
    u, pos = best
    if (pos < 0).any():
        pos = u.extend(frame, pos, labelled=u.labels is not None)
    merge_overlapping(universes, u, checked, any_size)
    try:
        u.frames[id(frame)] = (weakref.ref(frame), tuple(keys), pos)
        if len(u.frames) > 4:
            u.frames.pop(next(iter(u.frames)))
    except TypeError:
        pass
    return u, pos


def _by_transformed_labels(universes: list[Universe], frame: pd.DataFrame) -> tuple[Universe, np.ndarray] | None:
    """A frame of one numeric column, every value changed, placed at the rows its labels name where
    its values follow those a cleared table showed there through one common transform on all but a
    few rows (:func:`.edits.follows_published`); None otherwise.

    Why (known gap until stop 50): ``(2 * df.income).where(df.district != "C", 0).groupby(df.sex)``
    summed after the income's sums: no other column, no value equal to one seen, so its rows were
    read as other people and both tables ``pass`` (2 · 531.80 − 1027.50 = twice C's man's income).
    Placed, its values are compared with those shown (:mod:`.edits`): the rows breaking the
    transform are left out and differencing hides them. A log or a rank of the column follows no
    common transform and stays apart (placed, it would be ``review``)."""
    if frame.shape[1] != 1 or not pd.api.types.is_numeric_dtype(frame.dtypes.iloc[0]):
        return None
    numbers: np.ndarray | None = None
    for u in universes:
        if u.labels is None or not u.published:
            continue
        pos = u.rows_of_labels(frame.index)
        if pos is None or not len(pos) or (pos < 0).any():
            continue
        if numbers is None:
            numbers = pd.to_numeric(frame.iloc[:, 0], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if edits.follows_published(u.published, pos, numbers):
            return u, pos
    return None


def _merge_transformed(universes: list[Universe], u: Universe, frame: pd.DataFrame) -> None:
    """Move into ``u`` (new, made of ``frame``'s rows in order) each universe of one column whose
    values shown its labels name in ``frame``, where a column of ``frame`` follows them through one
    common transform on all but a few rows (:func:`.edits.follows_published`).

    Why (stop 50): the reverse of :func:`_by_transformed_labels` (the masked multiple first, then
    the income's sums: two universes, both ``pass``). Merged, the values shown of the first are
    ``u``'s too (:func:`.edits.merge`), and :mod:`.edits` leaves C's rows, which break the
    transform, out of the second table's population."""
    if not frame.index.is_unique:
        return
    numeric = [c for c in hashed_columns(frame) if pd.api.types.is_numeric_dtype(frame[c].dtype)]
    values: dict[Hashable, np.ndarray] = {}
    for other in list(universes):
        if other is u or getattr(other, "in_engine", False) or not other.populations or not other.published \
                or other.labels is None or other.labels_hashed or len(other.hashes) != 1 or other.n > u.n:
            continue  # (an engine universe's rows are not ours to read: a Spark count, then a pandas table)
        at = _positions(frame.index, other.labels)
        if at is None or (at < 0).any():
            continue
        rows = np.arange(other.n)
        for c in numeric:
            if c not in values:  # (each column read once, whatever the universes compared)
                values[c] = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            if edits.follows_published(other.published, rows, values[c][at]):
                _replay(u, other, at)
                edits.merge(u.published, u.n, other.published, at)
                universes.remove(other)
                break


def merge_overlapping(universes: list[Universe], u: Universe, checked: set[tuple],
                      any_size: tuple[Universe, ...] = ()) -> None:
    """Move into ``u`` every other universe whose rows are mostly in ``u`` now.

    Two filters of one frame that overlap a little (districts A or C, then B or C) land
    in two universes when nothing ties their rows together (polars and DuckDB frames,
    a pandas frame after ``reset_index``).  A later output holding most of the rows of
    both (everyone; or A or B), or some of their rows found by labels (A, then B, then the
    flagged: 31 rows, 17 of A's and 13 of B's, red team: 14 − 8 − 5 = C's flagged woman), ties them: the other universe's rows are found in ``u``
    by their content (the rest appended), its populations are replayed onto ``u``'s
    rows (each refines the atoms, as a new table does) and compared with everything
    there.  Without it, 22 + 17 − 37 = 2 gave C's count away at 'pass'.

    ``checked`` remembers the pairs (by uid and size) that did not overlap: the same rows
    on both sides give the same answer.
    """
    for other in list(universes):
        # a larger universe joins too when it is of a size with ``u`` (at most twice): a later output
        # holding half of each of two filters' rows (the women, after people over 60 and 60 and
        # under) was placed in the smaller, and the larger's 555 rows against 551 were left apart:
        # 32 + 64 − 45 − 47 = a hidden village's 4 women at 'suppressed' (red team of stop 66)
        larger = other.n > 2 * u.n and not any(other is x for x in any_size)  # (another notebook's: any size)
        if other is u or not other.populations or larger or u.n + other.n > row_limits.MAX_LINKED_ROWS \
                or getattr(other, "in_engine", False) or getattr(u, "in_engine", False):
            continue  # (an engine universe's rows are not ours to match)
        tried = (u.uid, u.n, other.uid, other.n)
        if tried in checked:  # (the same rows on both sides: the same answer)
            continue
        to_u, by_labels = u.locate_rows(other)
        found = to_u >= 0 if to_u is not None else np.zeros(0, dtype=bool)
        # rows found by their labels (their content agreeing) are the same people however few,
        # as when a frame is placed (``place``); by content, half of them (chance matches)
        enough = bool(found.any()) if by_labels else \
            2 * int(found.sum()) >= other.n or u.tells_apart(other, found, to_u)
        if to_u is None or not enough or _distinct(to_u[found]) != int(found.sum()):
            if len(checked) > 256:
                checked.clear()
            checked.add(tried)
            continue
        missing = np.flatnonzero(~found)
        if len(missing):
            start = u.n
            u.extend_rows(other, missing)
            to_u = to_u.copy()
            to_u[missing] = np.arange(start, start + len(missing))
        _replay(u, other, to_u)
        edits.merge(u.published, u.n, other.published, to_u)
        universes.remove(other)


def _replay(u: Universe, other: Universe, to_u: np.ndarray) -> None:
    """Record ``other``'s populations in ``u`` (``to_u``: the row of ``u`` of each row of ``other``)."""
    for p in sorted(other.populations, key=lambda q: output_order(q.out_id)):
        g_u = np.full(u.n, -1, dtype=np.int64)
        g_u[to_u] = p.group[other.row_atom]
        codes, parent, group, atom_size = refine(u.row_atom, u.atom_size, g_u, len(p.labels))
        for q in u.populations:
            q.group = q.group[parent]
        u.row_atom, u.atom_size = codes, atom_size
        p.group = group
        p.universe = u
        u.populations.append(p)
    u.populations.sort(key=lambda q: output_order(q.out_id))
    u.key_columns |= other.key_columns
    u.version += 1
