"""Conditional counts side by side: their sum against a total, in either order, any engine.

73 people: A 40 (20 F / 20 M), B 30 (15 / 15), C 3 (2 F / 1 M). Counts of A and of B per
sex, beside each other, plus the count per sex (in the same table or another output)
give C = 37 - 20 - 15 = 2 women and 36 - 20 - 15 = 1 man.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")
sys.path.insert(0, str(Path(__file__).parent))

from test_engines_redteam import PEOPLE  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402
from sdc_magic.outputs.render import protected_frame  # noqa: E402

X = "✕"
df = PEOPLE.copy()
P = pl.from_pandas(df)


def _frame(out) -> pd.DataFrame:
    frame = protected_frame(out.checked)
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    return frame.set_index("sex") if "sex" in frame.columns else frame


def _a_and_b(engine: str):
    if engine == "polars":
        return P.group_by("sex").agg(pl.col("person").filter(pl.col("district") == "A").count().alias("a"),
                                     pl.col("person").filter(pl.col("district") == "B").count().alias("b")).sort("sex")
    if engine == "duckdb":
        return duckdb.sql("select sex, count(*) filter (where district = 'A') a, "
                          "count(*) filter (where district = 'B') b from df group by sex order by 1")
    return df.assign(a=df.district.eq("A"), b=df.district.eq("B")).groupby("sex")[["a", "b"]].sum()


def _recovered(total: pd.Series, ab: pd.DataFrame) -> dict | None:
    cells = [total["F"], total["M"], ab.loc["F", "a"], ab.loc["F", "b"], ab.loc["M", "a"], ab.loc["M", "b"]]
    if X in cells:
        return None
    return {s: int(total[s]) - int(ab.loc[s, "a"]) - int(ab.loc[s, "b"]) for s in ("F", "M")}


@pytest.mark.parametrize("engine", ["polars", "duckdb", "pandas"])
@pytest.mark.parametrize("order", ["total first", "total after"])
def test_two_conditional_counts_against_a_total(engine: str, order: str) -> None:
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        total_table = lambda: df.groupby("sex").size().rename("n")  # noqa: E731
        if order == "total first":
            total, ab = s.publish(total_table()), s.publish(_a_and_b(engine))
        else:
            ab, total = s.publish(_a_and_b(engine)), s.publish(total_table())
        got = _recovered(_frame(total)["n"], _frame(ab))
        assert got != {"F": 2, "M": 1}
        assert got is None
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
def test_the_total_in_the_same_table(engine: str) -> None:
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        if engine == "polars":
            q = P.group_by("sex").agg(pl.len().alias("n"),
                                      pl.col("person").filter(pl.col("district") == "A").count().alias("a"),
                                      pl.col("person").filter(pl.col("district") == "B").count().alias("b")).sort("sex")
        else:
            q = duckdb.sql("select sex, count(*) n, count(*) filter (where district = 'A') a, "
                           "count(*) filter (where district = 'B') b from df group by sex order by 1")
        shown = _frame(s.publish(q))
        assert _recovered(shown["n"], shown) is None
    finally:
        s.capture.uninstall()


def test_overlapping_conditions_are_not_summed() -> None:
    """age < 50 and district A overlap: they are no partition, nothing is derived from their sum
    (over-protection check: both columns stay)."""
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        s.publish(df[df.district != "C"].groupby("sex").size().rename("n"))
        q = duckdb.sql("select sex, count(*) filter (where age < 50) y, count(*) filter (where district = 'A') a "
                       "from df where district <> 'C' group by sex order by 1")
        shown = _frame(s.publish(q))
        assert X not in shown.to_numpy().ravel().tolist()
    finally:
        s.capture.uninstall()


def _flags_a_and_b(engine: str):
    """A and B side by side as sums of 0/1 flags (polars counts ``col.filter(c).count()``, the rows
    where a column is known, by rows: ``_a_and_b``)."""
    if engine == "polars":
        return P.group_by("sex").agg((pl.col("district") == "A").sum().alias("a"),
                                     (pl.col("district") == "B").sum().alias("b")).sort("sex")
    return _a_and_b(engine)


def _total(engine: str):
    if engine == "polars":
        return P.group_by("sex").agg(pl.len().alias("n")).sort("sex")
    return duckdb.sql("select sex, count(*) n from df group by sex order by 1")


@pytest.mark.parametrize("engine", ["polars", "duckdb"])
@pytest.mark.parametrize("order", ["total first", "total after"])
def test_counted_in_the_engine_two_conditional_counts_against_a_total(engine: str, order: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, every table counted in the engine (stop 63): disjoint conditions side by side are
    one population over (sex, condition) there too (``InEngineRows.variants[("combined", …)]``);
    until then such a table was read by rows and, beside tables counted in the engine, ``review``."""
    from linking_checks import engine_universes, last_rows

    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.evidence.in_engine import InEngineRows

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        outs = {}
        for name in (["total", "ab"] if order == "total first" else ["ab", "total"]):
            outs[name] = s.publish(_total(engine) if name == "total" else _flags_a_and_b(engine))
            assert isinstance(last_rows(s), InEngineRows), f"{name} not counted in {engine}"
        assert len(engine_universes(s)) == 1
        assert _recovered(_frame(outs["total"])["n"], _frame(outs["ab"])) is None
        assert "review" not in {o.metadata["sdc_magic"]["status"] for o in outs.values()}
    finally:
        s.capture.uninstall()
