"""The same table shown again gets the same decision (issue 21: re-displays cost nothing).

Why: a notebook shows the same table many times (a cell run again, ``display(t)`` after
``t``, Restart & Run All in a long session).  Checked afresh, the second display was
protected *against the first* (whose published cells are then public knowledge, so they
could no longer be secondaries) and joint-audited with it: the seed table hid 152, then
153, then 172 cells on three runs of one cell, and cost more each time.  But a table
identical to one already shown, with the same cells hidden, publishes nothing new: the
earlier decision was audited against everything shown before it, and everything shown
after it was audited against it.  So its decision is reused as it is, with a note.

"Identical" is strict, and every part of the key is needed for the reuse to be safe:

* the rules in force (a change of threshold is a new decision);
* the displayed object (labels, values, order, dtypes; Styler notes);
* the captured call and its evidence per cell (values, units, largest contributions);
* **which rows are in which cell**: the linking draft's group of every row of the
  session's universe (the same table of other people is another table).  Without a
  draft (linking off, or a source linking cannot place) there is no reuse: the
  protection cache of :mod:`sdc_magic.protect` still makes the protection itself free.

The evidence's floating-point values (sums, means, largest contributions) are compared
apart, to a relative :data:`FLOAT_RTOL`: an engine may add the same rows in another order
on each run (polars 2.2's evidence sums differ in the last bit between two calls while the
displayed sums do not), and the same table computed again was not recognised as shown
again.  The exact parts make the digest; the floats are kept beside the decision and
compared on recall, so no rounding boundary can split two runs of one table.  What the
display shows is compared bit for bit: a reused decision shows the earlier figures.

The memory holds at most :data:`MAX_DECISIONS` decisions (the newest), copies of the
frames and masks only: never the source data.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..checking.check import Checked

#: Decisions kept for reuse (each: a copy of a displayed table and its masks).
MAX_DECISIONS = 32
#: Tables larger than this are not kept (the copy would cost more than it saves).
MAX_CELLS_KEPT = 200_000
#: Floats of a table shown again may differ from the earlier ones by this much, relatively
#: (an engine's order of addition moves the last bits; no rule decides at 1e-9 of a value).
FLOAT_RTOL = 1e-9


@dataclass(frozen=True)
class DecisionKey:
    """Under what a decision is kept: the digest of the exact parts, and the floats beside it."""

    digest: str
    #: (the evidence's floats, hidden cells' included: kept out of any repr or log line)
    floats: tuple[np.ndarray, ...] = field(repr=False)

    def matches(self, other: DecisionKey) -> bool:
        """The same digest, and every float within :data:`FLOAT_RTOL` (NaN where NaN)."""
        if self.digest != other.digest or len(self.floats) != len(other.floats):
            return False
        return all(a.shape == b.shape and bool(np.allclose(a, b, rtol=FLOAT_RTOL, atol=0.0, equal_nan=True))
                   for a, b in zip(self.floats, other.floats, strict=True))


def _update_array(h: Any, values: Any, floats: list[np.ndarray] | None = None) -> None:
    """Hash ``values``; floats go to ``floats`` (compared apart) when given, only their shape hashed."""
    arr = np.asarray(values)
    if floats is not None and arr.dtype.kind in "fc":
        h.update(str(arr.dtype).encode())
        h.update(repr(arr.shape).encode())
        floats.append(np.array(arr, copy=True))
    elif arr.dtype == object or arr.dtype.kind in "USO":
        h.update(repr(arr.tolist()).encode())
    else:
        h.update(str(arr.dtype).encode())
        h.update(repr(arr.shape).encode())
        data = np.ascontiguousarray(arr)
        try:
            h.update(memoryview(data).cast("B"))  # (no copy)
        except (TypeError, ValueError):  # (dates and other types no buffer can hold)
            h.update(data.tobytes())


def _update_frame(h: Any, frame: pd.DataFrame | pd.Series) -> bool:
    """Hash what a display shows of ``frame``, bit for bit (floats too: a reused decision shows the
    earlier display's figures, which must be the user's; red team of stop 68: ``sum(big) + 5000``
    took the decision of ``sum(big)`` and showed its figures); False when it cannot be hashed."""
    try:
        h.update(type(frame).__name__.encode())
        h.update(repr(list(frame.index.names)).encode())
        if isinstance(frame, pd.DataFrame):
            h.update(repr(list(frame.columns)).encode())
            h.update(repr(list(frame.columns.names)).encode())
            h.update(repr([str(t) for t in frame.dtypes]).encode())
        else:
            h.update(repr(frame.name).encode())
            h.update(str(frame.dtype).encode())
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
        if isinstance(frame, pd.DataFrame):
            for j in range(frame.shape[1]):  # (the row hashes combine columns; keep each one too)
                h.update(pd.util.hash_pandas_object(frame.iloc[:, j], index=False).to_numpy().tobytes())
    except (TypeError, ValueError):
        return False
    return True


def decision_key(rules: Any, entry: Any, positions: np.ndarray, frame: pd.DataFrame | pd.Series,
                 notes: list[str], draft: Any) -> DecisionKey | None:
    """The fingerprint under which a decision may be reused, or None (never reused)."""
    if draft is None or entry is None or getattr(draft, "pop", None) is None:
        return None
    floats: list[np.ndarray] = []
    h = hashlib.sha256()
    h.update(repr(sorted(rules.as_dict().items(), key=lambda kv: kv[0])).encode())
    h.update(repr((entry.call, tuple(entry.dims), entry.margin_label, entry.unit)).encode())
    # (in an order of the cells' labels, not the engine's: polars gives its groups in another
    # order on every run, and the same table computed again was not recognised, on some runs)
    order = _cell_order(entry)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ev = entry.evidence
    for name in ("stat", "var", "units", "total", "total_abs", "negative", "top", "is_margin", "value", "ones"):
        value = getattr(ev, name, None)
        h.update(name.encode())
        if value is not None:
            arr = np.asarray(value)
            _update_array(h, arr[order] if arr.ndim and len(arr) == len(order) else arr, floats)
    positions = np.asarray(positions)
    _update_array(h, np.where(positions >= 0, rank[np.clip(positions, 0, max(len(rank) - 1, 0))], -1)
                  if len(rank) else positions)
    h.update(repr(list(notes)).encode())
    if not _update_frame(h, frame):
        return None
    pop = draft.pop
    h.update(str(getattr(draft.universe, "uid", id(draft.universe))).encode())
    group_order = sorted(range(len(pop.labels)), key=lambda g: repr(pop.labels[g]))
    group_rank = np.empty(len(group_order), dtype=np.int64)
    group_rank[group_order] = np.arange(len(group_order))
    atoms = draft.new_row_atom
    if isinstance(atoms, np.ndarray):
        # each row's group, by rank: mapped per atom first and taken once per row in the
        # narrowest integer type (one gather and a quarter of the bytes to hash: 10 of a pandas
        # display's ~110 ms of checking at 1M rows went here, hashing 8 bytes a row)
        groups = np.asarray(pop.group)
        atom_rank = np.where(groups >= 0, group_rank[np.clip(groups, 0, max(len(group_rank) - 1, 0))], -1) \
            if len(group_rank) else groups
        _update_array(h, _narrowest(atom_rank)[atoms])
    else:
        # rows left in their engine: the rows are those its condition and keys select in the
        # universe (whose rows, if they changed, make another universe); groups per atom would
        # change with every later output, and the same table shown again was protected anew
        rows = getattr(getattr(entry, "source", None), "rows", None)
        h.update(repr((getattr(rows, "condition", None), getattr(rows, "key_expressions", None))).encode())
        _update_array(h, np.asarray(pop.size)[group_order] if len(group_order) else np.asarray(pop.size))
    h.update(repr([pop.labels[g] for g in group_order]).encode())
    return DecisionKey(h.hexdigest(), tuple(floats))


def _narrowest(values: np.ndarray) -> np.ndarray:
    """``values`` (integers from −1 up) in the narrowest signed integer type that holds them."""
    top = int(values.max()) if len(values) else 0
    for dtype in (np.int8, np.int16, np.int32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype, copy=False)
    return values.astype(np.int64, copy=False)


def _cell_order(entry: Any) -> np.ndarray:
    """The entry's cells in the order of their labels (a hash of each cell's key, then its text)."""
    key = entry.key
    try:
        hashed = pd.util.hash_pandas_object(key, index=False).to_numpy()
        return np.argsort(hashed, kind="stable")
    except (TypeError, ValueError):
        return np.asarray(sorted(range(len(key)), key=lambda i: repr(key[i])), dtype=np.int64)


class DecisionMemory:
    """The decisions of this session's tables by :func:`decision_key` (newest kept)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[DecisionKey, str, Checked]] = OrderedDict()

    def clear(self) -> None:
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def recall(self, key: DecisionKey | None, entry: Any) -> Checked | None:
        """A copy of the decision kept under ``key`` (bound to ``entry``), or None."""
        if key is None or key.digest not in self._kept:
            return None
        kept_key, out_id, kept = self._kept[key.digest]
        if not kept_key.matches(key):
            return None
        self._kept.move_to_end(key.digest)
        checked = _copy(kept)
        checked.entry = entry
        checked.reused_from = out_id  # type: ignore[attr-defined]
        checked.notes.append(f"the same table as {out_id}, shown again: its decision is reused "
                             "(showing it again publishes nothing new)")
        return checked

    def remember(self, key: DecisionKey | None, out_id: str, checked: Checked) -> None:
        """Keep the final decision of a displayed table under ``key``."""
        if key is None or checked.kind != "table" or checked.hidden.size > MAX_CELLS_KEPT:
            return
        kept = _copy(checked)
        kept.entry = None  # (never the source data: the entry holds a recipe to recompute groupings)
        self._kept[key.digest] = (key, out_id, kept)
        self._kept.move_to_end(key.digest)
        while len(self._kept) > MAX_DECISIONS:
            self._kept.popitem(last=False)


def _copy(checked: Checked) -> Checked:
    """A copy that shares nothing mutable with ``checked`` but its (read-only) models."""
    out = copy.copy(checked)
    out.frame = checked.frame.copy(deep=True)
    out.hidden = checked.hidden.copy()
    out.reasons = {k: list(v) for k, v in checked.reasons.items()}
    out.intervals = dict(checked.intervals)
    out.notes = list(checked.notes)
    out.models = list(checked.models)
    for name in ("unverified", "entry_positions", "hidden_flat", "cell_rows", "cell_cols"):
        value = getattr(checked, name)
        if value is not None:
            setattr(out, name, value.copy())
    return out
