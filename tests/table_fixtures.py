"""Shared tables of the protection tests: random count tables and tables of firms' turnover.

Not a test module (no ``test_`` prefix): the protection test files import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def count_table(shape: tuple[int, ...], seed: int, p: float) -> tuple[pd.DataFrame, list[str]]:
    """A random count table of ``shape`` (negative binomial counts, empty cells left out) and its dimensions."""
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    dims = [f"v{j}" for j in range(len(shape))]
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({d: [f"{d}{k:03d}" for k in idx[j]] for j, d in enumerate(dims)})
    df["n"] = n.ravel()
    return df[df.n > 0].reset_index(drop=True), dims


def firms(cells: list[tuple[str, str, list[float]]], value: str = "v") -> pd.DataFrame:
    """One row per firm: (row label, column label, the turnover of each firm of that cell)."""
    rows = [(r, c, f"{r}{c}{i}", v) for r, c, values in cells for i, v in enumerate(values)]
    return pd.DataFrame(rows, columns=["r", "c", "firm", value])


def displayed_pivot(frame: pd.DataFrame, value: str) -> Any:
    """The display a fresh ``humanitarian`` session makes of ``frame``'s sums of ``value`` by r × c, with margins."""
    from sdc_magic.config import preset
    from sdc_magic.jupyter.session import Session

    s = Session(rules=preset("humanitarian"))
    s.capture.install()
    try:
        return s.publish(frame.pivot_table(index="r", columns="c", values=value, aggfunc="sum", margins=True))
    finally:
        s.capture.uninstall()
