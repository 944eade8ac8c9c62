"""A number inside a label: a count only when it is one (issue 23, over-blocking).

"Mobile team (2 staff)" is a category of the data: its 2 is not the size of anything in the
table, and the table was sent to ``review``. A label still sends the table to review when it
is written for the table ("Office (n=3)" after a rename) or when a category of the data
states its own group's size ("District C (n=3)" for a district of 3 cases).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session


@pytest.fixture
def sess(humanitarian_session):
    return humanitarian_session


def _cases(teams: list[str], sizes: list[int]) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    team = np.repeat(teams, sizes)
    return pd.DataFrame({"team": team, "sex": rng.choice(["F", "M"], len(team))})


def _label_notes(out) -> list[str]:
    return [n for n in out.checked.notes if "states a number" in n]


def test_a_category_naming_a_small_number_is_not_a_count(sess: Session) -> None:
    df = _cases(["Mobile team (2 staff)", "Office [3 desks]", "Field"], [40, 30, 25])
    for table in (df.groupby("team").size(), pd.crosstab(df.team, df.sex)):
        out = sess.publish(table)
        assert out.metadata["sdc_magic"]["status"] == "pass", out.checked.notes
        assert _label_notes(out) == []


def test_a_category_stating_its_own_size_is(sess: Session) -> None:
    df = _cases(["District A", "District B", "District C (n=3)"], [40, 30, 3])
    out = sess.publish(df.groupby("team").size())
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert _label_notes(out) and "District C (n=✕)" in _label_notes(out)[0]  # the note does not repeat it
    assert "(n=3)" not in out.data["text/plain"] and "District C (n=✕)" in out.data["text/plain"]


def test_a_label_written_for_the_table_is(sess: Session) -> None:
    df = _cases(["Mobile team (2 staff)", "Office", "Field"], [40, 30, 25])
    out = sess.publish(df.groupby("team").size().rename(lambda x: "Office (n=3)" if x == "Office" else x))
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert [n for n in _label_notes(out) if "Office (n=✕)" in n] and "(n=3)" not in out.data["text/html"]
    assert not [n for n in _label_notes(out) if "Mobile team" in n]
