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
    # several aggregates: columns F_n, F_s, M_n, M_s (each aggregate a measure of the same table)
    "several": lambda con: con.sql(PIVOT.format(alias=" AS n, sum(v) AS s")).df(),
    "several relation": lambda con: con.sql(PIVOT.format(alias=" AS n, sum(v) AS s")),
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
    if not isinstance(shown, pd.DataFrame):
        shown = shown.df().set_index("region")
    indexed = "region" not in shown.columns
    table = shown.reset_index() if indexed else shown
    columns = [str(c) for c in table.columns]
    f_col, m_col = (next(j for j, c in enumerate(columns) if c in (s, f"{s}_n")) for s in ("F", "M"))
    if indexed:  # (the displayed frame has no region column: its cells are one column left)
        f_col, m_col = f_col - 1, m_col - 1
    region_hidden = np.asarray(sizes.checked.hidden, dtype=bool).reshape(-1)
    regions = list(people.groupby("region").size().index)
    for i, region in enumerate(table["region"]):
        if not hidden[i, f_col]:
            continue
        # a hidden small count stays hidden: its man's count or the region's size is not shown beside it
        assert hidden[i, m_col] or region_hidden[regions.index(region)], (region, wide.data["text/plain"],
                                                                          sizes.data["text/plain"])


def test_a_wide_frame_of_no_table_is_matched_once_per_layout_not_once_per_table(monkeypatch: Any) -> None:
    """helper-95: each table whose dimensions fit asked the registry for a match over every table,
    so a wide frame matching none of 150 tables took 36 s to display. Counted in calls, not seconds."""
    from sdc_magic.evidence.registry import Registry

    rng = np.random.default_rng(0)
    big = pd.DataFrame({"region": rng.choice([f"R{i}" for i in range(8)], 2000), "sex": rng.choice(["F", "M"], 2000),
                        "x": rng.integers(0, 1000, 2000)})
    sess = Session(rules=preset("humanitarian"))
    sess.capture.install()
    calls: list[int] = []
    real = Registry.match
    try:
        for i in range(40):
            big[big.x > i].groupby(["region", "sex"]).size()
        monkeypatch.setattr(Registry, "match", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
        other = pd.DataFrame({"region": [f"R{i}" for i in range(8)], "F": np.arange(8) + 1000,
                              "M": np.arange(8) + 2000})
        sess.publish(other)
    finally:
        sess.capture.uninstall()
    assert len(calls) <= 5, len(calls)
