"""What the cells of a table without evidence hold: numbers, counts, or someone's values.

Split from :mod:`.check` (its unverified path): pure functions over a table's cell values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..evidence.flatten import Flat


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


def untraced_cells(frame: pd.DataFrame | pd.Series, flat: Flat, untraced: tuple[str, ...] | None,
                   not_a_count: np.ndarray) -> np.ndarray | None:
    """Cells of an untraced aggregate (``capture.contract.mark_untraced``) to withhold, or None.

    Its computed columns (a running total, a share, a count turned into text) and, in every
    column, the numbers that are not whole counts (``not_a_count``): no evidence says what they
    are made of, and beside the counts they give a hidden one back (40 / 54.8 % = 73 in all).
    """
    if untraced is None:
        return None
    names = [str(c) for c in frame.columns] if isinstance(frame, pd.DataFrame) else [str(frame.name)]
    every = "*" in untraced  # (capture.contract.EVERY_COLUMN) none is known to be a count
    computed = np.array([every or n in set(untraced) for n in names], dtype=bool)
    return computed[flat.col_pos] | not_a_count


def row_windows_hidden(frame: pd.DataFrame | pd.Series, windows: tuple[str, ...] | None,
                       shape: tuple[int, int]) -> tuple[np.ndarray, list[str]]:
    """The hidden cells of row-level data: its columns computed over groups of rows, with a note."""
    hidden = np.zeros(shape, dtype=bool)
    if not windows or not isinstance(frame, pd.DataFrame):
        return hidden, []
    names = [str(c) for c in frame.columns]
    withheld = [j for j, n in enumerate(names) if n in set(windows)]
    hidden[:, withheld] = True
    if not withheld:
        return hidden, []
    shown = ", ".join(names[j] for j in withheld)
    return hidden, [f"{shown}: computed over groups of rows (a group's count or mean on each row), withheld: "
                    "a small group's is its people's. Aggregate the groups instead (checked and protected)"]
