"""Flatten a Series or DataFrame into one entry per cell, with a layout-free cell key.

A table's cells keep their identity through ``unstack``, ``stack``, ``T``, sorting and
selection only through their labels: each cell is named by the labels of every *named*
index or column level (the dimensions, e.g. ``admin2`` or ``sex``), and by the labels of
the unnamed levels (the measure, e.g. ``("v", "mean")``). Ordering dimensions by name
and sorting the measure parts gives a key that does not depend on which axis a level
sits on. This is how a reshaped result is matched back to the evidence of the call
that produced it (pandas drops ``attrs`` through ``unstack`` in pandas 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MISSING_LABEL = "\u2400<missing>"  # stands in for NaN/None/NaT labels, which never compare equal


class FlattenError(ValueError):
    """The object cannot be flattened into cells (e.g. duplicated level names)."""


@dataclass
class Flat:
    """One entry per cell of a displayed table, in row-major order."""

    dims: dict[str, np.ndarray]  # named level -> label per cell
    measure: np.ndarray  # canonical measure string per cell ("" if none)
    values: np.ndarray  # cell values (object)
    row_pos: np.ndarray
    col_pos: np.ndarray
    shape: tuple[int, int]

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.dims))

    def __len__(self) -> int:
        return len(self.values)

    def key_index(self, with_measure: bool = True) -> pd.MultiIndex | pd.Index:
        """The layout-free key of every cell (dims sorted by name, then the measure)."""
        arrays = [self.dims[name] for name in self.dim_names]
        if with_measure or not arrays:
            arrays.append(self.measure if with_measure else np.full(len(self), "", dtype=object))
        if len(arrays) == 1:
            return pd.Index(arrays[0], dtype=object, tupleize_cols=False)
        return pd.MultiIndex.from_arrays(arrays)


def canonical_labels(labels: pd.Index | np.ndarray) -> np.ndarray:
    """Labels as an object array with every missing label replaced by one sentinel."""
    idx = pd.Index(labels)
    if isinstance(idx.dtype, pd.CategoricalDtype):
        idx = pd.Index(np.asarray(idx.astype(object)), dtype=object)
    arr = np.asarray(idx, dtype=object).copy()
    missing = pd.isna(idx)
    if np.ndim(missing) and missing.any():
        arr[np.asarray(missing)] = MISSING_LABEL
    return arr


def _levels(index: pd.Index) -> list[tuple[str | None, np.ndarray]]:
    if isinstance(index, pd.MultiIndex):
        return [(name, canonical_labels(index.get_level_values(i))) for i, name in enumerate(index.names)]
    return [(index.name, canonical_labels(index))]


def measure_string(parts: list[object]) -> str:
    """Canonical measure: the unnamed-level labels, sorted, joined."""
    return "|".join(sorted(str(p) for p in parts))


def _measure_words(combos: pd.Index) -> np.ndarray:
    """:func:`measure_string` of every combination of parts in ``combos`` (a MultiIndex, one level per part).

    Why not one call per combination: a frame with a plain row index (a DuckDB or polars result, a
    ``reset_index()``) has its row numbers among its parts, one combination per cell: 4,000 calls,
    10 ms of a 1,000-row table's check. Each level's values are turned into text once, and the
    texts of every combination sorted and joined as whole columns (the same strings).
    """
    levels = getattr(combos, "levels", None)
    codes = getattr(combos, "codes", None)
    if levels is None or codes is None or any(bool((np.asarray(c) < 0).any()) for c in codes):
        return np.array([measure_string(list(u)) for u in combos], dtype=object)
    texts = [np.array([str(v) for v in level], dtype=object)[np.asarray(c)] for level, c in zip(levels, codes,
                                                                                                    strict=True)]
    if len(texts) == 1:
        return texts[0]
    ordered = np.sort(np.stack(texts, axis=1), axis=1)
    words = ordered[:, 0]
    for j in range(1, ordered.shape[1]):
        words = words + "|" + ordered[:, j]
    return words


def flatten(obj: pd.Series | pd.DataFrame, index_names: list[str | None] | None = None) -> Flat:
    """Flatten a Series (one column) or DataFrame (index × columns) into cells.

    ``index_names`` names unnamed index levels that are really dimensions (the keys of
    a groupby on an unnamed array, ``value_counts`` of an unnamed Series); without it
    unnamed levels are measure parts (e.g. the statistics of ``describe``).
    """
    if isinstance(obj, pd.Series):
        n_rows, n_cols = len(obj), 1
        row_levels = _levels(obj.index)
        col_levels: list[tuple[str | None, np.ndarray]] = []
        values = np.asarray(obj.to_numpy(dtype=object), dtype=object).reshape(n_rows, 1)
    elif isinstance(obj, pd.DataFrame):
        n_rows, n_cols = obj.shape
        row_levels = _levels(obj.index)
        col_levels = _levels(obj.columns)
        values = obj.to_numpy(dtype=object)
    else:  # pragma: no cover - guarded by callers
        raise FlattenError(f"cannot flatten {type(obj).__name__}")
    if index_names is not None:
        row_levels = [(name if name is not None else (index_names[i] if i < len(index_names) else None), labels)
                      for i, (name, labels) in enumerate(row_levels)]
    row_pos = np.repeat(np.arange(n_rows), n_cols)
    col_pos = np.tile(np.arange(n_cols), n_rows)
    dims: dict[str, np.ndarray] = {}
    measure_parts: list[np.ndarray] = []
    for (name, labels), pos in [(lv, row_pos) for lv in row_levels] + [(lv, col_pos) for lv in col_levels]:
        if name is None or (isinstance(name, float) and np.isnan(name)):
            measure_parts.append(labels[pos])
            continue
        key = str(name)
        if key in dims:
            raise FlattenError(f"level name {key!r} appears twice")
        dims[key] = labels[pos]
    if measure_parts:
        # compute the canonical string once per distinct combination of parts
        combos = pd.MultiIndex.from_arrays([pd.Index(p, dtype=object) for p in measure_parts])
        codes, uniques = combos.factorize()
        measure = _measure_words(uniques)[codes]
    else:
        measure = np.full(n_rows * n_cols, "", dtype=object)
    return Flat(dims=dims, measure=measure, values=values.reshape(-1), row_pos=row_pos, col_pos=col_pos,
                shape=(n_rows, n_cols))


def numeric(values: np.ndarray) -> np.ndarray | None:
    """Cell values as floats, or None when some value is not a number (strings, dates)."""
    try:
        return pd.to_numeric(pd.Series(values, dtype=object), errors="raise").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        return None


def values_match(shown: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """Whether each shown value is the recorded value after a display-preserving change.

    Accepts: equal (to float precision); rounded to 0–10 decimals; truncated to an
    integer (``astype(int)``); scaled by 100 (percent of a proportion); a recorded NaN
    shown as a placeholder, 0 or −1 (``fillna(0)``); a shown NaN (the user blanked it). A
    recorded NaN shown as another number is not that table's figure: an empty group's mean
    filled with one man's income was checked as the table and ``pass`` (red team, stop 56).
    """
    shown = np.asarray(shown, dtype=float)
    recorded = np.asarray(recorded, dtype=float)
    ok = np.isnan(shown) | (np.isnan(recorded) & ((shown == 0) | (shown == -1)))
    with np.errstate(invalid="ignore", over="ignore"):
        ok |= np.isclose(shown, recorded, rtol=1e-9, atol=1e-12)
        ok |= np.isclose(shown, recorded * 100.0, rtol=1e-9, atol=1e-9)
        pending = ~ok
        if pending.any():
            for decimals in range(11):
                ok[pending] |= np.isclose(shown[pending], np.round(recorded[pending], decimals), rtol=0, atol=1e-12)
                ok[pending] |= np.isclose(shown[pending], np.round(recorded[pending] * 100.0, decimals), rtol=0,
                                          atol=1e-12)
                pending = ~ok
                if not pending.any():
                    break
        if pending.any():
            ok[pending] |= shown[pending] == np.trunc(recorded[pending])
    return ok
