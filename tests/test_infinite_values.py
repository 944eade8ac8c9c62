"""Infinite values get a reasoned ``review``; one bad output never stops the export of the others
(issue 23.9: an all-``inf`` sum was cleared and then stopped the whole export)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session
from sdc_magic.records.verification import verify


@pytest.fixture(params=["humanitarian", "insee", "sacro"])
def sess(request):
    s = Session(rules=preset(request.param))
    s.capture.install()
    yield s
    s.capture.uninstall()


def _frame(inf_rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"g": rng.choice(list("ABC"), 90), "v": rng.random(90) * 100, "n": rng.integers(0, 9, 90)})
    if inf_rows:
        df.loc[: inf_rows - 1, "v"] = np.inf
    return df


@pytest.mark.parametrize("inf_rows", [90, 4, 1])
@pytest.mark.parametrize("stat", ["sum", "mean"])
def test_an_infinite_cell_is_review_with_its_reason(sess: Session, inf_rows: int, stat: str) -> None:
    df = _frame(inf_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = sess.publish(getattr(df.groupby("g").v, stat)())
    meta = out.metadata["sdc_magic"]
    assert meta["status"] in ("review", "blocked"), meta
    assert any("infinite" in n for n in out.checked.notes)
    assert not any("checking failed" in n for n in meta.get("notes", []))


def test_one_bad_output_does_not_stop_the_others(sess: Session, tmp_path: Path) -> None:
    df = _frame(90)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sess.publish(df.groupby("g").v.sum())
    sess.publish(df.groupby("g").size())
    written = sess.export(tmp_path / "x")
    assert [r.id for r in written] == ["out-2"] and verify(tmp_path / "x") == []
