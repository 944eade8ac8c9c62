"""polars and DuckDB capture in-process: same decisions as pandas, results untouched,
wrappers removed exactly, fail closed, and the extension without the engines installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.datasets import make_referrals  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402

G3 = ["admin2", "case_category", "age_band"]
G4 = [*G3, "sex"]


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return make_referrals()


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _decision(s: Session, obj) -> tuple[str, str, int, tuple]:
    """Primary rules only (protection is the shared pipeline's, tested with pandas)."""
    c = s.check(obj, protect=False)
    return c.status, c.kind, c.primary_count, tuple(sorted(c.reason_summary().items()))


def test_same_primary_cells_as_pandas(sess: Session, data: pd.DataFrame) -> None:
    df = data
    p = pl.from_pandas(data)
    cases = [
        (df.groupby(G4).size(), p.group_by(G4).len(),
         duckdb.sql("select admin2, case_category, age_band, sex, count(*) n from df group by all")),
        (df.groupby(G3)["days_to_first_service"].sum(),
         p.group_by(G3).agg(pl.col("days_to_first_service").sum()),
         duckdb.sql("select admin2, case_category, age_band, sum(days_to_first_service) s from df group by all")),
        (df.groupby(G3[:2])["age"].max(), p.group_by(G3[:2]).agg(pl.col("age").max()),
         duckdb.sql("select admin2, case_category, max(age) m from df group by 1, 2")),
    ]
    for pandas_obj, polars_obj, duck_obj in cases:
        expected = _decision(sess, pandas_obj)
        assert expected[2] > 0
        assert _decision(sess, polars_obj) == expected
        assert _decision(sess, duck_obj) == expected


def test_units_and_dominance_as_pandas(data: pd.DataFrame) -> None:
    s = Session(rules=preset("insee"))
    s.set_rules(unit="household_id")
    s.capture.install()
    try:
        df = data
        p = pl.from_pandas(data)
        for pandas_obj, polars_obj, duck_obj in [
            (df.groupby(G3).size(), p.group_by(G3).len(),
             duckdb.sql("select admin2, case_category, age_band, count(*) n from df group by all")),
            (df.groupby(G3)["days_to_first_service"].sum(),
             p.group_by(G3).agg(pl.col("days_to_first_service").sum()),
             duckdb.sql("select admin2, case_category, age_band, sum(days_to_first_service) s from df group by all")),
        ]:
            expected = _decision(s, pandas_obj)
            assert expected[2] > 0
            assert _decision(s, polars_obj) == expected
            assert _decision(s, duck_obj) == expected
    finally:
        s.capture.uninstall()


def test_results_are_the_engines_own(sess: Session, data: pd.DataFrame) -> None:
    p = pl.from_pandas(data)
    got = p.group_by(G3, maintain_order=True).agg(pl.col("age").mean(), pl.len())
    q = "select admin2, sex, count(*) n, avg(age) a from data group by all order by admin2, sex"
    duck = duckdb.sql(q).df()
    sess.capture.uninstall()
    assert got.equals(p.group_by(G3, maintain_order=True).agg(pl.col("age").mean(), pl.len()))
    pd.testing.assert_frame_equal(duck, duckdb.sql(q).df())


def test_uninstall_restores_every_wrapped_name(data: pd.DataFrame) -> None:
    from polars.dataframe.group_by import GroupBy

    before = (GroupBy.agg, pl.DataFrame.pivot, pl.Series.value_counts, pl.LazyFrame.collect, duckdb.sql,
              duckdb.query, duckdb.DuckDBPyConnection.sql, duckdb.DuckDBPyRelation.df)
    s = Session()
    s.capture.install()
    assert GroupBy.agg is not before[0] and duckdb.sql is not before[4]
    s.capture.uninstall()
    after = (GroupBy.agg, pl.DataFrame.pivot, pl.Series.value_counts, pl.LazyFrame.collect, duckdb.sql,
             duckdb.query, duckdb.DuckDBPyConnection.sql, duckdb.DuckDBPyRelation.df)
    assert all(a is b for a, b in zip(before, after, strict=True))


def test_queries_it_does_not_understand_still_run(sess: Session, data: pd.DataFrame) -> None:
    df = data  # noqa: F841 - DuckDB finds it by name
    rel = duckdb.sql("select admin2, count(*) n from df group by admin2, sex")  # a key not in the result
    assert len(rel.df()) > 0
    c = sess.check(rel)
    assert c.status in ("blocked", "review")  # no evidence: checked as unverified, never cleared
    rel = duckdb.sql("select admin2, count(*) over (partition by admin2) n from df")
    assert sess.check(rel).status == "blocked"


def test_lazy_plan_is_withheld_with_its_reason(sess: Session, data: pd.DataFrame) -> None:
    lazy = pl.from_pandas(data).lazy().filter(pl.col("age") > 3)
    published = sess.publish(lazy, record=False)
    meta = published.metadata["sdc_magic"]
    assert meta["status"] == "blocked"
    assert any("query plan" in n for n in meta["notes"])
    assert "Mirebalais" not in published.data["text/html"]
    # a documented case with its own advice, not a failure to report (issue 24.6)
    assert "collect()" in published.data["text/plain"] and "bug" not in published.data["text/plain"]


def test_large_relation_is_limited_to_what_a_display_shows(sess: Session) -> None:
    rel = duckdb.sql("select range % 7 as a, range as b from range(1000000)")
    c = sess.check(rel)
    assert len(c.frame) <= (pd.get_option("display.max_rows") or 60) + 1
    assert any("first" in n for n in c.notes)


def test_numbers_without_evidence_are_unverified_counts(sess: Session) -> None:
    c = sess.check(pl.DataFrame({"n": [1, 12, 40]}))
    assert c.kind == "unverified" and c.status in ("review", "suppressed", "blocked")
    assert bool(np.asarray(c.hidden).reshape(-1)[0])


def test_extension_works_without_the_engines(tmp_path) -> None:
    code = textwrap.dedent("""
        import sys, importlib.abc
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split('.')[0] in ('polars', 'duckdb', 'sqlglot', 'pyarrow'):
                    raise ModuleNotFoundError(name)
                return None
        sys.meta_path.insert(0, Block())
        from IPython.testing.globalipapp import start_ipython
        ip = start_ipython()
        ip.run_line_magic('load_ext', 'sdc_magic')
        import pandas as pd
        from sdc_magic.jupyter.extension import session
        df = pd.DataFrame({'a': list('xxxxxxy'), 'b': range(7)})
        c = session().check(df.groupby('a').size())
        assert c.primary_count == 1, c
        assert 'polars' not in sys.modules and 'duckdb' not in sys.modules
        ip.run_line_magic('unload_ext', 'sdc_magic')
        print('ok')
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"SDC_MAGIC_CONFIG": "", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_every_fetch_of_a_captured_relation_gives_only_the_users_columns(sess: Session) -> None:
    df = pd.DataFrame({"a": list("xxyyz"), "v": [1.0, 2.0, 3.0, 4.0, 5.0]})  # noqa: F841 - found by name
    for method in ("df", "to_df", "fetchdf", "pl", "arrow", "to_arrow_table", "fetchall", "fetchnumpy"):
        rel = duckdb.sql("select a, sum(v) s from df group by all")
        if not hasattr(rel, method):
            continue
        result = getattr(rel, method)()
        if hasattr(result, "read_all"):
            result = result.read_all()
        if isinstance(result, list):
            assert all(len(row) == 2 for row in result), method
            continue
        cols = list(result.keys()) if isinstance(result, dict) else list(getattr(result, "column_names", None)
                                                                          or result.columns)
        assert cols == ["a", "s"], (method, cols)
