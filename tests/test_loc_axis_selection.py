"""``DataFrame.filter`` and ``.loc(axis=1)`` keep working with the extension loaded (helper-91,
stop 67): pandas' ``filter(like=...)`` selects with ``self.loc(axis=1)[mask]``, and the selection's
recipe replayed ``t.loc[mask]`` on the rows: ``IndexError: Boolean index has wrong length`` in the
user's own code. Plain pandas must keep working."""

from __future__ import annotations

import pandas as pd

SETUP = """
import numpy as np, pandas as pd
df = pd.DataFrame({"a": list("xyzxyzxyzx") * 10, "b": list("pqpqpqpqpq") * 10})
t = pd.crosstab(df.a, df.b, margins=True)
"""


def test_filter_and_loc_with_an_axis_on_a_captured_table(sdc) -> None:
    sdc.run(SETUP)
    got = sdc.run("(t.filter(like='All'), t.filter(items=['p']), t.loc(axis=1)['q'], t.loc(axis=0)['x'])").result
    df = pd.DataFrame({"a": list("xyzxyzxyzx") * 10, "b": list("pqpqpqpqpq") * 10})
    plain = pd.crosstab(df.a, df.b, margins=True)
    want = (plain.filter(like="All"), plain.filter(items=["p"]), plain.loc(axis=1)["q"], plain.loc(axis=0)["x"])
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w)
        (pd.testing.assert_frame_equal if isinstance(w, pd.DataFrame) else pd.testing.assert_series_equal)(g, w)
