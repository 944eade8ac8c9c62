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


def _bands_beside_hidden() -> pd.DataFrame:
    """Age bands whose last label "65+" names the count of one of its cells (65, shown) by chance,
    beside hidden cells (c2's 2 and what protects it): the census of stop 57 found such a table
    ``review`` in pandas and DuckDB, the label drawn "✕+"."""
    cells = {("c1", "0-17"): 30, ("c1", "18-39"): 40, ("c1", "65+"): 65,
             ("c2", "0-17"): 25, ("c2", "18-39"): 31, ("c2", "65+"): 2,
             ("c3", "0-17"): 20, ("c3", "18-39"): 22, ("c3", "65+"): 18}
    rows = [(c, b) for (c, b), n in cells.items() for _ in range(n)]
    return pd.DataFrame(rows, columns=["category", "age_band"])


def test_a_band_whose_bound_equals_a_shown_cells_count_is_not_a_count(sess: Session) -> None:
    out = sess.publish(_bands_beside_hidden().groupby(["category", "age_band"]).size())
    meta = out.metadata["sdc_magic"]
    shown = out.data["text/plain"]
    assert meta["status"] == "suppressed", meta.get("notes")
    assert "65+" in shown and " 65\n" in shown  # (the label as it is, its cell of 65 shown; "✕+" before)
    assert not _label_notes(out)


@pytest.mark.parametrize("made", ["its group's size", "a hidden cell's count"])
def test_a_category_stating_its_size_or_a_hidden_cells_count_still_is(sess: Session, made: str) -> None:
    """The other side (red team of a3296be): a category made before the aggregation whose bare
    number is its group's size ("c2: 58") or the count of one of its hidden cells ("c2 – 2 aged
    65+") states it beside its hidden cells: drawn hidden, the table ``review``."""
    frame = _bands_beside_hidden()
    label = "c2: 58" if made == "its group's size" else "c2 – 2 aged 65+"
    frame["category"] = frame["category"].replace({"c2": label})
    out = sess.publish(frame.groupby(["category", "age_band"]).size())
    assert out.metadata["sdc_magic"]["status"] == "review", out.data["text/plain"]
    assert label not in out.data["text/plain"]
