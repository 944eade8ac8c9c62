"""A selection of a table that leaves its small cell out still protects it (red team round 7).

``t.drop("C")`` showed every other district at ``pass``; the total, a margin the protection
assumes known, minus them is C. A cell left out of the display is unpublished like a hidden
one, and a small one left out needs the same protection as when it is shown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.jupyter.session import Session
from sdc_magic.outputs.render import protected_frame
from sdc_magic.records.verification import verify

X = "✕"
SIZES = {"A": 40, "B": 30, "C": 3, "D": 12, "E": 35}


@pytest.fixture
def sess(humanitarian_session):
    return humanitarian_session


def _counts() -> pd.Series:
    df = pd.DataFrame({"district": np.repeat(list(SIZES), list(SIZES.values())), "x": 1})
    return df.groupby("district").size()


@pytest.mark.parametrize("select", [
    lambda t: t.drop("C"), lambda t: t[t.index != "C"], lambda t: t.loc[["A", "B", "D", "E"]],
    lambda t: t.iloc[[0, 1, 3, 4]], lambda t: t.reindex(["E", "D", "B", "A"]), lambda t: t.to_frame("n").query("n > 5"),
], ids=["drop", "boolean mask", "loc list", "iloc list", "reindex", "query"])
def test_the_total_less_what_is_shown_is_not_c(sess: Session, select) -> None:
    out = sess.publish(select(_counts()))
    shown = protected_frame(out.checked)
    values = [v for v in np.ravel(shown.to_numpy()) if v != X]
    assert sum(SIZES.values()) - sum(int(v) for v in values) != SIZES["C"]
    assert out.metadata["sdc_magic"]["status"] in ("suppressed", "review", "blocked")


def test_a_selection_whose_left_out_cells_protect_each_other_passes(sess: Session, tmp_path) -> None:
    out = sess.publish(_counts().head(2))  # C and D both left out: the total gives only C + D
    assert out.metadata["sdc_magic"]["status"] == "pass"
    assert protected_frame(out.checked).tolist() == [40, 30]
    sess.export(tmp_path / "export")
    assert verify(tmp_path / "export") == []
