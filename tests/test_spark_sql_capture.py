"""``spark.sql`` of a plain grouped query is captured as the ``groupBy`` it stands for
(capture/grouped_sql.py).

Before: the result of ``spark.sql("SELECT sex, count(*) AS n FROM people GROUP BY sex")`` was taken
for row-level data (``blocked`` but every figure on screen) and never compared with other tables.
Now such a query gets the facts job and the linking rows of ``people.groupBy("sex").agg(...)``,
so sequences through Spark SQL are decided as the same sequences in pandas; any other query is
returned untouched and displayed as before.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, "tests")
from engine_fixtures import local_spark, require_spark

require_spark()
pytestmark = pytest.mark.spark

from linking_checks import decisions  # noqa: E402
from test_engines_redteam import PEOPLE  # noqa: E402

from sdc_magic.capture.grouped_sql import grouped_query  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_spark("sdc_magic-spark-sql")


@pytest.fixture(scope="module")
def people(spark: Any) -> Any:
    frame = spark.createDataFrame(PEOPLE)
    frame.createOrReplaceTempView("people")
    return frame


# (Spark SQL over the temporary view of the people, the same tables in pandas)
SEQUENCES = {
    "counts by district": (
        ["SELECT district, count(*) AS n FROM people GROUP BY district"],
        lambda d: [d.groupby("district").size()]),
    "counts by sex, then by sex outside district C": (
        ["SELECT sex, count(*) AS n FROM people GROUP BY sex",
         "SELECT sex, count(*) AS n FROM people WHERE district <> 'C' GROUP BY sex"],
        lambda d: [d.groupby("sex").size(), d[d.district != "C"].groupby("sex").size()]),
    "income sums by sex, then without one person": (
        ["SELECT sex, sum(income) AS income FROM people GROUP BY sex",
         "SELECT sex, sum(income) AS income FROM people WHERE person <> 7 GROUP BY sex"],
        lambda d: [d.groupby("sex")["income"].sum(), d[d.person != 7].groupby("sex")["income"].sum()]),
    "mean ages by district and sex": (
        ["SELECT district, sex, avg(age) AS age FROM people GROUP BY district, sex"],
        lambda d: [d.groupby(["district", "sex"])["age"].mean()]),
    # (a table alias and GROUP BY ALL were row-level data before: blocked, every figure on screen,
    # and the difference of the two tables, C's people by sex, never compared)
    "counts by sex through a table alias, then outside district C by GROUP BY ALL": (
        ["SELECT p.sex, count(*) AS n FROM people p GROUP BY p.sex",
         "SELECT sex, count(*) AS n FROM people WHERE district <> 'C' GROUP BY ALL"],
        lambda d: [d.groupby("sex").size(), d[d.district != "C"].groupby("sex").size()]),
    "counts by a renamed district, then by sex outside C under renamed keys": (
        ["SELECT district AS region, count(*) AS n FROM people GROUP BY district ORDER BY region",
         "SELECT sex AS gender, count(*) AS n FROM people WHERE district <> 'C' GROUP BY ALL",
         "SELECT sex, count(*) AS n FROM people GROUP BY sex"],
        lambda d: [d.groupby("district").size(), d[d.district != "C"].groupby("sex").size(),
                   d.groupby("sex").size()]),
    "counts by sex spelled otherwise (Spark reads names whatever their case), then outside C": (
        ["SELECT p.Sex, count(*) AS n FROM people p GROUP BY p.sex",
         "SELECT SEX, count(*) AS n FROM people WHERE district <> 'C' GROUP BY sex"],
        lambda d: [d.groupby("sex").size(), d[d.district != "C"].groupby("sex").size()]),
    "income sums by district and sex, GROUP BY ALL over an alias": (
        ["SELECT p.district, p.sex, sum(p.income) AS income FROM people AS p GROUP BY ALL"],
        lambda d: [d.groupby(["district", "sex"])["income"].sum()]),
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_spark_sql_sequences_are_decided_as_in_pandas(people: Any, spark: Any, humanitarian_sessions: Any,
                                                      name: str) -> None:
    queries, make_pandas = SEQUENCES[name]
    expected = decisions(humanitarian_sessions(), make_pandas(PEOPLE))
    got = decisions(humanitarian_sessions(), [spark.sql(q) for q in queries])
    assert got == expected


def test_differencing_between_spark_sql_and_the_dataframe_api_is_caught(people: Any, spark: Any,
                                                                        humanitarian_sessions: Any) -> None:
    expected = decisions(humanitarian_sessions(), [PEOPLE.groupby("sex").size(),
                                                    PEOPLE[PEOPLE.district != "C"].groupby("sex").size()])
    got = decisions(humanitarian_sessions(), [
        people.groupBy("sex").count(),
        spark.sql("SELECT sex, count(*) AS n FROM people WHERE district <> 'C' GROUP BY sex")])
    assert got == expected and got[0] == ("pass", 0) and got[1][1] > 0, got


def test_small_cells_of_a_spark_sql_table_are_hidden_on_screen(people: Any, spark: Any,
                                                               humanitarian_sessions: Any) -> None:
    sess = humanitarian_sessions()
    try:
        out = sess.publish(spark.sql("SELECT district, sex, count(*) AS n FROM people GROUP BY district, sex"))
        text = out.data["text/plain"].split("sdc_magic:")[0]
        c_rows = [line for line in text.splitlines() if line.strip().startswith("C")]
        assert out.metadata["sdc_magic"]["status"] == "suppressed"
        assert c_rows and not any(ch in "".join(c_rows).replace("C", "") for ch in "123456789"), text
    finally:
        sess.capture.uninstall()


def test_the_users_result_is_spark_s_own(people: Any, spark: Any, humanitarian_sessions: Any) -> None:
    query = "SELECT district, sex, count(*) AS n, avg(income) AS income FROM people GROUP BY district, sex"
    sess = humanitarian_sessions()
    try:
        with_ext = sorted(map(tuple, spark.sql(query).collect()))
    finally:
        sess.capture.uninstall()
    plain = sorted(map(tuple, spark.sql(query).collect()))
    assert with_ext == plain


@pytest.mark.parametrize("query", [
    "SELECT district, count(*) AS n FROM people GROUP BY district HAVING count(*) > 3",
    "SELECT district, count(*) AS n FROM people GROUP BY district ORDER BY n LIMIT 2",
    "SELECT count(*) AS n, district FROM people GROUP BY 1",
    "SELECT p.district, count(*) AS n FROM people p JOIN people q ON p.person = q.person GROUP BY p.district",
    "SELECT district, count(*) AS n FROM (SELECT * FROM people WHERE age > 3) GROUP BY district",
    "SELECT count(*) AS n FROM people GROUP BY district",
    "SELECT district AS sex, sex AS district, count(*) AS n FROM people GROUP BY district, sex",
    "SELECT district, sum(CASE WHEN sex = 'F' THEN 1 ELSE 0 END) AS f FROM people GROUP BY district",
    "SELECT district, count(*) OVER (PARTITION BY sex) AS n FROM people GROUP BY district, sex",
    "SELECT district, count(*) AS n FROM people GROUP BY ROLLUP(district)",
    "SELECT * FROM people",
    "SELECT district, count(*) AS n FROM people WHERE person IN (SELECT person FROM people WHERE age > 3) "
    "GROUP BY district",
    "SELECT district, count(*) AS n FROM people WHERE EXISTS (SELECT 1 FROM people) GROUP BY district",
    "SELECT district, count(*) AS n FROM people GROUP BY district UNION ALL SELECT 'x', 1",
    "SELECT sex, sum(income) AS s FROM people TABLESAMPLE (1 ROWS) GROUP BY sex",
    "SELECT sex, sum(flag) AS f FROM people PIVOT (count(flag) FOR district IN ('C' AS flag)) GROUP BY sex",
    # (rows sorted by a figure the table does not show: their order told C's man's age, helper-40)
    "SELECT district, sex, count(*) AS n FROM people GROUP BY ALL "
    "ORDER BY CASE WHEN district = 'C' AND sex = 'M' THEN avg(age) ELSE 71 END",
    "SELECT district, count(*) AS n FROM IDENTIFIER('people') p GROUP BY p.district",
])
def test_other_queries_are_not_read_as_grouped(query: str) -> None:
    assert grouped_query(query, "spark") is None


def test_plain_grouped_queries_are_read() -> None:
    got = grouped_query("SELECT count(*) AS n, district, avg(age) FROM db.people WHERE age BETWEEN 20 AND 60 "
                        "GROUP BY district", "spark")
    assert got is not None and got.table == "db.people" and got.keys == ("district",) and got.width == 3
    assert [stat for _, _, stat in got.aggregates] == [(None, "size"), ("age", "mean")]
    assert got.where is not None and "BETWEEN" in got.where
    got = grouped_query("SELECT district, sex, count(*) AS n FROM people GROUP BY 1, 2 ORDER BY n DESC", "spark")
    assert got is not None and got.keys == ("district", "sex")


def test_to_pandas_of_a_spark_sql_table_is_sparks_own_result(people: Any, spark: Any, humanitarian_sessions: Any) -> None:
    """The user's rows come from the user's own query (its ORDER BY kept), the facts from a job of
    their own: ``toPandas()`` gave the recipe's rows in another order (red team, helper-39)."""
    query = "SELECT district, count(*) AS n FROM people GROUP BY district ORDER BY n ASC"
    sess = humanitarian_sessions()
    try:
        with_ext = spark.sql(query).toPandas().values.tolist()
        out = sess.publish(spark.sql(query))
    finally:
        sess.capture.uninstall()
    assert with_ext == spark.sql(query).toPandas().values.tolist() == [["C", 3], ["B", 30], ["A", 40]]
    assert out.metadata["sdc_magic"]["status"] == "suppressed"
