"""PySpark in local mode: Spark DataFrames are intercepted and checked, fail closed.

``groupBy(...).agg/count/sum/avg`` results carry evidence computed by Spark (one job
with the user's columns and the facts); the same table gets the same decision as in
pandas. Anything else is checked without evidence (row-level when text is in its body,
unverified numbers otherwise), and only the rows a display shows are materialised.
"""

from __future__ import annotations

import shutil
import sys

import pandas as pd
import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

if shutil.which("java") is None:  # loud: these tests are part of `make test`
    sys.stderr.write("\n*** JAVA NOT FOUND: the PySpark tests are SKIPPED (install Java 17) ***\n")
    pytest.skip("JAVA NOT FOUND: PySpark tests skipped (install Java 17)", allow_module_level=True)

from sdc_magic.datasets import make_referrals  # noqa: E402
from sdc_magic.session import Session  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    session = (SparkSession.builder.master("local[2]").appName("sdc_magic-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield session
    session.stop()


@pytest.fixture(scope="module")
def sdf(spark):
    df = make_referrals()[["admin2", "case_category", "age_band", "sex", "age", "household_id",
                           "days_to_first_service"]]
    return spark.createDataFrame(df)


def test_row_level_spark_frame_is_blocked_and_limited(sdf) -> None:
    s = Session()
    c = s.check(sdf)
    assert c.status == "blocked" and c.kind == "row-level"
    assert len(c.frame) <= (pd.get_option("display.max_rows") or 60) + 1
    assert any("Spark" in n for n in c.notes)


G3 = ["admin2", "case_category", "age_band"]


def _decision(s: Session, obj) -> tuple:
    c = s.check(obj, protect=False)
    return c.status, c.kind, c.primary_count, tuple(sorted(c.reason_summary().items()))


@pytest.mark.parametrize("unit", [None, "household_id"])
def test_same_decisions_as_pandas(sdf, unit) -> None:
    from pyspark.sql import functions as F

    from sdc_magic.config import preset

    df = make_referrals()
    s = Session(rules=preset("insee"))
    if unit:
        s.set_rules(unit=unit)
    s.capture.install()
    try:
        cases = [(df.groupby(G3).size(), sdf.groupBy(*G3).count()),
                 (df.groupby(G3)["days_to_first_service"].sum(),
                  sdf.groupBy(G3).agg(F.sum("days_to_first_service").alias("days")))]
        for pandas_obj, spark_obj in cases:
            expected = _decision(s, pandas_obj)
            assert expected[2] > 0
            fetched = spark_obj.toPandas()  # one job: the user's columns and the facts
            assert _decision(s, fetched) == expected
            shown = s.check(spark_obj)  # a display: at most display.max_rows groups
            assert shown.kind == "table" and shown.status != "pass"
    finally:
        s.capture.uninstall()


def test_spark_aggregate_without_evidence_is_never_cleared(sdf) -> None:
    from pyspark.sql import functions as F

    s = Session()
    s.capture.install()
    try:
        c = s.check(sdf.groupBy(F.col("admin2"), F.col("sex")).count())  # Column keys: not captured
        assert c.status == "blocked"  # labels in the body and no evidence: treated as row-level
        c = s.check(sdf.select(F.count(F.lit(1)).alias("n")))
        assert c.kind == "unverified" and c.status != "pass"
    finally:
        s.capture.uninstall()


def test_spark_frame_is_withheld_not_raw_when_published(sdf) -> None:
    s = Session()
    published = s.publish(sdf.groupBy("admin2").count(), record=False)
    assert published.metadata["sdc_magic"]["status"] == "blocked"
    assert set(published.data) <= {"text/plain", "text/html", "application/vnd.sdc-magic.v1+json"}
