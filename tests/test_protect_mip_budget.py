"""The MIP's master problem spends the search's work budget too (issue 21: budgets in work).

The master is solved by HiGHS's branch and bound through PuLP, outside the attacker LPs whose
simplex iterations the budget counts; before its iterations were charged, ``time_limit=60`` on
the 3-level hierarchy benchmark took 131 CPU s, 115 of them in master solves.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import clear_cache
from sdc_magic.protect.lp import ITERATIONS_PER_SECOND, work_done

mip = importlib.import_module("sdc_magic.protect.mip")


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = rng.negative_binomial(2, 0.2, size=(16, 8, 3))
    idx = np.indices(n.shape).reshape(3, -1)
    df = pd.DataFrame({"a": idx[0], "b": idx[1], "c": idx[2], "n": n.ravel()})
    return df[df.n > 0].reset_index(drop=True)


class _Masters:
    """Spy on the master solves: HiGHS's own count of their iterations and nodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.iterations: list[int] = []
        self.node_limits: list[int] = []
        solve, solver = mip._solve_master, mip._solver

        def solve_master(prob, chosen, tick, message):  # type: ignore[no-untyped-def]
            status = solve(prob, chosen, tick, message)
            self.iterations.append(int(prob.solverModel.getInfo().simplex_iteration_count))
            return status

        def make_solver(name: str, nodes: int):  # type: ignore[no-untyped-def]
            self.node_limits.append(int(nodes))
            return solver(name, nodes)

        monkeypatch.setattr(mip, "_solve_master", solve_master)
        monkeypatch.setattr(mip, "_solver", make_solver)


def _optimal(time_limit: float):  # type: ignore[no-untyped-def]
    clear_cache()  # (each run searches: a cached protection would spend nothing)
    return protect(_table(), dims=["a", "b", "c"], value="n", rules=Rules(threshold=5), method="optimal",
                   solver="HiGHS", singletons=False, time_limit=time_limit)


def test_the_master_solves_are_charged_to_the_reported_work(monkeypatch: pytest.MonkeyPatch) -> None:
    masters = _Masters(monkeypatch)
    res = _optimal(3.0)
    assert res.audit_ok and res.method == "optimal/HiGHS"
    assert len(masters.iterations) >= 3 and sum(masters.iterations) > 0
    # the reported work holds the master's iterations at their weight, beside the attacker LPs'
    assert res.work >= mip.MASTER_ITERATION_WORK * sum(masters.iterations)


def test_master_rounds_stop_when_their_work_spends_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    free = _Masters(monkeypatch)
    assert _optimal(3.0).method == "optimal/HiGHS"
    rounds_free = len(free.iterations)
    # the same table and budget with master iterations made very dear: the first master solve
    # spends the budget, and the best audited pattern so far is kept (never an unaudited one)
    dear = _Masters(monkeypatch)
    monkeypatch.setattr(mip, "MASTER_ITERATION_WORK", 10 * ITERATIONS_PER_SECOND)
    res = _optimal(3.0)
    assert res.audit_ok
    assert "work limit" in res.method
    assert 1 <= len(dear.iterations) < rounds_free


def test_the_node_limit_shrinks_to_what_the_budget_has_left() -> None:
    now = work_done()
    # no master solve yet, or no budget: the limit asked for
    assert mip._nodes_within_budget(500, now + 1_000, (0, 0)) == 500
    assert mip._nodes_within_budget(500, np.inf, (9_000, 3)) == 500
    # 3,000 units per node (roots included) so far and 30,000 left: 10 nodes
    assert mip._nodes_within_budget(500, now + 30_000, (9_000, 3)) == 10
    # never below one node, never above the limit asked for
    assert mip._nodes_within_budget(500, now + 10, (9_000, 3)) == 1
    assert mip._nodes_within_budget(5, now + 10**9, (9_000, 3)) == 5
