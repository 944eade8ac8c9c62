"""Empty cells are known zeros to the protection, in every layout of the same rows.

A groupby leaves a combination without rows out of its result, and the protection takes it as a
known zero; a crosstab shows it as 0 and a pivot_table as NaN, and the search used to hide such
cells as free secondaries (value 0): the same rows got another pattern in another layout, and
a hidden empty cell protects little (it can only be larger than 0). See
``sdc_magic/checking/margin_rows.py``, ``without_empty_cells``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import preset
from sdc_magic.jupyter.session import Session

# two 5 x 5 tables of counts with many empty combinations, where the search hid 3 empty cells
# of the crosstab (of 13 and of 12 hidden) before empty cells were left out
COUNTS = {
    "a": [[6, 12, 0, 12, 2], [3, 6, 0, 20, 0], [0, 1, 3, 2, 0], [0, 0, 0, 0, 20], [0, 6, 8, 0, 0]],
    "b": [[0, 8, 6, 6, 0], [0, 20, 8, 0, 1], [12, 2, 20, 20, 0], [0, 0, 0, 3, 0], [12, 12, 8, 6, 12]],
}


def _rows(counts: list[list[int]]) -> pd.DataFrame:
    rows = [(f"r{i}", f"c{j}", float(1 + (7 * i + 3 * j + k) % 50))
            for i, line in enumerate(counts) for j, n in enumerate(line) for k in range(n)]
    return pd.DataFrame(rows, columns=["r", "c", "v"])


def _publish(table: Any, rules: Any = None) -> tuple[str, set[tuple[str, str]]]:
    """Status and the (row, column) labels of the hidden cells."""
    status, hidden, _ = _checked(table, rules)
    return status, hidden


def _checked(table: Any, rules: Any = None) -> tuple[str, set[tuple[str, str]], dict[tuple[str, str], Any]]:
    """Status, the labels of the hidden cells and the attacker interval of each (crosstabs)."""
    sess = Session(rules=rules or preset("humanitarian"))
    sess.capture.install()
    try:
        out = sess.publish(table())
    finally:
        sess.capture.uninstall()
    shown = table()
    checked = out.checked
    assert checked is not None, out.data["text/plain"]
    hidden = np.asarray(checked.hidden, dtype=bool)
    intervals: dict[tuple[str, str], Any] = {}
    if isinstance(shown, pd.Series):
        labels = [tuple(k) for k in shown.index]
        cells = {labels[i] for i in np.flatnonzero(hidden.reshape(len(shown), -1).any(axis=1))}
    else:
        cells = {(str(shown.index[i]), str(shown.columns[j])) for i, j in zip(*np.nonzero(hidden), strict=True)}
        intervals = {(str(shown.index[i]), str(shown.columns[j])): v for (i, j), v in checked.intervals.items()}
    return out.metadata["sdc_magic"]["status"], cells, intervals


def _empty(counts: list[list[int]]) -> set[tuple[str, str]]:
    return {(f"r{i}", f"c{j}") for i, line in enumerate(counts) for j, n in enumerate(line) if n == 0}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_a_crosstab_hides_the_cells_of_its_groupby_and_no_empty_cell(name: str) -> None:
    counts = COUNTS[name]
    df = _rows(counts)
    by_groups = _publish(lambda: df.groupby(["r", "c"]).size())
    crossed = _publish(lambda: pd.crosstab(df.r, df.c))
    assert by_groups[0] == crossed[0] == "suppressed"
    assert not crossed[1] & _empty(counts), crossed[1] & _empty(counts)
    assert crossed[1] == by_groups[1]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_a_pivot_table_of_sums_hides_the_cells_of_its_groupby(name: str) -> None:
    counts = COUNTS[name]
    df = _rows(counts)
    by_groups = _publish(lambda: df.groupby(["r", "c"])["v"].sum())
    pivoted = _publish(lambda: df.pivot_table(index="r", columns="c", values="v", aggfunc="sum"))
    assert by_groups[0] == pivoted[0] == "suppressed"
    assert not pivoted[1] & _empty(counts)
    assert pivoted[1] == by_groups[1]


def test_zeros_a_rule_flags_are_still_hidden_and_protected() -> None:
    """Under ``zeros suppress`` an empty cell is a primary: it stays in the search and is hidden."""
    counts = COUNTS["a"]
    df = _rows(counts)
    rules = dataclasses.replace(preset("humanitarian"), zeros="suppress")
    status, hidden, intervals = _checked(lambda: pd.crosstab(df.r, df.c, margins=True), rules)
    assert status == "suppressed"
    assert _empty(counts) <= hidden
    # protected, not only drawn hidden: the attacker's interval of every empty cell reaches above 0
    assert all(intervals[cell][1] > 0 for cell in _empty(counts)), {c: intervals.get(c) for c in _empty(counts)}
