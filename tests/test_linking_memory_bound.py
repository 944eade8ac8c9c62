"""The linking memory is bounded; once it lets earlier outputs go, a table it cannot compare
with anything is ``review``, never cleared (red team round 3: four other data sets pushed the
73 people out, and everyone-but-C by sex, 35/35, was cleared beside 37/36 shown before).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.linking import universes

pytest.importorskip("test_engines_redteam")
from test_engines_redteam import PEOPLE

CLEARED = ("pass", "suppressed")


def _other_data_sets(sess: Session, n: int, rows: int = 200) -> None:
    rng = np.random.default_rng(1)
    for i in range(n):
        other = pd.DataFrame({f"k{i}": rng.choice(["x", "y"], rows), f"v{i}": rng.integers(0, 9, rows)})
        assert sess.publish(other.groupby(f"k{i}").size()).metadata["sdc_magic"]["status"] in CLEARED


def test_more_data_sets_than_the_memory_keeps_make_the_next_table_review(sess: Session) -> None:
    df = PEOPLE.copy()
    first = sess.publish(df.groupby("sex").size())
    assert first.metadata["sdc_magic"]["status"] == "pass"
    _other_data_sets(sess, universes.MAX_UNIVERSES + 1)  # the people (73 rows, the smallest) are let go
    second = sess.publish(df[df.district != "C"].groupby("sex").size())
    md = second.metadata["sdc_magic"]
    assert md["status"] not in CLEARED
    assert any("let go of earlier outputs" in n for n in md.get("notes", []))


def test_a_session_that_forgot_nothing_is_unaffected(sess: Session) -> None:
    _other_data_sets(sess, 3)
    out = sess.publish(PEOPLE.groupby("sex").size())
    assert out.metadata["sdc_magic"]["status"] == "pass"
    assert not any("let go" in n for n in out.metadata["sdc_magic"].get("notes", []))
