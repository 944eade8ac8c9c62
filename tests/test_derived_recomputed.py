"""Derived tables are recomputed from their protected parents (issue 23.4).

A table computed from a checked aggregate (``cumsum``, ``shift`` ratios, ``diff``, arithmetic
between aggregates, ``concat``, strings built with ``+``) has no evidence of its own. Hiding the
cells whose *labels* the parent hides is not enough: a cumulative count at a later label, or a
month-on-month ratio at the month before, gives the hidden cell back. The capture keeps the
recipe; the check computes the table again with the parent's hidden cells moved and hides every
cell that moves (``sdc_magic/checking/lineage.py``). Each test names the attack it stops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"
MONTHS = ["01", "02", "03", "04", "05", "06"]
#: referrals per month; March has 2 (hidden) and April 25 (hidden with it)
PER_MONTH = [135, 120, 2, 25, 140, 150]


@pytest.fixture
def sess(humanitarian_session):
    return humanitarian_session


def _cases() -> pd.DataFrame:
    month = np.repeat(MONTHS, PER_MONTH)
    rng = np.random.default_rng(4)
    return pd.DataFrame({"month": month, "sex": rng.choice(["F", "M"], len(month)),
                         "age": rng.integers(0, 90, len(month))})


DF = _cases()


def _shown(out) -> dict:
    frame = protected_frame(out.checked)
    if isinstance(frame, pd.DataFrame) and frame.shape[1] == 1:
        frame = frame.iloc[:, 0]
    return frame.to_dict()


def _status(out) -> str:
    return out.metadata["sdc_magic"]["status"]


def _monthly() -> pd.Series:
    return DF.groupby("month").size()


def test_the_parent_hides_march_and_april(sess: Session) -> None:
    shown = _shown(sess.publish(_monthly()))
    assert shown["03"] == X and shown["04"] == X
    assert shown["01"] == 135


def test_month_on_month_ratio_hides_both_months_it_touches(sess: Session) -> None:
    # 135 x (Feb->Mar ratio 2/120) = 2: the ratio shown at February gives March back
    m = _monthly()
    out = sess.publish(m.shift(-1) / m)
    shown = _shown(out)
    assert _status(out) == "review"
    assert shown["02"] == X and shown["03"] == X and shown["04"] == X  # Mar/Feb, Apr/Mar, May/Apr
    assert shown["01"] != X  # Feb / Jan uses no hidden month: still published


@pytest.mark.parametrize("derive", [
    lambda m: m.cumsum(), lambda m: m.diff(), lambda m: m.pct_change(), lambda m: m.cummax(),
    lambda m: m[::-1].cumsum(), lambda m: m.shift(1), lambda m: m - m.shift(1), lambda m: m.shift(2) + m,
], ids=["cumsum", "diff", "pct_change", "cummax", "reversed cumsum", "shift", "minus shifted", "shift(2) + m"])
def test_running_statistics_show_nothing_that_moves_with_march(sess: Session, derive) -> None:
    m = _monthly()
    derived = derive(m)
    out = sess.publish(derived)
    shown = _shown(out)
    assert _status(out) != "pass"
    # recompute by hand with March and April moved: every cell that changes must be hidden
    moved = m.astype(float).copy()
    moved[["03", "04"]] += [1000.0, -777.0]
    changed = derive(moved).ne(derived) & ~(derive(moved).isna() & derived.isna())
    for label in changed[changed].index:
        assert shown[label] == X, (label, shown)


def test_cumulative_counts_cannot_be_subtracted(sess: Session) -> None:
    out = sess.publish(_monthly().cumsum())
    shown = _shown(out)
    published = [k for k in MONTHS if shown[k] != X]
    assert published == ["01", "02"]  # 135, 255; from March on every total holds March


def test_numbers_taken_from_the_hidden_cells_move_with_them(sess: Session) -> None:
    m = _monthly()
    for derived in (m - m.min(), m - m["03"], m / m.iloc[2], m.sub(m.median())):
        shown = _shown(sess.publish(derived))
        assert all(v == X for v in shown.values()), shown


def test_shares_of_the_total_stay_published(sess: Session) -> None:
    # the total is a margin the protection assumes known: shares of it disclose nothing more
    m = _monthly()
    for derived in (m / m.sum(), (100 * m / len(DF)).round(1), m / m.max()):
        shown = _shown(sess.publish(derived))
        assert shown["03"] == X and shown["04"] == X
        assert shown["01"] != X and shown["06"] != X, shown


def test_two_aggregates_combined_hide_what_either_hides(sess: Session) -> None:
    by_month = _monthly()
    women = DF[DF.sex == "F"].groupby("month").size()
    out = sess.publish(by_month - women)  # the men, from two tables
    shown = _shown(out)
    assert shown["03"] == X and shown["04"] == X


def test_concatenated_tables_keep_their_hidden_cells(sess: Session) -> None:
    m = _monthly()
    out = sess.publish(pd.concat([m, m.cumsum()], axis=1))
    grid = protected_frame(out.checked)
    assert (grid.loc[["03", "04", "05", "06"], 1] == X).all()  # cumulative from March on
    assert (grid.loc[["03", "04"], 0] == X).all()


def test_strings_built_from_a_table_keep_its_protection(sess: Session) -> None:
    m = _monthly()
    dressed = m.astype(str) + " (" + (100 * m / m.sum()).round(1).astype(str) + "%)"
    shown = _shown(sess.publish(dressed))
    assert shown["03"] == X and shown["04"] == X
    assert not any(str(v).startswith("2 (") for v in shown.values())


def test_a_parent_changed_in_place_hides_everything(sess: Session) -> None:
    # the recipe can no longer give the displayed table back: fail closed
    m = _monthly()
    derived = m.cumsum()
    m.iloc[0] = 0
    shown = _shown(sess.publish(derived))
    assert all(v == X for v in shown.values())


def test_plain_pandas_arithmetic_is_unchanged_and_restored(sess: Session) -> None:
    from pandas.core.arraylike import OpsMixin

    s = pd.Series([1.0, 2.0, np.nan])
    assert (s + 1).equals(pd.Series([2.0, 3.0, np.nan]))
    assert s.cumsum().equals(pd.Series([1.0, 3.0, np.nan]))
    assert pd.Series.__add__ is not OpsMixin.__add__  # wrapped while installed
    sess.capture.uninstall()
    assert pd.Series.__add__ is OpsMixin.__add__
    assert not getattr(pd.Series.cumsum, "__sdc_magic_wrapper__", False)
    sess.capture.install()
