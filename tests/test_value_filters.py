"""Rows kept by a filter on a table's values tell those values (round 6: ``t[t == 2]``).

``t[t == 2]`` drew the single row "Z ✕" at ``suppressed``: the code says Z's count is 2. Comparisons
of an aggregation's result keep a recipe (``capture/derivations.py``), so the selection is computed
again with the hidden cells moved far above and far below (``checking/lineage.py``
``labels_pinned``); a label kept or dropped both ways pins a hidden value, and nothing of the
table is drawn. One-sided filters (``t > 0``, ``t >= 5``, ``t > 50``) bound hidden values on one
side only and are shown as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.checking.selection import PINNED_LABELS
from sdc_magic.jupyter.session import Session

#: districts A-E of 60-100 people and Z of 2 (hidden; B its secondary)
SIZES = {"A": 77, "B": 62, "C": 83, "D": 80, "E": 95, "Z": 2}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    district = np.repeat(list(SIZES), list(SIZES.values()))
    return pd.DataFrame({"district": district, "sex": rng.choice(["F", "M"], len(district))})


def _withheld(out: Any) -> bool:
    return out.metadata["sdc_magic"]["status"] == "blocked" and PINNED_LABELS[:40] in out.data["text/plain"]


@pytest.mark.parametrize("code", [
    "t[t == 2]", "t.loc[t == 2]", "t[t.between(1, 4)]", "t.where(t == 2).dropna()", "t[t.isin([1, 2, 3])]",
    "t[(t > 1) & (t < 3)]", "t.to_frame('n').query('n == 2')", "t[t.eq(2)]", "t[t != t.min()]",
    # reshaped first (the labels are positions or pairs), or a one-sided clause added (red team)
    "t.reset_index(name='n').query('n == 2')", "t.reset_index(name='n').query('1 <= n <= 4')",
    "t[(t == 2) | (t > 90)]",
    # the values made labels
    "t.to_frame('n').set_index('n')", "t.reset_index().set_index(0)", "t.to_frame('n').set_index('n', append=True)",
])
def test_a_selection_that_pins_a_hidden_value_is_withheld(sess: Session, code: str) -> None:
    df = _frame()
    t = df.groupby("district").size()
    assert sess.check(t).hidden.ravel().tolist() == [False, True, False, False, False, True]
    out = sess.publish(eval(code))
    assert _withheld(out), out.data["text/plain"]
    assert "Z" not in out.data["text/plain"] and "Z" not in out.data.get("text/html", "")
    assert "62" not in out.data["text/plain"]  # (B, the secondary, as a label)


@pytest.mark.parametrize("code", ["t[t > 0]", "t[t >= 5]", "t[t > 50]", "t.nlargest(3)", "t.head(3)",
                                  "t[t.index != 'A']", "t[t.between(10, 200)]", "t[(t > 10) & (t < 1000)]"])
def test_one_sided_or_label_selections_are_shown(sess: Session, code: str) -> None:
    df = _frame()
    t = df.groupby("district").size()  # noqa: F841 (read by eval)
    out = sess.publish(eval(code))
    assert not _withheld(out)
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")


def test_a_crosstab_filtered_on_a_hidden_column_value_is_withheld(sess: Session) -> None:
    df = _frame()
    x = pd.crosstab(df.district, df.sex)
    z_women = int(x.loc["Z", "F"])
    out = sess.publish(x[x["F"] == z_women])
    assert _withheld(out)


def test_a_stacked_crosstab_filtered_with_a_one_sided_clause_is_withheld(sess: Session) -> None:
    df = _frame()
    x = pd.crosstab(df.district, df.sex)
    s = x.stack()
    z = int(x.loc["Z"].max())
    assert _withheld(sess.publish(s[(s == z) | (s > 60)]))


def test_a_mask_shown_as_a_table_hides_the_hidden_rows(sess: Session) -> None:
    df = _frame()
    t = df.groupby("district").size()
    out = sess.publish(t == 2)
    hidden = dict(zip(t.index, out.checked.hidden.ravel(), strict=True))
    assert hidden["Z"]


# ------------------------------------------------------------------ DuckDB: HAVING on the figures
@pytest.mark.parametrize("having", ["count(*) = 2", "count(*) BETWEEN 1 AND 4", "count(*) > 1 AND count(*) < 3",
                                    "count(*) IN (1, 2, 3)"])
def test_duckdb_having_that_pins_a_hidden_group_is_withheld(sess: Session, having: str) -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _frame()  # noqa: F841 (read by DuckDB)
    out = sess.publish(duckdb.sql(f"select district, count(*) as n from df group by 1 having {having} order by 1"))
    assert out.metadata["sdc_magic"]["status"] == "blocked" and "HAVING" in out.data["text/plain"]
    assert "Z" not in out.data["text/plain"]


@pytest.mark.parametrize("having", ["count(*) > 10", "count(*) >= 5"])
def test_duckdb_one_sided_having_is_shown(sess: Session, having: str) -> None:
    duckdb = pytest.importorskip("duckdb")
    df = _frame()  # noqa: F841 (read by DuckDB)
    out = sess.publish(duckdb.sql(f"select district, count(*) as n from df group by 1 having {having} order by 1"))
    assert "HAVING condition" not in out.data["text/plain"]


# ------------------------------------------------------------------ polars: filter on the figures
@pytest.mark.parametrize("how", ["eq", "is_in", "is_between", "gt and lt", "label first, then eq"])
def test_polars_filter_that_pins_a_hidden_group_is_withheld(sess: Session, how: str) -> None:
    pl = pytest.importorskip("polars")
    g = pl.from_pandas(_frame()).group_by("district").len().sort("district")
    n = pl.col("len")
    if how == "label first, then eq":  # the same cells shown first by their label: no reuse of that decision
        sess.publish(g.filter(pl.col("district") == "Z"))
    pred = {"eq": n == 2, "is_in": n.is_in([1, 2, 3]), "is_between": n.is_between(1, 4),
            "gt and lt": (n > 1) & (n < 3), "label first, then eq": n == 2}[how]
    out = sess.publish(g.filter(pred))
    assert out.metadata["sdc_magic"]["status"] == "blocked" and "filter" in out.data["text/plain"]


@pytest.mark.parametrize("how", ["gt", "label"])
def test_polars_one_sided_or_label_filters_are_shown(sess: Session, how: str) -> None:
    pl = pytest.importorskip("polars")
    g = pl.from_pandas(_frame()).group_by("district").len().sort("district")
    pred = pl.col("len") > 10 if how == "gt" else pl.col("district") == "A"
    out = sess.publish(g.filter(pred))
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed", "review")
    assert "bounds their figures" not in out.data["text/plain"]


# ----------------------------------------------- masks with no recipe: a selection of hidden cells only
@pytest.mark.parametrize("code", ["t[np.where(t == 2, True, False)]", "t[t.to_numpy() == 2]", "t.loc[lambda s: s == 2]",
                                  "t.drop(t.index[t != 2])", "t.iloc[np.flatnonzero(t.to_numpy() == 2)]",
                                  "t.loc[['Z']]", "t[t < 5]", "t[t == 2].reset_index()",
                                  "t.to_frame('n').loc[lambda f: f.n == 2]"])
def test_a_selection_showing_hidden_cells_only_is_withheld(sess: Session, code: str) -> None:
    df = _frame()
    t = df.groupby("district").size()
    out = sess.publish(eval(code, {"t": t, "np": np}))
    text = out.data["text/plain"]
    # (a function's mask is recomputed since issue 23's red team: the lineage withholds it first)
    assert out.metadata["sdc_magic"]["status"] == "blocked" and (
        "every cell this selection" in text or "depends on values its parent table hides" in text)
    assert "Z" not in text


def test_a_selection_with_published_cells_beside_a_hidden_one_is_shown(sess: Session) -> None:
    df = _frame()
    t = df.groupby("district").size()
    out = sess.publish(t.loc[["A", "Z"]])
    assert out.metadata["sdc_magic"]["status"] in ("pass", "suppressed")
