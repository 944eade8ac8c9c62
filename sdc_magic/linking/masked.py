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

The test (:func:`kept_against`): x differs from y on some rows and holds one or two values on all
of them (a copy that wrote one or two constants over the rows it hides), or on fewer than five
(another column written over C's three rows). y is another column of the table's own rows (:func:`kept_rows`),
or of the same rows as an earlier table saw them (:func:`kept_at_rows`: the copy summed from a
frame without the income, red team).

Why content and not syntax: the copies are made in too many ways (``where``, ``mask``,
``np.where``, a product with a mask, ``loc`` assignment on a copy, polars ``when``, ``clip``) to
recognise each; comparing the two columns' values row by row finds every one of them.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd

from ..evidence import rows as row_limits
from .identity import MISSING, frame_hash, hash_column, hashed_columns
from .universes import Universe


def kept_rows(frame: pd.DataFrame, var: Hashable, exclude: set[Hashable] | frozenset = frozenset()
              ) -> np.ndarray | None:
    """Rows where column ``var`` keeps the value of another column of ``frame`` that it masks
    (see :func:`kept_against`), or None when it masks none. Among several such columns, the one
    kept on the most rows."""
    found = masking(frame, var, exclude)
    return None if found is None else found[0]


def masking(frame: pd.DataFrame, var: Hashable, exclude: set[Hashable] | frozenset = frozenset()
            ) -> tuple[np.ndarray, Hashable, int] | None:
    """(the rows :func:`kept_rows` finds, the column ``var`` masks, how many values it wrote over
    the others), or None."""
    if var not in frame.columns or not frame.columns.is_unique:
        return None
    x = frame[var]
    if not _numeric(x):
        return None
    # (the frame's cached fingerprints of the columns placing its rows reads: a wide frame's
    # other columns are not hashed for this; a column a sample of rows already tells apart from
    # ``var`` is not hashed whole: 15 ms of a million-row display)
    sample = _sample_rows(len(frame))
    hx_sample = hash_column(x.iloc[sample]) if sample is not None else None
    others = {c: frame_hash(frame, c) for c in hashed_columns(frame)
              if c != var and c not in exclude and _numeric(frame[c])
              and (hx_sample is None or _may_mask(hx_sample, hash_column(frame[c].iloc[sample])))}
    if not others:
        return None
    hx = frame_hash(frame, var)
    found = best_kept(hx, others, same_frame=True)
    return None if found is None else (found[0], found[1], len(pd.unique(hx[~found[0]])))


#: frames from this many rows are first compared on a sample (:func:`_may_mask`)
SAMPLED_FROM = 20_000
_SAMPLE = 2_000


def _sample_rows(n: int) -> np.ndarray | None:
    """Evenly spread rows of a large frame (None: compare every row)."""
    return np.linspace(0, n - 1, _SAMPLE).astype(np.int64) if n >= SAMPLED_FROM else None


def _may_mask(hx: np.ndarray, hy: np.ndarray) -> bool:
    """Whether ``hx`` can mask ``hy`` as far as a sample of their rows tells: the rows it differs on
    hold few values, or are few (a looser test than :func:`kept_against`: the whole columns decide)."""
    changed = hx != hy
    return bool(int(changed.sum()) < row_limits.MASKED_FEW_ROWS
                or len(pd.unique(hx[changed])) <= row_limits.MASKED_VALUES)


def kept_at_rows(universe: Universe, rows: np.ndarray, hx: np.ndarray, skip: Hashable | None = None
                 ) -> np.ndarray | None:
    """Rows (of a frame placed at universe ``rows``, -1: none) where the values ``hx`` keep those of
    a column the universe holds for the same rows (``skip``: not that column), or None.

    Why (red team): the masked copy summed from a frame without the column it masks
    (``d.drop(columns="income").assign(k=...)``, a CTE of DuckDB, polars ``drop``, Spark ``select``)
    has nothing of its own to compare with; the universe holds that column for the same rows."""
    found = rows >= 0
    if not found.any():
        return None
    at, mine = rows[found], hx[found]
    best: np.ndarray | None = None
    for c, h in universe.hashes.items():
        if c == skip or c in universe.key_columns:
            continue
        theirs = h[at]
        known = theirs != MISSING  # (rows appended from frames without that column: not compared)
        kept = kept_against(mine[known], theirs[known]) if known.any() else None
        if kept is None:
            continue
        full = np.ones(len(mine), dtype=bool)
        full[np.flatnonzero(known)] = kept
        if best is None or full.sum() > best.sum():
            best = full
    if best is None:
        return None
    out = np.ones(len(rows), dtype=bool)
    out[np.flatnonzero(found)] = best
    return out


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
        hx = frame_hash(frame, var) if hx is None else hx  # (cached: the table's next test reads it too)
        found = best_kept(hx, {c: h[pos] for c, h in u.hashes.items() if c not in u.key_columns})
        if found is not None:
            return found
    return None


def best_kept(hx: np.ndarray, others: dict[Hashable, np.ndarray], same_frame: bool = False
              ) -> tuple[np.ndarray, Hashable] | None:
    """(the rows where ``hx`` keeps the values of the column of ``others`` it masks on the most rows,
    that column), or None (see :func:`kept_against`)."""
    found = {name: kept for name, hy in others.items()
             if (kept := kept_against(hx, hy, same_frame)) is not None}
    if len(found) > 1:
        # a column masking two, one of which masks the other (a benefit, the income where it is
        # paid; its copy with his 0): the one masked by nothing, so that every such table's rows
        # are those where it keeps the same column's values. Taken against the benefit, the copy's
        # rows were 72 (its zeros with them), the benefit's 16, and the two sums told his, both
        # ``pass`` (red team, stop 49)
        roots = {name: kept for name, kept in found.items()
                 if not any(other != name and kept_against(others[name], others[other], same_frame) is not None
                            for other in found)}
        found = roots or found
    best: tuple[np.ndarray, Hashable] | None = None
    for name, kept in found.items():
        if best is None or kept.sum() > best[0].sum():
            best = (kept, name)
    return best


def kept_against(hx: np.ndarray, hy: np.ndarray, same_frame: bool = False) -> np.ndarray | None:
    """The rows where values ``hx`` keep those of ``hy`` (fingerprints of the same rows) when ``hx``
    masks ``hy``, else None: ``hx`` differs on some rows, those rows hold at most
    ``MASKED_VALUES`` values (missing included) or are fewer than ``MASKED_FEW_ROWS``, and ``hx``
    keeps some value that is none of theirs (else it is a column of those values)."""
    same = hx == hy
    changed = ~same
    if not changed.any() or not same.any():
        return None
    if (changed & np.isin(hy, _missing_hashes()) & ~np.isin(hx, _missing_hashes())).any():
        return None  # (values filled in where the other was missing add values: no mask, red team)
    if not _masks_on(hx, changed):
        return None
    if not _written(hx[changed]) and _masks_on(hy, changed) and (same_frame or _written(hy[changed])):
        # a few rows differing either way: which column is the copy? The one that wrote a constant
        # there (0, missing, a value on two rows or more). Before, the income beside its copy with
        # C's three rows set to 0 *in the same frame* was itself read as a mask of the copy, its sums
        # as those of the other rows, and the two tables told C's man's income, both ``pass``.
        # Neither (values edited into others): in the same frame, no mask (both columns' tables
        # would leave the rows out, and differ by them; :mod:`.edits` compares the two instead);
        # against a column of an earlier frame, a mask as before (the rows differing are left out of
        # this table only: 4 rows edited in a copy, summed in a crosstab after the income's, red team)
        return None
    return same


def _masks_on(h: np.ndarray, changed: np.ndarray) -> bool:
    """Whether values ``h`` look like a mask written over the ``changed`` rows: those rows hold at
    most ``MASKED_VALUES`` values or are fewer than ``MASKED_FEW_ROWS``, the others hold enough
    values (not a coding equal to another column on a few rows), and some of them is none of the
    written ones (else it is a column of those values)."""
    written = pd.unique(h[changed])
    if len(written) > row_limits.MASKED_VALUES and int(changed.sum()) >= row_limits.MASKED_FEW_ROWS:
        return False
    same = ~changed
    return len(pd.unique(h[same])) >= row_limits.MASKED_KEPT_VALUES and bool((same & ~np.isin(h, written)).any())


def _written(values: np.ndarray) -> bool:
    """Whether hashes ``values`` (of the rows a column differs on) look written by a mask: zeros or
    missing values, or each value on two rows or more (a constant)."""
    if np.isin(values, _zero_or_missing_hashes()).all():
        return True
    _, counts = np.unique(values, return_counts=True)
    return bool((counts >= 2).all())


_MISSING_HASHES: np.ndarray | None = None


def _missing_hashes() -> np.ndarray:
    """The hashes of a missing value in the usual dtypes (float NaN, None, ``pd.NA``, float32 NaN).

    Why: a copy with a missing income filled in (the raw frame after one with it missing) was read
    as a mask of the earlier column over that one row, its population the rows it "kept": the two
    sums of a crosstab told the filled income (red team, 2026-12-05)."""
    global _MISSING_HASHES
    if _MISSING_HASHES is None:
        _MISSING_HASHES = np.unique(np.concatenate([
            hash_column(pd.Series([np.nan])), hash_column(pd.Series([None], dtype=object)),
            hash_column(pd.Series([pd.NA], dtype="Float64")), hash_column(pd.Series([np.nan], dtype="float32"))]))
    return _MISSING_HASHES


_ZERO_OR_MISSING: np.ndarray | None = None


def _zero_or_missing_hashes() -> np.ndarray:
    """The hashes of zero in the usual numeric dtypes, and of a missing value (see :func:`_missing_hashes`)."""
    global _ZERO_OR_MISSING
    if _ZERO_OR_MISSING is None:
        zeros = [hash_column(pd.Series([0], dtype=t)) for t in ("int64", "int32", "float64", "float32", "Int64",
                                                                "Float64")]
        _ZERO_OR_MISSING = np.unique(np.concatenate([*zeros, _missing_hashes()]))
    return _ZERO_OR_MISSING


def _numeric(col: pd.Series) -> bool:
    dtype = col.dtype
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))
