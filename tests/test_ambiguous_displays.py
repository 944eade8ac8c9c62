"""A displayed table without the capture's mark, whose labels and figures more than one table could give.

A polars result sorted, a DuckDB ``.df()``, a pandas copy reshaped: the registry finds its
evidence by labels and values (equal, or a display of them: rounded, ×100). Red team, stop 55:

- a flag's means by sex over everyone (men 0.4722) and over a copy with one man's flag flipped
  (0.5), both computed, then shown: the second (sorted) matched the first's evidence as a rounding
  of it, "shown again", both ``pass``: (0.5 − 0.4722) × 36 is his flag
  (``test_edited_values.py::test_two_tables_computed_before_either_is_shown``);
- preferring equal values instead matched district C's mean incomes rounded (18, 18: its one man
  at 18.05) with an unrelated count table of those values, ``pass``;
- districts A and B with equal sums by sex, A's shown sorted after B's was computed: taken for
  B's, and A without one person then compared with B's rows, both cleared (older than stop 55;
  closed in stop 56: a copy of one captured table is marked with its entry, and found as it,
  ``capture.contract.mark_origin``).

Now every entry the display could come from is found; when their figures differ (one equal to
the shown ones, another only a rounding of them), the display is checked as a table without
evidence, and its note says why. Entries with the same figures (a table computed again, in another
engine, a flag's sums and the count of its rows) stand for one another, the most recent first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_engines_redteam import PEOPLE

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

ENGINES = ["pandas", "polars", "lazy", "duckdb"]


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _cleared(out: Any) -> bool:
    return _status(out) in ("pass", "suppressed")


def _figure(out: Any, label: str) -> float | None:
    """The figure shown on the row of ``label`` (None: hidden or absent)."""
    for line in out.data["text/plain"].splitlines():
        cells = line.split()
        if label in cells[:2] and len(cells) >= 2:
            try:
                return float(cells[-1].replace(",", ""))
            except ValueError:
                return None
    return None


def _grouped(people: pd.DataFrame, engine: str, where: str, stat: str) -> Any:
    """``stat`` of income (or ``len``) by sex over the rows ``where`` (a pandas query string)."""
    if engine == "pandas":
        rows = people.query(where)
        return rows.groupby("sex").size() if stat == "len" else getattr(rows.groupby("sex").income, stat)()
    if engine == "duckdb":
        what = "count(*) AS n" if stat == "len" else f"{'avg' if stat == 'mean' else stat}(income) AS income"
        sql_where = where.replace("==", "=").replace('"', "'")
        con = duckdb.connect()
        con.register("people", people)
        return con.sql(f"SELECT sex, {what} FROM people WHERE {sql_where} GROUP BY sex ORDER BY sex").df()
    frame = pl.from_pandas(people)
    query = (frame.lazy() if engine == "lazy" else frame).filter(pl.from_pandas(people.eval(where)))
    agg = query.group_by("sex").len() if stat == "len" else query.group_by("sex").agg(getattr(pl.col("income"), stat)())
    table = agg.sort("sex")
    return table.collect() if engine == "lazy" else table


def _rounded(table: Any, decimals: int) -> Any:
    if isinstance(table, pl.DataFrame):
        return table.with_columns(pl.col("income").round(decimals))
    return table.round(decimals)


def _unmarked(table: Any) -> Any:
    """A copy without the capture's mark: sorted the other way."""
    if isinstance(table, pl.DataFrame):
        return table.sort("sex", descending=True)
    if isinstance(table, pd.Series):
        return table.sort_index(ascending=False)
    return table.sort_values("sex", ascending=False)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["means first", "counts first"])
def test_rounded_means_are_not_taken_for_a_count_table_of_those_values(sess: Any, engine: str,
                                                                      order: str) -> None:
    """District C's mean incomes (2 women, 1 man) rounded to whole numbers are (18, 18), as are the
    counts by sex of incomes above 14.5: shown rounded, the means are never cleared with his."""
    means_where, counts_where = 'district == "C"', "income > 14.5"
    if order == "means first":
        means, counts = _grouped(PEOPLE, engine, means_where, "mean"), _grouped(PEOPLE, engine, counts_where, "len")
    else:
        counts, means = _grouped(PEOPLE, engine, counts_where, "len"), _grouped(PEOPLE, engine, means_where, "mean")
    shown = sess.publish(_rounded(means, 0))
    sess.publish(counts)
    assert not (_cleared(shown) and _figure(shown, "M") is not None), shown.data["text/plain"]


def _twins() -> pd.DataFrame:
    """Districts A and B, 10 women and 10 men each, other people, the same sums by sex; person 0
    (A, a woman of 18) the only one over 60."""
    incomes = {("A", "F"): [18, 19, 20, 21, 22, 20, 19, 21, 22, 21], ("A", "M"): [24, 25, 26, 25, 27, 24, 25, 26, 25, 26],
               ("B", "F"): [15, 25, 20, 20, 23, 17, 21, 19, 22, 21], ("B", "M"): [30, 20, 25, 25, 28, 22, 26, 24, 27, 26]}
    rows = [(d, s, float(v)) for (d, s), values in incomes.items() for v in values]
    people = pd.DataFrame(rows, columns=["district", "sex", "income"])
    people.insert(0, "person", range(len(people)))
    people["age"] = np.where(people.person == 0, 70, 40)
    return people


def _copied(table: Any, how: str) -> Any:
    """A copy of ``table`` without the capture's mark, made ``how``."""
    if how == "sorted":
        return _unmarked(table)
    if how == "rounded":
        return _unmarked(_rounded(table, 0))
    if how == "in pandas, last row":  # (a polars table converted by the user; a DuckDB .df())
        frame = table.to_pandas() if isinstance(table, pl.DataFrame) else table
        return _unmarked(frame).tail(1)  # (the women: their sum is the one that differs)
    if how == "a copy":  # (a frame of a pandas table, a polars clone)
        return table.clone() if isinstance(table, pl.DataFrame) else pd.DataFrame(table)
    raise ValueError(how)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["A then B", "B then A"])
@pytest.mark.parametrize("how", ["sorted", "rounded", "in pandas, last row", "a copy"])
def test_equal_tables_of_other_people_are_not_taken_for_each_other(sess: Any, engine: str, order: str,
                                                                   how: str) -> None:
    """A's table shown as a copy (sorted, rounded, converted) after B's, with the same figures, was
    computed: it is A's table (``capture.contract.mark_origin``), and A without one person is
    compared with A's rows, not B's (the women's sum differs by hers: 203 − 185 = 18)."""
    people = _twins()
    tables = {d: None for d in ("A", "B")}
    for d in (order[0], order[-1]):
        tables[d] = _grouped(people, engine, f'district == "{d}"', "sum")
    first = sess.publish(_copied(tables["A"], how))
    second = sess.publish(_grouped(people, engine, 'district == "A" and age <= 60', "sum"))
    women = [_figure(first, "F"), _figure(second, "F")]
    assert not (_cleared(first) and _cleared(second) and None not in women and women[0] != women[1]), \
        [first.data["text/plain"], second.data["text/plain"]]
    assert "more than one table" not in first.data["text/plain"]  # (not over-protected either)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_table_computed_twice_is_the_same_table(sess: Any, engine: str) -> None:
    """Over-protection: the same table computed twice (a cell run again), shown without its mark,
    and the same table in two engines: as before, ``pass`` and shown again."""
    first, again = (_grouped(PEOPLE, engine, "age > 0", "sum") for _ in range(2))
    outs = [sess.publish(_unmarked(first)), sess.publish(_unmarked(again))]
    other = "duckdb" if engine != "duckdb" else "polars"
    outs.append(sess.publish(_unmarked(_grouped(PEOPLE, other, "age > 0", "sum"))))
    assert [_status(o) for o in outs] == ["pass"] * 3, [o.data["text/plain"] for o in outs]
    assert not any("more than one table" in o.data["text/plain"] for o in outs)


def _flags_of_district_a() -> pd.DataFrame:
    """District A: 19 women (9 flagged) and 20 men; person 18, an unflagged woman, the only one over 60.
    The women's mean flag is 9/19 = 0.4737 with her, 9/18 = 0.5 without: a rounding of it."""
    rows = [("F", 1 if i < 9 else 0) for i in range(19)] + [("M", 1 if i < 8 else 0) for i in range(20)]
    people = pd.DataFrame(rows, columns=["sex", "flag"])
    people.insert(0, "person", range(len(people)))
    people["age"] = np.where(people.person == 18, 70, 40)
    return people


@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
def test_another_tables_figures_spliced_into_a_copy(sess: Any, engine: str) -> None:
    """Red team (stop 56): a copy of A (all of district A) is marked as A's; the figures of A
    without person 18 put into it (``assign``, ``with_columns(series)``, ``c[col] = ...``) are a
    rounding of A's, and were checked as A's: both ``pass``, 19 × 0.4737 − 18 × 0.5 = her flag.
    Only figures equal to the copy's table are taken as its own without looking further."""
    people = _flags_of_district_a()
    everyone, without_her = people, people[people.age <= 60]
    if engine == "pandas":
        a, a2 = (p.groupby("sex").flag.mean() for p in (everyone, without_her))
        spliced = a.to_frame().assign(flag=a2)
    elif engine == "polars":
        a, a2 = (pl.from_pandas(p).group_by("sex").agg(pl.col("flag").mean()).sort("sex")
                 for p in (everyone, without_her))
        spliced = a.with_columns(a2["flag"])
    else:
        con = duckdb.connect()
        con.register("everyone", everyone)
        con.register("without_her", without_her)
        a, a2 = (con.sql(f"SELECT sex, avg(flag) AS flag FROM {t} GROUP BY sex ORDER BY sex").df()
                 for t in ("everyone", "without_her"))
        spliced = a.copy()
        spliced["flag"] = a2["flag"]
    first, second = sess.publish(a), sess.publish(spliced)
    assert not (_cleared(first) and _cleared(second) and _figure(second, "F") == 0.5), \
        [first.data["text/plain"], second.data["text/plain"]]


@pytest.mark.parametrize("how", ["fillna", "setitem", "polars fill_null"])
def test_an_empty_groups_figure_filled_with_a_persons_value(sess: Any, how: str) -> None:
    """Red team (stop 56): a recorded missing figure (a group whose incomes are all missing) was
    taken to match whatever the display showed there: filled with the one man of district C's
    income, the table was checked as the captured one and ``pass`` with 18.05 in it. A missing
    figure now matches a missing one, or 0 (``fillna(0)``)."""
    people = PEOPLE.copy()
    secret = float(people[(people.district == "C") & (people.sex == "M")].income.iloc[0])
    people.loc[(people.district == "B") & (people.sex == "F"), "income"] = np.nan
    rows = people[people.district != "C"]
    if how == "polars fill_null":
        table = pl.from_pandas(rows).group_by("district", "sex").agg(pl.col("income").mean()).sort("district", "sex")
        shown = table.with_columns(pl.col("income").fill_null(secret))
    else:
        means = rows.groupby(["district", "sex"]).income.mean()
        if how == "fillna":
            shown = means.fillna(secret)
        else:
            shown = means.copy()
            shown.loc[("B", "F")] = secret
    out = sess.publish(shown)
    assert not (_cleared(out) and f"{secret}" in out.data["text/plain"]), out.data["text/plain"]


@pytest.mark.parametrize("placeholder", [0, -1])
def test_an_empty_groups_figure_shown_as_a_placeholder(sess: Any, placeholder: int) -> None:
    """Over-protection: an empty group's missing mean filled with 0 or −1 (a placeholder, no
    one's value) is the table as it was captured: ``pass`` as the table itself."""
    people = PEOPLE.copy()
    people.loc[(people.district == "B") & (people.sex == "F"), "income"] = np.nan
    means = people[people.district != "C"].groupby(["district", "sex"]).income.mean()
    assert _status(sess.publish(means.fillna(placeholder))) == _status(sess.publish(means)) == "pass"
