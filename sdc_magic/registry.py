"""The session registry: every captured aggregation and the evidence for each of its cells.

Displayed objects are matched back to an entry first by identity (the very object the
call returned), then by their layout-free cell keys and values (a reshaped result),
and last by position (a result whose labels were renamed but whose values are intact).
The registry is bounded so that holding evidence never grows without limit.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .flatten import Flat, numeric, values_match

MAX_ENTRIES = 256


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


@dataclass
class Match:
    """How a displayed object maps onto a registered entry."""

    entry: Entry
    positions: np.ndarray  # per displayed cell, the entry cell (-1: empty, not recorded)
    how: str  # "identity", "labels", "positions"


class Registry:
    """Bounded, thread-safe store of captured entries."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._by_object: dict[int, tuple[weakref.ref, int]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.max_entries = max_entries
        self.failures: list[str] = []

    def __len__(self) -> int:
        return len(self._entries)

    def new_id(self) -> int:
        return next(self._ids)

    def add(self, entry: Entry, result: object) -> None:
        with self._lock:
            self._entries[entry.id] = entry
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            try:
                key = id(result)
                ref = weakref.ref(result, lambda _r: self._by_object.pop(key, None))
                self._by_object[key] = (ref, entry.id)
            except TypeError:
                pass

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_object.clear()

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(reversed(self._entries.values()))

    def by_object(self, obj: object) -> Entry | None:
        with self._lock:
            hit = self._by_object.get(id(obj))
            if hit is None or hit[0]() is not obj:
                return None
            return self._entries.get(hit[1])

    def match(self, flat: Flat, obj: object | None = None) -> Match | None:
        """The entry this displayed table comes from, with the cell mapping; None if unknown."""
        shown = numeric(flat.values)
        if shown is None:
            return None
        entry = self.by_object(obj) if obj is not None else None
        if entry is not None and entry.flat.shape == flat.shape:
            return Match(entry, np.arange(len(flat)), "identity")
        names = flat.dim_names
        for entry in self.entries():
            if entry.dims != names:
                continue
            pos = _positions_by_key(entry, flat)
            if pos is None:
                continue
            found = pos >= 0
            # unrecorded cells are only acceptable as empty cells (NaN or 0 after fillna)
            if not np.all(np.isnan(shown[~found]) | (shown[~found] == 0)):
                continue
            if found.any() and not values_match(shown[found], entry.evidence.value[pos[found]]).all():
                continue
            if found.any():
                return Match(entry, pos, "labels")
        for entry in self.entries():
            pos = _positions_by_layout(entry, flat, shown)
            if pos is not None:
                return Match(entry, pos, "positions")
        return None


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
