"""Rows re-indexed by ``reset_index`` are placed by the labels they had (issue 23.13, round 5's class).

A frame whose columns cannot tell people apart (sex and an age: 766 people in 2 × 90
combinations) loses its labels with ``reset_index(drop=True)``; linking then could place its
rows neither by labels nor by content, and a filtered, re-indexed copy was cleared beside
the whole (407 − 406 = 1: the person aged 101). The capture remembers the labels the rows had
(``sdc_magic/evidence/row_origins.py``), selections and filters of the re-indexed frame
inherit them, and linking places the rows by them, within a kernel and after a restart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_restart_by_labels import kernel, people

FORMS = {
    "reset, then count": lambda d: d[d.age <= 100].reset_index(drop=True).groupby("sex").size(),
    "reset twice": lambda d: d[d.age <= 100].reset_index(drop=True).reset_index(drop=True).groupby("sex").size(),
    "shuffled, reset": lambda d: d[d.age <= 100].sample(frac=1, random_state=2).reset_index(drop=True)
    .groupby("sex").size(),
    "reset keeping the index": lambda d: d[d.age <= 100].reset_index().groupby("sex").size(),
    "reset, then filter": lambda d: d.reset_index(drop=True)[lambda x: x.age <= 100].groupby("sex").size(),
    "column of a reset frame": lambda d: d[d.age <= 100].reset_index(drop=True)["sex"].value_counts(),
    "series reset": lambda d: d.loc[d.age <= 100, "sex"].reset_index(drop=True).value_counts(),
    "columns, then reset": lambda d: d[d.age <= 100][["sex"]].reset_index(drop=True).groupby("sex").size(),
    "reset, then query": lambda d: d.reset_index(drop=True).query("age <= 100").groupby("sex").size(),
}


@pytest.mark.parametrize("index", ["range", "case_id"])
@pytest.mark.parametrize("form", list(FORMS))
def test_a_reindexed_filter_is_compared_with_the_whole(sess, form, index) -> None:
    d = people(index)
    whole = sess.publish(d.groupby("sex").size()).metadata["sdc_magic"]
    assert whole["status"] == "pass"
    meta = sess.publish(FORMS[form](d)).metadata["sdc_magic"]
    assert meta["status"] != "pass", (form, meta)
    assert meta["hidden"] >= 1


@pytest.mark.parametrize("form", ["reset, then count", "series reset", "reset, then filter"])
def test_a_reindexed_filter_after_a_restart(tmp_path, monkeypatch, form) -> None:
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert kernel(tmp_path, lambda d: d.groupby("sex").size(), people("case_id"))["status"] == "pass"
    meta = kernel(tmp_path, FORMS[form], people("case_id"))
    assert meta["status"] != "pass", meta


def test_an_unrelated_reindexed_frame_is_not_linked(sess) -> None:
    """Over-protection check: another data set with the same columns, filtered and re-indexed,
    is its own rows (its labels before were its own; its values disagree with the people's)."""
    sess.publish(people().groupby("sex").size())
    rng = np.random.default_rng(7)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 900), "age": rng.integers(0, 90, 900)})
    meta = sess.publish(other[other.age < 89].reset_index(drop=True).groupby("sex").size()).metadata["sdc_magic"]
    assert meta["status"] == "pass" and meta["hidden"] == 0, meta


def test_the_user_frame_is_untouched_and_plain_pandas_agrees(sess) -> None:
    d = people()
    before = d.copy()
    got = d[d.age <= 100].reset_index(drop=True)
    assert got.equals(before[before.age <= 100].reset_index(drop=True))
    assert d.equals(before) and list(got.index) == list(range(len(got)))


@pytest.mark.parametrize("table", [
    lambda x: pd.crosstab(x.sex, "n"),
    lambda x: pd.crosstab(x.sex, x.age > 50, margins=True),
    lambda x: x.pivot_table(index="sex", values="age", aggfunc="count"),
    lambda x: x.sex.groupby(x.sex).size(),
], ids=["crosstab", "crosstab with margins", "pivot_table", "series groupby"])
def test_other_calls_on_a_reindexed_copy(sess, table) -> None:
    d = people()
    sess.publish(d.groupby("sex").size())
    x = d[d.age <= 100].reset_index(drop=True)
    meta = sess.publish(table(x)).metadata["sdc_magic"]
    assert meta["status"] != "pass", meta
