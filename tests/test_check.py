"""The checking pipeline on small hand-made tables."""

from __future__ import annotations

import pandas as pd


def test_structural_zeros_stay_published_through_reshapes(session) -> None:
    rows = [("F", "Pregnancy")] * 30 + [("F", "Injury")] * 40 + [("M", "Injury")] * 50
    frame = pd.DataFrame(rows, columns=["sex", "reason"]).assign(
        reason=lambda d: pd.Categorical(d["reason"], categories=["Injury", "Pregnancy"]))
    session.set_rules(zeros="M/Pregnancy")  # every other empty cell would be suppressed
    counts = frame.groupby(["sex", "reason"], observed=False).size()
    for shown in (counts, counts.unstack(), counts.unstack().T):
        checked = session.check(shown)
        assert checked.status == "pass" and checked.hidden_count == 0
    session.set_rules(zeros="suppress", structural_zeros="")  # no declared structural zero left
    assert session.check(counts.unstack()).hidden_count >= 1
