"""Per-cell evidence: the facts behind each cell of an aggregated table.

A displayed ``mean`` no longer holds the counts behind it, so while the extension is
loaded every aggregation call also computes, from the microdata it was given and per
output group: the number of distinct contributing units, and for each numeric variable
the cell total and its largest contributions *after summing per unit* (enough for the
(n,k) dominance and p% rules).

Everything here is numpy over integer group ids, so the cost is a few linear passes
(``np.bincount`` / ``np.maximum.at``) on top of the grouping pandas already did: the
group ids come from the caller's own GroupBy (cached by pandas), never from a second
factorisation of the keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class VarEvidence:
    """Magnitude facts of one numeric variable, one entry per group."""

    units: np.ndarray
    total: np.ndarray
    total_abs: np.ndarray
    negative: np.ndarray
    top: np.ndarray  # (groups, k), absolute contributions, descending, NaN-padded
    #: units with the attribute when the variable is an indicator (only 0/1 or boolean values):
    #: its sum counts people and its mean is a proportion, so the frequency rule applies to
    #: the units with and without the attribute (seed lesson; ONS/SDC handbook on proportions)
    ones: np.ndarray | None = None
    #: the value that marks the attribute (1 for a 0/1 flag, the higher of two values otherwise),
    #: set with ``ones``: linking inside an engine counts the rows at this value
    level: float | None = None
    #: the indicator's other value (0 for a 0/1 flag), set with ``level``: its sums count the rows
    #: at ``level`` alone only when it is 0; otherwise they add the known rows' count in (a 1/2
    #: coding's sum is n + n₂: with the flagged count shown elsewhere, n comes back)
    low: float | None = None


@dataclass
class GroupEvidence:
    """Facts per group of one aggregation: ``index`` holds the group labels in id order."""

    index: pd.Index
    units: np.ndarray
    variables: dict[object, VarEvidence] = field(default_factory=dict)
    unit_column: str | None = None
    rows: np.ndarray | None = None  # rows per group (differs from units with a unit column)

    def take(self, pos: np.ndarray, labels: pd.Index) -> GroupEvidence:
        """Evidence for the groups at ``pos`` (-1 = an empty group)."""
        missing = pos < 0
        safe = np.where(missing, 0, pos)

        def pick(a: np.ndarray, fill: float | bool) -> np.ndarray:
            if len(a) == 0:
                shape = (len(pos), *a.shape[1:])
                return np.full(shape, fill, dtype=a.dtype if fill is not np.nan else float)
            out = a[safe]
            if missing.any():
                out = out.astype(float) if fill is np.nan and out.dtype.kind in "iub" else out.copy()
                out[missing] = fill
            return out

        variables = {
            name: VarEvidence(
                units=pick(v.units, 0),
                total=pick(v.total, 0.0),
                total_abs=pick(v.total_abs, 0.0),
                negative=pick(v.negative, False),
                top=pick(v.top, np.nan),
                ones=pick(v.ones, 0) if v.ones is not None else None,
                level=v.level,
                low=v.low,
            )
            for name, v in self.variables.items()
        }
        return GroupEvidence(
            index=labels,
            units=pick(self.units, 0),
            variables=variables,
            unit_column=self.unit_column,
            rows=pick(self.rows, 0) if self.rows is not None else None,
        )


def unit_codes(unit: pd.Series | np.ndarray | None) -> tuple[np.ndarray | None, int]:
    """Integer codes of the unit identifiers (missing ids share one code: conservative)."""
    if unit is None:
        return None, 0
    codes, uniques = pd.factorize(np.asarray(unit), use_na_sentinel=True)
    n = len(uniques)
    codes = np.where(codes < 0, n, codes)  # all missing ids count as one unit
    return codes.astype(np.int64), n + 1


def top_k(groups: np.ndarray, values: np.ndarray, ngroups: int, k: int) -> np.ndarray:
    """The ``k`` largest absolute values per group, descending, NaN where fewer exist.

    k passes of a per-group maximum, each removing one occurrence of the maximum: linear
    time, no sort of the whole column.
    """
    out = np.full((ngroups, k), np.nan)
    if len(values) == 0 or ngroups == 0:
        return out
    work = np.abs(values.astype(float))
    remaining = np.bincount(groups, minlength=ngroups)
    for j in range(k):
        best = np.full(ngroups, -np.inf)
        np.maximum.at(best, groups, work)
        has = remaining > j
        out[has, j] = best[has]
        if j == k - 1:
            break
        hit = np.flatnonzero(work == best[groups])
        if len(hit) == 0:
            break
        _, first = np.unique(groups[hit], return_index=True)
        work[hit[first]] = -np.inf
    return out


def merged_sums(new_group: np.ndarray, units: np.ndarray, total: np.ndarray, total_abs: np.ndarray,
                negative: np.ndarray, top: np.ndarray, ngroups: int, k: int) -> VarEvidence:
    """The facts of sums over unions of cells of a table of sums (``new_group``: each cell's
    union, -1 none), from the cells' own facts.

    Exact when every row is a unit (no unit declared): the cells of a table are disjoint sets of
    rows, so a union's contributors, totals and largest contributions are those of its cells'
    together. (With a unit spanning cells a union's largest contribution could be larger than
    any cell's: the caller does not use this then.)"""
    valid = new_group >= 0
    g = new_group[valid]

    def added(x: np.ndarray) -> np.ndarray:
        return np.bincount(g, weights=np.asarray(x, dtype=float)[valid], minlength=ngroups)

    tops = np.asarray(top, dtype=float)[valid]
    width = tops.shape[1] if tops.ndim == 2 else 0
    flat_groups = np.repeat(g, width)
    flat_values = tops.reshape(-1) if width else np.zeros(0)
    known = ~np.isnan(flat_values)
    return VarEvidence(units=added(units), total=added(total), total_abs=added(total_abs),
                       negative=added(np.asarray(negative, dtype=float)) > 0,
                       top=top_k(flat_groups[known], flat_values[known], ngroups, k))


#: what :func:`pandas.api.types.infer_dtype` says of an object column holding numbers only
NUMBERS_IN_OBJECTS = frozenset({"decimal", "integer", "floating", "mixed-integer-float"})


def numeric_values(series: pd.Series) -> np.ndarray | None:
    """A float view of a numeric or boolean column, or of an object column of numbers only (money
    read as ``Decimal``, as ``read_sql`` gives NUMERIC columns: red team of stop 50, its sums were
    ``review`` for want of their contributions' facts), or None for anything else."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        if isinstance(dtype, pd.CategoricalDtype):
            return None
        try:
            return series.to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            return None
    if pd.api.types.is_object_dtype(dtype) and pd.api.types.infer_dtype(series, skipna=True) in NUMBERS_IN_OBJECTS:
        try:
            return pd.to_numeric(series, errors="raise").to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            return None
    return None


def indicator_level(x: np.ndarray) -> float | None:
    """The value that marks "has the attribute" when a column is an indicator, else None
    (:func:`indicator_values`)."""
    found = indicator_values(x)
    return None if found is None else found[0]


def indicator_column(col: pd.Series) -> tuple[np.ndarray, tuple[float, float]] | None:
    """(the column as numbers, :func:`indicator_values` of them) when it is an indicator, else None.

    Text is read as numbers where it parses (``errors="coerce"``), booleans as 0/1. A third
    distinct value among the first rows says "no indicator" before the whole column is
    converted (and copied): linking asks this several times a display (1M rows: 42 ms a table).
    """
    if pd.api.types.is_bool_dtype(col):
        values = col.to_numpy(dtype=float)
    else:
        head = pd.to_numeric(col.iloc[:4096], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if len(np.unique(head[~np.isnan(head)])) > 2:
            return None
        values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    found = indicator_values(values)
    return None if found is None else (values, found)


def indicator_values(x: np.ndarray) -> tuple[float, float] | None:
    """The value that marks "has the attribute" when a column is an indicator, else None.

    An indicator holds only 0 and 1 (a boolean column converts to 0/1 here), or exactly
    two distinct values (a 1/2 coding): with the cell's units known, its sum or mean
    gives the number of units at each level back, so it is a count in disguise. The
    attribute is the higher level. An all-missing column is not an indicator. Returns
    (the attribute's value, the other value: 0 for a 0/1 flag), or None.
    """
    if not len(x):
        return None
    lo, hi = float(np.fmin.reduce(x)), float(np.fmax.reduce(x))  # (NaN skipped; NaN when all are)
    if np.isnan(lo):
        return None  # (empty or all missing)
    # most columns are no indicator: a third value among their first values says so without
    # scanning the rest (a million-row column of amounts: 5 ms a table before)
    head = x[:4096]
    if bool((~np.isnan(head) & (head != lo) & (head != hi)).any()):
        return None
    finite = x[~np.isnan(x)]
    if lo >= 0.0 and hi <= 1.0 and bool(((finite == 0) | (finite == 1)).all()):
        return 1.0, 0.0
    if lo != hi and bool(((finite == lo) | (finite == hi)).all()):
        return hi, lo
    return None


def group_evidence(ids: np.ndarray, index: pd.Index, frame_values: dict[object, pd.Series],
                   unit: pd.Series | None, k: int, unit_name: str | None = None,
                   magnitudes: set[object] | None = None) -> GroupEvidence:
    """Evidence for every group (``index`` in id order) and the given variables.

    Every variable gets its units (distinct units with a value); only those in
    ``magnitudes`` (default: all numeric ones) get totals and largest contributions,
    which is the costly part. With a unit column, (group, unit) pairs are factorised
    once and reused for every variable.
    """
    ids = np.asarray(ids)
    ids = np.where(np.isnan(ids), -1, ids).astype(np.int64) if ids.dtype.kind == "f" else \
        ids.astype(np.int64, copy=False)
    ngroups = len(index)
    valid = ids >= 0
    # (every row in a group, as in most tables: views instead of copies of the million rows)
    every = slice(None) if bool(valid.all()) else valid
    rows = np.bincount(ids[every], minlength=ngroups).astype(np.int64)
    codes, n_codes = unit_codes(unit)
    if codes is None:
        units = rows.copy()
        inverse = group_of_pair = None
    else:
        pair = ids[every] * n_codes + codes[every]
        inverse, uniques = pd.factorize(pair)
        group_of_pair = (np.asarray(uniques) // n_codes).astype(np.int64)
        units = np.bincount(group_of_pair, minlength=ngroups).astype(np.int64)
    variables: dict[object, VarEvidence] = {}
    for name, series in frame_values.items():
        x = numeric_values(series)
        present_all = (~np.isnan(x) if x is not None else series.notna().to_numpy())[every]
        present = slice(None) if bool(present_all.all()) else present_all
        g_rows = ids[every]
        if inverse is None:
            var_units = np.bincount(g_rows[present], minlength=ngroups).astype(np.int64)
        else:
            has = np.bincount(inverse[present], minlength=len(group_of_pair)) > 0
            var_units = np.bincount(group_of_pair[has], minlength=ngroups).astype(np.int64)
        wanted = x is not None and (magnitudes is None or name in magnitudes)
        if not wanted:
            variables[name] = VarEvidence(units=var_units, total=np.full(ngroups, np.nan),
                                          total_abs=np.full(ngroups, np.nan), negative=np.zeros(ngroups, bool),
                                          top=np.full((ngroups, k), np.nan))
            continue
        xv = x[every]
        found = indicator_values(x)
        level, low = found if found is not None else (None, None)
        ones = None
        if inverse is None:
            g, c = g_rows[present], xv[present]
            if level is not None:
                ones = np.bincount(g, weights=(c == level).astype(float), minlength=ngroups).astype(np.int64)
        else:
            sums = np.bincount(inverse[present], weights=xv[present], minlength=len(group_of_pair))
            g, c = group_of_pair[has], sums[has]
            if level is not None:  # distinct units with the attribute in at least one of their rows
                marked = np.bincount(inverse[present], weights=(xv[present] == level).astype(float),
                                     minlength=len(group_of_pair))[has] > 0
                ones = np.bincount(g[marked], minlength=ngroups).astype(np.int64)
        total = np.bincount(g, weights=c, minlength=ngroups)
        signed = len(c) > 0 and float(c.min()) < 0  # (no negative value: |c| is c, no group has one)
        variables[name] = VarEvidence(
            ones=ones,
            level=level if ones is not None else None,
            low=low if ones is not None else None,
            units=var_units,
            total=total,
            total_abs=np.bincount(g, weights=np.abs(c), minlength=ngroups) if signed else total.copy(),
            negative=np.bincount(g, weights=(c < 0).astype(float), minlength=ngroups) > 0 if signed
            else np.zeros(ngroups, dtype=bool),
            top=top_k(g, c, ngroups, k),
        )
    return GroupEvidence(index=index, units=units, variables=variables, unit_column=unit_name, rows=rows)
