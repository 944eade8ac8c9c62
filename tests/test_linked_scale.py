"""A large table displayed again (with its margins) after its own groupby is protected, not blocked.

Found this session: a 25×20×10 count table (4,500 cells, 2,400 below the threshold)
shown as ``groupby(...).size()`` and then as ``pd.crosstab(..., margins=True)`` was
blocked whole: the joint audit of the two outputs asked scipy for two LPs per hidden
cell (10,000 LPs) and did not finish in its 10 s.  It now uses ``joint_bounds`` (one
warm model over the cells no published cell pins, sweeps, exact LPs for what they leave).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.outputs.render import HIDDEN


def _micro(shape=(25, 20, 10), seed=8, p=0.3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape).ravel()
    idx = np.indices(shape).reshape(len(shape), -1)
    cells = pd.DataFrame({f"v{j}": [f"v{j}{k:03d}" for k in idx[j]] for j in range(len(shape))})
    return cells.loc[cells.index.repeat(n)].reset_index(drop=True)


def test_a_large_table_shown_again_with_margins_is_suppressed_not_blocked(session) -> None:
    micro = _micro()
    first = session.publish(micro.groupby(["v0", "v1", "v2"]).size())
    meta1 = first.metadata["sdc_magic"]
    assert meta1["status"] == "suppressed"
    second = session.publish(pd.crosstab([micro.v0, micro.v1], micro.v2, margins=True))
    meta2 = second.metadata["sdc_magic"]
    text = second.data["text/plain"]
    assert meta2["status"] == "suppressed", text[-600:]
    assert "did not finish" not in text
    # every cell hidden in the first output stays hidden in the second (linked), and
    # the second hides a small share of its cells, not all of them
    assert meta2["rules_hit"].get("linked", 0) >= meta1["primary"]
    assert meta2["hidden"] < 0.6 * meta2["cells"]
    assert HIDDEN in text
