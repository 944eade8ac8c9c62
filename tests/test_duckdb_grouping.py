"""Linking's DuckDB count grouped first by the columns its expressions read (``capture/duckdb/grouping``)
gives the count of the direct ``GROUP BY``, row for row and type for type, and is used only when
that is certain and pays."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from linking_checks import grouped_first_changes_nothing, published, rates_people

from sdc_magic.capture import grouping_rule
from sdc_magic.capture.duckdb import grouping
from sdc_magic.capture.sql_lineage import Lineage, columns_read, first_grouping, lineage_value_query
from sdc_magic.evidence import rows as row_limits

BASE = Lineage(base="FROM people AS _sdc_base", condition="TRUE", keys=[])


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    rng = np.random.default_rng(4)
    n = 20_000
    df = pd.DataFrame({
        "district": rng.choice(["A", "B", "C", None], n), "sex": rng.choice(["F", "M"], n),
        "age": pd.array(np.where(rng.random(n) < 0.02, None, rng.integers(0, 100, n)), dtype="Int64"),
        "flag": rng.integers(0, 2, n), "income": rng.lognormal(5, 1, n),
        "day": pd.Timestamp("2026-01-01") + pd.to_timedelta(rng.integers(0, 30, n), unit="D"),
    })
    c = duckdb.connect()
    c.register("src", df)
    c.execute("CREATE TABLE people AS SELECT * FROM src")
    grouping._distinct.clear()
    grouping._rows.clear()
    return c


def _expressions(rng: np.random.Generator, k: int) -> list[str]:
    pool = ["district", "sex", "_sdc_base.sex", "COALESCE((age >= {a}), FALSE)", "COALESCE((age < {a} AND flag = 1), FALSE)",
            "CASE WHEN age IS NULL THEN 'none' WHEN age < {a} THEN 'young' ELSE 'old' END",
            "COALESCE((district = 'B' OR sex = 'F'), FALSE)", "age // 10", "day < DATE '2026-01-{d:02d}'",
            "COALESCE(CAST(flag AS DOUBLE) = CAST('1.0' AS DOUBLE), FALSE)", "TRUE"]
    return [pool[int(rng.integers(0, len(pool)))].format(a=int(rng.integers(0, 100)), d=int(rng.integers(1, 29)))
            for _ in range(k)]


@pytest.mark.parametrize("seed", range(8))
def test_grouped_first_is_the_direct_count(con: duckdb.DuckDBPyConnection, seed: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)  # (any number of combinations)
    rng = np.random.default_rng(seed)
    expressions = _expressions(rng, int(rng.integers(2, 30)))
    values = [["flag"], ["income"], ["flag", "CASE WHEN sex = 'F' THEN income ELSE 0 END"], []][seed % 4]
    first = grouping.first_by(con.sql, BASE, expressions)
    assert first is not None
    direct = con.sql(lineage_value_query(BASE, expressions, values)).df()
    grouped = con.sql(lineage_value_query(BASE, expressions, values, first)).df()
    pd.testing.assert_frame_equal(grouped, direct, check_exact=True)


def test_an_empty_selection_counts_no_group(con: duckdb.DuckDBPyConnection) -> None:
    empty = Lineage(base="FROM (SELECT * FROM people WHERE FALSE) AS _sdc_base", condition="TRUE", keys=[])
    expressions = ["sex", "COALESCE((age > 3), FALSE)"]
    direct = con.sql(lineage_value_query(empty, expressions, ["flag"])).df()
    grouped = con.sql(lineage_value_query(empty, expressions, ["flag"], [first_grouping("sex", True),
                                                                          first_grouping("age", False)])).df()
    assert len(direct) == 0
    pd.testing.assert_frame_equal(grouped, direct)


@pytest.mark.parametrize("expression", [
    "list_transform([age], x -> x + 1)[1] > 3",  # a lambda's variable is no column
    "age > (SELECT avg(age) FROM people)",  # a subquery
    "random() < 0.5",  # volatile
    "other.age > 3",  # another relation's column
    "s.field = 1",  # a struct's field
    "count(*) > 1",  # an aggregate
    "row_number() OVER () > 3",  # a window
    "fsum(age) > 3",  # an aggregate sqlglot does not know
    "COLUMNS('^a') > 3",  # columns by a pattern
    "age >>>> 3 (",  # does not parse
])
def test_what_is_not_a_function_of_the_row_is_never_grouped_first(expression: str) -> None:
    assert columns_read(["sex", expression]) is None


def test_columns_read_names_each_column_once() -> None:
    read = columns_read(["sex", "_sdc_base.SEX", "COALESCE((age >= 3) AND flag = 1, FALSE)"])
    assert read is not None and sorted(read) == ["age", "flag", "sex"]


def test_grouped_first_only_when_it_is_exact_and_pays(con: duckdb.DuckDBPyConnection,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = con.sql
    many = [f"COALESCE((age >= {a}), FALSE)" for a in range(20)] + ["sex", "district"]
    assert sorted(key for _, key in grouping.first_by(run, BASE, many) or []) == [
        '"age"', 'encode("district")', 'encode("sex")']
    assert grouping.first_by(run, BASE, many[:5]) is None  # few expressions: one GROUP BY as fast
    floats = [f"COALESCE((income >= {a}), FALSE)" for a in range(20)]
    assert grouping.first_by(run, BASE, floats) is None  # a float column: -0.0 and 0.0 one group
    lambdas = [f"list_transform([age], x -> x + {a})[1] > 3" for a in range(20)]
    assert grouping.first_by(run, BASE, lambdas) is None
    monkeypatch.setattr(grouping_rule, "MOST_COMBINATIONS", 100)  # age × sex × district has more
    assert grouping.first_by(run, BASE, many) is None
    got = grouping.counted(run, BASE, many, ["flag"])
    pd.testing.assert_frame_equal(got, con.sql(lineage_value_query(BASE, many, ["flag"])).df())


@pytest.mark.parametrize("collated", ["column", "connection", "accents"])
def test_text_under_a_collation_is_never_grouped_first(collated: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under NOCASE 'A' and 'a' are one group, labelled by whichever spelling is met first: a count
    grouped first could label it otherwise than the table did. Such text is not grouped first; were
    it, it is grouped by its bytes and keeps its collation (``first_grouping``): the same counts."""
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    c = duckdb.connect()
    if collated == "connection":
        c.execute("PRAGMA default_collation = 'nocase'")
    kind = {"column": "COLLATE NOCASE", "connection": "", "accents": "COLLATE NOACCENT"}[collated]
    c.execute(f"CREATE TABLE t (s VARCHAR {kind}, k INTEGER)")
    c.execute("INSERT INTO t SELECT CASE i % 3 WHEN 0 THEN 'A' WHEN 1 THEN 'a' ELSE 'é' END, i % 7 FROM range(3000) r(i)")
    c.execute("INSERT INTO t VALUES ('e', 1)")
    base = Lineage(base="FROM t AS _sdc_base", condition="TRUE", keys=[])
    grouping._distinct.clear()
    grouping._rows.clear()
    expressions = ["ascii(s)", "COALESCE(s = 'a', FALSE)", "k"]
    assert grouping.first_by(c.sql, base, expressions) is None
    direct = c.sql(lineage_value_query(base, expressions, ["k"])).df()
    by_bytes = [first_grouping("s", True), first_grouping("k", False)]
    pd.testing.assert_frame_equal(c.sql(lineage_value_query(base, expressions, ["k"], by_bytes)).df(), direct)


def test_text_is_grouped_by_its_bytes_in_a_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team, stop 65: ``s::BLOB`` failed on 'Île' (inside the user's transaction, which it
    aborted: their INSERT lost) and read '\\x41' as 'A'. ``encode`` takes the UTF-8 bytes."""
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT CASE i % 4 WHEN 0 THEN 'Île' WHEN 1 THEN 'A' WHEN 2 THEN '\\x41' "
              "ELSE 'C:\\dir' END AS s, i % 5 AS k FROM range(400) r(i)")
    c.begin()
    c.execute("INSERT INTO t VALUES ('Nord', 1)")
    base = Lineage(base="FROM t AS _sdc_base", condition="TRUE", keys=[])
    grouping._distinct.clear()
    grouping._rows.clear()
    expressions = ["length(s)", "s", "COALESCE(s = 'A', FALSE)", "k"]
    first = grouping.first_by(c.sql, base, expressions)
    assert first is not None
    pd.testing.assert_frame_equal(c.sql(lineage_value_query(base, expressions, ["k"], first)).df(),
                                  c.sql(lineage_value_query(base, expressions, ["k"])).df())
    c.commit()
    assert c.sql("SELECT count(*) FROM t").fetchall() == [(401,)]


@pytest.mark.parametrize("name", ["n", "N", "c0", "_sdc_n"])
def test_a_column_named_like_the_count_s_own_sums(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team, stop 65: a base column ``n`` beside the first grouping's ``count(*) AS n`` was renamed
    by DuckDB and ``sum(n)`` summed the column's values (3 rows counted for 300)."""
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)
    c = duckdb.connect()
    c.execute(f'CREATE TABLE t AS SELECT i % 3 AS "{name}", i % 2 AS k FROM range(300) r(i)')
    base = Lineage(base="FROM t AS _sdc_base", condition="TRUE", keys=[])
    grouping._distinct.clear()
    grouping._rows.clear()
    expressions = [f'COALESCE(("{name}" >= 1), FALSE)', "k"]
    first = grouping.first_by(c.sql, base, expressions)
    direct = c.sql(lineage_value_query(base, expressions, [f'"{name}"'])).df()
    assert int(direct["n"].sum()) == 300
    if name.startswith("_sdc_"):
        assert first is None
    else:
        assert first is not None
        pd.testing.assert_frame_equal(c.sql(lineage_value_query(base, expressions, [f'"{name}"'], first)).df(), direct)


def test_a_table_replaced_by_another_of_its_name_is_described_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns' types are asked at every count: a table recreated with a collated text column
    where an integer was is not grouped first by what was kept of the integer."""
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", 1)
    monkeypatch.setattr(grouping_rule, "MOST_SHARE_OF_ROWS", 100.0)
    c = duckdb.connect()
    c.execute("CREATE TABLE q AS SELECT i % 3 AS s FROM range(300) r(i)")
    base = Lineage(base="FROM q AS _sdc_base", condition="TRUE", keys=[])
    assert grouping.first_by(c.sql, base, ["s"]) is not None
    c.execute("CREATE OR REPLACE TABLE q (s VARCHAR COLLATE NOCASE)")
    c.execute("INSERT INTO q SELECT CASE WHEN i % 2 = 0 THEN 'a' ELSE 'A' END FROM range(300) r(i)")
    assert grouping.first_by(c.sql, base, ["ascii(s)"]) is None


def _rates_session(first_from: int, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    monkeypatch.setattr(grouping_rule, "FIRST_FROM_EXPRESSIONS", first_from)
    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)  # (counted on the connection)
    grouping._distinct.clear()
    grouping._rows.clear()
    con = duckdb.connect()
    con.register("src", rates_people())
    con.execute("CREATE TABLE d AS SELECT * FROM src")
    conditions = [f"WHERE age >= {(i * 13) % 90}" if i % 3 else "" for i in range(8)]
    return published([lambda c=c: con.sql(f"SELECT district, sex, count(*) n, avg(flag) f FROM d {c} "
                                          "GROUP BY ALL ORDER BY ALL") for c in conditions])


def test_a_session_is_checked_the_same_grouped_first_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    grouped = grouped_first_changes_nothing(grouping, lambda first_from: _rates_session(first_from, monkeypatch),
                                            monkeypatch)
    assert {status for status, _ in grouped} >= {"suppressed"}
