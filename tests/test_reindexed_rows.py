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


# ------------------------------------------------------------------ labels lost by other means (red team)
LOST = {
    "concat ignore_index": lambda d: pd.concat([d[d.age <= 100]], ignore_index=True),
    "sort_values ignore_index": lambda d: d.sort_values("age", ignore_index=True)[lambda x: x.age <= 100],
    "sample ignore_index": lambda d: d.sample(frac=1, random_state=1, ignore_index=True)[lambda x: x.age <= 100],
    "set_axis": lambda d: d.set_axis(range(1000, 1000 + len(d)))[lambda x: x.age <= 100],
    "rename index": lambda d: d.rename(index=lambda i: i + 5000)[lambda x: x.age <= 100],
    "rebuilt from values": lambda d: pd.DataFrame(d[d.age <= 100].values, columns=d.columns),
    "rebuilt from records": lambda d: pd.DataFrame(d[d.age <= 100].to_dict("records")),
    "transposed twice": lambda d: d[d.age <= 100].reset_index(drop=True).T.T,
    "merged": lambda d: d[d.age <= 100].merge(pd.DataFrame({"sex": ["F", "M"], "z": [1, 2]}), on="sex"),
    "DuckDB copy": lambda d: __import__("duckdb").sql("select * from d where age <= 100").df(),
}


@pytest.mark.parametrize("restart", [False, True], ids=["one kernel", "after a restart"])
@pytest.mark.parametrize("form", list(LOST))
def test_a_copy_whose_labels_were_replaced_is_compared_as_a_multiset(tmp_path, monkeypatch, form, restart) -> None:
    """Rows identical in every column are interchangeable: a copy that is (nearly) a sub-multiset
    of the earlier rows, of columns that repeat, is matched by occurrence rank
    (``linking/universes.py`` ``_by_multiset``)."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session
    from sdc_magic.records.ledger import Ledger

    def session():
        s = Session(rules=preset("humanitarian"))
        s.ledger = Ledger(folder=tmp_path)
        s.capture.install()
        return s

    s = session()
    d = people()
    assert s.publish(d.groupby("sex").size()).metadata["sdc_magic"]["status"] == "pass"
    if restart:
        s.capture.uninstall()
        s = session()
        d = people()
    try:
        copy = LOST[form](d)
        meta = s.publish(copy.groupby("sex").size()).metadata["sdc_magic"]
    finally:
        s.capture.uninstall()
    assert meta["status"] != "pass", (form, meta)


def test_unrelated_data_with_a_constant_column_is_not_linked(sess) -> None:
    """Over-protection (red team): two data sets numbered alike, both with country "UG": the
    constant column agreed whatever the rows, and a table of the second was blocked."""
    first = people().assign(country="UG")
    sess.publish(first.groupby("sex").size())
    rng = np.random.default_rng(11)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 766), "age": rng.integers(0, 90, 766), "country": "UG"})
    meta = sess.publish(other.drop(index=3).groupby("sex").size()).metadata["sdc_magic"]
    assert meta["status"] == "pass" and meta["hidden"] == 0, meta


def test_an_unrelated_sample_of_the_same_columns_is_not_a_multiset_match(sess) -> None:
    """Half as many people drawn alike are not contained in the earlier ones (about a tenth of
    their rows are not): no link, no over-protection."""
    sess.publish(people().groupby("sex").size())
    rng = np.random.default_rng(5)
    other = pd.DataFrame({"sex": rng.choice(["F", "M"], 500), "age": rng.integers(0, 90, 500)})
    meta = sess.publish(other.groupby("sex").size()).metadata["sdc_magic"]
    assert meta["status"] == "pass" and meta["hidden"] == 0, meta
