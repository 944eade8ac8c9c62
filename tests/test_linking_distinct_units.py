"""A table of distinct counts links in the distinct values of the column it counts.

Episodes (several rows per person): district C's two women have 8 rows. Distinct people by sex
for everyone (37), districts A or C (22) and B or C (17) told 22 + 17 − 37 = 2 women in C, all
three cleared: linking judged the group the filters separate together by its 8 rows, not its 2
people, unless a ``unit`` was declared. Now the counted column is the table's unit for linking
(``linking/populations.py`` ``distinct_counted``), whichever form computes the distinct counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from test_engines_redteam import PEOPLE
from test_redteam_round4 import AC, BC, _cleared, _recover, _totals

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session


def _episodes() -> pd.DataFrame:
    reps = np.where(PEOPLE.district == "C", 4, np.random.default_rng(3).integers(1, 4, len(PEOPLE)))
    return PEOPLE.loc[PEOPLE.index.repeat(reps)].reset_index(drop=True)


EP = _episodes()
EP_PL = pl.from_pandas(EP)
WOMEN_IN_C = int(PEOPLE[(PEOPLE.district == "C") & (PEOPLE.sex == "F")].person.nunique())


def _polars_filtered(d: pd.DataFrame) -> pl.DataFrame:
    """The same rows filtered from one polars frame (labelled by their positions in it)."""
    return EP_PL.filter(pl.col("district").is_in(sorted(set(d.district))))


FORMS = {
    "groupby nunique": lambda d: d.groupby("sex").person.nunique(),
    "named agg": lambda d: d.groupby("sex").agg(n=("person", "nunique")),
    "agg dict": lambda d: d.groupby("sex").agg({"person": "nunique"}),
    "pivot_table": lambda d: d.pivot_table(index="sex", values="person", aggfunc="nunique"),
    "polars n_unique": lambda d: _polars_filtered(d).group_by("sex").agg(pl.col("person").n_unique()).sort("sex"),
    # distinct counts beside other statistics (red team of the first version: still 22 + 17 - 37)
    "nunique and size": lambda d: d.groupby("sex").agg(n=("person", "nunique"), rows=("person", "size")),
    "agg list": lambda d: d.groupby("sex").person.agg(["nunique", "size"]),
    "nunique and a mean": lambda d: d.groupby("sex").agg(n=("person", "nunique"), age=("age", "mean")),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_distinct_people_of_a_small_common_group_are_not_recoverable(form: str) -> None:
    assert WOMEN_IN_C == 2
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        outs = [s.publish(FORMS[form](d)) for d in (EP, EP[EP.district.isin(AC)], EP[EP.district.isin(BC)])]
        everyone, ac, bc = (_totals(o) for o in outs)
        assert everyone.get("F") is not None  # the first table is shown: the test can fail
        got = _recover(ac, bc, everyone, "F")
        assert not (_cleared(*outs) and got == WOMEN_IN_C), (form, [o.metadata["sdc_magic"]["status"] for o in outs])
    finally:
        s.capture.uninstall()


def test_distinct_counts_of_unrelated_frames_stay_published() -> None:
    """Over-protection check: distinct people by sex of two different data sets stay as they were."""
    other = EP.assign(person=EP.person + 10_000, district=EP.district.map({"A": "X", "B": "Y", "C": "Z"}))
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        outs = [s.publish(EP.groupby("sex").person.nunique()), s.publish(other.groupby("sex").person.nunique())]
        assert [o.metadata["sdc_magic"]["status"] for o in outs] == ["pass", "pass"]
    finally:
        s.capture.uninstall()


@pytest.mark.parametrize("pair", ["rows, then distinct ages of a filter", "distinct people of a filter, then ages"])
def test_distinct_values_of_another_column_are_not_people(pair: str) -> None:
    """Over-protection check (red team of the first version): a table of distinct ages is linked in
    ages only against tables of distinct ages; against a count of rows or of people it was blocked
    ("differ by fewer than 5 units": 32 people and 29 ages cannot be subtracted)."""
    first, second = {
        "rows, then distinct ages of a filter": (lambda: EP.groupby("sex").size(),
                                                 lambda: EP[EP.age >= 30].groupby("sex").age.nunique()),
        "distinct people of a filter, then ages": (lambda: EP[EP.age >= 30].groupby("sex").person.nunique(),
                                                   lambda: EP.groupby("sex").age.nunique()),
    }[pair]
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        outs = [s.publish(first()), s.publish(second())]
        assert [o.metadata["sdc_magic"]["status"] for o in outs] == ["pass", "pass"]
    finally:
        s.capture.uninstall()


def test_distinct_people_are_linked_after_a_restart(tmp_path) -> None:
    """The column a table counts is saved with its population: a new kernel compares in people too."""
    from sdc_magic.records.ledger import Ledger

    def session() -> Session:
        s = Session(rules=preset("humanitarian"))
        s.ledger = Ledger(tmp_path, persist=True)
        s.capture.install()
        return s

    nunique = FORMS["groupby nunique"]
    first = session()
    try:
        outs = [first.publish(nunique(EP)), first.publish(nunique(EP[EP.district.isin(AC)]))]
    finally:
        first.capture.uninstall()
    second = session()
    try:
        outs.append(second.publish(nunique(EP[EP.district.isin(BC)])))
    finally:
        second.capture.uninstall()
    everyone, ac, bc = (_totals(o) for o in outs)
    assert not (_cleared(*outs) and _recover(ac, bc, everyone, "F") == WOMEN_IN_C)
