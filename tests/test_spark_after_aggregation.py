"""A sorted or renamed Spark aggregate is the same table: captured, checked and linked like the original.

``df.groupBy(k).count().orderBy(k).toPandas()`` is how Spark users write a table. The sorted
DataFrame is a new object; before, it had no recipe and was checked as row-level data:
``blocked``, never exportable, its figures on screen (the counts of 2 and 3 included). Now
``orderBy``/``sort`` of a captured aggregate keep its recipe and the sort is replayed on the job
that computes the user's columns with the facts (or, when it cannot be replayed, the user's own
job runs beside the facts job). The same for a ``groupBy`` table's statistics renamed
(``withColumnRenamed("count", "n")``, ``withColumnsRenamed``); a renamed key stays uncaptured.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

sys.path.insert(0, "tests")
from engine_fixtures import local_spark, require_spark

require_spark()
pytestmark = pytest.mark.spark

from test_engines_redteam import PEOPLE  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_spark("sdc_magic-sorted")


@pytest.fixture(scope="module")
def people(spark: Any) -> Any:
    return spark.createDataFrame(PEOPLE)


def _counts(d: Any) -> Any:
    return d.groupBy("district", "sex").count()


def _sorts() -> dict[str, Callable[[Any], Any]]:
    from pyspark.sql import functions as F

    return {
        "orderBy keys": lambda d: _counts(d).orderBy("district", "sex"),
        "orderBy count desc": lambda d: _counts(d).orderBy(F.col("count").desc()),
        "sort F.desc": lambda d: _counts(d).sort(F.desc("count")),
        "ascending=False": lambda d: _counts(d).orderBy("count", ascending=False),
        "a column bound to the aggregate": lambda d: (lambda g: g.orderBy(g["count"].desc()))(_counts(d)),
        "sum by district": lambda d: d.groupBy("district").agg(F.sum("income").alias("income")).orderBy("district"),
        "count renamed": lambda d: _counts(d).withColumnRenamed("count", "n"),
        "renamed, then sorted": lambda d: _counts(d).withColumnRenamed("count", "n").orderBy("district"),
        "sorted, then renamed": lambda d: _counts(d).orderBy("district").withColumnsRenamed({"count": "n"}),
    }


def _unsorted(name: str) -> Callable[[Any], Any]:
    from pyspark.sql import functions as F

    if name == "sum by district":
        return lambda d: d.groupBy("district").agg(F.sum("income").alias("income"))
    return _counts


def _decide(make: Callable[[Any], Any], people: Any) -> list[tuple[str, str]]:
    """Status and the cells as shown (sorted, so that row order does not count), for a table and
    the same table without person 5."""
    from pyspark.sql import functions as F

    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        out = []
        for d in (people, people.filter(F.col("person") != 5)):
            bundle = s.publish(make(d).toPandas())
            meta = bundle.metadata["sdc_magic"]
            shown = bundle.data["text/plain"].split("sdc_magic")[0].splitlines()[1:]
            out.append((meta["status"], "\n".join(sorted(" ".join(line.split()[1:]) for line in shown))))
        return out
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("name", sorted(_sorts()))
def test_a_sorted_or_renamed_aggregate_is_decided_as_the_original(name: str, people: Any) -> None:
    sorted_ = _decide(_sorts()[name], people)
    unsorted = _decide(_unsorted(name), people)
    assert sorted_ == unsorted
    assert all(status != "blocked" for status, _ in sorted_[:1])  # (the first is a table, not row-level)
    assert "✕" in sorted_[1][1]  # the second hides what tells person 5 apart


def test_the_user_gets_spark_sorted_rows_and_spark_is_restored(people: Any) -> None:
    from pyspark.sql.classic.dataframe import DataFrame

    plain = _counts(people).orderBy("district", "sex").toPandas()
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        got = _counts(people).orderBy("district", "sex").toPandas()
        assert list(zip(got.district, got.sex, strict=True)) == list(zip(plain.district, plain.sex, strict=True))
        assert got["count"].tolist() == plain["count"].tolist()
    finally:
        s.capture.uninstall()
    assert not getattr(DataFrame.orderBy, "__sdc_magic_wrapper__", False)
    assert not getattr(DataFrame.sort, "__sdc_magic_wrapper__", False)


def test_a_renamed_key_is_not_captured(people: Any) -> None:
    """A renamed key leaves the table uncaptured: row-level, never cleared (as before)."""
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        out = s.publish(_counts(people).withColumnRenamed("sex", "gender").toPandas())
    finally:
        s.capture.uninstall()
    assert out.metadata["sdc_magic"]["status"] == "blocked"
