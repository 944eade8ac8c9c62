"""Linked outputs: a table is only dangerous in company.

The same people appear in every output of a session. Two defences, both driven by the
*rows* behind each published cell (its population):

* **Differencing.** A new cell whose rows differ by 1 to ``threshold - 1`` from those of
  an earlier published cell — or of a *sum* of earlier published cells (districts
  D51 + D52 against a filtered region R5, a filtered total against the grand total), at
  any level of the earlier table (inner cells and margins) — is made primary, with an
  explanation naming both outputs and the cells by their labels. This also catches
  overlapping recodings (0-11/12-17 then 0-5/6-17; ``pd.cut`` bands (59,120] then
  (64,120]). A new cell with exactly the rows of a cell an earlier output *hid* (inner or
  margin: ``describe()``, a constant key, ``groupby(np.zeros(n))`` publishing a hidden
  grand total) is hidden too.
* **Joint audit.** The new table's and related earlier tables' hidden primary cells are
  audited together by an attacker LP over the common refinement of their cells. Only
  what the *new* table makes recoverable counts (a cell already recoverable from earlier
  outputs alone is public knowledge: hiding it again protects nothing); the new table
  then hides, smallest first, only published cells that share rows with a failing cell
  and are not themselves public elsewhere; failing that, it is blocked.

**Row identity.** Rows are not identified by index labels alone (``reset_index(drop=True)``
keeps the people and loses the labels). A session keeps a few *universes*: the union of
rows of related frames, each row fingerprinted by a 64-bit hash of its value per column.
A frame is placed in a universe by its index labels when a sample of rows confirms that
the values agree (fast path), otherwise by a content hash over the columns common to the
frame and the universe that are no output's grouping key (keys may be recodings), with
duplicate rows told apart by their occurrence rank. Rows of a related frame that the
universe lacks are appended. Column hashes are cached per frame object (weak reference).

**Atoms.** Each universe keeps the common refinement of every population recorded in it
(``row_atom``: one int32 per row); a population is one int32 per atom (its group, or -1).
Comparing a new table with an earlier one is then a weighted count over atoms, not over
rows, and no frame is kept alive by the session. Memory is capped (``MAX_BYTES``): the
oldest populations go first.

**Kernel restarts.** The atoms and populations are saved next to the ledger
(``.sdc_magic/<ledger>.linking.npz``, with the per-column hashes of the rows); after a
restart a frame whose rows hash to a saved universe is linked to the outputs of the
earlier kernel as if nothing had happened.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..evidence import rows as row_limits

#: Common cells up to which the joint audit runs (above: skipped, with a note).  With
#: ``joint_bounds`` a 35x28x10 table shown again with margins (8,900 common cells) is
#: audited in ~6.5 CPU s, inside JOINT_AUDIT_SECONDS; it was 5,000 with two scipy LPs per cell.
MAX_JOINT_CELLS = 12_000
MAX_UNIVERSES = 4
MAX_POPULATIONS = 200
MAX_BYTES = 256 * 2**20  # atoms, populations and row hashes of one session
SYNC_SAVE_BYTES = 16 * 2**20  # larger linking memories are saved in a background thread
JOINT_AUDIT_SECONDS = 10.0
#: The small groups of rows several outputs separate together (no table's cell) are audited
#: when there are at most this many, within this many seconds (else left out, with a note).
#: Frames from this many rows are matched by content only when most rows are distinct.
MIN_RANKED_ROWS = 20
MAX_COMMON_TARGETS = 400
#: Earlier related outputs in the joint audit (the newest first); fewer when their common
#: cells pass MAX_JOINT_CELLS.  Was 4: three ordinary tables between a total and two
#: overlapping filters pushed the total out (red team, round 4).
MAX_JOINT_TABLES = 8
COMMON_SECONDS = 2.0
MAX_JOINT_POINTS = 32  # feasible tables carried from one system of the joint audit to the next
MAX_LEVEL_KEYS = 4  # margins at every subset of up to this many keys (else the grand total only)
_MISSING = np.uint64(0x9E3779B97F4A7C15)  # hash of "this row has no such column"
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_GOLD = np.uint64(0x94D049BB133111EB)
COUNTING = frozenset({"size", "count", "sum", "mean", "proportion", "percent", "nunique"})


# ------------------------------------------------------------------ row fingerprints
def _hash_column(col: pd.Series) -> np.ndarray:
    try:
        return pd.util.hash_pandas_object(col, index=False).to_numpy(dtype=np.uint64)
    except TypeError:  # unhashable values (lists, dicts)
        return pd.util.hash_pandas_object(col.astype(str), index=False).to_numpy(dtype=np.uint64)


_frame_hashes: dict[int, tuple[Any, dict[Hashable, tuple[tuple, np.ndarray]]]] = {}
MAX_CACHED_FRAMES = 4


def _stamp(col: pd.Series) -> tuple:
    n = len(col)
    take = np.unique(np.linspace(0, max(n - 1, 0), num=min(n, 16)).astype(np.int64)) if n else np.zeros(0, int)
    return n, str(col.dtype), _hash_column(col.iloc[take]).tobytes()


def frame_hash(frame: pd.DataFrame, column: Hashable) -> np.ndarray:
    """uint64 hash of each row's value in ``column``, cached per frame object (weakly)."""
    fid = id(frame)
    hit = _frame_hashes.get(fid)
    if hit is None or hit[0]() is not frame:
        if len(_frame_hashes) >= MAX_CACHED_FRAMES:
            _frame_hashes.pop(next(iter(_frame_hashes)))

        def forget(ref: Any, fid: int = fid) -> None:
            current = _frame_hashes.get(fid)
            if current is not None and current[0] is ref:
                _frame_hashes.pop(fid, None)

        try:
            ref = weakref.ref(frame, forget)
        except TypeError:
            return _hash_column(frame[column])
        hit = (ref, {})
        _frame_hashes[fid] = hit
    col = frame[column]
    stamp = _stamp(col)
    cached = hit[1].get(column)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    h = _hash_column(col)
    hit[1][column] = (stamp, h)
    return h


def _combine(hashes: list[np.ndarray]) -> np.ndarray:
    out = np.zeros(len(hashes[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for h in hashes:
            out = (out ^ h) * _MIX
            out ^= out >> np.uint64(31)
    return out


def _with_rank(h: np.ndarray) -> np.ndarray:
    """Tell duplicate rows apart by their occurrence rank (filters keep the order)."""
    rank = pd.Series(h).groupby(h, sort=False).cumcount().to_numpy().astype(np.uint64)
    with np.errstate(over="ignore"):
        out = (h ^ (rank * _GOLD)) * _MIX
    return out ^ (out >> np.uint64(29))


def _columns(frame: pd.DataFrame) -> list[Hashable]:
    if not frame.columns.is_unique:
        counts = frame.columns.value_counts()
        return [c for c in frame.columns if counts[c] == 1][:row_limits.MAX_HASHED_COLUMNS]
    return list(frame.columns)[:row_limits.MAX_HASHED_COLUMNS]


# ------------------------------------------------------------------ universes of rows
class Universe:
    """The union of rows of related frames, with the common refinement of their populations."""

    def __init__(self, frame: pd.DataFrame, keys: list[str]) -> None:
        self.n = len(frame)
        self.labels: pd.Index | None = frame.index if frame.index.is_unique else None
        self.hashes: dict[Hashable, np.ndarray] = {c: frame_hash(frame, c) for c in _columns(frame)}
        self.key_columns: set[Hashable] = set(keys)
        self.row_atom = np.zeros(self.n, dtype=np.int32)
        self.atom_size = np.array([self.n], dtype=np.int64)
        self.populations: list[Population] = []
        self.version = 0
        self._combined: dict[tuple, tuple[pd.Index, np.ndarray]] = {}
        self.frames: dict[int, tuple[Any, tuple, np.ndarray]] = {}  # frame -> rows (weak)
        self.uid = secrets.token_hex(6)
        self.hashes_saved = False

    @property
    def n_atoms(self) -> int:
        return len(self.atom_size)

    def nbytes(self) -> int:
        return (self.row_atom.nbytes + self.atom_size.nbytes + sum(h.nbytes for h in self.hashes.values())
                + sum(p.nbytes() for p in self.populations))

    # -------------------------------------------------------- placing a frame
    def locate(self, frame: pd.DataFrame, keys: list[str]) -> np.ndarray | None:
        """Universe row of each row of ``frame`` (-1: not found), or None if not comparable."""
        present = set(_columns(frame))
        common = [c for c in self.hashes if c in present]
        if not common:
            return None
        exclude = self.key_columns | set(keys)
        content = [c for c in common if c not in exclude]
        pos = self._by_labels(frame, content or common)
        if (pos is None or (pos < 0).any()) and content:
            by_content = self._by_content(frame, content)
            if by_content is not None and (pos is None or (by_content >= 0).sum() > (pos >= 0).sum()):
                pos = by_content
        return pos

    def _by_labels(self, frame: pd.DataFrame, check: list[Hashable]) -> np.ndarray | None:
        if self.labels is None or not frame.index.is_unique:
            return None
        if frame.index is self.labels:
            pos = np.arange(len(frame), dtype=np.int64)
        elif (lookup := self._integer_lookup()) is not None and pd.api.types.is_integer_dtype(frame.index.dtype) \
                and not isinstance(frame.index, pd.MultiIndex):
            values = np.asarray(frame.index, dtype=np.int64)
            inside = (values >= 0) & (values < len(lookup))
            pos = np.where(inside, lookup[np.where(inside, values, 0)], -1)
        else:
            pos = _positions(self.labels, frame.index)
            if pos is None:
                return None
        sample = _sample(pos)
        if sample is None:
            return None
        # the same rows when most of their columns agree: a column recoded between two outputs
        # (astype(float), round, str.lower, a value set to missing) does not make new people
        # (red team: a recode between two counts hid a difference of 2 from linking)
        agree = sum(bool(np.array_equal(_hash_column(frame[c].iloc[sample]), self.hashes[c][pos[sample]]))
                    for c in check)
        if agree == 0 or 2 * agree < len(check):
            return None
        return pos

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

    def _by_content(self, frame: pd.DataFrame, columns: list[Hashable]) -> np.ndarray | None:
        cols = tuple(sorted(columns, key=str))
        combined = _combine([frame_hash(frame, c) for c in cols])
        if len(combined) >= MIN_RANKED_ROWS and 2 * len(np.unique(combined)) < len(combined):
            # mostly repeated rows (shared columns such as admin2 only): matching them by rank
            # made the k-th household of a survey the k-th case of the referrals, tying
            # unrelated data sets together (red team, round 5)
            return None
        index, rows = self._content_index(cols)
        found = index.get_indexer(_with_rank(combined))
        return np.where(found >= 0, rows[np.maximum(found, 0)], -1).astype(np.int64)

    def locate_rows(self, other: Universe) -> np.ndarray | None:
        """This universe's row of each row of ``other`` (-1: not here): by index labels when both
        have them and the columns both know agree, else by content hashes."""
        by_labels = self._rows_by_labels(other)
        if by_labels is not None:
            return by_labels
        common = [c for c in self.hashes if c in other.hashes]
        content = [c for c in common if c not in (self.key_columns | other.key_columns)] or common
        if not content:
            return None
        cols = tuple(sorted(content, key=str))
        combined = _combine([other.hashes[c] for c in cols])
        if 2 * len(np.unique(combined)) < len(combined):
            return None  # mostly repeated rows (a constant column): the content tells no rows apart
        index, rows = self._content_index(cols)
        found = index.get_indexer(_with_rank(combined))
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
        pos = _positions(self.labels, other.labels)
        sample = None if pos is None else _sample(pos)
        if sample is None:
            return None
        compared = agree = 0
        for c in self.hashes:
            if c not in other.hashes:
                continue
            mine, theirs = self.hashes[c][pos[sample]], other.hashes[c][sample]
            both = (mine != _MISSING) & (theirs != _MISSING)
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
        return pos

    def extend_rows(self, other: Universe, rows: np.ndarray) -> None:
        """Append rows of ``other`` (their hashes; one new atom outside every population)."""
        k = len(rows)
        if k:
            self._append(lambda c: other.hashes[c][rows] if c in other.hashes else None, k)

    def _append(self, hashes_of: Any, k: int) -> None:
        """Append k rows (their hash per column, None: missing) as one new atom outside every population."""
        for c, h in list(self.hashes.items()):
            add = hashes_of(c)
            self.hashes[c] = np.concatenate([h, np.full(k, _MISSING, dtype=np.uint64) if add is None else add])
        self.row_atom = np.concatenate([self.row_atom, np.full(k, self.n_atoms, dtype=np.int32)])
        self.atom_size = np.concatenate([self.atom_size, [k]])
        for p in self.populations:
            p.group = np.concatenate([p.group, np.array([-1], dtype=p.group.dtype)])
        self.n += k
        self.hashes_saved = False
        self.version += 1
        self._combined.clear()
        self.frames.clear()

    def _content_index(self, cols: tuple) -> tuple[pd.Index, np.ndarray]:
        hit = self._combined.get(cols)
        if hit is None:
            hashes = [self.hashes[c] for c in cols]
            valid = np.ones(self.n, dtype=bool)
            for h in hashes:
                valid &= h != _MISSING
            rows = np.flatnonzero(valid)
            mine = _with_rank(_combine([h[rows] for h in hashes]))
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
        present = set(_columns(frame))
        if labelled and self.labels is not None and frame.index.is_unique:
            extended = self.labels.append(frame.index[new])
            if extended.is_unique and len(extended) == self.n + k:
                self.labels = extended
        # (otherwise the new rows have no label of ours: labels stay for the first rows only)
        pos = pos.copy()
        pos[new] = np.arange(self.n, self.n + k)
        self._append(lambda c: frame_hash(frame, c)[new] if c in present else None, k)
        return pos


def _positions(labels: pd.Index, wanted: pd.Index) -> np.ndarray | None:
    """Position of each wanted label among ``labels`` (-1: absent), None when they cannot be compared."""
    try:
        return np.asarray(labels.get_indexer(wanted), dtype=np.int64)
    except (TypeError, ValueError, pd.errors.InvalidIndexError):
        return None


def _sample(pos: np.ndarray) -> np.ndarray | None:
    """Up to ~256 evenly spread rows found by their labels (where their columns are compared)."""
    ok = np.flatnonzero(pos >= 0)
    return ok[:: max(1, len(ok) // 256)] if len(ok) else None


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
    _levels: dict[tuple[str, ...], tuple[np.ndarray, list[tuple]]] = field(default_factory=dict, repr=False)

    def nbytes(self) -> int:
        return self.group.nbytes + self.size.nbytes + 64 * len(self.labels)

    def name(self, g: int) -> str:
        return cell_name(self.labels[g])

    def level(self, subset: tuple[str, ...]) -> tuple[np.ndarray, list[tuple]]:
        """Per group, its group at the coarser level ``subset`` of keys; and those groups' labels."""
        hit = self._levels.get(subset)
        if hit is not None:
            return hit
        if subset == self.keys:
            hit = (np.arange(len(self.labels), dtype=np.int64), list(self.labels))
        else:
            where = [self.keys.index(k) for k in subset]
            tuples = [tuple(lab[i] for i in where) for lab in self.labels]
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
        return [self.keys, ()]

    def level_facts(self, subset: tuple[str, ...], published: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(group → level group, level sizes, level published, level hidden) at ``subset``.

        A margin is published when every cell in it is, or when the table displayed its
        margins and its protection did not hide this one.
        """
        published = self.published if published is None else published
        mapping, labels = self.level(subset)
        n = len(labels)
        sizes = np.bincount(mapping, weights=self.size, minlength=n).astype(np.int64)
        if subset == self.keys:
            return mapping, sizes, published.copy(), self.hidden_shown | _flags(self.hidden_model.get(subset), n)
        all_pub = np.bincount(mapping, weights=~published, minlength=n) == 0
        hidden = _flags(self.hidden_model.get(subset), n)
        published = all_pub | (self.margins_public & ~hidden & ~_flags(self.margins_hidden.get(subset), n))
        return mapping, sizes, published, hidden


def _flags(ids: set[int] | None, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    if ids:
        arr = np.fromiter((i for i in ids if 0 <= i < n), dtype=np.int64)
        out[arr] = True
    return out


def cell_name(labels: tuple) -> str:
    return " / ".join(_label(v) for v in labels) if labels else "all rows"


def _label(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


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
    unit: Hashable | None = None  # the declared unit column, when the universe holds its values


#: Drafts of the current display (the differencing check, the published-cells lookup and
#: the final record share one), cleared by :func:`clear_cache` after each display.
_drafts: dict[tuple[int, Any], tuple[Any, Any, Draft]] = {}


def clear_cache() -> None:
    _drafts.clear()


# ------------------------------------------------------------------ the session's linker
class Linker:
    """Populations of earlier outputs, grouped by universe, with bounded memory."""

    def __init__(self) -> None:
        self.universes: list[Universe] = []
        self.path: Path | None = None
        self.notes: list[str] = []
        self._loaded = False
        self._saving = threading.Lock()
        self._pending: list[tuple[Universe, np.ndarray, np.ndarray, list[tuple[Population, np.ndarray]]]] | None = None
        self._writer: threading.Thread | None = None

    # list-like view of the populations (newest last)
    def _all(self) -> list[Population]:
        self._ensure_loaded()
        pops = [p for u in self.universes for p in u.populations]
        return sorted(pops, key=lambda p: _order(p.out_id))

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
        self._loaded = True
        self.save()

    # -------------------------------------------------------- drafts
    def draft(self, out_id: str, title: str, entry: Any, positions: np.ndarray | None,
              hidden_flat: np.ndarray | None, threshold: int, flagged: Any = None) -> Draft | None:
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
            base = self._draft(entry, positions, threshold, flagged)
            if base is None:
                return None
            if len(_drafts) >= 8:  # checks outside a display (suggestions, the API) are not cleared after
                _drafts.pop(next(iter(_drafts)))
            _drafts[key] = (entry, positions, base)
        pop = base.pop
        n_groups = len(pop.labels)
        shown = base.display_group >= 0
        visible = shown if hidden_flat is None else shown & ~np.asarray(hidden_flat, dtype=bool)
        published = np.bincount(base.display_group[visible], minlength=n_groups) > 0
        any_shown = np.bincount(base.display_group[shown], minlength=n_groups) > 0
        hidden_shown = any_shown & ~published
        if isinstance(flagged, tuple) and flagged[:1] == ("combined",):
            title = f"{title}, its conditional columns together"
        elif flagged is not None:
            name = flagged[1] if isinstance(flagged, tuple) else flagged
            name = "a condition" if str(name).startswith(("__sdc", ".when")) else repr(name)
            title = f"{title}, its rows with {name} " + ("known" if isinstance(flagged, tuple) else "set")
        fresh = Population(out_id=out_id, title=title, universe=pop.universe, keys=pop.keys, group=pop.group,
                           labels=pop.labels, size=pop.size, published=published, hidden_shown=hidden_shown,
                           threshold=threshold, margins_public=pop.margins_public, _levels=pop._levels)
        return Draft(fresh, base.universe, base.version, base.new_row_atom, base.parent, base.atom_size,
                     base.display_group, base.display_margin, base.unit)

    def _draft(self, entry: Any, positions: np.ndarray, threshold: int, flagged: Any = None
               ) -> Draft | None:
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
            frame = frame.to_frame(name=frame.name if frame.name is not None else "__value__")
        if not isinstance(frame, pd.DataFrame) or len(frame) > row_limits.MAX_LINKED_ROWS or len(frame) == 0:
            return None
        keys = [str(k) for k in (source.keys or [])]
        ids, index = getattr(source, "ids", None), getattr(source, "index", None)
        if ids is None:
            if keys and not all(k in frame.columns for k in keys):
                return None
            ids, index = _compute_group_ids(frame, keys)
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) != len(frame) or index is None:
            return None
        flat = entry.flat
        if not set(keys) <= set(flat.dims):
            return None
        combined: list[Any] | None = None
        if flagged is None:
            ids = _restrict_to_variable(entry, frame, ids)
        elif isinstance(flagged, tuple) and flagged[:1] == ("combined",):
            # disjoint variants as one population over (group, variant): sums across them
            combined = list(flagged[1])
            member = np.full(len(frame), -1, dtype=np.int64)
            for j, v in enumerate(combined):
                mask = _variant_rows(frame, v)
                if mask is None or (mask & (member >= 0)).any():
                    return None  # overlapping rows: not one partition
                member[mask] = j
            ids = np.where((member >= 0) & (ids >= 0), ids * len(combined) + member, -1)
        elif isinstance(flagged, tuple) and flagged[:1] == ("known",):
            if flagged[1] not in frame.columns:
                return None
            ids = np.where(frame[flagged[1]].notna().to_numpy(), ids, -1)
        else:
            at_level = _at_indicator_level(frame, flagged)
            if at_level is None:
                return None
            ids = np.where(at_level, ids, -1)
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
        display_group = np.where(positions >= 0, group_of_entry[np.maximum(positions, 0)], -1)
        # rows of groups the table does not have (keys the call dropped: crosstab, pivot_table and
        # value_counts leave out missing keys) are outside it: a group counted here but shown
        # nowhere would hide the difference those rows make (red team: 37 - 35 = 2 at 'pass')
        in_table = np.zeros(len(labels), dtype=bool)
        in_table[group_of_entry[group_of_entry >= 0]] = True
        ids = np.where((ids >= 0) & in_table[np.clip(ids, 0, max(len(labels) - 1, 0))], ids, -1) \
            if len(labels) else ids
        # what an attacker knows of the margins: those displayed (margins=True), and sums of published
        # cells. (The per-table engine assumes every margin known; across tables that would charge a
        # new table for margins nobody can compute.)
        margins_public = bool(((positions >= 0) & margin[np.maximum(positions, 0)]).any())
        placed = self._place(frame, [k for k in keys if k != "__variant"])
        if placed is None:
            return None
        universe, rows = placed
        universe.key_columns.update(k for k in keys if k in frame.columns)
        n_groups = len(labels)
        g_u = np.full(universe.n, -1, dtype=np.int64)
        ok = (rows >= 0) & (ids >= 0)
        g_u[rows[ok]] = ids[ok]
        codes, parent, group, atom_size = _refine(universe.row_atom, universe.atom_size, g_u, n_groups)
        size = np.bincount(group[group >= 0], weights=atom_size[group >= 0], minlength=n_groups).astype(np.int64)
        pop = Population(out_id="this table", title="", universe=universe, keys=tuple(keys), group=group,
                         labels=labels, size=size, published=np.zeros(n_groups, bool),
                         hidden_shown=np.zeros(n_groups, bool), threshold=threshold,
                         margins_public=margins_public)
        display_margin = np.flatnonzero((positions >= 0) & margin[np.maximum(positions, 0)])
        unit = getattr(entry, "unit", None)
        unit = unit if unit is not None and unit in universe.hashes and unit in frame.columns else None
        return Draft(pop, universe, universe.version, codes, parent, atom_size, display_group, display_margin, unit)

    def _place(self, frame: pd.DataFrame, keys: list[str]) -> tuple[Universe, np.ndarray] | None:
        self._ensure_loaded()
        best: tuple[Universe, np.ndarray] | None = None
        for u in self.universes:
            cached = u.frames.get(id(frame))
            if cached is not None and cached[0]() is frame and len(cached[2]) == len(frame):
                return u, cached[2]
            pos = u.locate(frame, keys)
            if pos is None:
                continue
            matched = int((pos >= 0).sum())
            if matched and (matched >= 0.5 * len(frame) or matched >= 0.5 * u.n):
                best = (u, pos)
                break
        if best is None:
            # Two filters of one frame that overlap only a little (districts A or C, then B
            # or C) are the same people where they overlap: rows found by their index labels
            # with their content agreeing (``_by_labels``) join that universe, however few.
            # Otherwise a third output (everyone) links each of them, but not them together,
            # and 22 + 17 - 37 = 2 gave C's count away at 'pass' (red team, round 3).
            for u in self.universes:
                pos = u._by_labels(frame, [c for c in u.hashes if c in set(_columns(frame))]) \
                    if u.labels is not None else None
                if pos is not None and (pos >= 0).any():
                    best = (u, pos)
                    break
        if best is None:
            if len(self.universes) >= MAX_UNIVERSES:
                # the smallest goes (an aggregated frame shown as a table), never the microdata's
                self.universes.remove(min(self.universes, key=lambda x: (x.n, len(x.populations))))
            u = Universe(frame, keys)
            self.universes.append(u)
            best = (u, np.arange(len(frame), dtype=np.int64))
        u, pos = best
        if (pos < 0).any():
            pos = u.extend(frame, pos, labelled=u.labels is not None)
        self._merge_overlapping(u)
        try:
            u.frames[id(frame)] = (weakref.ref(frame), tuple(keys), pos)
            if len(u.frames) > 4:
                u.frames.pop(next(iter(u.frames)))
        except TypeError:
            pass
        return u, pos

    def _merge_overlapping(self, u: Universe) -> None:
        """Move into ``u`` every other universe whose rows are mostly in ``u`` now.

        Two filters of one frame that overlap a little (districts A or C, then B or C) land
        in two universes when nothing ties their rows together (polars and DuckDB frames,
        a pandas frame after ``reset_index``).  A later output holding most of the rows of
        both (everyone; or A or B) ties them: the other universe's rows are found in ``u``
        by their content (the rest appended), its populations are replayed onto ``u``'s
        rows (each refines the atoms, as a new table does) and compared with everything
        there.  Without it, 22 + 17 − 37 = 2 gave C's count away at 'pass'.
        """
        checked = self.__dict__.setdefault("_merge_checked", set())
        for other in list(self.universes):
            if other is u or not other.populations or other.n > u.n or u.n + other.n > row_limits.MAX_LINKED_ROWS:
                continue
            tried = (u.uid, u.n, other.uid, other.n)
            if tried in checked:  # (the same rows on both sides: the same answer)
                continue
            to_u = u.locate_rows(other)
            found = to_u >= 0 if to_u is not None else np.zeros(0, dtype=bool)
            if to_u is None or 2 * int(found.sum()) < other.n or len(np.unique(to_u[found])) != int(found.sum()):
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
            for p in sorted(other.populations, key=lambda q: _order(q.out_id)):
                g_u = np.full(u.n, -1, dtype=np.int64)
                g_u[to_u] = p.group[other.row_atom]
                codes, parent, group, atom_size = _refine(u.row_atom, u.atom_size, g_u, len(p.labels))
                for q in u.populations:
                    q.group = q.group[parent]
                u.row_atom, u.atom_size = codes, atom_size
                p.group = group
                p.universe = u
                u.populations.append(p)
            u.populations.sort(key=lambda q: _order(q.out_id))
            u.key_columns |= other.key_columns
            u.version += 1
            self.universes.remove(other)

    # -------------------------------------------------------- comparisons
    def _pairs(self, d: Draft, old: Population) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(old group, new group, rows) for every pair of groups sharing rows, or lying outside
        the other table (-1), from the refined atoms."""
        return _cross(old.group[d.parent], len(old.labels), d.pop.group, len(d.pop.labels), d.atom_size)

    def related(self, d: Draft) -> list[Population]:
        return [p for p in d.universe.populations if p.universe is d.universe]

    def findings(self, d: Draft) -> dict[str, Any]:
        """Differencing hits, hidden-elsewhere hits and derivable (public) groups of a draft."""
        new = d.pop
        nb = len(new.labels)
        T = new.threshold
        candidate = new.published if new.published.any() else np.ones(nb, bool)
        hits: dict[int, list[tuple[str, str]]] = {}
        margins: list[tuple[tuple[str, ...], int, str]] = []  # risky margins of the new table
        new_levels = []
        for nsub in new.levels()[1:]:
            nmap, nlabels = new.level(nsub)
            nsizes = np.bincount(nmap, weights=new.size, minlength=len(nlabels)).astype(np.int64)
            npub = np.bincount(nmap, weights=~candidate, minlength=len(nlabels)) == 0
            new_levels.append((nsub, nmap, nlabels, nsizes, npub))
        derivable = np.zeros(nb, dtype=bool)
        units = _UnitGaps(d, T) if d.unit is not None else None
        for old in reversed(self.related(d)):
            a, b, w = self._pairs(d, old)
            if not len(a):
                continue
            # when every cell of the old table is published, its margins are sums of published cells:
            # a new cell (or margin) against them is already checked against the cells themselves
            fully = bool(old.published.all()) and not old.hidden_model and not old.hidden_shown.any()
            for subset in old.levels():
                coarse = subset != old.keys
                mapping, sizes, pub, hidden = old.level_facts(subset)
                if subset == old.keys:
                    su, bu, ww = a, b, w
                else:
                    su, bu, ww = _cross(np.where(a >= 0, mapping[np.maximum(a, 0)], -1), len(sizes), b, nb, w)
                inside = (su >= 0) & (bu >= 0)
                su, bu, ww = su[inside], bu[inside], ww[inside]
                # forward: a new cell against the sum of the old published cells it touches
                gap, exact = _gaps(su, bu, ww, sizes, new.size, pub, nb) if not (fully and coarse) else (
                    np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=bool))
                derivable |= exact
                few_units = units.few(gap, su, bu, old, mapping, forward=True) if units is not None else ()
                for g in np.union1d(np.flatnonzero((gap > 0) & (gap < T) & candidate), few_units).astype(int):
                    if not candidate[g]:
                        continue
                    parts = np.unique(su[bu == g])
                    hits.setdefault(int(g), []).append(("differencing", self._msg(old, subset, parts, new, [g])))
                # reverse: an old published cell against the sum of the new cells it touches
                rgap, _ = _gaps(bu, su, ww, new.size, sizes, candidate, len(sizes))
                few_units = units.few(rgap, su, bu, old, mapping, forward=False) if units is not None else ()
                for s_ in np.union1d(np.flatnonzero((rgap > 0) & (rgap < T) & pub), few_units).astype(int):
                    if not pub[s_]:
                        continue
                    parts = np.unique(bu[su == s_])
                    if any(int(g) in hits for g in parts):
                        continue
                    g = int(parts[np.argmin(new.size[parts])])
                    hits.setdefault(g, []).append(("differencing", self._msg(old, subset, [s_], new, parts)))
                # margins of the new table (derivable from its cells, or displayed) against the old cells
                for nsub, nmap, nlabels, nsizes, npub in ([] if fully and coarse else new_levels):
                    xu, yu, xw = _cross(su, len(sizes), nmap[bu], len(nlabels), ww)
                    inner = (xu >= 0) & (yu >= 0)
                    mgap, _ = _gaps(xu[inner], yu[inner], xw[inner], sizes, nsizes, pub, len(nlabels))
                    for m_ in np.flatnonzero((mgap > 0) & (mgap < T) & (npub | bool(len(d.display_margin)))):
                        inside_m = np.flatnonzero((nmap == m_) & candidate & (new.size > 0))
                        if not len(inside_m):
                            continue
                        parts = np.unique(xu[inner & (yu == m_)])
                        where = cell_name(nlabels[int(m_)]) if nsub else "total"
                        text = self._msg(old, subset, parts, new, []).replace("with this table's ", "with this table's "
                                                                              f"{where}")
                        margins.append((nsub, int(m_), text))
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
                            margins.append((nsub, int(m_), text))
                            inside_m = np.flatnonzero((nmap == m_) & candidate & (new.size > 0))
                            if len(inside_m):
                                g = int(inside_m[np.argmin(new.size[inside_m])])
                                hits.setdefault(g, [("linked", text)])
                # a cell an earlier output hid, published here with exactly its rows
                if not hidden.any():
                    continue
                same = (ww == new.size[bu]) & (ww == sizes[su]) & hidden[su]
                for s_, g in zip(su[same], bu[same], strict=True):
                    if int(g) in hits:
                        continue
                    where = cell_name(old.level(subset)[1][int(s_)]) if subset else "its grand total"
                    hits.setdefault(int(g), []).append(("linked", (
                        f"{old.title} ({old.out_id}) hid these same cases ({where}) to protect its small cells: "
                        "publishing them here would undo that")))
        return {"hits": hits, "derivable": derivable, "margins": margins}

    def _msg(self, old: Population, subset: tuple[str, ...], olds: Any, new: Population, news: Any) -> str:
        names = old.level(subset)[1]
        left = _join([cell_name(names[int(s)]) if subset else "its total" for s in olds])
        right = _join([new.name(int(g)) for g in news]) if len(news) else ""
        return (f"{old.title} ({old.out_id}) publishes {left}; with this table's {right} the two differ "
                f"by fewer than {new.threshold} units: subtracting one from the other would reveal them")

    def differencing_reasons(self, d: Draft, positions: np.ndarray) -> dict[int, list[Any]]:
        """Displayed cells (flat index) to make primary, with reasons naming cells by their labels."""
        from ..rules import Reason

        out: dict[int, list[Any]] = {}
        found_all = self.findings(d)
        for g, found in found_all["hits"].items():
            for i in np.flatnonzero(d.display_group == g):
                out.setdefault(int(i), []).extend(Reason(rule, message) for rule, message in found[:2])
        if found_all["margins"] and d.display_margin is not None and len(d.display_margin):
            # a displayed margin that differs from earlier cells by a few units: the displayed margins
            # are hidden (the sibling margins would add up to it), its smallest cell is protected
            message = found_all["margins"][0][2]
            for i in d.display_margin:
                out.setdefault(int(i), []).append(Reason("differencing", message))
        return out

    def published_elsewhere(self, d: Draft) -> dict[tuple[str, ...], set[tuple]]:
        """Cells of the new table (inner, or margins) whose rows are exactly a cell that earlier
        outputs published: public knowledge, never worth hiding.

        Only single cells: a cell equal to a *sum* of published cells is public too, but pinning
        every such sum leaves the per-table engine too little room (it then blocks tables whose
        small cells are already public); the joint audit accounts for those sums instead.
        """
        out: dict[tuple[str, ...], set[tuple]] = {}
        new = d.pop
        olds = list(reversed(self.related(d)))
        if not olds:
            return out
        for subset in new.levels():
            mapping, labels = new.level(subset)
            nsizes = np.bincount(mapping, weights=new.size, minlength=len(labels)).astype(np.int64)
            level_group = np.where(new.group >= 0, mapping[np.maximum(new.group, 0)], -1)
            public = np.zeros(len(labels), dtype=bool)
            for old in olds:
                aa, bb, w = _cross(old.group[d.parent], len(old.labels), level_group, len(labels), d.atom_size)
                for osub in old.levels():
                    omap, osizes, opub, _ = old.level_facts(osub)
                    s_ = np.where(aa >= 0, omap[np.maximum(aa, 0)], -1)
                    su, bu, ww = _cross(s_, len(osizes), bb, len(labels), w)
                    inside = (su >= 0) & (bu >= 0)
                    one = np.bincount(bu[inside], minlength=len(labels)) == 1
                    public |= _gaps(su[inside], bu[inside], ww[inside], osizes, nsizes, opub, len(labels))[1] & one
            if public.any():
                out[subset] = {tuple(labels[g]) for g in np.flatnonzero(public)}
        return out

    # -------------------------------------------------------- recording
    def commit(self, d: Draft, record: bool = True) -> None:
        """Remember a draft's population (``record=False``: a trial, see :meth:`within_table`)."""
        u = d.universe
        if d.version != u.version:
            return  # the universe changed under the draft (should not happen within one display)
        u.row_atom = d.new_row_atom
        u.atom_size = d.atom_size
        for p in u.populations:
            p.group = p.group[d.parent]
        u.populations.append(d.pop)
        u.version += 1
        if not record:
            return
        self._drop_duplicates(u)
        self._bound()
        self.save()

    def within_table(self, title: str, entry: Any, positions: np.ndarray, threshold: int,
                     variants: list[Any]) -> dict[int, list[Any]]:
        """Differencing between the populations one table publishes side by side.

        A table of counts per sex with the counts of district A and of district B beside them
        (polars ``filter`` inside ``agg``, SQL ``FILTER (WHERE …)``, means of flags) gives
        the rest (C) by subtraction: 37 − 20 − 15 = 2. Each variant (the flagged rows of each
        indicator, then the table's own rows) is compared with those drafted before it, as a
        later output would be; the universe is restored afterwards, so nothing is recorded.
        """
        first = self.draft("this table", title, entry, positions, None, threshold, flagged=variants[0])
        if first is None:
            return {}
        u = first.universe
        saved = (u.row_atom, u.atom_size, u.version, u.populations, [(p, p.group) for p in u.populations])
        out: dict[int, list[Any]] = {}
        try:
            u.populations = []  # only this table's populations take part
            for n, variant in enumerate(variants):
                d = first if n == 0 else self.draft("this table", title, entry, positions, None, threshold,
                                                    flagged=variant)
                if d is None or d.universe is not u:
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
            clear_cache()  # drafts made during the trial describe atoms that no longer exist
        return out

    def _drop_duplicates(self, u: Universe) -> None:
        """The same table displayed again replaces its earlier record (it publishes nothing new)."""
        newest = u.populations[-1]
        same = [p for p in u.populations[:-1] if p.keys == newest.keys and len(p.labels) == len(newest.labels)
                and np.array_equal(p.size, newest.size) and np.array_equal(p.published, newest.published)
                and p.hidden_model == newest.hidden_model and p.margins_hidden == newest.margins_hidden
                and np.array_equal(p.group, newest.group)]
        if same:
            u.populations = [p for p in u.populations if not any(p is q for q in same)]

    def _bound(self) -> None:
        while len(self) > MAX_POPULATIONS or (self.nbytes() > MAX_BYTES and len(self) > 1):
            oldest = min((p for u in self.universes for p in u.populations), key=lambda p: _order(p.out_id))
            oldest.universe.populations.remove(oldest)
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
            self.universes = _load(self.path)
        except Exception as exc:  # a broken file never stops checking: linking starts afresh
            self.notes.append(f"linking memory of earlier kernels could not be read ({type(exc).__name__})")
            self.universes = []

    def save(self) -> None:
        """Write the linking memory beside the ledger: at once when small, else in a background
        thread (the arrays are replaced, never changed in place, so a snapshot is consistent)."""
        if self.path is None:
            return
        snapshot = [(u, u.row_atom, u.atom_size, [(p, p.group) for p in u.populations]) for u in self.universes]
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

    def _write(self, snapshot: list[tuple[Universe, np.ndarray, np.ndarray, list[tuple[Population, np.ndarray]]]]) -> None:
        path = self.path
        if path is None:
            return
        try:
            _save(path, snapshot)
        except Exception as exc:
            self.notes.append(f"linking memory could not be saved ({type(exc).__name__})")
            self.path = None


def _order(out_id: str) -> tuple[int, str]:
    digits = "".join(ch for ch in out_id if ch.isdigit())
    return (int(digits) if digits else -1, out_id)


def _join(names: list[str], limit: int = 3) -> str:
    names = list(dict.fromkeys(names))
    if len(names) > limit:
        return " + ".join(names[:limit]) + f" + {len(names) - limit} more"
    return " + ".join(names)


def _refine(row_atom: np.ndarray, atom_size: np.ndarray, g: np.ndarray, n_groups: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split the atoms by a new grouping ``g`` of the rows (-1: outside it).

    Returns (new atom of each row, parent atom of each new atom, group of each new atom,
    rows per new atom). Only atoms the grouping cuts are factorised again: a table over
    keys the session has already seen costs a few vector passes over the rows.
    """
    n_atoms = len(atom_size)
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


def _cross(a: np.ndarray, na: int, b: np.ndarray, nb: int, w: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty pairs (a, b) with their summed weights (-1: outside that table; both -1 dropped)."""
    code = (a.astype(np.int64) + 1) * (nb + 1) + (b.astype(np.int64) + 1)
    span = (na + 1) * (nb + 1)
    if span <= max(4 * len(code), 1 << 16):
        counts = np.bincount(code, weights=w, minlength=span)
        counts[0] = 0
        nz = np.flatnonzero(counts)
        return nz // (nb + 1) - 1, nz % (nb + 1) - 1, counts[nz].astype(np.int64)
    codes, uniq = pd.factorize(code)
    counts = np.bincount(codes, weights=w, minlength=len(uniq))
    keep = (uniq != 0) & (counts > 0)
    uniq, counts = uniq[keep], counts[keep]
    return uniq // (nb + 1) - 1, uniq % (nb + 1) - 1, counts.astype(np.int64)


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

    def __init__(self, d: Draft, threshold: int) -> None:
        self.d = d
        self.threshold = threshold
        self.hashes = d.universe.hashes[d.unit]
        self._csr: tuple[np.ndarray, np.ndarray] | None = None
        self.most_rows = _most_rows_per_unit(d.universe, d.unit)

    def _rows_of(self, atoms: np.ndarray) -> np.ndarray:
        if self._csr is None:
            order = np.argsort(self.d.new_row_atom, kind="stable")
            starts = np.searchsorted(self.d.new_row_atom[order], np.arange(len(self.d.atom_size) + 1))
            self._csr = (order, starts)
        order, starts = self._csr
        lens = starts[atoms + 1] - starts[atoms]
        total = int(lens.sum())
        if not total:
            return np.zeros(0, dtype=np.int64)
        offsets = np.repeat(starts[atoms] - np.cumsum(lens) + lens, lens) + np.arange(total)
        return order[offsets]

    def count(self, atoms: np.ndarray) -> int:
        """Distinct units among the rows of ``atoms`` (a row without a unit value counts as one)."""
        values = self.hashes[self._rows_of(atoms)]
        known = values != _MISSING
        return int(len(np.unique(values[known])) + (~known).sum())

    def few(self, gap: np.ndarray, su: np.ndarray, bu: np.ndarray, old: Population, mapping: np.ndarray,
            forward: bool) -> np.ndarray:
        """Cells (new cells if ``forward``, else old level cells) whose row gap is at least the
        threshold but whose differing rows hold fewer than threshold units."""
        T = self.threshold
        # d differing rows hold at least d / (most rows of one unit) units: most gaps need no count
        cands = np.flatnonzero((gap >= T) & (gap <= self.MAX_ROWS) & (gap < T * self.most_rows)
                               )[: self.MAX_CANDIDATES]
        if not len(cands):
            return np.zeros(0, dtype=np.int64)
        d = self.d
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
            n = self.count(np.flatnonzero(in_old ^ in_new))
            if 0 < n < T:
                out.append(int(c))
        return np.asarray(out, dtype=np.int64)


def _most_rows_per_unit(universe: Universe, unit: Hashable) -> int:
    """The largest number of rows one unit has in the universe (cached per universe size)."""
    cache = universe.__dict__.setdefault("_most_rows", {})
    hit = cache.get(unit)
    if hit is not None and hit[0] == universe.n:
        return hit[1]
    h = universe.hashes[unit]
    known = h[h != _MISSING]
    most = int(np.unique(known, return_counts=True)[1].max()) if len(known) else 1
    cache[unit] = (universe.n, most)
    return most


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
        frame = frame.to_frame(name=frame.name if frame.name is not None else "__value__")
    return _Composed(frame=frame, keys=list(source.keys), ids=composed, index=source.index)


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
    if stats <= {"sum"}:
        # the sum of an indicator (0/1 flag, boolean, two-valued coding) counts the rows at
        # its attribute level: those rows are the table's population, as for a count of them
        # (red team: sum(flag) by sex, then a count of flagged rows outside district C)
        at_level = _at_indicator_level(frame, var)
        if at_level is not None:
            return np.where(at_level, ids, -1)
    known = frame[var].notna().to_numpy()
    return np.where(known, ids, -1)


def variant_cells(found: dict[int, Any], entry: Any, positions: np.ndarray, variant: Any) -> dict[int, Any]:
    """Of the cells a differencing hit names (every cell of a group), those publishing the
    variant population (its variable's cells); all of them if none does or for ``None``."""
    if variant is None or not found or (isinstance(variant, tuple) and variant[:1] == ("combined",)):
        return found  # a combined population's groups are already its variants' cells
    known = isinstance(variant, tuple)
    var = variant[1] if known else variant
    try:
        at = np.maximum(np.asarray(positions), 0)
        cell_var = np.asarray(entry.evidence.var, dtype=object)[at]
        cell_stat = np.asarray(entry.evidence.stat).astype(str)[at]
    except (AttributeError, IndexError, TypeError):
        return found
    stats = ("count",) if known else ("sum", "mean")
    mine = {i: rs for i, rs in found.items()
            if i < len(cell_var) and cell_var[i] == var and cell_stat[i] in stats}
    return mine or found


def _variant_rows(frame: pd.DataFrame, variant: Any) -> np.ndarray | None:
    """The rows a variant population holds (see :func:`indicator_variables`)."""
    if isinstance(variant, tuple) and variant[:1] == ("known",):
        return frame[variant[1]].notna().to_numpy() if variant[1] in frame.columns else None
    return _at_indicator_level(frame, variant)


def _variant_of_cells(entry: Any, variants: list[Any]) -> np.ndarray:
    """Per entry cell, which variant its column publishes (-1: none)."""
    ev = entry.evidence
    cell_var = np.asarray(ev.var, dtype=object)
    cell_stat = np.asarray(ev.stat).astype(str)
    out = np.full(len(cell_var), -1, dtype=np.int64)
    for j, v in enumerate(variants):
        known = isinstance(v, tuple)
        var = v[1] if known else v
        stats = ("count",) if known else ("sum", "mean")
        hit = np.fromiter((x == var for x in cell_var), dtype=bool, count=len(cell_var)) & np.isin(cell_stat, stats)
        out[hit & (out < 0)] = j
    return out


def _at_indicator_level(frame: pd.DataFrame, var: Any) -> np.ndarray | None:
    """Rows at the attribute level of an indicator column (None: not an indicator)."""
    from ..evidence.facts import indicator_level

    if var not in frame.columns:
        return None
    col = frame[var]
    values = col.to_numpy(dtype=float) if pd.api.types.is_bool_dtype(col) else \
        pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    level = indicator_level(values)
    return None if level is None else values == level


def indicator_variables(entry: Any) -> list[Any]:
    """Indicator variables whose flagged rows a table publishes *besides* its own population.

    A mean of a 0/1 flag times the group's count (shown beside it, or published elsewhere)
    is the count of the flagged rows; so is a sum of the flag in a table that also counts
    rows. Those flagged rows are a second population of the same output, linked like a
    count of them (red team: count and avg(flag) by sex, then the flagged count outside one
    district differs by one person). A table of the flag's sums alone is already linked as
    the flagged rows (:func:`_restrict_to_variable`).
    """
    ev = getattr(entry, "evidence", None)
    source = getattr(entry, "source", None)
    if ev is None or source is None:
        return []
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
        if only_sums or var not in frame.columns:
            continue
        if _at_indicator_level(frame, var) is not None:
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
    out = out[:6]
    if len(out) >= 2:
        # side by side, disjoint variants add up (district A and B beside each other: their sum
        # against a total published elsewhere gives C); one population over (group, variant)
        out.append(("combined", tuple(out)))
    return out


def _compute_group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index]:
    if not keys:
        return np.zeros(len(frame), dtype=np.int64), pd.Index(["all"])
    gb = frame.groupby(keys, observed=True, dropna=False, sort=False)
    grouper = gb._grouper
    ids = grouper.ids if hasattr(grouper, "ids") else grouper.group_info[0]
    return np.asarray(ids, dtype=np.int64), grouper.result_index


def _canon_index(index: pd.Index, keys: list[str]) -> pd.Index:
    from ..evidence.flatten import canonical_labels

    if isinstance(index, pd.MultiIndex):
        names = [str(n) for n in index.names]
        order = [names.index(k) if k in names else i for i, k in enumerate(keys)]
        return pd.MultiIndex.from_arrays([canonical_labels(index.get_level_values(i)) for i in order])
    return pd.Index(canonical_labels(index), dtype=object)


def record_hidden_model(pop: Population, models: list[dict[str, Any]]) -> None:
    """Remember which cells — inner or margins — the protection of this output hid.

    A later output whose cell has exactly the rows of one of them must hide it too: the
    pattern that protects this output relied on it staying hidden.
    """
    from ..evidence.flatten import canonical_labels

    keys = list(pop.keys)
    for model in models:
        cells = model["cells"]
        columns = dict(zip(model["dims"], model.get("columns", model["dims"]), strict=True))
        if not set(keys) <= set(columns):
            continue
        hidden = cells[cells["status"].isin(["primary", "secondary"])]
        if hidden.empty:
            continue
        labels = {k: hidden[columns[k]].astype(object).to_numpy() for k in keys}
        # canonical text of every label, once per column (one call per cell cost 0.7 s
        # on a 2,400-cell pattern)
        texts = {k: np.array([str(v) for v in canonical_labels(labels[k])], dtype=object) for k in keys}
        fixed_mask = np.stack([labels[k] != "Total" for k in keys], axis=1) if keys else np.zeros((len(hidden), 0), bool)
        for pattern in {tuple(row) for row in fixed_mask.tolist()}:
            subset = tuple(k for k, f in zip(keys, pattern, strict=True) if f)
            rows = np.flatnonzero((fixed_mask == np.array(pattern, dtype=bool)).all(axis=1))
            level_labels = pop.level(subset)[1]
            if subset:
                lookup = {tuple(str(v) for v in lab): i for i, lab in enumerate(level_labels)}
                groups = set()
                for r in rows.tolist():
                    key = tuple(texts[k][r] for k in subset)
                    g = lookup.get(key)
                    if g is not None:
                        groups.add(g)
            else:
                groups = {0}
            if groups:
                pop.hidden_model.setdefault(subset, set()).update(groups)


def record_hidden_margins(d: Draft, entry: Any, positions: np.ndarray, hidden_flat: np.ndarray) -> None:
    """Remember the displayed margins (``margins=True``) the display hides.

    The protection model may publish a margin that the display then hides (a margin
    made of exactly the rows of a cell hidden elsewhere, a differencing margin): without
    this, the linking model took every displayed margin as published, and the joint
    audit derived from a hidden total the count of the few rows a filter left out.
    """
    from ..evidence.flatten import canonical_labels

    label = getattr(entry, "margin_label", None)
    if label is None or d.display_margin is None or not len(d.display_margin):
        return
    pop = d.pop
    keys = list(pop.keys)
    flat = entry.flat
    if not set(keys) <= set(flat.dims):
        return
    hidden = np.asarray(hidden_flat, dtype=bool)
    for i in d.display_margin.tolist():
        if i >= len(hidden) or not hidden[i]:
            continue
        cell = int(positions[i])
        values = {k: flat.dims[k][cell] for k in keys}
        subset = tuple(k for k in keys if not (isinstance(values[k], str) and values[k] == label))
        if subset == tuple(keys):
            continue
        wanted = tuple(str(canonical_labels(np.array([values[k]], dtype=object))[0]) for k in subset)
        for g, lab in enumerate(pop.level(subset)[1]):
            if tuple(str(v) for v in lab) == wanted:
                pop.margins_hidden.setdefault(subset, set()).add(g)
                break


# ------------------------------------------------------------------ joint audit
def joint_audit(d: Draft, linker: Linker, protection: float, max_tables: int = MAX_JOINT_TABLES,
                seconds: float = JOINT_AUDIT_SECONDS) -> tuple[list[int], list[str], list[str]]:
    """Audit the new table's and related earlier tables' hidden primaries together.

    Returns (published groups of the new table to hide in addition, problems that remain,
    notes). Only failures the new table causes count: a cell an attacker already recovers
    from earlier outputs alone is public knowledge (noted, not charged to this table).
    An audit that does not finish within ``seconds`` is a problem (the table is blocked:
    fail closed), never a silent pass.
    """
    try:
        return _joint_audit(d, linker, protection, max_tables, time.monotonic() + seconds)
    except TimeoutError:
        return [], [f"the joint audit with earlier outputs did not finish within {seconds:g} s "
                    "(aggregate up, or display fewer related tables)"], []


def _joint_audit(d: Draft, linker: Linker, protection: float, max_tables: int, deadline: float
                 ) -> tuple[list[int], list[str], list[str]]:
    new = d.pop
    olds = list(reversed(linker.related(d)))[:max_tables]
    if not olds:
        return [], [], []
    m = protection / 100.0
    tables = [new, *olds]
    groups_at = [new.group, *(p.group[d.parent] for p in olds)]
    # common refinement of the involved tables over the atoms
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
    if n_cells > MAX_JOINT_CELLS:
        if len(tables) > 2:
            return _joint_audit(d, linker, protection, len(tables) - 2, deadline)
        return [], [], [f"joint audit with earlier outputs skipped: {n_cells:,} cells in common"]
    cell_group = [np.full(n_cells, -1, dtype=np.int64) for _ in tables]
    for t, g in enumerate(groups_at):
        cell_group[t][cell_of_atom] = g[atoms]

    def targets(t: int) -> list[tuple[int, int]]:
        pop = tables[t]
        hidden = ~pop.published & (pop.size > 0) & (pop.size < pop.threshold)
        return [(t, int(g)) for g in np.flatnonzero(hidden)]

    # Common cells that are no table's cell: rows that the outputs *together* separate.
    # Everyone (37), A or C (22), B or C (17): no cell is small, yet 22 + 17 - 37 = 2 is
    # the count of C.  A small common cell is a target too (t = -1, g = its index):
    # the outputs together must not pin it, as they must not pin a hidden cell.
    cell_size = np.bincount(cell_of_atom, weights=d.atom_size[atoms], minlength=n_cells)

    # ... and unions of them that an extra key splits (t = -2): the rows in the same outputs
    # with the same labels on this table's keys that earlier outputs share (C's women split
    # by flag in one output: each half can move, their sum 22 + 17 - 37 = 2 cannot); and
    # with the same outputs only (the small group itself, whatever the keys).
    coarse: list[np.ndarray] = []
    # with a unit column declared, a group is also small when it holds few units (8 episode
    # rows of 2 people): distinct unit hashes per group of common cells
    unit_rows: tuple[np.ndarray, np.ndarray] | None = None
    if d.unit is not None and d.unit in d.universe.hashes \
            and len(d.universe.hashes[d.unit]) == len(d.new_row_atom):
        cell_of = np.full(len(d.atom_size), -1, dtype=np.int64)
        cell_of[atoms] = cell_of_atom
        row_cell = cell_of[d.new_row_atom]
        inside_rows = row_cell >= 0
        unit_rows = (row_cell[inside_rows], d.universe.hashes[d.unit][inside_rows])

    def few_units(group_of_cell: np.ndarray, n_groups: int) -> np.ndarray:
        """Per group of common cells: True when it holds 1 .. threshold-1 distinct units."""
        if unit_rows is None or not n_groups:
            return np.zeros(n_groups, dtype=bool)
        g = group_of_cell[unit_rows[0]]
        pairs = pd.DataFrame({"g": g, "u": unit_rows[1]}).drop_duplicates()
        units = np.bincount(pairs["g"].to_numpy(dtype=np.int64), minlength=n_groups)
        return (units > 0) & (units < new.threshold)

    def table_cell_sets() -> set[tuple[int, ...]]:
        out: set[tuple[int, ...]] = set()
        for t in range(len(tables)):
            g = cell_group[t]
            inside = np.flatnonzero(g >= 0)
            order = inside[np.argsort(g[inside], kind="stable")]
            bounds = np.flatnonzero(np.diff(g[order])) + 1
            out.update(tuple(sorted(part.tolist())) for part in np.split(order, bounds))
        return out

    def common_targets() -> list[tuple[int, int]]:
        small = (cell_size > 0) & (cell_size < new.threshold)
        small |= (cell_size > 0) & few_units(np.arange(n_cells), n_cells)
        if not small.any():
            return []
        for t in range(len(tables)):  # a common cell that is a cell of some table is judged as that cell
            g = cell_group[t]
            inside = g >= 0
            per_group = np.bincount(g[inside], minlength=len(tables[t].labels))
            small &= ~(inside & (per_group[np.maximum(g, 0)] == 1))
        return [(-1, int(c)) for c in np.flatnonzero(small)]

    def coarse_targets() -> list[tuple[int, int]]:
        inside = np.stack([g >= 0 for g in cell_group], axis=1)
        shared_keys = [k for k in new.keys if any(k in t.keys for t in tables[1:])]
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
        known = table_cell_sets()
        out: list[tuple[int, int]] = []
        for code in (member_code * (n_cells + 1) + label_code, member_code) if shared_keys else (member_code,):
            groups, inverse = np.unique(code, return_inverse=True)
            sizes = np.bincount(inverse, weights=cell_size, minlength=len(groups))
            small = (sizes > 0) & ((sizes < new.threshold) | few_units(inverse, len(groups)))
            for j in np.flatnonzero(small).tolist():
                cells = np.flatnonzero(inverse == j)
                key = tuple(cells.tolist())
                if len(cells) < 2 or key in known:
                    continue  # a common cell (checked above) or a table's own cell
                known.add(key)
                coarse.append(cells)
                out.append((-2, len(coarse) - 1))
        return out

    def size_of(t: int, g: int) -> float:
        if t == -2:
            return float(cell_size[coarse[g]].sum())
        return float(cell_size[g]) if t < 0 else float(tables[t].size[g])

    def members(t: int, g: int) -> np.ndarray:
        if t == -2:
            return coarse[g]
        return np.array([g], dtype=np.int64) if t < 0 else np.flatnonzero(cell_group[t] == g)

    def named(t: int, g: int) -> str:
        if t < 0:
            c = int(coarse[g][0]) if t == -2 else g
            return "a small group of rows that this table and earlier outputs separate together (" + \
                _join(sorted({f"{tables[u].out_id}: {tables[u].name(int(cell_group[u][c]))}" if u else
                              f"this table: {new.name(int(cell_group[0][c]))}"
                              for u in range(len(tables)) if cell_group[u][c] >= 0})) + ")"
        return f"{tables[t].title} ({tables[t].out_id}): {tables[t].name(g)}" if t else f"this table: {new.name(g)}"

    def constraints(use: list[int], extra: set[int]) -> tuple[Any, np.ndarray]:
        from scipy.sparse import csr_matrix

        rows, cols, rhs = [], [], []
        for t in use:
            pop = tables[t]
            published = None
            if t == 0 and extra:
                published = pop.published.copy()
                published[list(extra)] = False
            for subset in pop.levels():
                mapping, sizes, pub, _ = pop.level_facts(subset, published)
                g = cell_group[t]
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
        A = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(rhs), n_cells))
        return A, np.asarray(rhs)

    points: list[np.ndarray] = []  # feasible tables found so far (re-checked for each system)
    budget = {"common": np.inf}
    members_of: dict[tuple[int, int], np.ndarray] = {}

    def intervals(use: list[int], extra: set[int], wanted: list[tuple[int, int]]) -> dict[tuple[int, int], tuple]:
        """Bounds of each wanted cell: attained values where they meet the requirement, exact otherwise.

        (``joint_bounds``: one warm-started model per system; failures are always decided
        by an exact optimum, so verdicts are those of the exact intervals.)
        """
        from .joint_bounds import JointBounds

        limit = min(deadline, budget["common"]) if any(t < 0 for t, _ in wanted) else deadline
        if time.monotonic() > limit:
            raise TimeoutError
        A, b = constraints(use, extra)
        engine = JointBounds(A, b, limit, points)
        keys, cells, values = [], [], []
        for t, g in wanted:
            got = members_of.get((t, g))
            if got is None:
                got = members_of[(t, g)] = members(t, g)
            if len(got):
                keys.append((t, g))
                cells.append(got)
                values.append(size_of(t, g))
        found = engine.bounds(cells, np.asarray(values), m)
        points[:] = engine.points[-MAX_JOINT_POINTS:]
        return dict(zip(keys, found, strict=True))

    def failing(found: dict[tuple[int, int], tuple]) -> list[tuple[int, int]]:
        bad = []
        for (t, g), (lo, hi) in found.items():
            v = size_of(t, g)
            if hi - lo <= 1e-9 or lo > (1 - m) * v + 1e-9 or hi < (1 + m) * v - 1e-9:
                bad.append((t, g))
        return bad

    everything = list(range(len(tables)))
    extra: set[int] = set()
    added: list[int] = []
    notes: list[str] = []
    table_targets = [tg for t in everything for tg in targets(t)]
    common = common_targets()
    if len(common) <= MAX_COMMON_TARGETS:
        common += coarse_targets()
    if len(common) > MAX_COMMON_TARGETS:
        notes.append(f"{len(common):,} small groups of rows that this table and earlier outputs separate "
                     "together were not audited (too many to check while displaying)")
        common = []
    all_targets = table_targets + common
    if not all_targets:
        return [], [], notes
    budget["common"] = time.monotonic() + COMMON_SECONDS
    try:
        bad = failing(intervals(everything, extra, all_targets))
        budget["common"] = np.inf  # (the first audit decided: the rest runs to the audit's own deadline)
    except TimeoutError:
        if not common or time.monotonic() > deadline:
            raise
        # the small shared groups are an extra layer: past their budget they are left out
        # (said in a note), the table's own hidden cells keep the whole audit
        notes.append(f"{len(common):,} small groups of rows that this table and earlier outputs separate "
                     f"together were not all audited within {COMMON_SECONDS:g} s")
        all_targets = table_targets
        if not all_targets:
            return [], [], notes
        bad = failing(intervals(everything, extra, all_targets))
    if bad:
        # already recoverable without this table: public knowledge, not this table's doing
        before = set(failing(intervals(everything[1:], set(), bad)))
        if before:
            names = _join([named(t, g) for t, g in before])
            notes.append(f"earlier outputs together already reveal {names}; this table adds nothing to that")
        excluded = before
        bad = [x for x in bad if x not in excluded]
    else:
        excluded = set()
    derivable = linker.findings(d)["derivable"] if bad else np.zeros(len(new.labels), bool)
    for _ in range(12):
        if not bad:
            break
        progress = False
        for t, g in bad:
            pick = _candidate(members(t, g), tables, cell_group, extra, derivable)
            if pick is None:
                continue
            extra.add(pick)
            added.append(pick)
            progress = True
        if not progress:
            break
        wanted = [tg for tg in all_targets if tg not in excluded]
        bad = failing(intervals(everything, extra, wanted))
    if not bad:
        # smallest loss: drop every added cell the others make unnecessary (last added first)
        wanted = [tg for tg in all_targets if tg not in excluded]
        for g in reversed(list(added)):
            trial = extra - {g}
            if not failing(intervals(everything, trial, wanted)):
                extra = trial
                added.remove(g)
        return added, [], notes
    names = _join([named(t, g) for t, g in bad])
    return added, [f"linked outputs leave hidden cells recoverable ({names})"], notes


def _candidate(members: np.ndarray, tables: list[Population], cell_group: list[np.ndarray], extra: set[int],
               derivable: np.ndarray) -> int | None:
    """The published cell of the new table (``tables[0]``) to hide next for a failing cell.

    First the new cells that share rows with it (smallest first); otherwise those that
    share a published constraint with it — a cell or margin of any table containing its
    rows, smallest constraint first (hiding the complement of a hidden cell within its
    total). Cells public elsewhere are never chosen: hiding them protects nothing.
    """
    new = tables[0]

    def usable(groups: np.ndarray) -> list[int]:
        return [int(x) for x in np.unique(groups) if x >= 0 and new.published[x] and x not in extra
                and not derivable[x]]

    near = usable(cell_group[0][members])
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
                for x in usable(cell_group[0][level == s_]):
                    options.append((int(sizes[s_]), int(new.size[x]), x))
    return min(options)[2] if options else None


# ------------------------------------------------------------------ persistence
MAX_SAVED_ROWS = 2_000_000


def _hashes_path(path: Path, uid: str) -> Path:
    return path.with_name(f"{path.name}.{uid}.rows.npz")


def _save(path: Path, snapshot: list[tuple[Universe, np.ndarray, np.ndarray, list[tuple[Population, np.ndarray]]]]) -> None:
    """Atoms and populations in one file (rewritten after each output, small); the row hashes
    of each universe in a file of their own, written only when its rows change."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"schema": 1, "universes": []}
    for ui, (u, row_atom, atom_size, populations) in enumerate(snapshot):
        if u.n > MAX_SAVED_ROWS:
            continue
        cols = [c for c in u.hashes if isinstance(c, str)]
        if not u.hashes_saved:
            rows = _hashes_path(path, u.uid)
            tmp = rows.with_name(rows.name + ".tmp.npz")
            np.savez(tmp, **{f"h{ci}": u.hashes[c] for ci, c in enumerate(cols)})
            tmp.replace(rows)
            u.hashes_saved = True
        umeta: dict[str, Any] = {"uid": u.uid, "n": len(row_atom), "columns": cols,
                                 "key_columns": sorted(str(k) for k in u.key_columns), "populations": []}
        arrays[f"u{ui}_row_atom"] = row_atom
        arrays[f"u{ui}_atom_size"] = atom_size
        for pi, (p, group) in enumerate(populations):
            arrays[f"u{ui}_p{pi}_group"] = group
            arrays[f"u{ui}_p{pi}_size"] = p.size
            arrays[f"u{ui}_p{pi}_published"] = p.published
            arrays[f"u{ui}_p{pi}_hidden"] = p.hidden_shown
            umeta["populations"].append({
                "out_id": p.out_id, "title": p.title, "keys": list(p.keys), "threshold": p.threshold,
                "margins_public": p.margins_public, "labels": [[_json_label(v) for v in lab] for lab in p.labels],
                "hidden_model": [[list(k), sorted(int(x) for x in v)] for k, v in p.hidden_model.items()],
                "margins_hidden": [[list(k), sorted(int(x) for x in v)] for k, v in p.margins_hidden.items()]})
        umeta["index"] = ui
        meta["universes"].append(umeta)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8), **arrays)
    tmp.replace(path)
    keep = {_hashes_path(path, u["uid"]).name for u in meta["universes"]}
    for old in path.parent.glob(f"{path.name}.*.rows.npz"):
        if old.name not in keep:
            old.unlink(missing_ok=True)


def _json_label(v: Any) -> Any:
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def _load(path: Path) -> list[Universe]:
    if not path.is_file():
        return []
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
        out = []
        for um in meta["universes"]:
            ui = um["index"]
            u = Universe.__new__(Universe)
            u.n = int(um["n"])
            u.uid = str(um["uid"])
            u.hashes_saved = True
            u.labels = None  # the index of the earlier kernel's frames is gone: content hashes only
            with np.load(_hashes_path(path, u.uid), allow_pickle=False) as rows:
                u.hashes = {c: np.asarray(rows[f"h{ci}"], dtype=np.uint64)[:u.n] for ci, c in enumerate(um["columns"])}
            u.key_columns = set(um["key_columns"])
            u.row_atom = np.asarray(data[f"u{ui}_row_atom"], dtype=np.int32)
            u.atom_size = np.asarray(data[f"u{ui}_atom_size"], dtype=np.int64)
            u.version = 0
            u._combined = {}
            u.frames = {}
            u.populations = []
            for pi, pm in enumerate(um["populations"]):
                p = Population(out_id=pm["out_id"], title=pm["title"], universe=u, keys=tuple(pm["keys"]),
                               group=np.asarray(data[f"u{ui}_p{pi}_group"], dtype=np.int32),
                               labels=[tuple(lab) for lab in pm["labels"]],
                               size=np.asarray(data[f"u{ui}_p{pi}_size"], dtype=np.int64),
                               published=np.asarray(data[f"u{ui}_p{pi}_published"], dtype=bool),
                               hidden_shown=np.asarray(data[f"u{ui}_p{pi}_hidden"], dtype=bool),
                               threshold=int(pm["threshold"]), margins_public=bool(pm["margins_public"]),
                               hidden_model={tuple(k): set(v) for k, v in pm["hidden_model"]},
                               margins_hidden={tuple(k): set(v) for k, v in pm.get("margins_hidden", [])})
                u.populations.append(p)
            out.append(u)
    return out
