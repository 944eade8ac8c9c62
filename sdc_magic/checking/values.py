"""What the cells of a table without evidence hold: numbers, counts, or someone's values.

Split from :mod:`.check` (its unverified path): pure functions over a table's cell values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def numbers_only(values: np.ndarray) -> np.ndarray:
    """Each cell as a float where it is a number (bools excluded), NaN elsewhere."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_):
            out[i] = float(v)
    return out


def individual_cells(values: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """Cells that are neither numbers nor missing: dates, text, lists (see check._check_unverified)."""
    missing = pd.isna(pd.Series(values, dtype=object)).to_numpy() if len(values) else np.zeros(0, dtype=bool)
    listlike = np.fromiter((isinstance(v, list | tuple | set | dict | np.ndarray) for v in values), dtype=bool,
                           count=len(values))
    return (~np.isfinite(numbers) & ~missing) | listlike


def not_counts(values: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Whole numbers that are not counts: columns of shares (every value within [0, 1] and
    some strictly between, so an exact 0 or 1 is a share too) and columns of ranks (the
    values are 1..n, ties averaged). They stay unverified instead of being hidden as
    small counts."""
    out = np.zeros(len(values), dtype=bool)
    for j in np.unique(columns):
        sel = columns == j
        v = values[sel]
        v = v[np.isfinite(v)]
        if len(v) == 0:
            continue
        shares = bool(((v >= 0) & (v <= 1)).all() and ((v > 0) & (v < 1)).any())
        n = len(v)
        ranks = n >= 3 and bool((v >= 1).all() and (v <= n).all() and np.all(2 * v == np.round(2 * v))) \
            and abs(float(v.sum()) - n * (n + 1) / 2) < 1e-9 and len(np.unique(v)) > n // 2
        if shares or ranks:
            out[sel] = True
    return out
