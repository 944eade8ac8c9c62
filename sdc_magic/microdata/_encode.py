"""Integer encodings shared by the k-anonymity, suppression and risk modules.

Why a module of its own: every microdata check here reduces key columns to small
integer codes (``-1`` for a missing or suppressed value) and then works on numpy
arrays only. Doing the encoding once, the same way everywhere, is what makes the
"a missing value matches anything" convention identical in the check, in the
suppression and in the risk measure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

NA_CODE = -1


def encode_keys(frames: Sequence[pd.DataFrame], keys: Sequence[str]) -> list[np.ndarray]:
    """Codes of ``keys`` for one or more frames, factorised *jointly* per key.

    Returns one ``(n_rows, n_keys)`` int64 matrix per frame. Values equal across
    frames get the same code, so two frames can be compared code by code. Missing
    values (``None``, ``NaN``, ``NaT``, ``pd.NA``) become :data:`NA_CODE`.
    """
    keys = list(keys)
    out = [np.empty((len(f), len(keys)), dtype=np.int64) for f in frames]
    for j, key in enumerate(keys):
        for f in frames:
            if key not in f.columns:
                raise KeyError(f"key column {key!r} not in the frame")
        joined = pd.concat([f[key].reset_index(drop=True) for f in frames], ignore_index=True)
        if isinstance(joined.dtype, pd.CategoricalDtype):
            joined = joined.astype(object)
        codes, _ = pd.factorize(joined, use_na_sentinel=True)
        start = 0
        for mat, f in zip(out, frames, strict=True):
            mat[:, j] = codes[start:start + len(f)]
            start += len(f)
    return out


def row_ids(mat: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids ``0..m-1`` of the distinct rows of an integer matrix, and ``m``.

    Columns are folded one at a time (mixed radix, re-densified after every step),
    so the intermediate ids never overflow whatever the number of columns.
    """
    n = mat.shape[0]
    if mat.shape[1] == 0:
        return np.zeros(n, dtype=np.int64), (1 if n else 0)
    ids = np.zeros(n, dtype=np.int64)
    m = 1
    for j in range(mat.shape[1]):
        col = mat[:, j].astype(np.int64) + 1  # NA_CODE -> 0
        width = int(col.max()) + 1 if n else 1
        combined = ids * width + col
        uniq, ids = np.unique(combined, return_inverse=True)
        ids = ids.astype(np.int64, copy=False)
        m = len(uniq)
    return ids, m


def unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows, the row -> distinct-row inverse, and the count of each distinct row."""
    ids, m = row_ids(mat)
    counts = np.bincount(ids, minlength=m)
    first = np.full(m, -1, dtype=np.int64)
    # first occurrence of each id (reverse assignment keeps the smallest index)
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)
    return mat[first], ids, counts


def patterns(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Missingness patterns: the distinct boolean "is missing" rows and each row's pattern id."""
    miss = mat == NA_CODE
    uniq, inv, _ = unique_rows(miss.astype(np.int64))
    return uniq.astype(bool), inv


def match_weights(targets: np.ndarray, rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """For every target row, the sum of ``weights`` over the rows that *match* it.

    Two rows match when, on every key, their codes are equal or at least one of them
    is missing (:data:`NA_CODE`): a missing value stands for any category (the
    sdcMicro ``freqCalc`` convention). Computed pattern pair by pattern pair: for a
    target pattern P and a row pattern Q, the rows match exactly when their codes
    agree on the keys observed in both, so one sort + ``searchsorted`` per pair
    answers all targets of P at once. Cost: O(#patterns² · n log n), never O(n²).
    """
    out = np.zeros(len(targets), dtype=np.float64)
    if len(targets) == 0 or len(rows) == 0:
        return out
    tpat, tinv = patterns(targets)
    rpat, rinv = patterns(rows)
    weights = np.asarray(weights, dtype=np.float64)
    for p in range(len(tpat)):
        t_idx = np.flatnonzero(tinv == p)
        for q in range(len(rpat)):
            r_idx = np.flatnonzero(rinv == q)
            observed = ~(tpat[p] | rpat[q])
            if not observed.any():
                out[t_idx] += weights[r_idx].sum()
                continue
            cols = np.flatnonzero(observed)
            both = np.concatenate([targets[np.ix_(t_idx, cols)], rows[np.ix_(r_idx, cols)]])
            ids, m = row_ids(both)
            sums = np.bincount(ids[len(t_idx):], weights=weights[r_idx], minlength=m)
            out[t_idx] += sums[ids[:len(t_idx)]]
    return out
