"""DuckDB's own frame of a PIVOT (``.df()``, ``fetchdf()``...) is the same table as the relation.

Red team of stop 69: ``PIVOT t ON sex USING count(*) GROUP BY region`` as ``.df()`` gives
``region | F | M`` with unnamed value columns; it was matched to a table of one measure per
column, protected column by column without the region totals, and not linked. R1's F (3) and R3's
F (2) were hidden alone, and the region sizes shown next (``pass``) gave them back: 12 − 9, 9 − 7.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session

COUNTS = {("R1", "F"): 3, ("R1", "M"): 9, ("R2", "F"): 12, ("R3", "M"): 7, ("R3", "F"): 2, ("R4", "M"): 15,
          ("R4", "F"): 6}
PIVOT = "PIVOT t ON sex USING count(*){alias} GROUP BY region ORDER BY region"

FRAMES: dict[str, Callable[[Any], Any]] = {
    "df": lambda con: con.sql(PIVOT.format(alias="")).df(),
    "fetchdf": lambda con: con.sql(PIVOT.format(alias="")).fetchdf(),
    "execute": lambda con: con.execute(PIVOT.format(alias="")).df(),
    "set_index": lambda con: con.sql(PIVOT.format(alias="")).df().set_index("region"),
    "alias": lambda con: con.sql(PIVOT.format(alias=" AS n")).df(),
}


def _people() -> pd.DataFrame:
    rows = [(r, s, float(10 + 3 * k)) for (r, s), n in COUNTS.items() for k in range(n)]
    return pd.DataFrame(rows, columns=["region", "sex", "v"])


@pytest.mark.parametrize("frame", sorted(FRAMES))
def test_a_pivot_frame_is_protected_with_its_row_totals_and_linked(frame: str) -> None:
    people = _people()
    con = duckdb.connect()
    con.register("t", people)
    sess = Session(rules=preset("humanitarian"))
    sess.capture.install()
    try:
        shown = FRAMES[frame](con)
        wide = sess.publish(shown)
        sizes = sess.publish(people.groupby("region").size())
    finally:
        sess.capture.uninstall()
    assert wide.metadata["sdc_magic"]["status"] == "suppressed", wide.data["text/plain"]
    hidden = np.asarray(wide.checked.hidden, dtype=bool)
    table = shown.reset_index() if frame == "set_index" else shown
    columns = [str(c) for c in table.columns]
    f_col, m_col = (next(j for j, c in enumerate(columns) if c.split("_")[0] == s) for s in ("F", "M"))
    if frame == "set_index":  # (the displayed frame has no region column: its cells are one column left)
        f_col, m_col = f_col - 1, m_col - 1
    region_hidden = np.asarray(sizes.checked.hidden, dtype=bool).reshape(-1)
    regions = list(people.groupby("region").size().index)
    for i, region in enumerate(table["region"]):
        if not hidden[i, f_col]:
            continue
        # a hidden small count stays hidden: its man's count or the region's size is not shown beside it
        assert hidden[i, m_col] or region_hidden[regions.index(region)], (region, wide.data["text/plain"],
                                                                          sizes.data["text/plain"])
