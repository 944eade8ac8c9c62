"""Tables over frames whose rows were re-indexed by one of their columns are linked like the others.

Red team (2026-12-04, three-table chains): a count and the flag's mean by sex in district A,
then in B, then the flagged people counted by sex over ``people.set_index("income")`` (or
``set_index("age")``, or after sorting), each ``pass``: 14 − 8 − 5 = C's one flagged woman.
``set_index`` moved the column that tells people apart into the labels, so the flagged rows'
content matched nothing of the earlier frames, and their labels were incomes, not the
earlier frames' labels. Now a frame's named index levels count as its columns when its rows
are matched (``identity.with_index_columns``), and rows selected by a boolean mask from a
re-indexed frame keep the labels they had (``row_origins.follow`` with the mask), whatever
selected them: ``[]``, ``.loc`` or ``query``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from linking_checks import verdict
from test_engines_redteam import PEOPLE

FRAME = pd.DataFrame(PEOPLE)

REINDEXED: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "set_index income": lambda d: d.set_index("income"),
    "set_index age (repeated labels)": lambda d: d.set_index("age"),
    "set_index income and age": lambda d: d.set_index(["income", "age"]),
    "set_index income, column kept": lambda d: d.set_index("income", drop=False),
    "sorted by age, then set_index age": lambda d: d.sort_values("age").set_index("age"),
    "set_index person": lambda d: d.set_index("person"),
}


def _select(d: pd.DataFrame, column: str, value: Any, how: str) -> pd.DataFrame:
    if how == "[]":
        return d[d[column] == value]
    if how == ".loc":
        return d.loc[d[column] == value]
    return d.query(f"{column} == {value!r}")


def _by_sex(d: pd.DataFrame, mean: bool) -> pd.DataFrame:
    return d.groupby("sex").agg(n=("flag", "size"), **({"m": ("flag", "mean")} if mean else {}))


@pytest.mark.parametrize("how", ["[]", ".loc", "query"])
@pytest.mark.parametrize("where", ["last", "first two", "all three"])
@pytest.mark.parametrize("reindex", list(REINDEXED))
def test_the_flagged_rows_of_a_reindexed_frame_are_linked(reindex: str, where: str, how: str,
                                                          humanitarian_sessions: Any) -> None:
    sess = humanitarian_sessions()
    other = REINDEXED[reindex](FRAME.copy())
    frames = {"last": (FRAME, FRAME, other), "first two": (other, other, FRAME),
              "all three": (other, other, other)}[where]
    statuses = [
        verdict(sess.publish(_by_sex(_select(frames[0], "district", "A", how), mean=True)))[0],
        verdict(sess.publish(_by_sex(_select(frames[1], "district", "B", how), mean=True)))[0],
        verdict(sess.publish(_by_sex(_select(frames[2], "flag", 1, how), mean=False)))[0],
    ]
    assert "review" not in statuses and "blocked" not in statuses, statuses
    # 14 − 8 − 5: one of the three must hide the women
    assert statuses != ["pass", "pass", "pass"], statuses


def test_the_users_frame_is_not_changed(humanitarian_sessions: Any) -> None:
    sess = humanitarian_sessions()
    d = FRAME.set_index("income")
    before = d.copy()
    sess.publish(_by_sex(d[d.flag == 1], mean=False))
    pd.testing.assert_frame_equal(d, before)
    assert list(d.columns) == list(before.columns) and d.index.name == "income"


def test_a_reindexed_frame_alone_is_checked_as_before(humanitarian_sessions: Any) -> None:
    """Nothing earlier to compare with: the same verdict as over the plain frame."""
    plain = verdict(humanitarian_sessions().publish(_by_sex(FRAME[FRAME.flag == 1], mean=False)))
    d = FRAME.set_index("income")
    reindexed = verdict(humanitarian_sessions().publish(_by_sex(d[d.flag == 1], mean=False)))
    assert reindexed == plain


@pytest.mark.parametrize("reindex", list(REINDEXED))
def test_another_data_set_indexed_alike_is_not_tied_to_the_people(reindex: str, humanitarian_sessions: Any) -> None:
    """Named index levels are content like columns: other people (other ids, households, ages and
    incomes) re-indexed the same way stay apart, as they do without the re-indexing."""
    others = FRAME.assign(income=FRAME["income"] + 1000.5, person=FRAME["person"] + 500,
                          household=FRAME["household"] + 900, age=FRAME["age"] + 31)
    seen = []
    for frame in (others, REINDEXED[reindex](others)):
        sess = humanitarian_sessions()
        first = verdict(sess.publish(_by_sex(FRAME[FRAME.district != "C"], mean=False)))[0]
        seen.append((first, verdict(sess.publish(_by_sex(frame, mean=False)))[0]))
    assert seen[0] == seen[1] == ("pass", "pass")


@pytest.mark.parametrize("how", ["[]", ".loc"])
def test_rows_selected_from_a_narrow_reindexed_frame_keep_their_labels(how: str, humanitarian_sessions: Any) -> None:
    """District, sex and flag cannot tell people apart: the flagged rows of
    ``people[["district", "sex", "flag"]].set_index("district")`` are found by the labels they had
    before ``set_index`` (the mask that selected them gives their positions; the new labels repeat)."""
    sess = humanitarian_sessions()
    statuses = [verdict(sess.publish(_by_sex(_select(FRAME, "district", d, "[]"), mean=True)))[0] for d in "AB"]
    narrow = FRAME[["district", "sex", "flag"]].set_index("district")
    statuses.append(verdict(sess.publish(_by_sex(_select(narrow, "flag", 1, how), mean=False)))[0])
    assert "review" not in statuses and "blocked" not in statuses, statuses
    assert statuses != ["pass", "pass", "pass"], statuses


#: found by the red team of the re-indexing fix (each leaked before it, 14 − 8 − 5)
THIRD_TABLES: dict[str, Callable[[], pd.DataFrame]] = {
    # the level renamed: the flagged rows joined A's universe without an age, and B's universe, with
    # ages, matched none of them (now: by the columns every row of both holds)
    "set_index age, renamed": lambda: (lambda d: _by_sex(d[d.flag == 1], mean=False))(
        FRAME.set_index("age").rename_axis("years")),
    "set_index income, unnamed": lambda: (lambda d: _by_sex(d[d.flag == 1], mean=False))(
        FRAME.set_index("income").rename_axis(None)),
    # a column of the re-indexed frame keeps the labels its rows had; two of B's rows were taken
    # for A's people by an equal income (now: completed by content over two columns or more)
    "a column of it, by a mask": lambda: (lambda s: s.groupby(s).size().rename("n").to_frame())(
        FRAME.set_index("income")["sex"][FRAME.flag.to_numpy() == 1]),
}


@pytest.mark.parametrize("third", list(THIRD_TABLES))
def test_the_red_teams_reindexed_third_tables_are_linked(third: str, humanitarian_sessions: Any) -> None:
    sess = humanitarian_sessions()
    statuses = [verdict(sess.publish(_by_sex(FRAME[FRAME.district == d], mean=True)))[0] for d in "AB"]
    statuses.append(verdict(sess.publish(THIRD_TABLES[third]()))[0])
    assert "review" not in statuses and "blocked" not in statuses, statuses
    assert statuses != ["pass", "pass", "pass"], statuses
