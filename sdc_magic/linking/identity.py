"""Row fingerprints: how linking tells which rows of two frames are the same people.

Rows are not identified by index labels alone (``reset_index(drop=True)`` keeps the people
and loses the labels). Each row is fingerprinted by a 64-bit hash of its value per column
(:func:`frame_hash`, cached per frame object through a weak reference, so no frame is kept
alive). Several columns combine into one content hash per row (:func:`combine`), and
duplicate rows are told apart by their occurrence rank (:func:`with_rank`): filters keep
the order of the rows. How a frame is matched to the rows of earlier frames with these is
in :mod:`.universes`.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd

from ..evidence import rows as row_limits
from ..evidence.weak_table import WeakTable

#: The hash of "this row has no such column" (a row appended from a frame without it).
MISSING = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_GOLD = np.uint64(0x94D049BB133111EB)
#: Frames whose column hashes are cached (the newest; a display looks at one or two).
MAX_CACHED_FRAMES = 4

_frame_hashes = WeakTable(MAX_CACHED_FRAMES)  # frame -> {column: (stamp, hashes, display hashed in)}
#: The display under way (:func:`new_display`): hashes of the values read during it are fresh for it.
_display = [0]


def new_display() -> None:
    """A display starts or ends: hashes read from a frame's values before are no longer fresh
    (:func:`fresh_hash`), as the frame may be edited in place between two displays."""
    _display[0] += 1


def forget_fingerprints() -> None:
    """Forget every frame's cached column fingerprints (as a fresh kernel has none: benchmarks)."""
    _frame_hashes.clear()


def hash_column(col: pd.Series) -> np.ndarray:
    """uint64 hash of each value of ``col`` (its text for unhashable values: lists, dicts).

    An object column is typed first (``infer_objects``): numbers that went through an object
    array (``pd.DataFrame(f.values, ...)``, ``f.T.T``) hash as the numbers they are, so the same
    rows are found again (red team: a filtered copy rebuilt from ``.values`` was other people).
    """
    if col.dtype == object:
        col = col.infer_objects()
    if col.dtype == np.float64:
        # whole numbers as the integers they are, in one pass (the bits of the others: pandas
        # hashes a float64 as its bits, and an int64 or uint64 as its value's)
        values = col.to_numpy()
        with np.errstate(invalid="ignore"):  # (NaN and values beyond int64 do not come back equal)
            ints = values.astype(np.int64)
            bits = np.where(ints == values, ints, values.view(np.int64))
        return pd.util.hash_pandas_object(pd.Series(bits, copy=False), index=False).to_numpy(dtype=np.uint64)
    try:
        hashed = pd.util.hash_pandas_object(col, index=False).to_numpy(dtype=np.uint64)
    except TypeError:  # unhashable values (lists, dicts)
        return pd.util.hash_pandas_object(col.astype(str), index=False).to_numpy(dtype=np.uint64)
    if pd.api.types.is_float_dtype(col.dtype):
        hashed = _as_integers(col, hashed)
    return hashed


def _as_integers(col: pd.Series, hashed: np.ndarray) -> np.ndarray:
    """A float column's hashes (``hashed``) with its whole numbers hashed as the integers they are
    (float32, nullable floats: their missing values keep pandas' hash; float64 in :func:`hash_column`).

    Why: ``people.where(people.flag == 1).dropna()`` turns every integer column into floats; its
    rows kept their labels, but no column but the text ones agreed with the people's (1.0 and 1
    hashed apart), the labels were refused, and A's, B's and the flagged counts by sex were never
    compared: 14 − 8 − 5 = C's flagged woman, all ``pass`` (red team)."""
    values = col.to_numpy(dtype=np.float64, na_value=np.nan)
    whole = np.isfinite(values) & (np.abs(values) < 2.0 ** 62)
    whole[whole] = values[whole] == np.floor(values[whole])
    if not whole.any():
        return hashed
    hashed = np.array(hashed, dtype=np.uint64)  # (pandas' array may be read-only)
    ints = pd.Series(values[whole].astype(np.int64))
    hashed[whole] = pd.util.hash_pandas_object(ints, index=False).to_numpy(dtype=np.uint64)
    return hashed


def with_index_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its named index levels that are not columns as columns too (same index).

    Why: ``set_index("income")`` moves the column that tells people apart into the labels; the
    rows of a filter of it were then compared with other frames' rows without it (their content
    matched nothing, their labels were other labels), and three tables whose flagged rows add up
    gave C's flagged woman away (14 − 8 − 5, red team's chains; also through ``query`` and
    ``.loc``, whatever selected the rows). The frame itself is untouched (a shallow copy gets
    the columns), its cached column hashes are shared with the copy (each checked by its stamp)
    and its ``attrs`` kept.
    """
    if not isinstance(frame, pd.DataFrame) or isinstance(frame.columns, pd.MultiIndex):
        return frame
    names = [n for n in frame.index.names if n is not None and n not in frame.columns]
    if not names or len(set(names)) != len(names) or not frame.columns.is_unique:
        return frame
    view = frame.copy(deep=False)
    for name in names:
        view[name] = frame.index.get_level_values(name).to_numpy()
    view.attrs = dict(frame.attrs)
    shared = _frame_hashes.get(frame)
    if shared is None:
        shared = {}
        _frame_hashes.set(frame, shared)
    _frame_hashes.set(view, shared)
    return view


def _stamp(col: pd.Series) -> tuple:
    """Length, dtype and a hash of 16 spread values: a cached column changed in place shows."""
    n = len(col)
    take = np.unique(np.linspace(0, max(n - 1, 0), num=min(n, 16)).astype(np.int64)) if n else np.zeros(0, int)
    return n, str(col.dtype), hash_column(col.iloc[take]).tobytes()


def frame_hash(frame: pd.DataFrame, column: Hashable) -> np.ndarray:
    """uint64 hash of each row's value in ``column``, cached per frame object (weakly)."""
    cached_columns = _frame_hashes.get(frame)
    if cached_columns is None:
        cached_columns = {}
        if not _frame_hashes.set(frame, cached_columns):
            return hash_column(frame[column])
    col = frame[column]
    stamp = _stamp(col)
    cached = cached_columns.get(column)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    h = hash_column(col)
    cached_columns[column] = (stamp, h, _display[0])
    return h


def fresh_hash(frame: pd.DataFrame, column: Hashable) -> np.ndarray:
    """:func:`frame_hash` computed again from the values, the cache brought up to date.

    Why: the cache's stamp samples 16 values, so a frame edited in place between two outputs
    (``df.loc[df.person == 1, "income"] = 0``) kept its earlier hashes; the values a table of
    sums publishes (:mod:`.edits`) are read from the frame itself (~10 ms per million rows).
    Hashes read from the values during this display (:func:`new_display`) are those values':
    a frame's first table hashed its columns a moment before, and read them again for nothing."""
    col = frame[column]
    cached_columns = _frame_hashes.get(frame)
    cached = cached_columns.get(column) if cached_columns is not None else None
    stamp = _stamp(col)
    if cached is not None and cached[2] == _display[0] and cached[0] == stamp:
        return cached[1]
    h = hash_column(col)
    if cached_columns is not None:
        cached_columns[column] = (stamp, h, _display[0])
    return h


def key_hashes_from_groups(frame: pd.DataFrame, keys: list[str], ids: np.ndarray, index: pd.Index | None) -> None:
    """Put the fingerprints of ``frame``'s key columns in :func:`frame_hash`'s cache from its grouping.

    Why: hashing a million text keys costs 15–20 ms a column, a fifth of a pandas crosstab's
    check; the table's own call has grouped the rows (``ids``: each row's group, ``index``: the
    groups' labels), and pandas fingerprints every value on its own (``index=False``), so the
    labels' fingerprints taken by group are the rows' (~2 ms a column). Only dtypes whose
    fingerprint depends on the value alone (text, integers, booleans, dates, categoricals of
    those; not floats, whose groups merge 0.0 and -0.0, nor objects, typed by their column), a
    label of the column's own dtype and every row's label equal to its value now
    (:func:`_labels_are_the_values`); rows outside every group (a missing key) are hashed directly. Anything else is left to :func:`frame_hash`.

    Why every row's label is compared (red team, stop 52): the grouping is whatever pandas grouped
    by — a Series only *named* like the column, or the column as it was at the call, edited in
    place since — and fingerprints taken from it on the strength of a sample were cached as the
    column's: later tables of the real column were other rows, and 37 + 36 − 40 − 30 gave C's 3
    at ``pass``. The comparison costs about half the hashing it replaces.
    """
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or index is None or not keys or not len(frame) or len(ids) != len(frame) \
            or not frame.columns.is_unique or not len(index):
        return
    names = [str(n) for n in index.names]
    if len(names) != len(keys) or names != [str(k) for k in keys] or ids.max() >= len(index):
        return
    cached = _frame_hashes.get(frame)
    if cached is None:
        cached = {}
        if not _frame_hashes.set(frame, cached):
            return
    inside = ids >= 0
    for pos, key in enumerate(keys):
        if key not in frame.columns:
            continue
        col = frame[key]
        labels = index.get_level_values(pos) if isinstance(index, pd.MultiIndex) else index
        if labels.dtype != col.dtype or not _value_alone_hashed(col.dtype):
            continue
        stamp = _stamp(col)
        if (found := cached.get(key)) is not None and found[0] == stamp:
            continue
        if not _labels_are_the_values(labels, ids, inside, col):
            continue
        per_label = hash_column(pd.Series(labels.array, copy=False))
        if inside.all():
            hashes = per_label.take(ids)
        else:
            hashes = np.empty(len(col), dtype=np.uint64)
            hashes[inside] = per_label[ids[inside]]
            hashes[~inside] = hash_column(col[~inside])
        cached[key] = (stamp, hashes, None)  # (from the call's grouping: never "fresh")


def _labels_are_the_values(labels: pd.Index, ids: np.ndarray, inside: np.ndarray, col: pd.Series) -> bool:
    """Whether every row in a group holds its group's label in ``col`` (missing equals missing)."""
    every = bool(inside.all())
    expected = labels.array.take(ids if every else ids[inside])
    current = col.array if every else col.array[inside]
    try:
        eq = expected == current
    except (TypeError, ValueError):
        return False
    same = eq.astype(bool, copy=False) if isinstance(eq, np.ndarray) else eq.to_numpy(dtype=bool, na_value=False)
    if bool(same.all()):
        return True
    both_missing = np.asarray(pd.isna(expected), dtype=bool) & np.asarray(pd.isna(current), dtype=bool)
    return bool((same | both_missing).all())


def _value_alone_hashed(dtype: object) -> bool:
    """Whether every value of this dtype is fingerprinted the same wherever it sits and whatever
    its group's other values (see :func:`key_hashes_from_groups`)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return _value_alone_hashed(dtype.categories.dtype)
    return isinstance(dtype, pd.StringDtype) or getattr(dtype, "kind", "O") in "biumM"


def hash_labels(index: pd.Index) -> np.ndarray:
    """uint64 hash of each index label, the same in every process (pandas' fixed hash key).

    Why: a restarted kernel's frames are found among an earlier kernel's rows by their index
    labels, as within one kernel; only these hashes of the labels are saved, never the labels.
    """
    return pd.util.hash_pandas_object(index, index=False).to_numpy(dtype=np.uint64) if len(index) else \
        np.zeros(0, dtype=np.uint64)


def combine(hashes: list[np.ndarray]) -> np.ndarray:
    """One content hash per row from its hashes in several columns (order matters)."""
    out = np.zeros(len(hashes[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for h in hashes:
            out = (out ^ h) * _MIX
            out ^= out >> np.uint64(31)
    return out


def with_rank(h: np.ndarray) -> np.ndarray:
    """Tell duplicate rows apart by their occurrence rank (filters keep the order)."""
    rank = pd.Series(h).groupby(h, sort=False).cumcount().to_numpy().astype(np.uint64)
    with np.errstate(over="ignore"):
        out = (h ^ (rank * _GOLD)) * _MIX
    return out ^ (out >> np.uint64(29))


def group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.Index] | None:
    """The group of each row by ``keys`` and the groups' labels, in order of first appearance,
    as ``frame.groupby(keys, observed=True, dropna=False, sort=False)`` numbers them; None when
    the fingerprints cannot tell the groups apart (then pandas groups the rows).

    Why: the rows behind a polars or DuckDB table arrive as pandas frames with Arrow-backed
    text keys, and pandas' groupby factorised them in 0.12–0.35 s per display of a million rows
    (half of a polars display). The keys' fingerprints are computed anyway (the universe keeps
    them, :func:`frame_hash` caches them per frame), and a factorisation of their combination
    costs 0.03 s. Equal keys with different fingerprints (``-0.0`` and ``0.0``, two NaN payloads)
    show as labels that are not one per group: pandas decides then. Two different keys with one
    64-bit fingerprint (chance ~G²/2^65 for G groups) would be one group: the same bet every row
    fingerprint of linking makes. Only keys whose fingerprint tells values apart are grouped so.
    """
    n = len(frame)
    if not keys:
        return np.zeros(n, dtype=np.int64), pd.Index(["all"])
    if n == 0 or not frame.columns.is_unique or not all(_hash_tells_values_apart(frame[k].dtype) for k in keys):
        return None
    codes, _ = pd.factorize(combine([frame_hash(frame, k) for k in keys]), sort=False)
    # factorize numbers groups by first appearance: a group's first row is where the running
    # maximum of the codes grows
    first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)
    columns = [frame[k].iloc[first] for k in keys]
    if len(keys) == 1:
        index = pd.Index(columns[0].array, name=keys[0])
    else:
        index = pd.MultiIndex.from_arrays([c.array for c in columns], names=keys)
    if not index.is_unique:
        return None
    return np.asarray(codes, dtype=np.int64), index


def _hash_tells_values_apart(dtype: object) -> bool:
    """Whether pandas' fingerprint of a column of this dtype differs for different values.

    Numbers, booleans, dates and text typed as such do; an ``object`` column does not: pandas
    hashes mixed values through ``str()``, so 7 and "7", b"north" and "north" are one value
    (red team: a crosstab of codes stored as 7 and "7" was grouped as one code). Those go to
    pandas' groupby, as do categoricals whose categories are objects.
    """
    if isinstance(dtype, pd.CategoricalDtype):
        return _hash_tells_values_apart(dtype.categories.dtype)
    if isinstance(dtype, pd.StringDtype):
        return True
    kind = getattr(dtype, "kind", "O")
    return kind in "biufmM"


def hashed_columns(frame: pd.DataFrame) -> list[Hashable]:
    """The columns whose hashes identify rows: uniquely named ones, at most ``MAX_HASHED_COLUMNS``
    (not a table's derived measures, ``row_limits.DERIVED_COLUMNS``)."""
    derived = set(frame.attrs.get(row_limits.DERIVED_COLUMNS) or ()) if frame.attrs else set()
    columns = [c for c in frame.columns if c not in derived] if derived else list(frame.columns)
    if not frame.columns.is_unique:
        counts = frame.columns.value_counts()
        columns = [c for c in columns if counts[c] == 1]
    return columns[:row_limits.MAX_HASHED_COLUMNS]


#: Evidence a recode needs (:func:`recoded`): the chance that unrelated columns look like one,
#: at most e^-RECODE_EVIDENCE (e^-20: about 2e-9).
RECODE_EVIDENCE = 20.0


def recoded(mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether one column's values (hashes) are a many-to-one function of the other's over the same
    rows, in either direction: a recode (bands cut from ages, a region coarsened from its
    districts), not the same values, nor a one-to-one map of them.

    Why (red team, stop 50): ``pd.cut(df.age, bins).value_counts()`` brings the rows of ``df`` under
    their labels with ``age`` in bands: its values confirm nothing, so its rows were read as other
    people and the band counts beside the counts by sex (71 against 73: two people over 100), or
    of everyone beside those outside district C (C by band), were all ``pass``.

    A function is only evidence where the finer column repeats: each row whose value was seen
    before must map where that value mapped, by chance with probability Σ share² of the coarser
    column's values; the rows that repeat must make that chance below e^-:data:`RECODE_EVIDENCE`
    (a constant or a near-unique column proves nothing)."""
    if len(mine) != len(theirs) or not len(mine):
        return False
    for fine, coarse in ((mine, theirs), (theirs, mine)):
        pairs = np.unique(np.stack([fine, coarse]), axis=1)
        n_fine = len(np.unique(fine))
        if pairs.shape[1] != n_fine:
            continue  # some value of the finer column maps to two values
        _, counts = np.unique(coarse, return_counts=True)
        if len(counts) < 2 or len(counts) >= n_fine:
            continue  # (one to one is no recode: every age shifted by 31 is other people's ages)
        chance = float(np.sum((counts / len(coarse)) ** 2))
        if (len(fine) - n_fine) * -np.log(chance) >= RECODE_EVIDENCE:
            return True
    return False
