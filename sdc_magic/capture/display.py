"""Engine objects at display time: which types are intercepted, and their pandas form.

The display handler is registered by *name* for these types (IPython resolves a name
when the module is imported), so nothing here imports polars, DuckDB, pyarrow or Spark:
the extension works without them and picks them up when they are imported.

:func:`to_pandas` gives the pandas object that is checked and rendered:

* a captured engine result: the pandas form registered with its evidence (identity);
* any other eager table (polars, pyarrow, an object with ``__dataframe__`` or
  ``__arrow_c_stream__``): converted whole; the pipeline then treats it like pandas
  (row-level when text columns are in the body, unverified numbers otherwise);
* a lazy table (DuckDB relation, Spark DataFrame): only the rows a display shows are
  materialised (``limit``), never the whole data;
* a polars ``LazyFrame`` (a query plan, no data) or anything we cannot convert:
  :class:`Withheld`, which the session shows as a withheld placeholder with its message.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import contract

#: "module.Class" of every engine type whose display is intercepted
DISPLAY_TYPES = (
    "polars.dataframe.frame.DataFrame",
    "polars.series.series.Series",
    "polars.lazyframe.frame.LazyFrame",
    "duckdb._relation.DuckDBPyRelation",
    "_duckdb.DuckDBPyRelation",
    "duckdb.duckdb.DuckDBPyRelation",
    "pyarrow.lib.Table",
    "pyarrow.lib.RecordBatch",
    "pyarrow.lib.ChunkedArray",
    "pyspark.sql.dataframe.DataFrame",
    "pyspark.sql.classic.dataframe.DataFrame",
    "pyspark.sql.connect.dataframe.DataFrame",
    "narwhals.dataframe.DataFrame",
    "narwhals.dataframe.LazyFrame",
    "narwhals.series.Series",
    "narwhals.stable.v1.DataFrame",
    "narwhals.stable.v1.LazyFrame",
    "narwhals.stable.v1.Series",
)


class Withheld(TypeError):
    """An object that is not shown: its message says why (it never contains data)."""

    sdc_note = True


def display_types() -> tuple[str, ...]:
    return DISPLAY_TYPES


def _limit() -> int:
    rows = pd.get_option("display.max_rows") or 60
    return max(int(rows), 1) + 1


def _module(obj: Any) -> str:
    return type(obj).__module__ or ""


def is_table_like(obj: Any) -> bool:
    """An object of another engine that holds or computes a table."""
    if isinstance(obj, pd.DataFrame | pd.Series):
        return False
    t = type(obj)
    return f"{t.__module__}.{t.__name__}" in DISPLAY_TYPES or hasattr(t, "__dataframe__") \
        or hasattr(t, "__arrow_c_stream__")


def to_pandas(obj: Any) -> tuple[pd.DataFrame | pd.Series, list[str]]:
    """The pandas object to check for an engine object (see the module docstring)."""
    known = contract.form_of(obj)
    if known is not None:
        return known, []
    module = _module(obj)
    name = type(obj).__name__
    if module.startswith("narwhals"):
        native = obj.to_native()
        if native is obj:
            raise Withheld("a narwhals object we cannot convert is not shown")
        if isinstance(native, pd.DataFrame | pd.Series):
            return native, []
        return to_pandas(native)
    if module.startswith("polars"):
        if name == "LazyFrame":
            raise Withheld("a polars LazyFrame is a query plan: collect() it to see the table (it is checked then)")
        if name == "Series":
            frame = obj.to_frame().to_pandas()
            return frame.iloc[:, 0], []
        frame = obj.to_pandas()
        contract.mark_origin(frame, contract.origin_of(obj))  # (a sorted copy of a captured table)
        return frame, []
    if "duckdb" in module and name == "DuckDBPyRelation":
        return _duckdb_relation(obj)
    if module.startswith("pyspark"):
        limit = _limit()
        from .spark import spark_form

        form = spark_form(obj, limit)
        if form is not None:
            return form, []
        frame = obj.limit(limit).toPandas()
        return frame, [f"a Spark DataFrame: only its first {limit} rows were materialised and checked"]
    if module.startswith("pyarrow"):
        if name == "ChunkedArray":
            return obj.to_pandas(), []
        return obj.to_pandas(), []
    if hasattr(type(obj), "__arrow_c_stream__"):
        try:
            import pyarrow as pa
        except ImportError as exc:
            raise Withheld(f"a {name} table cannot be checked without pyarrow: not shown") from exc
        return pa.table(obj).to_pandas(), []
    if hasattr(type(obj), "__dataframe__"):
        return pd.api.interchange.from_dataframe(obj), []
    raise Withheld(f"a {name} cannot be checked: not shown")


def _duckdb_relation(rel: Any) -> tuple[pd.DataFrame, list[str]]:
    from .duckdb import captured_form

    form = captured_form(rel)
    if form is not None:
        return form, []
    limit = _limit()
    frame = rel.limit(limit).df()
    notes = [f"a DuckDB relation: only its first {limit} rows were materialised and checked"] \
        if len(frame) >= limit else []
    return frame, notes


def protocol_hook(formatter: Any, handler: Any) -> Any:
    """Send objects of any other class exposing ``__dataframe__`` or ``__arrow_c_stream__``
    to ``handler`` (IPython's display formatter knows types only); returns the undo.

    The formatter's own lookup runs first, so every other object is displayed as before.
    """
    had = "lookup" in vars(formatter)
    original = formatter.lookup

    def lookup(obj: Any) -> Any:
        try:
            return original(obj)
        except KeyError:
            if is_table_like(obj):
                return handler
            raise

    formatter.lookup = lookup

    def undo() -> None:
        if had:
            formatter.lookup = original
        else:
            del formatter.lookup

    return undo
