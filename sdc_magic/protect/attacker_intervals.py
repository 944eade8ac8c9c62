"""Attacker intervals of a final pattern: the exact lower and upper bound of every hidden cell.

Split from :mod:`.audit` (which decides whether a pattern protects its primaries): once a
pattern is chosen, each hidden cell's interval is what the published cells allow. One
warm-started LP per cell and direction, skipped when a point already found (certificates
stretched to their ranges, earlier LPs, sweeps of many open cells at once) reaches a bound a
single relation proves.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .audit import Problem, Ticker
from .bounds import propagated_bounds
from .lp import Flow, IntervalEngine


def _stretched(f: Flow, L: np.ndarray, U: np.ndarray) -> list[np.ndarray]:
    """``t·f`` for the largest t > 0 and the most negative t < 0 that keep every cell in its range."""
    v = f.val
    lo, hi = L[f.idx], U[f.idx]
    out = [v]
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(v > 0, hi / v, np.where(v < 0, lo / -v, np.inf))
        down = np.where(v > 0, lo / v, np.where(v < 0, hi / -v, np.inf))
    t_up, t_down = float(np.min(up, initial=np.inf)), float(np.min(down, initial=np.inf))
    if np.isfinite(t_up) and t_up > 0:
        out.append(v * t_up)
    if np.isfinite(t_down) and t_down > 0:
        out.append(-v * t_down)
    return out


def _seed(seeds: list[Flow], pos: np.ndarray, L: np.ndarray, U: np.ndarray, best_lo: np.ndarray,
          best_hi: np.ndarray) -> None:
    """Widen ``best_lo``/``best_hi`` (local positions ``pos``) by every seed, as given and stretched both ways.

    The points of :func:`_stretched`, for all seeds at once: per-seed stretch factors
    are minima over each seed's cells (``np.minimum.reduceat``), and the extremes are
    maxima and minima, exact in any order, so this is the seed-by-seed loop's result
    without its 3,000 rounds of small numpy calls (0.1 s on 25x20x10).  Seeds touching
    a published cell (no position) are skipped, as are empty ones.
    """
    seeds = [f for f in seeds if len(f.idx)]
    if not seeds:
        return
    sizes = np.array([len(f.idx) for f in seeds])
    idx = np.concatenate([f.idx for f in seeds])
    v = np.concatenate([f.val for f in seeds])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    loc = pos[idx]
    keep = np.minimum.reduceat(loc, starts) >= 0  # every cell of the seed hidden
    lo, hi = L[idx], U[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(v > 0, hi / v, np.where(v < 0, lo / -v, np.inf))
        down = np.where(v > 0, lo / v, np.where(v < 0, hi / -v, np.inf))
    t_up = np.minimum.reduceat(up, starts)
    t_down = np.minimum.reduceat(down, starts)
    owner = np.repeat(np.arange(len(seeds)), sizes)
    for ok_seed, points in ((keep, v),
                            (keep & np.isfinite(t_up) & (t_up > 0), v * np.repeat(t_up, sizes)),
                            (keep & np.isfinite(t_down) & (t_down > 0), -v * np.repeat(t_down, sizes))):
        sel = ok_seed[owner]
        np.maximum.at(best_hi, loc[sel], points[sel])
        np.minimum.at(best_lo, loc[sel], points[sel])


#: Hidden cells from which :func:`intervals` first sweeps many extremes with one LP.
SWEEP_MIN_HIDDEN = 200
#: A sweep round that proves fewer open extremes than this ends the sweeps (a sweep LP
#: costs a few single-cell LPs).
SWEEP_MIN_PROVED = 16
SWEEP_ROUNDS = 60
#: Weight, relative to a picked cell's, on the open cells a sweep round does not pick ...
SWEEP_NUDGE_OPEN = 0.2
#: ... and on the cells that can still move that way, already at their bound.
SWEEP_NUDGE_REST = 0.05


def _one_per_relation(cols: sp.csc_matrix, open_: np.ndarray, rel_lists: list[list[int]] | None = None
                      ) -> np.ndarray:
    """Open cells (in index order, deterministic) such that no two share a relation.

    ``rel_lists``: each cell's relations as a Python list (:func:`_sweep` makes them once
    for all its rounds): plain list look-ups instead of two small numpy calls per open
    cell (5 -> 1 ms per round on 25x20x10's 2,400 open cells; the same picks).
    """
    if rel_lists is None:
        rel_lists = [r.tolist() for r in np.split(cols.indices, cols.indptr[1:-1])]
    taken = [False] * cols.shape[0]
    out = np.zeros(len(open_), dtype=bool)
    for j in np.flatnonzero(open_).tolist():
        r = rel_lists[j]
        if not any(taken[x] for x in r):
            for x in r:
                taken[x] = True
            out[j] = True
    return out


def _sweep(eng: IntervalEngine, best_lo: np.ndarray, best_hi: np.ndarray, lo_bound: np.ndarray,
           hi_bound: np.ndarray, tol: np.ndarray, tick: Ticker) -> None:
    """Reach many proved bounds at once: one LP pushes every open cell towards its bound.

    On a large count table the attacker's extremes are nearly all the bounds a single
    relation proves (all 2,238 of the 300×100 table's), each reached by a short cycle
    of hidden cells; one LP maximising the sum of the open cells' normalised
    deviations reaches a large share of them together.  Its points are attained
    deviations, so this only narrows what the per-cell LPs must still decide:
    exactness does not depend on it.

    Each round pushes at most one open cell per relation (:func:`_one_per_relation`):
    two cells of one relation compete for the same room (both going up needs the
    others down), and an LP pushing every open cell ends at a vertex where few reach
    their bound.  Measured: 25×20×10 intervals 3.5 → 1.3 s (16 sweeps instead of 29),
    50×40×10 21 → 14 s, 300×100 0.9 → 0.8 s; the same intervals.

    The other cells that can move that way get a small share of the push
    (:data:`SWEEP_NUDGE_OPEN`, :data:`SWEEP_NUDGE_REST`; only cells with a finite
    proved bound, so the LP stays bounded).  Without it most cells have no cost, the
    optimal face is large and the crossover from the interior point wanders across it
    (650-1,400 iterations, half of a sweep); with it the optimum is nearly a single
    vertex (a few crossover iterations) and open cells left out of a round often reach
    their bound too.  Measured on 25×20×10: the sweeps 1.19 → 0.73 s.
    """
    cols = eng.A.tocsc()
    rel_lists = [r.tolist() for r in np.split(cols.indices, cols.indptr[1:-1])]
    for sense, best, bound in ((1, best_hi, hi_bound), (-1, best_lo, lo_bound)):
        for _ in range(SWEEP_ROUNDS):
            tick("audit: computing intervals", None)
            finite = np.isfinite(bound)
            open_ = finite & (sense * (np.where(finite, bound, 0.0) - best) > tol)
            n_open = int(open_.sum())
            if n_open == 0:
                break
            pick = _one_per_relation(cols, open_, rel_lists)
            movable = finite & (sense * np.where(finite, bound, 0.0) > tol)
            scale = sense / np.maximum(np.abs(np.where(movable, bound, 1.0)), 1e-9)
            w = np.where(open_, SWEEP_NUDGE_OPEN * scale, np.where(movable, SWEEP_NUDGE_REST * scale, 0.0))
            w[pick] = scale[pick]
            x = eng.sweep(w)
            if x is None:
                break
            np.maximum(best_hi, x, out=best_hi)
            np.minimum(best_lo, x, out=best_lo)
            proved = int((open_ & (sense * (np.where(finite, bound, 0.0) - best) <= tol)).sum())
            if proved < SWEEP_MIN_PROVED:
                break


def intervals(P: Problem, hidden: np.ndarray, tick: Ticker | None = None, seeds: list[Flow] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Exact attacker interval (lower, upper) of every hidden cell; NaN for published ones.

    One warm-started LP per cell and direction, skipped when a point already found
    reaches a bound proved by a single relation (or the a-priori bound).  Points come
    from the LPs solved so far, from ``seeds`` (certificates: feasible deviations
    whose support is hidden) and from moving every hidden cell to its a-priori lower
    bound, when that balances every relation (e.g. everything hidden).  When scaling
    every hidden cell up balances them too, it is a ray: cells without an upper bound
    are then unbounded above without an LP.
    """
    tick = tick or Ticker(None)
    hidden = np.asarray(hidden, dtype=bool)
    H = np.flatnonzero(hidden)
    lower = np.full(P.n, np.nan)
    upper = np.full(P.n, np.nan)
    if len(H) == 0:
        return lower, upper
    lo_bound, hi_bound = propagated_bounds(P.Mc, H, P.L, P.U)
    eng = IntervalEngine(P.Mc, H, P.L, P.U)
    n = len(H)
    best_lo = np.zeros(n)
    best_hi = np.zeros(n)
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    tol = 1e-7 * np.maximum(np.abs(P.a[H]), 1.0)
    pos = np.full(P.n, -1, dtype=np.int64)
    pos[H] = np.arange(n)
    # a certificate stretched as far as the ranges allow, both ways, is still a
    # feasible deviation: free points that often reach a cell's proved bound
    _seed(seeds or [], pos, P.L, P.U, best_lo, best_hi)
    # (published cells stay at 0 in both; M·v = 0 is checked on every relation)
    sub = P.Mc[:, H]
    floor = -P.L[H]
    if np.isfinite(floor).all() and np.abs(sub @ floor).max(initial=0.0) <= 1e-9 * max(1.0, np.abs(floor).max()):
        np.minimum(best_lo, floor, out=best_lo)
    ray = P.a[H]
    if (np.isinf(P.U[H]).all() and ((ray >= 0) | np.isinf(P.L[H])).all()
            and np.abs(sub @ ray).max(initial=0.0) <= 1e-9 * max(1.0, np.abs(ray).max())):
        up = ray > 0
        best_hi[up] = np.inf
        hi_bound = np.where(up, np.inf, hi_bound)
    if n >= SWEEP_MIN_HIDDEN:
        _sweep(eng, best_lo, best_hi, lo_bound, hi_bound, tol, tick)
    for j in range(n):
        tick("audit: computing intervals", j / n)
        for sense in (1, -1):
            if sense == 1:
                if best_hi[j] >= hi_bound[j] - tol[j]:
                    hi[j] = hi_bound[j]
                    continue
            else:
                if best_lo[j] <= lo_bound[j] + tol[j]:
                    lo[j] = lo_bound[j]
                    continue
            val, x = eng.extreme(j, sense)
            if x is not None:
                np.maximum(best_hi, x, out=best_hi)
                np.minimum(best_lo, x, out=best_lo)
            if np.isnan(val):  # every LP method failed: the farthest point found (attained)
                val = best_hi[j] if sense == 1 else best_lo[j]
            if sense == 1:
                hi[j] = val
            else:
                lo[j] = val
    lower[H] = P.a[H] + lo
    upper[H] = P.a[H] + hi
    # clean LP noise on whole-number tables
    return lower, upper
