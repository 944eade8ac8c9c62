"""What leaves the engine during a checked display (issue 22, item 5).

The engines' own conversion methods (DuckDB ``df``/``arrow``/``fetchall``/..., polars
``to_pandas``/``to_arrow``/``rows``/...) are wrapped *below* the product's wrappers, and
every row they hand to Python during a display is counted. A checked display may move
O(cells + atoms) rows: the table itself and counts per atom, never the microdata.

A DuckDB count of more than ``evidence/rows.py`` ``IN_ENGINE_ROWS`` source rows is linked
inside DuckDB (``linking/in_engine.py``): only counts per atom come back; so is a polars
table (eager, or lazy after ``df.lazy()``) written over its frame
(``capture/polars/lineage.py``). The first test checks the counter
itself, so neither can pass by accident.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest

ROWS = 200_000
KEYS = ["region", "activity", "size"]


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({"region": rng.choice([f"r{i}" for i in range(10)], ROWS),
                         "activity": rng.choice([f"a{i}" for i in range(10)], ROWS),
                         "size": rng.integers(0, 10, ROWS), "turnover": rng.lognormal(3, 1, ROWS)})


def _rows_of(result: Any) -> int:
    for attr in ("num_rows", "height"):
        if isinstance(getattr(result, attr, None), int):
            return int(getattr(result, attr))
    if isinstance(result, dict):  # fetchnumpy / to_dict: columns
        first = next(iter(result.values()), [])
        return len(first)
    try:
        return len(result)
    except TypeError:
        return 1


@contextmanager
def counting(owner: type, names: tuple[str, ...]) -> Iterator[list[int]]:
    """Wrap ``owner``'s conversion methods; the list collects the rows each call returned."""
    moved: list[int] = []
    saved = {}
    for name in names:
        original = owner.__dict__.get(name)
        if original is None or not callable(original):
            continue
        saved[name] = original

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            result = _original(self, *args, **kwargs)
            moved.append(_rows_of(result))
            return result

        setattr(owner, name, wrapper)
    try:
        yield moved
    finally:
        for name, original in saved.items():
            setattr(owner, name, original)


DUCKDB_CONVERSIONS = ("df", "to_df", "fetchdf", "arrow", "fetch_arrow_table", "to_arrow_table", "pl", "fetchall",
                      "fetchnumpy", "fetchmany", "fetch_record_batch", "fetch_arrow_reader", "to_arrow_reader")
POLARS_CONVERSIONS = ("to_pandas", "to_arrow", "rows", "to_numpy", "to_dict", "to_dicts", "iter_rows", "rows_by_key")


def test_the_counter_sees_a_plain_fetch() -> None:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", _data())
    with counting(duckdb.DuckDBPyRelation, DUCKDB_CONVERSIONS) as moved:
        con.sql("SELECT * FROM t").df()
    assert sum(moved) == ROWS


def _display(make: Any, record: bool = True) -> tuple[int, str]:
    """(cells, status) of the first display of ``make()`` in a fresh session (``record``: linking on)."""
    from sdc_magic.jupyter.session import Session

    sess = Session()
    sess.capture.install()
    try:
        published = sess.publish(make(), record=record)
    finally:
        sess.capture.uninstall()
    return published.checked.hidden.size, published.metadata["sdc_magic"]["status"]


@pytest.mark.parametrize("record", [True, False], ids=["linked", "not-linked"])
def test_a_checked_duckdb_display_moves_only_cells_and_atoms(record: bool) -> None:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", _data())
    with counting(duckdb.DuckDBPyRelation, DUCKDB_CONVERSIONS) as moved:
        cells, status = _display(lambda: con.sql("SELECT region, activity, size, count(*) AS n FROM t GROUP BY ALL"),
                                 record=record)
    assert status != "withheld"
    assert sum(moved) <= 10 * cells, f"{sum(moved):,} rows moved into Python for {cells:,} cells"


@pytest.mark.parametrize("record", [True, False], ids=["linked", "not-linked"])
def test_a_checked_polars_display_moves_only_cells_and_atoms(record: bool) -> None:
    pl = pytest.importorskip("polars")
    frame = pl.from_pandas(_data())
    with counting(pl.DataFrame, POLARS_CONVERSIONS) as moved:
        cells, status = _display(lambda: frame.group_by(KEYS).len(), record=record)
    assert status != "withheld"
    assert sum(moved) <= 10 * cells, f"{sum(moved):,} rows moved into Python for {cells:,} cells"


def test_a_checked_lazy_polars_display_moves_only_cells_and_atoms() -> None:
    pl = pytest.importorskip("polars")
    frame = pl.from_pandas(_data())
    with counting(pl.DataFrame, POLARS_CONVERSIONS) as moved:
        cells, status = _display(lambda: frame.lazy().group_by(KEYS).len().collect(), record=True)
    assert status != "withheld"
    assert sum(moved) <= 10 * cells, f"{sum(moved):,} rows moved into Python for {cells:,} cells"
