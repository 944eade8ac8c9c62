"""Margins of a crosstab are grouped from the table's own groups (capture/pandas.py), not by
grouping the rows again: the evidence of every margin cell must be what grouping the rows
by its keys gives (rows, total, largest contribution), whatever the keys' types."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session

N = 3_000


def _frame(kind: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.choice(["north", "south", "east", "west"], N, p=[0.5, 0.3, 0.15, 0.05])
    b = rng.integers(0, 3, N)
    c = rng.choice(["x", "y", "z"], N)
    frame = pd.DataFrame({"a": a, "b": b, "c": c, "v": rng.lognormal(2, 1, N)})
    if kind == "categorical":
        frame["a"] = pd.Categorical(frame["a"], categories=["west", "east", "south", "north", "unused"])
    elif kind == "object":
        frame["c"] = frame["c"].astype(object)
    elif kind == "shuffled":
        frame = frame.sample(frac=1.0, random_state=seed)
    return frame


@pytest.mark.parametrize("kind", ["plain", "categorical", "object", "shuffled"])
def test_every_margin_cell_has_the_evidence_of_its_rows(kind: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path))
    df = _frame(kind, seed=len(kind))
    sess = Session(rules=preset("sacro"))
    sess.capture.install()
    try:
        table = pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="sum", margins=True)
        entry = sess.capture.registry.by_object(table)
    finally:
        sess.capture.uninstall()
    assert entry is not None, sess.capture.registry.failures
    _assert_margins_are_their_rows(entry, df)


def _assert_margins_are_their_rows(entry, df: pd.DataFrame) -> None:
    """Each margin cell's rows, total and largest value are those of the rows its labels select."""
    ev, dims = entry.evidence, entry.flat.dims
    margins = np.flatnonzero(np.asarray(ev.is_margin, dtype=bool))
    assert len(margins) >= 3 + 4 + 1  # the column totals, the row totals and the grand total
    for i in margins:
        rows = np.ones(len(df), dtype=bool)
        for key in ("a", "b", "c"):
            label = dims[key][i]
            if label not in ("All", ""):
                rows &= (df[key].astype(object) == label).to_numpy()
        values = df.v.to_numpy()[rows]
        assert int(ev.units[i]) == rows.sum()
        assert float(np.nan_to_num(ev.total[i])) == pytest.approx(values.sum())
        if rows.any():  # (pandas 2.2 keeps a margin of an unused category: no rows, no largest value)
            assert float(np.asarray(ev.top[i]).ravel()[0]) == pytest.approx(values.max())


@pytest.mark.parametrize("kind", ["plain", "categorical", "shuffled"])
def test_every_margin_cell_of_a_pivot_table_has_the_evidence_of_its_rows(kind: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path))
    df = _frame(kind, seed=7 + len(kind))
    sess = Session(rules=preset("sacro"))
    sess.capture.install()
    try:
        table = df.pivot_table(index=["a", "b"], columns="c", values="v", aggfunc="sum", margins=True,
                               observed=True)
        entry = sess.capture.registry.by_object(table)
    finally:
        sess.capture.uninstall()
    assert entry is not None, sess.capture.registry.failures
    _assert_margins_are_their_rows(entry, df)
