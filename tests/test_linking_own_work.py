"""Linking's own pandas calls are not the analyst's tables (capture/depth.py ``passthrough``).

A second crosstab of the same rows with another measured column (``values=v * 2`` after
``values=v``) took 10 CPU s to display on a million rows: the universe tried to place its rows
as a multiset with ``value_counts`` of a million fingerprints, and the capture recorded each of
those calls as if the analyst had made it (6.6 s of entries built over a million "cells").
The display must add no entry to the registry, and the rows are the same people.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session


def _frame(n: int = 4_000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"a": rng.integers(0, 4, n), "b": rng.integers(0, 3, n), "c": rng.integers(0, 5, n),
                         "v": rng.lognormal(3, 1, n)})


def test_a_display_records_no_table_of_its_own(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path))
    df = _frame()
    sess = Session(rules=preset("sacro"))
    sess.capture.install()
    try:
        for values in (df.v, df.v * 2, df.v.round()):
            table = pd.crosstab([df.a, df.b], df.c, values=values, aggfunc="mean")
            before = len(sess.capture.registry.entries())
            meta = sess.publish(table).metadata["sdc_magic"]
            assert meta["status"] in ("pass", "suppressed"), meta
            assert len(sess.capture.registry.entries()) == before
    finally:
        sess.capture.uninstall()
