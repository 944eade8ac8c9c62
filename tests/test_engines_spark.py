"""PySpark in local mode: Spark DataFrames are intercepted and checked, fail closed.

Spark evidence capture is not built yet: a Spark result is checked without evidence
(row-level when text is in its body, unverified numbers otherwise), and only the rows a
display shows are materialised (``limit``), never the whole DataFrame.
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
    df = make_referrals()[["admin2", "case_category", "sex", "age", "household_id"]]
    return spark.createDataFrame(df)


def test_row_level_spark_frame_is_blocked_and_limited(sdf) -> None:
    s = Session()
    c = s.check(sdf)
    assert c.status == "blocked" and c.kind == "row-level"
    assert len(c.frame) <= (pd.get_option("display.max_rows") or 60) + 1
    assert any("Spark" in n for n in c.notes)


def test_spark_aggregate_without_evidence_is_never_cleared(sdf) -> None:
    s = Session()
    c = s.check(sdf.groupBy("admin2", "sex").count())
    assert c.status == "blocked"  # labels in the body and no evidence: treated as row-level
    c = s.check(sdf.groupBy("sex").count().select("count"))
    assert c.kind == "unverified" and c.status != "pass"


def test_spark_frame_is_withheld_not_raw_when_published(sdf) -> None:
    s = Session()
    published = s.publish(sdf.groupBy("admin2").count(), record=False)
    assert published.metadata["sdc_magic"]["status"] == "blocked"
    assert set(published.data) <= {"text/plain", "text/html", "application/vnd.sdc-magic.v1+json"}
