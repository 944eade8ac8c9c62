"""Large tables with small patterns are covered from the cells near each primary (stop 53).

Before, a pattern of fewer than 600 hidden cells was covered by whole-table LPs however large
the table: each took thousands of simplex iterations over every cell (4-D tables of 3,000
cells: 17-93 s), and above 10,000 cells one elastic LP for a batch of failures could spend the
whole work budget and leave every cell hidden (a 15 × 12 × 8 × 7 table of sums: 186 s). Now,
from 5,000 cells on (1,000 with three dimensions or more), the cover of each failed requirement
is the cheaper of the lightest box through the primary and the first local LP's flow
(``LocalAttacker.cheapest_cover``); the whole-table LP answers only what is not found nearby,
and the final audit is the same exact audit as ever.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import _prepare, clear_cache

audit = importlib.import_module("sdc_magic.protect.audit")
local = importlib.import_module("sdc_magic.protect.local")
heuristic = importlib.import_module("sdc_magic.protect.heuristic")


def _magnitudes(shape: tuple[int, ...], primaries: int, seed: int) -> pd.DataFrame:
    """Every cell of ``shape`` with a turnover, ``primaries`` of them small and flagged."""
    rng = np.random.default_rng(seed)
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({f"d{j}": idx[j] for j in range(len(shape))})
    df["v"] = np.round(rng.lognormal(6.0, 0.6, len(df)), 2)
    flagged = rng.choice(len(df), primaries, replace=False)
    df["p"] = False
    df.loc[flagged, "p"] = True
    df.loc[flagged, "v"] = np.round(rng.uniform(1.0, 20.0, primaries), 2)
    return df


def _protected_within(df: pd.DataFrame, time_limit: float) -> tuple[int, int]:
    """(primaries, secondaries) of ``df``'s audited pattern found within ``time_limit``'s work budget."""
    clear_cache()
    res = protect(df, dims=[c for c in df.columns if c.startswith("d")], value="v", primary="p",
                  rules=Rules(protection=10), singletons=False, time_limit=time_limit)
    assert res.audit_ok, res.message
    assert not res.budget_spent
    status = res.cells.status
    return int((status == "primary").sum()), int((status == "secondary").sum())


def test_a_four_way_table_of_sums_is_protected_within_a_small_work_budget() -> None:
    # 15 x 12 x 8 x 7 = 10,080 inner cells, 13,000 with margins; 60 primaries. Before: the
    # batch LP spent the budget (every cell hidden, budget_spent, audit_ok False).
    primaries, secondaries = _protected_within(_magnitudes((15, 12, 8, 7), 60, 3), 2.0)
    assert primaries == 60
    assert 0 < secondaries < 1000, secondaries  # a pattern (435 secondaries), not the whole table (13,000 cells)


def test_a_small_four_way_table_is_covered_locally_too() -> None:
    # 8 x 8 x 6 x 4 (2,835 cells with margins), 22 primaries: below LOCAL_COVER_CELLS, but with
    # four dimensions the whole-table covers spent any budget (1 nominal second: 45,000 simplex
    # iterations, every cell hidden; 2: the same); the local covers need 20,649 iterations
    primaries, secondaries = _protected_within(_magnitudes((8, 8, 6, 4), 22, 105), 1.0)
    assert primaries == 22
    assert 0 < secondaries < 400, secondaries


def _cover_problem(seed: int):
    df = _magnitudes((12, 10, 6), 6, seed)
    tab = _prepare(df, ["d0", "d1", "d2"], "v", None, None, None, None, True)
    a = tab.value
    n = len(a)
    primary = np.zeros(n, dtype=bool)
    primary[tab.row_cell[df.p.to_numpy()]] = True
    lev = np.where(primary, 0.5 * a, 0.0)  # (within every cell's room down)
    nan = np.full(n, np.nan)
    P = audit.Problem(tab.model.M, a, a.copy(), np.full(n, np.inf), primary, np.ones(n, bool), lev, lev,
                      a.copy(), nan, nan.copy(), boxes=local.Boxes.of(tab.model))
    return P


def _fixed_cost(P, hidden: np.ndarray, f) -> float:
    return float(np.where(hidden[f.idx], 0.0, P.cost[f.idx]).sum())


def test_the_cheapest_cover_is_a_certificate_and_no_dearer_than_the_local_lp() -> None:
    for seed in (1, 2, 3):
        P = _cover_problem(seed)
        hidden = P.primary.copy()
        movable = np.ones(P.n, dtype=bool)
        rank = np.where(hidden, 0.0, 1.0 + P.cost / P.cost.max())
        near = local.LocalAttacker(P.M, P.Mc, movable, P._weights(), rank=rank, sizes=local.COVER_SIZES)
        w_up, w_dn = heuristic._cover_weights(P, np.arange(P.n), hidden, 10.0)
        near.set_weights(w_up, w_dn)
        checked = cheaper = 0
        for k in np.flatnonzero(P.primary):
            for sign, level in ((1, P.upl[k]), (-1, P.lpl[k])):
                got = near.cheapest_cover(int(k), sign, float(level), P.L, P.U, hidden=hidden, cost=P.cost,
                                          boxes=P.boxes)
                assert got is not None
                # a certificate of the whole table: balanced, within ranges, moving k far enough
                assert np.abs(P.M[:, got.idx] @ got.val).max() <= 1e-6 * np.abs(got.val).max()
                assert (got.val <= P.U[got.idx] + 1e-9).all() and (-got.val <= P.L[got.idx] + 1e-9).all()
                assert sign * got.value_at(int(k)) >= level * (1 - 1e-6)
                lp_only = near.reach(int(k), sign, float(level), P.L, P.U)
                assert lp_only is not None
                assert _fixed_cost(P, hidden, got) <= _fixed_cost(P, hidden, lp_only) + 1e-9
                cheaper += _fixed_cost(P, hidden, got) < _fixed_cost(P, hidden, lp_only) - 1e-9
                box = P.boxes.find(int(k), sign, float(level), P.L, P.U, movable,
                                   np.where(hidden, 1e-9, P.cost))
                if box is not None:
                    assert _fixed_cost(P, hidden, got) <= _fixed_cost(P, hidden, box) + 1e-9
                checked += 1
        assert checked == 2 * int(P.primary.sum())
        assert cheaper > 0  # (the box beat the local LP somewhere: the choice was tested)


def test_small_tables_keep_the_whole_table_cover(monkeypatch) -> None:
    # below the thresholds nothing changes: no local cover is asked for
    asked = []
    original = local.LocalAttacker.cheapest_cover

    def spy(self, *args, **kwargs):
        asked.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(local.LocalAttacker, "cheapest_cover", spy)

    def run(shape: tuple[int, ...], primaries: int) -> None:
        df = _magnitudes(shape, primaries, 1)
        clear_cache()
        res = protect(df, dims=[f"d{j}" for j in range(len(shape))], value="v", primary="p",
                      rules=Rules(protection=10), singletons=False)
        assert res.audit_ok, res.message

    run((40, 30), 8)  # 2-D, 1,271 cells: below LOCAL_COVER_CELLS
    run((8, 6, 5), 5)  # 3-D, 378 cells: below LOCAL_COVER_CELLS_3D
    assert asked == []
    run((12, 10, 6), 6)  # 3-D, 1,001 cells: covered locally
    assert asked
    asked.clear()
    monkeypatch.setattr(heuristic, "LOCAL_COVER_CELLS", 1000)
    run((40, 30), 8)  # the 2-D table with the threshold lowered: covered locally, and audited
    assert asked
