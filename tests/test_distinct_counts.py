"""Distinct counts: of units (a count) or of categories (judged by the group's units).

73 people: district A 40 (20 F / 20 M), B 30, C 3 (2 F / 1 M); households of two.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"
DF = pd.DataFrame({"person": np.arange(73), "household": np.arange(73) // 2,
                   "district": np.repeat(["A", "B", "C"], [40, 30, 3]),
                   "sex": np.array(["F", "M"] * 35 + ["F", "F", "M"])})


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _shown(out) -> dict:
    frame = protected_frame(out.checked)
    return (frame.iloc[:, 0] if isinstance(frame, pd.DataFrame) else frame).to_dict()


def test_distinct_categories_are_not_small_counts(sess: Session) -> None:
    out = sess.publish(DF.groupby("district").sex.nunique())
    assert _shown(out) == {"A": 2, "B": 2, "C": X}  # C hidden: 3 people, not 2 categories
    assert out.metadata["sdc_magic"]["status"] != "blocked"


def test_distinct_households_are_a_count(sess: Session) -> None:
    """household has 37 values among 73 rows: a distinct count of it counts households."""
    small = DF[DF.household.isin([0, 1, 2, 20, 21, 22, 23, 24, 25, 26, 27])]
    out = sess.publish(small.assign(d=np.where(small.household < 20, "x", "y")).groupby("d").household.nunique())
    # x: 6 people (not small) in 3 households: the shown 3 is a small count of households
    assert _shown(out)["x"] == X


def test_the_declared_unit_is_always_counted() -> None:
    s = Session(rules=dataclasses.replace(preset("humanitarian"), unit="district"))
    s.capture.install()
    try:
        out = s.publish(DF.groupby("sex").district.nunique())  # 3 districts: a count of units
        assert set(_shown(out).values()) == {X}
    finally:
        s.capture.uninstall()
