"""polars SQL checked with DuckDB's evidence of the same query (capture/polars/sql.py).

Before: every ``df.sql`` / ``pl.sql`` aggregate was ``review`` without evidence, and differencing
between it and another table was not caught (the overall sex counts after the same counts
outside district C gave C's two women and one man at ``review``). Now the query runs once more in
DuckDB over the same frames; when DuckDB computes the same rows, its evidence and linking rows are
the polars table's, so the verdicts are those of the same table in pandas.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("duckdb")

from sdc_magic.jupyter.session import Session  # noqa: E402


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _hidden(out: Any) -> int:
    return int(out.metadata["sdc_magic"]["hidden"])


def _notes(out: Any) -> str:
    return " ".join(out.metadata["sdc_magic"].get("notes", []))


# (polars SQL over the people, the same table in pandas)
SAME_TABLES = [
    ("select district, count(*) as n from self group by district",
     lambda d: d.groupby("district").size()),
    ("select district, sex, count(*) as n from self group by district, sex",
     lambda d: d.groupby(["district", "sex"]).size()),
    ("select district, sex, count(*) as n from self group by 1, 2",
     lambda d: d.groupby(["district", "sex"]).size()),
    ("select district, avg(income) as income from self group by district",
     lambda d: d.groupby("district").income.mean()),
    ("select district, sum(income) as income from self group by district",
     lambda d: d.groupby("district").income.sum()),
    ("select district, count(*) as n from self where sex = 'F' group by district",
     lambda d: d[d.sex == "F"].groupby("district").size()),
    ("select sex, count(*) as n from self where age between 20 and 60 group by sex",
     lambda d: d[(d.age >= 20) & (d.age <= 60)].groupby("sex").size()),
    ("select district, max(age) as m from self group by district",
     lambda d: d.groupby("district").age.max()),
    ("select s.district, count(*) as n from self s where s.sex = 'F' group by s.district",
     lambda d: d[d.sex == "F"].groupby("district").size()),
    ("select district, sex, avg(income) as income from self group by all",
     lambda d: d.groupby(["district", "sex"]).income.mean()),
    ("select district as region, count(*) as n from self where sex = 'M' group by district order by region",
     lambda d: d[d.sex == "M"].groupby("district").size()),
]


@pytest.mark.parametrize(("query", "pandas_table"), SAME_TABLES)
def test_a_polars_sql_table_gets_the_verdict_of_the_same_pandas_table(df: pd.DataFrame, p: Any, query: str,
                                                                      pandas_table: Any) -> None:
    from sdc_magic.config import preset

    verdicts = []
    for make in (lambda: p.sql(query), lambda: pandas_table(df)):
        sess = Session(rules=preset("humanitarian"))
        sess.capture.install()
        try:
            out = sess.publish(make())
            verdicts.append((_status(out), _hidden(out)))
            if len(verdicts) == 1:
                assert "without evidence" not in _notes(out), _notes(out)
        finally:
            sess.capture.uninstall()
    assert verdicts[0] == verdicts[1], (query, verdicts)
    assert verdicts[0][0] != "review"


def test_pl_sql_reads_the_callers_frames_lazily_and_eagerly(sess: Session, p: Any) -> None:
    people = p
    lazy = pl.sql("select district, count(*) as n from people group by district")
    assert isinstance(lazy, pl.LazyFrame)
    out = sess.publish(lazy.collect())
    assert (_status(out), _hidden(out)) == ("suppressed", 2)
    eager = pl.sql("select district, sex, count(*) as n from people group by district, sex", eager=True)
    out = sess.publish(eager)
    assert _status(out) == "suppressed" and "without evidence" not in _notes(out)
    assert people is p  # (the caller's names are read, never changed)


@pytest.mark.parametrize("first", ["pandas", "polars sql"])
def test_differencing_between_polars_sql_and_pandas_is_caught(sess: Session, df: pd.DataFrame, p: Any,
                                                              first: str) -> None:
    """Everyone's sex counts beside those outside district C give C's people away (2 F, 1 M)."""
    outside = "select sex, count(*) as n from self where district <> 'C' group by sex"
    tables = [lambda: df.groupby("sex").size(), lambda: p.sql(outside)]
    if first == "polars sql":
        tables.reverse()
    outs = [sess.publish(make()) for make in tables]
    assert _status(outs[0]) == "pass"
    assert _status(outs[1]) in {"suppressed", "blocked"}, _notes(outs[1])
    text = outs[1].data["text/plain"].split("sdc_magic:")[0]
    assert not any(str(v) in text for v in (36, 35, 38, 37)), text  # (everyone: 38 F, 35 M; outside C: 36, 34)


def test_differencing_after_a_having_that_drops_a_small_group(sess: Session, p: Any) -> None:
    """HAVING drops C (3 people); the total of everyone then gives it away: 73 - 40 - 30."""
    groups = sess.publish(p.sql("select district, count(*) as n from self group by district having count(*) > 3"))
    assert _status(groups) == "pass"
    total = sess.publish(p.sql("select count(*) as n from self"))
    assert _status(total) in {"suppressed", "blocked"}, _notes(total)
    assert "73" not in total.data["text/plain"].split("sdc_magic:")[0]


def test_two_polars_sql_tables_are_linked_to_each_other(sess: Session, p: Any) -> None:
    sess.publish(p.sql("select sex, count(*) as n from self where district <> 'C' group by sex"))
    out = sess.publish(p.sql("select sex, count(*) as n from self group by sex"))
    assert _status(out) in {"suppressed", "blocked"}, _notes(out)


def test_a_query_duckdb_computes_differently_stays_untraced(sess: Session, p: Any) -> None:
    """``avg(age)::int`` truncates in polars (52) and rounds in DuckDB (53). As a plain grouped
    query it is run as the polars calls it stands for (polars' own reading: checked); with a
    LIMIT it goes to DuckDB, whose evidence is not polars' table: checked as before, without evidence."""
    out = sess.publish(p.sql("select district, avg(age)::int as n from self group by district order by district "
                             "limit 3"))
    assert _status(out) == "review" and "without evidence" in _notes(out)
    assert any("differs from polars" in f for f in sess.capture.registry.failures)
    plain = sess.publish(p.sql("select district, avg(age)::int as n from self group by district"))
    assert _status(plain) in {"pass", "suppressed"} and "without evidence" not in _notes(plain)


def test_frames_duckdb_cannot_read_as_they_are_stay_untraced(sess: Session, p: Any) -> None:
    lazy_people = p.lazy()  # noqa: F841 (pl.sql reads it by its name)
    out = sess.publish(pl.sql("select district, count(*) as n from lazy_people group by district").collect())
    assert _status(out) == "review" and "without evidence" in _notes(out)
    ctx = pl.SQLContext(t=p)
    out = sess.publish(ctx.execute("select district, count(*) as n from t group by district", eager=True))
    assert _status(out) == "review"


def test_the_users_polars_result_is_untouched(sess: Session, p: Any) -> None:
    query = "select district, sex, count(*) as n, avg(income) as income from self group by district, sex " \
            "order by district, sex"
    before = p.clone()
    with_ext = p.sql(query)
    sess.capture.uninstall()
    try:
        plain = p.sql(query)
    finally:
        sess.capture.install()
    assert _same_up_to_the_order_of_addition(with_ext, plain) and p.equals(before)
    sess.publish(with_ext)
    assert _same_up_to_the_order_of_addition(with_ext, plain)


def _same_up_to_the_order_of_addition(left: Any, right: Any) -> bool:
    """Equal frames, floats to a relative 1e-12: polars 2.2 adds a group's rows in another order
    on each call (plain ``avg(income)`` gave 3 different last bits in 20 runs), so two plain runs
    of the query are not ``equals`` either (CI, stop 67)."""
    import numpy as np

    if left.columns != right.columns or left.dtypes != right.dtypes or left.shape != right.shape:
        return False
    for name, dtype in zip(left.columns, left.dtypes, strict=True):
        a, b = left[name].to_numpy(), right[name].to_numpy()
        if dtype.is_float():
            if not np.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True):
                return False
        elif not left[name].equals(right[name]):
            return False
    return True


@pytest.mark.parametrize("query", [
    "select * from (select district, sex, count(*) as n from self group by 1, 2) where n = 2",
    "select * from (select district, sex, count(*) as n from self group by 1, 2) where n between 1 and 2",
])
def test_a_shape_that_must_not_be_shown_is_still_withheld(sess: Session, p: Any, query: str) -> None:
    """An outer filter that pins a count (only the cells of 2 people) is withheld before any
    evidence is asked for, in polars SQL as in DuckDB."""
    out = sess.publish(p.sql(query))
    table = out.data["text/plain"].split("sdc_magic:")[0]
    assert _status(out) in {"blocked", "review"}
    assert not any(ch.isdigit() for ch in table) and not any(label in table for label in ("A ", "B ", "C ")), table


# ---- red team of the change (helper-38, 2026-12-05): each of these gave C away or showed stale figures
def test_a_frame_without_pandas_labels_is_linked_as_its_polars_calls_are(sess: Session, df: pd.DataFrame) -> None:
    """``pl.read_csv`` (no pandas labels) with a column replaced (ages banded): DuckDB's evidence
    matched such rows by content only, and the replaced column broke it (pass, pass). Run as the
    polars calls it stands for, the table is linked as ``filter().group_by()`` is."""
    import io

    people = pl.read_csv(io.BytesIO(df.to_csv(index=False).encode()))
    banded = people.with_columns(pl.col("age") // 10 * 10)
    first = sess.publish(banded.sql("select sex, count(*) as n from self where district <> 'C' group by sex "
                                    "order by sex"))
    second = sess.publish(people.sql("select sex, count(*) as n from self group by sex order by sex"))
    assert _status(first) == "pass" and _status(second) in {"suppressed", "blocked"}, _notes(second)
    assert "transform" not in _notes(first)  # (counts are polars' own, not casts of them)


GLOBAL_PEOPLE: Any = None


def test_a_name_polars_resolves_to_a_lazy_frame_gives_no_evidence(sess: Session, p: Any) -> None:
    """``pl.sql`` reads the nearest frame of each name in the callers' locals, lazy ones too: a
    local LazyFrame ``GLOBAL_PEOPLE`` hides the module's eager one, so the evidence must not come
    from the eager one (it did: the table passed on other rows' evidence)."""
    global GLOBAL_PEOPLE
    GLOBAL_PEOPLE = p

    def outside_c() -> Any:
        GLOBAL_PEOPLE = p.lazy().filter(pl.col("district") != "C")  # noqa: F841 (read by pl.sql by name)
        return pl.sql("select sex, count(*) as n from GLOBAL_PEOPLE group by sex").collect()

    out = sess.publish(outside_c())
    assert _status(out) == "review" and "without evidence" in _notes(out)


def test_names_differing_only_in_case_are_not_read_by_duckdb(sess: Session, p: Any) -> None:
    """DuckDB binds ``District`` to ``district``; polars does not: no DuckDB evidence for such a
    frame (a plain grouped query is still run as polars calls, case and all)."""
    odd = p.with_columns(pl.col("district").reverse().alias("District"))
    limited = sess.publish(odd.sql("select District, count(*) as n from self group by District "
                                   "order by District limit 3"))
    assert _status(limited) == "review" and "without evidence" in _notes(limited)
    plain = sess.publish(odd.sql("select District, count(*) as n from self group by District"))
    assert _status(plain) in {"pass", "suppressed"} and "without evidence" not in _notes(plain)


def test_a_result_changed_in_place_is_not_shown_as_it_was(sess: Session, p: Any) -> None:
    result = p.sql("select sex, count(*) as n from self group by sex order by sex")
    result.replace_column(1, pl.Series("n", [2, 1]))
    out = sess.publish(result)
    text = out.data["text/plain"].split("sdc_magic:")[0]
    assert _status(out) == "review" and "38" not in text and "35" not in text, text


def test_the_table_name_is_read_in_any_case(sess: Session, p: Any) -> None:
    out = sess.publish(p.sql("select district, count(*) as n from SELF group by district"))
    assert _status(out) == "suppressed" and "without evidence" not in _notes(out)


HAVING_UNSHOWN = [
    "count(*) - sum(case when district <> 'C' then 1 else 0 end) = {k}",
    "count(*) - sum(case when district <> 'C' then 1 else 0 end) is not distinct from {k}",
    "cast(count(*) - sum(case when district <> 'C' then 1 else 0 end) as varchar) like '{k}'",
    "not cast(count(*) - sum(case when district <> 'C' then 1 else 0 end) - {k} as boolean)",
]


@pytest.mark.parametrize("condition", HAVING_UNSHOWN)
@pytest.mark.parametrize("engine", ["polars sql", "duckdb"])
def test_having_that_reads_an_unshown_figure_is_withheld_empty_or_not(sess: Session, df: pd.DataFrame, p: Any,
                                                                      engine: str, condition: str) -> None:
    """Whatever the test (``=``, ``IS NOT DISTINCT FROM``, ``LIKE``, a cast to boolean), a HAVING
    that pins a figure the table does not show is withheld, and so is its empty result (``pass``
    for an empty table beside ``blocked`` for a non-empty one told the bit)."""
    import duckdb

    for k in (1, 2):
        query = f"select sex, count(*) as n from {{t}} group by sex having {condition.format(k=k)}"
        table = p.sql(query.format(t="self")) if engine == "polars sql" else duckdb.sql(query.format(t="df")).df()
        out = sess.publish(table)
        assert _status(out) == "blocked", (query, _status(out))


@pytest.mark.parametrize("engine", ["polars sql", "duckdb"])
def test_having_on_a_figure_the_table_does_not_show_is_withheld(sess: Session, df: pd.DataFrame, p: Any,
                                                                engine: str) -> None:
    """The groups kept tell the hidden figure: ``= 2`` keeps F, ``= 1`` keeps M (C's people)."""
    import duckdb

    for k in (1, 2):
        query = (f"select sex, count(*) as n from {{t}} group by sex having count(*) - sum(case when district "
                 f"<> 'C' then 1 else 0 end) = {k} order by sex")
        table = p.sql(query.format(t="self")) if engine == "polars sql" else \
            duckdb.sql(query.format(t="df")).df()
        out = sess.publish(table)
        text = out.data["text/plain"].split("sdc_magic:")[0]
        assert _status(out) == "blocked" and "F" not in text and "M" not in text, text
    shown = sess.publish(p.sql("select sex, count(*) as n from self group by sex having count(*) > 10"))
    assert _status(shown) == "pass"  # (a bound on a figure the table shows: checked on that cell)
