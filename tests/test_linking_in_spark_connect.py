"""Linking inside Spark for Spark Connect sessions: the client's plan read into steps over a root.

A Connect client has no analyzed plan; ``capture/spark_connect_plan.py`` reads the unresolved
one (``Filter``/``Project``/``WithColumns``/``Drop``/``WithColumnsRenamed`` over a relation) into
the same SQL steps the classic path writes, checked by the server (``sameSemantics``). The
classic module's sessions run here through pyspark's local Connect server, in a child process
(it cannot share this process's classic session): every verdict must be the one linking by rows
gives the same tables, every table counted in Spark, and a display must move O(cells + atoms)
rows to the driver.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_fixtures import require_spark, run_spark_connect

require_spark()
pytestmark = pytest.mark.spark

CHILD = r'''
import json, sys, tempfile, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, TESTS)
from pyspark.sql import SparkSession
spark = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
import numpy as np
import pandas as pd
import test_linking_in_spark as T
from linking_checks import engine_universes, last_rows, verdict
from test_engine_pushdown import counting
from sdc_magic.capture import spark_lineage
from sdc_magic.config import preset
from sdc_magic.evidence import rows as row_limits
from sdc_magic.evidence.in_engine import InEngineRows
from sdc_magic.jupyter.session import Session

F = spark_lineage.functions_of(spark.range(1))
people = spark.createDataFrame(T.PEOPLE)
out = {"class": type(people).__module__}
IN_ENGINE = row_limits.IN_ENGINE_ROWS


def session(unit=None):
    s = Session(rules=preset("humanitarian"))
    if unit is not None:
        s.set_rules(unit=unit)
    s.capture.install()
    return s


def run(makes, frame, unit=None, in_engine=True):
    row_limits.IN_ENGINE_ROWS = 10 if in_engine else IN_ENGINE
    told = row_limits.told_apart_by_content
    if not in_engine:  # (by rows always: repeated rows are otherwise counted in Spark)
        row_limits.told_apart_by_content = lambda rows: True
    s = session(unit)
    try:
        got = [[*verdict(s.publish(T._sorted(make(frame))))[:2], isinstance(last_rows(s), InEngineRows)]
               for make in makes]
        return got, len(engine_universes(s))
    finally:
        s.capture.uninstall()
        row_limits.told_apart_by_content = told
        row_limits.IN_ENGINE_ROWS = IN_ENGINE


def plain(v):
    return json.loads(json.dumps(v, default=int))


out["sessions"] = {}
for name, makes in T.SESSIONS.items():
    rows, _ = run(makes, people, in_engine=False)
    counted, universes = run(makes, people)
    out["sessions"][name] = plain({"rows": rows, "counted": counted, "universes": universes})

from test_linking_distinct_units import EP
episodes = spark.createDataFrame(EP.assign(district=EP.district.astype(object), sex=EP.sex.astype(object),
                                           episode=np.arange(len(EP))))
out["units"] = {}
for name, makes in T.UNIT_SESSIONS.items():
    rows, _ = run(makes, episodes, unit="person", in_engine=False)
    counted, _ = run(makes, episodes, unit="person")
    out["units"][name] = plain({"rows": rows, "counted": counted})

# roots over a join (by rows: a join or a union may repeat people, helper-80) and over an aggregate
homes = T.PEOPLE.drop_duplicates("household")[["household"]].assign(
    rural=lambda h: (h["household"] % 3 == 0).astype(int))
joined = people.join(spark.createDataFrame(homes), "household")
households = people.groupBy("household", "district").agg(F.count("*").alias("size"), F.max("age").alias("oldest"))
roots = {
    "a join": (joined, [lambda p: p.groupBy("sex").count(),
                        lambda p: p.filter(F.col("district") != "C").groupBy("sex").count(),
                        lambda p: p.filter(F.col("rural") == 1).groupBy("district").count()]),
    "an aggregate": (households, [lambda p: p.groupBy("district").count(),
                                  lambda p: p.filter(F.col("oldest") < 100).groupBy("district").count()]),
}
tagged = people.withColumn("m", F.lit(0)).union(people.withColumn("m", F.lit(1)))
copies = [lambda p: p.filter(F.col("m") == 0).groupBy("sex").count(),
          lambda p: p.filter((F.col("m") == 1) & (F.col("district") != "C")).groupBy("sex").count()]
out["tagged union"] = plain({"rows": [v[:2] for v in run(copies, tagged, in_engine=False)[0]],
                             "counted": [v[:2] for v in run(copies, tagged)[0]]})
out["roots"] = {}
for name, (frame, makes) in roots.items():
    rows, _ = run(makes, frame, in_engine=False)
    counted, _ = run(makes, frame)
    out["roots"][name] = plain({"rows": rows, "counted": counted})

# red team (helper-79): a renamed copy (toDF) is the same rows, compared; a column *named*
# unresolvedstar() counts its known values, not every row
upper = [lambda p: p.groupBy("sex").count(),
         lambda p: p.toDF(*[c.upper() for c in p.columns]).filter(F.col("DISTRICT") != "C").groupBy("SEX").count()]
out["renamed copy"] = plain(run(upper, people)[0])
named = people.withColumn("unresolvedstar()", F.when(F.col("district") == "C", F.lit(1)))
out["named star"] = plain(run([lambda p: p.groupBy("sex").agg(F.count(F.col("unresolvedstar()")))], named)[0])
import datetime
dated = people.withColumn("seen", F.to_date(F.lit("2020-01-01")) + F.col("age").cast("int"))
out["typed literals"] = [
    spark_lineage.lineage(dated.filter(F.col("seen") >= F.lit(datetime.date(2020, 2, 1)))) is not None,
    spark_lineage.lineage(dated.withColumn("at", F.col("seen").cast("timestamp"))
                          .filter(F.col("at") < F.lit(datetime.datetime(2020, 3, 1, 12, 30)))) is not None]

# what leaves Spark: Connect's own conversions wrapped below the capture's
row_limits.IN_ENGINE_ROWS = 10
with counting(type(people), T.SPARK_CONVERSIONS) as moved:
    s = session()
    try:
        s.publish(T._sorted(people.groupBy("district", "sex").count()))
        second = s.publish(T._sorted(people.filter(F.col("age") < 100).groupBy("district").count()))
    finally:
        s.capture.uninstall()
out["pushdown"] = {"status": second.metadata["sdc_magic"]["status"], "moved": moved}

# no row limit: above the rows path's limits the tables are still compared
saved = row_limits.MAX_LINKED_ROWS, row_limits.MAX_FETCHED_ROWS
row_limits.MAX_LINKED_ROWS = row_limits.MAX_FETCHED_ROWS = 20
s = session()
try:
    s.publish(people.groupBy("sex").count())
    out["no_limit"] = s.publish(people.filter(F.col("district") != "C").groupBy("sex").count()) \
        .metadata["sdc_magic"]["status"]
finally:
    s.capture.uninstall()
    row_limits.MAX_LINKED_ROWS, row_limits.MAX_FETCHED_ROWS = saved

# the same data read again are one base; other data another
folder = tempfile.mkdtemp()
path = folder + "/people.parquet"
T.PEOPLE.to_parquet(path)
one = spark_lineage.lineage(spark.read.parquet(path).filter(F.col("age") > 3))
two = spark_lineage.lineage(spark.read.parquet(path))
three = spark_lineage.lineage(spark.createDataFrame(T.PEOPLE.copy()))
four = spark_lineage.lineage(spark.createDataFrame(T.PEOPLE.assign(age=T.PEOPLE["age"] + 1)))
base = spark_lineage.lineage(people)
read_upper = [lambda p: p.groupBy("sex").count(),
              lambda p: p.toDF(*[c.upper() for c in p.columns]).filter(F.col("DISTRICT") != "C")
              .groupBy("SEX").count()]
out["renamed read"] = plain(run(read_upper, spark.read.parquet(path))[0])
out["identity"] = [one is not None and two is not None and one.identity == two.identity,
                   base is not None and three is not None and base.identity == three.identity,
                   four is not None and base is not None and four.identity != base.identity]

# steps that are not row-wise: no lineage (linked by their rows)
not_written = {
    "a Python UDF": people.filter(F.udf(lambda a: a > 30, "boolean")("age")),
    "a random value": people.withColumn("r", F.rand(seed=1)),
    "a random filter": people.filter(F.rand(seed=3) < 0.9),
    "a random value in SQL text": people.filter("rand(3) < 0.9"),
    "a sample": people.sample(0.5, seed=1).filter(F.col("age") > 3),
    "a limit": people.limit(50),
    "a window": T._window(people),
    "a subquery in SQL text": people.filter("age > (SELECT avg(age) FROM VALUES (1) AS t(age))"),
    "a distinct on some columns": people.dropDuplicates(["household"]).filter(F.col("age") > 3),
    "an aggregate of the first rows": people.groupBy("household").agg(F.first("age").alias("a")),
    "the clock": people.withColumn("t", F.unix_timestamp()).filter(F.col("age") > 3),
}
people.sample(0.5, seed=1).createOrReplaceTempView("sampled")
people.withColumn("r", F.rand(seed=1)).createOrReplaceTempView("randomised")
people.createOrReplaceTempView("everyone")
not_written["a view of a sample"] = spark.table("sampled").filter(F.col("age") > 3)
not_written["a view of a random value"] = spark.table("randomised")
people.filter(F.udf(lambda a: a > 30, "boolean")("age")).createOrReplaceTempView("udfed")
people.groupBy("household").agg(F.first("age").alias("a")).createOrReplaceTempView("firsts")
not_written["a view with a Python UDF"] = spark.table("udfed")  # (its plan says <lambda>, helper-80)
not_written["a view of first()"] = spark.table("firsts")
out["written"] = {name: spark_lineage.lineage(frame) is not None for name, frame in
                  {"a view": spark.table("everyone").filter(F.col("age") > 3),
                   "an aggregate": households,
                   "a renamed read": spark.read.parquet(path).toDF(*[c.upper() for c in T.PEOPLE.columns])}.items()}
# (a distinct's analyzed plan is a Deduplicate, as dropDuplicates of some columns in a view is: by rows)
out["written"]["a distinct"] = spark_lineage.lineage(people.distinct()) is None
out["written"]["a union"] = spark_lineage.lineage(people.union(people).filter(F.col("age") > 3)) is None
out["written"]["a join"] = spark_lineage.lineage(joined) is None
out["not_written"] = {k: spark_lineage.lineage(v) is None for k, v in not_written.items()}
line = spark_lineage.lineage(people.filter(F.col("age") > 3).withColumn("band", F.col("age") / 10)
                             .where("district <> 'C'").drop("flag").withColumnRenamed("sex", "gender")
                             .select("*", F.upper("district").alias("d")).select("gender", "d", "age"))
out["steps"] = None if line is None else [st["m"] for st in line.steps]
banded = people.withColumn("band", F.col("age") / 10).cache()  # (a cached plan is a root: the count reads it)
line = spark_lineage.lineage(banded.filter(F.col("band") > 3))
out["cached"] = None if line is None else [[st["m"] for st in line.steps], "band" in line.root.columns]
banded.unpersist()

# after a restart, outputs counted in Spark are compared (steps, keys and atoms saved beside the ledger)
from sdc_magic.records.ledger import Ledger
row_limits.IN_ENGINE_ROWS = 10
tables = [lambda p: p.groupBy("sex").count(), lambda p: p.filter(F.col("district") != "C").groupBy("sex").count()]
first = Session(rules=preset("humanitarian"))
first.ledger = Ledger(folder, persist=True)
first.capture.install()
try:
    before = [verdict(first.publish(T._sorted(make(spark.read.parquet(path)))))[0] for make in tables]
finally:
    first.capture.uninstall()
after = Session(rules=preset("humanitarian"))
after.ledger = Ledger(folder, persist=True)
after.capture.install()
try:
    again = after.publish(spark.read.parquet(path).filter(F.col("age") < 100).groupBy("sex").count())
finally:
    after.capture.uninstall()
out["restart"] = [before, again.metadata["sdc_magic"]["status"]]
print("RESULT " + json.dumps(out))
spark.stop()
'''


@pytest.fixture(scope="module")
def connect() -> dict[str, Any]:
    pytest.importorskip("grpc", reason="Spark Connect needs grpcio (pip install sdc-magic[spark])")
    script = f"TESTS = {str(Path(__file__).parent)!r}\n" + CHILD
    proc = run_spark_connect(script)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-4000:]
    out = json.loads(line[len("RESULT "):])
    assert out["class"].startswith("pyspark.sql.connect")
    return out


def _sessions() -> list[str]:
    from test_linking_in_spark import SESSIONS
    return list(SESSIONS)


@pytest.mark.parametrize("name", _sessions())
def test_connect_tables_counted_in_spark_get_the_verdicts_of_the_rows(name: str, connect: dict[str, Any]) -> None:
    got = connect["sessions"][name]
    assert [v[:2] for v in got["counted"]] == [v[:2] for v in got["rows"]]
    assert all(v[2] for v in got["counted"]), "not counted in Spark"
    assert not any(v[2] for v in got["rows"])
    assert got["universes"] == 1


def test_connect_roots_over_a_join_or_an_aggregate_get_the_verdicts_of_the_rows(connect: dict[str, Any]) -> None:
    """An aggregate's rows are counted in Spark; a join's are read (a join or a union may put one
    person in two rows of a base, which counts of rows cannot tell: helper-80's tagged union)."""
    for name, got in connect["roots"].items():
        assert [v[:2] for v in got["counted"]] == [v[:2] for v in got["rows"]], name
        assert all(v[2] for v in got["counted"]) == (name == "an aggregate"), name
        assert any(v[0] in ("blocked", "suppressed") for v in got["counted"]), name
    tagged = connect["tagged union"]
    assert tagged["counted"] == tagged["rows"] and tagged["rows"][-1][0] == "blocked"


def test_a_connect_copy_renamed_or_counting_a_column_named_like_a_star_is_not_cleared(
        connect: dict[str, Any]) -> None:
    """Red team (helper-79): ``toDF`` of new names is a rename step over the same root (C's
    people by subtraction: blocked); ``count(col("unresolvedstar()"))`` counts that column's known
    values (C's three: blocked), not every row."""
    assert [v[0] for v in connect["renamed copy"]] == ["pass", "blocked"]
    assert all(v[2] for v in connect["renamed copy"])
    assert connect["named star"][0][0] == "blocked"
    assert [v[0] for v in connect["renamed read"]] == ["pass", "blocked"]  # (toDF over a file read, helper-80)


def test_connect_dates_and_timestamps_are_written_as_typed_literals(connect: dict[str, Any]) -> None:
    assert connect["typed literals"] == [True, True]


def test_connect_tables_of_a_declared_unit_get_the_verdicts_of_the_rows(connect: dict[str, Any]) -> None:
    for name, got in connect["units"].items():
        assert [v[:2] for v in got["counted"]] == [v[:2] for v in got["rows"]], name
        assert all(v[2] for v in got["counted"]), name


def test_a_connect_display_moves_only_cells_and_atoms(connect: dict[str, Any]) -> None:
    """Connect's conversions wrapped below the capture's: no display moves the 73 source rows."""
    got = connect["pushdown"]
    assert got["status"] == "blocked"  # 40 - 38: the two people over 100 in A
    assert got["moved"] and max(got["moved"]) <= 12, got["moved"]


def test_connect_linking_has_no_row_limit_and_survives_a_restart(connect: dict[str, Any]) -> None:
    assert connect["no_limit"] == "blocked"
    assert connect["restart"] == [["pass", "blocked"], "blocked"]


def test_connect_roots_are_identified_by_the_servers_semantic_hash(connect: dict[str, Any]) -> None:
    assert connect["identity"] == [True, True, True]


def test_connect_steps_that_are_not_row_wise_are_not_written(connect: dict[str, Any]) -> None:
    assert connect["not_written"] == {k: True for k in connect["not_written"]}
    assert connect["written"] == {k: True for k in connect["written"]}
    assert connect["cached"] == [["filter"], True]
    assert connect["steps"] == ["select", "filter", "select", "filter", "select", "select", "select", "select"]  # (createDataFrame's names first)
