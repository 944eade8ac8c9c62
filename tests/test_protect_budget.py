"""Determinism and the work budget (issues 13, 21): budgets in work units; no clock decides anything."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import clear_cache


def _counts(shape: tuple[int, ...], seed: int, p: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({f"d{j}": idx[j] for j in range(len(shape))})
    df["n"] = n.ravel()
    return df[df.n > 0].reset_index(drop=True)


def test_same_input_same_pattern_under_auto() -> None:
    # a table where the MIP used to get "as long as the heuristic took" (load-dependent)
    df = _counts((12, 9, 3), 4, 0.25)
    runs = []
    for _ in range(3):
        clear_cache()
        runs.append(protect(df, dims=["d0", "d1", "d2"], value="n", rules=Rules(threshold=5)))
    for res in runs:
        assert res.audit_ok, res.message
    first = runs[0].cells.status.tolist()
    for res in runs[1:]:
        assert res.cells.status.tolist() == first
        assert res.cost == runs[0].cost
        assert res.method == runs[0].method


def test_heuristic_is_deterministic_on_a_larger_table() -> None:
    df = _counts((40, 30), 8, 0.15)
    a = protect(df, dims=["d0", "d1"], value="n", rules=Rules(threshold=5), singletons=True)
    clear_cache()
    b = protect(df, dims=["d0", "d1"], value="n", rules=Rules(threshold=5), singletons=True)
    assert a.audit_ok and b.audit_ok
    assert a.cells.status.tolist() == b.cells.status.tolist()


def test_a_spent_work_budget_hides_everything_and_says_so() -> None:
    df = _counts((40, 30, 4), 9, 0.2)
    res = protect(df, dims=["d0", "d1", "d2"], value="n", rules=Rules(threshold=5), singletons=True,
                  time_limit=1e-3)
    assert not res.audit_ok and res.budget_spent
    assert res.method == "none (work budget)"
    assert (res.cells.status != "safe").all()
    assert "work budget" in res.message and "time_limit=" in res.message


def test_the_budget_cuts_at_the_same_point_every_time() -> None:
    """A budget that runs out part-way gives the same answer on every run (work, not time)."""
    df = _counts((25, 20), 3, 0.2)
    runs = []
    for _ in range(2):
        clear_cache()
        runs.append(protect(df, dims=["d0", "d1"], value="n", rules=Rules(threshold=5), singletons=True,
                            time_limit=0.05))
    assert runs[0].cells.status.tolist() == runs[1].cells.status.tolist()
    assert runs[0].method == runs[1].method and runs[0].work == runs[1].work
