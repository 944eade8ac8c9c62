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
