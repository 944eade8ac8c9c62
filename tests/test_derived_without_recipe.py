"""A table computed from a checked aggregate outside what pandas records (numpy round trips,
constructors, list comprehensions) is hidden where it is not a cell-by-cell function of its
parent (``checking/derived.py`` ``_not_cellwise``; red team round 7 and these own variants).

Referrals per month 01..06 = 135, 120, **2**, 140, 150, 25: the month table hides March (2) and
June (25, its secondary); April's 140 and February's 120 are published.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

MONTHS = ["01", "02", "03", "04", "05", "06"]
PER_MONTH = [135, 120, 2, 140, 150, 25]
ROWS = pd.DataFrame({"month": np.repeat(MONTHS, PER_MONTH)})
X = "✕"


def _drawn(out) -> dict:
    frame = protected_frame(out.checked)
    if isinstance(frame, pd.DataFrame):
        frame = frame.iloc[:, -1]
    return {k: (None if v == X else float(str(v).removesuffix(" ?"))) for k, v in frame.items()}


def _march_recoverable(drawn: dict, how: str) -> bool:
    """Whether the drawn numbers give March's 2 back, for the transform ``how``."""
    d = drawn
    if how == "reverse running total":  # from here to the end: 03 = r03 - r04
        return d["03"] is not None or (d["02"] is not None and d["04"] is not None and
                                       round(d["02"] - 120 - d["04"]) == 2)
    if how in ("running total", "partial sums", "stacked columns"):
        return d["04"] is not None and d["02"] is not None and round(d["04"] - d["02"] - 140) == 2
    if how == "difference by roll":  # 04 - 03
        return d["04"] is not None and round(140 - d["04"]) == 2
    if how == "pair sums":  # x[i] + x[i-1]: 03 shows 120 + 2, 04 shows 140 + 2
        return any(v is not None and 2 in (round(v - 140), round(v - 120)) for v in d.values())
    raise AssertionError(how)


def _t() -> pd.Series:
    return ROWS.groupby("month").size()


DERIVED = {
    "running total": lambda t: pd.Series(np.add.accumulate(t.to_numpy()), index=t.index),
    "reverse running total": lambda t: pd.Series(np.cumsum(t.to_numpy()[::-1])[::-1], index=t.index),
    "difference by roll": lambda t: pd.Series(t.to_numpy() - np.roll(t.to_numpy(), 1), index=t.index),
    "pair sums": lambda t: pd.Series(np.convolve(t.to_numpy(), [1, 1])[:len(t)], index=t.index),
    "partial sums": lambda t: pd.Series([int(t.iloc[:i + 1].sum()) for i in range(len(t))], index=t.index),
    "stacked columns": lambda t: pd.DataFrame(np.column_stack([t.to_numpy(), np.cumsum(t.to_numpy())]),
                                              index=t.index, columns=["n", "cum"]),
}


@pytest.mark.parametrize("how", list(DERIVED))
def test_no_recipe_does_not_give_march_back(sess: Session, how: str) -> None:
    t = _t()
    sess.publish(t)
    out = sess.publish(DERIVED[how](t))
    assert out.metadata["sdc_magic"]["status"] != "pass"
    assert not _march_recoverable(_drawn(out), how)


@pytest.mark.parametrize("how", ["log", "scaled", "rank"])
def test_a_cell_by_cell_transform_keeps_its_published_cells(sess: Session, how: str) -> None:
    t = _t()
    sess.publish(t)
    values = {"log": np.log(t.to_numpy()), "scaled": t.to_numpy() * 2.5,
              "rank": t.rank().to_numpy()}[how]
    out = sess.publish(pd.Series(values, index=t.index))
    drawn = _drawn(out)
    assert drawn["03"] is None  # March's own cell stays hidden
    shown = [k for k, v in drawn.items() if v is not None]
    assert {"01", "02", "04", "05"} <= set(shown), drawn
