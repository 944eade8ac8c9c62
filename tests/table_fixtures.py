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


def red_team_people(seed: int, n: int = 1500) -> pd.DataFrame:
    """The people of a red team's random session (stop 65): eight districts, three tiny."""
    rng = np.random.default_rng(seed)
    districts = [f"D{i}" for i in range(8)]
    df = pd.DataFrame({
        "district": rng.choice(districts, n, p=[0.25, 0.2, 0.2, 0.15, 0.1, 0.07, 0.02, 0.01]),
        "sex": rng.choice(["F", "M"], n),
        "age": rng.integers(0, 100, n),
        "edu": rng.choice(["none", "primary", "secondary", "tertiary"], n, p=[0.03, 0.4, 0.4, 0.17]),
        "flag": (rng.random(n) < 0.2).astype(int),
        "income": rng.lognormal(5, 1, n).round(),
        "hh": rng.integers(0, n // 3, n),
    })
    df.loc[rng.choice(n, 3, replace=False), "district"] = "D8"
    region = {"D0": "R1", "D1": "R1", "D2": "R1", "D3": "R2", "D4": "R2", "D5": "R2", "D6": "R3", "D7": "R3"}
    df["region"] = df.district.map(region).fillna("R3")
    df["band"] = pd.cut(df.age, [-1, 17, 59, 120], labels=["child", "adult", "older"]).astype(str)
    return df
