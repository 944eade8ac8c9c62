"""The statistics-semantics cases of the pandas suite (``test_statistics_semantics.py``),
written in DuckDB SQL and polars: the same data, the same cells hidden.

R1: 40 people in 2 households, 2 flagged; R2: 30, 28 flagged (2 without); R3: 50, one
income of 987,654 dominates; R4: 45, one income of 123,457 is its maximum; categories
C (3 people) and E (2 people) are small.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_statistics_semantics import make_leak_data

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
pytest.importorskip("sqlglot")

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402
from sdc_magic.outputs.render import protected_frame  # noqa: E402

X = "✕"
D = make_leak_data()
P = pl.from_pandas(D)
d = D  # the name the SQL reads (DuckDB replacement scan)


def _shown(obj, rules: str | None = None) -> tuple[str, pd.DataFrame]:
    s = Session(rules=preset(rules) if rules else None)
    s.capture.install()
    try:
        out = s.publish(obj() if callable(obj) else obj)
        frame = protected_frame(out.checked)
        if "region" in frame.columns:
            frame = frame.set_index("region")
        return out.metadata["sdc_magic"]["status"], frame
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_indicator_counts_both_sides(engine: str) -> None:
    q = (lambda: duckdb.sql("select region, count(*) n, sum(flag) f from d group by 1 order by 1")) \
        if engine == "duckdb" else \
        (lambda: P.group_by("region").agg(pl.len().alias("n"), pl.col("flag").sum().alias("f")).sort("region"))
    _, shown = _shown(q)
    assert shown.loc["R1", "f"] == X and shown.loc["R2", "f"] == X  # 2 with / 2 without the flag
    _, pandas = _shown(lambda: D.groupby("region").agg(n=("flag", "size"), f=("flag", "sum")))
    assert (shown["f"] == X).tolist() == (pandas["f"] == X).tolist()  # the same pattern as pandas
    assert (shown["n"] != X).all()


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_distinct_households_are_counted(engine: str) -> None:
    q = (lambda: duckdb.sql("select region, count(distinct hh) h from d group by 1 order by 1")) \
        if engine == "duckdb" else (lambda: P.group_by("region").agg(pl.col("hh").n_unique().alias("h"))
                                    .sort("region"))
    _, shown = _shown(q)
    # R1's 2 households hidden, and a secondary (the households of all regions add up)
    _, pandas = _shown(lambda: D.groupby("region").agg(h=("hh", "nunique")))
    assert shown["h"].tolist() == pandas["h"].tolist() == [X, X, 50, 45]


def test_extremes_hidden_medians_shown_duckdb() -> None:
    _, shown = _shown(lambda: duckdb.sql(
        "select region, min(income) lo, median(income) med, max(income) hi from d group by 1 order by 1"))
    assert (shown["lo"] == X).all() and (shown["hi"] == X).all()
    assert X not in shown["med"].tolist()


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_spread_of_a_dominated_variable_is_hidden(engine: str) -> None:
    q = (lambda: duckdb.sql("select region, count(*) n, avg(income) m, stddev(income) s from d group by 1 order by 1"))\
        if engine == "duckdb" else \
        (lambda: P.group_by("region").agg(pl.len().alias("n"), pl.col("income").mean().alias("m"),
                                          pl.col("income").std().alias("s")).sort("region"))
    _, shown = _shown(q, "insee")
    assert shown.loc["R3", "m"] == X and shown.loc["R3", "s"] == X
    assert shown.loc["R3", "n"] != X and shown.loc["R2", "s"] != X


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_table_sorted_by_count_lists_hidden_rows_last(engine: str) -> None:
    """E (2) and C (3) are hidden: listed first in an ascending sort, their order would say
    E < C; they go last, in label order, and a polars frame's row numbers are renumbered."""
    q = (lambda: duckdb.sql("select cat, count(*) n from d group by 1 order by n")) if engine == "duckdb" else \
        (lambda: P.group_by("cat").len().sort("len"))
    _, shown = _shown(q)
    labels = shown.index.tolist() if engine == "duckdb" else shown["cat"].tolist()
    assert labels == ["F", "D", "B", "A", "C", "E"]
    if engine == "polars":
        assert shown.index.tolist() == list(range(6))


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_numeric_label_of_one_person_goes_to_review(engine: str) -> None:
    q = (lambda: duckdb.sql("select age, count(*) n from d group by 1 order by 1")) if engine == "duckdb" else \
        (lambda: P.group_by("age").len().sort("age"))
    status, _ = _shown(q)
    assert status == "review"
