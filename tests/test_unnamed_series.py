"""Sums and means of an unnamed Series are judged on their contributions, as a column's are.

Found this stop (2026-12-05): ``(df.income * (df.district == "C")).groupby(df.sex).sum()`` — a
product of two Series with different names has no name — showed F 35.21 and M 18.05 at ``pass``:
C's one man's income. The measures of an unnamed Series name no variable, so its values were
never read for the magnitude rules (largest contributions, "one or two units make the whole
total") and its sums were checked as if they were counts (36 men: above the threshold). The same
Series named, or as a frame's column, was ``blocked`` ("2 contributors"). Now the Series' own
values are its variable; and the rules fail closed when a sum or mean comes without the facts of
its contributions (``review``: "check by hand"), whatever path lost them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_engines_redteam import PEOPLE

from sdc_magic.config import preset
from sdc_magic.rules import CellFacts, assess

MAN = float(PEOPLE[(PEOPLE.district == "C") & (PEOPLE.sex == "M")].income.iloc[0])  # 18.05
C_WOMEN = float(PEOPLE[(PEOPLE.district == "C") & (PEOPLE.sex == "F")].income.sum())


def _numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*\.?\d*", text)]


def _shows(out: Any, value: float) -> bool:
    return any(abs(x - value) < 0.01 for x in _numbers(out.data["text/plain"].split("\nsdc_magic:")[0]))


def _cleared(out: Any) -> bool:
    return out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")


ONLY_C: dict[str, Callable[[pd.DataFrame], Any]] = {
    "product": lambda d: (d.income * (d.district == "C")).groupby(d.sex).sum(),
    "product-int": lambda d: (d.income * (d.district == "C").astype(int)).groupby(d.sex).sum(),
    "where-renamed": lambda d: d.income.where(d.district == "C", 0).rename(None).groupby(d.sex).sum(),
    "nan-renamed": lambda d: d.income.where(d.district == "C").rename(None).groupby(d.sex).sum(),
    "mean": lambda d: d.income.where(d.district == "C", 0).rename(None).groupby(d.sex).mean(),
    "agg-list": lambda d: d.income.where(d.district == "C", 0).rename(None).groupby(d.sex).agg(["sum", "max"]),
    "named-agg": lambda d: (d.income * (d.district == "C")).groupby(d.sex).agg(total="sum"),
    "array-keys": lambda d: (d.income * (d.district == "C")).groupby(d.sex.to_numpy()).sum(),
    "two-keys": lambda d: (d.income * (d.district == "C")).groupby([d.sex, d.flag]).sum(),
    "new-series": lambda d: pd.Series((d.income * (d.district == "C")).to_numpy()).groupby(d.sex.to_numpy()).sum(),
}


@pytest.mark.parametrize("form", sorted(ONLY_C))
def test_an_unnamed_series_of_one_mans_income_is_not_cleared(sess: Any, df: pd.DataFrame, form: str) -> None:
    out = sess.publish(ONLY_C[form](df))
    # the men's cell is his income alone (the other men contribute 0): never shown cleared
    assert not (_cleared(out) and _shows(out, MAN)), out.data["text/plain"]
    assert not (_cleared(out) and _shows(out, C_WOMEN)), out.data["text/plain"]


def test_the_same_series_named_and_unnamed_get_the_same_verdict(sess: Any, df: pd.DataFrame) -> None:
    named = sess.publish((df.income * (df.district == "C")).rename("k").groupby(df.sex).sum())
    unnamed = sess.publish((df.income * (df.district == "C")).groupby(df.sex).sum())
    assert unnamed.metadata["sdc_magic"]["status"] == named.metadata["sdc_magic"]["status"] == "blocked"
    assert unnamed.metadata["sdc_magic"]["rules_hit"] == named.metadata["sdc_magic"]["rules_hit"]


def test_an_unnamed_series_of_everyone_is_protected_like_a_named_one(sess: Any, df: pd.DataFrame) -> None:
    # (before: C hidden, B's 430.54 shown beside it; named, B is hidden as its secondary)
    named = sess.publish(df.income.rename("x").groupby(df.district).sum())
    unnamed = sess.publish(df.income.rename(None).groupby(df.district).sum())
    assert unnamed.data["text/plain"].count("✕") == named.data["text/plain"].count("✕") == 2
    assert unnamed.metadata["sdc_magic"]["status"] == "suppressed"


def test_plain_unnamed_sums_stay_cleared(sess: Any, df: pd.DataFrame) -> None:
    # over-protection check: an unnamed Series of everyone's income by sex is ordinary sums
    out = sess.publish((df.income * 1.0).rename(None).groupby(df.sex).sum())
    assert out.metadata["sdc_magic"]["status"] == "pass", out.data["text/plain"]


def test_a_sum_without_the_facts_of_its_contributions_is_review() -> None:
    # the rules' own safety net: a magnitude cell whose total is unknown is not judged silently
    rules = preset("humanitarian")
    facts = CellFacts(stat=np.array(["sum", "sum", "mean", "count"], dtype=object), units=np.array([36, 37, 36, 3.0]),
                      total=np.array([18.05, np.nan, np.nan, np.nan]),
                      top=np.array([[18.05, 0.0, 0.0], [np.nan] * 3, [np.nan] * 3, [np.nan] * 3]),
                      value=np.array([18.05, 35.21, 0.5, 3.0]))
    result = assess(facts, rules)
    assert result.primary.tolist() == [True, False, False, True]  # his income alone; 3 < 5
    assert result.review.tolist() == [False, True, True, False]
    assert {r.rule for r in result.reasons[1]} == {"custom"}
    assert "unknown" in result.reasons[1][0].message


def test_money_read_as_decimal_is_judged_on_its_values(sess: Any, df: pd.DataFrame) -> None:
    # (read_sql gives NUMERIC columns as Decimal objects: their sums were `review` for want of the
    # contributions' facts once the rules failed closed; red team of stop 50)
    import decimal

    money = df.assign(x=df.income.map(lambda v: decimal.Decimal(str(v))))
    assert sess.publish(money.groupby("sex").x.sum()).metadata["sdc_magic"]["status"] == "pass"
    alone = sess.publish(money.assign(x=money.x.where(money.district == "C", decimal.Decimal(0)))
                         .groupby("sex").x.sum())
    assert not (_cleared(alone) and _shows(alone, MAN)), alone.data["text/plain"]
