"""Bounds propagated over the relations (``protect/bounds.py``): proofs of "no" without an LP.

The bounds must contain every deviation the attacker LP can reach (otherwise a pattern
would be rejected, or a requirement failed, on a false proof), and using them must change
only the work a protection costs, never its pattern.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog
from table_fixtures import count_table

from sdc_magic.config import Rules
from sdc_magic.protect import lp, protect
from sdc_magic.protect.api import _prepare, clear_cache

bounds = importlib.import_module("sdc_magic.protect.bounds")
heuristic = importlib.import_module("sdc_magic.protect.heuristic")
api = importlib.import_module("sdc_magic.protect.api")


_counts = count_table


def _extreme(M: sp.csr_matrix, hidden: np.ndarray, L: np.ndarray, U: np.ndarray, j: int, sense: int) -> float:
    """The attacker's exact extreme deviation of hidden cell j (an LP over the hidden cells)."""
    H = np.flatnonzero(hidden)
    c = np.zeros(len(H))
    c[int(np.searchsorted(H, j))] = -sense
    res = linprog(c, A_eq=M[:, H], b_eq=np.zeros(M.shape[0]), method="highs",
                  bounds=[(-L[i], U[i] if np.isfinite(U[i]) else None) for i in H])
    if res.status == 3:
        return sense * np.inf
    assert res.status == 0, res.message
    return -res.fun if sense == 1 else res.fun


@pytest.mark.parametrize("shape,seed,share", [((6, 5), 1, 0.35), ((5, 4, 3), 2, 0.4), ((4, 3, 3, 2), 3, 0.5)])
def test_propagated_bounds_contain_every_attacker_extreme(shape, seed, share) -> None:
    """Iterated bounds are outer bounds (never inside an LP extreme), and tighter than one pass."""
    df, dims = _counts(shape, seed, 0.3)
    tab = _prepare(df, dims, "n", None, None, None, None, True)
    a = tab.value
    M = sp.csr_matrix(tab.model.M)
    Mc = sp.csc_matrix(M)
    rng = np.random.default_rng(seed)
    hidden = rng.random(len(a)) < share
    H = np.flatnonzero(hidden)
    L, U = a.copy(), np.full(len(a), np.inf)
    lo1, hi1 = bounds.propagated_bounds(Mc, H, L, U)
    lo, hi = bounds.propagated_bounds(Mc, H, L, U, rounds=bounds.MAX_ROUNDS)
    assert (lo >= lo1 - 1e-12).all() and (hi <= hi1 + 1e-12).all()
    assert (hi < hi1).any() or (lo > lo1).any(), "iterating tightened nothing: the test proves nothing"
    tight = 0
    for pos, j in enumerate(H.tolist()):
        top = _extreme(M, hidden, L, U, j, 1)
        bottom = _extreme(M, hidden, L, U, j, -1)
        assert hi[pos] >= top - 1e-7, (j, hi[pos], top)
        assert lo[pos] <= bottom + 1e-7, (j, lo[pos], bottom)
        tight += bool(np.isclose(hi[pos], top)) + bool(np.isclose(lo[pos], bottom))
    assert tight > len(H)  # most bounds are the extremes themselves on count tables


def test_infinite_and_signed_coefficients() -> None:
    """A relation with negative coefficients and unbounded cells: the bounds of its arithmetic."""
    # f0 + f1 − f2 = 0 ; f0 ∈ [−2, 3], f1 ∈ [−1, ∞), f2 ∈ [−5, 4]
    Mc = sp.csc_matrix(np.array([[1.0, 1.0, -1.0]]))
    lo, hi = bounds.propagated_bounds(Mc, np.arange(3), np.array([2.0, 1.0, 5.0]),
                                      np.array([3.0, np.inf, 4.0]), rounds=bounds.MAX_ROUNDS)
    # f1 = f2 − f0 ∈ [−8, 6] ; f0 = f2 − f1 ≤ 4 + 1 ; f2 = f0 + f1 ≥ −3
    np.testing.assert_allclose(lo, [-2.0, -1.0, -3.0])
    np.testing.assert_allclose(hi, [3.0, 6.0, 4.0])


@pytest.mark.parametrize("seed", range(6))
def test_bounds_stay_outer_bounds_in_floating_point(seed: int) -> None:
    """Relations mixing magnitudes from 10^-9 to 10^13: never inside the bound exact arithmetic gives.

    Red team: a 2 × 2 block of hidden cells worth 4.8e13, 31.31, 313.1 and 20 gave 31.3125 where
    the exact bound is 31.3138 (the huge term subtracted from its relation's total): a false
    "no" for a level of 31.3138. Each pass now rounds outwards.
    """
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    for _ in range(25):
        m, n = int(rng.integers(1, 6)), int(rng.integers(2, 8))
        M = np.where(rng.random((m, n)) < 0.6, rng.choice([-1.0, 1.0], (m, n)) * 10.0 ** rng.uniform(-3, 3, (m, n)), 0.0)
        M = M[np.abs(M).sum(1) > 0]
        if not len(M):
            continue
        L = 10.0 ** rng.uniform(-9, 13, n)
        U = np.where(rng.random(n) < 0.3, np.inf, 10.0 ** rng.uniform(-9, 13, n))
        lo, hi = bounds.propagated_bounds(sp.csc_matrix(M), np.arange(n), L, U, rounds=bounds.MAX_ROUNDS)
        exact_lo, exact_hi = _exact_propagation(M, L, U, bounds.MAX_ROUNDS, Fraction)
        for j in range(n):
            if exact_hi[j] is not None:
                assert hi[j] >= exact_hi[j], (seed, j, hi[j], float(exact_hi[j]))
            if exact_lo[j] is not None:
                assert lo[j] <= exact_lo[j], (seed, j, lo[j], float(exact_lo[j]))


def test_the_red_teams_mixed_magnitudes() -> None:
    M = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]], float)
    L = np.array([4.81029133e13, 31.3137998, 313.137998, 20.0])
    lo, _ = bounds.propagated_bounds(sp.csc_matrix(M), np.arange(4), L, np.full(4, np.inf), rounds=bounds.MAX_ROUNDS)
    assert -lo[2] >= 31.3137998  # the exact extreme: x = (31.31, −31.31, −31.31, 31.31)
    assert not bounds.short_of(np.array([-lo[2]]), np.array([31.3137998])).any()


def _exact_propagation(M: np.ndarray, L: np.ndarray, U: np.ndarray, rounds: int, Fraction: type
                       ) -> tuple[list, list]:
    """The same propagation in exact rational arithmetic (None: unbounded), updating in place.

    In place it is at least as tight after as many passes, so a float bound inside it is a
    rounding error, never a difference of method.
    """
    n = M.shape[1]
    lo: list = [-Fraction(x) if np.isfinite(x) else None for x in L]
    hi: list = [Fraction(x) if np.isfinite(x) else None for x in U]

    def add(total: object, term: object) -> object:
        return None if total is None or term is None else total + term

    for _ in range(rounds):
        changed = False
        for row in M:
            idx = [j for j in range(n) if row[j] != 0]
            for i in idx:
                # c_i f_i = Σ_{j≠i} (−c_j f_j), each term between its two ends
                low: object = Fraction(0)
                high: object = Fraction(0)
                for j in idx:
                    if j == i:
                        continue
                    c = Fraction(row[j])
                    end_lo, end_hi = (hi[j], lo[j]) if c > 0 else (lo[j], hi[j])
                    low = add(low, None if end_lo is None else -c * end_lo)
                    high = add(high, None if end_hi is None else -c * end_hi)
                ci = Fraction(row[i])
                new_lo, new_hi = (low, high) if ci > 0 else (high, low)
                new_lo = None if new_lo is None else new_lo / ci
                new_hi = None if new_hi is None else new_hi / ci
                if new_hi is not None and (hi[i] is None or new_hi < hi[i]):
                    hi[i], changed = new_hi, True
                if new_lo is not None and (lo[i] is None or new_lo > lo[i]):
                    lo[i], changed = new_lo, True
        if not changed:
            break
    return lo, hi


def _protect(df: pd.DataFrame, dims: list[str]) -> tuple[object, int]:
    clear_cache()
    start = lp.work_done()
    res = protect(df, dims=dims, value="n", rules=Rules(threshold=5, protection=10.0), singletons=True,
                  method="heuristic", time_limit=60)
    return res, lp.work_done() - start


@pytest.mark.parametrize("shape,seed", [((4, 4, 4, 2), 3), ((6, 5, 4), 7), ((9, 7), 1)])
def test_cleanup_trials_rejected_by_bounds_fail_the_audit_and_the_pattern_is_unchanged(monkeypatch, shape, seed
                                                                                        ) -> None:
    """Every trial the bounds reject is one the whole audit rejects; without them, the same pattern."""
    df, dims = _counts(shape, seed, 0.3)
    rejected: list[tuple[int, int]] = []
    real = heuristic._short_by_bounds

    def checked(P, trial):
        got, tb = real(P, trial)
        if got is not None:
            cert = heuristic.certify(P, trial, [], singletons=True, stop_at_first=True)
            assert cert.failures, f"trial rejected on {got} by the bounds but the audit passes"
            rejected.append(got)
        return got, tb

    monkeypatch.setattr(heuristic, "_short_by_bounds", checked)
    proved, _ = _protect(df, dims)
    assert rejected, "no clean-up trial was rejected by the bounds: the test proves nothing"
    monkeypatch.setattr(heuristic, "_short_by_bounds", real)
    fast, fast_work = _protect(df, dims)
    pd.testing.assert_frame_equal(proved.cells, fast.cells)
    monkeypatch.setattr(heuristic, "_short_by_bounds", lambda P, trial: (None, None))
    slow, slow_work = _protect(df, dims)
    assert fast.audit_ok and slow.audit_ok
    pd.testing.assert_frame_equal(fast.cells, slow.cells)
    assert fast_work <= slow_work, (fast_work, slow_work)
    clear_cache()


@pytest.mark.parametrize("shape,seed", [((4, 4, 4, 2), 3), ((6, 5, 4), 7), ((5, 4, 3, 2), 11)])
def test_cleanup_trials_rejected_by_an_insiders_bounds_fail_the_audit_and_the_pattern_is_unchanged(
        monkeypatch, shape, seed) -> None:
    """A trial an insider's bounds reject is one the whole audit rejects against that insider; without them,
    the same pattern, for more work."""
    df, dims = _counts(shape, seed, 0.3)
    rejected: list[tuple[int, int]] = []
    real = heuristic._insider_short

    def checked(P, tb, published):
        got = real(P, tb, published)
        if got is not None:
            trial = np.zeros(P.n, dtype=bool)
            trial[tb.H] = True
            cert = heuristic.certify(P, trial, [], singletons=True)
            assert got in cert.failures, f"trial rejected on {got} by an insider's bounds, audit: {cert.failures}"
            rejected.append(got)
        return got

    monkeypatch.setattr(heuristic, "_insider_short", checked)
    proved, _ = _protect(df, dims)
    assert rejected, "no clean-up trial was rejected by an insider's bounds: the test proves nothing"
    monkeypatch.setattr(heuristic, "_insider_short", real)
    fast, fast_work = _protect(df, dims)
    pd.testing.assert_frame_equal(proved.cells, fast.cells)
    monkeypatch.setattr(heuristic, "_insider_short", lambda P, tb, published: None)
    slow, slow_work = _protect(df, dims)
    assert fast.audit_ok and slow.audit_ok
    pd.testing.assert_frame_equal(fast.cells, slow.cells)
    assert fast_work < slow_work, (fast_work, slow_work)
    clear_cache()


def test_bounds_of_many_scenarios_at_once_are_valid_and_as_tight_as_one_at_a_time() -> None:
    """Stacked attackers (one row each) get bounds containing their LP extremes, no wider than alone."""
    df, dims = _counts((5, 4, 3), 2, 0.3)
    tab = _prepare(df, dims, "n", None, None, None, None, True)
    a = tab.value
    M = sp.csr_matrix(tab.model.M)
    Mc = sp.csc_matrix(M)
    hidden = np.random.default_rng(2).random(len(a)) < 0.5  # (fewer: every bound collapses to 0)
    H = np.flatnonzero(hidden)
    L, U = a.copy(), np.full(len(a), np.inf)
    lo0, hi0 = bounds.propagated_bounds(Mc, H, L, U, rounds=bounds.MAX_ROUNDS)
    coo = Mc[:, H].tocoo()
    fixed = H  # every hidden cell an "insider" knowing its own value exactly
    lo = np.repeat(lo0[None, :], len(fixed), axis=0)
    hi = np.repeat(hi0[None, :], len(fixed), axis=0)
    rows = np.arange(len(fixed))
    lo[rows, rows] = 0.0
    hi[rows, rows] = 0.0
    lo_all, hi_all = bounds.bounds_per_scenario(coo, lo, hi, bounds.MAX_ROUNDS)
    tighter = (hi_all < hi0[None, :] - 1e-9) | (lo_all > lo0[None, :] + 1e-9)
    tighter[np.arange(len(fixed)), np.arange(len(fixed))] = False  # (its own cell, set above)
    assert tighter.any(), "no insider tightened any bound: the test proves nothing"
    for row in sorted(set(np.flatnonzero(tighter.any(axis=1))[:4].tolist()) | {0, 1}):
        s = int(fixed[row])
        Ls, Us = L.copy(), U.copy()
        Ls[s] = Us[s] = 0.0
        lo1, hi1 = bounds.propagated_bounds(Mc, H, Ls, Us, rounds=bounds.MAX_ROUNDS, start=(lo0, hi0), coo=coo)
        assert (lo_all[row] >= lo1 - 1e-9).all() and (hi_all[row] <= hi1 + 1e-9).all()
        for pos in range(len(H)):
            j = int(H[pos])
            top = _extreme(M, hidden, Ls, Us, j, 1)
            bottom = _extreme(M, hidden, Ls, Us, j, -1)
            assert hi_all[row, pos] >= top - 1e-7 and lo_all[row, pos] <= bottom + 1e-7, (s, j)
