"""A cell recomputed from the published cells of one checked table is not checked again as a count.

``x.diff(axis=1)`` shows 18 − 17 = 1 and ``m / m["01"]`` January's 1.0: read as counts of one
person they were primaries and blocked the tables (issue 23, over-protection). The recomputation
(``checking/lineage.py``) now also tells which cells follow exactly one checked table; those are
functions of cells anyone can read there. Cells of two tables (``all − resolved``: a new count)
and cells of none (a number typed or computed from the rows) are still checked as counts, and
cells that move with a hidden cell are still hidden.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"
#: referrals per month (March's 2 is hidden, June's 25 its secondary)
PER_MONTH = {"01": 135, "02": 120, "03": 2, "04": 140, "05": 150, "06": 25}
#: resolved per month: January 133 (2 unresolved), the rest all resolved
RESOLVED = {"01": 133, "02": 120, "03": 2, "04": 140, "05": 150, "06": 25}


def _rows() -> pd.DataFrame:
    months = np.repeat(list(PER_MONTH), list(PER_MONTH.values()))
    resolved = np.ones(len(months), dtype=bool)
    resolved[:PER_MONTH["01"] - RESOLVED["01"]] = False
    return pd.DataFrame({"month": months, "resolved": resolved})


def _drawn(out: Any) -> Any:
    return protected_frame(out.checked)


def _number(v: Any) -> float:
    """A drawn number (unverified ones carry a ``?`` mark)."""
    return float(str(v).removesuffix("?").strip())


def _status(out: Any) -> str:
    return out.metadata["sdc_magic"]["status"]


def test_differences_of_published_cells_are_shown(sess: Session) -> None:
    people = {"A": (20, 20), "B": (14, 16), "C": (1, 2), "D": (6, 6), "E": (17, 18)}  # C hidden, D beside it
    df = pd.DataFrame([(d, sex) for d, (f, m) in people.items() for sex, k in (("F", f), ("M", m))
                       for _ in range(k)], columns=["district", "sex"])
    with sess.capturing():
        x = pd.crosstab(df.district, df.sex)
    out = sess.publish(x.diff(axis=1))
    drawn = _drawn(out)
    assert _status(out) == "review"  # was blocked: 0 and 5 read as counts below the threshold
    truth = x["M"] - x["F"]
    shown = [k for k in truth.index if drawn.loc[k, "M"] != X]
    assert shown and all(_number(drawn.loc[k, "M"]) == truth[k] for k in shown)
    assert {0, 1} <= {truth[k] for k in shown}  # A 20 - 20, E 18 - 17: "counts" below 5, drawn
    assert drawn.loc["C", "M"] == X  # C's 2 - 1: moves with the hidden cells


def test_an_index_on_a_published_month_is_shown_and_the_small_month_hidden(sess: Session) -> None:
    with sess.capturing():
        m = _rows().groupby("month").size()
    out = sess.publish(m / m["01"])
    drawn = _drawn(out)
    assert _status(out) != "blocked"
    assert _number(drawn["01"]) == 1.0 and _number(drawn["02"]) == pytest.approx(120 / 135, abs=1e-6)
    assert drawn["03"] == X and drawn["06"] == X


def test_a_difference_of_two_tables_is_still_checked_as_a_count(sess: Session) -> None:
    df = _rows()
    with sess.capturing():
        everyone = df.groupby("month").size()
        resolved = df[df.resolved].groupby("month").size()
    out = sess.publish(everyone - resolved)  # 2 unresolved in January: a count of people
    assert _drawn(out)["01"] == X


@pytest.mark.parametrize("derive", [lambda m: m * 0 + 3, lambda m: m - m + 2],
                         ids=["times zero plus three", "minus itself plus two"])
def test_a_constant_is_still_checked_as_a_count(sess: Session, derive) -> None:
    with sess.capturing():
        m = _rows().groupby("month").size()
    drawn = _drawn(sess.publish(derive(m)))
    assert all(drawn[k] == X for k in PER_MONTH if k not in ("03", "06"))


@pytest.mark.parametrize(("derive", "moved"), [
    (lambda m: m.cumsum(), {"03", "04", "05", "06"}),
    (lambda m: m.shift(-1) / m, {"02", "03", "05", "06"}),
    (lambda m: m.diff(), {"03", "04", "06"}),
    (lambda m: m.pct_change(), {"03", "04", "06"}),
    (lambda m: m.rolling(2).sum(), {"03", "04", "06"}),
], ids=["cumsum", "ratio", "diff", "pct_change", "rolling"])
def test_cells_that_move_with_a_hidden_month_stay_hidden(sess: Session, derive, moved: set[str]) -> None:
    with sess.capturing():
        m = _rows().groupby("month").size()
    drawn = _drawn(sess.publish(derive(m)))
    assert {k for k in PER_MONTH if drawn[k] == X} >= moved
