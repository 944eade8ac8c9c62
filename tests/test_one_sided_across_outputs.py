"""Two one-sided selections of one table, in two outputs, pin a hidden cell (issue 23, red team).

``t[t > 1]`` keeps Z (✕): Z is more than 1. ``t[t < 10]`` keeps Z again: Z is less than 10.
Each alone bounds Z on one side and is shown; together they pin it as ``t[t.between(2, 9)]``
would, which is withheld. The session remembers which side each shown selection told of each
hidden cell (``checking/revealed.py``) and withholds the selection that completes a pin.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.checking.selection import PINNED_ACROSS
from sdc_magic.jupyter.session import Session

#: Z (2 people) is hidden; C and D are small but published
SIZES = {"A": 40, "B": 35, "C": 8, "D": 9, "Z": 2}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    district = np.repeat(list(SIZES), list(SIZES.values()))
    return pd.DataFrame({"district": district, "sex": rng.choice(["F", "M"], len(district))})


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def _pinned_across(out: Any) -> bool:
    return _status(out) == "blocked" and PINNED_ACROSS[:60] in out.data["text/plain"]


LOW = ["t[t > 1]", "t[t >= 2]", "t[~(t <= 1)]", "t.loc[t.gt(1)]", "t.to_frame('n').query('n > 1')",
       "t.where(t > 1).dropna()", "t.reset_index(name='n').query('n > 1')", "t[lambda x: x > 1]"]
HIGH = ["t[t < 10]", "t[t <= 9]", "t.loc[t.lt(10)]", "t[~(t >= 10)]", "t.to_frame('n').query('n < 10')",
        "t.mask(t >= 10).dropna()", "(t * 2)[t * 2 < 20]", "t.to_frame('n')[lambda f: f.n < 10]"]


@pytest.mark.parametrize("first,second", [*zip(LOW, HIGH, strict=True), *zip(HIGH, LOW, strict=True)])
def test_the_second_side_is_withheld(sess: Session, first: str, second: str) -> None:
    t = _frame().groupby("district").size()
    assert sess.check(t).hidden.ravel().tolist()[-1]
    out1 = sess.publish(eval(first))
    assert _status(out1) != "blocked", out1.data["text/plain"]
    out2 = sess.publish(eval(second))
    assert _pinned_across(out2), out2.data["text/plain"]
    assert "Z" not in out2.data["text/plain"] and "Z" not in out2.data.get("text/html", "")


def test_the_same_table_computed_again_is_the_same_table(sess: Session) -> None:
    df = _frame()
    t = df.groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    again = df.groupby("district").size()
    assert _pinned_across(sess.publish(again[again < 10]))


def _crosstab_frame(**women_men: tuple[int, int]) -> pd.DataFrame:
    rows = [(d, sex) for d, (f, m) in women_men.items() for sex, n in (("F", f), ("M", m)) for _ in range(n)]
    return pd.DataFrame(rows, columns=["district", "sex"])


def test_a_frame_filtered_by_one_column_then_another_way(sess: Session) -> None:
    df = _crosstab_frame(A=(20, 20), B=(18, 17), C=(8, 9), D=(7, 9), Z=(2, 1))
    ct = pd.crosstab(df.district, df.sex)
    assert sess.check(ct).hidden[-1].all() and not sess.check(ct).hidden[2].any()  # Z hidden, C shown
    assert _status(sess.publish(ct[ct.F > 1])) in ("pass", "suppressed")
    assert _pinned_across(sess.publish(ct[ct.F < 10]))  # C and D kept beside Z: Z has 2 women


def test_in_a_table_with_zeros_more_than_none_is_a_side(sess: Session) -> None:
    """A crosstab shows zeros: ``ct[ct.F > 0]`` tells that Z has a woman at all (its 1 is then pinned
    by ``ct[ct.F < 2]``), where ``t[t > 0]`` of a groupby tells nothing (every group has someone)."""
    df = _crosstab_frame(A=(20, 20), B=(18, 17), C=(8, 9), D=(0, 9), Z=(1, 1))
    ct = pd.crosstab(df.district, df.sex)
    assert sess.check(ct).hidden[-1, 0]
    assert _status(sess.publish(ct[ct.F > 0])) in ("pass", "suppressed")
    assert _pinned_across(sess.publish(ct[ct.F < 10]))


@pytest.mark.parametrize("first,second", [
    ("t[t > 0]", "t[t >= 5]"),  # every group has someone, then the groups at the threshold: Z is 1..4 at most
    ("t[t > 20]", "t[t < 100]"),  # wide: Z left out, then kept far above it
    ("t.nlargest(3)", "t[t < 10]"),
    ("t[t > 1]", "t[t < 100]"),
    ("t[t < 10]", "t[t > 0]"),
])
def test_wide_or_unrelated_sides_are_shown(sess: Session, first: str, second: str) -> None:
    t = _frame().groupby("district").size()  # noqa: F841 (read by eval)
    out1 = sess.publish(eval(first))
    out2 = sess.publish(eval(second))
    assert _status(out1) != "blocked", out1.data["text/plain"]
    assert _status(out2) != "blocked", out2.data["text/plain"]


def test_a_withheld_selection_tells_nothing(sess: Session) -> None:
    """A selection that was not shown cannot pin anything with a later one."""
    t = _frame().groupby("district").size()
    assert _status(sess.publish(t[t < 3])) == "blocked"  # shows Z alone
    assert _status(sess.publish(t[t > 1])) == "suppressed"


@pytest.mark.parametrize("second", [
    "df.district.value_counts()", "df.groupby('district')['sex'].count()",
    "df[df.district != 'A'].groupby('district').size()",  # (Z's 2 are the same people)
    "df.groupby('district', sort=False).size()",
    "pd.crosstab(df.district, columns='n')['n']", "pd.crosstab(df.district, columns='n')",
])
def test_the_same_figure_in_another_table_is_the_same_cell(sess: Session, second: str) -> None:
    df = _frame()
    t = df.groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    u = eval(second)
    selection = u[u["n"] < 10] if isinstance(u, pd.DataFrame) else u[u < 10]
    assert _pinned_across(sess.publish(selection)), second


def test_another_figure_is_another_cell(sess: Session) -> None:
    df = _frame()
    t = df.groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    # Z is 1 and C is 7 there (t[t > 1] told that t's C, 8, and Z, 2, are more than 1)
    gone = np.concatenate([df.index[df.district == "Z"][:1], df.index[df.district == "C"][:1]])
    u = df.drop(gone).groupby("district").size()
    assert _status(sess.publish(u[u < 10])) != "blocked"


def test_a_secondary_is_pinned_too(sess: Session) -> None:
    """C (8) is hidden to protect Z: t[t > 1] tells C is more than 1, u[u < 10] (the same C) less than 10."""
    df = _frame()
    t = df.groupby("district").size()
    assert sess.check(t).hidden.ravel().tolist() == [False, False, True, False, True]
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    u = df[df.district != "A"].groupby("district").size()
    assert _pinned_across(sess.publish(u[u < 10]))


@pytest.mark.parametrize("z", [2, 3, 4])
def test_small_lower_bounds_count(sess: Session, z: int) -> None:
    """``t > 1`` tells Z is not 1 whatever Z is (red team: only Z = 2 was caught)."""
    df = _frame()
    df = df[df.district != "Z"]
    df = pd.concat([df, pd.DataFrame({"district": ["Z"] * z, "sex": ["F"] * z})], ignore_index=True)
    t = df.groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    assert _pinned_across(sess.publish(t[t < 10]))


def test_means_keep_their_one_sided_selections(sess: Session) -> None:
    """The probes (0, twice the value) are a count's range, not a mean's: mean ages between 30 and
    79 tell no narrow range (red team: over-protection)."""
    df = _frame().assign(age=lambda f: 30 + (np.arange(len(f)) % 40))
    m = df.groupby("district").age.mean()
    assert sess.check(m).hidden.any()
    assert _status(sess.publish(m[m > 30])) != "blocked"
    assert _status(sess.publish(m[m < 79])) != "blocked"


@pytest.mark.parametrize("code", [
    "t.to_frame('n').T.loc[:, (t.to_frame('n').T.loc['n'] > 1) & (t.to_frame('n').T.loc['n'] < 10)]",
    "t.to_frame('n').T.T.T.loc[:, (t > 1) & (t < 10)]",
])
def test_a_transposed_copy_selected_both_ways_at_once(sess: Session, code: str) -> None:
    t = _frame().groupby("district").size()  # noqa: F841 (read by eval)
    out = sess.publish(eval(code))
    assert _status(out) == "blocked", out.data["text/plain"]


def test_unstacked_pairs_selected_both_ways(sess: Session) -> None:
    df = _crosstab_frame(A=(20, 20), B=(18, 17), C=(8, 9), D=(7, 9), Z=(2, 1))
    g = df.groupby(["district", "sex"]).size()
    assert sess.check(g).hidden.any()
    out = sess.publish(g.unstack()[lambda f: (f.F > 1) & (f.F < 10)])
    assert _status(out) == "blocked", out.data["text/plain"]


def test_a_tuple_is_judged_with_the_memory(sess: Session) -> None:
    """Objects inside a tuple are checked one by one (not recorded); what they tell is remembered
    and they see what earlier outputs told."""
    t = _frame().groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    text = sess.plain((t[t < 10],))
    assert "withheld" in text and "Z" not in text


def test_without_linking_each_output_is_judged_alone(sess: Session) -> None:
    sess.linking = False
    t = _frame().groupby("district").size()
    assert _status(sess.publish(t[t > 1])) == "suppressed"
    assert _status(sess.publish(t[t < 10])) == "suppressed"
    assert len(sess.revealed) == 0


def test_more_hidden_cells_than_the_work_bound_withholds(sess: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the probes the bound allows, a selection by value is not proven harmless: withheld
    (red team: with the bound at 200, a hidden cell after 200 others was never looked at)."""
    from sdc_magic.checking import lineage
    from sdc_magic.checking.selection import PINNED_UNPROVEN

    monkeypatch.setattr(lineage, "MAX_PINNED_PROBES", 1)
    t = _frame().groupby("district").size()
    out = sess.publish(t[t > 1])
    assert _status(out) == "blocked" and PINNED_UNPROVEN[:50] in out.data["text/plain"]
    assert _status(sess.publish(t[t.index != "A"])) != "blocked"  # (by label: no probe)


@pytest.mark.parametrize("engine_first", [True, False])
def test_polars_and_pandas_sides_join(sess: Session, engine_first: bool) -> None:
    """A polars ``filter(pl.col("len") < 10)`` of an aggregate tells the same side as ``t[t < 10]``."""
    pl = pytest.importorskip("polars")
    df = _frame()
    p = pl.from_pandas(df)
    t = df.groupby("district").size()
    outs = [lambda: p.group_by("district").len().filter(pl.col("len") < 10).sort("district"), lambda: t[t > 1]]
    if not engine_first:
        outs.reverse()
    assert _status(sess.publish(outs[0]())) != "blocked"
    assert _pinned_across(sess.publish(outs[1]()))


def test_polars_filters_in_a_chain(sess: Session) -> None:
    """The bound is carried through sort and head (a lower bound such as ``len > 1`` is withheld by
    the polars reader on its own: it leaves out groups of one)."""
    pl = pytest.importorskip("polars")
    df = _frame()
    agg = pl.from_pandas(df).group_by("district").len()
    assert _status(sess.publish(agg.filter(pl.col("len") < 10).sort("district").head(5))) != "blocked"
    t = df.groupby("district").size()
    assert _pinned_across(sess.publish(t[t > 1]))


def test_duckdb_having_and_pandas_sides_join(sess: Session) -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _frame()
    t = df.groupby("district").size()
    first = sess.publish(duckdb.sql("SELECT district, count(*) AS n FROM df GROUP BY district "
                                    "HAVING count(*) < 13 ORDER BY 1").df())
    assert _status(first) != "blocked", first.data["text/plain"]
    assert _pinned_across(sess.publish(t[t > 1]))


def test_far_engine_bounds_tell_no_side(sess: Session) -> None:
    pl = pytest.importorskip("polars")
    df = _frame()
    p = pl.from_pandas(df)
    t = df.groupby("district").size()
    assert _status(sess.publish(p.group_by("district").len().filter(pl.col("len") < 50).sort("district"))) \
        != "blocked"
    assert _status(sess.publish(t[t > 1])) != "blocked"


def test_polars_bounds_survive_a_select(sess: Session) -> None:
    pl = pytest.importorskip("polars")
    df = _frame()
    agg = pl.from_pandas(df).group_by("district").len()
    assert _status(sess.publish(agg.filter(pl.col("len") < 10).select("district", "len").sort("district"))) \
        != "blocked"
    t = df.groupby("district").size()
    assert _pinned_across(sess.publish(t[t > 1]))


def test_whole_valued_means_in_polars_tell_no_side(sess: Session) -> None:
    """Rounded mean ages are whole numbers, not counts (red team: the second filter was blocked)."""
    pl = pytest.importorskip("polars")
    df = _frame().assign(age=lambda f: 30 + (np.arange(len(f)) % 40))
    means = pl.from_pandas(df).group_by("district").agg(pl.col("age").mean().round(0))
    assert _status(sess.publish(means.filter(pl.col("age") < 60).sort("district"))) != "blocked"
    assert _status(sess.publish(means.filter(pl.col("age") > 20).sort("district"))) != "blocked"


@pytest.mark.parametrize("shape", [
    lambda f: f.rename({"len": "n"}).sort("district"),
    lambda f: f.sort("district").to_pandas().set_index("district"),
])
def test_polars_bounds_follow_a_rename_and_a_pandas_copy(sess: Session, shape: Any) -> None:
    pl = pytest.importorskip("polars")
    df = _frame()
    agg = pl.from_pandas(df).group_by("district").len()
    assert _status(sess.publish(shape(agg.filter(pl.col("len") < 10)))) != "blocked"
    t = df.groupby("district").size()
    assert _pinned_across(sess.publish(t[t > 1]))
