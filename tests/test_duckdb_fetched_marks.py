"""A DuckDB query's fetched frame says what its relation says of how its groups were chosen.

Red team (this stop): ``duckdb.sql("... HAVING count(*) = 2")`` was withheld when the relation was
displayed, but its ``.df()`` / ``.fetchdf()`` frame was drawn at ``suppressed`` with the one row
"Z ✕": the HAVING condition tells Z is 2. The mark now reaches every fetched form.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session

SIZES = {"A": 40, "B": 35, "C": 8, "D": 9, "Z": 2}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    district = np.repeat(list(SIZES), list(SIZES.values()))
    return pd.DataFrame({"district": district, "sex": rng.choice(["F", "M"], len(district))})


@pytest.mark.parametrize("having", ["count(*) = 2", "count(*) IN (2, 40)", "count(*) BETWEEN 1 AND 3",
                                    "count(*) > 1 AND count(*) < 9"])
@pytest.mark.parametrize("fetch", ["df", "fetchdf", "pl", None])
def test_a_pinning_having_is_withheld_however_fetched(sess: Session, having: str, fetch: str | None) -> None:
    duckdb = pytest.importorskip("duckdb")
    if fetch == "pl":
        pytest.importorskip("polars")
    df = _frame()  # noqa: F841 (read by DuckDB)
    rel = duckdb.sql(f"SELECT district, count(*) AS n FROM df GROUP BY district HAVING {having} ORDER BY 1")
    out = sess.publish(rel if fetch is None else getattr(rel, fetch)())
    assert out.metadata["sdc_magic"]["status"] == "blocked", out.data["text/plain"]
    assert "Z" not in out.data["text/plain"]


def test_a_wide_having_is_shown(sess: Session) -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _frame()  # noqa: F841 (read by DuckDB)
    out = sess.publish(duckdb.sql("SELECT district, count(*) AS n FROM df GROUP BY district "
                                  "HAVING count(*) >= 5 ORDER BY 1").df())
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")


@pytest.mark.parametrize("figure", ["round(avg(age))", "floor(avg(age))", "CAST(avg(age) AS INTEGER)"])
def test_a_one_sided_condition_through_round_is_shown(sess: Session, df: pd.DataFrame, figure: str) -> None:
    """round() keeps the order of the figure: ``< 60`` bounds it on one side only (red team: the
    relation was withheld, and with this stop's fix its fetched frame too)."""
    duckdb = pytest.importorskip("duckdb")
    d = df  # noqa: F841 (read by DuckDB)
    for cond in (f"{figure} < 60", f"{figure} > 20"):
        out = sess.publish(duckdb.sql(f"SELECT district, {figure} AS a FROM d GROUP BY 1 HAVING {cond} ORDER BY 1")
                           .df())
        assert out.metadata["sdc_magic"]["status"] != "blocked", (cond, out.data["text/plain"])


@pytest.mark.parametrize("condition,pins", [
    ("round(avg(age)) < 60", False), ("floor(count(*)) > 20", False), ("round(count(*)) = 3", True),
    ("round(3 - count(*)) > 0", True), ("round(count(*) / 10) < 1", True), ("round(count(*)) < 3", True),
])
def test_functions_that_keep_the_order_are_read_through(condition: str, pins: bool) -> None:
    sqlglot = pytest.importorskip("sqlglot")
    from sdc_magic.capture.sql_rewrites import two_sided

    having = sqlglot.parse_one(f"SELECT 1 FROM t GROUP BY k HAVING {condition}", read="duckdb").args["having"]
    assert two_sided(having.this) is pins
