"""A cell hidden because an earlier output hid the same people ("linked") keeps a primary's level
against every attacker, single contributors included (a decision kept, stop 51).

Tried and reverted (stop 51, cb909a7, 10093b5): linked cells hidden without a level of their own
and without insider requirements, first always, then only when no earlier output had told their
kind of figure. Two red teams (helper-53, helper-54) recovered a hidden small cell exactly each
time, every output cleared: a person alone in another cell of the new table knows that cell, reads
the linked cell as total − published − own, and the earlier output's hidden cell follows by
subtraction (C = (B + C) − B). The joint audit models outsiders only, and "kind of figure" cannot be
told from names: a copy of the income under another name, a column of ones (a head count), a flag's
sum (a count of the flagged). These attacks are the guards below; the over-protection the decision
keeps (A's flag sum hidden after the district counts) is a strict xfail.

Kept from that work: cells an earlier output published with the same figure are never chosen as
secondaries, figure by figure (``Session._published``): the counts of a table of sums and counts
are public after the same counts, its sums are not.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shown_cells import X, cleared, rows, value
from test_engines_redteam import PEOPLE

from sdc_magic.datasets import make_referrals
from sdc_magic.jupyter.session import Session


def _people(**extra) -> pd.DataFrame:
    df = PEOPLE.copy()
    df["grp102"] = np.where(df.age >= 102, "102+", np.where(df.district == "B", "B", "A/C"))
    df["grp101"] = np.where(df.age == 101, "101", np.where(df.district == "B", "B", "A/C"))
    for name, values in extra.items():
        df[name] = values(df)
    return df


@pytest.mark.parametrize("variable", ["income", "a copy of the income"])
def test_a_linked_income_sum_is_not_read_by_a_single_contributor(sess: Session, variable: str) -> None:
    """Income by sex (T), by district (A shown; B, C hidden), then by {person 6 alone, A with C, B}:
    person 6 knows his 13.15, B = T − A/C − 13.15 and C = T − A − B (C's three people's income)."""
    df = _people(inc2=lambda d: d.income)
    column = "income" if variable == "income" else "inc2"
    outs = [sess.publish(df.groupby("sex").income.sum()), sess.publish(df.groupby("district").income.sum()),
            sess.publish(df.groupby("grp102")[column].sum())]
    total = value(outs[0], "F") + value(outs[0], "M")
    a, ac = value(outs[1], "A"), value(outs[2], "A/C")
    if cleared(*outs) and a is not None and ac is not None:
        b = total - ac - float(df.income[df.age >= 102].sum())
        assert abs((total - a - b) - float(df.income[df.district == "C"].sum())) > 0.5


def test_a_linked_flag_sum_is_not_read_by_a_single_contributor(sess: Session) -> None:
    """The same with the flag: the 101 band's one flagged person reads B, then C's flagged count."""
    df = _people()
    outs = [sess.publish(df.groupby("sex").flag.sum()), sess.publish(df.groupby("district").flag.sum()),
            sess.publish(df.groupby("grp101").flag.sum())]
    total = value(outs[0], "F") + value(outs[0], "M")
    a, ac = value(outs[1], "A"), value(outs[2], "A/C")
    if cleared(*outs) and a is not None and ac is not None:
        assert ac - a + 1 != int(df.flag[df.district == "C"].sum()) or total is None


def _both(sess: Session, first: Any, second: Any, *, reverse: bool) -> tuple[Any, Any]:
    """The outputs of ``first()`` and ``second()``, displayed in that order or, ``reverse``, the other."""
    if reverse:
        later = sess.publish(second())
        return sess.publish(first()), later
    earlier = sess.publish(first())
    return earlier, sess.publish(second())


@pytest.mark.parametrize("order", ["flagged counts first", "flag sums first"])
def test_a_flag_sum_is_a_count_of_the_flagged(sess: Session, order: str) -> None:
    """Counts of the flagged people by district (A 17) and the flag's sum by {person 5 alone, A with
    C, B}: person 5 (flag 1) reads C's flagged as A/C − A + 1."""
    df = _people()
    counts, sums = _both(sess, lambda: df[df.flag == 1].groupby("district").size(),
                         lambda: df.groupby("grp101").flag.sum(), reverse=order == "flag sums first")
    a, ac = value(counts, "A"), value(sums, "A/C")
    if cleared(counts, sums) and a is not None and ac is not None:
        assert ac - a + 1 != int(df.flag[df.district == "C"].sum())


def test_a_flag_mean_tells_its_group_size(sess: Session) -> None:
    """Counts by district (A 40), then the flag's mean by {person 5 alone, A with C, B}: A/C's mean
    17/42 in lowest terms gives its 42 people, and C = 42 − (40 − 1) = 3."""
    df = _people()
    counts = sess.publish(df.groupby("district").size())
    means = sess.publish(df.groupby("grp101").flag.mean())
    a, m = value(counts, "A"), value(means, "A/C")
    if cleared(counts, means) and a is not None and m is not None:
        assert Fraction(m).limit_denominator(73).denominator - (a - 1) != 3


@pytest.mark.parametrize("order", ["counts first", "ones first"])
def test_a_sum_of_ones_is_a_head_count(sess: Session, order: str) -> None:
    """Counts by district (A 40) and the sum of a column of ones by {person 6 alone, A with C, B}:
    person 6 reads C = A/C − (A − 1) = 42 − 39 = 3. (Ones first was an older leak, helper-54 03b:
    A/C and A overlap, neither holding the other, and differencing compared neither; now two cells
    that differ by 1..4 rows on each side are differenced too, ``differencing._two_sided``.)"""
    df = _people(one=lambda d: 1)
    counts, ones = _both(sess, lambda: df.groupby("district").size(), lambda: df.groupby("grp102").one.sum(),
                         reverse=order == "ones first")
    a, ac = value(counts, "A"), value(ones, "A/C")
    if cleared(counts, ones) and a is not None and ac is not None:
        assert ac - (a - 1) != 3


@pytest.mark.xfail(strict=True, reason="over-protection kept on purpose (relaxing it let a single contributor "
                                       "recover C, module docstring): after the district counts, the flag's sums and counts by district hide A's flag sum 17")
def test_a_flags_sums_after_the_district_counts_show_district_a(sess: Session) -> None:
    df = PEOPLE.copy()
    sess.publish(df.groupby("district").size())
    sums = sess.publish(df.groupby("district").flag.agg(["sum", "count"]))
    assert rows(sums)["A"] == ["17", "40"]


def test_counts_published_before_are_public_beside_other_figures(sess: Session) -> None:
    """Cases by district (Gonaives 234 shown), then a flag's sums and counts by district: Gonaives'
    count is the same figure, public, and never hidden as a secondary (its sum may be); before
    stop 51 no cell of a table telling more figures than the first was public."""
    r = make_referrals()
    r2 = r[(r.admin2 != "Mirebalais") | (r.index % 20 == 0)]
    first = sess.publish(r2.groupby("admin2").size())
    assert rows(first)["Gonaives"] == ["234"]
    second = sess.publish(r2.groupby("admin2").referral_accepted.agg(["sum", "count"]))
    assert rows(second)["Gonaives"][1] == "234"
    for label in ("Cap-Haitien", "Croix-des-Bouquets", "Port-au-Prince", "Saint-Marc"):
        assert rows(second)[label][1] == rows(first)[label][0]


def test_an_income_by_a_grouping_then_by_district_is_not_read_by_a_single_contributor(sess: Session) -> None:
    """Income by {person 6 alone, A with C, B} (A/C 630.58), then by district (A 590.47): person 6
    reads C = A/C − A + 13.15 = 53.26, C's three people's income (older leak, helper-54 04a)."""
    df = _people()
    by_grp = sess.publish(df.groupby("grp102").income.sum())
    by_district = sess.publish(df.groupby("district").income.sum())
    ac, a = value(by_grp, "A/C"), value(by_district, "A")
    if cleared(by_grp, by_district) and ac is not None and a is not None:
        c = ac - a + float(df.income[df.age >= 102].sum())
        assert abs(c - float(df.income[df.district == "C"].sum())) > 0.5


def test_a_margin_that_differs_by_a_few_rows_on_each_side_is_differenced(sess: Session) -> None:
    """Counts by {person 6 alone, A with C, B} (A/C 42), then the district × sex crosstab: A's women
    and men (20, 20) give A = 40 as a margin, and person 6 reads C = 42 − (40 − 1) = 3 (found
    reviewing stop 51: the margins were differenced one-sided only)."""
    import pandas as pd

    df = _people()
    by_grp = sess.publish(df.groupby("grp102").size())
    cross = sess.publish(pd.crosstab(df.district, df.sex))
    ac, a_row = value(by_grp, "A/C"), rows(cross)["A"]
    if cleared(by_grp, cross) and ac is not None and X not in a_row:
        assert ac - (float(a_row[0]) + float(a_row[1]) - 1) != 3
