"""Rows sorted by a figure the table does not show are drawn in label order (checking/selection.py
``hide_unshown_order``; capture/sql_rewrites.py ``order_reads_unshown``; pandas ``sort_values``
through ``contract.sorted_by``).

Red team (helper-40): ``ORDER BY CASE WHEN district = 'C' AND sex = 'M' THEN avg(age) ELSE t END``
put C's man's row first when he is younger than t, every C cell hidden and the table
``suppressed``: t = 70.5 then 71.5 gave his age, 71, in DuckDB, polars SQL (through DuckDB) and
pandas (``sort_values`` by a column then the counts alone). Now such rows are listed in label order,
with the same note whether or not they moved (a note only when they moved would tell the same bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_engines_redteam import PEOPLE

from sdc_magic.checking.selection import UNSHOWN_ORDER_NOTE

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
sqlglot = pytest.importorskip("sqlglot")

from sdc_magic.capture.sql_rewrites import order_reads_unshown  # noqa: E402

QUERY = ("SELECT s.district, s.sex, count(*) AS n FROM {table} s GROUP BY s.district, s.sex "
         "ORDER BY CASE WHEN s.district = 'C' AND s.sex = 'M' THEN avg(s.age) ELSE {t} END, s.district, s.sex")


def _shown(out: Any) -> tuple[str, str, bool]:
    md = out.metadata["sdc_magic"]
    return md["status"], out.data["text/plain"].split("sdc_magic:")[0], UNSHOWN_ORDER_NOTE in md.get("notes", [])


def _pandas_sorted(t: float) -> pd.DataFrame:
    g = PEOPLE.groupby(["district", "sex"]).agg(n=("age", "size"), m=("age", "mean"))
    key = np.where((g.index.get_level_values(0) == "C") & (g.index.get_level_values(1) == "M"), g.m, t)
    return g.assign(k=key).sort_values("k")[["n"]]


def _polars_sorted(t: float) -> Any:
    g = pl.from_pandas(PEOPLE).group_by(["district", "sex"]).agg(pl.len().alias("n"), pl.col("age").mean().alias("m"))
    picked = (pl.col("district") == "C") & (pl.col("sex") == "M")
    return g.with_columns(pl.when(picked).then(pl.col("m")).otherwise(t).alias("k")).sort("k").select(
        ["district", "sex", "n"])


MAKERS = {
    "duckdb": lambda t: duckdb.sql(QUERY.format(table="PEOPLE", t=t)).df(),
    "polars sql": lambda t: pl.from_pandas(PEOPLE).sql(QUERY.format(table="self", t=t)),
    "pandas sort_values": _pandas_sorted,
    # (polars' groups come in no order of their own: its tables with hidden cells are drawn in label
    # order unless a shown column orders them, without a note)
    "polars sort": _polars_sorted,
    "polars sort, to_pandas": lambda t: _polars_sorted(t).to_pandas(),
}
SILENT = {"polars sort", "polars sort, to_pandas"}


@pytest.mark.parametrize("engine", sorted(MAKERS))
def test_the_order_of_rows_sorted_by_an_unshown_figure_tells_nothing(humanitarian_sessions: Any,
                                                                     engine: str) -> None:
    shown = []
    for t in (70.5, 71.5):  # (C's man is 71: before, his row came first for 71.5 only)
        sess = humanitarian_sessions()
        try:
            shown.append(_shown(sess.publish(MAKERS[engine](t))))
        finally:
            sess.capture.uninstall()
    assert shown[0] == shown[1], shown
    status, text, noted = shown[0]
    assert status == "suppressed" and noted is (engine not in SILENT), shown[0]
    rows = [line.split() for line in text.splitlines() if line.strip()]
    assert not any(r[:1] == ["C"] or r[1:2] == ["C"] for r in rows[:3]), text  # (A's rows first: label order)


def test_rows_sorted_by_a_shown_figure_keep_their_order_without_the_note(humanitarian_sessions: Any) -> None:
    sess = humanitarian_sessions()
    try:
        out = sess.publish(duckdb.sql("SELECT district, count(*) AS n FROM PEOPLE GROUP BY district "
                                      "ORDER BY n DESC").df())
        g = PEOPLE.groupby(["district", "sex"]).agg(n=("age", "size"), m=("age", "mean"))
        out2 = sess.publish(g.sort_values("m", ascending=False))  # (sorted by a column it shows)
    finally:
        sess.capture.uninstall()
    assert not _shown(out)[2] and not _shown(out2)[2]
    assert _shown(out)[1].splitlines()[1].split()[1] == "A"  # (A 40 first, as sorted)


@pytest.mark.parametrize(("query", "unshown"), [
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY n DESC", False),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY 2, 1", False),
    ("SELECT d, count(*) FROM t GROUP BY d ORDER BY count(*)", False),
    ("SELECT d AS region, count(*) AS n FROM t GROUP BY d ORDER BY d", False),
    ("SELECT d, count(*) AS n FROM t GROUP BY ALL ORDER BY ALL", False),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY avg(age)", True),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY age", True),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY 3", True),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY CASE WHEN d = 'C' THEN avg(age) ELSE 71 END", True),
    ("SELECT d, count(*) AS n FROM t GROUP BY d ORDER BY (SELECT max(age) FROM t) - n", True),
])
def test_which_orders_read_an_unshown_figure(query: str, unshown: bool) -> None:
    assert order_reads_unshown(sqlglot.parse_one(query, read="duckdb")) is unshown
