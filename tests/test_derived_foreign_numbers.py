"""Numbers from outside the checked tables, joined beside hidden cells (issue 23, pandas concat).

``pd.concat([t, pd.Series({"not C": len(df[df.district != "C"])})])`` drew "not C 70" beside A 40
and B ✕: 70 − 40 = 30 gave the secondary B back (and with the total, C); "under 100: 71" beside
37 + 36 gave two people over 100. A number that follows no checked table and is no published value
or total of one is withheld (``checking/lineage.py`` ``Dependence.foreign``): shown as a table of
its own it is checked and linked. The table's own total is a margin and is shown.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from sdc_magic.outputs.render import protected_frame

X = "✕"


def _drawn(sess: Any, obj: Any) -> dict:
    return protected_frame(sess.publish(obj).checked).to_dict()


def test_a_count_of_some_districts_beside_hidden_ones_is_withheld(sess: Any, df: pd.DataFrame) -> None:
    t = df.groupby("district").size()
    drawn = _drawn(sess, pd.concat([t, pd.Series({"not C": len(df[df.district != "C"])})]))
    assert drawn["B"] == X and drawn["not C"] == X


def test_a_merged_column_of_counts_from_the_rows_is_withheld(sess: Any, df: pd.DataFrame) -> None:
    t = df.groupby("district").size()
    others = pd.Series({d: int((df.district != d).sum()) for d in t.index})  # everyone but d: 33, 43, 70
    drawn = _drawn(sess, pd.concat([t.rename("n"), others.rename("others")], axis=1))
    assert drawn["others"]["B"] == X and drawn["others"]["C"] == X and drawn["n"]["B"] == X


def test_the_tables_own_total_is_shown(sess: Any, df: pd.DataFrame) -> None:
    t = df.groupby("district").size()
    for total in (len(df), t.sum()):
        drawn = _drawn(sess, pd.concat([t, pd.Series({"ALL": total})]))
        assert drawn["ALL"] == 73 and drawn["A"] == 40


def test_a_number_beside_a_table_without_hidden_cells_is_withheld(sess: Any, df: pd.DataFrame) -> None:
    t = df.groupby("sex").size()  # 37 + 36 = 73 people; 71 under 100: two people over 100
    drawn = _drawn(sess, pd.concat([t, pd.Series({"under 100": int((df.age < 100).sum())})]))
    # (the label's own number is drawn hidden too: a number written beside a hidden cell, "under ✕")
    assert list(drawn.values())[-1] == X and drawn["F"] == 37
