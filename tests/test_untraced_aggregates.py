"""Aggregates computed further in DuckDB or polars are never drawn as row-level data (issue 23.3).

Red-team snippets of this class, beyond the issue's examples: a window over groups, a running
total, a share of the total, a rank, a join or concat of aggregates, a column added to an
aggregate, a count turned into text, a count per row (``count(*) OVER (PARTITION BY ...)``,
``pl.len().over(...)``), SUMMARIZE / describe() of an aggregate, grouping-set totals filtered
outside. District C holds 3 of the 73 people (2 F, 1 M); threshold 5. Each test fails if C's
count, or a figure giving it back (its share of the total, a running total ending 70, 73),
is on screen.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from test_engines_redteam import PEOPLE  # noqa: E402

from sdc_magic.jupyter.session import Session  # noqa: E402

C_SHARES = {round(3 / 73, 4), round(300 / 73, 2), round(300 / 73, 4), round(3 / 73, 6)}


def _numbers(out) -> list[float]:
    """Every number drawn in the table part of the text (labels included)."""
    table = "\n".join(line for line in out.data["text/plain"].split("sdc_magic:")[0].splitlines()
                      if not line.startswith("["))  # "[73 rows x 3 columns]"
    return [float(x) for x in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", table)]


def _c_row(out) -> list[str]:
    table = out.data["text/plain"].split("sdc_magic:")[0]
    return next((line.split() for line in table.splitlines() if "C" in line.split()[:3]), [])


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


DUCKDB = {
    "running total": "select district, count(*) n, sum(count(*)) over (order by district) running "
                     "from df group by 1 order by 1",
    "share of a subquery's counts": "select district, n, n / sum(n) over () share from "
                                    "(select district, count(*) n from df group by 1) order by 1",
    "dense rank of the counts": "select district, dense_rank() over (order by count(*) desc) r, count(*) n "
                                "from df group by 1 order by 1",
    "count minus the mean count": "select district, count(*) - avg(count(*)) over () d from df group by 1 order by 1",
    "count per row": "select person, district, count(*) over (partition by district) size from df order by person",
    "count as text with a unit": "select district, concat(count(*), ' cases') n from df group by 1 order by 1",
}


@pytest.mark.parametrize("name", list(DUCKDB))
def test_a_duckdb_aggregate_computed_further_does_not_show_c(sess: Session, df: pd.DataFrame, name: str) -> None:
    out = sess.publish(duckdb.sql(DUCKDB[name]))
    assert _status(out) in ("review", "blocked")
    numbers = _numbers(out)
    c_row = _c_row(out)
    assert "3" not in c_row and not any(x.startswith("3 ") for x in c_row)
    assert not {round(v, 4) for v in numbers} & C_SHARES and not {round(v, 2) for v in numbers} & C_SHARES
    if name == "running total":
        assert not {70.0, 73.0} <= set(numbers)
    if name == "count per row":  # C's people are the last rows (or beyond the rows drawn)
        assert 3.0 not in numbers[-9:] and "size" in out.data["text/plain"]


def test_grouping_set_totals_filtered_outside_are_withheld(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select * from (select sex, district, count(*) n from df "
                                  "group by grouping sets ((sex), (sex, district))) where n > 4 order by 1, 2"))
    assert out.checked is None and _status(out) == "blocked"
    assert "GROUPING SETS" in out.data["text/plain"] and not _numbers(out)


def test_summarize_of_an_aggregate_is_withheld_but_of_the_microdata_is_not(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("summarize (select district, count(*) n from df group by 1)"))
    assert out.checked is None and "SUMMARIZE" in out.data["text/plain"]
    assert "withheld" not in sess.publish(duckdb.sql("summarize df")).data["text/plain"]


def _pl_counts(p: pl.DataFrame) -> pl.DataFrame:
    return p.group_by("district").len().sort("district")


POLARS = {
    "share": lambda p: _pl_counts(p).with_columns(share=pl.col("len") / pl.col("len").sum()),
    "running total": lambda p: _pl_counts(p).with_columns(pl.col("len").cum_sum().alias("running")),
    "count replaced by itself times two": lambda p: _pl_counts(p).with_columns(pl.col("len") * 2),
    "join of two aggregates": lambda p: _pl_counts(p).join(
        p.group_by("district").agg(pl.col("age").mean()), on="district"),
    "concat of two aggregates": lambda p: pl.concat([_pl_counts(p), _pl_counts(p.filter(pl.col("sex") == "F"))]),
    "hstack of a computed series": lambda p: _pl_counts(p).hstack([(_pl_counts(p)["len"] * 10).alias("x")]),
    "filtered aggregate with a rank": lambda p: _pl_counts(p).filter(pl.col("len") > 0).with_columns(
        pl.col("len").rank().alias("r")),
    "count per row": lambda p: p.select("person", "district", pl.len().over("district").alias("size")),
    "mean per row": lambda p: p.with_columns(pl.col("age").mean().over("district").alias("mean_age")),
}


@pytest.mark.parametrize("name", list(POLARS))
def test_a_polars_aggregate_computed_further_does_not_show_c(sess: Session, p: pl.DataFrame, name: str) -> None:
    out = sess.publish(POLARS[name](p))
    assert _status(out) in ("review", "blocked")
    numbers = _numbers(out)
    c_row = _c_row(out)
    assert "3" not in c_row and "6" not in c_row and "30" not in c_row
    assert not {round(v, 4) for v in numbers} & C_SHARES
    if name == "running total":
        assert not {70.0, 73.0} <= set(numbers)
    if name == "mean per row":
        c_mean = round(PEOPLE[PEOPLE.district == "C"].age.mean(), 2)
        assert c_mean not in {round(v, 2) for v in numbers}
    if name == "count per row":
        assert 3.0 not in numbers[-9:]


def test_the_pandas_copy_of_a_computed_polars_frame_is_checked_the_same(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(_pl_counts(p).with_columns(running=pl.col("len").cum_sum()).to_pandas())
    assert _status(out) == "review" and "3" not in _c_row(out)


def test_describe_of_a_polars_aggregate_is_withheld(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(_pl_counts(p).describe())
    assert out.checked is None and "describe()" in out.data["text/plain"] and not _numbers(out)


def test_honest_tables_still_clear(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    """Not over-protected: the captured aggregates themselves, sorted or renamed, keep their evidence."""
    for table in (duckdb.sql("select district, count(*) n from df group by 1 order by 1"),
                  _pl_counts(p), _pl_counts(p).sort("len"), _pl_counts(p).rename({"len": "people"})):
        out = sess.publish(table)
        assert _status(out) == "suppressed", out.data["text/plain"]
    # microdata stay row-level data, shown as they are (never exportable)
    out = sess.publish(p.select("person", "district").head(5))
    assert out.metadata["sdc_magic"]["kind"] == "row-level"
    out = sess.publish(duckdb.sql("select person, district, row_number() over () r from df limit 5"))
    assert out.metadata["sdc_magic"]["kind"] == "row-level"


def test_rows_with_their_groups_figures_stay_row_level_with_those_columns_withheld(
        sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    for rows in (duckdb.sql(DUCKDB["count per row"]), POLARS["count per row"](p), POLARS["mean per row"](p)):
        out = sess.publish(rows)
        md = out.metadata["sdc_magic"]
        assert md["kind"] == "row-level" and md["status"] == "blocked"
        shown = out.data["text/plain"].split("sdc_magic:")[0].splitlines()
        assert all(line.rstrip().endswith("✕") for line in shown[1:6])  # the window column, first rows
        assert "computed over groups of rows" in out.data["text/plain"]


# ---- a second round (a helper's red team of the above), each leaked before its fix
ROUND_TWO_DUCKDB = {
    "maximum of a subquery": "select district, mx from (select district, max(age) mx from df group by 1) order by 1",
    "maximum of a CTE, filtered": "with g as (select district, max(age) mx, count(*) n from df group by 1) "
                                  "select district, mx from g where n >= 5 order by 1",
    "star over a subquery": "select * from (select district, max(age) mx, min(age) mn, count(*) n from df "
                            "group by 1) where district = 'A'",
    "union of maxima": "select 'old' g, max(age) v from df union all select 'young', max(age) from df where age < 100",
    "histogram": "select histogram(district) h from df",
}


@pytest.mark.parametrize("name", list(ROUND_TWO_DUCKDB))
def test_round_two_duckdb_shows_no_oldest_age_nor_c(sess: Session, df: pd.DataFrame, name: str) -> None:
    out = sess.publish(duckdb.sql(ROUND_TWO_DUCKDB[name]))
    text = out.data["text/plain"].split("sdc_magic:")[0]
    assert _status(out) != "pass" and "102" not in text and "71" not in text
    assert "'C': 3" not in text and "C: 3" not in text


def test_polars_windows_stay_withheld_through_filter_and_unique(sess: Session, p: pl.DataFrame) -> None:
    for frame in (p.with_columns(n=pl.len().over("district")).filter(pl.col("district") == "C").select("district", "n"),
                  p.select("district", pl.len().over("district").alias("n")).unique()):
        out = sess.publish(frame)
        assert not any(line.split()[-1:] == ["3"] for line in out.data["text/plain"].splitlines()
                       if "C" in line.split())


def test_polars_groups_stacked_with_a_total_are_withheld(sess: Session, p: pl.DataFrame) -> None:
    groups = p.filter(pl.col("district") != "C").group_by("district").len().sort("district")
    total = p.select(pl.lit("ALL").alias("district"), pl.len().cast(pl.UInt32).alias("len"))
    out = sess.publish(pl.concat([groups, total]))
    assert out.checked is None and "73" not in out.data["text/plain"]


def test_numbers_in_the_labels_of_hidden_rows_are_drawn_hidden(sess: Session, df: pd.DataFrame) -> None:
    sizes = df.groupby("district").size()
    shares = df.groupby("district").income.mean()
    shares.index = [f"{k} ({(df.district == k).mean():.1%})" for k in shares.index]
    counted = sizes.copy()
    counted.index = [f"{k} (n={v})" for k, v in sizes.items()]
    for table, leaks in ((counted, ("n=30)", "n=3)")), (shares, ("41.1%", "4.1%"))):
        out = sess.publish(table)
        shown = out.data["text/plain"] + out.data["text/html"]
        assert not any(leak in shown for leak in leaks), shown


def test_polars_sql_aggregates_are_checked_not_drawn_as_rows(sess: Session, p: pl.DataFrame) -> None:
    ctx = pl.SQLContext(t=p)
    for result in (ctx.execute("select district, count(*) n from t group by district order by district", eager=True),
                   ctx.execute("select district, count(*) n from t group by district order by district").collect()):
        out = sess.publish(result)
        text = out.data["text/plain"].split("sdc_magic:")[0]
        assert _status(out) == "review" and "102" not in text and "3" not in _c_row(out)
    # df.sql reads a frame DuckDB can read too: checked with DuckDB's evidence of the same query, as
    # pandas' groupby max is (every max is one person's age: blocked)
    out = sess.publish(p.sql("select district, max(age) m from self group by district"))
    text = out.data["text/plain"].split("sdc_magic:")[0]
    assert _status(out) == "blocked" and "102" not in text and text.count("✕") == 3, text
    rows = sess.publish(ctx.execute("select * from t", eager=True).head(3))
    assert rows.metadata["sdc_magic"]["kind"] == "row-level"
