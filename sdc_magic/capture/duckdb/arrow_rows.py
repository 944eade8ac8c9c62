"""Rows fetched for linking through Arrow, typed as DuckDB's own ``df()`` types them.

Why: a display of a DuckDB table of 1M rows spent 0.55 s in ``df()`` on the linking rows
(DuckDB builds a Python string per value, which pandas 3 converts once more), against 0.06 s
through Arrow. Linking compares rows by hashes of their values, and a hash depends on the
pandas dtype, so the Arrow columns are given the dtypes ``df()`` gives (decimals as float64,
dates as datetime64[us], integers and booleans with nulls as pandas' nullable types): the
fingerprints are those of the ``df()`` path, so DuckDB, pandas and polars tables of the same
people are compared as before (``tests/test_duckdb_arrow_rows.py``). Any column of another
type (lists, structs, intervals, ...), a missing pyarrow or an error: the whole frame comes
from ``df()``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def linking_frame(rel: Any) -> pd.DataFrame:
    """The rows of ``rel`` as pandas, with the dtypes (and so the hashes) of ``rel.df()``."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return rel.df()
    try:
        table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()
        if len(set(table.schema.names)) != len(table.schema.names):
            return rel.df()  # df() renames repeated names ("size_1"): its names, its frame
        columns: list[Any] = []
        for field, column in zip(table.schema, table.columns, strict=True):
            converted = _as_df_column(pa, pc, field.type, column)
            if converted is None:
                return rel.df()
            columns.append(converted)
    except Exception:
        return rel.df()
    # copy=False: pandas then keeps one block per column instead of stacking the columns of a
    # dtype into one 2-D block (a copy of every row: 0.57 s of a 1M-row DuckDB display)
    frame = pd.DataFrame(dict(zip(range(len(columns)), columns, strict=True)), copy=False)
    frame.columns = pd.Index(table.schema.names)
    return frame


def _as_df_column(pa: Any, pc: Any, kind: Any, column: Any) -> Any:
    """One Arrow column as ``df()`` would give it (numpy or pandas array), or None for another type."""
    t = pa.types
    nulls = column.null_count > 0
    if t.is_integer(kind):
        if nulls:
            return pd.array(column.to_pandas(), dtype=_nullable_int(kind))
        return column.to_numpy()
    if t.is_floating(kind):
        return column.to_numpy()
    if t.is_decimal(kind):
        return pc.cast(column, pa.float64()).to_numpy()
    if t.is_boolean(kind):
        return pd.array(column.to_pandas(), dtype="boolean") if nulls else column.to_numpy()
    if t.is_date32(kind):
        return column.to_pandas(date_as_object=False).to_numpy().astype("datetime64[us]")
    if t.is_timestamp(kind) and kind.tz is None:
        return column.to_numpy()
    if t.is_string(kind) or t.is_large_string(kind) or t.is_dictionary(kind):
        return column.to_pandas().array
    return None


def _nullable_int(kind: Any) -> str:
    signed = "Int" if "uint" not in str(kind) else "UInt"
    return f"{signed}{kind.bit_width}"

