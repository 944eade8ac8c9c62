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
from test_protect_runtime import _big_table

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import clear_cache
from sdc_magic.protect.lp import ITERATIONS_PER_SECOND, work_done

mip = importlib.import_module("sdc_magic.protect.mip")
_table = _big_table  # (16 x 8 x 3 counts: a few master rounds)


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
    assert mip._nodes_within_budget(500, now + 1_000, None) == 500
    assert mip._nodes_within_budget(500, np.inf, (9_000, 3)) == 500
    # the latest solve: 3,000 units a node (its root is one of its 3 nodes); 30,000 left: 10 nodes
    assert mip._nodes_within_budget(500, now + 30_000, (9_000, 3)) == 10
    # a root-only solve's work is one node's
    assert mip._nodes_within_budget(500, now + 30_000, (9_000, 0)) == 3
    # never below one node, never above the limit asked for
    assert mip._nodes_within_budget(500, now + 10, (9_000, 3)) == 1
    assert mip._nodes_within_budget(5, now + 10**9, (9_000, 3)) == 5


def test_a_round_starts_only_when_the_budget_covers_the_latest_rounds_work() -> None:
    now = work_done()
    assert mip._round_fits(now + 10, None)  # the first round always runs
    assert mip._round_fits(np.inf, (10**9, 5))
    assert mip._round_fits(now + 9_000, (9_000, 3))
    assert not mip._round_fits(now + 8_999, (9_000, 3))  # (red team: 0.2 % left, 12.5 CPU s)


def _hierarchy() -> tuple[pd.DataFrame, dict]:
    """12 departments in 4 regions × 6 × 4, counts: nodes get dearer as cuts accumulate (red team)."""
    rng = np.random.default_rng(21)
    n = rng.negative_binomial(2, 0.25, size=(12, 6, 4))
    idx = np.indices(n.shape).reshape(3, -1)
    df = pd.DataFrame({"d": [f"D{i:02d}" for i in idx[0]], "b": idx[1], "c": idx[2], "n": n.ravel()})
    regions = {f"R{k}": [f"D{i:02d}" for i in range(3 * k, 3 * k + 3)] for k in range(4)}
    return df[df.n > 0].reset_index(drop=True), {"d": regions}


def test_the_budget_is_not_overrun_by_a_late_master_round() -> None:
    df, hier = _hierarchy()
    clear_cache()
    res = protect(df, dims=["d", "b", "c"], value="n", hierarchies=hier, rules=Rules(threshold=4),
                  method="optimal", solver="HiGHS", singletons=False, time_limit=5.0)
    assert res.audit_ok and "work limit" in res.method
    # (red team, stop 54: the node limit from an average over root-only rounds let round 14
    # start 48,340 units from the end with 9 nodes, and the search ended at 360,453: +60 %)
    assert res.work <= 1.1 * 5.0 * ITERATIONS_PER_SECOND


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 0.0, -1.0])
def test_a_time_limit_that_is_not_a_finite_positive_number_is_a_clear_error(bad: float) -> None:
    with pytest.raises(ValueError, match="time_limit must be a finite positive number"):
        protect(_table(), dims=["a", "b", "c"], value="n", rules=Rules(threshold=5), time_limit=bad)
