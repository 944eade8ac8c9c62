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


def _people(data: pd.DataFrame | None = None):
    """A DuckDB connection with ``data`` (the 73 people by default) as the table ``people``."""
    con = duckdb.connect()
    con.register("src", df if data is None else data)
    con.execute("CREATE TABLE people AS SELECT * FROM src")
    return con


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


def _shown_c(out) -> list[int] | None:
    """C's women and men by subtraction from n and the shares of A and B, None when a cell is hidden."""
    shown = protected_frame(out.checked)
    n, a, b = shown["n"].tolist(), shown["a"].tolist(), shown["b"].tolist()
    if X in n + a + b:
        return None
    return [round(nn - nn * aa - nn * bb) for nn, aa, bb in zip(n, a, b, strict=True)]


@pytest.mark.parametrize("constant", ["(age > 200)", "(age >= 18)"], ids=["never set", "always set"])
@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_constant_indicator_beside_disjoint_ones_keeps_them_compared(engine: str, constant: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team of stop 63 (helper-81): n, the shares of A and of B and a flag's mean by sex,
    counted in the engine, with one more indicator that is constant over the rows (``avg(flag)``
    under ``WHERE flag = 1`` is one). Its population had no group, the first count of the base was
    asked for column names, failed, and the base's record was let go mid-display: the table was
    ``pass`` with C = 37 − 20 − 15 = 2 women and 36 − 20 − 15 = 1 man."""
    from sdc_magic.evidence import rows as row_limits

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        if engine == "duckdb":
            con = _people()
            q = con.sql("select sex, count(*) n, avg((district = 'A')::int) a, avg((district = 'B')::int) b, "
                        f"avg(flag) f, avg({constant}::int) z from people group by 1 order by 1")
        else:
            test = pl.col("age") > 200 if constant == "(age > 200)" else pl.col("age") >= 18
            q = P.group_by("sex").agg(pl.len().alias("n"), (pl.col("district") == "A").cast(pl.Int64).mean().alias("a"),
                                      (pl.col("district") == "B").cast(pl.Int64).mean().alias("b"),
                                      pl.col("flag").mean().alias("f"), test.cast(pl.Int64).mean().alias("z")).sort("sex")
        out = s.publish(q)
        assert _shown_c(out) is None, out.metadata["sdc_magic"]["status"]
    finally:
        s.capture.uninstall()


def test_a_population_that_cannot_be_counted_leaves_the_table_review(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever makes a population of a table counted in the engine fail (here: every first count
    of a base), the table is not cleared as if its populations had been compared side by side."""
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.linking import in_engine as linking_in_engine

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the engine is gone")

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    monkeypatch.setattr(linking_in_engine, "_from_groups", broken)
    con = _people()
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        out = s.publish(con.sql("select sex, count(*) n, avg((district = 'A')::int) a, avg((district = 'B')::int) b, "
                                "avg(flag) f from people group by 1 order by 1"))
        assert _shown_c(out) is None or out.metadata["sdc_magic"]["status"] in ("review", "blocked")
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize(("engine", "path"), [(e, p) for e in ("duckdb", "polars", "pandas")
                                               for p in ("by rows", "in the engine")
                                               if e != "pandas" or p == "by rows"])  # (pandas: rows only)
def test_a_flag_beside_a_partition_keeps_the_partition_summed(engine: str, path: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team of stop 63 (helper-81), on both paths before: A under 50, A over 50 and B beside the
    count, with a flag that overlaps them. One population over every indicator was no partition, so
    none was linked: n − a1 − a2 − b = 37 − 8 − 12 − 15 = C's 2 women (36 − 11 − 9 − 15: 1 man) at
    ``pass``. Each largest set of indicators whose rows never meet is now one population."""
    from sdc_magic.evidence import rows as row_limits

    if path == "in the engine":
        monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        if engine == "duckdb":
            con = _people()
            q = con.sql("select sex, count(*) n, sum((district = 'A' and age < 50)::int) a1, "
                        "sum((district = 'A' and age >= 50)::int) a2, sum((district = 'B')::int) b, sum(flag) f "
                        "from people group by 1 order by 1")
        elif engine == "polars":
            F = pl.col
            q = P.group_by("sex").agg(pl.len().alias("n"),
                                      ((F("district") == "A") & (F("age") < 50)).cast(pl.Int64).sum().alias("a1"),
                                      ((F("district") == "A") & (F("age") >= 50)).cast(pl.Int64).sum().alias("a2"),
                                      (F("district") == "B").cast(pl.Int64).sum().alias("b"),
                                      F("flag").sum().alias("f")).sort("sex")
        else:
            q = df.assign(a1=(df.district == "A") & (df.age < 50), a2=(df.district == "A") & (df.age >= 50),
                          b=df.district == "B").groupby("sex").agg(n=("a1", "size"), a1=("a1", "sum"),
                                                                    a2=("a2", "sum"), b=("b", "sum"), f=("flag", "sum"))
        out = s.publish(q)
        shown = _frame(out)
        cells = [shown.loc[x, c] for x in ("F", "M") for c in ("n", "a1", "a2", "b")]
        recovered = None if X in cells else \
            [int(shown.loc[x, "n"]) - int(shown.loc[x, "a1"]) - int(shown.loc[x, "a2"]) - int(shown.loc[x, "b"])
             for x in ("F", "M")]
        assert recovered is None, (out.metadata["sdc_magic"]["status"], recovered)
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_more_sets_of_disjoint_indicators_than_are_linked_leave_the_table_review(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team of stop 63 (helper-82): five complementary pairs side by side are five sets whose
    rows never meet, one more than are linked (``MAX_DISJOINT_SETS``); the engine's capture gave
    the table up to be read by rows, and above ``MAX_FETCHED_ROWS`` (5.1M rows) it was not linked
    at all: ``pass``, n − a − b = C's people. It is counted in the engine, and ``review``."""
    from sdc_magic.evidence import rows as row_limits
    from sdc_magic.evidence.in_engine import MAX_DISJOINT_SETS

    monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    tests = ["(age >= 40)", "(flag = 1)", "(income > 15)", "(person % 2 = 0)", "(household % 3 = 0)"]
    assert len(tests) > MAX_DISJOINT_SETS
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        if engine == "duckdb":
            con = _people()
            pairs = "".join(f", sum({t}::int) y{i}, sum((NOT {t})::int) n{i}" for i, t in enumerate(tests))
            q = con.sql(f"select sex, count(*) n{pairs} from people group by 1 order by 1")
        else:
            F = pl.col
            made = [F("age") >= 40, F("flag") == 1, F("income") > 15, F("person") % 2 == 0, F("household") % 3 == 0]
            aggs = [pl.len().alias("n")] + [x for i, t in enumerate(made) for x in
                                             (t.cast(pl.Int64).sum().alias(f"y{i}"), (~t).cast(pl.Int64).sum().alias(f"n{i}"))]
            q = P.group_by("sex").agg(aggs).sort("sex")
        out = s.publish(q)
        assert out.metadata["sdc_magic"]["status"] in ("review", "blocked"), out.metadata["sdc_magic"]
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("path", ["by rows", "in the engine"])
def test_a_wide_source_keeps_its_columns_side_by_side_compared(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team of stop 63 (helper-82): a DuckDB table of 14 columns, n and the counts of A and B by
    sex. More than ``MAX_HASHED`` columns of its rows were read, the derived measures' columns
    among them, and their hashes asked of the source by name failed: the table was not linked, its
    columns side by side uncompared, ``pass`` with n − a − b = C's 2 women and 1 man."""
    from sdc_magic.evidence import rows as row_limits

    if path == "in the engine":
        monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    data = df.copy()
    for j in range(7):
        data[f"x{j}"] = data["age"] + j
    con = _people(data)
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        out = s.publish(con.sql("select sex, count(*) n, sum((district = 'A')::int) a, sum((district = 'B')::int) b "
                                "from people group by 1 order by 1"))
        shown = _frame(out)
        assert _recovered(shown["n"], shown) is None, out.metadata["sdc_magic"]["status"]
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("path", ["by rows", "in the engine"])
def test_a_table_of_many_populations_does_not_push_an_earlier_total_out_of_the_audit(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team of stop 63 (helper-82): the joint audit took the eight newest related populations,
    and one table of n and four rates publishes nine: the first table (23 people under 40) fell
    out, and 23 + 27 + 23 − 70 = C's 3 people at ``pass``. It takes the eight newest outputs."""
    import numpy as np

    from sdc_magic.evidence import rows as row_limits

    if path == "in the engine":
        monkeypatch.setattr(row_limits, "IN_ENGINE_ROWS", 10)
    data = df.copy()
    data["urgent"] = np.random.default_rng(5).integers(0, 2, len(data))
    con = _people(data)
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        outs = [s.publish(con.sql(q)) for q in (
            "select count(*) n from people where age < 40",
            "select sex, count(*) n, avg(flag) f, avg(urgent) u, avg((income > 15)::int) i, avg((age >= 60)::int) o "
            "from people where age >= 40 group by 1 order by 1",
            "select count(*) n from people where district in ('A', 'B')")]
        values = [protected_frame(o.checked)["n"].tolist() for o in outs]
        shown = X not in [v for vs in values for v in vs]
        assert not shown or sum(values[0]) + sum(values[1]) - sum(values[2]) != 3, \
            [o.metadata["sdc_magic"]["status"] for o in outs]
    finally:
        s.capture.uninstall()
