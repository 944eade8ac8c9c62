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


def _groupby_calls(run) -> int:
    """How many times ``run()`` groups a DataFrame (pandas' own nested calls included)."""
    calls = []
    before = pd.DataFrame.groupby

    def counting(self, *args, **kwargs):
        calls.append(1)
        return before(self, *args, **kwargs)

    pd.DataFrame.groupby = counting
    try:
        run()
    finally:
        pd.DataFrame.groupby = before
    return len(calls)


@pytest.mark.parametrize("kind", ["plain", "categorical", "shuffled"])
def test_a_crosstab_is_grouped_once_and_its_cells_are_their_rows(kind: str, tmp_path, monkeypatch) -> None:
    """pandas 3's crosstab groups its arrays under names of its own (row_0, col_0): that grouping is
    the table's (the capture grouped the rows a second time before), and every cell's evidence is
    still that of the rows its labels select."""
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path))
    df = _frame(kind, seed=11 + len(kind))

    def table() -> pd.DataFrame:
        return pd.crosstab([df.a, df.b], df.c, values=df.v, aggfunc="mean")

    plain = _groupby_calls(table)
    sess = Session(rules=preset("sacro"))
    sess.capture.install()
    try:
        checked = _groupby_calls(table)
        shown = table()
        entry = sess.capture.registry.by_object(shown)
    finally:
        sess.capture.uninstall()
    assert checked == plain
    assert entry is not None, sess.capture.registry.failures
    ev, dims = entry.evidence, entry.flat.dims
    for i in range(len(ev.units)):
        rows = np.ones(len(df), dtype=bool)
        for key in ("a", "b", "c"):
            rows &= (df[key].astype(object) == dims[key][i]).to_numpy()
        assert int(ev.units[i]) == rows.sum()
        if rows.any():
            assert float(np.asarray(ev.top[i]).ravel()[0]) == pytest.approx(df.v.to_numpy()[rows].max())


def test_a_crosstab_of_other_arrays_under_the_same_names_is_grouped_by_its_own(tmp_path, monkeypatch) -> None:
    """A key array that is not the column the nested grouping used (another Series named like it)
    is grouped by its own values: the nested grouping is taken only for the same columns."""
    monkeypatch.setenv("SDC_MAGIC_LEDGER_DIR", str(tmp_path))
    df = _frame("plain", seed=5)
    other_b = pd.Series(np.roll(df.b.to_numpy(), 7), index=df.index, name="b")
    sess = Session(rules=preset("sacro"))
    sess.capture.install()
    try:
        shown = pd.crosstab([df.a, other_b], df.c, values=df.v, aggfunc="sum")
        entry = sess.capture.registry.by_object(shown)
    finally:
        sess.capture.uninstall()
    assert entry is not None
    ev, dims = entry.evidence, entry.flat.dims
    keys = {"a": df.a, "b": other_b, "c": df.c}
    for i in range(len(ev.units)):
        rows = np.ones(len(df), dtype=bool)
        for key, col in keys.items():
            rows &= (col.astype(object) == dims[key][i]).to_numpy()
        assert int(ev.units[i]) == rows.sum()
