"""DuckDB's catalog of aggregate functions is read once, not once per nested captured query.

The catalog query (``duckdb_functions()``) goes through the captured ``execute``, which asked
whether it aggregates, which read the catalog again: 123 nested connections and queries until
Python's recursion limit, 7 CPU s on the first display of a session's first DuckDB table with a
condition (2026-12-04: a count of one region and size of 1M rows, 7.8 s, now 0.44 s).
"""

from __future__ import annotations

from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb")

from sdc_magic.capture.duckdb import plan  # noqa: E402


def test_the_catalog_is_read_with_one_connection(sess: Any, monkeypatch: Any) -> None:
    plan.aggregate_names.cache_clear()
    opened = []
    connect = duckdb.connect

    def counting_connect(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return connect(*args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counting_connect)
    try:
        names = plan.aggregate_names()
    finally:
        monkeypatch.setattr(duckdb, "connect", connect)
    assert len(opened) == 1
    assert {"sum", "count", "histogram", "approx_count_distinct"} <= names
    # the regex built from them still tells an aggregate call from a word
    assert plan.aggregates("select histogram(district) from people")
    assert not plan.aggregates("select district from people where function_type = 'aggregate'")


def test_a_query_naming_the_catalog_is_still_checked(sess: Any) -> None:
    """The guard is for the catalog query only: a user's aggregate over it is still captured."""
    assert plan.aggregates("select function_type, count(*) from duckdb_functions() group by 1")
    assert plan.aggregates("select mode(function_type) from duckdb_functions()")
