"""polars SQL (``df.sql``, ``pl.sql``): checked with DuckDB's evidence of the same query.

Why: polars SQL hands back a finished table; nothing of its plan says which rows made each cell,
so every such table used to be an aggregate without evidence (``review``, its counts checked as
bare numbers): 55 of the 66 honest sequences a red team's 2,000 seeded sessions left short of
``pass``. Its plain queries (``SELECT keys, count(*), sum(x), avg(x) FROM frame WHERE ... GROUP BY
keys``) mean the same in DuckDB, which reads polars and pandas frames where they are. So the
same query runs once more in DuckDB over the same frames, with the evidence and linking rows a
``duckdb.sql(query).pl()`` would have (:func:`..duckdb.query_form`), and its result is compared
with polars' own: only when both hold the same rows (same columns, same values, in any order) is
DuckDB's checked form the one displayed for the polars table. A dialect difference, a frame
DuckDB cannot read, or DuckDB not installed leaves the table as before: an untraced aggregate.

What the frames are: ``df.sql(query)`` reads ``df`` as ``self`` (or its ``table_name``);
``pl.sql(query)`` reads frames of the caller's names. ``LazyFrame.sql`` and ``SQLContext``
(frames registered out of sight, plans not yet run) stay untraced.
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

#: Relative tolerance between DuckDB's and polars' figures (sums in another order).
RTOL = 1e-9


def caller_frames(query: Any, depth: int) -> dict[str, Any]:
    """The eager frames (polars or pandas) named in ``query`` among the names of the caller
    ``depth`` frames up (``pl.sql`` reads the caller's globals and locals)."""
    if not isinstance(query, str):
        return {}
    frame = sys._getframe(depth + 1)
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
    found: dict[str, Any] = {}
    for scope in (frame.f_globals, frame.f_locals):  # (locals win, as in Python)
        for name in named & scope.keys():
            if _readable(scope[name]):
                found[name] = scope[name]
    return found


def method_frames(obj: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``df.sql(query, table_name=...)``: the frame itself under its table name."""
    name = kwargs.get("table_name", "self")
    return {str(name): obj} if isinstance(name, str) and _readable(obj) else {}


def _readable(obj: Any) -> bool:
    """A frame DuckDB reads as it is (no plan to run): an eager polars or a pandas frame."""
    if isinstance(obj, pd.DataFrame):
        return True
    t = type(obj)
    return t.__name__ == "DataFrame" and t.__module__.startswith("polars")


def planned(query: str, frames: dict[str, Any], result: Any, failures: list[str]) -> bool:
    """Give the polars ``result`` of ``query`` DuckDB's checked form of it when both hold the
    same rows; False (nothing done) otherwise. A shape DuckDB's capture withholds withholds
    this result too (``contract.Withheld`` is raised to the caller)."""
    if not frames:
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
            ours = result.to_pandas()
    except contract.Withheld:
        raise
    except Exception as exc:  # (a dialect DuckDB does not take: the table stays untraced)
        failures.append(f"polars sql through DuckDB: {type(exc).__name__}: {exc}")
        return False
    if not same_rows(theirs, ours):
        failures.append("polars sql: DuckDB's result of the query differs from polars': checked as untraced")
        return False
    contract.remember(result, form)
    return True


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



def mark_result(result: Any, shape: Any, query: str, frames: dict[str, Any], failures: list[str],
                withhold: Callable[[Any, str], None]) -> None:
    """Mark a polars SQL ``result`` (an eager frame): DuckDB's evidence when it computes the same
    rows (:func:`planned`), else by the query's ``shape`` (a reason: withheld with it; an
    ``Untraced``: an aggregate without evidence). A shape DuckDB's capture withholds is withheld."""
    from ..duckdb.plan import Untraced

    if not _readable(result) or isinstance(result, pd.DataFrame):
        return
    if isinstance(shape, str):
        withhold(result, shape)
        return
    if not isinstance(shape, Untraced):
        return
    try:
        if planned(query, frames, result, failures):
            return
    except contract.Withheld as exc:
        withhold(result, str(exc))
        return
    columns = shape.columns([str(c) for c in result.columns])
    if shape.per_row and columns is not None:
        contract.mark_row_windows(result, columns)
    else:
        contract.mark_untraced(result, columns)
    if shape.pins:  # (an outer WHERE bounding an aggregate from both sides: see duckdb.plan.value_pins)
        contract.mark_selected_by_values(result, "the rows shown were kept by a condition that bounds an "
                                                 "aggregate from both sides (=, IN, BETWEEN) in an outer query")
    else:
        contract.mark_selection_read(result)
