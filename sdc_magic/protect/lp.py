"""The attacker's linear programs, solved with HiGHS (``highspy``).

Everything here works on *deviations* ``f = y − a`` from the true cell values: a
pattern is safe for a primary k upwards when some ``f`` with ``M·f = 0``,
``−L ≤ f ≤ U`` (L = a − lower bound, U = upper bound − a) and ``f = 0`` on published
cells reaches ``f_k ≥ UPL_k``.  Such an ``f`` is a *certificate*: anybody can check it
with a matrix product, without trusting a solver.  Working on deviations keeps the
right-hand sides at 0, so a certificate stays valid when more cells are hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

INF = highspy.kHighsInf
FEAS_TOL = 1e-7


def new_highs(*, warm: bool = False) -> highspy.Highs:
    """A silent, single-threaded, seeded HiGHS instance (deterministic results)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    # presolve costs far more than it saves on these flat network-like LPs (seconds
    # against a tenth of a second on a 30,000-cell table)
    h.setOptionValue("presolve", "off")
    if warm:
        # repeated re-solves after a cost change: primal simplex from the last basis
        h.setOptionValue("simplex_strategy", 4)
    return h


def _inf(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, INF)


def pass_lp(h: highspy.Highs, A: sp.spmatrix, cost: np.ndarray, col_lo: np.ndarray, col_hi: np.ndarray,
            row_lo: np.ndarray, row_hi: np.ndarray) -> None:
    lp = highspy.HighsLp()
    A = sp.csc_matrix(A)
    A.sort_indices()
    lp.num_col_ = A.shape[1]
    lp.num_row_ = A.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.where(np.isfinite(col_lo), col_lo, -INF)
    lp.col_upper_ = _inf(np.asarray(col_hi, dtype=float))
    lp.row_lower_ = np.where(np.isfinite(row_lo), row_lo, -INF)
    lp.row_upper_ = _inf(np.asarray(row_hi, dtype=float))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(float)
    h.passModel(lp)


@dataclass
class Flow:
    """A sparse certificate: deviations ``val`` on cells ``idx`` (sorted)."""

    idx: np.ndarray
    val: np.ndarray

    def at(self, cells: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.idx, cells)
        pos = np.minimum(pos, max(len(self.idx) - 1, 0))
        if len(self.idx) == 0:
            return np.zeros(len(cells))
        return np.where(self.idx[pos] == cells, self.val[pos], 0.0)


def flow_lp(
    Mc: sp.csc_matrix,
    allowed: np.ndarray,
    L: np.ndarray,
    U: np.ndarray,
    req_k: np.ndarray,
    req_sign: np.ndarray,
    req_amt: np.ndarray,
    w_up: np.ndarray | None = None,
    w_dn: np.ndarray | None = None,
) -> tuple[np.ndarray, Flow | None]:
    """One deviation ``f`` on ``allowed`` cells meeting as many requirements as possible.

    Requirement j asks ``sign_j · f[k_j] ≥ amt_j``.  Phase 1 minimises the normalised
    shortfall (an elastic LP is always feasible, so a batch of conflicting requirements
    still yields the largest satisfiable part); phase 2 keeps the satisfied ones exact
    and minimises ``Σ w_up·f⁺ + w_dn·f⁻`` (the cost of the cells the flow touches when
    the flow is a cover proposal, or a small weight that keeps certificates sparse).

    Returns (satisfied mask, flow or None when nothing is satisfied).  For one
    requirement the answer is exact: unsatisfied means the attacker's max (or min)
    does not reach the level with these cells hidden.
    """
    allowed = np.asarray(allowed, dtype=np.int64)
    nA = len(allowed)
    r = len(req_k)
    sub = Mc[:, allowed]
    keep_rows = np.flatnonzero(np.diff(sub.tocsr().indptr) > 0)
    sub = sub.tocsr()[keep_rows].tocsc()
    pos = np.searchsorted(allowed, req_k)
    if np.any(pos >= nA) or np.any(allowed[np.minimum(pos, nA - 1)] != req_k):
        raise AssertionError("a requirement's cell is not among the allowed cells")
    R = sp.csc_matrix((req_sign.astype(float), (np.arange(r), pos)), shape=(r, nA))
    top = sp.hstack([sub, -sub, sp.csc_matrix((sub.shape[0], r))])
    bottom = sp.hstack([R, -R, sp.identity(r, format="csc")])
    A = sp.vstack([top, bottom]).tocsc()
    Ua = U[allowed]
    La = L[allowed]
    col_lo = np.zeros(2 * nA + r)
    col_hi = np.concatenate([Ua, La, np.full(r, np.inf)])
    target = req_amt * (1 + 1e-9) + 1e-12
    row_lo = np.concatenate([np.zeros(sub.shape[0]), target])
    row_hi = np.concatenate([np.zeros(sub.shape[0]), np.full(r, np.inf)])
    cost1 = np.concatenate([np.zeros(2 * nA), 1.0 / np.maximum(req_amt, 1e-12)])
    h = new_highs()
    pass_lp(h, A, cost1, col_lo, col_hi, row_lo, row_hi)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS could not solve a flow LP: {h.modelStatusToString(h.getModelStatus())}")
    x = np.asarray(h.getSolution().col_value)
    slack = x[2 * nA:]
    sat = slack <= FEAS_TOL * np.maximum(req_amt, 1.0)
    if not sat.any():
        return sat, None
    # phase 2: satisfied requirements exact, unsatisfied ones released; minimise weights
    s_idx = np.arange(2 * nA, 2 * nA + r, dtype=np.int32)
    hi = np.where(sat, 0.0, INF)
    h.changeColsBounds(r, s_idx, np.zeros(r), hi)
    wu = np.ones(nA) if w_up is None else w_up
    wd = np.ones(nA) if w_dn is None else w_dn
    cost2 = np.concatenate([wu, wd, np.zeros(r)])
    h.changeColsCost(len(cost2), np.arange(len(cost2), dtype=np.int32), cost2)
    h.run()
    if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
        x = np.asarray(h.getSolution().col_value)
    f = x[:nA] - x[nA:2 * nA]
    # check the certificate ourselves (HiGHS tolerances are relative)
    val = f[pos] * req_sign
    sat = sat & (val >= req_amt * (1 - 1e-6) - 1e-9)
    tol = 1e-9 * np.maximum(np.abs(Ua) + np.abs(La), 1.0)
    tol = np.where(np.isfinite(tol), tol, 1e-9)
    nz = np.abs(f) > tol
    flow = Flow(allowed[nz], f[nz])
    return sat, flow


class IntervalEngine:
    """Min and max of single cells over the attacker's polytope, with warm starts.

    Variables are the deviations of ``cells`` (hidden cells); every other cell is fixed.
    """

    def __init__(self, Mc: sp.csc_matrix, cells: np.ndarray, L: np.ndarray, U: np.ndarray) -> None:
        self.cells = np.asarray(cells, dtype=np.int64)
        sub = Mc[:, self.cells].tocsr()
        keep = np.flatnonzero(np.diff(sub.indptr) > 0)
        self.A = sub[keep]
        self.L = L[self.cells]
        self.U = U[self.cells]
        self.h = new_highs(warm=True)
        n = len(self.cells)
        pass_lp(self.h, self.A, np.zeros(n), -self.L, self.U, np.zeros(len(keep)), np.zeros(len(keep)))
        self.h.run()
        self.n = n

    def extreme(self, j: int, sense: int) -> tuple[float, np.ndarray | None]:
        """max (sense=+1) or min (sense=−1) of the deviation of local variable j.

        Returns (value, solution) — value ±inf when unbounded.
        """
        h = self.h
        h.changeColCost(int(j), -float(sense))
        h.run()
        status = h.getModelStatus()
        h.changeColCost(int(j), 0.0)
        if status == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(h.getSolution().col_value)
            return float(x[j]), x
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return float(sense) * np.inf, None
        # retry cold (rare numerical trouble)
        h.clearSolver()
        h.changeColCost(int(j), -float(sense))
        h.run()
        status = h.getModelStatus()
        h.changeColCost(int(j), 0.0)
        if status == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(h.getSolution().col_value)
            return float(x[j]), x
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return float(sense) * np.inf, None
        raise RuntimeError(f"HiGHS failed on an attacker LP: {h.modelStatusToString(status)}")


def propagated_bounds(Mc: sp.csc_matrix, cells: np.ndarray, L: np.ndarray, U: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Cheap valid bounds on each hidden deviation from single relations.

    From ``Σ c_j f_j = 0`` and the other cells' ranges.  Used only to recognise, without
    an LP, that a point already found is extreme.
    """
    cells = np.asarray(cells, dtype=np.int64)
    A = Mc[:, cells].tocsr()
    Lc, Uc = L[cells], U[cells]
    lo_best = -Lc.copy()
    hi_best = Uc.copy()
    coo = A.tocoo()
    c = coo.data
    j = coo.col
    # g_j: max of −c_j f_j ; h_j: max of c_j f_j
    g = np.where(c > 0, c * Lc[j], -c * Uc[j])
    hh = np.where(c > 0, c * Uc[j], -c * Lc[j])
    nrow = A.shape[0]

    def row_sums(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fin = np.isfinite(v)
        s = np.bincount(coo.row, weights=np.where(fin, v, 0.0), minlength=nrow)
        ninf = np.bincount(coo.row, weights=(~fin).astype(float), minlength=nrow)
        return s, ninf

    gs, gi = row_sums(g)
    hs, hi = row_sums(hh)
    # c_i f_i ≤ G_r − g_i ; c_i f_i ≥ −(H_r − h_i)
    g_rest = np.where(np.isfinite(g), gs[coo.row] - g, gs[coo.row])
    g_rest_inf = gi[coo.row] - (~np.isfinite(g)) > 0
    h_rest = np.where(np.isfinite(hh), hs[coo.row] - hh, hs[coo.row])
    h_rest_inf = hi[coo.row] - (~np.isfinite(hh)) > 0
    up_from_g = np.where(g_rest_inf, np.inf, g_rest / np.abs(c))  # bound on c_i f_i / |c_i|
    up_from_h = np.where(h_rest_inf, np.inf, h_rest / np.abs(c))
    # c>0: f ≤ up_from_g, f ≥ −up_from_h ; c<0: f ≥ −up_from_g, f ≤ up_from_h
    ub = np.where(c > 0, up_from_g, up_from_h)
    lb = np.where(c > 0, -up_from_h, -up_from_g)
    np.minimum.at(hi_best, j, ub)
    np.maximum.at(lo_best, j, lb)
    return lo_best, hi_best
