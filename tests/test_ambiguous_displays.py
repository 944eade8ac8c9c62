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
  still open in polars and DuckDB: marked ``xfail`` below).

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


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("order", ["A then B", "B then A"])
def test_equal_tables_of_other_people_are_not_taken_for_each_other(sess: Any, engine: str, order: str,
                                                                   request: Any) -> None:
    if engine != "pandas" and order == "A then B":
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=(
            "leak (older than stop 55): A's table shown unmarked (a sorted polars frame, a DuckDB .df()) "
            "is taken for B's, computed last, whose figures are the same; A without one person is then "
            "compared with B's rows. Telling them apart needs the polars and DuckDB results marked with "
            "their entry, as pandas' are (matching them by rows made every DuckDB table whose figures "
            "an earlier one had review)")))
    people = _twins()
    tables = {d: None for d in ("A", "B")}
    for d in (order[0], order[-1]):
        tables[d] = _grouped(people, engine, f'district == "{d}"', "sum")
    first = sess.publish(_unmarked(tables["A"]))
    second = sess.publish(_grouped(people, engine, 'district == "A" and age <= 60', "sum"))
    women = [_figure(first, "F"), _figure(second, "F")]
    assert not (_cleared(first) and _cleared(second) and None not in women and women[0] != women[1]), \
        [first.data["text/plain"], second.data["text/plain"]]


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
