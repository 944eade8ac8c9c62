"""Showing a large frame of rows costs what its first rows cost, and every table is still matched.

Why (stop 70): a displayed frame was flattened whole (every cell with its row and column labels)
before it was matched, and once more for every table grouped by some of its columns (its
``reset_index`` form): a raw frame of 1M rows × 4 took 14 s to be shown as row-level data in a
session of 8 tables. Its first rows are now tried first (``checking.resolve.SAMPLE_ROWS``); a frame
they do not rule out is matched whole, as before, so a large table is never taken for rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from shown_cells import status

from sdc_magic.checking import resolve as resolve_module
from sdc_magic.checking.resolve import SAMPLE_ROWS
from sdc_magic.jupyter.session import Session

ROWS = 3 * SAMPLE_ROWS


def _people(rows: int = ROWS, villages: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"village": rng.choice([f"V{i:04d}" for i in range(villages)], rows),
                         "sex": rng.choice(["F", "M"], rows), "age": rng.integers(0, 90, rows),
                         "income": rng.gamma(2.0, 900.0, rows).round(2)})


@pytest.fixture
def flattened(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows of every object the display flattens to match it."""
    seen: list[int] = []
    real = resolve_module.flatten

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(obj))
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(resolve_module, "flatten", counting)
    return seen


def test_a_frame_of_rows_is_told_from_its_first_rows(sess: Session, flattened: list[int]) -> None:
    df = _people()
    for t in (df.groupby("village").size(), df.groupby(["village", "sex"]).size(), df.groupby("age").size(),
              df.groupby("village")["income"].sum()):
        sess.publish(t)
    flattened.clear()
    for shown in (df, df[["age", "income"]], df.sort_values("income"), df[df.age > 30]):
        out = sess.publish(shown)
        assert out.metadata["sdc_magic"]["kind"] == "row-level"
    assert flattened and max(flattened) <= SAMPLE_ROWS, flattened


def _large_table() -> pd.Series:
    """A one-way count table of more cells than the sample's rows, a few of them small."""
    sizes = np.full(SAMPLE_ROWS + 200, 12)
    sizes[[5, 400, 1100]] = [2, 1, 3]
    villages = np.repeat([f"V{i:05d}" for i in range(len(sizes))], sizes)
    return pd.DataFrame({"village": villages}).groupby("village").size()


@pytest.mark.parametrize("shape", ["reset_index", "sorted", "renamed labels", "unrecorded rows first"])
def test_a_large_table_is_matched_however_it_is_shown(sess: Session, shape: str) -> None:
    t = _large_table()
    assert len(t) > SAMPLE_ROWS
    sess.publish(t)
    if shape == "reset_index":
        shown: Any = t.reset_index(name="n")
    elif shape == "sorted":
        shown = t.sort_values()
    elif shape == "renamed labels":  # (matched by position: the same figures in the same layout)
        shown = t.set_axis(pd.RangeIndex(len(t), name="row"))
    else:  # more empty rows than the sample holds, for labels the table does not have, then the table
        extra = pd.DataFrame({"village": [f"X{i:05d}" for i in range(SAMPLE_ROWS + 10)], "n": 0})
        shown = pd.concat([extra, t.reset_index(name="n")], ignore_index=True)
    out = sess.publish(shown)
    meta = out.metadata["sdc_magic"]
    assert meta["kind"] == "table", (shape, meta["kind"], meta.get("notes"))
    assert status(out) in ({"review", "suppressed"} if shape == "renamed labels" else {"suppressed"})
    assert meta["hidden"] >= 3


def _coded(rows: int) -> pd.DataFrame:
    """Microdata coded in numbers, as read from a file: no labels, rows numbered."""
    rng = np.random.default_rng(3)
    return pd.DataFrame({"region": rng.integers(1, 21, rows), "sex": rng.integers(1, 3, rows),
                         "age_band": rng.integers(1, 10, rows), "income": rng.gamma(2.0, 900.0, rows)})


def test_a_few_numbered_rows_of_numbers_are_still_checked_as_counts(sess: Session) -> None:
    """A frame of numbers alone may be a table without evidence (loaded from a file): its whole
    numbers are checked as counts, as before, at any size (taking more than 10,000 numbered rows
    for rows of data was tried and dropped at stop 70: tables rebuilt from numpy were drawn raw)."""
    out = sess.publish(_coded(40)[["sex", "age_band"]])
    meta = out.metadata["sdc_magic"]
    assert meta["kind"] == "unverified" and status(out) == "review" and meta["hidden"] > 0


def test_a_large_table_coded_in_numbers_is_matched_in_numbered_rows(sess: Session) -> None:
    sizes = np.full(10_500, 7)
    sizes[[10, 5000, 10_200]] = [1, 2, 4]
    t = pd.DataFrame({"village": np.repeat(np.arange(len(sizes)), sizes)}).groupby("village").size()
    sess.publish(t)
    out = sess.publish(t.reset_index(name="n"))
    # (``review``: numbered villages of fewer than 5 units are labels to band, as for any such table)
    assert out.metadata["sdc_magic"]["kind"] == "table" and status(out) in {"review", "suppressed"}
    assert out.metadata["sdc_magic"]["hidden"] >= 3


def test_a_sample_of_one_flag_value_is_no_proof(sess: Session) -> None:
    """A table of a flag shown with the flag as 0/1: pandas types a level holding only 0 apart
    from the table's False and True, so the first rows (all False) found none of its cells and
    ruled the table out; the copy was checked without evidence and drew cells the table hides
    (helper-96: (False, 21) = 5, a secondary). Labels that are not text prove nothing in a sample."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"flag": rng.random(12_000) < 0.7, "village": rng.integers(0, SAMPLE_ROWS + 300, 12_000)})
    t = df.groupby(["flag", "village"]).size()
    sess.publish(t)
    shown = t.reset_index()
    shown["flag"] = shown["flag"].astype(int)
    shown = shown[shown["village"] < SAMPLE_ROWS + 250]
    assert (shown["flag"].iloc[:SAMPLE_ROWS] == 0).all()
    out = sess.publish(shown)
    assert out.metadata["sdc_magic"]["kind"] == "table"
