"""Spark tables are linked with the session's other outputs (issue 22, item 2).

Before, a Spark table passed no rows to linking: ``groupBy("sex").count()`` (F 37, M 36) and the
same count without one person (F 37, M 35) were both cleared, telling that person's sex; pandas,
polars and DuckDB hide the second table's M. Spark now hands linking the rows behind a table as
the other engines do (values up to ``RAW_LINKED_ROWS`` source rows, so Spark and pandas tables of
the same people are compared; Spark's hashes above; not linked above ``MAX_LINKED_ROWS``, and the
note says so). Every sequence below is decided as the same sequence in pandas.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

sys.path.insert(0, "tests")
from engine_fixtures import local_spark, require_spark

require_spark()
pytestmark = pytest.mark.spark

from linking_checks import decisions  # noqa: E402
from test_engines_redteam import PEOPLE  # noqa: E402

from sdc_magic.evidence import rows as row_limits  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_spark("sdc_magic-linking")


@pytest.fixture(scope="module")
def people(spark: Any) -> Any:
    return spark.createDataFrame(PEOPLE)


@pytest.fixture
def fresh(humanitarian_sessions: Any) -> Any:
    return humanitarian_sessions


def _seen(sess: Session, table: Any) -> tuple[str, str]:
    out = sess.publish(table)
    meta = out.metadata["sdc_magic"]
    return meta["status"], out.data["text/plain"].split("sdc_magic:")[0]


def _statuses(sess: Session, tables: list[Any]) -> list[str]:
    return [sess.publish(t).metadata["sdc_magic"]["status"] for t in tables]


OLDEST_IN_A = int(PEOPLE.loc[PEOPLE.district == "A", "age"].max())
assert (PEOPLE.age >= 102).sum() == 1  # (the under-102s leave out one person)


def test_two_spark_counts_one_person_apart_are_caught(people: Any, fresh: Any) -> None:
    from pyspark.sql import functions as F

    sess = fresh()
    first, _ = _seen(sess, people.groupBy("sex").count())
    second, text = _seen(sess, people.filter(F.col("person") != 5).groupBy("sex").count())
    assert first == "pass"
    assert second != "pass", text
    assert "35" not in text and "36" not in text.replace("37", "")


@pytest.mark.parametrize("spark_first", [True, False])
def test_spark_and_pandas_tables_of_the_same_people_are_compared(people: Any, fresh: Any, spark_first: bool) -> None:
    from pyspark.sql import functions as F

    sess = fresh()
    if spark_first:
        tables = [people.groupBy("sex").count(), PEOPLE[PEOPLE.person != 5].groupby("sex").size()]
    else:
        tables = [PEOPLE.groupby("sex").size(), people.filter(F.col("person") != 5).groupBy("sex").count()]
    assert _statuses(sess, tables) == ["pass", "suppressed"]


SEQUENCES = {
    "district counts, then without the oldest of A": (
        lambda sp, F: [sp.groupBy("district").count(), sp.filter(F.col("age") != OLDEST_IN_A).groupBy("district").count()],
        lambda pd_: [pd_.groupby("district").size(), pd_[pd_.age != OLDEST_IN_A].groupby("district").size()]),
    "income sums by sex, then without one person": (
        lambda sp, F: [sp.groupBy("sex").agg(F.sum("income").alias("income")),
                       sp.filter(F.col("person") != 7).groupBy("sex").agg(F.sum("income").alias("income"))],
        lambda pd_: [pd_.groupby("sex")["income"].sum(), pd_[pd_.person != 7].groupby("sex")["income"].sum()]),
    "counts by sex, then by sex among the under-102s (one person older)": (
        lambda sp, F: [sp.groupBy("sex").count(), sp.filter(F.col("age") < 102).groupBy("sex").count()],
        lambda pd_: [pd_.groupby("sex").size(), pd_[pd_.age < 102].groupby("sex").size()]),
    "a crosstab, then the same crosstab without one person": (
        lambda sp, F: [sp.crosstab("sex", "district"), sp.filter(F.col("person") != 11).crosstab("sex", "district")],
        lambda pd_: [pd.crosstab(pd_.sex, pd_.district), pd.crosstab(pd_[pd_.person != 11].sex,
                                                                       pd_[pd_.person != 11].district)]),
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequences_are_decided_as_in_pandas(people: Any, fresh: Any, name: str) -> None:
    from pyspark.sql import functions as F

    make_spark, make_pandas = SEQUENCES[name]
    expected = decisions(fresh(), make_pandas(PEOPLE))
    got = decisions(fresh(), make_spark(people, F))
    assert got == expected
    alone = decisions(fresh(), make_pandas(PEOPLE)[-1:])[0]
    assert expected[-1] != alone  # each sequence gives a person away unless linked


def test_large_sources_are_linked_by_sparks_hashes(people: Any, fresh: Any, monkeypatch: Any) -> None:
    """Above RAW_LINKED_ROWS only Spark's 64-bit hashes of the values reach the driver, and two
    Spark tables one person apart are still caught."""
    from pyspark.sql import functions as F

    monkeypatch.setattr(row_limits, "RAW_LINKED_ROWS", 10)
    sess = fresh()
    assert _statuses(sess, [people.groupBy("sex").count(),
                            people.filter(F.col("person") != 5).groupBy("sex").count()]) == ["pass", "suppressed"]
    entry = max(sess.registry.entries(), key=lambda e: e.id)
    rows = entry.source.rows
    assert len(rows) == 72
    hashed = {c for c in rows.columns if str(c).startswith("spark#")}
    assert hashed == {f"spark#{c}" for c in PEOPLE.columns if c != "sex"}
    assert not pd.Series(PEOPLE["income"]).isin(rows[sorted(hashed)].to_numpy().ravel()).any()


def test_beyond_the_row_limit_the_note_says_not_linked(people: Any, fresh: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 10)
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 10)
    sess = fresh()
    out = sess.publish(people.groupBy("sex").count())
    notes = " ".join(out.metadata["sdc_magic"].get("notes", [])) + out.data["text/plain"]
    assert "not linked with other tables" in notes
    entry = max(sess.registry.entries(), key=lambda e: e.id)
    assert getattr(entry, "source", None) is None or entry.source.rows is None


# ------------------------------------------------------------------ open (strict xfails)
# Spark rows carry no labels: they are matched by their values in the non-key columns only (as a
# lazy polars frame's are). A second table whose rows lost or changed those values is not found
# among the first table's rows (red team of this stop: F 37 / M 36, then F 37 / M 35 at `pass`).
OPEN = {
    "keys only": lambda sp, F: sp.filter(F.col("person") != 5).select("sex").groupBy("sex").count(),
    "an identifying column changed": lambda sp, F: sp.filter(F.col("person") != 5).withColumn(
        "person", F.col("person") + 1000).withColumn("household", F.lit(0)).withColumn(
        "income", F.col("income") * 2).withColumn("age", F.col("age") + 1).groupBy("sex").count(),
}


@pytest.mark.xfail(strict=True, reason="issue 22: Spark rows are matched by content only (no row labels): "
                                       "37 + 36 = 73, then 37 + 35 tells person 5 is a man")
@pytest.mark.parametrize("name", sorted(OPEN))
def test_a_spark_copy_that_lost_its_identifying_values(people: Any, fresh: Any, name: str) -> None:
    from pyspark.sql import functions as F

    sess = fresh()
    assert _statuses(sess, [people.groupBy("sex").count(), OPEN[name](people, F)]) == ["pass", "suppressed"]
