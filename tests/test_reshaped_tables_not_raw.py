"""A checked table reshaped, listed or cut down is never drawn as row-level data with its values.

Why (red team rt53a, stop 50; on screen, never exportable): `t.melt()` of a crosstab or of a
pivot_table of sums, `groupby().income.unique()` and `groupby().income.nsmallest(2).droplevel(1)` were
drawn with every value as computed — C's 2 women and 1 man, his income 18.05, C's three incomes —
while `t.reset_index().melt(...)`, `agg(list)` and `nsmallest(2)` itself were protected or withheld.
"""

from __future__ import annotations

import pandas as pd
import pytest
from shown_cells import status
from test_engines_redteam import PEOPLE

from sdc_magic.jupyter.session import Session

MELTS = {
    "crosstab.melt()": lambda df: pd.crosstab(df.district, df.sex).melt(),
    "pd.melt(crosstab)": lambda df: pd.melt(pd.crosstab(df.district, df.sex)),
    "pivot_table(sum).melt(ignore_index=False)": lambda df: df.pivot_table(
        index="district", columns="sex", values="income", aggfunc="sum").melt(ignore_index=False),
    "max.unstack().T.melt()": lambda df: df.groupby(["district", "sex"]).income.max().unstack().T.melt(),
}


@pytest.mark.parametrize("name", list(MELTS))
def test_a_melted_table_keeps_its_hidden_cells(sess: Session, name: str) -> None:
    out = sess.publish(MELTS[name](PEOPLE.copy()))
    assert status(out) != "blocked" or "withheld" in out.data["text/plain"]
    assert "row-level data" not in out.data["text/plain"]
    body = out.data["text/plain"].split("sdc_magic:")[0]
    for secret in ("18.05", "35.21"):  # C's man's income, C's women's income sum
        assert secret not in body
    if name != "max.unstack().T.melt()" and "income" not in name and "pivot" not in name:
        values = [line.split()[-1] for line in body.splitlines()[1:] if line.split()]
        assert "1" not in values and "2" not in values  # C's 1 man and 2 women


def test_a_melt_of_row_level_data_is_still_row_level(sess: Session) -> None:
    out = sess.publish(PEOPLE[["district", "income"]].head(4).melt())
    assert "row-level data" in out.data["text/plain"]


def test_the_melt_of_a_table_with_its_labels_kept_is_protected(sess: Session) -> None:
    t = pd.crosstab(PEOPLE.district, PEOPLE.sex)
    out = sess.publish(t.reset_index().melt(id_vars="district"))
    assert status(out) == "suppressed"


@pytest.mark.parametrize("column", ["income", "sex"])
def test_unique_values_per_group_are_withheld(sess: Session, column: str) -> None:
    out = sess.publish(PEOPLE.groupby("district")[column].unique())
    assert status(out) == "blocked" and "output withheld" in out.data["text/plain"]
    assert "18.05" not in out.data["text/plain"] and "17.19" not in out.data["text/plain"]


LISTED = {
    "unique().explode()": lambda df: df.groupby("district").income.unique().explode(),
    "unique().apply(min)": lambda df: df.groupby("district").income.unique().apply(min),
    "agg(list).explode()": lambda df: df.groupby("district").income.agg(list).explode(),
    "agg(list).apply(min)": lambda df: df.groupby("district").income.agg(list).apply(min),
    "agg(list).map(first)": lambda df: df.groupby("district").income.agg(list).map(lambda a: a[0]),
}


@pytest.mark.parametrize("name", list(LISTED))
def test_what_is_computed_from_lists_per_group_is_withheld(sess: Session, name: str) -> None:
    """Red team (helper-54): the lists drawn as ✕, then exploded or reduced, drew every income of A
    and B, or each district's lowest income (one person's), at 'review'."""
    out = sess.publish(LISTED[name](PEOPLE.copy()))
    assert status(out) == "blocked" and "output withheld" in out.data["text/plain"]
    for secret in ("10.18", "10.39", "17.19"):
        assert secret not in out.data["text/plain"]


def test_a_table_with_a_list_column_beside_counts_keeps_its_counts(sess: Session) -> None:
    """Only results made of lists alone are withheld whole; beside a count, the lists are withheld
    cell by cell as before."""
    out = sess.publish(PEOPLE.groupby("district").income.agg(["count", list]))
    assert "output withheld" not in out.data["text/plain"]
    assert "40" in out.data["text/plain"].split("sdc_magic:")[0]


@pytest.mark.parametrize("make", [
    lambda df: df.groupby("district").income.nsmallest(2).droplevel(1),
    lambda df: df.groupby("district").income.nsmallest(2).reset_index(),
    lambda df: df.groupby("district").income.nlargest(1).round(1),
], ids=["droplevel", "reset_index", "round"])
def test_what_is_computed_from_a_withheld_result_is_withheld(sess: Session, make) -> None:
    out = sess.publish(make(PEOPLE.copy()))
    assert status(out) == "blocked"
    assert "output withheld" in out.data["text/plain"]
    assert "17.19" not in out.data["text/plain"] and "18.0" not in out.data["text/plain"]
