"""Differencing counted in distinct units when a unit column is declared.

Episodes data: 60 people with 2-3 episodes each, districts A (people 0-29) and B; people
0 and 1 also have 3 episodes each at clinic X. Episode counts by district, then the same
without clinic X, differ by 6 episodes: not below the threshold in rows, but those 6
episodes are 2 people's (a cell of 2 units). Before this change both tables were
``pass``; the second now hides A.
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


def _episodes(clinic_people: list[int], per_person: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = [(p, "A" if p < 30 else "B", "clinic Y") for p in range(60) for _ in range(rng.integers(2, 4))]
    rows += [(p, "A", "clinic X") for p in clinic_people for _ in range(per_person)]
    return pd.DataFrame(rows, columns=["person", "district", "site"])


def _session(unit: str | None = "person") -> Session:
    s = Session(rules=dataclasses.replace(preset("humanitarian"), unit=unit))
    s.capture.install()
    return s


def _shown(out) -> dict:
    frame = protected_frame(out.checked)
    series = frame.iloc[:, 0] if isinstance(frame, pd.DataFrame) else frame
    return series.to_dict()


@pytest.mark.parametrize("order", ["all first", "filtered first"])
def test_six_episodes_of_two_people_are_a_cell_of_two(order: str) -> None:
    df = _episodes([0, 1], per_person=3)
    everyone = lambda: df.groupby("district").size()  # noqa: E731
    filtered = lambda: df[df.site != "clinic X"].groupby("district").size()  # noqa: E731
    s = _session()
    try:
        first, second = (everyone, filtered) if order == "all first" else (filtered, everyone)
        a, b = s.publish(first()), s.publish(second())
        shown_a, shown_b = _shown(a), _shown(b)
        assert a.metadata["sdc_magic"]["status"] == "pass"
        assert shown_b["A"] == X, (shown_a, shown_b)  # 78 - 72 = 6 episodes, 2 people
        assert any(r.rule == "differencing" for rs in b.checked.reasons.values() for r in rs)
    finally:
        s.capture.uninstall()


def test_six_episodes_of_six_people_are_not_hidden() -> None:
    """Over-protection check: the same row difference spread over 6 people is no small cell."""
    df = _episodes([0, 1, 2, 3, 4, 5], per_person=1)
    s = _session()
    try:
        s.publish(df.groupby("district").size())
        out = s.publish(df[df.site != "clinic X"].groupby("district").size())
        assert X not in _shown(out).values()
        assert out.metadata["sdc_magic"]["status"] == "pass"
    finally:
        s.capture.uninstall()


def test_without_a_unit_rows_decide_as_before() -> None:
    """No unit declared: rows are the units, a difference of 6 rows is not small."""
    df = _episodes([0, 1], per_person=3)
    s = _session(unit=None)
    try:
        s.publish(df.groupby("district").size())
        out = s.publish(df[df.site != "clinic X"].groupby("district").size())
        assert X not in _shown(out).values()
    finally:
        s.capture.uninstall()


def test_a_distinct_count_of_people_is_differenced_in_people() -> None:
    """People per district (nunique), then the same without people 0 and 1 (their 7-9
    episodes): 2 people differ, whatever the rows."""
    df = _episodes([0, 1], per_person=3)
    s = _session()
    try:
        first = s.publish(df.groupby("district").person.nunique())
        out = s.publish(df[~df.person.isin([0, 1])].groupby("district").person.nunique())
        assert _shown(first) == {"A": 30, "B": 30}
        assert (df.person.isin([0, 1])).sum() >= 5  # the rows alone would not flag it
        assert _shown(out)["A"] == X
    finally:
        s.capture.uninstall()
