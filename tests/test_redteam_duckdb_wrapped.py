"""Red team, DuckDB: the same figures as the fixed findings of issue 14, asked other ways.

Data and preset as in ``test_engines_redteam.py``: 73 people, district A 40 (20 F / 20 M),
B 30 (15 / 15), C 3 (2 F / 1 M); persons 5 and 6 (district A) are aged 101 and 102;
humanitarian preset, threshold 5. A plain ``count(*)`` by district shows A 40, B ✕, C ✕
(B hidden so that the total cannot give C).

Each test is one researcher's other route to a figure a fixed finding already gave away:
another arithmetic wrapper, the condition written another way, the reverse order, a CTE.
"""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from test_engines_redteam import PEOPLE, X, _col, _shown, _status  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402


def _text(out) -> str:
    return " ".join(str(v) for v in out.data.values())


# ---------------------------------------------------------------- arithmetic around an aggregate
@pytest.mark.parametrize("expr", ["max(age)*1", "-max(age)", "cast(max(age) as double) + 0.0",
                                  "round(max(age) / 1.0, 0)", "1 * (max(age) - 0)"])
def test_max_through_other_wrappers(sess: Session, df: pd.DataFrame, expr: str) -> None:
    out = sess.publish(duckdb.sql(f"select district, {expr} m from df group by district order by 1"))
    assert _status(out) == "blocked"
    assert set(_col(_shown(out), "m").values()) == {X}  # 102 (or -102) never shown


@pytest.mark.parametrize("expr, a_value", [("100 - count(*)", 60), ("count(*) * 3 - 7", 113),
                                           ("(count(*) + 1) * 2", 82), ("count(*) + (select 100)", 140),
                                           ("count(*) * (2 + 1) - cast(1 as int)", 119)])
def test_affine_counts_keep_secondary_suppression(sess: Session, df: pd.DataFrame, expr: str,
                                                  a_value: int) -> None:
    """B is hidden as in the plain count: the displayed values do not add up, the counts do."""
    shown = _col(_shown(sess.publish(duckdb.sql(
        f"select district, {expr} n from df group by district order by 1"))), "n")
    assert shown["C"] == X and shown["B"] == X
    assert int(shown["A"]) == a_value


def test_affine_count_in_a_cte_then_total(sess: Session, df: pd.DataFrame) -> None:
    """count(*)*2+1 over a CTE, then the grand total: A and the total give B + C only."""
    wrapped = _col(_shown(sess.publish(duckdb.sql(
        "with t as (select * from df) select district, count(*)*2+1 n from t group by district order by 1"))), "n")
    assert wrapped == {"A": 81, "B": X, "C": X}


def test_affine_sum_dominance_insee() -> None:
    """The dominant firm through sum()/1, round(sum()) + 0 and 2*sum() - 1, asked first."""
    import numpy as np

    rng = np.random.default_rng(5)
    firms = pd.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms.loc[0, "turnover"] = 10000.0
    for expr in ("sum(turnover)/1", "round(sum(turnover)) + 0", "2*sum(turnover) - 1"):
        s = Session(rules=preset("insee"))
        s.capture.install()
        try:
            shown = _shown(s.publish(duckdb.sql(
                f"select sector, region, {expr} s from firms group by all order by all")))
            assert shown.loc[("S1", "N"), "s"] == X, expr
            assert shown.loc[("S2", "N"), "s"] != X, expr  # 10 ordinary firms: shown
        finally:
            s.capture.uninstall()


# ---------------------------------------------------------------- scalar SELECT (no GROUP BY)
@pytest.mark.parametrize("sql", [
    "select count(*)*10 n from df where district = 'C'",
    "select 100 + count(*) n from df where district = 'C'",
    "select count(person) + 50 n from df where district = 'C'",
    "select count(*) + 10 n from (select * from df where district = 'C') t",
])
def test_scalar_count_of_few(sess: Session, df: pd.DataFrame, sql: str) -> None:
    out = sess.publish(duckdb.sql(sql))
    assert _shown(out)["n"].iloc[0] == X


def test_scalar_statistics_of_one_person(sess: Session, df: pd.DataFrame) -> None:
    for sql in ("select sum(income)/1 s from df where district = 'C' and sex = 'M'",
                "select avg(income) s from df where district = 'C' and sex = 'M'",
                "select max(age) s from df where district = 'A'"):
        out = sess.publish(duckdb.sql(sql))
        assert _shown(out)["s"].iloc[0] == X, sql


def test_scalar_of_many_is_shown(sess: Session, df: pd.DataFrame) -> None:
    """No over-protection: a count and a sum over district A (40 people) are cleared."""
    out = sess.publish(duckdb.sql("select count(*) n, round(sum(income), 2) s from df where district = 'A'"))
    assert _status(out) == "pass"
    shown = _shown(out)
    assert int(shown["n"].iloc[0]) == 40
    assert float(shown["s"].iloc[0]) == round(float(PEOPLE[PEOPLE.district == "A"].income.sum()), 2)


# ---------------------------------------------------------------- counts with a condition inside
PLAIN = "select sex, count(*) n from df group by sex order by 1"


@pytest.mark.parametrize("expr", [
    "count_if(district <> 'C')",
    "count(case when district <> 'C' then 1 end)",
    "sum(case when district = 'C' then 0 else 1 end)",
    "count(*) filter (where not district = 'C')",
    "sum(case when district <> 'C' then 2 else 0 end) / 2",
])
def test_conditional_count_differencing_other_forms(sess: Session, df: pd.DataFrame, expr: str) -> None:
    a = _col(_shown(sess.publish(duckdb.sql(PLAIN))), "n")
    b = _col(_shown(sess.publish(duckdb.sql(f"select sex, {expr} n from df group by sex order by 1"))), "n")
    assert a == {"F": 37, "M": 36}
    assert b == {"F": X, "M": X}  # 37 - 35 = 2 and 36 - 35 = 1 would be C's people


def test_conditional_count_first_then_plain(sess: Session, df: pd.DataFrame) -> None:
    """The reverse order: the filtered count comes first. It is a count with an attribute
    (outside C) whose complement in each cell is 2 and 1 people: hidden on its own, so the
    plain count published after it gives nothing away."""
    first = sess.publish(duckdb.sql(
        "select sex, count(*) filter (where district <> 'C') n from df group by sex order by 1"))
    assert _col(_shown(first), "n") == {"F": X, "M": X}
    out = sess.publish(duckdb.sql(PLAIN))
    assert _col(_shown(out), "n") == {"F": 37, "M": 36}


def test_conditional_count_beside_the_plain_count(sess: Session, df: pd.DataFrame) -> None:
    """Both in one table: n - m = C's people by sex; the conditional column is hidden."""
    shown = _shown(sess.publish(duckdb.sql(
        "select sex, count(*) n, count(*) filter (where district <> 'C') m from df group by sex order by 1")))
    assert list(shown["n"]) == [37, 36] and list(shown["m"]) == [X, X]


def test_conditional_count_of_many_is_shown(sess: Session, df: pd.DataFrame) -> None:
    """No over-protection: women per district, counted with FILTER, as a WHERE sex = 'F' would."""
    out = sess.publish(duckdb.sql(
        "select district, count(*) filter (where sex = 'F') f from df group by district order by 1"))
    assert _status(out) != "blocked"
    assert _col(_shown(out), "f") == {"A": 20, "B": X, "C": X}


# ---------------------------------------------------------------- one unit's value
@pytest.mark.parametrize("expr", ["max_by(age, age)", "arg_max(age, income)", "last(age order by age)",
                                  "any_value(age order by age desc)", "arg_max(age, age) + 0",
                                  "max(age) filter (where sex = 'M')"])
def test_one_units_value_other_forms(sess: Session, df: pd.DataFrame, expr: str) -> None:
    out = sess.publish(duckdb.sql(f"select district, {expr} m from df group by district order by 1"))
    assert _status(out) == "blocked"
    assert _col(_shown(out), "m")["A"] == X


# ---------------------------------------------------------------- hand-made totals
@pytest.mark.parametrize("sql", [
    "select 'Total' d, count(*) n from df union all "
    "select district, count(*) from df group by district having count(*) >= 5",
    "select district, count(*) n, (select count(*) from df) - count(*) rest from df "
    "group by district having count(*) >= 5",
    "select district, count(*) n from df where district <> 'C' group by district "
    "union all select 'all', sum(1) from df",
    "with t as (select district, count(*) n from df group by district having count(*) >= 5), "
    "tot as (select count(*) total from df) select * from t, tot",
])
def test_hand_made_totals_other_forms(sess: Session, df: pd.DataFrame, sql: str) -> None:
    for obj in (duckdb.sql(sql), duckdb.sql(sql).df(), duckdb.execute(sql).df()):
        out = sess.publish(obj)
        assert _status(out) == "blocked"
        assert "different levels" in _text(out)
        assert "73" not in _text(out) and "33" not in _text(out)
    # no over-protection: two branches at the same level are checked (unverified), not withheld
    out = sess.publish(duckdb.sql(
        "select district, count(*) n from df where sex = 'F' group by district "
        "union all select district, count(*) from df where sex = 'M' group by district"))
    assert _status(out) == "review"
    assert "different levels" not in _text(out)


# ---------------------------------------------------------------- PIVOT with several aggregates
def _income(district: str, sex: str) -> float:
    return round(float(PEOPLE[(PEOPLE.district == district) & (PEOPLE.sex == sex)].income.sum()), 2)


@pytest.mark.parametrize("using", ["sum(income) AS s, count(*) AS n", "count(*) AS n, avg(income) AS m, "
                                   "sum(income) AS s"])
def test_pivot_with_several_aggregates_other_orders(sess: Session, df: pd.DataFrame, using: str) -> None:
    out = sess.publish(duckdb.sql(f"PIVOT df ON sex USING {using} GROUP BY district ORDER BY district"))
    shown = _shown(out)
    assert _status(out) == "suppressed"
    assert (shown.loc["C"] == X).all() and (shown.loc["B"] == X).all()  # C's one man; B protects C
    assert float(shown.loc["A", "M_s"]) == _income("A", "M") and int(shown.loc["A", "F_n"]) == 20


def test_pivot_of_a_count_and_a_maximum(sess: Session, df: pd.DataFrame) -> None:
    """The maximum beside the count is still one person's age: its columns are hidden."""
    shown = _shown(sess.publish(duckdb.sql(
        "PIVOT df ON sex USING count(*) AS n, max(age) AS m GROUP BY district ORDER BY district")))
    assert list(shown["F_m"]) == [X, X, X] and list(shown["M_m"]) == [X, X, X]
    assert int(shown.loc["A", "M_n"]) == 20


def test_pivot_of_unnamed_aggregates_is_withheld(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("PIVOT df ON sex USING count(*), sum(income) GROUP BY district"))
    assert _status(out) == "blocked" and "several USING aggregates" in _text(out)
    assert f"{_income('C', 'M'):.2f}" not in _text(out)


# ---------------------------------------------------------------- scalar totals beside earlier tables
@pytest.mark.parametrize("total", ["select count(*) n from df", "select count(*) + 0 n from df",
                                   "select count(person) n from df where true"])
def test_scalar_total_after_having_is_caught(sess: Session, df: pd.DataFrame, total: str) -> None:
    """HAVING shows A 40 and B 30; a scalar total (one group, linked) would give C = 73 - 70."""
    a = _col(_shown(sess.publish(duckdb.sql(
        "select district, count(*) n from df group by district having count(*) >= 5 order by 1"))), "n")
    assert a == {"A": 40, "B": 30}
    assert _shown(sess.publish(duckdb.sql(total)))["n"].iloc[0] == X


# ---------------------------------------------------------------- streamed results (DuckDB 2.x .arrow())
def test_arrow_reader_of_sums_and_after_a_count(sess: Session, df: pd.DataFrame) -> None:
    sums = _shown(sess.publish(duckdb.sql(
        "select district, sum(income) s from df group by district order by 1").arrow()))
    assert list(sums["s"])[1:] == [X, X]
    assert round(float(sums["s"].iloc[0]), 2) == round(float(PEOPLE[PEOPLE.district == "A"].income.sum()), 2)
    sess.publish(duckdb.sql(PLAIN))
    out = sess.publish(duckdb.sql(
        "select sex, count(*) n from df where district <> 'C' group by sex order by 1").arrow())
    assert _status(out) == "blocked" and set(_col(_shown(out), "n").values()) == {X}


# ---------------------------------------------------------------- the relational API
def test_relational_aggregate_shapes(sess: Session, df: pd.DataFrame) -> None:
    rel = duckdb.from_df(df)
    counts = _col(_shown(sess.publish(rel.aggregate("district, count(*) n"))), "n")  # groups implied
    assert counts == {"A": 40, "B": X, "C": X}
    sums = _shown(sess.publish(rel.aggregate("district, sum(income) s", "district").df()))
    assert _col(sums, "s")["C"] == X and _col(sums, "s")["A"] != X
    few = sess.publish(rel.filter("district = 'C'").aggregate("count(*) * 2 + 10 n"))
    assert _shown(few)["n"].iloc[0] == X  # 16 would be C's 3 people


def test_relational_conditional_count_differencing(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql(PLAIN))
    out = sess.publish(duckdb.from_df(df).aggregate("sex, count(*) filter (where district <> 'C') n", "sex"))
    assert set(_col(_shown(out), "n").values()) == {X}


# ---------------------------------------------------------------- fail closed
def test_planning_failure_is_withheld(sess: Session, df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """If preparing the evidence fails, the result is withheld: an unverified check would
    show 81, 61 and 7 (7 = 2·3 + 1 is not a small number)."""
    from sdc_magic.capture.duckdb import DuckDBCapture

    def broken(*_a, **_k):
        raise RuntimeError("evidence could not be bound")

    monkeypatch.setattr(DuckDBCapture, "_prepare", broken)
    q = "select district, count(*)*2+1 n from df group by district order by 1"
    for obj in (duckdb.sql(q), duckdb.sql(q).df(), duckdb.execute(q).df()):
        out = sess.publish(obj)
        assert _status(out) == "blocked" and out.checked is None
        assert not any(v in _text(out) for v in ("81", "61"))


# ---------------------------------------------------------------- several aggregates combined
@pytest.mark.parametrize("expr", ["avg(turnover)*count(*)", "sum(turnover)/count(*)", "coalesce(sum(turnover), 0)",
                                  "sum(case when firm >= 0 then turnover else 0 end)"])
def test_dominant_firm_through_combined_aggregates(expr: str) -> None:
    """avg × count is the sum, sum / count the mean: the dominant firm's cell is hidden."""
    import numpy as np

    rng = np.random.default_rng(5)
    firms = pd.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms.loc[0, "turnover"] = 10000.0
    s = Session(rules=preset("insee"))
    s.capture.install()
    try:
        out = s.publish(duckdb.sql(f"select sector, region, {expr} s from firms group by all order by all"))
        shown = _shown(out)
        assert shown.loc[("S1", "N"), "s"] == X
        assert [shown.loc[k, "s"] != X for k in (("S1", "S"), ("S2", "N"), ("S2", "S"))] == [True] * 3
    finally:
        s.capture.uninstall()


def test_sum_minus_min_is_one_persons_value(sess: Session, df: pd.DataFrame) -> None:
    """sum(age) - min(age) beside the sum gives the youngest's age: planned as the minimum."""
    out = sess.publish(duckdb.sql("select district, sum(age) - min(age) m from df group by district order by 1"))
    assert _status(out) == "blocked" and set(_col(_shown(out), "m").values()) == {X}


# (was a leak at 'pass'; fixed: the populations one table publishes side by side are differenced
# against each other, linking.Linker.within_table)
def test_two_nested_conditional_counts_side_by_side(sess: Session, df: pd.DataFrame) -> None:
    shown = _shown(sess.publish(duckdb.sql(
        "select sex, count(*) filter (where age < 50) a, count(*) filter (where age < 50 or district = 'C') b "
        "from df group by sex order by 1")))
    got = None if X in (shown.loc["M", "a"], shown.loc["M", "b"]) else int(shown.loc["M", "b"]) - int(shown.loc["M", "a"])
    assert got != 1
