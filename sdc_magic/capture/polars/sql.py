"""polars SQL (``df.sql``, ``pl.sql``): checked as the polars aggregation it stands for, else with
DuckDB's evidence of the same query.

Why: polars SQL hands back a finished table; nothing of its plan says which rows made each cell,
so every such table used to be an aggregate without evidence (``review``, its counts checked as
bare numbers, never compared with other tables): 55 of the 66 honest sequences a red team's 2,000
seeded sessions left short of ``pass``, and differencing through it went unseen. Two ways, each
used only when it computes exactly the user's rows (same columns, same values, in any order):

1. A plain grouped query over one eager frame (``SELECT keys, aggregates FROM t [WHERE ...] GROUP
   BY keys``, :mod:`..grouped_sql`) is, in polars' own SQL, ``t.filter(pl.sql_expr(where))
   .group_by(keys).agg(pl.sql_expr(aggregate))``: that chain runs through the capture, so the
   table gets the evidence and the linking (lineage, labels) of the same polars calls.
2. Otherwise DuckDB, which reads polars and pandas frames where they are, runs the same query
   once more over the same frames (:func:`..duckdb.query_form`: the evidence of
   ``duckdb.sql(query).pl()``). Not when a frame has columns whose names differ only in case
   (DuckDB would bind one for the other).

What the frames are: ``df.sql(query)`` reads ``df`` as ``self`` (or its ``table_name``);
``pl.sql(query)`` reads, for each name, the nearest frame of that name in the callers' locals, as
polars does. Only eager polars and pandas frames are read; a name that polars would resolve to
anything else (a ``LazyFrame``, a Series, an Arrow table) leaves the table as before, an
aggregate without evidence; so do ``LazyFrame.sql``, ``SQLContext`` and a dialect difference
(``avg(x)::int`` truncates in polars and rounds in DuckDB).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .. import contract
from ..depth import passthrough
from ..grouped_sql import GroupedQuery, grouped_query

#: Relative tolerance between the two computations' figures (sums in another order).
RTOL = 1e-9


def caller_frames(query: Any, depth: int) -> dict[str, Any]:
    """The frames ``pl.sql(query)`` reads, as polars finds them: for each name of the query, the
    nearest frame-like object of that name in the locals of the callers from ``depth`` frames up;
    {} when one of them is not an eager polars or pandas frame (read as it is by both ways)."""
    if not isinstance(query, str):
        return {}
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
    found: dict[str, Any] = {}
    frame = sys._getframe(depth + 1)
    try:
        while frame is not None and named - found.keys():
            scope = frame.f_locals
            for name in named - found.keys():
                if name in scope and _frame_like(scope[name]):
                    found[name] = scope[name]
            frame = frame.f_back
    finally:
        del frame
    return found if all(_readable(v) for v in found.values()) else {}


def method_frames(obj: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``df.sql(query, table_name=...)``: the frame itself under its table name."""
    name = kwargs.get("table_name", "self")
    return {str(name): obj} if isinstance(name, str) and _readable(obj) else {}


def _frame_like(obj: Any) -> bool:
    """What polars' SQL may register under a name: its own frames, pandas', Arrow's and the like."""
    module = type(obj).__module__ or ""
    return (module.startswith(("polars", "pandas", "pyarrow")) and type(obj).__name__ in {
        "DataFrame", "LazyFrame", "Series", "Table", "RecordBatch"}) or hasattr(type(obj), "__arrow_c_stream__")


def _readable(obj: Any) -> bool:
    """A frame read as it is by both ways (no plan to run): an eager polars or a pandas frame."""
    if isinstance(obj, pd.DataFrame):
        return True
    t = type(obj)
    return t.__name__ == "DataFrame" and t.__module__.startswith("polars")


def _polars_frame(obj: Any) -> bool:
    return _readable(obj) and not isinstance(obj, pd.DataFrame)


def mark_result(capture: Any, result: Any, shape: Any, query: str, frames: dict[str, Any],
                withhold: Callable[..., None]) -> None:
    """Mark a polars SQL ``result`` (an eager frame): evidence when one of the two ways computes
    the same rows (see the module docstring), else by the query's ``shape`` (a reason: withheld
    with it; an ``Untraced``: an aggregate without evidence). A shape DuckDB's capture withholds,
    or a failure here, withholds the result (fail closed). ``capture``: the session's
    :class:`~.PolarsCapture`."""
    from ..duckdb import mark_unplanned
    from ..duckdb.plan import Untraced

    if not _polars_frame(result):
        return
    if isinstance(shape, str):
        withhold(result, shape)
        return
    if not isinstance(shape, Untraced):
        return
    failures = capture.registry.failures
    try:
        ours = _Converted(result)
        if as_polars_calls(capture, query, frames, ours, failures) or through_duckdb(query, frames, ours, failures):
            return
        mark_unplanned(result, shape)
    except contract.Withheld as exc:
        withhold(result, str(exc))
    except Exception as exc:  # the result has no mark: withheld
        failures.append(f"polars sql: {type(exc).__name__}: {exc}")
        withhold(result)


class _Converted:
    """The user's polars result and its pandas form, converted once for both ways."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self._pandas: pd.DataFrame | None = None

    def pandas(self) -> pd.DataFrame:
        if self._pandas is None:
            with passthrough():
                self._pandas = self.frame.to_pandas()
        return self._pandas


def as_polars_calls(capture: Any, query: str, frames: dict[str, Any], ours: _Converted, failures: list[str]) -> bool:
    """Way 1: the plain grouped query run as the polars calls it stands for, through the capture;
    its evidence given to the user's result when both hold the same rows."""
    grouped = grouped_query(query, "postgres")
    # (polars finds a table whatever the case it is written in: FROM SELF reads self)
    named = [f for name, f in frames.items() if grouped is not None and name.lower() == grouped.table.lower()]
    if grouped is None or len(named) != 1 or not _polars_frame(named[0]):
        return False
    try:
        same = _grouped_in_polars(named[0], grouped, ours.frame)
    except Exception as exc:  # (an expression polars' sql_expr does not take: the other way)
        failures.append(f"polars sql as polars calls: {type(exc).__name__}: {exc}")
        return False
    if same is None:
        return False
    with passthrough():
        theirs = same.to_pandas()
    if not same_rows(theirs, ours.pandas()):
        failures.append("polars sql: the polars calls it stands for give other rows: not used")
        return False
    return bool(capture.same_cells(same, ours.frame))


def _grouped_in_polars(frame: Any, grouped: GroupedQuery, result: Any) -> Any:
    """``frame.filter(where).group_by(keys).agg(aggregates)`` with the result's column names and
    order (run at the analyst's level, so that the capture records it), or None."""
    import polars as pl

    columns = list(result.columns)
    if len(columns) != grouped.width or len(set(columns)) != len(columns):
        return None
    names = [columns[i] for i, _, _ in grouped.aggregates]
    if [c for c in columns if c not in grouped.keys] != names:
        return None
    source = frame.filter(pl.sql_expr(grouped.where)) if grouped.where is not None else frame
    if grouped.renamed:  # (a key shown under another name: grouped by a copy under that name)
        if {new.lower() for _, new in grouped.renamed} & {c.lower() for c in frame.columns}:
            return None
        source = source.with_columns([pl.col(old).alias(new) for old, new in grouped.renamed])
    aggregated = source.group_by(list(grouped.keys)).agg(
        [_aggregate(text, stat).alias(name) for (_, text, stat), name in zip(grouped.aggregates, names, strict=True)])
    return aggregated.select(columns)


def _aggregate(text: str, stat: tuple[str | None, str]) -> Any:
    """The polars expression of one aggregate: counts as polars' own (SQL's ``count`` is the same
    count cast to Int64, which the capture would read as a transform of it), else ``sql_expr``."""
    import polars as pl

    var, name = stat
    if name == "size":
        return pl.len()
    if name == "count" and var is not None:
        return pl.col(var).count()
    return pl.sql_expr(text)


def through_duckdb(query: str, frames: dict[str, Any], ours: _Converted, failures: list[str]) -> bool:
    """Way 2: DuckDB's checked form of the same query over the same frames given to the user's result
    when both hold the same rows; False (nothing done) otherwise. A shape DuckDB's capture
    withholds withholds this result too (``contract.Withheld`` is raised to the caller)."""
    if not frames or any(_names_clash(f) for f in frames.values()):
        return False
    try:
        from ..duckdb import query_form
    except ImportError:
        return False
    try:
        with passthrough():
            found = query_form(query, frames)
            if found is None:
                return False
            form, theirs = found
    except contract.Withheld:
        raise
    except Exception as exc:  # (a dialect DuckDB does not take: the table stays untraced)
        failures.append(f"polars sql through DuckDB: {type(exc).__name__}: {exc}")
        return False
    if not same_rows(theirs, ours.pandas()):
        failures.append("polars sql: DuckDB's result of the query differs from polars': checked as untraced")
        return False
    contract.remember(ours.frame, form)
    return True


def _names_clash(frame: Any) -> bool:
    """Columns whose names differ only in case (DuckDB binds names without case)."""
    names = [str(c).lower() for c in frame.columns]
    return len(set(names)) != len(names)


def same_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether two results hold the same rows in any order (names equal, numbers within
    :data:`RTOL`, missing values where the other has them)."""
    names = [str(c) for c in a.columns]
    if names != [str(c) for c in b.columns] or len(a) != len(b) or len(set(names)) != len(names):
        return False
    try:
        a = a.set_axis(names, axis=1).sort_values(names, na_position="last", kind="stable", ignore_index=True)
        b = b.set_axis(names, axis=1).sort_values(names, na_position="last", kind="stable", ignore_index=True)
    except TypeError:  # (values of kinds that do not sort together)
        return False
    for name in names:
        x, y = a[name], b[name]
        if x.isna().to_numpy().tolist() != y.isna().to_numpy().tolist():
            return False
        known = x.notna().to_numpy()
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y) \
                and not pd.api.types.is_bool_dtype(x) and not pd.api.types.is_bool_dtype(y):
            u = x.to_numpy(dtype=float, na_value=np.nan)[known]
            v = y.to_numpy(dtype=float, na_value=np.nan)[known]
            if not np.allclose(u, v, rtol=RTOL, atol=0.0):
                return False
        elif x[known].astype(str).tolist() != y[known].astype(str).tolist():
            return False
    return True
