"""Red team, polars (issue 14): the same figures as the fixed leaks of ``test_engines_redteam.py``,
asked for in other ways — another wrapper, lazy instead of eager, another statistic, the
other order, a Series instead of a DataFrame.

Data and rules as there: 73 people, district A 40 (20 F / 20 M), B 30 (15 / 15), C 3 (2 F / 1 M);
persons 5 and 6 (district A) are aged 101 and 102; humanitarian preset, threshold 5.
Each test asserts what is shown: which cells are ✕ and which values stay visible.
"""

from __future__ import annotations

import pandas as pd
import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("duckdb")
pytest.importorskip("sqlglot")

# the data, the humanitarian session and the display helpers of the first red-team file
from test_engines_redteam import PEOPLE, _shown, _status  # noqa: E402

from sdc_magic.config import preset  # noqa: E402
from sdc_magic.jupyter.session import Session  # noqa: E402

X = "✕"


def _cells(out, column: str) -> dict:
    """Column ``column`` of what is shown, by the first label (index or first column), as text."""
    frame = _shown(out)
    if column in frame.columns and not isinstance(frame.index, pd.RangeIndex):
        return {k: str(v) for k, v in zip(frame.index, frame[column], strict=True)}
    return {k: str(v) for k, v in zip(frame[frame.columns[0]], frame[column], strict=True)}


def _describe(out, column: str = "age") -> dict:
    frame = _shown(out)
    return {k: str(v) for k, v in zip(frame.index, frame[column], strict=True)}


# ---------------------------------------------------------------- an extreme behind a wrapper
@pytest.mark.parametrize("expr", [
    (pl.col("age").max() - 0).cast(pl.Float64).round(0),
    pl.col("age").top_k(1).first(),
    pl.col("age").get(pl.col("age").arg_max()),
    pl.col("age").sort(descending=True).first(),
    pl.col("age").quantile(1.0) + 0,
    pl.col("age").sort().get(-1),
    pl.col("age").unique().max(),
    pl.col("age").drop_nulls().max().sqrt(),
    pl.col("age").filter(pl.col("sex") == "M").max(),
    pl.col("age").sort().slice(-1, 1).first(),
    pl.col("age").sort().reverse().first(),
    pl.col("age").gather(0).first(),
], ids=["minus-0-cast-round", "top_k-first", "get-arg_max", "sort-desc-first", "quantile1-plus-0",
        "sort-get-last", "unique-max", "drop_nulls-sqrt", "filter-max", "slice-last", "reverse-first",
        "gather-0"])
def test_max_behind_a_wrapper_is_a_max(sess: Session, p: pl.DataFrame, expr) -> None:
    out = sess.publish(p.group_by("district").agg(expr.alias("m")).sort("district"))
    assert _status(out) == "blocked"  # every maximum is one person's age
    assert set(_cells(out, "m").values()) == {X}


def test_lazy_max_times_one_is_a_max(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.lazy().group_by("district").agg((pl.col("age").max() * 1).alias("m")).collect())
    assert _status(out) == "blocked" and set(_cells(out, "m").values()) == {X}


def test_bottom_k_last_is_a_min(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg(pl.col("age").bottom_k(1).last().alias("m")).sort("district"))
    assert _status(out) == "blocked" and set(_cells(out, "m").values()) == {X}


# ---------------------------------------------------------------- a count behind a wrapper keeps its secondary
@pytest.mark.parametrize(("build", "a_value"), [
    (lambda p: p.group_by("district").agg((pl.len() + 100).alias("n")).sort("district"), "140"),
    (lambda p: p.lazy().group_by("district").agg((pl.len() * 2 + 1).alias("n")).collect(), "81"),
    (lambda p: p.group_by("district").agg((pl.len().cast(pl.Float64) * 1.5).alias("n")).sort("district"), "60.0"),
    (lambda p: p.group_by("district").agg(pl.sum_horizontal(100, pl.len()).alias("n")).sort("district"), "140"),
    (lambda p: p.group_by("district").agg((pl.len() * pl.len()).alias("n")).sort("district"), "1600"),
], ids=["plus-100", "lazy-times-2-plus-1", "cast-times-1.5", "sum_horizontal", "len-squared"])
def test_wrapped_count_hides_a_secondary(sess: Session, p: pl.DataFrame, build, a_value: str) -> None:
    out = sess.publish(build(p))
    assert _status(out) == "suppressed"
    assert _cells(out, "n") == {"A": a_value, "B": X, "C": X}  # B too: else 73 - A - B gives C


def test_total_first_then_wrapped_count(sess: Session, p: pl.DataFrame) -> None:
    """The other order: the grand total (a select without keys) before the wrapped table."""
    total = sess.publish(p.select(pl.len()))
    assert _status(total) == "pass" and _shown(total).iloc[0, 0] == 73
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n")).sort("district"))
    assert _cells(out, "n") == {"A": "81", "B": X, "C": X}


def test_wrapped_sum_hides_a_secondary(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.col("income").sum() * 1).alias("s")).sort("district"))
    shown = _cells(out, "s")
    assert shown["C"] == X and shown["B"] == X and shown["A"] != X


# ---------------------------------------------------------------- a sum of a condition is a count of its rows
@pytest.mark.parametrize("expr", [
    (pl.col("district") != "C").cast(pl.Int32).sum(),
    pl.when(pl.col("district") != "C").then(1).otherwise(0).sum(),
    (pl.col("district") != "C").sum() * 1,
], ids=["cast-sum", "when-then-sum", "sum-times-1"])
def test_condition_sum_is_a_count_on_both_sides(sess: Session, p: pl.DataFrame, expr) -> None:
    """37 - 35 = 2 women and 36 - 35 = 1 man lack the condition: both cells hidden."""
    sess.publish(p.group_by("sex").len().sort("sex"))
    out = sess.publish(p.group_by("sex").agg(expr.alias("n")).sort("sex"))
    assert _status(out) == "blocked" and set(_cells(out, "n").values()) == {X}


def test_condition_mean_beside_the_count(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("sex").agg(pl.len(), (pl.col("district") != "C").mean().alias("m")).sort("sex"))
    assert _cells(out, "len") == {"F": "37", "M": "36"} and _cells(out, "m") == {"F": X, "M": X}


@pytest.mark.parametrize("order", ["count first", "condition first"])
def test_condition_sum_is_linked_to_its_rows(sess: Session, p: pl.DataFrame, order: str) -> None:
    """Outside A per sex (17, 16) against district B per sex (15, 15): C's 2 and 1 people."""
    def count():
        return sess.publish(p.lazy().filter(pl.col("district") == "B").group_by("sex").len().collect().sort("sex"))

    def condition():
        return sess.publish(p.group_by("sex").agg((pl.col("district") != "A").sum().alias("n")).sort("sex"))

    if order == "count first":
        first, second = count(), condition()
        assert _cells(first, "len") == {"F": "15", "M": "15"}
        assert _cells(second, "n") == {"F": X, "M": X}
    else:
        first, second = condition(), count()
        assert _cells(first, "n") == {"F": "17", "M": "16"}
        assert _cells(second, "len") == {"F": X, "M": X}
    assert _status(second) == "blocked"
    assert any(r.rule == "differencing" for rs in second.checked.reasons.values() for r in rs)


def test_filtered_count_is_linked_to_its_rows(sess: Session, p: pl.DataFrame) -> None:
    """``col.filter(cond).count()`` counts the rows meeting cond: 37 - 35 and 36 - 35 give C."""
    sess.publish(p.group_by("sex").len().sort("sex"))
    out = sess.publish(p.group_by("sex").agg(pl.col("person").filter(pl.col("district") != "C").count().alias("n"))
                       .sort("sex"))
    assert _status(out) == "blocked" and _cells(out, "n") == {"F": X, "M": X}
    assert any(r.rule == "differencing" for rs in out.checked.reasons.values() for r in rs)


# (was a leak at 'pass'; fixed: disjoint conditional columns are also linked as one population over
# (group, column), so their sum is differenced against the total published before)
def test_leak_two_conditional_counts_side_by_side(sess: Session, p: pl.DataFrame) -> None:
    first = sess.publish(p.group_by("sex").len().sort("sex"))
    out = sess.publish(p.group_by("sex").agg(pl.col("person").filter(pl.col("district") == "A").count().alias("a"),
                                             pl.col("person").filter(pl.col("district") == "B").count().alias("b"))
                       .sort("sex"))
    total, a, b = _cells(first, "len"), _cells(out, "a"), _cells(out, "b")
    got = None
    if X not in (*total.values(), *a.values(), *b.values()):
        got = {k: int(total[k]) - int(a[k]) - int(b[k]) for k in ("F", "M")}
    assert got != {"F": 2, "M": 1}


# ---------------------------------------------------------------- one group without keys
@pytest.mark.parametrize(("build", "column"), [
    (lambda p: p.lazy().filter(pl.col("district") == "C").select(pl.col("age").max()).collect(), "age"),
    (lambda p: p.filter(pl.col("district") == "C").select(pl.col("income").sum()), "income"),
    (lambda p: p.filter(pl.col("district") == "C").select(pl.len()), "len"),
    (lambda p: p.filter(pl.col("district") == "C").select((pl.col("age").max() + 0).alias("m")), "m"),
    (lambda p: p.lazy().filter(pl.col("district") == "C").select("income").sum().collect(), "income"),
], ids=["lazy-max", "sum", "len", "max-plus-0", "lazy-frame-sum"])
def test_statistic_of_three_people_without_keys(sess: Session, p: pl.DataFrame, build, column: str) -> None:
    out = sess.publish(build(p))
    assert out.checked.kind == "table" and _status(out) in ("suppressed", "blocked")
    assert _shown(out)[column].iloc[0] == X


def test_frame_mean_of_three_people(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.filter(pl.col("district") == "C").select("age", "income").mean())
    assert _status(out) == "blocked" and set(_shown(out).iloc[0].tolist()) == {X}


def test_statistic_of_everyone_without_keys_is_shown(sess: Session, p: pl.DataFrame) -> None:
    """Not over-protected: a mean over 73 people passes; their maximum (102, one person) does not."""
    mean = sess.publish(p.select(pl.col("age").mean()))
    assert _status(mean) == "pass" and round(float(_shown(mean).iloc[0, 0]), 2) == round(PEOPLE.age.mean(), 2)
    top = sess.publish(p.select(pl.col("age").max()))
    assert _shown(top).iloc[0, 0] == X
    # a select of plain columns stays row-level: only aggregates are one group
    assert sess.publish(p.select("district", "age")).checked.kind == "row-level"


# ---------------------------------------------------------------- describe is linked
def test_series_describe_one_person_fewer(sess: Session, p: pl.DataFrame) -> None:
    first = sess.publish(p["age"].describe())
    second = sess.publish(p.filter(pl.col("person") != 72)["age"].describe())
    assert _status(first) != "blocked" and _status(second) == "blocked"


def test_lazy_describe_one_person_fewer_in_either_order(sess: Session, p: pl.DataFrame) -> None:
    fewer = sess.publish(p.lazy().filter(pl.col("person") != 72).select("age").describe())
    assert _status(fewer) != "blocked" and _describe(fewer)["count"] == "72.0"
    everyone = sess.publish(p.select("age").describe())
    assert _status(everyone) == "blocked"
    assert any(r.rule == "differencing" for rs in everyone.checked.reasons.values() for r in rs)


def test_describe_then_count_of_one_person_fewer(sess: Session, p: pl.DataFrame) -> None:
    """describe's count row is a count of its rows: a count without person 72 differs by one."""
    sess.publish(p.select("income").describe())
    out = sess.publish(p.filter(pl.col("person") != 72).select(pl.len()))
    assert _shown(out).iloc[0, 0] == X


# ---------------------------------------------------------------- a captured result's cells, rearranged
@pytest.mark.parametrize("rearrange", [
    lambda t: t.sort("district", descending=True),
    lambda t: t.select(["district", "F", "M"]),
    lambda t: t.head(10),
], ids=["sort-desc", "select-columns", "head-all-rows"])
def test_pivot_rearranged_keeps_its_evidence(sess: Session, p: pl.DataFrame, rearrange) -> None:
    table = p.pivot(on="sex", index="district", values="person", aggregate_function="len")
    out = sess.publish(rearrange(table))
    assert out.checked.kind == "table" and _status(out) == "suppressed"
    shown = _shown(out)
    assert shown.loc["A", "F"] == 20 and shown.loc["A", "M"] == 20
    assert {shown.loc[d, s] for d in ("B", "C") for s in ("F", "M")} == {X}


def test_wrapped_count_sorted_keeps_its_secondary(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n")).sort("n", descending=True))
    assert _cells(out, "n") == {"A": "81", "B": X, "C": X}


# ---------------------------------------------------------------- fail closed
def test_wrapped_count_whose_capture_fails_is_withheld(sess: Session, p: pl.DataFrame, monkeypatch) -> None:
    """Checked as unverified, 81 61 7 would pass the small-number check and 7 = 2·3 + 1 gives C."""
    from sdc_magic.capture import polars as cap

    def boom(*a, **k):
        raise RuntimeError("engine down")

    monkeypatch.setattr(cap, "inner_cell_values", boom)  # the wrapped values polars computes
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n")))
    assert _status(out) == "blocked" and out.checked is None  # withheld: nothing of the table shown
    assert "61" not in out.data["text/plain"]
    assert any("engine down" in f for f in sess.registry.failures)


def test_statistic_without_keys_whose_capture_fails_is_withheld(sess: Session, p: pl.DataFrame,
                                                                monkeypatch) -> None:
    from sdc_magic.capture import polars as cap

    def boom(*a, **k):
        raise RuntimeError("engine down")

    monkeypatch.setattr(cap, "group_facts", boom)  # the facts polars computes per group
    out = sess.publish(p.lazy().filter(pl.col("district") == "C").select(pl.col("age").max()).collect())
    assert _status(out) == "blocked" and out.checked is None
    assert "71" not in out.data["text/plain"]


# ---------------------------------------------------------------- the labels dropped, the cells kept
def test_max_with_its_labels_dropped_is_still_a_max(sess: Session, p: pl.DataFrame) -> None:
    """``select`` of the value column alone: before, an unverified 102 / 78 / 71 at review."""
    out = sess.publish(p.group_by("district").agg(pl.col("age").max()).sort("district").select("age"))
    assert out.checked.kind == "table" and _status(out) == "blocked"
    assert set(_shown(out)["age"].tolist()) == {X}


def test_wrapped_count_with_its_labels_dropped_keeps_its_secondary(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n"), pl.col("age").mean())
                       .sort("district").select("n", "age"))
    assert out.checked.kind == "table"
    assert _cells(out, "n") == {"A": "81", "B": X, "C": X}  # the group labels stay the index


def test_describe_with_its_labels_dropped(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.filter(pl.col("district") == "C").select("age").describe().select("age"))
    assert out.checked.kind == "table"
    shown = _describe(out)
    assert shown["count"] == X and shown["mean"] == X and shown["max"] == X


# ---------------------------------------------------------------- lazy: sorted before collect()
def test_lazy_wrapped_count_sorted_before_collect(sess: Session, p: pl.DataFrame) -> None:
    """Before: the sorted plan was collected without evidence, 81 / 61 / 7 at review (7 = 2·3 + 1)."""
    out = sess.publish(p.lazy().group_by("district").agg((pl.len() * 2 + 1).alias("n")).sort("district").collect())
    assert out.checked.kind == "table" and _cells(out, "n") == {"A": "81", "B": X, "C": X}


def test_lazy_max_sorted_before_collect(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.lazy().group_by("district").agg(pl.col("age").max()).sort("age", descending=True)
                       .collect())
    assert _status(out) == "blocked" and set(_shown(out)["age"].tolist()) == {X}


# ---------------------------------------------------------------- renamed measures
def test_wrapped_count_renamed_keeps_its_secondary(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.len() * 2 + 1).alias("n"), pl.col("age").mean())
                       .rename({"n": "count", "age": "mean age"}).sort("district"))
    assert out.checked.kind == "table"
    assert _cells(out, "count") == {"A": "81", "B": X, "C": X}


def test_describe_renamed(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.filter(pl.col("district") == "C").select("age").describe().rename({"age": "Age"}))
    assert out.checked.kind == "table"
    shown = _describe(out, "Age")
    assert shown["count"] == X and shown["max"] == X


# ---------------------------------------------------------------- several aggregates combined
@pytest.mark.parametrize("expr", [
    pl.col("turnover").mean() * pl.len(),
    pl.col("turnover").sum() / pl.col("turnover").count(),
    (pl.col("turnover").mean() * pl.len()).round(1),
    pl.when(pl.len() > 0).then(pl.col("turnover").sum()),
    pl.when(pl.col("firm") >= 0).then(pl.col("turnover")).otherwise(0).sum(),
], ids=["mean-times-len", "sum-over-count", "rounded", "when-len-then-sum", "sum-of-when"])
def test_dominant_firm_through_combined_aggregates(expr) -> None:
    """mean × len is the sum, sum / count the mean: the dominant firm's cell is hidden (INSEE)."""
    import numpy as np

    rng = np.random.default_rng(5)
    firms = pl.DataFrame({"firm": np.arange(40), "sector": np.repeat(["S1", "S2"], 20),
                          "region": np.tile(["N", "S"], 20), "turnover": np.round(rng.uniform(10, 20, 40), 1)})
    firms = firms.with_columns(pl.when(pl.col("firm") == 0).then(10000.0).otherwise(pl.col("turnover"))
                               .alias("turnover"))
    s = Session(rules=preset("insee"))
    s.capture.install()
    try:
        out = s.publish(firms.group_by("sector", "region").agg(expr.alias("s")).sort("sector", "region"))
        assert out.checked.kind == "table"
        shown = _shown(out)
        cell = shown.loc[("S1", "N"), "s"] if "s" in shown.columns and isinstance(shown.index, pd.MultiIndex) \
            else shown.set_index(["sector", "region"]).loc[("S1", "N"), "s"]
        assert cell == X
    finally:
        s.capture.uninstall()


def test_sum_minus_min_is_a_minimum(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.group_by("district").agg((pl.col("age").sum() - pl.col("age").min()).alias("m"))
                       .sort("district"))
    assert _status(out) == "blocked" and set(_cells(out, "m").values()) == {X}


# ---------------------------------------------------------------- several columns at once
def test_wrapped_sums_of_several_columns_keep_their_secondary(sess: Session, p: pl.DataFrame) -> None:
    """``pl.col("age", "income").sum() + 100``: before, 'review' with B shown (C = total - A - B)."""
    out = sess.publish(p.group_by("district").agg(pl.col("age", "income").sum() + 100).sort("district"))
    assert _status(out) == "suppressed"
    assert _cells(out, "age")["B"] == X and _cells(out, "income")["B"] == X and _cells(out, "age")["C"] == X


def test_wrapped_means_of_all_columns_without_keys(sess: Session, p: pl.DataFrame) -> None:
    out = sess.publish(p.filter(pl.col("district") == "C").select(pl.exclude("district", "sex").mean() * 1))
    assert out.checked.kind == "table" and set(_shown(out).iloc[0].tolist()) == {X}


# ---------------------------------------------------------------- another variable at the extreme
@pytest.mark.parametrize("expr", [
    pl.col("income").sort_by("age").last(),
    pl.col("income").top_k_by("age", 1).first(),
    pl.col("income").get(pl.col("age").arg_max()),
    pl.col("income").sort_by("age", descending=True).first() + 0,
], ids=["sort_by-last", "top_k_by-first", "get-arg_max-of-age", "sort_by-desc-first-plus-0"])
def test_income_of_the_oldest_is_one_persons_value(sess: Session, p: pl.DataFrame, expr) -> None:
    """The income of the oldest person per district (A: the 102-year-old's)."""
    out = sess.publish(p.group_by("district").agg(expr.alias("m")).sort("district"))
    assert _status(out) == "blocked" and set(_cells(out, "m").values()) == {X}


def test_null_count_is_a_count_of_the_rows_lacking_the_value(sess: Session, p: pl.DataFrame) -> None:
    """``null_count()`` is an indicator sum (rows lacking the value): C's 3 lack it on one side."""
    out = sess.publish(p.group_by("district").agg(pl.col("age").null_count()).sort("district"))
    # every count is 0: with their total known B and C would be pinned at 0 whatever is hidden,
    # but the table shows no total (stop 67: a primary pinned only by margins nobody was shown is
    # not "determined by the cells shown"; a total of 0 shown later tells every district's 0 by itself)
    assert out.checked.kind == "table" and _status(out) == "suppressed"
    assert not any("determined exactly by the cells shown" in n for n in out.checked.notes)
    assert _cells(out, "age") == {"A": "0", "B": X, "C": X}


# ---------------------------------------------------------------- the largest values selected without keys
@pytest.mark.parametrize("build", [
    lambda p: p.select(pl.col("age").top_k(2)),
    lambda p: p.select(pl.col("age").sort().tail(1)),
    lambda p: p.lazy().select(pl.col("age").sort().head(2)).collect(),
    lambda p: p.select(pl.col("income").sort_by("age").tail(1)),
], ids=["top_k-2", "sort-tail-1", "lazy-sort-head-2", "sort_by-tail-1"])
def test_largest_values_selected_without_keys(sess: Session, p: pl.DataFrame, build) -> None:
    """Before: 'review' (unverified) showing 102, 101: each row is one person's value."""
    out = sess.publish(build(p))
    assert out.checked.kind == "table" and _status(out) in ("suppressed", "blocked")
    assert set(_shown(out).iloc[:, 0].tolist()) == {X}
