"""Distinct counts of categories or of units (``checking/categories.py``).

A column read as a category has its distinct counts left out of the threshold (``nunique`` of
``sex`` is 1 or 2 whatever the group). Three people of C with 30 visits each, home and clinic
alike, are 3 values in C's 90 rows recurring across the kinds, as a category's would: distinct
people of C by kind (3 and 3) were ``pass`` (red team of stop 58, R2b). The frame the rows were
selected from decides too; the user may declare categories (``categories=``); what the check
read as categories is stated in the record's rules, the note and the certificate.
"""

from __future__ import annotations

import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import RulesError, apply_settings, preset
from sdc_magic.jupyter.extension import _frame_finder
from sdc_magic.records.verification import verify


def _visits() -> pd.DataFrame:
    visits = pd.DataFrame({"person": np.repeat([70, 71, 72], 30), "kind": np.tile(["home", "clinic"], 45),
                           "district": "C"})
    others = pd.DataFrame({"person": np.arange(70), "kind": np.where(np.arange(70) % 2, "home", "clinic"),
                           "district": np.where(np.arange(70) < 40, "A", "B")})
    return pd.concat([others, visits], ignore_index=True)


def _villages() -> pd.DataFrame:
    """North: 300 rows in 4 villages; south: 100 rows in 60 villages (a small base)."""
    rng = np.random.default_rng(0)
    n = 400
    return pd.DataFrame({"region": np.where(np.arange(n) < 300, "north", "south"), "sex": rng.choice(["F", "M"], n),
                         "village": np.where(np.arange(n) < 300, np.arange(n) % 4, 4 + np.arange(n) % 60)})


def _with_namespace(session: Any, **frames: pd.DataFrame) -> Any:
    """The session as the kernel extension sets it up: frames found in the user's namespace."""
    session.capture.frame_finder = _frame_finder(types.SimpleNamespace(user_ns=dict(frames)))
    return session


@pytest.mark.parametrize("named", [False, True])
def test_many_visit_people_of_a_filter_are_people_over_the_frame(named: bool, humanitarian_sessions: Any) -> None:
    ep = _visits()
    c = ep[ep.district == "C"]
    s = _with_namespace(humanitarian_sessions(), ep=ep, **({"c": c} if named else {}))
    out = s.publish(c.groupby("kind").person.nunique())
    assert out.metadata["sdc_magic"]["status"] != "pass"
    assert out.checked.hidden_flat.all()


def test_a_category_over_the_whole_frame_stays_a_category(humanitarian_sessions: Any) -> None:
    ep = _visits()
    s = _with_namespace(humanitarian_sessions(), ep=ep)
    out = s.publish(ep[ep.district != "C"].groupby("kind").district.nunique())
    assert out.metadata["sdc_magic"]["status"] == "pass"
    assert out.checked.rules.categories == ("district",)
    assert any("read as categories" in n for n in out.checked.notes)


def test_declared_categories_are_not_judged_by_the_threshold_and_verify(humanitarian_sessions: Any) -> None:
    df = _villages()
    north = df[df.region == "north"]
    s = _with_namespace(humanitarian_sessions(), df=df)
    assert s.publish(north.groupby("sex").village.nunique()).metadata["sdc_magic"]["status"] == "blocked"
    s.set_rules(categories="village")
    out = s.publish(north.groupby("sex").village.nunique())
    assert out.metadata["sdc_magic"]["status"] == "pass"
    folder = Path(tempfile.mkdtemp()) / "export"
    s.export(folder)
    assert verify(folder) == []


def test_a_category_the_check_read_is_stated_so_verify_accepts_it(humanitarian_sessions: Any) -> None:
    df = _villages()
    s = humanitarian_sessions()  # (no namespace: the table's rows decide)
    out = s.publish(df[df.region == "north"].groupby("sex").village.nunique())
    assert out.metadata["sdc_magic"]["status"] == "pass"
    assert out.metadata["sdc_magic"]["rules"]["categories"] == ["village"]
    folder = Path(tempfile.mkdtemp()) / "export"
    s.export(folder)
    assert verify(folder) == []


def test_categories_are_parsed_and_never_the_unit() -> None:
    rules = apply_settings(preset("humanitarian"), {"categories": "village; month"})
    assert rules.categories == ("village", "month")
    assert "categories village, month" in rules.describe()
    assert apply_settings(rules, {"categories": "none"}).categories == ()
    with pytest.raises(RulesError, match="unit column"):
        apply_settings(preset("humanitarian"), {"unit": "person", "categories": "person"})


def test_a_placeholder_id_does_not_make_people_a_category(humanitarian_sessions: Any) -> None:
    """Person 0 ("anonymous") on 2,000 rows put the frame's share of distinct people under 5 %:
    C's 3 people by kind were ``pass`` (red team of stop 59, F5). A category's median value has
    many rows too."""
    ep = _visits()
    anonymous = pd.DataFrame({"person": 0, "kind": np.where(np.arange(2000) % 2, "home", "clinic"),
                              "district": np.where(np.arange(2000) % 2, "A", "B")})
    ep = pd.concat([ep, anonymous], ignore_index=True)
    s = _with_namespace(humanitarian_sessions(), ep=ep)
    out = s.publish(ep[ep.district == "C"].groupby("kind").person.nunique())
    assert out.metadata["sdc_magic"]["status"] != "pass"
