"""Above the row limit linking reads nothing: such tables are never called cleared beside others.

Linking reads the rows behind a table up to ``evidence.rows.MAX_LINKED_ROWS``. Above it the
table was compared with nothing and cleared: counts by sex of everyone, then of everyone
aged under 100 (two people of 101 and 102 left out) were both ``pass`` on 6,000,000 rows, in
every engine, and the difference gave the two people away. The limit is lowered here (the
data are the red team's 73 people), as the tests of each engine's row limit do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

from sdc_magic.evidence import rows as row_limits
from sdc_magic.linking import persistence


@pytest.fixture
def fresh(humanitarian_sessions: Any) -> Any:
    return humanitarian_sessions


def _meta(out: Any) -> tuple[str, str]:
    meta = out.metadata["sdc_magic"]
    return meta["status"], " ".join(meta.get("notes", []))


def _everyone_then_under_100(engine: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Two tables whose difference is the two people aged over 100 (a man and a woman)."""
    if engine == "pandas":
        frame = PEOPLE.copy()
        return (lambda: frame.groupby("sex").size(),
                lambda: frame[frame.age < 100].groupby("sex").size())
    if engine == "polars":
        frame = pl.from_pandas(PEOPLE)
        return (lambda: frame.group_by("sex").len().sort("sex"),
                lambda: frame.filter(pl.col("age") < 100).group_by("sex").len().sort("sex"))
    con = duckdb.connect()
    con.register("src", PEOPLE)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    return (lambda: con.sql("SELECT sex, count(*) AS n FROM people GROUP BY sex ORDER BY sex"),
            lambda: con.sql("SELECT sex, count(*) AS n FROM people WHERE age < 100 GROUP BY sex "
                            "ORDER BY sex"))


@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
def test_a_difference_of_two_unlinked_tables_is_review_not_pass(engine: str, fresh: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 50)  # 73 people: more than linking reads
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 50)
    everyone, under_100 = _everyone_then_under_100(engine)
    sess = fresh()
    status, notes = _meta(sess.publish(everyone()))
    assert status == "pass"  # the first output: nothing to compare it with yet
    assert row_limits.NOT_LINKED in notes  # but it says it is not linked
    status, notes = _meta(sess.publish(under_100()))
    assert status == "review", notes
    assert "not compared with earlier outputs" in notes and "out-1" in notes


@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
def test_under_the_limit_the_same_tables_are_compared_and_cleared(engine: str, fresh: Any) -> None:
    """Over-protection check: the new rule changes nothing where linking reads the rows."""
    everyone, under_100 = _everyone_then_under_100(engine)
    sess = fresh()
    assert _meta(sess.publish(everyone()))[0] == "pass"
    status, notes = _meta(sess.publish(under_100()))
    assert status == "blocked", notes  # compared: both cells differ by one person (blocked, not review)
    assert row_limits.NOT_LINKED not in notes


def test_a_linked_table_after_an_unlinked_one_is_review(fresh: Any, monkeypatch: Any) -> None:
    """The big table cannot be compared with anything that comes later either."""
    big = PEOPLE.copy()
    small = PEOPLE[PEOPLE.age < 100].reset_index(drop=True)
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 72)  # 73 rows: not linked; 71: linked
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 72)
    sess = fresh()
    assert _meta(sess.publish(big.groupby("sex").size()))[0] == "pass"
    status, notes = _meta(sess.publish(small.groupby("sex").size()))
    assert status == "review", notes
    assert "out-1" in notes and "cannot be compared with later tables" in notes
    # and every later one, related to the linked table or not
    status, notes = _meta(sess.publish(small[small.sex == "F"].groupby("sex").size()))
    assert status == "review", notes


def test_an_unlinked_table_after_a_linked_one_is_review(fresh: Any, monkeypatch: Any) -> None:
    small = PEOPLE[PEOPLE.age < 100].reset_index(drop=True)
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 72)
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 72)
    sess = fresh()
    assert _meta(sess.publish(small.groupby("sex").size()))[0] == "pass"
    status, notes = _meta(sess.publish(PEOPLE.groupby("sex").size()))
    assert status == "review", notes


def test_a_restarted_kernel_knows_of_the_unlinked_outputs(fresh: Any, monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 72)
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 72)
    first = fresh(tmp_path)
    assert _meta(first.publish(PEOPLE.groupby("sex").size()))[0] == "pass"
    after = fresh(tmp_path)  # a new kernel, the same ledger folder
    small = PEOPLE[PEOPLE.age < 100].reset_index(drop=True)
    status, notes = _meta(after.publish(small.groupby("sex").size()))
    assert status == "review", notes
    assert "cannot be compared with later tables" in notes


def test_outputs_of_rows_too_many_to_save_are_known_after_a_restart(fresh: Any, monkeypatch: Any,
                                                                  tmp_path: Path) -> None:
    """A universe above ``persistence.MAX_SAVED_ROWS`` is not saved: a later kernel cannot
    compare with its outputs, and says so, instead of clearing a difference with them."""
    monkeypatch.setattr(persistence, "MAX_SAVED_ROWS", 50)
    first = fresh(tmp_path)
    assert _meta(first.publish(PEOPLE.groupby("sex").size()))[0] == "pass"
    after = fresh(tmp_path)
    frame = pd.DataFrame(PEOPLE[PEOPLE.age < 100].to_numpy(), columns=PEOPLE.columns)
    status, notes = _meta(after.publish(frame.groupby("sex").size()))
    assert status == "review", notes


def test_a_table_whose_rows_could_not_be_read_is_not_cleared_beside_others(fresh: Any, monkeypatch: Any) -> None:
    """Not only size: an engine that could not read the rows says so, and linking reads the note."""
    from sdc_magic.capture.polars import evidence as polars_evidence

    frame = pl.from_pandas(PEOPLE)
    sess = fresh()
    assert _meta(sess.publish(frame.group_by("sex").len().sort("sex")))[0] == "pass"
    monkeypatch.setattr(polars_evidence, "_linking_rows", lambda *a, **k: None)
    status, notes = _meta(sess.publish(frame.filter(pl.col("age") < 100).group_by("sex").len().sort("sex")))
    assert status == "review", notes
    assert row_limits.unreadable_rows_note() in notes


@pytest.mark.parametrize("engine", ["pandas", "polars"])
def test_pandas_rows_are_linked_beyond_what_an_engine_hands_over(engine: str, fresh: Any, monkeypatch: Any) -> None:
    """Two limits (stop 55): a pandas frame is linked up to ``MAX_LINKED_ROWS`` (its rows are in
    Python already), an engine's rows come to Python for linking up to ``MAX_FETCHED_ROWS`` only.
    With 73 people between the two, pandas' difference of two tables is caught (``blocked``); the
    polars table read by its rows (not inside polars: ``IN_ENGINE_ROWS`` above the data) is not
    linked, says so with the engine's limit, and the next table is ``review``."""
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 1000)
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 50)
    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10_000)
    everyone, under_100 = _everyone_then_under_100(engine)
    sess = fresh()
    status, notes = _meta(sess.publish(everyone()))
    assert status == "pass"
    second, notes2 = _meta(sess.publish(under_100()))
    if engine == "pandas":
        assert row_limits.NOT_LINKED not in notes and second == "blocked", notes2
    else:
        assert "not linked with other tables (more than 50 source rows)" in notes, notes
        assert second == "review", notes2


def test_duckdb_hands_over_no_more_rows_than_other_engines(fresh: Any, monkeypatch: Any) -> None:
    """Red team (stop 55): DuckDB's rows path read up to ``MAX_LINKED_ROWS`` (20M) where polars
    and Spark stop at ``MAX_FETCHED_ROWS`` (5M): with 73 people between the two, it is not linked
    either, says so, and the next table is ``review``."""
    monkeypatch.setattr(row_limits, "MAX_LINKED_ROWS", 1000)
    monkeypatch.setattr(row_limits, "MAX_FETCHED_ROWS", 50)
    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10_000)
    everyone, under_100 = _everyone_then_under_100("duckdb")
    sess = fresh()
    status, notes = _meta(sess.publish(everyone()))
    assert status == "pass" and "not linked with other tables (more than 50 source rows)" in notes, notes
    assert _meta(sess.publish(under_100()))[0] == "review"
