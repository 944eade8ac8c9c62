"""The one way every engine turns a computed table and its group facts into a registry Entry.

The pandas capture, the facts table of the other engines (:mod:`.contract`) and DuckDB's own
path all call :func:`build_entry`, so a cell's evidence never depends on which engine made it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..evidence.facts import GroupEvidence
from ..evidence.flatten import Flat, canonical_labels, numeric
from ..evidence.registry import CellEvidence, Entry

#: the statistics that get magnitude facts (totals, largest contributions)
MAGNITUDE_EVIDENCE = frozenset({"sum", "mean", "std", "var", "sem"})
#: the statistics whose cells carry the units holding an indicator (a count on both sides)
INDICATOR_STATS = frozenset({"sum", "mean"})


@dataclass
class Source:
    """What is needed to recompute other groupings of the same population (suggestions)."""

    frame: pd.DataFrame | None
    keys: list[str]
    call: str
    ids: np.ndarray | None = None  # linking: the group id pandas gave each row of ``frame`` / ``rows`` (-1: dropped)
    index: pd.Index | None = None  # linking: the groups' labels for ``ids`` (pandas' result_index)
    rows: Any = None  # linking: the rows behind the table when ``frame`` is None (a Series or frame)
    #: checking: a look-up (no argument) of the user's frame ``frame``'s rows were selected from, or
    #: None (``checking.categories``: a column's spread over the whole frame, not one filter's rows)
    base: Any = None


def build_entry(entry_id: int, call: str, flat: Flat, ge: GroupEvidence, key_dims: list[str],
                measure_of: Callable[[str], tuple[str | None, str]], notes: list[str], k: int,
                margin_label: str | None = None,
                margin_evidence: Callable[[tuple[str, ...]], GroupEvidence] | None = None) -> Entry:
    """Evidence for every cell of ``flat``: its group's facts for its measure's variable."""
    n = len(flat)
    lost = [d for d in key_dims if d not in flat.dims]
    if lost and margin_label != "__describe__" and len(lost) < len(key_dims):
        # e.g. pivot_table(aggfunc="size") returns columns that lost a level: cells are ambiguous
        raise ValueError(f"the result lost the dimension(s) {lost}: shown as unverified")
    key_dims = [d for d in key_dims if d in flat.dims]
    is_margin = np.zeros(n, dtype=bool)
    total_mask: dict[str, np.ndarray] = {}
    if margin_label is not None and margin_label != "__describe__":
        for d in key_dims:
            total_mask[d] = flat.dims[d] == margin_label
        any_total = np.zeros(n, dtype=bool)
        for m in total_mask.values():
            any_total |= m
        for d in key_dims:  # '' fills the lower levels of a margin row / column
            total_mask[d] = total_mask[d] | (any_total & (flat.dims[d] == ""))
        is_margin = any_total
    # which dims each cell fixes -> evidence of that grouping
    fixed_sets: dict[tuple[str, ...], np.ndarray] = {}
    if margin_label == "__describe__":
        fixed_sets[()] = np.arange(n)
    elif is_margin.any():
        pattern = np.stack([total_mask[d] for d in key_dims], axis=1) if key_dims else np.zeros((n, 0), bool)
        codes, uniques = pd.MultiIndex.from_arrays([pattern[:, i] for i in range(pattern.shape[1])]).factorize() \
            if key_dims else (np.zeros(n, int), [()])
        for code, totals in enumerate(uniques):
            fixed = tuple(d for d, t in zip(key_dims, totals, strict=True) if not t)
            fixed_sets[fixed] = np.flatnonzero(codes == code)
    else:
        fixed_sets[tuple(key_dims)] = np.arange(n)

    measures = flat.measure
    uniq_measures, m_codes = np.unique(measures.astype(str), return_inverse=True)
    resolved = [measure_of(m) for m in uniq_measures]
    stat = np.array([resolved[c][1] for c in m_codes], dtype=object)
    # (fromiter: a column named by a tuple, as in a frame with two levels of column names, stays one
    # object per cell; np.array made it a row of a 2-D array, and linking failed on the table)
    var = np.fromiter((resolved[c][0] for c in m_codes), dtype=object, count=len(m_codes))

    units = np.zeros(n)
    total = np.full(n, np.nan)
    total_abs = np.full(n, np.nan)
    negative = np.zeros(n, dtype=bool)
    top = np.full((n, k), np.nan)
    ones = np.full(n, np.nan)
    for fixed, rows in fixed_sets.items():
        if tuple(fixed) == tuple(key_dims) and margin_label != "__describe__":
            group_ev = ge
        elif margin_evidence is not None:
            group_ev = margin_evidence(tuple(fixed))
        else:
            continue
        if fixed:
            arrays = [flat.dims[d][rows] for d in fixed]
            labels = pd.MultiIndex.from_arrays(arrays) if len(arrays) > 1 else pd.Index(arrays[0], dtype=object)
            ev_index = canonical_index(group_ev.index, list(fixed))
            pos = ev_index.get_indexer(labels)
        else:
            pos = np.zeros(len(rows), dtype=np.int64)
        aligned = group_ev.take(pos, pd.RangeIndex(len(rows)))
        units[rows] = aligned.units
        for mc in np.unique(m_codes[rows]):
            sel = rows[m_codes[rows] == mc]
            local = np.searchsorted(rows, sel)
            v, s = resolved[mc]
            ve = aligned.variables.get(v)  # (None: an unnamed Series' own values, if any)
            if ve is None:
                continue
            if s not in ("size",):
                units[sel] = ve.units[local]
            total[sel] = ve.total[local]
            total_abs[sel] = ve.total_abs[local]
            negative[sel] = ve.negative[local]
            kk = min(k, ve.top.shape[1])
            top[sel, :kk] = ve.top[local, :kk]
            if ve.ones is not None and s in INDICATOR_STATS:
                ones[sel] = ve.ones[local]
    values = numeric(flat.values)
    if values is None:
        values = np.full(n, np.nan)
    evidence = CellEvidence(stat=stat, var=var.astype(object), units=units, total=total, total_abs=total_abs,
                            negative=negative, top=top, is_margin=is_margin, value=values,
                            ones=ones if np.isfinite(ones).any() else None)
    single = len(uniq_measures) <= 1
    key = flat.key_index(with_measure=not single)
    if not key.is_unique:
        notes.append("duplicated cell labels: matched by object identity only")
        key = pd.Index([], dtype=object)
    return Entry(id=entry_id, call=call, dims=flat.dim_names, flat=flat, key=key, single_measure=single,
                 evidence=evidence, values2d=values.reshape(flat.shape), margin_label=margin_label, notes=notes)


def canonical_index(index: pd.Index, names: list[str]) -> pd.Index:
    if isinstance(index, pd.MultiIndex):
        order = [list(index.names).index(n) for n in names]
        arrays = [canonical_labels(index.get_level_values(i)) for i in order]
        return pd.MultiIndex.from_arrays(arrays)
    return pd.Index(canonical_labels(index), dtype=object)
