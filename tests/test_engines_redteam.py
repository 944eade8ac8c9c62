"""Red team: researcher-style attempts to get a small cell (1-4 people) or one person's value
out of polars or DuckDB past the checks.

Data: 73 people, district A 40 (20 F / 20 M), B 30 (15 / 15), C 3 (2 F / 1 M); persons 5 and 6
(district A) are aged 101 and 102, everyone else 18-79. Humanitarian preset: threshold 5.

A test marked ``xfail(strict=True, reason="leak: ...")`` shows a leak: a status other than
``blocked`` whose shown values give a small cell exactly (the arithmetic is in the test).
The other tests are attacks that were stopped, with the cells we expect hidden.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402
from sdc_magic.outputs.render import protected_frame  # noqa: E402

X = "✕"


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    district = np.repeat(["A", "B", "C"], [40, 30, 3])
    sex = np.array(["F", "M"] * 35 + ["F", "F", "M"])
    age = rng.integers(18, 80, 73)
    age[5], age[6] = 101, 102
    return pd.DataFrame({"person": np.arange(73), "household": np.arange(73) // 2, "district": district,
                         "sex": sex, "age": age.astype(np.int64), "flag": rng.integers(0, 2, 73),
                         "income": np.round(rng.uniform(10, 20, 73), 2)})


PEOPLE = _people()


def _shown(out) -> pd.DataFrame:
    """What the user sees (hidden cells as ✕), as the tests of the engines publish it."""
    assert out.checked is not None
    return protected_frame(out.checked)


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def _col(frame: pd.DataFrame, name: str) -> dict:
    """Column ``name`` of a shown frame keyed by its first label (index or first column)."""
    if name in frame.columns and frame.index.nlevels == 1 and not isinstance(frame.index, pd.RangeIndex):
        return dict(zip(frame.index, frame[name], strict=True))
    first = frame.columns[0]
    return dict(zip(frame[first], frame[name], strict=True))


def _num(v) -> float | None:
    return None if v == X else float(v)


# ====================================================================== LEAKS
# ---- linking across engines: the same people, a filter differing by C's 3 people
# (was a leak; fixed: small sources link by their values: the DuckDB count is blocked, 2 differencing)
def test_leak_polars_then_duckdb_filter_differencing(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    first = sess.publish(p.group_by("sex").len().sort("sex"))
    second = sess.publish(duckdb.sql("select sex, count(*) n from df where district <> 'C' group by sex order by 1"))
    a, b = _col(_shown(first), "len"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered is None
    assert _status(second) == "blocked" and set(b.values()) == {X}


# (was a leak; fixed: small sources link by their values, flag sums by the flagged rows)
def test_leak_duckdb_then_polars_filter_differencing(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    first = sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    second = sess.publish(p.filter(pl.col("district") != "C").group_by("sex").len().sort("sex"))
    a, b = _col(_shown(first), "n"), _col(_shown(second), "len")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# (was a leak; fixed: small sources link by their values, flag sums by the flagged rows)
def test_leak_pandas_then_duckdb_filter_differencing(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(df.groupby("sex").size().rename("n").to_frame())
    second = sess.publish(duckdb.sql("select sex, count(*) n from df where district <> 'C' group by sex order by 1"))
    a, b = _col(_shown(first), "n"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# (was a leak; fixed: small sources link by their values, flag sums by the flagged rows)
def test_leak_duckdb_over_the_polars_frame(sess: Session, p: pl.DataFrame) -> None:
    first = sess.publish(p.group_by("sex").len().sort("sex"))
    second = sess.publish(duckdb.sql("select sex, count(*) n from p where district <> 'C' group by sex order by 1"))
    a, b = _col(_shown(first), "len"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# ---- differencing with the filter inside the aggregate (conditional count, same engine)
# (was a leak; fixed: a FILTER count is a count of the rows meeting the filter, linked as those rows:
# blocked for differencing, as the same filter in WHERE)
def test_leak_duckdb_count_filter_clause_differencing(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    second = sess.publish(duckdb.sql(
        "select sex, count(*) filter (where district <> 'C') n from df group by sex order by 1"))
    a, b = _col(_shown(first), "n"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# (was a leak; fixed: sum(CASE WHEN c THEN 1 ELSE 0 END) is a count of the rows meeting c, linked as
# those rows: blocked for differencing, as the same filter in WHERE)
def test_leak_duckdb_sum_case_flag_differencing(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    second = sess.publish(duckdb.sql(
        "select sex, sum(case when district <> 'C' then 1 else 0 end) n from df group by sex order by 1"))
    a, b = _col(_shown(first), "n"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(_num(b[k])) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# (was a leak; fixed: a polars sum of a condition is a count of the rows meeting it, linked as those rows:
# blocked, for differencing and because 2 and 1 people lack the attribute, as the same filter in WHERE)
def test_leak_polars_boolean_sum_differencing(sess: Session, p: pl.DataFrame) -> None:
    first = sess.publish(p.group_by("sex").len().sort("sex"))
    second = sess.publish(p.group_by("sex").agg((pl.col("district") != "C").sum().alias("n")).sort("sex"))
    a, b = _col(_shown(first), "len"), _col(_shown(second), "n")
    recovered = {k: int(a[k]) - int(b[k]) for k in ("F", "M")} if X not in (*a.values(), *b.values()) else None
    assert recovered != {"F": 2, "M": 1}


# ---- polars describe is not linked: one person removed, mean*count gives their age
# (was a leak; fixed: polars describe() is linked like a count of its rows: the second, one person
# fewer, is blocked for differencing)
def test_leak_polars_describe_mean_differencing(sess: Session, p: pl.DataFrame) -> None:
    first = sess.publish(p.select("age").describe())
    second = sess.publish(p.filter(pl.col("person") != 72).select("age").describe())
    assert _status(first) != "blocked"
    a, b = _shown(first), _shown(second)
    stats_a = dict(zip(a.index, a["age"], strict=True))
    stats_b = dict(zip(b.index, b["age"], strict=True))
    got = None
    if X not in (stats_a["count"], stats_a["mean"], stats_b["count"], stats_b["mean"]):
        got = round(float(stats_a["count"]) * float(stats_a["mean"]) - float(stats_b["count"]) * float(stats_b["mean"]))
    assert got != int(PEOPLE.age[72])


# ---- one person's value through an arithmetic wrapper (max is blocked, max + 0 is not)
# (was a leak; fixed: arithmetic with constants around an aggregate is planned as the aggregate)
def test_leak_duckdb_max_plus_zero(sess: Session, df: pd.DataFrame) -> None:
    plain = sess.publish(duckdb.sql("select district, max(age) m from df group by district order by 1"))
    assert _status(plain) == "blocked"
    out = sess.publish(duckdb.sql("select district, max(age)+0 m from df group by district order by 1"))
    assert _status(out) == "blocked" or _col(_shown(out), "m")["A"] == X


# (was a leak; fixed: arg_max / max_by / first(x ORDER BY ...) are planned as one unit's value)
def test_leak_duckdb_argmax_first(sess: Session, df: pd.DataFrame) -> None:
    a = sess.publish(duckdb.sql("select district, arg_max(age, age) m from df group by district order by 1"))
    b = sess.publish(duckdb.sql("select district, first(age order by age desc) m from df group by district order by 1"))
    for out in (a, b):
        assert _status(out) == "blocked" or _col(_shown(out), "m")["A"] == X


# (was a leak; fixed: polars expressions are planned by what they reveal: max()+0 and sort().last() are max)
def test_leak_polars_max_wrapped(sess: Session, p: pl.DataFrame) -> None:
    plain = sess.publish(p.group_by("district").agg(pl.col("age").max()).sort("district"))
    assert _status(plain) == "blocked"
    a = sess.publish(p.group_by("district").agg((pl.col("age").max() + 0).alias("m")).sort("district"))
    b = sess.publish(p.group_by("district").agg(pl.col("age").sort().last().alias("m")).sort("district"))
    for out in (a, b):
        assert _status(out) == "blocked" or _col(_shown(out), "m")["A"] == X


# ---- scalar (no GROUP BY) arithmetic on a count
# (was a leak; fixed: a scalar SELECT is planned as one group, count(*)+100 as the count)
def test_leak_duckdb_scalar_count_plus_constant(sess: Session, df: pd.DataFrame) -> None:
    plain = sess.publish(duckdb.sql("select count(*) n from df where district = 'C'"))
    assert _shown(plain)["n"].iloc[0] == X
    out = sess.publish(duckdb.sql("select count(*)+100 n from df where district = 'C'"))
    assert _status(out) == "blocked" or _shown(out)["n"].iloc[0] == X


# ---- secondary suppression lost when the count is wrapped: B is shown, C = total - A - B
# (was a leak; fixed: a wrapped len() is checked and protected with the inner counts: B is secondary)
def test_leak_polars_wrapped_len_then_describe_count(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n")).sort("district"))
    wrapped = _col(_shown(out), "n")
    assert wrapped["C"] == X
    desc = _shown(sess.publish(p.select("age").describe()))
    count = dict(zip(desc.index, desc["age"], strict=True))["count"]
    got = None
    if X not in (wrapped["A"], wrapped["B"], count):
        got = int(float(count)) - (int(wrapped["A"]) - 1) // 2 - (int(wrapped["B"]) - 1) // 2
    assert got != 3


# (was a leak; fixed: count(*)*2+1 is planned as the count; the protection model gets the counts)
def test_leak_duckdb_wrapped_count_then_polars_describe(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select district, count(*)*2+1 n from df group by district order by 1"))
    wrapped = _col(_shown(out), "n")
    assert wrapped["C"] == X
    desc = _shown(sess.publish(p.select("age").describe()))
    count = dict(zip(desc.index, desc["age"], strict=True))["count"]
    got = None
    if X not in (wrapped["A"], wrapped["B"], count):
        got = int(float(count)) - (int(wrapped["A"]) - 1) // 2 - (int(wrapped["B"]) - 1) // 2
    assert got != 3


# ---- a PIVOT with two USING aggregates is 'unverified': the income sums of C are shown
# (was a leak; fixed: each USING aggregate is a measure of the pivot, checked by its own rule)
def test_leak_pivot_two_using_shows_one_persons_income(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("PIVOT df ON sex USING count(*) AS n, sum(income) AS s GROUP BY district "
                                  "ORDER BY district"))
    shown = _shown(out)
    cell = _col(shown, "M_s")["C"]
    one_man = float(PEOPLE[(PEOPLE.district == "C") & (PEOPLE.sex == "M")].income.iloc[0])
    assert _status(out) == "blocked" or cell == X or abs(float(str(cell).rstrip(" ?")) - one_man) > 0.005


# ---- a sum of a 0/1 flag is a count of the flagged, but its rows for linking are the whole group
# (was a leak; fixed: small sources link by their values, flag sums by the flagged rows)
def test_leak_duckdb_flag_sum_then_filtered_count(sess: Session, df: pd.DataFrame) -> None:
    a = _col(_shown(sess.publish(duckdb.sql("select sex, sum(flag) n from df group by sex order by 1"))), "n")
    b = _col(_shown(sess.publish(duckdb.sql(
        "select sex, count(*) n from df where flag = 1 and district <> 'C' group by sex order by 1"))), "n")
    got = None if X in (a["F"], b["F"]) else int(float(a["F"])) - int(b["F"])
    assert got != int(((PEOPLE.district == "C") & (PEOPLE.sex == "F") & (PEOPLE.flag == 1)).sum())


# (was a leak; fixed: small sources link by their values, flag sums by the flagged rows)
def test_leak_polars_flagged_count_then_flag_sum(sess: Session, p: pl.DataFrame) -> None:
    a = _col(_shown(sess.publish(p.filter(pl.col("flag") == 1).group_by("sex").len().sort("sex"))), "len")
    b = _col(_shown(sess.publish(p.filter(pl.col("district") != "C").group_by("sex")
                                 .agg(pl.col("flag").sum()).sort("sex"))), "flag")
    got = None if X in (a["F"], b["F"]) else int(a["F"]) - int(b["F"])
    assert got != 1


# (was a leak: 'pass'; fixed: a mean of an indicator also publishes the flagged rows, linked
# as a second population of the same output)
def test_leak_duckdb_flag_mean_then_filtered_count(sess: Session, df: pd.DataFrame) -> None:
    first = _shown(sess.publish(duckdb.sql("select sex, count(*) n, avg(flag) m from df group by sex order by 1")))
    b = _col(_shown(sess.publish(duckdb.sql(
        "select sex, count(*) n from df where flag = 1 and district <> 'C' group by sex order by 1"))), "n")
    n, m = first.loc["F", "n"], first.loc["F", "m"]
    got = None if X in (n, m, b["F"]) else round(float(n) * float(m)) - int(b["F"])
    assert got != 1


def _flagged_outside_c(df: pd.DataFrame) -> dict:
    """Flagged people per sex outside district C (the differencing partner)."""
    return df[(df.flag == 1) & (df.district != "C")].groupby("sex").size().to_dict()


@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
@pytest.mark.parametrize("order", ["mean first", "count first"])
def test_flag_mean_and_flagged_count_in_either_order(sess: Session, df: pd.DataFrame, p: pl.DataFrame,
                                                     engine: str, order: str) -> None:
    """The same attack in three engines and both orders: count with mean(flag) (or the mean
    alone, the count being published by another table) against the flagged count outside C."""
    def mean_table():
        if engine == "pandas":
            return df.groupby("sex").agg(n=("person", "size"), m=("flag", "mean"))
        if engine == "polars":
            return p.group_by("sex").agg(pl.len().alias("n"), pl.col("flag").mean().alias("m")).sort("sex")
        return duckdb.sql("select sex, count(*) n, avg(flag) m from df group by sex order by 1")

    def count_table():
        if engine == "pandas":
            return df[(df.flag == 1) & (df.district != "C")].groupby("sex").size().rename("n").to_frame()
        if engine == "polars":
            return p.filter((pl.col("flag") == 1) & (pl.col("district") != "C")).group_by("sex").len(
                name="n").sort("sex")
        return duckdb.sql("select sex, count(*) n from df where flag = 1 and district <> 'C' group by sex order by 1")

    outs = [sess.publish(mean_table()), sess.publish(count_table())]
    if order == "count first":
        sess.populations.clear()
        outs = [sess.publish(count_table()), sess.publish(mean_table())]
        mean_out, count_out = outs[1], outs[0]
    else:
        mean_out, count_out = outs
    a, b = _shown(mean_out), _col(_shown(count_out), "n")
    a = a.set_index(a.columns[0]) if "sex" in a.columns else a
    outside = _flagged_outside_c(df)
    flagged = df[df.flag == 1].groupby("sex").size().to_dict()
    for sex in ("F", "M"):
        n, m = a.loc[sex, "n"], a.loc[sex, "m"]
        if X in (n, m, b[sex]):
            continue
        assert int(b[sex]) == outside[sex] and round(float(n) * float(m)) == flagged[sex]
        assert flagged[sex] - outside[sex] == 0 or flagged[sex] - outside[sex] >= 5, (sex, flagged, outside)


# ---- a filter down to a few people, then a statistic without GROUP BY: 'unverified', shown
# (was a leak; fixed: polars filter-then-select statistics are planned; a DuckDB scalar SELECT is one group)
def test_leak_filter_then_scalar_statistic(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    outs = [sess.publish(p.filter(pl.col("district") == "C").select(pl.col("age").max())),
            sess.publish(p.filter(pl.col("district") == "C").select("age").mean()),
            sess.publish(duckdb.sql("select sum(income) s from df where district = 'C' and sex = 'M'"))]
    assert all(_status(o) == "blocked" or _shown(o).iloc[0, 0] == X for o in outs)


# ---- a single firm's dominant value through an arithmetic wrapper
# (was a leak; fixed: sum(turnover)*1 is planned as the sum: dominance applies)
def test_leak_dominant_firm_through_times_one() -> None:
    rng = np.random.default_rng(5)
    firms = pd.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms.loc[0, "turnover"] = 10000.0
    s = Session(rules=preset("insee"))
    s.capture.install()
    try:
        # asked first (or in a fresh session): when the plain sum was published before, linking hides S1/N
        out = s.publish(duckdb.sql("select sector, region, sum(turnover)*1 s from firms group by all order by all"))
        assert _status(out) == "blocked" or _shown(out).loc[("S1", "N"), "s"] == X
    finally:
        s.capture.uninstall()


# ---- HAVING drops the small groups but the ROLLUP / CUBE margins still count them
# (were leaks: "pass" with Total 73 - A 40 - B 30 = 3; now withheld with the reason)
@pytest.mark.parametrize("grouping", ["cube", "rollup"])
def test_having_with_totals_is_withheld(sess: Session, df: pd.DataFrame, grouping: str) -> None:
    q = f"select district, sex, count(*) n from df group by {grouping}(district, sex) having count(*) >= 5"
    for obj in (duckdb.sql(q), duckdb.sql(q).df(), duckdb.connect().execute(q).df()):
        out = sess.publish(obj)
        assert _status(out) == "blocked"
        text = " ".join(str(v) for v in out.data.values())
        assert "HAVING drops groups" in text
        assert not re.search(r"\b(73|40|30|37|36)\b", text)  # no count of the table is shown


def test_having_then_grand_total_is_caught(sess: Session, df: pd.DataFrame) -> None:
    """(Was a leak: count by district HAVING >= 5, then the grand total: 73 - 40 - 30 = 3.)"""
    a = _col(_shown(sess.publish(duckdb.sql(
        "select district, count(*) n from df group by district having count(*) >= 5 order by 1"))), "n")
    tot = _col(_shown(sess.publish(duckdb.sql("select 'all' g, count(*) n from df group by g"))), "n")
    got = None if X in (a.get("A", X), a.get("B", X), tot["all"]) else int(tot["all"]) - int(a["A"]) - int(a["B"])
    assert got is None and tot["all"] == X


# ====================================================================== OVER-PROTECTION
# (was over-protection; fixed: sort/select/head of a captured polars result keeps its evidence)
def test_overprotection_polars_pivot_then_sort(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.pivot(on="sex", index="district", values="person", aggregate_function="len")
                       .sort("district"))
    assert out.checked.kind == "table"


# (was over-protection; fixed: the evidence runs before the user's streamed fetch, the reader keeps it)
def test_overprotection_duckdb_arrow_reader(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select district, count(*) n from df group by district order by 1").arrow())
    assert out.checked is not None and _status(out) == "suppressed"


# (was over-protection: blocked; fixed: a distinct count of a categorical column counts categories,
# judged by the group's units only)
def test_overprotection_count_distinct_category(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select district, count(distinct sex) m from df group by district order by 1"))
    assert _status(out) != "blocked"
    assert _col(_shown(out), "m") == {"A": 2, "B": 2, "C": X}  # C: a group of 3 people


# (was over-protection; fixed: rel.aggregate(...) is captured as its SQL over the source relation)
def test_overprotection_relational_aggregate(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.from_df(df).aggregate("district, count(*) n", "district"))
    assert out.checked.kind == "table"


# ====================================================================== STOPPED
def test_stopped_duckdb_filter_differencing(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(duckdb.sql("select sex, count(*) n from df where district <> 'C' group by sex order by 1"))
    assert _status(out) == "blocked"
    assert set(_col(_shown(out), "n").values()) == {X}


def test_stopped_duckdb_one_person_removed(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(duckdb.sql("select sex, count(*) n from df where person <> 72 group by sex order by 1"))
    assert _col(_shown(out), "n")["M"] == X


def test_stopped_polars_filter_differencing(sess: Session, p: pl.DataFrame) -> None:
    sess.publish(p.group_by("sex").len().sort("sex"))
    out = sess.publish(p.filter(pl.col("district") != "C").group_by("sex").len().sort("sex"))
    assert set(_col(_shown(out), "len").values()) == {X}


def test_stopped_execute_df_differencing(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.execute("select sex, count(*) n from df group by sex order by 1").df())
    out = sess.publish(duckdb.execute(
        "select sex, count(*) n from df where district <> 'C' group by sex order by 1").df())
    assert set(_col(_shown(out), "n").values()) == {X}


def test_stopped_relation_then_pl_fetch_differencing(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(duckdb.sql(
        "select sex, count(*) n from df where district <> 'C' group by sex order by 1").pl())
    assert set(_col(_shown(out), "n").values()) == {X}


@pytest.mark.parametrize("stat", ["income", "age"])
def test_stopped_sum_and_mean_one_person_removed(sess: Session, p: pl.DataFrame, df: pd.DataFrame,
                                                 stat: str) -> None:
    if stat == "income":
        sess.publish(duckdb.sql("select sex, sum(income) s from df group by sex order by 1"))
        out = sess.publish(duckdb.sql("select sex, sum(income) s from df where person <> 72 group by sex order by 1"))
        assert _col(_shown(out), "s")["M"] == X
    else:
        sess.publish(p.group_by("sex").agg(pl.col("age").mean(), pl.len()).sort("sex"))
        out = sess.publish(p.filter(pl.col("person") != 72).group_by("sex").agg(pl.col("age").mean(), pl.len())
                           .sort("sex"))
        shown = _shown(out)
        assert _col(shown, "age")["M"] == X and _col(shown, "len")["M"] == X


def test_stopped_rollup_margins_then_subquery(sess: Session, df: pd.DataFrame) -> None:
    roll = _shown(sess.publish(duckdb.sql(
        "select district, sex, count(*) n from df group by rollup(district, sex)")))
    for k in [("B", "Total"), ("C", "Total"), ("B", "F"), ("B", "M"), ("C", "F"), ("C", "M")]:
        assert roll.loc[k, "n"] == X
    assert int(roll.loc[("Total", "Total"), "n"]) == 73 and int(roll.loc[("A", "Total"), "n"]) == 40
    # the district total of A is 40 = 20 + 20: nothing new about B or C
    out = _shown(sess.publish(duckdb.sql("select sex, count(*) n from df where district = 'A' group by sex")))
    assert set(_col(out, "n").values()) == {20}


def test_stopped_rollup_then_wrapped_count(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select district, sex, count(*) n from df group by rollup(district, sex)"))
    out = _col(_shown(sess.publish(duckdb.sql(
        "select district, count(*)*2+1 n from df group by district order by 1"))), "n")
    assert out["B"] == X and out["C"] == X  # B hidden because the ROLLUP hid it (linked)


def test_stopped_wrapped_count_then_rollup(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select district, count(*)*2+1 n from df group by district order by 1"))
    roll = _shown(sess.publish(duckdb.sql(
        "select district, sex, count(*) n from df group by rollup(district, sex)")))
    assert roll.loc[("Total", "Total"), "n"] == X  # B (30) was published: the grand total would give C
    assert roll.loc[("C", "Total"), "n"] == X


def test_stopped_polars_filtered_groups_then_total(sess: Session, p: pl.DataFrame) -> None:
    first = _col(_shown(sess.publish(p.group_by("district").len().filter(pl.col("len") >= 5).sort("district"))),
                 "len")
    tot = _col(_shown(sess.publish(p.group_by(pl.lit("all").alias("g")).len())), "len")
    # 73 - 40 - 30 would give C: the filtered table protects C itself (a selection that leaves a
    # small cell out hides what would give it back), or the total is hidden
    assert tot["all"] == X or X in first.values()


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_stopped_limit_head_then_sex_totals(sess: Session, df: pd.DataFrame, p: pl.DataFrame, engine: str) -> None:
    if engine == "duckdb":
        sess.publish(duckdb.sql("select district, count(*) n from df group by district order by n desc limit 2"))
        out = _col(_shown(sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))), "n")
    else:
        first = _col(_shown(sess.publish(p.group_by("district").len().sort("len", descending=True).head(2))), "len")
        out = _col(_shown(sess.publish(p.group_by("sex").len().sort("sex"))), "len")
        if X in first.values():  # the head protects C itself (a selection leaving a small cell out)
            return
    assert X in out.values()  # F + M would be A + B + C


def test_stopped_pivot_then_sex_totals(sess: Session, df: pd.DataFrame) -> None:
    piv = _shown(sess.publish(duckdb.sql("PIVOT df ON sex USING count(*) GROUP BY district ORDER BY district")))
    assert (piv.loc["B"] == X).all() and (piv.loc["C"] == X).all() and (piv.loc["A"] == 20).all()
    # F 37 - A 20 = B_F + C_F = 17: two unknowns, C not recoverable
    tot = _col(_shown(sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))), "n")
    assert tot == {"F": 37, "M": 36}


def test_stopped_partial_grouping_sets(sess: Session, df: pd.DataFrame) -> None:
    out = _shown(sess.publish(duckdb.sql(
        "select district, sex, count(*) n from df group by grouping sets ((district), (sex))")))
    vals = list(out["n"])
    assert vals.count(X) == 2  # B and C hidden; F 37 + M 36 - A 40 = B + C = 33 only


@pytest.mark.parametrize("sql", [
    "select district, count(*) filter (where age > 100) n from df group by district order by 1",
    "select district, sum(case when age > 100 then 1 else 0 end) n from df group by district order by 1",
    "select district, count(case when age > 100 then 1 end) n from df group by district order by 1",
])
def test_stopped_conditional_counts_of_few(sess: Session, df: pd.DataFrame, sql: str) -> None:
    out = _col(_shown(sess.publish(duckdb.sql(sql))), "n")
    assert out["A"] == X  # the 2 centenarians of A


def test_stopped_polars_conditional_counts_of_few(sess: Session, p: pl.DataFrame) -> None:
    a = sess.publish(p.group_by("district").agg(pl.col("age").filter(pl.col("age") > 100).count().alias("n"))
                     .sort("district"))
    b = sess.publish(p.group_by("district").agg((pl.col("age") > 100).sum().alias("n")).sort("district"))
    for out in (a, b):
        assert _col(_shown(out), "n")["A"] == X


def test_stopped_describe_min_max(sess: Session, p: pl.DataFrame) -> None:
    out = _shown(sess.publish(p.filter(pl.col("district") == "A").select("age").describe()))
    stats = dict(zip(out.index, out["age"], strict=True))
    assert stats["min"] == X and stats["max"] == X


@pytest.mark.parametrize(("sql", "status", "small_hidden"), [
    ("select district, max(age) m from df group by district", "blocked", True),
    # (issue 23.3: untraced aggregates) only C is left, alone and small: hidden
    # (an upper bound at most 10 on a count pins the groups it keeps: withheld since issue 23)
    ("select * from (select district, count(*) n from df group by district) where n < 10", "blocked", False),
    # arithmetic on a count is withheld (7 = 2·3 + 1 would pass as a count)
    ("with t as (select district, count(*) n from df group by district) select district, n + 0 as n from t",
     "review", True),
    # a UNION of aggregates: which numbers are counts is not known, every number withheld
    ("select district, count(*) n from df group by district union all select 'X', 1", "review", True),
    ("select district, count(*) n from df group by district having count(*) < 10", "blocked", False),
    # a text aggregate is some people's values: withheld, never drawn as row-level data (issue 23.3)
    ("select district, string_agg(sex, '') m from df group by district", "review", True),
])
def test_stopped_sql_shapes(sess: Session, df: pd.DataFrame, sql: str, status: str, small_hidden: bool) -> None:
    out = sess.publish(duckdb.sql(sql))
    assert _status(out) == status
    if small_hidden:
        shown = _shown(out)
        assert shown.loc["C"].iloc[0] == X  # district C, 3 people


def test_stopped_fetch_variants(sess: Session, df: pd.DataFrame) -> None:
    q = "select district, count(*) n from df group by district order by 1"
    assert _status(sess.publish(duckdb.sql(q).fetchall())) == "blocked"
    for obj in (pd.DataFrame(duckdb.sql(q).fetchnumpy()), duckdb.execute(q).df(), duckdb.execute(q).fetchdf(),
                duckdb.sql(q).pl()):
        shown = _shown(sess.publish(obj))
        vals = _col(shown, "n")
        assert vals["C"] == X and vals["B"] == X and int(vals["A"]) == 40


@pytest.mark.parametrize("second", ["polars", "pandas"])
def test_stopped_pandas_polars_cross_differencing(sess: Session, df: pd.DataFrame, p: pl.DataFrame,
                                                  second: str) -> None:
    if second == "polars":
        sess.publish(df.groupby("sex").size().rename("n").to_frame())
        out = _shown(sess.publish(p.filter(pl.col("district") != "C").group_by("sex").len().sort("sex")))
        assert set(_col(out, "len").values()) == {X}
    else:
        sess.publish(p.group_by("sex").len().sort("sex"))
        out = _shown(sess.publish(df[df.district != "C"].groupby("sex").size().rename("n").to_frame()))
        assert set(_col(out, "n").values()) == {X}


@pytest.mark.parametrize("sql", [
    "select sex, count(*) n from df where person in (select person from df where district <> 'C') group by sex",
    "select a.sex, count(*) n from df a join (select person from df where district <> 'C') b using (person) "
    "group by a.sex",
    "select case when district = 'C' then 'X' else sex end g, count(*) n from df group by g",
])
def test_stopped_duckdb_differencing_through_joins_and_recodes(sess: Session, df: pd.DataFrame, sql: str) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(duckdb.sql(sql + " order by 1"))
    assert _status(out) == "blocked"


def test_stopped_duckdb_table_copy_differencing(sess: Session, df: pd.DataFrame) -> None:
    con = duckdb.connect()
    con.register("df", df)
    con.execute("create table t as select * from df")
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(con.sql("select sex, count(*) n from t where district <> 'C' group by sex order by 1"))
    assert _status(out) == "blocked"


def test_stopped_describe_percentiles_and_quantile_one(sess: Session, df: pd.DataFrame, p: pl.DataFrame) -> None:
    for out in (_shown(sess.publish(p.select("age").describe(percentiles=(0.5, 1.0)))),
                _shown(sess.publish(p.select("age").describe(percentiles=(0.0, 0.99))))):
        stats = dict(zip(out.index, out["age"], strict=True))
        assert all(v == X for k, v in stats.items() if k in ("min", "max", "0%", "99%", "100%"))
    for obj in (duckdb.sql("select district, quantile_disc(age, 1.0) m from df group by district"),
                duckdb.sql("select district, quantile_disc(age, 0.99) m from df group by district"),
                p.group_by("district").agg(pl.col("age").quantile(1.0))):
        assert _status(sess.publish(obj)) == "blocked"
    assert _status(sess.publish(duckdb.sql("summarize select age, income from df where district = 'C'"))) == "blocked"


def test_stopped_dominant_firm_shapes() -> None:
    rng = np.random.default_rng(5)
    firms = pd.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms.loc[0, "turnover"] = 10000.0
    pf = pl.from_pandas(firms)
    s = Session(rules=preset("insee"))
    s.capture.install()
    try:
        roll = _shown(s.publish(duckdb.sql(
            "select sector, region, sum(turnover) s from firms group by rollup(sector, region)")))
        assert roll.loc[("S1", "N"), "s"] == X and roll.loc[("S1", "Total"), "s"] == X
        assert roll.loc[("Total", "Total"), "s"] == X
        piv = _shown(s.publish(duckdb.sql("PIVOT firms ON region USING sum(turnover) GROUP BY sector")))
        assert piv.loc["S1", "N"] == X
        s.publish(duckdb.sql("select sector, region, sum(turnover) s from firms group by all order by all"))
        for sql in ("select sector, region, sum(turnover)*1 s from firms group by all order by all",
                    "select sector, region, round(sum(turnover)) s from firms group by all order by all",
                    "select sector, region, sum(turnover)::int s from firms group by all order by all",
                    "select sector, region, avg(turnover) s, count(*) n from firms group by all order by all"):
            assert _shown(s.publish(duckdb.sql(sql))).loc[("S1", "N"), "s"] == X
        desc = _shown(s.publish(pf.filter(pl.col("sector") == "S1").select("turnover").describe()))
        stats = dict(zip(desc.index, desc["turnover"], strict=True))
        assert stats["mean"] == X and stats["max"] == X  # count 20 shown: mean * count would be the sum
        # the sector total without the big firm: S1 stays hidden, so 282.0 is the other 19 firms' sum only
        s.publish(duckdb.sql("select sector, sum(turnover) s from firms where turnover < 1000 group by sector"))
        again = _col(_shown(s.publish(duckdb.sql(
            "select sector, sum(turnover) s from firms group by sector order by 1"))), "s")
        assert again["S1"] == X
    finally:
        s.capture.uninstall()


def test_stopped_parameters_views_and_relational_filters(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    outs = [
        sess.publish(duckdb.execute(
            "select sex, count(*) n from df where district <> ? group by sex order by 1", ["C"]).df()),
        sess.publish(duckdb.sql("select sex, count(*) n from df where district <> $d group by sex order by 1",
                                params={"d": "C"})),
        sess.publish(duckdb.from_df(df).filter("district <> 'C'").aggregate("sex, count(*) n")),
    ]
    duckdb.sql("select * from df where district <> 'C'").create_view("no_c", replace=True)
    outs.append(sess.publish(duckdb.sql("select sex, count(*) n from no_c group by sex order by 1")))
    assert [_status(o) for o in outs] == ["blocked"] * 4


def test_stopped_unpivot_of_pivot(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql(
        "UNPIVOT (PIVOT df ON sex USING count(*) GROUP BY district) ON F, M INTO NAME sex VALUE n"))
    shown = _shown(out)
    assert _status(out) == "review"
    assert shown.loc[("C", "F"), "n"] == X and shown.loc[("C", "M"), "n"] == X


def test_pandas_flag_sum_then_flagged_count_is_caught(sess: Session, df: pd.DataFrame) -> None:
    """The sum of a 0/1 flag counts the flagged rows: they are its population for linking.

    (Was a leak in pandas too: sum(flag) by sex, then a count of the flagged rows outside
    district C, differed by C's 1-2 flagged people and both were cleared.)
    """
    first = _shown(sess.publish(df.groupby("sex")["flag"].sum()))
    second = _shown(sess.publish(df[(df.flag == 1) & (df.district != "C")].groupby("sex").size()))
    flagged_c = df[(df.flag == 1) & (df.district == "C")].groupby("sex").size()
    assert len(flagged_c) and (flagged_c < 5).all()  # the data have the small difference
    for sex in flagged_c.index:
        a, b = (np.asarray(t.loc[sex], dtype=object).ravel()[0] for t in (first, second))
        assert X in (a, b), (sex, a, b)  # never both shown


# ---- the HAVING fix, tried another way: the total glued on by hand (one more query shape)
# (was a leak; fixed: aggregates of different grouping levels side by side are withheld)
@pytest.mark.parametrize("q", [
    "select district, count(*) n from df group by district having count(*) >= 5 "
    "union all select 'Total', count(*) from df",
    "select district, count(*) n, (select count(*) from df) total from df group by district having count(*) >= 5"])
def test_leak_having_with_a_hand_made_total(sess: Session, df: pd.DataFrame, q: str) -> None:
    out = sess.publish(duckdb.sql(q))
    text = out.data["text/plain"]
    assert _status(out) == "blocked" or not ("40" in text and "30" in text and "73" in text)
