"""Tables computed from a captured aggregate with arithmetic pandas does not record.

Data: 73 people in districts A 40, B 30, C 3 (humanitarian preset, threshold 5): the
count table shows A 40 and hides C (3) and B (30, so that C cannot be recovered from the
total). Each transform below showed, at ``review``, a figure that gives C = 3 back; each
now hides the rows its parent hides (see ``sdc_magic/derived.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"


def _people() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    district = np.repeat(["A", "B", "C"], [40, 30, 3])
    sex = np.array(["F", "M"] * 35 + ["F", "F", "M"])
    return pd.DataFrame({"person": np.arange(73), "district": district, "sex": sex,
                         "age": rng.integers(18, 80, 73), "flag": rng.integers(0, 2, 73)})


DF = _people()


@pytest.fixture
def sess():
    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _shown(out) -> pd.Series:
    frame = protected_frame(out.checked)
    return frame.iloc[:, 0] if isinstance(frame, pd.DataFrame) else frame


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def counts() -> pd.Series:
    return DF.groupby("district").size()


TRANSFORMS = {
    "cumsum": lambda: counts().cumsum(),  # 40, 70, 73
    "diff": lambda: counts().diff(),  # -, -10, -27
    "pct_change": lambda: counts().pct_change(),
    "share": lambda: counts() / len(DF),  # 0.041 * 73 = 3
    "percent rounded": lambda: (counts() / len(DF) * 100).round(1),
    "log": lambda: np.log(counts()),  # exp(1.0986) = 3
    "max minus": lambda: counts().max() - counts(),  # 40 - 37 = 3
    "total minus": lambda: len(DF) - counts(),  # 73 - 70 = 3
    "expanding": lambda: counts().expanding().sum(),
    "rolling": lambda: counts().rolling(2).sum(),  # 33 - 30
    "halved": lambda: counts().mul(0.5),  # 1.5
    "minus the mean": lambda: counts() - counts().mean(),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_a_transform_of_a_count_table_hides_the_rows_its_parent_hides(sess: Session, name: str) -> None:
    out = sess.publish(TRANSFORMS[name]())
    shown = _shown(out)
    assert _status(out) == "review"  # never cleared: no evidence of its own
    assert shown["B"] == X and shown["C"] == X, shown.to_dict()
    assert shown["A"] != X  # A is published by the parent itself: not hidden here
    assert any("derived" in r.rule for rs in out.checked.reasons.values() for r in rs)


def test_a_hidden_value_moved_under_another_label_is_hidden(sess: Session) -> None:
    """shift(-1) shows B's 30 (hidden in the parent) under A's label; alone, A's row would
    pass the unverified check as a count of 30."""
    out = sess.publish(counts().shift(-1).loc[["A"]])
    assert _shown(out)["A"] == X
    out = sess.publish(counts().shift(-1))
    shown = _shown(out)
    assert shown["A"] == X and shown["B"] == X


def test_a_two_dimensional_parent_passes_its_pattern_on(sess: Session) -> None:
    """crosstab district × sex hides C/F 2, C/M 1 and B's row; a running total over the
    districts hides those rows too, a row total over the sexes hides B and C."""
    ct = pd.crosstab(DF.district, DF.sex)
    down = protected_frame(sess.publish(ct.cumsum()).checked)
    assert (down.loc[["B", "C"]] == X).all().all()
    assert (down.loc["A"] != X).all()
    across = sess.publish(ct.cumsum(axis=1)["M"].rename("running"))
    shown = _shown(across)
    assert shown["C"] == X and shown["A"] != X


def test_a_parent_without_hidden_cells_passes_nothing_on(sess: Session) -> None:
    """Over-protection check: the transform of a safe table is checked as before."""
    safe = DF[DF.district != "C"].groupby("sex").size()  # F 35, M 35
    out = sess.publish(safe.cumsum())
    shown = _shown(out)
    assert X not in shown.tolist()
    assert not any("derived" in r.rule for rs in out.checked.reasons.values() for r in rs)


def test_an_unrelated_table_with_other_labels_is_not_touched(sess: Session) -> None:
    counts()  # a captured parent hiding B and C
    other = pd.Series([12.5, 40.25, 7.75], index=pd.Index(["north", "south", "east"], name="zone"))
    out = sess.publish(other)
    assert X not in _shown(out).tolist()


# ---- GroupBy.apply: any function of a group is judged by the units of its group
@pytest.mark.parametrize("func", [np.sum, lambda x: x.sum() * 1.0])
def test_groupby_apply_hides_a_group_of_three(sess: Session, func) -> None:
    """C has 3 people: whatever the function computes from them (a sum of their ages) is
    hidden, as for agg(lambda); the table is 'review' (unknown statistic)."""
    out = sess.publish(DF.groupby("district").age.apply(func))
    shown = _shown(out)
    assert shown["C"] == X and shown["A"] != X
    assert _status(out) == "review"


@pytest.mark.parametrize("func", [lambda x: x.max(), lambda x: x.iloc[0]], ids=["max", "first row"])
def test_groupby_apply_of_one_persons_value_is_blocked(sess: Session, func) -> None:
    """A function that returns one person's value (the oldest, the first row) is judged as such
    (issue 23.6, capture/custom_stats.py): every cell is that person's age, nothing is drawn."""
    out = sess.publish(DF.groupby("district").age.apply(func))
    assert _status(out) == "blocked"
    assert set(_shown(out).tolist()) == {X}


def test_groupby_apply_of_a_frame_per_group_hides_the_small_group(sess: Session) -> None:
    out = sess.publish(DF.groupby("district")[["age", "flag"]].apply(lambda g: g.sum()))
    frame = protected_frame(out.checked)
    assert (frame.loc["C"] == X).all() and (frame.loc["A"] != X).all()


def test_groupby_apply_with_rows_per_group_is_not_a_table_of_groups(sess: Session) -> None:
    """nlargest per group returns people, not groups: not captured, so never 'pass'."""
    out = sess.publish(DF.groupby("district").age.apply(lambda x: x.nlargest(2)))
    assert _status(out) in ("review", "blocked")


def test_apply_leaves_pandas_results_unchanged(sess: Session) -> None:
    expected = DF.groupby("district").age.apply(lambda x: x.max() - x.min())
    sess.capture.uninstall()
    plain = DF.groupby("district").age.apply(lambda x: x.max() - x.min())
    sess.capture.install()
    pd.testing.assert_series_equal(expected, plain)
