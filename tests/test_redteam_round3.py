"""Red team, round 3: researcher-style snippets that try to put a small cell (1-4 people) or one
person's value into a cleared output (``pass`` / ``suppressed``) or one at ``review``.

Data (as in ``test_engines_redteam``): 73 people, district A 40 (20 F / 20 M), B 30 (15 / 15),
C 3 (2 F / 1 M); persons 5 and 6 (district A, one M one F) are aged 101 and 102, everyone else
18-79. Humanitarian preset: threshold 5.

A test marked ``xfail(strict=True, reason="leak: ...")`` shows a leak: the assertion fails exactly
on the recovered small figure. The other tests are attacks that were stopped, with the cells we
expect hidden.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

# the data, the humanitarian session and the display helpers of the first red-team file
from test_engines_redteam import PEOPLE, X, _shown, _status  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402

CLEARED = ("pass", "suppressed")




def _episodes() -> pd.DataFrame:
    """Several rows per person: C's three people have four episodes each, others one to three."""
    reps = np.where(PEOPLE.district == "C", 4, np.random.default_rng(3).integers(1, 4, 73))
    return PEOPLE.loc[PEOPLE.index.repeat(reps)].reset_index(drop=True)


def _session(rules=None) -> Session:
    s = Session(rules=rules or preset("humanitarian"))
    s.capture.install()
    return s


def _cells(out, column: str | None = None) -> dict:
    """First label -> shown value, for a Series, a one-column frame or a column of a frame."""
    shown = _shown(out)
    if isinstance(shown, pd.Series):
        return dict(zip(shown.index, shown, strict=True))
    if column is None:
        column = shown.columns[-1]
    if shown.index.nlevels == 1 and not isinstance(shown.index, pd.RangeIndex):
        return dict(zip(shown.index, shown[column], strict=True))
    return dict(zip(shown[shown.columns[0]], shown[column], strict=True))


def _difference(first: dict, second: dict) -> dict | None:
    """first - second per label, or None if a cell is hidden."""
    if X in (*first.values(), *second.values()):
        return None
    return {k: round(float(first[k]) - float(second[k]), 6) for k in first}


# ====================================================================== LEAKS (cleared)
# ---- 1. a column changed between two outputs breaks linking: rows are matched by label *and* the
# content of every shared non-key column, so the same people with one column recoded (a type cast,
# rounding, a case change, a cleaned-up label) are a new population, never differenced.
# 37 - 35 = 2 women and 36 - 35 = 1 man of district C, at 'pass'.
def _cast_age(d: pd.DataFrame) -> pd.DataFrame:
    d = d.copy()
    d["age"] = d["age"].astype(float)  # in place, as a researcher cleans a column
    return d


RECODES = {
    "age cast to float in place": _cast_age,
    "income rounded": lambda d: d.assign(income=d.income.round(0)),
    "district lower-cased": lambda d: d.assign(district=d.district.str.lower()),
    "every column as text": lambda d: d.astype(str),
    "sixteen new columns in front": lambda d: pd.concat(
        [pd.DataFrame({f"q{i}": 0 for i in range(16)}, index=d.index), d], axis=1),
}


# ("sixteen new columns in front" fixed since issue 23: sixteen constant columns agreed whatever
# the rows; columns constant on the sample are no evidence now, the others are compared)
_RECODE_OPEN = {"every column as text"}


# (fixed for one recoded column: rows are the same people when most of their columns agree;
# still open when most columns change)
@pytest.mark.parametrize("recode", [pytest.param(r, marks=pytest.mark.xfail(
    strict=True, reason="leak: sex counts 37/36, then recoded frame without C 35/35 -> C is 2 F, 1 M"))
    if r in _RECODE_OPEN else r for r in RECODES])
def test_leak_recoded_column_escapes_linking(sess: Session, df: pd.DataFrame, recode: str) -> None:
    first = sess.publish(df.groupby("sex").size())
    d = RECODES[recode](df)
    second = sess.publish(d[d.district.str.upper() != "C"].groupby("sex").size())
    got = _difference(_cells(first), _cells(second))
    assert not (_status(first) in CLEARED and _status(second) in CLEARED and got == {"F": 2, "M": 1})


# (was a leak; fixed: rows are the same people when most of their columns agree)
@pytest.mark.parametrize("expr", [pl.col("age").cast(pl.Float64), pl.col("income").round(0)], ids=["cast", "round"])
def test_leak_polars_with_columns_escapes_linking(sess: Session, p: pl.DataFrame, expr) -> None:
    first = sess.publish(p.group_by("sex").len().sort("sex"))
    second = sess.publish(p.with_columns(expr).filter(pl.col("district") != "C").group_by("sex").len().sort("sex"))
    got = _difference(_cells(first, "len"), _cells(second, "len"))
    assert not (_status(first) in CLEARED and _status(second) in CLEARED and got == {"F": 2, "M": 1})


# ---- 2. the certificate exported with a suppressed table carries its grand total (73), which the
# table itself does not show and linking does not count as published: a later table of everyone
# under 100 (36 + 35 = 71) passes, and 73 - 71 = 2 people aged over 100, both outputs cleared.
# fixed: a certificate states no margin its table does not show ('unpublished', intervals from the
# published cells alone)
def test_leak_certificate_total_against_a_later_table(sess: Session, df: pd.DataFrame, tmp_path) -> None:
    first = sess.publish(df.groupby("district").size())
    second = sess.publish(df[df.age < 100].groupby("sex").size())
    assert _status(first) == "suppressed" and _cells(first)["C"] == X
    sess.export(tmp_path / "out", force=True)
    cert = json.loads((tmp_path / "out" / "out-1.certificate.json").read_text())
    totals = [c["value"] for t in cert["tables"] for c in t["cells"] if c["labels"] == ["Total"] and "value" in c]
    shown = _cells(second)
    recovered = totals[0] - sum(int(v) for v in shown.values()) if totals and X not in shown.values() else None
    assert not (_status(second) in CLEARED and recovered == 2)
    assert not totals and "73" not in json.dumps(cert["tables"])


# ---- 3. distinct counts of the declared unit are not additive, so no margin protects them: with
# several rows per person, people per district (A 40, B 30, C hidden) and people per sex (37 + 36)
# are both cleared, and 73 - 40 - 30 = 3 people in C.
# (was a leak; fixed: distinct counts of an identifier are protected as a frequency table, with
# secondary cells)
@pytest.mark.parametrize("unit", [True, False], ids=["unit declared", "no unit"])
def test_leak_distinct_people_by_district_and_by_sex(unit: bool) -> None:
    rules = dataclasses.replace(preset("humanitarian"), unit="person") if unit else preset("humanitarian")
    s = _session(rules)
    try:
        ep = _episodes()
        by_district = s.publish(ep.groupby("district").agg(n=("person", "nunique")))
        by_sex = s.publish(ep.groupby("sex").agg(n=("person", "nunique")))
        a, b = _cells(by_district, "n"), _cells(by_sex, "n")
        recovered = None
        if X not in (a["A"], a["B"], *b.values()):
            recovered = sum(int(v) for v in b.values()) - int(a["A"]) - int(a["B"])
        assert not (_status(by_district) in CLEARED and _status(by_sex) in CLEARED and recovered == 3)
    finally:
        s.capture.uninstall()


# ---- 4. describe() of a captured count table: quartiles and mean of six cells of which two are
# shown (A F 20, A M 20) pin every hidden cell: with the two largest at 20 (both shown),
# x4 = (q75 - 0.75*20)/0.25 = 15, x3 = 2*q50 - x4 = 15, x2 = (q25 - 0.25*x3)/0.75 = 2,
# x1 = 6*mean - 40 - 15 - 15 - 2 = 1: C's 2 women and 1 man, at 'suppressed'.
# (was a leak; fixed: describe() of a captured table (by identity, or by its labels and values) is
# withheld)
@pytest.mark.parametrize("shape", ["series", "frame"])
def test_leak_describe_of_a_captured_count_table(sess: Session, df: pd.DataFrame, shape: str) -> None:
    table = df.groupby(["district", "sex"]).size()
    sess.publish(table)
    out = sess.publish(table.describe() if shape == "series" else table.to_frame("n").describe())
    if out.checked is None:  # withheld
        assert _status(out) == "blocked" and "describe" in out.data["text/plain"]
        return
    c = _cells(out)
    got = None
    if X not in (c["count"], c["mean"], c["25%"], c["50%"], c["75%"]):
        x4 = (float(c["75%"]) - 0.75 * 20) / 0.25
        x3 = 2 * float(c["50%"]) - x4
        x2 = (float(c["25%"]) - 0.25 * x3) / 0.75
        x1 = float(c["count"]) * float(c["mean"]) - 40 - x4 - x3 - x2
        got = {round(x1, 3), round(x2, 3)}
    assert not (_status(out) in CLEARED and got == {1, 2})


# DuckDB sex counts 37/36, then a copy with age recoded to floats without C: 35/35.
# (was a leak; fixed 2026-12-04: whole floats hash as the integers they are, and a Python frame
# read by DuckDB keeps its rows' labels)
@pytest.mark.parametrize("how", ["replace in a CTE", "over a recoded frame"])
def test_leak_duckdb_recoded_column_escapes_linking(sess: Session, df: pd.DataFrame, how: str) -> None:
    first = sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    if how == "replace in a CTE":
        second = sess.publish(duckdb.sql("with t as (select * replace (age * 1.0 as age) from df) "
                                         "select sex, count(*) n from t where district <> 'C' group by sex order by 1"))
    else:
        d = _cast_age(df)  # noqa: F841 (read by DuckDB)
        second = sess.publish(duckdb.sql("select sex, count(*) n from d where district <> 'C' group by sex order by 1"))
    got = _difference(_cells(first, "n"), _cells(second, "n"))
    assert not (_status(first) in CLEARED and _status(second) in CLEARED and got == {"F": 2, "M": 1})


# ---- 5. one person's value by the same route: income sums by sex, then without person 72 on a
# frame whose age column was cast: 531.80 - 513.75 = 18.05, person 72's income, at 'pass'.
# (was a leak; fixed: rows are the same people when most of their columns agree)
def test_leak_one_persons_income_through_a_recoded_frame(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(df.groupby("sex").income.sum())
    d = _cast_age(df)
    second = sess.publish(d[d.person != 72].groupby("sex").income.sum())
    got = _difference(_cells(first), _cells(second))
    assert not (_status(second) in CLEARED and got is not None and abs(got["M"] - PEOPLE.income[72]) < 1e-6)


# ---- 6. three outputs, each pair harmless: a filter is only differenced against one earlier
# output (or a sum of cells within one), never against two earlier outputs added together.
# Everyone (37/36), A or C (22/21), B or C (17/16): 22 + 17 - 37 = 2 women, 21 + 16 - 36 = 1 man in C.
def _three_filters(engine: str, df: pd.DataFrame, p: pl.DataFrame, districts: tuple[str, ...] | None):
    if engine == "pandas":
        d = df if districts is None else df[df.district.isin(districts)]
        return d.groupby("sex").size()
    if engine == "polars":
        q = p if districts is None else p.filter(pl.col("district").is_in(list(districts)))
        return q.group_by("sex").len().sort("sex")
    where = "" if districts is None else "where district in (" + ", ".join(f"'{x}'" for x in districts) + ")"
    return duckdb.sql(f"select sex, count(*) n from df {where} group by sex order by 1")


# Fixed: the joint audit also checks the small groups of rows that the outputs separate
# together (no table's cell); overlapping filters of one frame share a universe (pandas: by
# index labels), and a later output holding two universes' rows merges them (polars, DuckDB).
@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
@pytest.mark.parametrize("order", ["total first", "total last"])
def test_leak_two_overlapping_filters_and_the_total(sess: Session, df: pd.DataFrame, p: pl.DataFrame,
                                                    engine: str, order: str) -> None:
    wanted = [None, ("A", "C"), ("B", "C")]
    if order == "total last":
        wanted = wanted[1:] + wanted[:1]
    outs = {w: sess.publish(_three_filters(engine, df, p, w)) for w in wanted}
    cells = {w: _cells(o) for w, o in outs.items()}
    got = None
    if not any(X in c.values() for c in cells.values()):
        got = {k: int(cells[("A", "C")][k]) + int(cells[("B", "C")][k]) - int(cells[None][k]) for k in ("F", "M")}
    assert not (all(_status(o) in CLEARED for o in outs.values()) and got == {"F": 2, "M": 1})


# Without any total: A or C, B or C, A or B (a cycle): (22 + 17 - 35) / 2 = 2, (21 + 16 - 35) / 2 = 1.
def test_leak_three_pairs_of_districts(sess: Session, df: pd.DataFrame) -> None:
    outs = {w: sess.publish(df[df.district.isin(list(w))].groupby("sex").size()) for w in ("AC", "BC", "AB")}
    cells = {w: _cells(o) for w, o in outs.items()}
    got = None
    if not any(X in c.values() for c in cells.values()):
        got = {k: (int(cells["AC"][k]) + int(cells["BC"][k]) - int(cells["AB"][k])) / 2 for k in ("F", "M")}
    assert not (all(_status(o) in CLEARED for o in outs.values()) and got == {"F": 2, "M": 1})


# stopped: the same two groupings as keys of one frame (A or C / B; A / B or C) are compared row by row.
def test_stopped_two_regional_groupings(sess: Session, df: pd.DataFrame) -> None:
    d = df.assign(r1=df.district.map({"A": "AC", "C": "AC", "B": "B"}),
                  r2=df.district.map({"A": "A", "C": "BC", "B": "BC"}))
    first = sess.publish(d.groupby(["r1", "sex"]).size().unstack())
    second = sess.publish(d.groupby(["r2", "sex"]).size().unstack())
    assert _status(first) == "pass"
    assert _status(second) == "blocked" and set(_shown(second).to_numpy().ravel()) == {X}


# ====================================================================== dominance: one firm's turnover
def _firms() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    firms = pd.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms.loc[0, "turnover"] = 10000.0  # firm 0, sector S1, region N
    return firms


@pytest.fixture
def insee():
    s = _session(preset("insee"))
    yield s
    s.capture.uninstall()


# ---- 7. a concave transform of the magnitude is no longer dominated (firm 0 is 83% of S1's sum of
# turnover**0.7), so the sum passes; S2's 20 firms give the others' share:
# (755.91 - 19/20 * 130.94) ** (1/0.7) = 10025, firm 0's 10000 within 0.3%, at 'pass'.
@pytest.mark.xfail(strict=True, reason="leak: (S1 - 19/20 S2) of sum(turnover**0.7) ** (1/0.7) = 10025 ~ firm 0's 10000")
@pytest.mark.parametrize("power", [0.7, 0.5])
def test_leak_dominant_firm_through_a_power_of_turnover(insee: Session, power: float) -> None:
    firms = _firms()
    out = insee.publish(firms.assign(t=firms.turnover ** power).groupby("sector").t.sum())
    c = _cells(out)
    got = None if X in c.values() else (float(c["S1"]) - 19 / 20 * float(c["S2"])) ** (1 / power)
    assert not (_status(out) in CLEARED and got is not None and abs(got / 10000.0 - 1) < 0.03)


# ---- 8. describe() of the sector x region sum table: 25% = 148.15 puts the second smallest cell in
# [148.15, 153.55], so the third is 2*153.55 - x2 in [153.55, 158.95] and the dominated cell
# x4 = 4*2649.625 - 3*x3 is in [10121.7, 10137.9] (true 10130.8: firm 0 plus nine small firms),
# at 'suppressed'.
@pytest.mark.xfail(strict=True, reason="leak: describe of the sum table: x4 = 4*q75 - 3*(2*q50 - x2), x2 in [q25, q50] -> S1/N within 0.1%")
def test_leak_describe_of_a_dominated_sum_table(insee: Session) -> None:
    firms = _firms()
    table = firms.groupby(["sector", "region"]).turnover.sum()
    insee.publish(table)
    out = insee.publish(table.describe())
    c = _cells(out)
    got = None
    if X not in (c["25%"], c["50%"], c["75%"]):
        q25, q50, q75 = float(c["25%"]), float(c["50%"]), float(c["75%"])
        got = (4 * q75 - 3 * (2 * q50 - q25), 4 * q75 - 3 * (2 * q50 - q50))  # x2 = q25 .. q50
    assert not (_status(out) in CLEARED and got is not None and got[1] - got[0] < 0.02 * got[0]
                and got[0] <= 10130.8 <= got[1])


# ====================================================================== memory of the session
# ---- 9. linking keeps four universes of rows and evicts the smallest: tables of four other, larger
# data sets (a facility list, a household roster...) push the 73 people out, and the filter
# differencing of section 1 passes: 37 - 35 = 2 women, 36 - 35 = 1 man in C, at 'pass'.
def _other_data_sets(sess: Session, n: int) -> None:
    rng = np.random.default_rng(0)
    for i in range(n):
        other = pd.DataFrame({f"k{i}": rng.choice(["x", "y"], 200), f"v{i}": rng.integers(0, 9, 200)})
        sess.publish(other.groupby(f"k{i}").size())


# fixed: the memory keeps 12 universes within its byte budget, and a table of rows it let go is review
# (tests/test_linking_memory_bound.py)
def test_leak_people_evicted_by_four_other_data_sets(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(df.groupby("sex").size())
    _other_data_sets(sess, 4)
    second = sess.publish(df[df.district != "C"].groupby("sex").size())
    got = _difference(_cells(first), _cells(second))
    assert not (_status(second) in CLEARED and got == {"F": 2, "M": 1})


def test_stopped_people_kept_beside_three_other_data_sets(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(df.groupby("sex").size())
    _other_data_sets(sess, 3)
    second = sess.publish(df[df.district != "C"].groupby("sex").size())
    assert _status(second) == "blocked" and set(_cells(second).values()) == {X}


# ---- 10. the same three filters with a magnitude: sums of age by sex for A or C, B or C and everyone:
# men 1049 + 787 - 1765 = 71, the age of person 72 (C's only man); women 1199 + 945 - 2085 = 59
# (C's two women), all three at 'pass'.
def test_leak_one_persons_age_from_three_sums(sess: Session, df: pd.DataFrame) -> None:
    outs = [sess.publish(d.groupby("sex").age.sum())
            for d in (df[df.district.isin(["A", "C"])], df[df.district.isin(["B", "C"])], df)]
    ac, bc, everyone = (_cells(o) for o in outs)
    got = None
    if X not in (ac["M"], bc["M"], everyone["M"]):
        got = int(ac["M"]) + int(bc["M"]) - int(everyone["M"])
    assert not (all(_status(o) in CLEARED for o in outs) and got == int(PEOPLE.age[72]))


# ====================================================================== LEAKS at 'review' (on screen)
# ---- 11. one person's value from a group-wise selection pandas runs row by row: the oldest woman
# (102) and man (101), persons 6 and 5, shown as numbers at 'review'.
SELECTIONS = {
    "nlargest(1)": lambda d: d.groupby("sex").age.nlargest(1),
    "apply sort iloc[-1]": lambda d: d.groupby("sex").age.apply(lambda x: x.sort_values().iloc[-1]),
    "agg max - mean, plus the mean": lambda d: d.groupby("sex").age.agg(lambda x: x.max() - x.mean()),
}


# fixed for the analyst's own functions (issue 23.6: capture/custom_stats.py); nlargest per group is
# withheld (issue 23.3: the most extreme people's values beside who they are)
@pytest.mark.parametrize("how", list(SELECTIONS))
def test_leak_review_oldest_persons_age(sess: Session, df: pd.DataFrame, how: str) -> None:
    out = sess.publish(SELECTIONS[how](df))
    if out.checked is None:  # withheld
        assert not {"101", "102"} & set(out.data["text/plain"].split())
        return
    shown = _shown(out)
    values = [v for v in np.ravel(shown.to_numpy()) if v != X]
    if how.startswith("agg"):
        values = [float(v) + float(m) for v, m in zip(values, df.groupby("sex").age.mean(), strict=False)]
    assert not (_status(out) != "blocked" and {round(float(v)) for v in values} >= {101, 102})


# ---- 12. a cumulative count of age bands (value_counts with bins, then cumsum): 73 - 71 = 2 people
# aged over 100, at 'review'.
def test_leak_review_cumulative_value_counts_with_bins(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(df.age.value_counts(bins=[0, 50, 100, 200], sort=False).cumsum())
    values = list(_cells(out).values())
    got = None if X in values[-2:] else int(values[-1]) - int(values[-2])
    assert not (_status(out) != "blocked" and got == 2)


# ====================================================================== STOPPED
# ---- filters that remove C's three people (or persons 5 and 6) in unusual ways, after the sex totals
# 37/36: the second table is blocked, every cell hidden.
FILTERS = {
    "isin": lambda d: d[d.district.isin(["A", "B"])],
    "query": lambda d: d.query("district != 'C'"),
    "str.contains": lambda d: d[d.district.str.contains("A|B")],
    "merge with a lookup": lambda d: d.merge(pd.DataFrame({"district": ["A", "B"], "name": ["a", "b"]})),
    "concat of two districts": lambda d: pd.concat([d[d.district == "A"], d[d.district == "B"]]),
    "shuffled, then filtered": lambda d: d.sample(frac=1, random_state=1).query("district != 'C'"),
    "nsmallest by age (drops 5, 6)": lambda d: d.nsmallest(71, "age"),
    "keys only": lambda d: d[["sex", "district"]][d.district != "C"],
    "columns renamed": lambda d: d.rename(columns=str.upper).rename(columns={"SEX": "sex"})[d.district != "C"],
    "fillna": lambda d: d.fillna(0)[d.district != "C"],
    "set_index person": lambda d: d.set_index("person")[lambda x: x.district != "C"],
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_stopped_filter_forms(sess: Session, df: pd.DataFrame, name: str) -> None:
    sess.publish(df.groupby("sex").size())
    out = sess.publish(FILTERS[name](df).groupby("sex").size())
    assert _status(out) == "blocked" and set(_cells(out).values()) == {X}


@pytest.mark.parametrize("engine_sql", [
    "select sex, count(*) n from df where person not in (select person from df where district = 'C') group by 1",
    "with lk as (select * from (values ('A'), ('B')) t(d)) select sex, count(*) n from df join lk on df.district = lk.d group by 1",
    "select sex, count(*) n from df semi join (select 'A' d union all select 'B') t on df.district = t.d group by 1",
], ids=["not in subquery", "join a VALUES lookup", "semi join"])
def test_stopped_duckdb_filter_forms(sess: Session, df: pd.DataFrame, engine_sql: str) -> None:
    sess.publish(duckdb.sql("select sex, count(*) n from df group by sex order by 1"))
    out = sess.publish(duckdb.sql(engine_sql + " order by 1"))
    assert _status(out) == "blocked" and set(_cells(out, "n").values()) == {X}


@pytest.mark.parametrize("build", [
    lambda p: p.lazy().join(pl.LazyFrame({"district": ["A", "B"]}), on="district").group_by("sex").len().sort("sex").collect(),
    lambda p: p.filter(pl.col("district").is_in(["A", "B"])).group_by("sex").len().sort("sex"),
    lambda p: p.sort("age").head(71).group_by("sex").len().sort("sex"),
], ids=["lazy join lookup", "is_in", "sort head 71"])
def test_stopped_polars_filter_forms(sess: Session, p: pl.DataFrame, build) -> None:
    sess.publish(p.group_by("sex").len().sort("sex"))
    out = sess.publish(build(p))
    assert _status(out) == "blocked" and set(np.ravel(_shown(out)["len"].to_numpy())) == {X}


# ---- one person (72, a man of C) removed: his age or income from means, sums, medians and std
@pytest.mark.parametrize("stat", ["mean", "sum", "median", "std"])
@pytest.mark.parametrize("column", ["age", "income"])
def test_stopped_one_person_removed_statistics(sess: Session, df: pd.DataFrame, stat: str, column: str) -> None:
    sess.publish(df.groupby("sex").size())
    sess.publish(df.groupby("sex")[column].agg(stat))
    out = sess.publish(df[df.person != 72].groupby("sex")[column].agg(stat))
    assert _cells(out)["M"] == X


# ---- margins, normalised tables, NaN keys and unused categories keep C (and B, its secondary) hidden
# (describe: B's count and mean hidden, its spread and quartiles of 30 people shown)
TABLES = {
    "crosstab margins": lambda d: pd.crosstab(d.district, d.sex, margins=True),
    "crosstab normalize index + margins": lambda d: pd.crosstab(d.district, d.sex, normalize="index", margins=True),
    "crosstab normalize columns + margins": lambda d: pd.crosstab(d.district, d.sex, normalize="columns", margins=True),
    "crosstab normalize all": lambda d: pd.crosstab(d.district, d.sex, normalize="all"),
    "pivot_table count+mean, margins": lambda d: d.pivot_table(index="district", columns="sex", values="age",
                                                               aggfunc=["count", "mean"], margins=True),
    "groupby dropna=False": lambda d: d.assign(district=d.district.where(d.person < 70)).groupby("district", dropna=False).size(),
    "categorical observed=False": lambda d: d.assign(district=pd.Categorical(d.district, ["A", "B", "C", "D"]))
    .groupby("district", observed=False).size(),
    "describe by district": lambda d: d.groupby("district").age.describe(),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_stopped_table_shapes_hide_c_and_b(sess: Session, df: pd.DataFrame, name: str) -> None:
    out = sess.publish(TABLES[name](df))
    shown = _shown(out)
    rows = [r for r in shown.index if r == "C" or (isinstance(r, float) and np.isnan(r))]
    assert rows and all(set(np.ravel(shown.loc[[r]].to_numpy())) == {X} for r in rows)
    if "B" in shown.index and name != "describe by district":  # B's quartiles (30 people) may show
        assert set(np.ravel(shown.loc[["B"]].to_numpy())) == {X}


# ---- 13. group sizes as labels (a researcher's "C (n=3)"): the cells are hidden, the label is not:
# C's 3 people are shown at 'review' in the row label (text, or the number itself as a key).
LABELLED = {
    "text label": lambda d, n: d.groupby(d.district + " (n=" + n.astype(str) + ")").age.mean(),
    "numeric key beside district": lambda d, n: d.groupby(["district", n.rename("n")]).size(),
    "numeric key as columns": lambda d, n: d.assign(n=n).groupby(["sex", "n"]).size().unstack(),
}


# fixed: numeric labels are drawn hidden (issue 23.5), group sizes as keys withheld (23.2), and a small
# number stated in a text label is drawn hidden, in the label and in the note
@pytest.mark.parametrize("how", list(LABELLED))
def test_leak_review_group_size_in_a_label(sess: Session, df: pd.DataFrame, how: str) -> None:
    n = df.groupby("district").person.transform("size")
    out = sess.publish(LABELLED[how](df, n))
    assert not re.search(r"n=3\b", out.data["text/plain"] + out.data["text/html"])
    if out.checked is None:  # withheld
        return
    shown = _shown(out)
    labels = [str(x) for x in (*shown.index.to_flat_index(), *getattr(shown, "columns", []))]
    assert not (_status(out) != "blocked" and any(x in ("C (n=3)", "('C', 3)", "3") for x in labels))


# ====================================================================== LEAKS (cleared), continued
# ---- 14. a magnitude that is zero for all but one person per cell: a column with two values {0, x}
# is read as an indicator (its non-zero rows counted: blocked), but with two different non-zero values
# it is a magnitude, and the humanitarian preset has no dominance rule. Income of the over-100s by
# sex: F 13.15 = person 6's income, M 12.17 = person 5's; age*(age > 100): 102 and 101, at 'pass'.
ONE_PER_CELL = {
    "income * (age > 100)": (lambda d: d.income * (d.age > 100), {"F": PEOPLE.income[6], "M": PEOPLE.income[5]}),
    "income * person.isin([5, 6])": (lambda d: d.income * d.person.isin([5, 6]),
                                     {"F": PEOPLE.income[6], "M": PEOPLE.income[5]}),
    "age * (age > 100)": (lambda d: d.age * (d.age > 100), {"F": 102, "M": 101}),
    "(age - 100).clip(lower=0)": (lambda d: (d.age - 100).clip(lower=0), {"F": 2, "M": 1}),
}


# (was a leak; fixed: a total made by one or two non-zero units is primary whatever the preset)
@pytest.mark.parametrize("how", list(ONE_PER_CELL))
def test_leak_one_non_zero_contributor_per_cell(sess: Session, df: pd.DataFrame, how: str) -> None:
    build, truth = ONE_PER_CELL[how]
    out = sess.publish(df.assign(c=build(df)).groupby("sex").c.sum())
    c = _cells(out)
    got = None if X in c.values() else {k: round(float(v), 6) for k, v in c.items()}
    assert not (_status(out) in CLEARED and got == {k: round(float(v), 6) for k, v in truth.items()})


# stopped: the same with one non-zero value in the whole column (read as an indicator of one person):
# M hidden ("at least 0"), F's 0 shown (its total, his alone, is not shown: since 2026-12-04 it needs
# no protection from him, and the table is no longer blocked whole)
def test_stopped_single_non_zero_value_is_an_indicator(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(df.assign(c=df.income * (df.person == 72)).groupby("sex").c.sum())
    assert _status(out) in ("blocked", "suppressed") and _cells(out)["M"] == X
    assert str(PEOPLE.income[72]) not in out.data["text/plain"] + json.dumps(out.data["application/vnd.sdc-magic.v1+json"])


# stopped under a preset with dominance: insee / sacro hide the over-100s' ages
@pytest.mark.parametrize("name", ["insee", "sacro"])
def test_stopped_one_non_zero_contributor_with_dominance(df: pd.DataFrame, name: str) -> None:
    s = _session(preset(name))
    try:
        out = s.publish(df.assign(c=df.age * (df.age > 100)).groupby("sex").c.sum())
        assert set(_cells(out).values()) == {X}
    finally:
        s.capture.uninstall()


def _one_per_cell(engine: str, df: pd.DataFrame, p: pl.DataFrame):
    if engine == "polars sum":
        return p.group_by("sex").agg((pl.col("income") * (pl.col("age") > 100)).sum().alias("s")).sort("sex")
    if engine == "duckdb sum of a product (review)":
        return duckdb.sql("select sex, sum(income * (age > 100)::int) s from df group by 1 order by 1")
    return df.assign(s=df.income * (df.age > 100)).groupby("sex").s.mean()  # mean * 37 / 36


# (fixed for polars and pandas: one or two non-zero units are primary whatever the preset; DuckDB's
# sum of a product is planned as the sum of a derived column, issue 23.6)
@pytest.mark.parametrize("engine", ["polars sum", "duckdb sum of a product (review)", "pandas mean times n"])
def test_leak_one_non_zero_contributor_other_engines(sess: Session, df: pd.DataFrame, p: pl.DataFrame,
                                                     engine: str) -> None:
    out = sess.publish(_one_per_cell(engine, df, p))
    c = _cells(out, "s") if engine != "pandas mean times n" else _cells(out)
    n = {"F": 37, "M": 36} if engine == "pandas mean times n" else {"F": 1, "M": 1}
    got = None if X in c.values() else {k: round(float(v) * n[k], 2) for k, v in c.items()}
    assert not (_status(out) != "blocked" and got == {"F": PEOPLE.income[6], "M": PEOPLE.income[5]})


# ---- 15. the same people twice: a second copy of a row is a new row to linking (rows are told apart
# by occurrence), so stacking two rounds of a panel, or a one-to-many merge, adds the copies as people
# never seen. Round 1 everyone (37/36), round 2 without C (35/35): 2 women and 1 man left the panel,
# in one table or two, at 'pass' (also with unit="person" declared).
def _rules(unit: bool):
    return dataclasses.replace(preset("humanitarian"), unit="person") if unit else preset("humanitarian")


@pytest.mark.xfail(strict=True, reason="leak: panel rounds by sex 37/36 and 35/35 in one table -> C 2/1")
@pytest.mark.parametrize("unit", [False, True], ids=["rows", "unit person"])
def test_leak_panel_rounds_in_one_table(df: pd.DataFrame, unit: bool) -> None:
    s = _session(_rules(unit))
    try:
        panel = pd.concat([df.assign(round=1), df[df.district != "C"].assign(round=2)])
        out = s.publish(panel.groupby(["round", "sex"]).size().unstack())
        shown = _shown(out)
        got = None
        if X not in np.ravel(shown.to_numpy()):
            got = {k: int(shown.loc[1, k]) - int(shown.loc[2, k]) for k in ("F", "M")}
        assert not (_status(out) in CLEARED and got == {"F": 2, "M": 1})
    finally:
        s.capture.uninstall()


STACKS = {
    "concat of everyone and everyone but C": lambda d: pd.concat([d, d[d.district != "C"]]),
    "merge with a lookup listing A and B twice": lambda d: d.merge(
        pd.DataFrame({"district": ["A", "A", "B", "B", "C"], "copy": [1, 2, 1, 2, 1]})),
}


@pytest.mark.xfail(strict=True, reason="leak: sex 37/36, stacked copy 72/71: 37 - (72 - 37) = 2, 36 - (71 - 36) = 1")
@pytest.mark.parametrize("unit", [False, True], ids=["rows", "unit person"])
@pytest.mark.parametrize("how", list(STACKS))
def test_leak_duplicated_rows_after_a_total(df: pd.DataFrame, how: str, unit: bool) -> None:
    s = _session(_rules(unit))
    try:
        first = s.publish(df.groupby("sex").size())
        second = s.publish(STACKS[how](df).groupby("sex").size())
        a, b = _cells(first), _cells(second)
        got = None
        if X not in (*a.values(), *b.values()):
            got = {k: 2 * int(a[k]) - int(b[k]) for k in ("F", "M")}
        assert not (_status(first) in CLEARED and _status(second) in CLEARED and got == {"F": 2, "M": 1})
    finally:
        s.capture.uninstall()


# ====================================================================== LEAKS on screen (not cleared)
# ---- 16. DuckDB window functions over an aggregate (a share of the total, a rank, a lag) make the
# result "row-level data": status 'blocked', but row-level data is displayed as it is, so C's 3 is on
# screen (the README says these are "withheld or row-level: never shown raw").
WINDOWED = {
    "percent of total": "select district, count(*) n, 100.0 * count(*) / sum(count(*)) over () pct from df group by 1",
    "share only": "select district, count(*) / sum(count(*)) over () n from df group by 1",
    "rank": "select district, count(*) n, rank() over (order by count(*)) r from df group by 1",
    "lag": "select district, count(*) n, count(*) - lag(count(*)) over (order by district) d from df group by 1",
}


# fixed (issue 23.3): an aggregate computed further (a window over groups) is checked as an untraced
# aggregate: counts as counts, its computed columns and numbers that are not counts withheld
@pytest.mark.parametrize("name", list(WINDOWED))
def test_leak_screen_window_over_an_aggregate_shown_raw(sess: Session, df: pd.DataFrame, name: str) -> None:
    out = sess.publish(duckdb.sql(WINDOWED[name] + " order by 1"))
    text = out.data["text/plain"].split("sdc_magic:")[0]
    shown = [float(x) for line in text.splitlines() for x in line.split()[1:] if _number(x)]
    assert 3 not in {round(v * 73) if 0 < v < 1 else round(v) for v in shown}
    assert not {round(v, 4) for v in shown} & {round(100 * 3 / 73, 4), round(3 / 73, 4)}


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# ---- 17. two aggregates joined in DuckDB: the count is protected, the mean beside it is
# 'unverified' and shown at 'review': C's mean age 43.33 (three people) on screen.
# fixed (issue 23.3): an untraced aggregate withholds its numbers that are not counts
def test_leak_review_join_of_two_aggregates_shows_a_small_mean(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql(
        "with a as (select district, count(*) n from df group by 1), b as (select district, avg(age) m from df group by 1) "
        "select a.district, n, m from a join b using (district) order by 1"))
    shown = _cells(out, "m")
    got = None if shown["C"] == X else round(float(str(shown["C"]).rstrip(" ?")), 2)
    assert not (_status(out) != "blocked" and got == round(PEOPLE[PEOPLE.district == "C"].age.mean(), 2))


# ---- 18. a ROLLUP filtered in an outer query: the total row (73) stays beside A 40 and B 30, C is
# dropped: 73 - 40 - 30 = 3 at 'review'.
# fixed (issue 23.3): grouping-set totals inside a query sdc_magic cannot plan are withheld
def test_leak_review_rollup_filtered_in_an_outer_query(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select * from (select district, count(*) n from df group by rollup(district)) "
                                  "where n >= 5 order by 1"))
    if out.checked is None:
        assert "withheld" in out.data["text/plain"] and not {"73", "40", "30"} & set(
            out.data["text/plain"].replace("(", " ").split())
        return
    values = [v for v in _cells(out, "n").values() if v != X]
    got = max(int(v) for v in values) * 2 - sum(int(v) for v in values) if len(values) == 3 else None
    assert not (_status(out) != "blocked" and got == 3)


# ---- 19. the same in pandas: a count table dressed for a report ("n (pct%)", a percent column after
# reset_index, a label or a date column beside the counts) has text / dates in its body or is a
# frame of aggregated rows, so it is "row-level data": 'blocked' and displayed as it is, C = 3.
def _counts() -> pd.Series:
    return PEOPLE.groupby("district").size()


DRESSED = {
    "n (pct%) strings": lambda: _counts().astype(str) + " (" + (100 * _counts() / _counts().sum()).round(1).astype(str) + "%)",
    "reset_index + pct column": lambda: _counts().reset_index(name="n").assign(pct=lambda x: 100 * x.n / x.n.sum()),
    "label column beside n": lambda: _counts().to_frame("n").assign(label=lambda x: "district " + x.index),
    "date column beside n": lambda: _counts().to_frame("n").assign(when=pd.Timestamp("2024-01-01")),
}


#: still leaking: none (strings built with + keep their recipe since issue 23.4, see checking/lineage.py)
DRESSED_LEAKING: set[str] = set()


# fixed (issue 23.3): reset_index / to_frame / assign of an aggregation stay an aggregation
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(
    strict=True, reason="leak: a dressed count table is 'row-level' and displayed raw: C 3 on screen"))
    if n in DRESSED_LEAKING else n for n in DRESSED])
def test_leak_screen_dressed_count_table_shown_raw(sess: Session, name: str) -> None:
    out = sess.publish(DRESSED[name]())
    text = out.data["text/plain"].split("sdc_magic:")[0]
    row_c = [line.split() for line in text.splitlines() if line.split()[:1] == ["C"] or line.split()[1:2] == ["C"]]
    got = None
    if row_c:
        cells = row_c[0][1:] if row_c[0][0] == "C" else row_c[0][2:]
        got = int(cells[0]) if cells and cells[0].isdigit() else None
    assert got != 3


# stopped: the same count table as plain strings or formatted numbers keeps its protection
@pytest.mark.parametrize("build", [lambda: _counts().astype(str), lambda: _counts().map("{:,}".format),
                                   lambda: pd.crosstab(PEOPLE.district, PEOPLE.sex).astype(str)],
                         ids=["astype(str)", "map format", "crosstab astype(str)"])
def test_stopped_count_table_as_text(sess: Session, build) -> None:
    out = sess.publish(build())
    assert _status(out) == "suppressed" and set(np.ravel(_shown(out).loc[["B", "C"]].to_numpy())) == {X}


DRESSED_ENGINES = {
    "polars with_columns share": lambda df, p: p.group_by("district").len().sort("district")
    .with_columns(pct=pl.col("len") / pl.col("len").sum()),
    "polars label column": lambda df, p: p.group_by("district").len().sort("district").with_columns(unit=pl.lit("people")),
    "duckdb count as varchar": lambda df, p: duckdb.sql(
        "select district, count(*)::varchar || ' people' n from df group by 1 order by 1"),
    "pandas agg with the mode of a text column": lambda df, p: df.groupby("district").agg(
        n=("person", "size"), sex=("sex", lambda x: x.mode()[0])),
}


# fixed (issue 23.3: an aggregation's result is never row-level; polars frames computed from one and
# DuckDB results that do not match their evidence are checked as untraced aggregates)
@pytest.mark.parametrize("name", list(DRESSED_ENGINES))
def test_leak_screen_dressed_count_table_other_engines(sess: Session, df: pd.DataFrame, p: pl.DataFrame,
                                                      name: str) -> None:
    out = sess.publish(DRESSED_ENGINES[name](df, p))
    text = out.data["text/plain"].split("sdc_magic:")[0]
    got = None
    for line in text.splitlines():
        words = line.split()
        if "C" in words[:2]:
            rest = words[words.index("C") + 1:]
            got = int(rest[0]) if rest and rest[0].isdigit() else None
    assert got != 3


# ====================================================================== OVER-PROTECTION
# ---- 20. an honest sequence: sex counts, district x sex counts (B, C hidden), then mean income by
# district x sex. No income margin was ever published, yet the means are all hidden ('blocked':
# "the single contributor of C / M can narrow it down"); in a fresh session A's means (20 people
# each, 14.83 / 14.69) are shown. (Tried in stop 51 and reverted: linked cells without a level of
# their own; single contributors of other cells then read them, see test_linked_cells_keep_levels.py.)
@pytest.mark.xfail(strict=True, reason="overprotection: mean income by district x sex blocked after two count tables")
def test_overprotection_means_after_count_tables(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(df.groupby("sex").size())
    sess.publish(pd.crosstab(df.district, df.sex))
    out = sess.publish(df.pivot_table(index="district", columns="sex", values="income", aggfunc="mean"))
    shown = _shown(out)
    assert shown.loc["A", "F"] != X and shown.loc["A", "M"] != X


def test_means_alone_show_district_a(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(df.pivot_table(index="district", columns="sex", values="income", aggfunc="mean"))
    shown = _shown(out)
    assert _status(out) == "suppressed" and shown.loc["A", "F"] != X
    assert set(np.ravel(shown.loc[["B", "C"]].to_numpy())) == {X}


# ====================================================================== LEAKS on screen, continued
# ---- 21. statistics of a captured polars / DuckDB count table shown raw: the polars describe()
# (min 1, 25% 2) and cum_sum (72, 73 after 70) are 'blocked' row-level data displayed as they are;
# DuckDB SUMMARIZE over the aggregate shows min 1 and q25 2 at 'review'. C M = 1, C F = 2.
def _pl_counts(p: pl.DataFrame) -> pl.DataFrame:
    return p.group_by(["district", "sex"]).len().sort(["district", "sex"])


def _plain_text(out) -> str:
    return out.data["text/plain"].split("sdc_magic:")[0]


# fixed (issue 23.3): describe() of a polars aggregate is withheld, as in pandas
def test_leak_screen_polars_describe_of_a_count_table(sess: Session, p: pl.DataFrame) -> None:
    table = _pl_counts(p)
    sess.publish(table)
    out = sess.publish(table.describe())
    rows = {line.split()[0]: line.split()[-1] for line in _plain_text(out).splitlines() if line.split()}
    assert not (rows.get("min") == "1.000000" and rows.get("25%") == "2.000000")


# fixed (issue 23.3): a column computed from a polars aggregate is withheld (untraced)
def test_leak_screen_polars_cum_sum_of_a_count_table(sess: Session, p: pl.DataFrame) -> None:
    table = _pl_counts(p)
    sess.publish(table)
    out = sess.publish(table.with_columns(c=pl.col("len").cum_sum()))
    last = [line.split()[-1] for line in _plain_text(out).splitlines()[-3:]]
    assert last != ["70", "72", "73"]


# fixed (issue 23.3): SUMMARIZE of an aggregate is withheld, as describe() of one
def test_leak_review_duckdb_summarize_of_an_aggregate(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("summarize (select district, sex, count(*) n from df group by all)"))
    if out.checked is None:
        assert out.metadata["sdc_magic"]["status"] == "blocked" and "SUMMARIZE" in out.data["text/plain"]
        return
    line = next(x.split() for x in _plain_text(out).splitlines() if x.split()[:1] == ["n"])
    assert not (_status(out) != "blocked" and line[2:4] == ["1", "20"] and "2" in line[6:9])


# ---- 15b. duplicated rows in DuckDB (UNION ALL) and polars (concat): 72/71 after 37/36 -> C 2/1;
# two rounds in one DuckDB table: 37/36 and 35/35, all at 'pass'.
@pytest.mark.xfail(strict=True, reason="leak: everyone + everyone but C (UNION ALL / pl.concat) 72/71 after 37/36 -> 2/1")
@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_leak_duplicated_rows_other_engines(sess: Session, df: pd.DataFrame, p: pl.DataFrame, engine: str) -> None:
    if engine == "duckdb":
        first = sess.publish(duckdb.sql("select sex, count(*) n from df group by 1 order by 1"))
        second = sess.publish(duckdb.sql("select sex, count(*) n from (select * from df union all "
                                         "select * from df where district <> 'C') group by 1 order by 1"))
        a, b = _cells(first, "n"), _cells(second, "n")
    else:
        first = sess.publish(p.group_by("sex").len().sort("sex"))
        second = sess.publish(pl.concat([p, p.filter(pl.col("district") != "C")]).group_by("sex").len().sort("sex"))
        a, b = _cells(first, "len"), _cells(second, "len")
    got = None if X in (*a.values(), *b.values()) else {k: 2 * int(a[k]) - int(b[k]) for k in ("F", "M")}
    assert not (_status(second) in CLEARED and got == {"F": 2, "M": 1})


@pytest.mark.xfail(strict=True, reason="leak: DuckDB rounds 1/2 by sex 37/36 and 35/35 in one table -> C 2/1")
def test_leak_duckdb_rounds_in_one_table(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select r, sex, count(*) n from (select 1 r, * from df union all "
                                  "select 2 r, * from df where district <> 'C') group by all order by all"))
    shown = _shown(out)["n"]
    got = None
    if X not in shown.to_numpy():
        got = {k: int(shown.loc[(1, k)]) - int(shown.loc[(2, k)]) for k in ("F", "M")}
    assert not (_status(out) in CLEARED and got == {"F": 2, "M": 1})


# ---- 2b. the other way round: the filtered table's certificate carries its hidden total (71 under
# 100) while its screen shows only A 38; everyone by sex 37 + 36 = 73: 73 - 71 = 2 people over 100.
# fixed: a certificate states no margin its table does not show
def test_leak_certificate_total_of_a_filtered_table(sess: Session, df: pd.DataFrame, tmp_path) -> None:
    first = sess.publish(df.groupby("sex").size())
    second = sess.publish(df[df.age < 100].groupby("district").size())
    sess.export(tmp_path / "out", force=True)
    cert = json.loads((tmp_path / "out" / "out-2.certificate.json").read_text())
    totals = [c["value"] for t in cert["tables"] for c in t["cells"] if c["labels"] == ["Total"] and "value" in c]
    shown = _cells(first)
    recovered = sum(int(v) for v in shown.values()) - totals[0] if totals and X not in shown.values() else None
    assert not (_status(second) in CLEARED and recovered == 2)
    assert not totals and '"value": 71' not in json.dumps(cert["tables"])


# ---- 22. editing values between two outputs (no row removed, so no filter to difference):
# winsorizing age at 90 moves the sums by the excess of the only person above 90 in each sex:
# 2085 - 2073 = 12 -> 102, 1765 - 1754 = 11 -> 101; zeroing person 72's income (an "invalid" value)
# moves the men's sum by exactly his income: 531.80 - 513.75 = 18.05. All at 'pass'.
# (fixed: linking keeps the values each table of a variable's sums published, linking/edits.py)
@pytest.mark.parametrize("stat", ["sum", "mean"])
def test_leak_winsorized_age_gives_the_oldest_ages(sess: Session, df: pd.DataFrame, stat: str) -> None:
    first = sess.publish(df.groupby("sex").age.agg(stat))
    second = sess.publish(df.assign(age=df.age.clip(upper=90)).groupby("sex").age.agg(stat))
    got = _difference(_cells(first), _cells(second))
    if got is not None:
        n = {"F": 37, "M": 36} if stat == "mean" else {"F": 1, "M": 1}
        got = {k: round(90 + v * n[k]) for k, v in got.items()}
    assert not (_status(second) in CLEARED and got == {"F": 102, "M": 101})


def test_leak_value_set_to_zero_between_two_sums(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(df.groupby("sex").income.sum())
    d = df.copy()
    d.loc[d.person == 72, "income"] = 0
    second = sess.publish(d.groupby("sex").income.sum())
    got = _difference(_cells(first), _cells(second))
    assert not (_status(second) in CLEARED and got is not None and abs(got["M"] - PEOPLE.income[72]) < 1e-6)


# stopped: the same edit to NaN (the value is no longer known: a population one person smaller)
def test_stopped_value_set_to_nan_between_two_sums(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(df.groupby("sex").income.sum())
    d = df.copy()
    d.loc[d.person == 72, "income"] = np.nan
    out = sess.publish(d.groupby("sex").income.sum())
    assert _cells(out)["M"] == X


# ---- 6b. the three populations of section 6 side by side in ONE table (overlapping conditional
# counts are not summed against the total): 22 + 17 - 37 = 2, 21 + 16 - 36 = 1, at 'pass'.
def _side_by_side(engine: str, df: pd.DataFrame, p: pl.DataFrame):
    if engine == "duckdb":
        return duckdb.sql("select sex, count(*) n, count(*) filter (where district in ('A', 'C')) ac, "
                          "count(*) filter (where district in ('B', 'C')) bc from df group by 1 order by 1")
    if engine == "polars":
        return p.group_by("sex").agg(pl.len().alias("n"), pl.col("district").is_in(["A", "C"]).sum().alias("ac"),
                                     pl.col("district").is_in(["B", "C"]).sum().alias("bc")).sort("sex")
    return (df.assign(ac=df.district.isin(["A", "C"]), bc=df.district.isin(["B", "C"]))
            .groupby("sex").agg(n=("person", "size"), ac=("ac", "sum"), bc=("bc", "sum")))


# (fixed 2026-12-04: each indicator's rows at its other value are linked too: ac + bc - n hidden)
@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
def test_leak_overlapping_conditional_counts_and_total_in_one_table(sess: Session, df: pd.DataFrame,
                                                                    p: pl.DataFrame, engine: str) -> None:
    out = sess.publish(_side_by_side(engine, df, p))
    n, ac, bc = (_cells(out, c) for c in ("n", "ac", "bc"))
    got = None
    if X not in (*n.values(), *ac.values(), *bc.values()):
        got = {k: int(ac[k]) + int(bc[k]) - int(n[k]) for k in ("F", "M")}
    assert not (_status(out) in CLEARED and got == {"F": 2, "M": 1})


# ---- 23. re-aggregating a captured polars count table by sex (the sex totals 37/36, publishable and
# shown by the same step in pandas) is blocked entirely.
@pytest.mark.xfail(strict=True, reason="overprotection: polars group_by(sex).sum() of the district x sex counts blocked")
def test_overprotection_polars_reaggregation_of_a_count_table(sess: Session, p: pl.DataFrame) -> None:
    table = _pl_counts(p)
    sess.publish(table)
    out = sess.publish(table.group_by("sex").agg(pl.col("len").sum()).sort("sex"))
    assert _cells(out, "len") == {"F": 37, "M": 36}


def test_pandas_reaggregation_of_a_count_table_is_shown(sess: Session, df: pd.DataFrame) -> None:
    table = df.groupby(["district", "sex"]).size()
    sess.publish(table)
    out = sess.publish(table.groupby(level="sex").sum())
    assert _status(out) == "pass" and _cells(out) == {"F": 37, "M": 36}


# ---- 24. a hand-made subtotal block: the district x sex counts with an "All" block (sex totals)
# concatenated below are re-checked as new counts and B / F (15) is shown: 37 - 20 - 15 = 2 at 'review'.
# fixed (issue 23.4): the concat is recomputed from its parents with their hidden cells moved
def test_leak_review_concat_of_counts_and_an_all_block(sess: Session, df: pd.DataFrame) -> None:
    table = df.groupby(["district", "sex"]).size()
    sess.publish(table)
    out = sess.publish(pd.concat([table, pd.concat({"All": df.groupby("sex").size()})]))
    shown = _shown(out)
    cells = {k: shown.loc[k] for k in [("A", "F"), ("B", "F"), ("All", "F")]}
    got = None if X in cells.values() else int(cells[("All", "F")]) - int(cells[("A", "F")]) - int(cells[("B", "F")])
    assert not (_status(out) != "blocked" and got == 2)


# ---- 25. missing values dropped by crosstab / pivot_table: a variable unknown for C's three people
# (here district itself, or flag) silently leaves them out; groupby is linked as a filter, crosstab and
# pivot_table are not. Sex 37/36, then sex x (district known) 20 + 15 = 35 / 35: C is 2 F, 1 M, at 'pass'.
CROSSTABS_WITH_MISSING = {
    "crosstab, district missing for C": lambda d: pd.crosstab(d.sex, d.district.where(d.district != "C")),
    "crosstab, flag missing for C": lambda d: pd.crosstab(d.sex, d.flag.where(d.district != "C")),
    "pivot_table count, margins": lambda d: d.assign(d2=d.district.where(d.district != "C")).pivot_table(
        index="sex", columns="d2", values="person", aggfunc="count", margins=True),
    "groupby(sex).value_counts(), flag missing for C": lambda d: d.assign(f2=d.flag.where(d.district != "C"))
    .groupby("sex").f2.value_counts().unstack(),
}


# (was a leak; fixed: rows of keys the call dropped are outside the table, and a key recoded to
# missing does not make new people)
@pytest.mark.parametrize("how", list(CROSSTABS_WITH_MISSING))
def test_leak_crosstab_drops_missing_values_unlinked(sess: Session, df: pd.DataFrame, how: str) -> None:
    first = sess.publish(df.groupby("sex").size())
    out = sess.publish(CROSSTABS_WITH_MISSING[how](df))
    shown = _shown(out).drop(index="All", errors="ignore").drop(columns="All", errors="ignore")
    got = None
    if X not in np.ravel(shown.to_numpy()):
        got = {k: int(_cells(first)[k]) - int(shown.loc[k].astype(int).sum()) for k in ("F", "M")}
    assert not (_status(out) in CLEARED and got == {"F": 2, "M": 1})


def test_stopped_groupby_drops_missing_keys_as_a_filter(sess: Session, df: pd.DataFrame) -> None:
    sess.publish(df.groupby("sex").size())
    out = sess.publish(df.assign(d2=df.district.where(df.district != "C")).groupby(["sex", "d2"]).size())
    assert _status(out) == "blocked" and set(_cells(out).values()) == {X}


# stopped: the same missing values through the other forms (linked as the rows where the value is known)
MISSING_STOPPED = {
    "duckdb count(col)": lambda d: duckdb.sql("select sex, count(f2) n from d group by 1 order by 1"),
    "polars count": lambda d: pl.from_pandas(d).group_by("sex").agg(pl.col("f2").count()).sort("sex"),
    "polars drop_nulls": lambda d: pl.from_pandas(d).drop_nulls("f2").group_by("sex").len().sort("sex"),
    "pandas dropna": lambda d: d.dropna(subset=["f2"]).groupby("sex").size(),
    "pivot_table count of a column with NaN": lambda d: d.pivot_table(index="sex", values="f2", aggfunc="count"),
    "describe of a column with NaN": lambda d: d.groupby("sex").f2.describe(),
}


@pytest.mark.parametrize("how", list(MISSING_STOPPED))
def test_stopped_missing_values_other_forms(sess: Session, df: pd.DataFrame, how: str) -> None:
    d = df.assign(f2=df.flag.where(df.district != "C"))
    sess.publish(d.groupby("sex").size())
    out = sess.publish(MISSING_STOPPED[how](d))
    assert _status(out) == "blocked" and set(np.ravel(_shown(out).drop(columns="sex", errors="ignore").to_numpy())) == {X}


# ---- 26. padding rows (one dummy row per category, a common trick to keep every category in a
# table): everyone but C plus one dummy woman and man shows 36/36 after 37/36:
# 37 - (36 - 1) = 2, 36 - (36 - 1) = 1, at 'pass'. Fixed (stop 51): the women of the padded copy
# and everyone's differ by 2 rows on one side and 1 on the other (differencing._two_sided).
DUMMY = pd.DataFrame({"person": [-1, -2], "household": [-1, -1], "district": ["Z", "Z"], "sex": ["F", "M"],
                      "age": [0, 0], "flag": [0, 0], "income": [0.0, 0.0]})


@pytest.mark.parametrize("ignore_index", [False, True])
def test_leak_dummy_rows_appended(sess: Session, df: pd.DataFrame, ignore_index: bool) -> None:
    first = sess.publish(df.groupby("sex").size())
    second = sess.publish(pd.concat([df[df.district != "C"], DUMMY], ignore_index=ignore_index).groupby("sex").size())
    got = _difference(_cells(first), _cells(second))
    got = None if got is None else {k: round(v + 1) for k, v in got.items()}
    assert not (_status(second) in CLEARED and got == {"F": 2, "M": 1})


# ---- 27. percent of the total by sex through a scalar subquery (50.68 / 49.32, no small cell) is
# withheld outright, while the same share through a window function is shown raw (section 16).
@pytest.mark.xfail(strict=True, reason="overprotection: percent of total by sex (no small cell) withheld")
def test_overprotection_percent_of_total_by_scalar_subquery(sess: Session, df: pd.DataFrame) -> None:
    out = sess.publish(duckdb.sql("select sex, count(*) * 100.0 / (select count(*) from df) pct from df group by 1 order by 1"))
    assert _status(out) != "blocked"


# ---- stopped: a figure only shown at 'review' does not make a cell public for later cleared tables
def test_stopped_review_output_does_not_make_c_public(sess: Session, df: pd.DataFrame) -> None:
    first = sess.publish(pd.concat([df.groupby("district").size(), pd.Series({"Total": len(df)})]))
    assert _status(first) == "review"
    out = sess.publish(df.groupby("district").size())
    assert _cells(out)["C"] == X and _cells(out)["B"] == X


# ---- stopped: slicing and reshaping a captured district x sex count table keeps B and C hidden
RESHAPES = {
    "xs(F)": lambda t: t.xs("F", level="sex"),
    "swaplevel().sort_index()": lambda t: t.swaplevel().sort_index(),
    "to_frame().T": lambda t: t.to_frame("n").T,
    "unstack().cumsum()": lambda t: t.unstack().cumsum(),
    "groupby(level=0).sum()": lambda t: t.groupby(level=0).sum(),
    "reset_index().groupby(district).sum()": lambda t: t.reset_index(name="n").groupby("district").n.sum(),
    "groupby(level=0).nth(1)": lambda t: t.groupby(level=0).nth(1),
    "astype(float)": lambda t: t.astype(float),
    "value_counts()": lambda t: t.value_counts(),
    "unstack().describe()": lambda t: t.unstack().describe(),
    "groupby(level=0).min()": lambda t: t.groupby(level=0).min(),
}


@pytest.mark.parametrize("name", list(RESHAPES))
def test_stopped_reshapes_of_a_captured_table(sess: Session, df: pd.DataFrame, name: str) -> None:
    table = df.groupby(["district", "sex"]).size()
    sess.publish(table)
    out = sess.publish(RESHAPES[name](table))
    if out.checked is None:  # withheld (describe of a captured table): nothing shown
        assert _status(out) == "blocked"
        return
    shown = _shown(out)
    values = [str(v) for v in np.ravel(shown.to_numpy())]
    # C's 2 and 1 (and B's 15) never appear as cells; value_counts / describe / min hide everything
    assert not {"1", "2", "15", "1.0", "2.0", "15.0"} & set(values)


# (fixed with pandas' padding above: DuckDB UNION ALL / pl.concat of everyone but C and a dummy per sex)
@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_leak_dummy_rows_other_engines(sess: Session, df: pd.DataFrame, p: pl.DataFrame, engine: str) -> None:
    dummy = DUMMY.copy()
    if engine == "duckdb":
        first = sess.publish(duckdb.sql("select sex, count(*) n from df group by 1 order by 1"))
        second = sess.publish(duckdb.sql("select sex, count(*) n from (select * from df where district <> 'C' "
                                         "union all select * from dummy) group by 1 order by 1"))
        a, b = _cells(first, "n"), _cells(second, "n")
    else:
        first = sess.publish(p.group_by("sex").len().sort("sex"))
        second = sess.publish(pl.concat([p.filter(pl.col("district") != "C"), pl.from_pandas(dummy)])
                              .group_by("sex").len().sort("sex"))
        a, b = _cells(first, "len"), _cells(second, "len")
    got = None if X in (*a.values(), *b.values()) else {k: int(a[k]) - int(b[k]) + 1 for k in ("F", "M")}
    assert not (_status(second) in CLEARED and got == {"F": 2, "M": 1})


# ---- 28. row-level releases (set_microdata, k-anonymity) are not linked to the tables of the session:
# sex totals 37/36 (pass), then a k-anonymous release of everyone but C (pass: classes of 15 and 20):
# counting its rows gives 35/35, so C is 2 F / 1 M; two releases of (sex, flag), with and without C,
# differ by C's people: the one man of C has flag 0.
@pytest.mark.xfail(strict=True, reason="leak: sex totals 37/36 - rows of a cleared k-anonymous release without C 35/35 = 2/1")
def test_leak_microdata_release_against_a_table(sess: Session, df: pd.DataFrame) -> None:
    sess.set_microdata(keys=["district", "sex"], k=3)
    first = sess.publish(df.groupby("sex").size())
    release = sess.publish(df[df.district != "C"][["district", "sex", "flag"]])
    released = _shown(release)  # the rows as released (70, unchanged: classes of 15 and 20)
    totals = _cells(first)
    got = None if X in totals.values() else {k: int(v) - int((released.sex == k).sum()) for k, v in totals.items()}
    assert not (_status(release) in CLEARED and got == {"F": 2, "M": 1})


@pytest.mark.xfail(strict=True, reason="leak: two cleared releases of (sex, flag), with and without C: C's man has flag 0")
def test_leak_two_microdata_releases_differ_by_c(sess: Session, df: pd.DataFrame) -> None:
    sess.set_microdata(keys=["sex"], k=3)
    full = sess.publish(df[["sex", "flag"]])
    part = sess.publish(df[df.district != "C"][["sex", "flag"]])
    a, b = _shown(full), _shown(part)  # the rows as released
    men = pd.crosstab(a.sex, a.flag).loc["M"] - pd.crosstab(b.sex, b.flag).loc["M"]
    assert not (_status(full) in CLEARED and _status(part) in CLEARED and men.to_dict() == {0: 1, 1: 0})


# ---- 29. data-driven bin edges as labels: pd.qcut / pd.cut(bins=k) put the minimum and maximum of the
# variable into the first and last labels: "(71.0, 102.0]" is the oldest person's age (the maximum
# itself is blocked as one person's value); "(16.61, 19.99]" the highest income (person 35), at
# 'pass' / 'suppressed'.
BINNED = {
    "qcut(age, 4)": (lambda d: d.groupby(pd.qcut(d.age, 4), observed=True).size(), 102.0),
    "cut(age, 4)": (lambda d: d.groupby(pd.cut(d.age, 4), observed=True).size(), 102.0),
    "crosstab(qcut(income, 3), sex)": (lambda d: pd.crosstab(pd.qcut(d.income, 3), d.sex), float(PEOPLE.income.max())),
}


# (was a leak; fixed: bins whose outer edge is the data's own extreme send the table to review)
@pytest.mark.parametrize("how", list(BINNED))
def test_leak_bin_edges_carry_the_maximum(sess: Session, df: pd.DataFrame, how: str) -> None:
    build, maximum = BINNED[how]
    out = sess.publish(build(df))
    last = _shown(out).index[-1]
    edge = last.right if isinstance(last, pd.Interval) else float(str(last).rstrip("]").split(",")[-1])
    assert not (_status(out) in CLEARED and float(edge) == maximum)
