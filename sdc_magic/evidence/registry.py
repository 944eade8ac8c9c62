"""The session registry: every captured aggregation and the evidence for each of its cells.

Displayed objects are matched back to an entry first by identity (the very object the
call returned), then by their layout-free cell keys and values (a reshaped result),
and last by position (a result whose labels were renamed but whose values are intact).
The registry is bounded so that holding evidence never grows without limit: a budget in
megabytes (``memory_mb`` in the project configuration, ``SDC_MAGIC_MEMORY_MB``, default
256) covers every entry's own arrays and the source frames it keeps alive, with
least-recently-used eviction. Source frames are held weakly, plus strongly for the most
recently used ones within the budget: a frame the analyst still holds costs nothing extra,
while a private copy (``crosstab`` builds one) is freed once it leaves the budget. An
evicted result is no longer recognised and is checked as unverified (counts, or ``?`` and
``review``): never shown raw, never exportable as verified.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .flatten import Flat, numeric, values_match

MAX_ENTRIES = 256
#: Default evidence budget (MB): entries' arrays plus the source frames kept alive.
DEFAULT_BUDGET_MB = 256.0
#: Failure messages kept (the newest); a long session must not grow a list without bound.
MAX_FAILURES = 1_000


def default_budget_mb() -> float:
    """``SDC_MAGIC_MEMORY_MB`` if set to a positive number, else :data:`DEFAULT_BUDGET_MB`."""
    try:
        value = float(os.environ.get("SDC_MAGIC_MEMORY_MB", ""))
    except ValueError:
        return DEFAULT_BUDGET_MB
    return value if value > 0 and value == value and value != float("inf") else DEFAULT_BUDGET_MB


@dataclass
class CellEvidence:
    """Evidence per cell of one captured result (arrays aligned with the entry's key)."""

    stat: np.ndarray
    var: np.ndarray
    units: np.ndarray
    total: np.ndarray
    total_abs: np.ndarray
    negative: np.ndarray
    top: np.ndarray
    is_margin: np.ndarray
    value: np.ndarray
    #: for sums and means of a 0/1 (indicator) variable: units having the attribute, else NaN
    ones: np.ndarray | None = None

    def take(self, pos: np.ndarray) -> CellEvidence:
        """Evidence for the cells at ``pos``; -1 marks an empty cell that was not recorded
        (e.g. a combination ``unstack`` filled in): no units, nothing to protect."""
        missing = pos < 0
        safe = np.where(missing, 0, pos)

        def pick(a: np.ndarray, fill: object) -> np.ndarray:
            if len(a) == 0:
                return np.full((len(pos), *a.shape[1:]), fill, dtype=object if isinstance(fill, str) else float)
            out = a[safe]
            if missing.any():
                out = out.astype(object) if isinstance(fill, str) else out.astype(float)
                out[missing] = fill
            return out

        return CellEvidence(
            stat=pick(self.stat, "count"), var=pick(self.var, ""),
            units=pick(self.units, 0.0), total=pick(self.total, 0.0), total_abs=pick(self.total_abs, 0.0),
            negative=pick(self.negative, 0.0).astype(bool), top=pick(self.top, np.nan),
            is_margin=pick(self.is_margin, 0.0).astype(bool), value=pick(self.value, np.nan),
            ones=pick(self.ones, np.nan) if self.ones is not None else None,
        )


@dataclass
class Entry:
    """One captured aggregation call."""

    id: int
    call: str
    dims: tuple[str, ...]
    flat: Flat
    key: pd.Index
    single_measure: bool
    evidence: CellEvidence
    values2d: np.ndarray
    margin_label: str | None = None
    unit: str | None = None
    notes: list[str] = field(default_factory=list)
    source: object | None = None  # recipe to recompute groupings (suggestions, margins)
    #: shares (``normalize=``): the dimensions within each combination of which the cells sum
    #: to 1, ``()`` for the whole table; those sums are published (as 1) whatever is hidden
    normalized: tuple[str, ...] | None = None
    #: groups (of its dimensions) whose totals the output tells besides its cells: the partitions
    #: of a DuckDB share window beside its count (``count(*) / sum(count(*)) OVER (PARTITION BY a)``)
    totals_shown: tuple[tuple[str, ...], ...] = ()
    #: dimensions whose labels are group sizes (counts), with the column they count groups of
    size_labels: dict[str, Hashable] | None = None
    #: per cell, hidden by a display of this table (its final decision: the joint audit with
    #: earlier outputs included; every cell when blocked), the union over its displays; a derived
    #: table inherits these beside the table's own protection (``checking.derived``)
    displayed_hidden: np.ndarray | None = None


@dataclass
class Match:
    """How a displayed object maps onto a registered entry."""

    entry: Entry
    positions: np.ndarray  # per displayed cell, the entry cell (-1: empty, not recorded)
    how: str  # "identity", "labels", "positions"; or AMBIGUOUS: tables that differ could be behind it


#: ``Match.how`` of a display whose labels and values more than one different table could give
AMBIGUOUS = "ambiguous"


class _Failures(list):
    """A list that keeps only the newest :data:`MAX_FAILURES` messages."""

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > MAX_FAILURES:
            del self[: len(self) - MAX_FAILURES]


#: Source fields at least this large are held weakly (plus strongly within the budget).
HEAVY_BYTES = 1 << 20


class HeldSource:
    """An entry's source recipe whose large fields are held weakly (see the module docstring).

    Small fields (keys, call, a groups index) are kept as they are. Large ones (the
    frame, per-row group ids, row data) are looked up through weak references: a field
    reads ``None`` once its budget slot was evicted and nothing else keeps it alive
    (suggestions and linking then do without it; the entry's evidence stays).
    """

    def __init__(self, source: object, weak: dict[str, Any]) -> None:
        self.__dict__["_weak"] = {name: weakref.ref(value) for name, value in weak.items()}
        for name, value in getattr(source, "__dict__", {}).items():
            if name not in weak:
                self.__dict__[name] = value

    def __getattr__(self, name: str) -> Any:
        weak = self.__dict__.get("_weak", {})
        if name in weak:
            return weak[name]()
        raise AttributeError(name)

    def alive(self) -> list[Any]:
        """The large fields still alive (to hold them strongly again when used)."""
        return [obj for obj in (ref() for ref in self.__dict__["_weak"].values()) if obj is not None]


def object_nbytes(obj: Any) -> int:
    """Bytes an object's own buffers take (object columns: their pointers only).

    Shallow on purpose: the strings of an object column are usually shared with the
    analyst's frame (a copy made by ``crosstab`` copies the pointers, not the strings),
    and a deep count of 1M strings would cost more than the capture itself.
    """
    try:
        if isinstance(obj, pd.DataFrame):
            return int(obj.memory_usage(index=True, deep=False).sum())
        if isinstance(obj, pd.Series):
            return int(obj.memory_usage(index=True, deep=False))
        if isinstance(obj, pd.Index):
            return int(obj.memory_usage(deep=False))
        if isinstance(obj, np.ndarray):
            return int(obj.nbytes)
        size = getattr(obj, "estimated_size", None)  # polars
        if callable(size):
            return int(size())
        return int(getattr(obj, "nbytes", 0) or 0)
    except Exception:
        return 0


def _is_data(value: Any) -> bool:
    return isinstance(value, pd.DataFrame | pd.Series | pd.Index | np.ndarray) or callable(
        getattr(value, "estimated_size", None))


def _array_bytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, pd.Index):
        return int(value.memory_usage(deep=False))
    return 0


def entry_nbytes(entry: Entry) -> int:
    """Bytes held by an entry's own evidence, flat labels and key (not its source frame)."""
    total = sum(_array_bytes(v) for v in vars(entry.evidence).values())
    flat = entry.flat
    total += sum(_array_bytes(v) for v in flat.dims.values())
    total += sum(_array_bytes(v) for v in (flat.measure, flat.values, flat.row_pos, flat.col_pos))
    total += _array_bytes(entry.values2d) + _array_bytes(entry.key)
    return total + 1024  # the objects themselves, notes and call text


class Registry:
    """Bounded, thread-safe store of captured entries (see the module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, budget_mb: float | None = None) -> None:
        self._entries: OrderedDict[int, Entry] = OrderedDict()  # least recently used first
        self._sizes: dict[int, int] = {}
        self._objects: dict[int, list[int]] = {}  # entry id -> keys in _by_object
        self._by_object: dict[int, tuple[weakref.ref, int]] = {}
        # large source fields held strongly: per entry (least recently used first) the ids
        # of its objects, and per object [object, bytes, number of entries holding it]
        self._units: OrderedDict[int, list[int]] = OrderedDict()
        self._held: dict[int, list[Any]] = {}
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self.max_entries = max_entries
        self.budget_mb = default_budget_mb() if budget_mb is None else float(budget_mb)
        self.failures: list[str] = _Failures()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def new_id(self) -> int:
        return next(self._ids)

    @property
    def nbytes(self) -> int:
        """Bytes accounted against the budget: entries plus the source data held strongly."""
        with self._lock:
            return self._used()

    def _used(self) -> int:
        return sum(self._sizes.values()) + sum(held[1] for held in self._held.values())

    def add(self, entry: Entry, result: object) -> None:
        with self._lock:
            self._entries[entry.id] = entry
            self._sizes[entry.id] = entry_nbytes(entry)
            self._hold_source(entry)
            try:
                key = id(result)
                ref = weakref.ref(result, lambda _r, key=key: self._forget_object(key))
                self._by_object[key] = (ref, entry.id)
                self._objects.setdefault(entry.id, []).append(key)
            except TypeError:
                pass
            self._enforce()

    def _hold_source(self, entry: Entry) -> None:
        """Hold the source's large fields weakly, and strongly while they fit the budget."""
        source = entry.source
        if source is None or isinstance(source, HeldSource):
            return
        weak: dict[str, Any] = {}
        for name, value in list(getattr(source, "__dict__", {}).items()):
            if not _is_data(value):
                continue
            size = object_nbytes(value)
            if size < HEAVY_BYTES and name != "frame":
                self._sizes[entry.id] += size  # small: kept with the entry, counted
                continue
            try:
                weakref.ref(value)
            except TypeError:  # no weak references to this kind of object: keep it, counted
                self._sizes[entry.id] += size
                continue
            weak[name] = value
        if not weak:
            return
        entry.source = HeldSource(source, weak)
        self._hold(entry.id, list(weak.values()))

    def _hold(self, entry_id: int, objects: list[Any]) -> None:
        if entry_id in self._units:
            self._units.move_to_end(entry_id)
            return
        keys = []
        for obj in objects:
            held = self._held.get(id(obj))
            if held is not None and held[0] is obj:
                held[2] += 1
            else:
                self._held[id(obj)] = [obj, object_nbytes(obj), 1]
            keys.append(id(obj))
        self._units[entry_id] = keys

    def _release(self, entry_id: int) -> None:
        for key in self._units.pop(entry_id, []):
            held = self._held.get(key)
            if held is not None:
                held[2] -= 1
                if held[2] <= 0:
                    del self._held[key]

    def _forget_object(self, key: int) -> None:
        with self._lock:
            hit = self._by_object.get(key)
            if hit is not None and hit[0]() is None:
                del self._by_object[key]

    def _enforce(self) -> None:
        """Evict until within budget: strong holds on source data first, then whole entries.

        The newest entry and its source are always kept: the table just computed must be
        checkable, whatever its size.
        """
        budget = self.budget_mb * 1e6
        newest = next(reversed(self._entries), None)
        while self._used() > budget:
            victim = next((e for e in self._units if e != newest), None)
            if victim is None:
                break
            self._release(victim)
        while len(self._entries) > 1 and (self._used() > budget or len(self._entries) > self.max_entries):
            entry_id, _ = self._entries.popitem(last=False)
            self._sizes.pop(entry_id, None)
            self._release(entry_id)
            for key in self._objects.pop(entry_id, []):
                hit = self._by_object.get(key)
                if hit is not None and hit[1] == entry_id:
                    del self._by_object[key]
            self.evicted += 1

    def touch(self, entry: Entry) -> None:
        """Mark an entry (and its source data, if still alive) as recently used."""
        with self._lock:
            if entry.id not in self._entries:
                return
            self._entries.move_to_end(entry.id)
            source = entry.source
            if isinstance(source, HeldSource):
                alive = source.alive()
                if alive:
                    self._hold(entry.id, alive)
                    self._enforce()

    def might_match(self, sample: Flat, obj: object | None, rows: int) -> bool:
        """Whether a displayed object may match an entry, told from ``sample``: the flattened
        cells of some of its ``rows`` rows, every column. False only when those cells prove that
        :meth:`match` finds no entry for the whole object (a cell that is not a number; per entry,
        see :func:`_disproved_by`), so a large frame of rows is not flattened whole to be told it is
        not a table. An entry the whole could match by position (its shape) is never ruled out.

        Why (stop 70): showing a raw frame of 1M rows × 4 flattened it whole once, then once per
        table grouped by its columns (``reset_index`` form): 14 s in a session of 8 tables.
        """
        shown = numeric(sample.values)
        if shown is None:
            return False  # (a cell that is not a number is in the whole object too)
        if obj is not None and self.by_object(obj) is not None:
            return True
        shape = (rows, sample.shape[1])
        text = all(all(isinstance(v, str) for v in labels.tolist()) for labels in sample.dims.values())
        for entry in self.entries():
            if entry.values2d.shape in (shape, shape[::-1]):
                return True  # (matched by position: only the whole can tell)
            if entry.dims == sample.dim_names and not _disproved_by(entry, sample, shown, text):
                return True
        return False

    def max_cells(self) -> int:
        """The most cells of any registered entry (a cheap bound before matching a large object)."""
        with self._lock:
            return max((len(e.flat) for e in self._entries.values()), default=0)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._sizes.clear()
            self._objects.clear()
            self._by_object.clear()
            self._units.clear()
            self._held.clear()

    def entries(self) -> list[Entry]:
        """Entries, most recently used first."""
        with self._lock:
            return list(reversed(self._entries.values()))

    def by_object(self, obj: object) -> Entry | None:
        with self._lock:
            hit = self._by_object.get(id(obj))
            if hit is None or hit[0]() is not obj:
                return None
            return self._entries.get(hit[1])

    def by_id(self, entry_id: int) -> Entry | None:
        with self._lock:
            return self._entries.get(entry_id)

    def match(self, flat: Flat, obj: object | None = None, origin: int | None = None) -> Match | None:
        """The entry this displayed table comes from, with the cell mapping; None if unknown.
        ``origin``: the entry the displayed object was computed from alone, if known (a sorted or
        rounded copy of a captured table, see ``capture.contract.mark_origin``): tried first."""
        found = self._match(flat, obj, origin)
        if found is not None:
            self.touch(found.entry)
        return found

    def _match(self, flat: Flat, obj: object | None = None, origin: int | None = None) -> Match | None:
        shown = numeric(flat.values)
        if shown is None:
            return None
        entry = self.by_object(obj) if obj is not None else None
        if entry is not None and entry.flat.shape == flat.shape:
            return Match(entry, np.arange(len(flat)), "identity")
        entry = self.by_id(origin) if origin is not None else None
        if entry is not None and entry.dims == flat.dim_names:
            pos = _matching_positions(entry, flat, shown)
            if pos is not None and _exactly(shown[pos >= 0], entry.evidence.value[pos[pos >= 0]]):
                # (its own table's figures, as they are: no other table's figures are asked for. A
                # display of them (rounded) could be another table's figures spliced into the copy,
                # ``c["flag"] = other["flag"]``: those are looked for below; red team, stop 56)
                return Match(entry, pos, "origin")
        names = flat.dim_names
        # every entry the shown labels and values could come from (equal, or a display of them:
        # rounded, scaled): the most recent one, unless another one holds other figures (one equal
        # to the shown ones, another a rounding of them). Red team, stop 55: a flag's means 0.4722 and 0.5 round alike, and the sorted
        # table of 0.5 (no mark) was checked as the other one's, shown again, both ``pass`` one
        # person apart; preferring the equal values instead matched a rounded table of means with
        # an unrelated table of those values. Which rows such a display shows cannot be told
        first: Match | None = None
        own: Match | None = None  # (the origin's, when it is among them: the table it was computed from)
        for entry in self.entries():
            if entry.dims != names:
                continue
            pos = _matching_positions(entry, flat, shown)
            if pos is None:
                continue
            if entry.id == origin:
                own = Match(entry, pos, "origin")
            if first is None:
                first = Match(entry, pos, "labels")
            elif not _same_table(first, entry, pos):
                return Match(first.entry, first.positions, AMBIGUOUS)
        if own is not None:
            return own
        if first is not None:
            return first
        for entry in self.entries():
            pos = _positions_by_layout(entry, flat, shown)
            if pos is not None:
                return Match(entry, pos, "positions")
        return None


def _same_table(first: Match, entry: Entry, pos: np.ndarray) -> bool:
    """Whether ``entry`` at ``pos`` holds the figures ``first`` matched (the same cells, the same
    values to float precision: two engines sum in different orders). Other statistics or units
    with the same figures (a flag's sums and the count of its rows, a table computed again, in
    another engine) are the same figures published again: the most recent entry stands for them."""
    if not np.array_equal(first.positions >= 0, pos >= 0):
        return False
    i, j = first.positions[first.positions >= 0], pos[pos >= 0]
    try:
        return _equal(np.asarray(first.entry.evidence.value)[i], np.asarray(entry.evidence.value)[j])
    except (TypeError, ValueError):
        return False


def _exactly(shown: np.ndarray, recorded: np.ndarray) -> bool:
    """The shown figures are the recorded ones (to float precision), or blanked (NaN)."""
    try:
        a, b = np.asarray(shown, dtype=float), np.asarray(recorded, dtype=float)
    except (TypeError, ValueError):
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isclose(a, b, rtol=1e-9, atol=1e-12) | np.isnan(a)))


def _equal(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal figures to float precision (two engines sum in different orders); a missing figure
    on either side equals any (an empty group's sum: 0 in pandas, NULL in Spark), as a recorded
    missing value matches whatever is shown (``values_match``)."""
    try:
        a, b = x.astype(float), y.astype(float)
    except (TypeError, ValueError):
        return bool(np.array_equal(x.astype(str), y.astype(str)))
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isclose(a, b, rtol=1e-9, atol=1e-12) | np.isnan(a) | np.isnan(b)))


def _matching_positions(entry: Entry, flat: Flat, shown: np.ndarray) -> np.ndarray | None:
    """The positions in ``entry`` of the shown cells, when its labels find some of them and their
    figures are the entry's (or a display of them); cells it does not record are only acceptable
    as empty (NaN, or 0 after ``fillna``). None otherwise."""
    pos = _positions_by_key(entry, flat)
    if pos is None or not (pos >= 0).any() or _contradicted(entry, pos, shown, strict=True):
        return None
    return pos


def _disproved_by(entry: Entry, sample: Flat, shown: np.ndarray, text: bool) -> bool:
    """Whether some of a displayed object's cells (``sample``) prove it is not ``entry``'s, whose
    match needs every cell to pass (:func:`_matching_positions`). A key the sample cannot form
    proves nothing. ``text``: every label of the sample is text.

    Where some labels are not text, only a non-empty cell found with another figure is proof:
    how pandas looks up a level of numbers or booleans depends on which values are in it (a sample
    whose flags are all 0 found none of a table's False and True cells that the whole frame, 0
    and 1, finds; helper-96), while such a cell fails in the whole whether it is found or not.
    """
    pos = _positions_by_key(entry, sample)
    if pos is None:
        return entry.single_measure and len(set(sample.measure.tolist())) > 1
    return _contradicted(entry, pos, shown, strict=text)


def _contradicted(entry: Entry, pos: np.ndarray, shown: np.ndarray, strict: bool) -> bool:
    """Whether shown cells at ``pos`` in ``entry`` (-1: not recorded) contradict it: a non-empty
    cell it does not record, or a cell it records with another figure; not ``strict``: only a
    non-empty cell it records with another figure."""
    found = pos >= 0
    empty = np.isnan(shown) | (shown == 0)
    if strict and (~found & ~empty).any():
        return True
    asked = found if strict else found & ~empty
    return not bool(values_match(shown[asked], entry.evidence.value[pos[asked]]).all())


def _positions_by_key(entry: Entry, flat: Flat) -> np.ndarray | None:
    with_measure = not entry.single_measure
    if entry.single_measure and len(set(flat.measure.tolist())) > 1:
        return None
    try:
        key = flat.key_index(with_measure=with_measure)
        return entry.key.get_indexer(key)
    except (TypeError, ValueError, pd.errors.InvalidIndexError):
        return None


def _positions_by_layout(entry: Entry, flat: Flat, shown: np.ndarray) -> np.ndarray | None:
    rows, cols = flat.shape
    grid = shown.reshape(rows, cols)
    recorded = entry.values2d
    if recorded.shape == (rows, cols) and _same(grid, recorded):
        return np.arange(rows * cols)
    if recorded.shape == (cols, rows) and _same(grid, recorded.T):
        return np.arange(rows * cols).reshape(cols, rows).T.reshape(-1)
    return None


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.size == 0:
        return False
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
