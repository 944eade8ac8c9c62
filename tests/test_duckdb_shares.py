"""Shares of a count in DuckDB (``100.0 * count(*) / sum(count(*)) OVER (PARTITION BY a)``), and
two leaks the red team of stop 57 found beside the counts of a condition.

Shares (census of stop 57): a window over the groups made the query untraced, its counts checked
without evidence and its shares withheld: ``review`` in every session that wrote "percent of
the total". A function of one count and its sum over a partition of the table's keys tells
nothing the count does not once the partition's total (a margin, taken as published by the
protection) is known: planned as the count, hidden exactly where the count is
(``capture/sql_shares.py``).

Leaks (helper-68): a macro in a counted condition, redefined between two tables, made linking
inside DuckDB count other rows for the earlier table (both ``pass``, the two people over 100 by
difference): a query calling the user's functions is read by rows. ``count_if(age > 100) + 0 *
avg(income)`` was checked as the mean of income and showed 1 and 1: a composite with a count of
some of the rows is not read as its magnitude part.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_fixtures import people_in_duckdb
from test_engines_redteam import PEOPLE

duckdb = pytest.importorskip("duckdb")

BY_DISTRICT_AND_SEX = ("SELECT district, sex, count(*) AS n, round(100.0 * count(*) / sum(count(*)) "
                       "OVER (PARTITION BY district), 1) AS pct FROM people GROUP BY district, sex "
                       "ORDER BY district, sex")



def _connection() -> Any:
    return people_in_duckdb(PEOPLE)


def _meta(out: Any) -> dict[str, Any]:
    return out.metadata["sdc_magic"]


@pytest.mark.parametrize("query", [
    "SELECT sex, count(*) AS n, 100.0 * count(*) / sum(count(*)) OVER () AS pct FROM people GROUP BY sex "
    "ORDER BY sex",
    "SELECT sex, count(*) * 1.0 / sum(count(*)) OVER () AS share FROM people GROUP BY sex ORDER BY sex",
    "SELECT sex, sum(count(*)) OVER () - count(*) AS others FROM people GROUP BY sex ORDER BY sex",
    "SELECT sex, count(person) / sum(count(person)) OVER () AS share FROM people GROUP BY sex ORDER BY sex",
])
def test_shares_of_a_count_are_cleared(sess: Any, linked: str, query: str) -> None:
    out = sess.publish(_connection().sql(query))
    assert _meta(out)["status"] == "pass", _meta(out).get("notes")


def test_a_share_is_hidden_where_its_count_is(sess: Any, linked: str) -> None:
    import numpy as np

    out = sess.publish(_connection().sql(BY_DISTRICT_AND_SEX))
    assert _meta(out)["status"] == "suppressed", _meta(out).get("notes")
    hidden = np.asarray(out.checked.hidden)
    assert hidden.any() and (hidden[:, 0] == hidden[:, 1]).all()  # (n and pct: one pattern, C's and more)


def test_the_shares_of_the_people_under_100_after_everyones_counts(sess: Any, linked: str) -> None:
    con = _connection()
    first = sess.publish(con.sql("SELECT sex, count(*) AS n FROM people GROUP BY sex ORDER BY sex"))
    second = sess.publish(con.sql("SELECT sex, 100.0 * count(*) / sum(count(*)) OVER () AS pct FROM people "
                                  "WHERE age < 100 GROUP BY sex ORDER BY sex"))
    assert _meta(first)["status"] == "pass"
    assert _meta(second)["status"] == "blocked" or "✕" in second.data["text/plain"]


@pytest.mark.parametrize("query", [
    # a running share (ORDER BY in the window), a share over something but the keys, another
    # aggregate's total, the number of groups, a rank, grouping sets: untraced as before
    "SELECT sex, count(*) / sum(count(*)) OVER (ORDER BY sex) AS s FROM people GROUP BY sex ORDER BY sex",
    "SELECT district, sex, count(*) / sum(count(*)) OVER (PARTITION BY district = 'A') AS s FROM people "
    "GROUP BY district, sex ORDER BY district, sex",
    "SELECT sex, count(*) / sum(count(person)) OVER () AS s FROM people GROUP BY sex ORDER BY sex",
    "SELECT sex, count(*) OVER () AS groups FROM people GROUP BY sex ORDER BY sex",
    "SELECT sex, rank() OVER (ORDER BY count(*)) AS r FROM people GROUP BY sex ORDER BY sex",
    "SELECT district, count(*) / sum(count(*)) OVER () AS s FROM people GROUP BY ROLLUP (district) "
    "ORDER BY district",
    # rows dropped after the windows (red team of 9b47a47: 40/73 and 30/73 shown, C = 3), a window
    # inside a subquery
    "SELECT district, 100.0 * count(*) / sum(count(*)) OVER () AS pct FROM people GROUP BY district "
    "ORDER BY count(*) DESC LIMIT 2",
    "SELECT district, 100.0 * count(*) / sum(count(*)) OVER () AS pct FROM people GROUP BY district "
    "ORDER BY count(*) ASC OFFSET 1",
    "SELECT district, 100.0 * count(*) / sum(count(*)) OVER () AS pct FROM people GROUP BY district "
    "ORDER BY district FETCH FIRST 2 ROWS ONLY",
    "SELECT DISTINCT ON (sex) sex, district, count(*) AS n, 100.0 * count(*) / sum(count(*)) OVER "
    "(PARTITION BY sex) AS pct FROM people GROUP BY sex, district ORDER BY sex, n DESC",
    "SELECT sex, count(*) AS n FROM (SELECT * FROM people QUALIFY row_number() OVER (ORDER BY age DESC) > 2) "
    "GROUP BY sex ORDER BY sex",
])
def test_other_windows_stay_untraced(sess: Any, query: str) -> None:
    out = sess.publish(_connection().sql(query))
    assert _meta(out)["status"] not in ("pass", "suppressed"), out.data["text/plain"]


def test_a_count_of_a_condition_inside_a_composite_is_not_its_magnitude(sess: Any) -> None:
    out = sess.publish(_connection().sql("SELECT sex, count_if(age > 100) + 0 * avg(income) AS v FROM people "
                                         "GROUP BY sex ORDER BY sex"))
    assert _meta(out)["status"] != "pass" or "1.0" not in out.data["text/plain"], out.data["text/plain"]


#: 18 women and 26 men under 100, the oldest of each sex: the sizes of ``age < 60``'s groups, other rows
OTHER_ROWS = """SELECT person FROM (SELECT person, sex, row_number() OVER (PARTITION BY sex ORDER BY age DESC, person)
                AS rn FROM people WHERE age < 100) WHERE rn <= CASE sex WHEN 'F' THEN 18 ELSE 26 END"""


@pytest.mark.parametrize("form", ["count_if(m(age, person))", "count(*) FILTER (WHERE m(age, person))"])
@pytest.mark.parametrize("how", ["redefined", "answers otherwise in linking's query", "a Python function"])
def test_a_macro_in_a_counted_condition(sess: Any, monkeypatch: Any, form: str, how: str) -> None:
    """Counted in DuckDB, the first table's condition is counted again at the second: the macro
    then selects other rows of the same group sizes (helper-68). Read by rows, the two tables
    are compared or ``review``, never both cleared with the two people over 100 shown."""
    from sdc_magic.evidence import rows as row_limits

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    con = _connection()
    switched = {"other rows": False}
    if how == "a Python function":  # (DuckDB's catalog calls it internal, as its built-ins)
        other = {int(r[0]) for r in con.sql(OTHER_ROWS).fetchall()}
        con.create_function("m", lambda a, p: p in other if switched["other rows"] else a < 60,
                            ["BIGINT", "BIGINT"], "BOOLEAN")
    elif how == "redefined":
        con.execute("CREATE MACRO m(a, p) AS a < 60")
    else:
        con.execute(f"CREATE MACRO m(a, p) AS CASE WHEN current_query() LIKE '%AS g0%' THEN p IN ({OTHER_ROWS}) "
                    "ELSE a < 60 END")
    first = sess.publish(con.sql(f"SELECT sex, {form} AS n FROM people GROUP BY sex ORDER BY sex"))
    if how == "redefined":
        con.execute(f"CREATE OR REPLACE MACRO m(a, p) AS p IN ({OTHER_ROWS})")
    switched["other rows"] = True
    second = sess.publish(con.sql("SELECT sex, count(*) AS n FROM people WHERE age < 60 OR age > 100 "
                                  "GROUP BY sex ORDER BY sex"))
    both = _meta(first)["status"] in ("pass", "suppressed") and _meta(second)["status"] in ("pass", "suppressed")
    assert not (both and "✕" not in second.data["text/plain"]), (first.data["text/plain"], second.data["text/plain"])
