"""Sums of a two-valued coding across tables: a 1/2 coding's sums are n + n₂, two populations.

Red team (2026-12-04): the sums of ``v = flag + 1`` by sex outside district C (48 and 52), then
the flag's sums outside C (13 and 17), were both cleared: 48 − 13 = 35 women and 52 − 17 = 35
men outside C, against 37 and 36 in all: C's one man. Linking took the 1/2 sums for a count of
the rows at 2 only. They publish the known rows' count as well; a 0/1 flag's (or 0/k) sums the
flagged rows alone. Every engine, by rows and counted in the engine, must agree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from linking_checks import verdict
from test_engines_redteam import PEOPLE

from sdc_magic.evidence import rows as row_limits

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

FRAME = pd.DataFrame(PEOPLE).assign(coded=lambda d: d["flag"] + 1, fives=lambda d: d["flag"] * 5)


def _pandas(expr: str, where_not_c: bool) -> Callable[[], Any]:
    df = FRAME[FRAME["district"] != "C"] if where_not_c else FRAME
    return lambda: df.groupby("sex")[expr].sum() if expr != "count" else df.groupby("sex").size()


def _polars(expr: str, where_not_c: bool) -> Callable[[], Any]:
    df = pl.from_pandas(FRAME)
    if where_not_c:
        df = df.filter(pl.col("district") != "C")
    return lambda: (df.group_by("sex").len() if expr == "count" else df.group_by("sex").agg(pl.col(expr).sum())
                    ).sort("sex")


def _duckdb(expr: str, where_not_c: bool) -> Callable[[], Any]:
    con = duckdb.connect()
    con.register("src", FRAME)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    where = "where district <> 'C'" if where_not_c else ""
    stat = "count(*)" if expr == "count" else f"sum({expr})"
    return lambda: con.sql(f"select sex, {stat} v from people {where} group by 1 order by 1")


ENGINES = {"pandas": _pandas, "polars": _polars, "duckdb": _duckdb}

#: (tables of the session, whether its last table may be cleared as shown)
SESSIONS = {
    "1/2 sums, then the flag's, outside C": ([("count", False), ("coded", True), ("flag", True)], False),
    "the flag's sums, then 1/2 sums, outside C": ([("count", False), ("flag", True), ("coded", True)], False),
    "0/5 sums outside C beside the flag's everywhere": ([("flag", False), ("fives", True)], False),
    "1/2 sums outside C alone": ([("coded", True)], True),
}


@pytest.mark.parametrize("counted_in_engine", [False, True], ids=["by rows", "in the engine"])
@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("session", list(SESSIONS))
def test_sums_of_a_coding_are_linked_as_every_population_they_add_up(
        session: str, engine: str, counted_in_engine: bool, fresh_session: Any, monkeypatch: Any) -> None:
    if counted_in_engine:
        if engine == "pandas":
            pytest.skip("pandas rows are always read")
        monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    tables, may_clear = SESSIONS[session]
    sess = fresh_session()
    made = [ENGINES[engine](expr, not_c) for expr, not_c in tables]
    statuses = [verdict(sess.publish(make()))[0] for make in made]
    if may_clear:
        assert statuses[-1] == "pass", statuses
    else:  # (one of the tables that reveal C hides it: never all cleared as shown)
        assert statuses[-1] != "pass" or any(s != "pass" for s in statuses[1:-1]), statuses
        assert "review" not in statuses, statuses


@pytest.fixture
def fresh_session(humanitarian_sessions: Any) -> Any:
    return humanitarian_sessions
