"""DuckDB counts of a condition (``count(*) FILTER (WHERE c)``, ``count_if(c)``, ``sum(CASE WHEN c
THEN 1 ELSE 0 END)``) counted inside the engine like a 0/1 flag's sums.

The census of honest sessions of stop 57 (54 sessions, 171 tables): above ``IN_ENGINE_ROWS`` a
table with such a count was not counted in DuckDB (a condition's indicator had no level, so it
was read by rows), and beside tables counted there it was ``review`` ("identified in different
ways"), as was every in-engine table after it. Its indicator is 1 where the condition holds by
construction: the rows at 1 are one more population, counted as a flag's are. The differencing
cases must come out as they do by rows (each compared, one person away: blocked or hidden).
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

EVERYONE = "SELECT sex, count(*) AS n FROM people GROUP BY sex ORDER BY sex"
UNDER_100 = {
    "filter": "SELECT sex, count(*) FILTER (WHERE age < 100) AS f FROM people GROUP BY sex ORDER BY sex",
    "filter beside the count": "SELECT sex, count(*) AS n, count(*) FILTER (WHERE age < 100) AS f FROM people "
                               "GROUP BY sex ORDER BY sex",
    "count_if": "SELECT sex, count_if(age < 100) AS f FROM people GROUP BY sex ORDER BY sex",
    "sum of a case": "SELECT sex, sum(CASE WHEN age < 100 THEN 1 ELSE 0 END) AS f FROM people GROUP BY sex "
                     "ORDER BY sex",
}



def _connection() -> Any:
    return people_in_duckdb(PEOPLE)


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _notes(out: Any) -> str:
    return " ".join(out.metadata["sdc_magic"].get("notes", []))


def _shows_both_counts(first: Any, second: Any) -> bool:
    """Whether both tables are cleared with the women's and men's counts shown (37/36 beside 36/35)."""
    cleared = all(_status(o) in ("pass", "suppressed") for o in (first, second))
    return cleared and "✕" not in second.data["text/plain"] and "✕" not in first.data["text/plain"]


def test_a_conditional_count_is_counted_in_the_engine_beside_plain_counts(sess: Any, monkeypatch: Any) -> None:
    """Over-protection (census): a count, then a count with a FILTER beside it, of everyone."""
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.evidence.in_engine import InEngineRows

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    con = _connection()
    first = sess.publish(con.sql(EVERYONE))
    second = sess.publish(con.sql("SELECT sex, count(*) AS n, count(*) FILTER (WHERE flag = 1) AS flagged "
                                  "FROM people GROUP BY sex ORDER BY sex"))
    assert (_status(first), _status(second)) == ("pass", "pass"), _notes(second)
    entry = sess.registry.entries()[-1]
    assert isinstance(entry.source.rows, InEngineRows)  # (counted there, not read by rows)


@pytest.mark.parametrize("how", list(UNDER_100))
def test_everyone_then_a_count_of_the_people_under_100(sess: Any, linked: str, how: str) -> None:
    con = _connection()
    first = sess.publish(con.sql(EVERYONE))
    second = sess.publish(con.sql(UNDER_100[how]))
    assert _status(first) == "pass"
    assert not _shows_both_counts(first, second), second.data["text/plain"]


@pytest.mark.parametrize("how", ["filter", "count_if"])
def test_the_conditional_count_first(sess: Any, linked: str, how: str) -> None:
    con = _connection()
    first = sess.publish(con.sql(UNDER_100[how]))
    second = sess.publish(con.sql(EVERYONE))
    assert not _shows_both_counts(first, second), (first.data["text/plain"], second.data["text/plain"])
