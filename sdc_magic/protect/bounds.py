"""Bounds on the attacker's deviations by propagation over the relations, without an LP.

Every relation says ``Σ c_j f_j = 0`` over its hidden cells (published cells do not move).
Given ranges ``−L_j ≤ f_j ≤ U_j``, each relation bounds each of its cells by the others'
ranges; a tightened range tightens the other relations through that cell, and so on
(interval constraint propagation, the bound tightening every MIP presolver performs:
Savelsbergh, *ORSA J. Computing* 6, 1994; Achterberg et al., *INFORMS J. Computing* 32, 2020).

The bounds are *outer* bounds: every deviation the attacker LP can reach lies inside them,
so a bound below a primary's protection level proves that no certificate exists. Each pass
rounds outwards (by a bound on its floating-point error), so they stay outer bounds in
floating point too, whatever the magnitudes a relation mixes. The
protection uses that proof only to say "no" sooner — a clean-up trial rejected without
the LPs that would fail it (``heuristic.cleanup``), requirements failing on the
primaries-only pattern (``audit``), an extreme already reached (``attacker_intervals``) —
never to say "yes": a certificate is always an explicit deviation checked by a matrix
product.

Why iterate: on the seed table a single pass proved 8 of the 40 rejected clean-up trials;
propagating to a fixed point proved 31, each in about a millisecond, where the LPs took
17 solves per rejected trial.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: At most this many passes over the relations (the bounds usually settle in 3 to 10);
#: a count of passes, not a time, so the same pattern always gets the same bounds.
MAX_ROUNDS = 30
_EPS = float(np.finfo(float).eps)


def short_of(room: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Where a proved bound on the room to move (``room``) falls short of the protection level.

    With a margin of 10^-6 of the level, wider than the tolerances a certificate is checked
    with and than the rounding the passes accumulate: a shortfall within it is left to the LPs,
    so a "no" from the bounds is never one an LP would contradict.
    """
    return room < level * (1 - 1e-6) - 1e-6 * np.maximum(level, 1.0)


def propagated_bounds(Mc: sp.csc_matrix, cells: np.ndarray, L: np.ndarray, U: np.ndarray,
                      rounds: int = 1, start: tuple[np.ndarray, np.ndarray] | None = None,
                      coo: sp.coo_matrix | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Valid bounds (lo, hi) on the deviation of each of ``cells`` (the hidden cells), in their order.

    ``L`` / ``U`` (one entry per cell of the table, ``inf`` when unbounded) are how far each
    cell may move down / up. ``rounds`` passes over the relations: 1 uses each relation
    once with the a-priori ranges; more feed each pass's bounds into the next until none
    tightens (or :data:`MAX_ROUNDS`).

    ``start``: bounds already proved for a looser attacker (one with wider ranges, e.g. the
    outsider when ``L``/``U`` are an insider's), met with ``L``/``U`` before the first pass:
    every deviation this attacker can reach is one the looser attacker could, so they are
    outer bounds here too, and the passes start near the fixed point instead of from scratch.
    ``coo``: ``Mc[:, cells]`` as a COO matrix, when the caller has it already.
    """
    cells = np.asarray(cells, dtype=np.int64)
    if coo is None:
        coo = Mc[:, cells].tocoo()
    lo = -np.asarray(L, dtype=float)[cells]
    hi = np.asarray(U, dtype=float)[cells].copy()
    if start is not None:
        lo = np.maximum(lo, start[0])
        hi = np.minimum(hi, start[1])
    return bounds_per_scenario(coo, lo, hi, rounds)  # (one attacker: the passes take 1-D ranges too)


def bounds_per_scenario(coo: sp.coo_matrix, lo: np.ndarray, hi: np.ndarray, rounds: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`propagated_bounds` for many attackers at once: one row of (lo, hi) per attacker
    (or one 1-D range per cell: one attacker, as :func:`propagated_bounds` calls it).

    ``coo`` is ``Mc[:, cells]``; ``lo`` / ``hi`` (attackers × cells) their starting ranges
    (outer bounds already, e.g. the outsider's fixed point met with each insider's range).
    Why together: each pass is a dozen numpy operations whatever the table's size, so one
    pass over twenty stacked insiders costs about what one insider's did (a clean-up trial
    asks up to twenty). Passes go on while any row tightens; a pass at a row's fixed point
    leaves it as it is, so every row gets bounds at least as tight as alone, and as valid.
    """
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    for _ in range(max(1, min(int(rounds), MAX_ROUNDS))):
        new_lo, new_hi = _one_pass(coo, lo, hi)
        moved = _tightened(lo, new_lo) | _tightened(-hi, -new_hi)
        lo, hi = new_lo, new_hi
        if not moved.any():
            break
    return lo, hi


def _tightened(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Where a lower bound rose by more than rounding (from −inf to a number counts)."""
    with np.errstate(invalid="ignore"):
        # (−inf − −inf is NaN, which compares False: no gain)
        return (new - old) > 1e-9 * np.maximum(np.abs(np.where(np.isfinite(new), new, 0.0)), 1.0)


def _one_pass(coo: sp.coo_matrix, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each relation's bound on each of its cells from the others' ranges, met with (lo, hi).

    ``lo`` / ``hi`` are one range per cell (1-D) or a stack of them, one row per attacker
    (2-D, see :func:`bounds_per_scenario`): the same arithmetic on every row at once.
    """
    stacked = lo.ndim == 2
    lo2 = lo if stacked else lo[None, :]
    hi2 = hi if stacked else hi[None, :]
    n_scen, m = lo2.shape
    c = coo.data
    j = coo.col
    nrow = coo.shape[0]
    # every scenario's relations numbered apart: (scenario, relation) -> scenario·nrow + relation
    rows = (coo.row[None, :] + nrow * np.arange(n_scen)[:, None]).ravel()
    lo_best = lo2.copy()
    hi_best = hi2.copy()
    # g: the largest value of −c_j f_j ; h: the largest value of c_j f_j
    pos = c > 0
    g = np.where(pos, -c * lo2[:, j], -c * hi2[:, j]).ravel()
    h = np.where(pos, c * hi2[:, j], c * lo2[:, j]).ravel()
    c_all = np.broadcast_to(c, (n_scen, len(c))).ravel()
    pos_all = np.broadcast_to(pos, (n_scen, len(c))).ravel()

    def row_sums(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fin = np.isfinite(v)
        s = np.bincount(rows, weights=np.where(fin, v, 0.0), minlength=n_scen * nrow)
        n_inf = np.bincount(rows, weights=(~fin).astype(float), minlength=n_scen * nrow)
        return s, n_inf

    gs, gi = row_sums(g)
    hs, hi_inf = row_sums(h)
    # c_i f_i = −Σ_{j≠i} c_j f_j, so c_i f_i ≤ G_r − g_i and c_i f_i ≥ −(H_r − h_i)
    g_fin = np.isfinite(g)
    h_fin = np.isfinite(h)
    g_rest = np.where(g_fin, gs[rows] - np.where(g_fin, g, 0.0), gs[rows])
    g_rest_inf = gi[rows] - (~g_fin) > 0
    h_rest = np.where(h_fin, hs[rows] - np.where(h_fin, h, 0.0), hs[rows])
    h_rest_inf = hi_inf[rows] - (~h_fin) > 0
    # rounding, outwards: a row's sums and the subtraction of one term are off by at most
    # (terms + 2)·eps·(Σ|terms|) (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2),
    # which is large beside a small cell when a huge one shares its relation (4.8e13 and 31.3:
    # 31.3125 where the exact bound is 31.3138, a false "no"); the division adds eps of the bound
    terms = np.bincount(coo.row, minlength=nrow)
    terms_all = np.tile(terms, n_scen)
    size = np.bincount(rows, weights=np.where(g_fin, np.abs(g), 0.0) + np.where(h_fin, np.abs(h), 0.0),
                       minlength=n_scen * nrow)
    ac = np.abs(c_all)
    slack = (4.0 * _EPS) * (terms_all[rows] + 2) * size[rows] / ac
    up_from_g = np.where(g_rest_inf, np.inf, g_rest / ac)  # bound on c_i f_i / |c_i|
    up_from_h = np.where(h_rest_inf, np.inf, h_rest / ac)
    up_from_g = up_from_g + slack + (4.0 * _EPS) * np.abs(up_from_g)
    up_from_h = up_from_h + slack + (4.0 * _EPS) * np.abs(up_from_h)
    # c > 0: f ≤ up_from_g, f ≥ −up_from_h ; c < 0: f ≥ −up_from_g, f ≤ up_from_h
    ub = np.where(pos_all, up_from_g, up_from_h)
    lb = np.where(pos_all, -up_from_h, -up_from_g)
    at = (j[None, :] + m * np.arange(n_scen)[:, None]).ravel()
    np.minimum.at(hi_best.reshape(-1), at, ub)
    np.maximum.at(lo_best.reshape(-1), at, lb)
    if stacked:
        return lo_best, hi_best
    return lo_best[0], hi_best[0]
