"""Which evidence is this displayed object? Identity, labels, positions, or none.

A displayed object is one of:

* ``table``: an aggregated table matched to captured evidence (possibly reshaped,
  ``reset_index``-ed, sorted, selected or rounded);
* ``unverified``: aggregated-looking (numbers only) but with no evidence: integer
  cells are taken as counts and checked, anything else is marked unverified;
* ``row-level``: microdata (text, dates or booleans in the body, or rows of a frame
  that was the source of an aggregation): shown with a banner, never exportable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..evidence.flatten import Flat, flatten, numeric
from ..evidence.registry import AMBIGUOUS, CellEvidence, Match, Registry


@dataclass
class Resolved:
    """A displayed object reduced to cells, with their evidence when known."""

    kind: str  # "table" | "unverified" | "row-level" | "empty"
    frame: pd.DataFrame | pd.Series  # what is rendered (a Styler's data; reset_index form kept)
    flat: Flat | None
    match: Match | None = None
    evidence: CellEvidence | None = None
    notes: list[str] = field(default_factory=list)
    cell_rows: np.ndarray | None = None  # display row of each flat cell (after set_index)
    cell_cols: np.ndarray | None = None  # display column of each flat cell
    #: an aggregate the capture could not trace (``capture.contract.mark_untraced``): the columns
    #: computed from aggregates, withheld with every number that is not a whole count; else None
    untraced: tuple[str, ...] | None = None


def unwrap(obj: object) -> tuple[pd.DataFrame | pd.Series, list[str]]:
    """The pandas object behind a display (a Styler shows its data)."""
    notes: list[str] = []
    if isinstance(obj, pd.DataFrame | pd.Series):
        return obj, notes
    data = getattr(obj, "data", None)
    if isinstance(data, pd.DataFrame | pd.Series):
        notes.append("styling was not applied to the checked table")
        return data, notes
    from ..capture.display import is_table_like, to_pandas

    if is_table_like(obj):  # polars, DuckDB, pyarrow, Spark...: their pandas form (evidence registered)
        return to_pandas(obj)
    raise TypeError(f"cannot check a {type(obj).__name__}")


def resolve(obj: pd.DataFrame | pd.Series, registry: Registry) -> Resolved:
    """Match a displayed object to its evidence, or classify it."""
    if obj.size == 0:
        reason = _withheld(obj)
        if reason is not None:  # (an empty result of a withheld shape: its emptiness is what it tells,
            from ..capture.contract import Withheld  # and "pass" beside "blocked" told it; red team)

            raise Withheld(reason)
        return Resolved("empty", obj, flatten(obj) if _flattenable(obj) else None)
    reason = _withheld(obj)
    if reason is not None:
        # (before any match by content: an object the capture withheld stays withheld even when its
        # figures happen to match a table's evidence; red team, stop 51: unique() per group, then
        # .apply(min), matched the unique() call's groups and drew each district's lowest income)
        from ..capture.contract import Withheld

        raise Withheld(reason)
    origin = _origin(obj)
    flat: Flat | None = None
    match: Match | None = None
    if _may_match(obj, obj, registry):
        flat = flatten(obj)
        match = registry.match(flat, obj, origin)
    if match is not None and match.how == AMBIGUOUS:
        # (its figures are those of tables that differ: which rows it shows cannot be told)
        return Resolved("unverified", obj, flat, notes=[
            "its labels and figures match more than one table computed in this session, which differ: "
            "which one it shows cannot be told, so it is checked as a table without evidence. Display the "
            "table itself (not a sorted, rounded or reshaped copy), or compute it just before showing it"])
    if match is not None:
        return _resolved_table(obj, flat, match)
    # reset_index() of a captured table: dimension columns back into the index
    if isinstance(obj, pd.DataFrame):
        for entry in registry.entries():
            dims = [c for c in obj.columns if str(c) in entry.dims]
            if dims and len(dims) == len(entry.dims) and len(dims) < obj.shape[1]:
                try:
                    if not _may_match(obj, None, registry, dims):
                        continue
                    indexed = obj.set_index(dims)
                except (KeyError, ValueError, TypeError):
                    continue
                inner = flatten(indexed)
                match = registry.match(inner, None, origin)
                if match is not None and match.how != AMBIGUOUS:
                    res = _resolved_table(indexed, inner, match)
                    res.frame = obj
                    value_cols = [i for i, c in enumerate(obj.columns) if c not in dims]
                    res.cell_rows = inner.row_pos
                    res.cell_cols = np.asarray(value_cols)[inner.col_pos]
                    return res
    wide = _columns_of_one_dimension(obj, registry, origin)
    if wide is not None:
        return wide
    windows = _row_windows(obj)
    if windows is not None:  # rows with their groups' counts or means beside them: those withheld
        return Resolved("row-level", obj, flat, untraced=windows)
    if _known_aggregate(obj):
        resolved = _aggregate_without_evidence(obj, flat if flat is not None else flatten(obj))
        resolved.untraced = _untraced(obj)
        return resolved
    if _looks_row_level(obj, registry):
        return Resolved("row-level", obj, flat)  # (its cells are not needed: flattened only if matched)
    return Resolved("unverified", obj, flat if flat is not None else flatten(obj))


#: Rows of a displayed frame above which its first rows are tried against the tables before it
#: is flattened whole (:func:`_may_match`).
SAMPLE_ROWS = 1_000


def _may_match(obj: pd.DataFrame | pd.Series, identity: object | None, registry: Registry,
               index_by: list | None = None) -> bool:
    """Whether ``obj`` (re-indexed by ``index_by`` columns, if given) may match a table: its first
    :data:`SAMPLE_ROWS` rows, flattened, are matched first, and a frame they prove is no table (a
    word among its cells, a figure no table has) is not flattened whole. Exact: a frame whose
    first rows do not disprove it is matched whole, as before.

    Why (stop 70): a raw frame of 1M rows × 4 was flattened whole, then once per table grouped
    by its columns, before it was found to be rows: 14 s to display it in a session of 8 tables.
    """
    if len(obj) <= SAMPLE_ROWS:
        return True
    head = obj.iloc[:SAMPLE_ROWS]
    if index_by is not None:
        head = head.set_index(index_by)
    try:
        sample = flatten(head)
    except ValueError:
        return True  # (it cannot tell: the whole decides, as before)
    return registry.might_match(sample, identity, len(obj))


def _columns_of_one_dimension(obj: pd.DataFrame | pd.Series, registry: Registry, origin: int | None
                              ) -> Resolved | None:
    """A wide frame whose unnamed columns are the values of a table's one remaining dimension,
    its other dimensions the index or label columns: DuckDB's ``PIVOT t ON sex USING count(*)
    GROUP BY region`` as ``.df()`` gives it (``region | F | M``; ``F_n | M_n`` for ``USING
    count(*) AS n``; ``F_n | F_s | M_n | M_s`` for ``USING count(*) AS n, sum(v) AS s``, the
    aggregate a measure). Matched as the table it is, that dimension named.

    Why (red team of stop 69): that frame was registered as one table per column (F, M), so it
    was protected column by column, without the region totals, and not linked: R1's F 3 and
    R3's F 2 hidden alone, then the region sizes (``pass``) gave them back, 12 − 9 and 9 − 7.
    Matched so, it is protected and linked as the same figures in the relation's own layout are.
    """
    if not isinstance(obj, pd.DataFrame) or isinstance(obj.columns, pd.MultiIndex) or obj.columns.name is not None \
            or not obj.columns.is_unique:
        return None
    indexed_by = {str(n) for n in obj.index.names if n is not None}
    # (each way of naming the columns is matched once, against every table: one try per table
    # was a match over every table each, 36 s for a frame matching none of 150; helper-95)
    tried: set[tuple] = set()
    for entry in registry.entries():
        dims = [str(d) for d in entry.dims]
        keys = [c for c in obj.columns if str(c) in dims]
        missing = [d for d in dims if d not in {str(k) for k in keys} | indexed_by]
        rest = [c for c in obj.columns if c not in keys]
        if len(missing) != 1 or not rest or (keys and indexed_by):
            continue
        # (the column names first: a frame of rows, the usual display matching no table, is never
        # re-indexed for it)
        layouts = {(tuple(map(str, keys)), missing[0], tuple(repr(x) for x in c)): c
                   for c in _column_layouts(rest, entry.flat.dims.get(missing[0]), missing[0])}
        layouts = {k: c for k, c in layouts.items() if k not in tried}
        if not layouts:
            continue
        try:
            indexed = obj.set_index(keys) if keys else obj
        except (KeyError, ValueError, TypeError):
            continue
        for layout, columns in layouts.items():
            tried.add(layout)
            named = indexed[rest].copy(deep=False)
            named.columns = columns
            inner = flatten(named)
            match = registry.match(inner, None, origin)
            if match is None or match.how == AMBIGUOUS:
                continue
            res = _resolved_table(named, inner, match)
            res.frame = obj
            res.cell_rows = inner.row_pos
            res.cell_cols = np.asarray([obj.columns.get_loc(c) for c in rest], dtype=np.int64)[inner.col_pos]
            return res
    return None


def _column_layouts(columns: list, values: np.ndarray | None, dim: str) -> list[pd.Index]:
    """The ways ``columns`` can name the dimension ``dim``'s labels (by their text): as they are;
    one suffix ``_x`` common to every column dropped; or each ``<label>_<aggregate>`` split into
    the label and the aggregate, a second (measure) level."""
    if values is None:
        return []
    by_text: dict[str, object] = {}
    for v in pd.unique(pd.Series(values, dtype=object)):
        by_text.setdefault(str(v), v)
    texts = [str(c) for c in columns]
    if all(t in by_text for t in texts):
        return [pd.Index([by_text[t] for t in texts], dtype=object, name=dim)]
    if not all("_" in t for t in texts):
        return []
    split = [t.rsplit("_", 1) for t in texts]
    if not all(head in by_text for head, _ in split):
        return []
    layouts = []
    if len({tail for _, tail in split}) == 1:
        layouts.append(pd.Index([by_text[head] for head, _ in split], dtype=object, name=dim))
    layouts.append(pd.MultiIndex.from_tuples([(by_text[head], tail) for head, tail in split], names=[dim, None]))
    return layouts


def _aggregate_without_evidence(obj: pd.DataFrame | pd.Series, flat: Flat) -> Resolved:
    """An aggregation's result that matched no evidence: checked as an unverified table."""
    if isinstance(obj, pd.Series) or not isinstance(obj.index, pd.RangeIndex):
        # a pandas aggregation: its labels are the index, every column holds values (a date
        # or text among them is some person's value, withheld by the unverified check)
        return Resolved("unverified", obj, flat, notes=["an aggregation without evidence"])
    # an engine aggregation without evidence (or a reset_index): its text columns are the labels,
    # except those computed from the aggregates (``count(*)::varchar || ' people'``)
    computed = set(_untraced(obj) or ())
    labels = [c for c in obj.columns
              if not (pd.api.types.is_numeric_dtype(obj[c]) and not pd.api.types.is_bool_dtype(obj[c]))
              and not _individual_values(obj[c]) and str(c) not in computed]
    if labels and len(labels) < obj.shape[1]:
        try:
            indexed = obj.set_index(labels)
            return Resolved("unverified", indexed, flatten(indexed),
                            notes=["an aggregation without evidence: its label columns are shown as the index"])
        except (KeyError, ValueError, TypeError):
            pass
    return Resolved("unverified", obj, flat)


def _individual_values(col: pd.Series) -> bool:
    """A column that holds values, never labels: dates and times, lists, sets and dicts.

    (A date can be a label, e.g. a month; in a result without evidence it is taken as a value,
    withheld: an earliest or latest date is one person's.)
    """
    if pd.api.types.is_datetime64_any_dtype(col) or pd.api.types.is_timedelta64_dtype(col):
        return True
    sample = col.dropna().head(50).tolist()
    return any(isinstance(v, list | tuple | set | dict | pd.Timestamp) for v in sample)


def _withheld(obj: object) -> str | None:
    from ..capture.contract import withheld_reason

    return withheld_reason(obj)


def _origin(obj: object) -> int | None:
    from ..capture.contract import origin_of

    return origin_of(obj)


def _known_aggregate(obj: pd.DataFrame) -> bool:
    from ..capture.contract import is_aggregate

    return is_aggregate(obj)


def _row_windows(obj: pd.DataFrame | pd.Series) -> tuple[str, ...] | None:
    from ..capture.contract import row_window_columns

    return row_window_columns(obj)


def _untraced(obj: pd.DataFrame | pd.Series) -> tuple[str, ...] | None:
    from ..capture.contract import untraced_columns

    return untraced_columns(obj)


def _flattenable(obj: pd.DataFrame | pd.Series) -> bool:
    try:
        flatten(obj)
        return True
    except ValueError:
        return False


def _resolved_table(obj: pd.DataFrame | pd.Series, flat: Flat, match: Match) -> Resolved:
    evidence = match.entry.evidence.take(match.positions)
    res = Resolved("table", obj, flat, match=match, evidence=evidence, notes=list(match.entry.notes))
    res.cell_rows = flat.row_pos
    res.cell_cols = flat.col_pos
    return res


def _looks_row_level(obj: pd.DataFrame | pd.Series, registry: Registry) -> bool:
    frame = obj.to_frame() if isinstance(obj, pd.Series) else obj
    for dtype in frame.dtypes:
        if not (pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)):
            return True
    # rows of a frame that was the source of a captured aggregation
    for entry in registry.entries()[:32]:
        source = getattr(entry.source, "frame", None)
        if isinstance(source, pd.DataFrame) and source is not obj:
            if set(map(str, frame.columns)) <= set(map(str, source.columns)) and len(frame) <= len(source):
                try:
                    if frame.index.isin(source.index).all() and isinstance(source.index, pd.RangeIndex):
                        return True
                except (TypeError, ValueError):  # e.g. a MultiIndex against a RangeIndex
                    continue
                if _carries_row_index(frame.index, source):
                    return True
    return numeric(np.asarray(frame.to_numpy(dtype=object)).reshape(-1)) is None


def _carries_row_index(index: pd.Index, source: pd.DataFrame) -> bool:
    """A MultiIndex with an unnamed level of distinct source row labels holds one row per
    person (``groupby(...).nlargest``, ``head`` per group): row-level values, not a table."""
    if not isinstance(index, pd.MultiIndex) or len(index) < 1:
        return False
    for level, name in enumerate(index.names):
        if name is not None:
            continue
        values = index.get_level_values(level)
        try:
            if values.is_unique and bool(values.isin(source.index).all()) \
                    and pd.api.types.is_integer_dtype(values.dtype):
                return True
        except (TypeError, ValueError):
            continue
    return False
