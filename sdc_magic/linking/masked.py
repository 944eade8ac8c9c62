"""Masked copies of a variable: sums that leave rows out by overwriting their values.

``income.where(district != "C", 0)``, ``np.where(cond, income, 0)``, ``income * (district !=
"C")``, polars ``when(cond).then(income).otherwise(0)``, a value clipped (``where(income > 0,
0)``): a column ``x`` equal to another column ``y`` of the same rows except where it holds one
constant ``c``. Its sum over a group g is the sum of ``y`` over the rows of g where x kept y's
value, plus ``c`` times a count; so a table of x's sums publishes sums of ``y`` over *those*
rows. Linked as the table's whole groups, the sums of ``income`` by sex beside the sums of its
masked copy told C's one man's income by subtraction with both tables ``pass`` (red team,
2026-12-05; in pandas, polars and DuckDB read by rows). Linking takes the rows where x kept y's
value as the population such a table publishes, as it takes a 0/1 flag's flagged rows.

Why content and not syntax: the copies are made in too many ways (``where``, ``mask``,
``np.where``, a product with a mask, ``loc`` assignment on a copy, polars ``when``, ``clip``) to
recognise each; comparing the two columns' values row by row finds every one of them.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd

from .identity import frame_hash, hash_column, hashed_columns
from .universes import Universe

#: x is read as a masked copy of y only when it keeps y's value on at least this many rows
#: (so a column of zeros is no copy of everything that is sometimes zero).
MIN_KEPT_ROWS = 1


def kept_rows(frame: pd.DataFrame, var: Hashable, exclude: set[Hashable] | frozenset = frozenset()
              ) -> np.ndarray | None:
    """Rows where column ``var`` keeps the value of another column of ``frame`` that it masks
    (see the module's docstring), or None when it masks none.

    ``var`` masks ``y`` when every row either agrees with ``y`` or holds one same value ``c``
    (missing included) where ``y`` does not, some row does the latter, and some row keeps a value
    of ``y`` that is not ``c``. Among several such columns, the one kept on the most rows."""
    if var not in frame.columns or not frame.columns.is_unique:
        return None
    x = frame[var]
    if not _numeric(x):
        return None
    # (the frame's cached fingerprints of the columns placing its rows reads: a wide frame's
    # other columns are not hashed for this)
    others = {c: frame_hash(frame, c) for c in hashed_columns(frame)
              if c != var and c not in exclude and _numeric(frame[c])}
    return _best(frame_hash(frame, var), others)


def kept_in_universes(universes: list[Universe], frame: pd.DataFrame, var: Hashable
                      ) -> tuple[np.ndarray, Hashable] | None:
    """(rows where column ``var`` keeps the values of a column of the rows its labels name in an
    earlier universe, that column's name) (see :func:`kept_rows`), or None.

    Why: a masked Series grouped by another frame's column (``income.where(district != "C",
    0).groupby(df.sex).sum()``) brings no other column of its rows; the frame its labels name was
    seen by linking before (the earlier table of income). Labels are taken as they are here:
    a wrong match cannot pass the test, which wants every value of one column but the constant."""
    if var not in frame.columns or not frame.columns.is_unique or not _numeric(frame[var]):
        return None
    hx: np.ndarray | None = None
    for u in universes:
        pos = u.rows_of_labels(frame.index)
        if pos is None or not len(pos) or (pos < 0).any():
            continue
        hx = hash_column(frame[var]) if hx is None else hx
        others = {c: h[pos] for c, h in u.hashes.items() if c not in u.key_columns}
        found = _best(hx, others)
        if found is not None:
            name = next(c for c, h in others.items() if np.array_equal(found, _kept_against(hx, h)))
            return found, name
    return None


def _best(hx: np.ndarray, others: dict[Hashable, np.ndarray]) -> np.ndarray | None:
    """The rows where ``hx`` keeps the values of the column of ``others`` it masks on the most rows."""
    best: np.ndarray | None = None
    for hy in others.values():
        kept = _kept_against(hx, hy)
        if kept is not None and (best is None or kept.sum() > best.sum()):
            best = kept
    return best


def _kept_against(hx: np.ndarray, hy: np.ndarray) -> np.ndarray | None:
    same = hx == hy
    changed = ~same
    if not changed.any() or int(same.sum()) < MIN_KEPT_ROWS:
        return None
    c = hx[changed]
    if not (c == c[0]).all():
        return None
    # kept somewhere on a value that is not the constant itself (else x is the constant column)
    if not (same & (hx != c[0])).any():
        return None
    return same


def _numeric(col: pd.Series) -> bool:
    dtype = col.dtype
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))
