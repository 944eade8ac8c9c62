"""Checksums of summed values computed with the table itself (``linking.engine_values``).

The first table of sums over a base counted inside an engine takes its atoms' checksums from
its own aggregation (DuckDB since stop 53, polars since stop 55) instead of a second scan of
the base. These checksums must be the very numbers the engine's own count would give: a
mismatch either hides an edit (a leak) or makes the next table of the same variable ``review``
for an edit nobody made (over-protection). Missing values are where the two could differ: a
table of one variable's sums counts its known values only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_edited_values import HIM, _duckdb_people, _status
from test_engines_redteam import PEOPLE


@pytest.fixture
def counted_in_engine(monkeypatch: Any) -> None:
    from sdc_magic.evidence import rows as row_limits

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)  # 73 people: counted in the engine


def _with_missing_incomes() -> pd.DataFrame:
    people = PEOPLE.copy()
    people.loc[[i for i in people.index[::9] if not HIM[i]], "income"] = np.nan  # (not the man of C)
    assert not people.income[HIM].isna().any()
    return people


def _polars_tables(lazy: bool, frame: Any) -> list[Any]:
    import polars as pl

    def table(by: str, stat: Any) -> Any:
        query = (frame.lazy() if lazy else frame).group_by(by).agg(stat).sort(by)
        return query.collect() if lazy else query

    return [table("sex", pl.col("income").sum()), table("district", pl.col("income").sum()),
            table("sex", pl.col("income").mean()), table("district", [pl.col("income").sum(), pl.len()])]


def _pandas_statuses(make_session: Any) -> list[str]:
    """The same four tables in pandas, linked by their rows (the reference)."""
    people = _with_missing_incomes()
    session = make_session()
    tables = [people.groupby("sex").income.sum(), people.groupby("district").income.sum(),
              people.groupby("sex").income.mean(), people.groupby("district").income.agg(["sum", "size"])]
    return [_status(session.publish(t)) for t in tables]


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_polars_sums_over_missing_values_are_no_edit(humanitarian_sessions: Any, counted_in_engine: None,
                                                      lazy: bool) -> None:
    """Over-protection: sums, means and sums beside counts of a variable with missing values,
    nothing edited: the statuses pandas gives, none called an edit."""
    pl = pytest.importorskip("polars")
    expected = _pandas_statuses(humanitarian_sessions)
    frame = pl.from_pandas(_with_missing_incomes())
    sess = humanitarian_sessions()
    outs = [sess.publish(t) for t in _polars_tables(lazy, frame)]
    texts = [o.data["text/plain"] for o in outs]
    assert not any("changed since an earlier table" in t for t in texts), texts
    assert [_status(o) for o in outs] == expected, texts


def test_duckdb_sums_over_missing_values_are_no_edit(humanitarian_sessions: Any, counted_in_engine: None) -> None:
    expected = _pandas_statuses(humanitarian_sessions)
    sess = humanitarian_sessions()
    con = _duckdb_people()
    con.execute("UPDATE people SET income = NULL WHERE person % 9 = 0 AND person <> 72")
    sqls = ["SELECT sex, sum(income) AS income FROM people GROUP BY sex ORDER BY sex",
            "SELECT district, sum(income) AS income FROM people GROUP BY district ORDER BY district",
            "SELECT sex, avg(income) AS m FROM people GROUP BY sex ORDER BY sex",
            "SELECT district, sum(income) AS income, count(*) AS n FROM people GROUP BY district ORDER BY district"]
    outs = [sess.publish(con.sql(q).df()) for q in sqls]
    texts = [o.data["text/plain"] for o in outs]
    assert not any("changed since an earlier table" in t for t in texts), texts
    assert [_status(o) for o in outs] == expected, texts


def _polars_sums(frame: Any, lazy: bool) -> Any:
    import polars as pl

    query = (frame.lazy() if lazy else frame).group_by("sex").agg(pl.col("income").sum()).sort("sex")
    return query.collect() if lazy else query


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("edit", ["his income to 0", "his income to missing", "every income but his doubled"])
def test_polars_edit_among_missing_values(sess: Any, counted_in_engine: None, edit: str, lazy: bool) -> None:
    """The first table's checksums now come from its own aggregation: an edit of his income
    between two tables of sums is still seen while other incomes are missing."""
    pl = pytest.importorskip("polars")
    from test_edited_values import EDITS, MAN, _gives_him_away

    frame = pl.from_pandas(_with_missing_incomes())
    him = (pl.col("district") == "C") & (pl.col("sex") == "M")
    income = pl.col("income")
    edited = frame.with_columns(income=pl.when(him).then(0.0).otherwise(income)) if edit == "his income to 0" \
        else frame.with_columns(income=pl.when(him).then(None).otherwise(income)) if edit == "his income to missing" \
        else frame.with_columns(income=pl.when(him).then(income).otherwise(2 * income))
    first = sess.publish(_polars_sums(frame, lazy))
    second = sess.publish(_polars_sums(edited, lazy))
    recover = EDITS[edit][1] if edit in EDITS else (lambda a, b: a - b)  # (his missing: the sums differ by him)
    assert _status(first) == "pass" and MAN > 0
    assert not (_status(second) in ("pass", "suppressed") and _gives_him_away(first, second, recover)), \
        second.data["text/plain"]


@pytest.mark.parametrize("edit", ["UPDATE people SET income = 0 WHERE person = 72",
                                  "UPDATE people SET income = NULL WHERE person = 72"])
def test_duckdb_edit_among_missing_values(sess: Any, counted_in_engine: None, edit: str) -> None:
    from test_edited_values import SUMS_SQL

    con = _duckdb_people()
    con.execute("UPDATE people SET income = NULL WHERE person % 9 = 0 AND person <> 72")
    first = sess.publish(con.sql(SUMS_SQL).df())
    con.execute(edit)
    second = sess.publish(con.sql(SUMS_SQL).df())
    assert _status(first) == "pass"
    assert _status(second) not in ("pass", "suppressed"), second.data["text/plain"]


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("missing", [False, True], ids=["complete", "with missing values"])
def test_polars_first_sums_scan_the_base_once(sess: Any, counted_in_engine: None, monkeypatch: Any,
                                              lazy: bool, missing: bool) -> None:
    """The first table of sums of a base needs no count of its own inside polars (its groups and
    checksums come with it); a second table of the same base counts its atoms once."""
    pl = pytest.importorskip("polars")
    from sdc_magic.capture.polars import lineage

    counted: list[tuple[list[str], tuple[str, ...]]] = []
    original = lineage.count_query

    def spy(root: Any, expressions: list[str], values: Any = ()) -> Any:
        counted.append((list(expressions), tuple(values)))
        return original(root, expressions, values)

    monkeypatch.setattr(lineage, "count_query", spy)
    frame = pl.from_pandas(_with_missing_incomes() if missing else PEOPLE.copy())
    first = sess.publish(_polars_sums(frame, lazy))
    assert _status(first) == "pass" and counted == [], counted
    query = (frame.lazy() if lazy else frame).group_by("district").agg(pl.col("income").sum()).sort("district")
    sess.publish(query.collect() if lazy else query)
    assert len(counted) == 1 and counted[0][1], counted  # (one count of the atoms, with the values' checksums)
