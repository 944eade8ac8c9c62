"""``Series.value_counts(bins=...)`` is captured like any count table (issue 23, over-blocking).

Before, binned counts had no evidence: shown as unverified counts at ``review``, never
exportable, and not linked, so two binnings that differ in one edge gave one person away
(434 − 433 = 1). Now the bins are the intervals pandas cuts the values into, with their
rows for linking.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame

X = "✕"


@pytest.fixture
def sess(humanitarian_session):
    return humanitarian_session


def _incomes() -> pd.Series:
    rng = np.random.default_rng(8)
    # 500 incomes up to 100, 433 from 100 to 150, one of 180
    return pd.Series(np.r_[rng.uniform(1, 100, 500), rng.uniform(100.5, 150, 433), 180.0], name="income")


def _shown(out) -> dict:
    return protected_frame(out.checked).to_dict()


def test_binned_counts_have_evidence_and_hide_small_bins(sess: Session) -> None:
    income = _incomes()
    out = sess.publish(income.value_counts(bins=[0, 100, 150, 175, 200], sort=False))
    meta = out.metadata["sdc_magic"]
    assert meta["status"] == "suppressed"
    shown = _shown(out)
    assert shown[pd.Interval(175.0, 200.0)] == X  # one person
    assert any(v == X for k, v in shown.items() if k != pd.Interval(175.0, 200.0))  # and a secondary
    assert not any("no evidence" in n for n in out.checked.notes)


def test_two_binnings_differing_in_one_edge_do_not_give_a_person_away(sess: Session) -> None:
    income = _incomes()
    first = sess.publish(income.value_counts(bins=[0, 100, 200], sort=False))
    second = sess.publish(income.value_counts(bins=[0, 100, 150], sort=False))
    a, b = _shown(first), _shown(second)
    top_a, top_b = a[pd.Interval(100.0, 200.0)], b[pd.Interval(100.0, 150.0)]
    # 434 - 433 = 1: at least one of the two is hidden
    assert X in (top_a, top_b), (a, b)


def test_a_number_of_bins_puts_the_maximum_in_a_label(sess: Session) -> None:
    out = sess.publish(_incomes().value_counts(bins=4))
    assert out.metadata["sdc_magic"]["status"] == "review"
    assert any("the data's own minimum or maximum" in n for n in out.checked.notes)


def test_shares_of_bins_are_captured_too(sess: Session) -> None:
    out = sess.publish(_incomes().value_counts(bins=[0, 100, 150, 175, 200], normalize=True, sort=False))
    assert out.metadata["sdc_magic"]["status"] == "suppressed"
    assert _shown(out)[pd.Interval(175.0, 200.0)] == X


def test_the_result_is_plain_pandas(sess: Session) -> None:
    income = _incomes()
    got = income.value_counts(bins=[0, 100, 200], sort=False)
    sess.capture.uninstall()
    try:
        assert got.equals(income.value_counts(bins=[0, 100, 200], sort=False))
        assert got.index.name == income.value_counts(bins=[0, 100, 200], sort=False).index.name
    finally:
        sess.capture.install()
