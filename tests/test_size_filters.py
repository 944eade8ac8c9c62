"""Rows kept by the size of their group, then tabulated (issue 23, red team of this round).

``df.groupby(k).filter(lambda g: len(g) == 2 or len(g) > 15).groupby(k).size()`` drew "C F ✕"
beside A's 20s with B's 15s left out: C F is 2. Such frames are marked (``capture/size_filters.py``)
and a table of them that hides a cell is withheld; a one-sided choice is shown.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session

K = ["district", "sex"]
PINNING = {
    "groupby filter": lambda df: df.groupby(K).filter(lambda g: len(g) == 2 or len(g) > 15),
    "series groupby filter": lambda df: df.groupby(K).filter(lambda g: g.person.size == 2 or g.person.size > 15),
    "combined masks": lambda df: (lambda n: df[~((n != 2) & (n <= 15))])(df.groupby(K).person.transform("size")),
    "transform size isin": lambda df: df[df.groupby(K).person.transform("size").isin([2, 20])],
    "transform size, loc": lambda df: df.loc[(df.groupby(K).person.transform("size") == 2)
                                             | (df.groupby(K).person.transform("size") > 15)],
    "transform count between": lambda df: df[df.groupby(K).person.transform("count").between(2, 2)
                                             | (df.groupby(K).person.transform("count") > 15)],
}


@pytest.mark.parametrize("form", list(PINNING))
def test_a_table_of_rows_kept_by_group_size_is_withheld(sess: Session, df: pd.DataFrame, form: str) -> None:
    sess.publish(df.groupby(K).size())
    kept = PINNING[form](df)
    out = sess.publish(kept.groupby(K).size())
    meta = out.metadata["sdc_magic"]
    table = out.data["text/plain"].split("sdc_magic:")[0]
    assert meta["status"] == "blocked" and "✕" not in table, (form, out.data["text/plain"])


def test_a_crosstab_of_such_rows_is_withheld(sess: Session, df: pd.DataFrame) -> None:
    """The same rows tabulated by crosstab of their columns (review of this change)."""
    sess.publish(df.groupby(K).size())
    kept = PINNING["groupby filter"](df)
    out = sess.publish(pd.crosstab(kept.district, kept.sex))
    assert out.metadata["sdc_magic"]["status"] == "blocked", out.data["text/plain"]


@pytest.mark.parametrize("keep", [
    lambda df: df.groupby(K).filter(lambda g: len(g) >= 5),
    lambda df: df[df.groupby(K).person.transform("size") >= 5],
    lambda df: df.groupby("district").filter(lambda g: len(g) > 10),
], ids=["filter >= 5", "transform >= 5", "filter > 10 by district"])
def test_one_sided_choices_are_shown(sess: Session, df: pd.DataFrame, keep: Any) -> None:
    sess.publish(df.groupby(K).size())
    out = sess.publish(keep(df).groupby(K).size())
    assert out.metadata["sdc_magic"]["status"] in {"pass", "suppressed"}, out.data["text/plain"]


def test_the_user_results_are_plain_pandas(sess: Session, df: pd.DataFrame) -> None:
    before = df.copy()
    got = df.groupby(K).filter(lambda g: len(g) == 2 or len(g) > 15)
    sizes = df.groupby(K).person.transform("size")
    assert df.equals(before)
    assert got.equals(before.groupby(K).filter(lambda g: len(g) == 2 or len(g) > 15))
    assert np.array_equal(sizes.to_numpy(), before.groupby(K).person.transform("size").to_numpy())
    assert ((sizes == 2) | (sizes > 15)).dtype == bool
