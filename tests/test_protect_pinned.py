"""Secondaries "recovered exactly" are published again only when the pattern without them holds.

The final audit publishes a hidden secondary whose attacker interval has no width: hiding it
protects nothing. "No width" is a width within 10^-9 of the cell's own value, and beside a huge
cell that is wide: red team, a hidden 2.5e10 of width 20 was published as recovered and the
one-firm cell of 40 beside it followed by subtraction from the margin, at ``suppressed``. A
secondary is now published only when the whole audit of the pattern without it still passes.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
from table_fixtures import displayed_pivot, firms

from sdc_magic.protect.api import _prepare

audit = importlib.import_module("sdc_magic.protect.audit")
api = importlib.import_module("sdc_magic.protect.api")


def _turnover() -> pd.DataFrame:
    return firms([(r, c, [total / n] * n) for r, c, n, total in [("r0", "c0", 10, 2.5e10), ("r0", "c1", 10, 8.0),
                                                                ("r1", "c0", 1, 40.0), ("r1", "c1", 10, 12.0)]],
                 value="turnover")


def test_a_huge_secondary_beside_a_one_firm_cell_stays_hidden() -> None:
    out = displayed_pivot(_turnover(), "turnover")
    text = out.data["text/plain"]
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.split()[:1] in (["r0"], ["r1"],
                                                                                                      ["All"])}
    assert out.metadata["sdc_magic"]["status"] in ("suppressed", "review", "blocked")
    assert rows["r1"][0] == "✕"  # the one-firm cell
    # the column total is shown: the cell beside it must stay hidden, or 25000000040 − it = 40
    assert rows["All"][0] != "✕" and rows["r0"][0] == "✕", text


def test_an_exactly_recovered_secondary_is_still_published() -> None:
    """A secondary alone in its row and column among published cells is pinned: published again."""
    cells = pd.DataFrame({"v0": np.repeat(["a", "b", "c"], 3), "v1": np.tile(["x", "y", "z"], 3),
                          "n": [2, 9, 8, 7, 11, 6, 9, 8, 12]})
    tab = _prepare(cells, ["v0", "v1"], "n", None, None, None, None, True)
    a = tab.value
    n = len(a)
    inner = np.asarray(tab.model.is_inner)
    labels = tab.labels.astype(str)
    at = {(r.v0, r.v1): i for i, r in enumerate(labels.itertuples()) if inner[i]}
    primary = np.zeros(n, dtype=bool)
    primary[at["a", "x"]] = True
    hidden = primary.copy()
    for key in [("a", "y"), ("b", "x"), ("b", "y"), ("c", "z")]:  # a box, and one cell on its own
        hidden[at[key]] = True
    lpl = np.where(primary, 2.0, 0.0)
    upl = np.where(primary, 3.0, 0.0)
    nan = np.full(n, np.nan)
    P = audit.Problem(tab.model.M, a, a.copy(), np.full(n, np.inf), primary, np.ones(n, bool), lpl, upl,
                      np.maximum(a, 1.0), nan.copy(), nan.copy(), S=tab.model.S.tocsr())
    found = api._Pattern(hidden.copy(), [], "test")
    lower, upper, pinned = api._final_audit(P, found, a, True, False, audit.Ticker(None))
    assert found.audit_ok
    assert pinned[at["c", "z"]] and not found.hidden[at["c", "z"]]  # published again
    assert found.hidden[[at[k] for k in [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]]].all()
    assert np.isnan(lower[at["c", "z"]]) and upper[at["a", "x"]] - lower[at["a", "x"]] > 0
