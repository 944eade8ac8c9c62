"""The attacker's linear programs, solved with HiGHS (``highspy``).

Everything here works on *deviations* ``f = y − a`` from the true cell values: a
pattern is safe for a primary k upwards when some ``f`` with ``M·f = 0``,
``−L ≤ f ≤ U`` (L = a − lower bound, U = upper bound − a) and ``f = 0`` on published
cells reaches ``f_k ≥ UPL_k``.  Such an ``f`` is a *certificate*: anybody can check it
with a matrix product, without trusting a solver.  Working on deviations keeps the
right-hand sides at 0, so a certificate stays valid when more cells are hidden.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

INF = highspy.kHighsInf
FEAS_TOL = 1e-7

_BANNER_LOCK = threading.Lock()
_banner_done = False


@contextlib.contextmanager
def _fds_to_devnull() -> Iterator[None]:
    """Point the process's stdout and stderr file descriptors at /dev/null for a moment.

    The HiGHS banner is written by C code straight to file descriptor 1, which a
    notebook kernel forwards to the cell's output; ``sys.stdout`` redirection cannot
    catch it.  C stdio buffers are flushed before the descriptors are put back.
    """
    try:
        libc = ctypes.CDLL(None)
        flush = libc.fflush
    except (OSError, AttributeError):  # not a POSIX libc: nothing better to do
        flush = None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved: list[int] = []
    null = -1
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved.append(os.dup(fd))
            os.dup2(null, fd)
    except OSError:
        pass
    try:
        yield
    finally:
        if flush is not None:
            flush(None)
        for fd, old in zip((1, 2), saved, strict=False):
            os.dup2(old, fd)
            os.close(old)
        if null >= 0:
            os.close(null)


def quiet_highs() -> None:
    """Swallow the banner HiGHS prints when the first ``Highs`` of the process is made.

    HiGHS writes "Running HiGHS … Copyright …" from its constructor, before any option
    can be set, once per process.  Making that first instance here with the output
    descriptors pointed at /dev/null keeps it out of the user's notebook; every later
    instance (ours, or PuLP's with ``msg=False``) is silent by its options.
    """
    global _banner_done
    if _banner_done:
        return
    with _BANNER_LOCK:
        if _banner_done:
            return
        with _fds_to_devnull():
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
        _banner_done = True


def new_highs(*, warm: bool = False) -> highspy.Highs:
    """A silent, single-threaded, seeded HiGHS instance (deterministic results)."""
    quiet_highs()
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


#: Above this magnitude the LPs are solved in scaled units (see :func:`lp_scale`).
SCALE_ABOVE = 1e6
#: Cost weights are clipped to this ratio of the largest one (they only keep
#: certificates small; a range of 1e12 between them stalls the simplex).
WEIGHT_RANGE = 1e7
#: Basis statuses (columns and rows) an attacker model keeps in all, for :meth:`Attacker.reach`'s
#: warm starts per question: a few megabytes, some 2,000 bases of a 1,000-column model.
KEPT_BASES = 4_000_000
_DEFINITE = (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kInfeasible,
             highspy.HighsModelStatus.kUnbounded)


def lp_scale(L: np.ndarray, U: np.ndarray) -> float:
    """A power of two σ; the LPs work on ``σ·f`` instead of the deviations f.

    Cell values of 10^4–10^12 (sums behind means, turnover in euros) put bounds of
    10^11 next to HiGHS's absolute tolerances of 10^-7 and made warm and cold solves
    end "Unknown" or falsely "Infeasible" (issue 12, ACRO's mean table).  Scaling by a
    power of two is exact in binary floating point (certificates scale back without
    rounding) and brings the largest finite bound to at most :data:`SCALE_ABOVE`,
    without pushing the median bound below 1.  Tables with smaller values keep σ = 1.
    """
    b = np.concatenate([np.asarray(L, dtype=float), np.asarray(U, dtype=float)])
    b = b[np.isfinite(b) & (b > 0)]
    if len(b) == 0:
        return 1.0
    top = float(b.max())
    if top <= SCALE_ABOVE:
        return 1.0
    e = int(np.ceil(np.log2(top / SCALE_ABOVE)))
    e = max(0, min(e, int(np.floor(np.log2(max(float(np.median(b)), 1.0))))))
    return float(2.0 ** -e)


def clip_weights(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=float)
    top = float(w.max()) if len(w) else 0.0
    if top <= 0:
        return w
    return np.where(w > 0, np.maximum(w, top / WEIGHT_RANGE), w)


def _option(h: highspy.Highs, name: str) -> object:
    got = h.getOptionValue(name)
    return got[1] if isinstance(got, tuple) else got  # highspy returns (status, value)


_WORK = threading.local()


class WorkLimit(Exception):
    """The search's work budget is spent (raised by the ticker's loops or inside an LP)."""


#: Simplex iterations per CPU second measured on the benchmark tables (see :func:`work_done`):
#: the exchange rate from a budget given in nominal seconds to work units, never a clock.
ITERATIONS_PER_SECOND = 45_000


def set_budget(iterations: float) -> None:
    """Every LP this thread solves from now on shares ``iterations`` simplex iterations (inf: none).

    Why a count and not a deadline: the same table must get the same pattern on a laptop and
    on a busy shared server (issue 21). HiGHS is single-threaded and seeded here, so the
    iterations an LP takes are the same on any machine; a budget in them cuts the search at
    the same point everywhere. Each solve gets the iterations left as its
    ``simplex_iteration_limit`` and raises :class:`WorkLimit` when it reaches it.
    """
    _WORK.end = work_done() + float(iterations) if np.isfinite(iterations) else np.inf


def budget_spent() -> bool:
    """True once this thread's LPs have used the budget of :func:`set_budget`."""
    return work_done() >= getattr(_WORK, "end", np.inf)


_NO_LIMIT = 2**31 - 1


def _arm(h: highspy.Highs) -> None:
    end = getattr(_WORK, "end", np.inf)
    if not np.isfinite(end):
        limit = _NO_LIMIT  # no budget (the final audit and intervals run to the end)
    else:
        left = end - work_done()
        if left <= 0:
            raise WorkLimit("work budget spent before an LP")
        limit = max(int(min(left, _NO_LIMIT)), 1)
    if getattr(h, "_sdc_iteration_limit", None) != limit:
        h.setOptionValue("simplex_iteration_limit", limit)
        h._sdc_iteration_limit = limit


def _solve(h: highspy.Highs) -> highspy.HighsModelStatus:
    h.run()
    _count(h)
    status = h.getModelStatus()
    if status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit):
        raise WorkLimit("work budget spent in an LP")
    return status


def work_done() -> int:
    """Simplex (and interior point) iterations solved by this thread so far.

    The search's budgets are counted in these deterministic work units: about 45,000
    per CPU second on the benchmark tables (counts and the ACRO mean table alike), and
    the same count for the same table on any machine load.
    """
    return int(getattr(_WORK, "iterations", 0))


def charge(iterations: float) -> None:
    """Count work done outside this module's LPs, in the same units, against this thread's budget.

    Why: a budget must bound all of the search's work, and the MIP's master problem is solved
    by HiGHS's branch and bound through PuLP, whose LPs :func:`_count` never sees (the 3-level
    hierarchy benchmark spent 115 of 131 CPU s there with ``time_limit=60``). The caller converts
    what it did into iterations of the attacker LPs (:mod:`.mip`, ``MASTER_ITERATION_WORK``); a
    count, never a clock.
    """
    _WORK.iterations = work_done() + max(int(iterations), 0)


def _count(h: highspy.Highs) -> None:
    info = h.getInfo()
    _WORK.iterations = work_done() + max(int(info.simplex_iteration_count), 0) + max(int(info.ipm_iteration_count), 0)


def run_robust(h: highspy.Highs) -> highspy.HighsModelStatus:
    """Solve; on an indefinite status retry cold, then with other algorithms.

    The ladder (each step slower and more careful): warm start; cold start (basis
    dropped); dual simplex with presolve; interior point with crossover.  The
    options are put back afterwards.  Returns the first definite status (optimal,
    infeasible, unbounded) or the last one.
    """
    _arm(h)
    status = _solve(h)
    if status in _DEFINITE:
        return status
    h.clearSolver()
    status = _solve(h)
    if status in _DEFINITE:
        return status
    for opts in ({"presolve": "on", "simplex_strategy": 1}, {"presolve": "on", "solver": "ipm"}):
        old = {k: _option(h, k) for k in opts}
        try:
            for k, v in opts.items():
                h.setOptionValue(k, v)
            h.clearSolver()
            status = _solve(h)
        finally:
            for k, v in old.items():
                h.setOptionValue(k, v)
        if status in _DEFINITE:
            return status
    return status


def _inf(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, INF)


def _inf1(x: float) -> float:
    return float(x) if np.isfinite(x) else INF


def pass_lp(h: highspy.Highs, A: sp.spmatrix, cost: np.ndarray, col_lo: np.ndarray, col_hi: np.ndarray,
            row_lo: np.ndarray, row_hi: np.ndarray) -> None:
    """Give HiGHS a column-wise LP (minimise), passing numpy arrays straight through.

    Why not a ``HighsLp`` object: assigning its vector fields converts every array
    element by element through Python (0.7 ms for a 2,000-column LP against 0.08 ms
    here), which was a fifth of the cost of each of the thousands of small local
    attacker LPs of a large audit.  The model is the same, so are the answers.
    """
    A = sp.csc_matrix(A)
    A.sort_indices()
    n_col, n_row = A.shape[1], A.shape[0]
    status = h.passModel(
        int(n_col), int(n_row), int(A.nnz), int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize),
        0.0,
        np.ascontiguousarray(cost, dtype=float),
        np.ascontiguousarray(np.where(np.isfinite(col_lo), col_lo, -INF), dtype=float),
        np.ascontiguousarray(_inf(np.asarray(col_hi, dtype=float)), dtype=float),
        np.ascontiguousarray(np.where(np.isfinite(row_lo), row_lo, -INF), dtype=float),
        np.ascontiguousarray(_inf(np.asarray(row_hi, dtype=float)), dtype=float),
        np.ascontiguousarray(A.indptr, dtype=np.int32),
        np.ascontiguousarray(A.indices, dtype=np.int32),
        np.ascontiguousarray(A.data, dtype=float),
        np.zeros(n_col, dtype=np.int32),  # every column continuous (HiGHS wants one entry per column)
    )
    if status == highspy.HighsStatus.kError:
        raise RuntimeError("HiGHS rejected an attacker LP model")


def skip_unit_scaling(h: highspy.Highs, A: sp.spmatrix) -> None:
    """Turn HiGHS's matrix scaling off when every coefficient is ±1 (a table's relations).

    Why: HiGHS scales the constraint matrix at every ``run()``; the scale factors of a
    matrix of ±1 entries are all 1, so the LP it solves is the same and so are its
    pivots and answers (checked on the seed table: the same 76,594 iterations and the same
    pattern), but working them out again cost 0.18 ms of the 0.6 ms a warm attacker LP
    costs (the clean-up of the seed table solves ~1,400 of them).  Any other
    coefficient keeps the default.
    """
    data = sp.csc_matrix(A).data
    if len(data) and bool(np.all(np.abs(data) == 1.0)):
        h.setOptionValue("simplex_scale_strategy", 0)


@dataclass
class Flow:
    """A sparse certificate: deviations ``val`` on cells ``idx`` (sorted)."""

    idx: np.ndarray
    val: np.ndarray
    #: what the audit derived from this certificate (it never changes): see audit.flow_requirements
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def value_at(self, cell: int) -> float:
        """The deviation at one cell (0 off the certificate): a dict look-up, built once.

        Why: the clean-up asks "does this certificate move k far enough?" tens of thousands of
        times per table (22,000 on ACRO's skewed layout); two numpy calls each cost 0.5 s there.
        """
        table = self.memo.get("value_of")
        if table is None:
            table = dict(zip(self.idx.tolist(), self.val.tolist(), strict=True))
            self.memo["value_of"] = table
        return table.get(int(cell), 0.0)

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
    sigma = lp_scale(La, Ua)
    col_lo = np.zeros(2 * nA + r)
    col_hi = np.concatenate([Ua, La, np.full(r, np.inf)]) * sigma
    target = (req_amt * (1 + 1e-9) + 1e-12) * sigma
    row_lo = np.concatenate([np.zeros(sub.shape[0]), target])
    row_hi = np.concatenate([np.zeros(sub.shape[0]), np.full(r, np.inf)])
    cost1 = np.concatenate([np.zeros(2 * nA), 1.0 / np.maximum(req_amt * sigma, 1e-12)])
    h = new_highs()
    pass_lp(h, A, cost1, col_lo, col_hi, row_lo, row_hi)
    if run_robust(h) != highspy.HighsModelStatus.kOptimal:
        # the elastic LP is always feasible (f = 0): an indefinite answer is numerical;
        # the callers then go requirement by requirement
        return np.zeros(r, dtype=bool), None
    x = np.asarray(h.getSolution().col_value) / sigma
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
    cost2 = np.concatenate([clip_weights(np.concatenate([wu, wd])) / sigma, np.zeros(r)])
    h.changeColsCost(len(cost2), np.arange(len(cost2), dtype=np.int32), cost2)
    if run_robust(h) == highspy.HighsModelStatus.kOptimal:
        x = np.asarray(h.getSolution().col_value) / sigma
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
        self.sigma = lp_scale(self.L, self.U)
        self.h = new_highs(warm=True)
        # only the objective changes between solves; without bound perturbation the
        # primal simplex needs ~10 % less time here (same optima, checked on the benchmarks)
        self.h.setOptionValue("primal_simplex_bound_perturbation_multiplier", 0.0)
        n = len(self.cells)
        pass_lp(self.h, self.A, np.zeros(n), -self.L * self.sigma, self.U * self.sigma,
                np.zeros(len(keep)), np.zeros(len(keep)))
        # no solve here: the first sweep (interior point, crossover) or extreme builds the
        # basis the later ones start from; a zero-cost solve first cost 1.8 s (5,740
        # iterations) on 50x40x10 for nothing
        self.n = n
        self.failed = 0

    def sweep(self, weights: np.ndarray) -> np.ndarray | None:
        """A point maximising ``Σ weights·f`` (None when not optimal): many extremes at once.

        Only a source of attained points (every one is a feasible deviation); the
        exact extremes still come from :meth:`extreme` for what it leaves unproved.
        """
        h = self.h
        idx = np.flatnonzero(weights).astype(np.int32)
        if not len(idx):
            return None
        h.changeColsCost(len(idx), idx, -np.asarray(weights, dtype=float)[idx])
        # the objective changes everywhere at once: the warm basis helps little and the
        # primal simplex crawls through a degenerate 3-D polytope (0.3 s per sweep on
        # 25x20x10); interior point with crossover ends on a vertex too, 4x faster there
        # (measured: 7.6 -> 1.8 s for the sweeps; 0.7 -> 0.6 s on 300x100)
        h.setOptionValue("solver", "ipm")
        try:
            status = run_robust(h)
        finally:
            h.setOptionValue("solver", "choose")
            h.changeColsCost(len(idx), idx, np.zeros(len(idx)))
        if status != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()
            return None
        return np.asarray(h.getSolution().col_value) / self.sigma

    def extreme(self, j: int, sense: int) -> tuple[float, np.ndarray | None]:
        """max (sense=+1) or min (sense=−1) of the deviation of local variable j.

        Returns (value, solution) — value ±inf when unbounded, NaN when every method
        of :func:`run_robust` failed (the caller then keeps the extreme point found so
        far: an attained value, so the interval it reports is never wider than the truth).
        """
        h = self.h
        h.changeColCost(int(j), -float(sense))
        try:
            status = run_robust(h)
        finally:
            h.changeColCost(int(j), 0.0)
        if status == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(h.getSolution().col_value) / self.sigma
            return float(x[j]), x
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return float(sense) * np.inf, None
        # f = 0 is always feasible: "infeasible" or "unknown" here is numerical trouble
        self.failed += 1
        h.clearSolver()
        return float("nan"), None


def column_residual(cols: sp.csc_matrix, idx: np.ndarray, val: np.ndarray) -> np.ndarray:
    """``cols[:, idx] @ val`` (every row) without scipy's column indexing.

    Why: checking each certificate of the clean-up's ~1,300 attacker LPs with scipy's
    fancy indexing cost 0.55 ms apiece, a tenth of the clean-up on the seed table.  The
    same products, summed per row column by column (``np.bincount``), so the same check.
    """
    idx = np.asarray(idx, dtype=np.int64)
    starts, ends = cols.indptr[idx], cols.indptr[idx + 1]
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(cols.shape[0])
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(total)
    return np.bincount(cols.indices[offsets], weights=cols.data[offsets] * np.repeat(val, counts),
                       minlength=cols.shape[0])


class Attacker:
    """One persistent deviation LP, re-solved from its last basis.

    Columns ``p`` (up) and ``m`` (down) per cell, ``f = p − m``, rows ``M·f = 0``; a
    cell's columns are fixed at 0 while it is published and bounded by its a-priori
    range (or an insider's tighter one) while hidden.  Patterns, insiders and
    requirements only change column bounds, so each solve starts from the previous
    optimal basis (dual simplex) instead of building a new model: that is what makes
    thousands of attacker LPs on a small table take a fraction of a second.

    With ``cells`` the model only has columns for those cells (every other cell is
    published, i.e. fixed at 0, so its columns and the relations that touch nothing
    else can be left out): an audit builds it over the hidden cells, a few thousand
    columns instead of the whole table's, and keeps it while cells are only published
    again (the clean-up).  Every method takes and returns whole-table indices.

    :meth:`reach` answers one requirement exactly (a certificate, or None when no
    alternative table moves the cell that far), minimising ``Σ w·|f|`` so that the
    certificate stays small.  With ``weights=None`` the model has no cost and
    :meth:`extreme` gives the attacker's best deviation and the reduced costs (for
    Benders cuts; whole-table models only).
    """

    def __init__(self, Mc: sp.csc_matrix, L: np.ndarray, U: np.ndarray, weights: np.ndarray | None = None,
                 cells: np.ndarray | None = None) -> None:
        self.n_all = Mc.shape[1]
        if cells is None:
            self.cells = np.arange(self.n_all)
            sub = sp.csc_matrix(Mc)
        else:
            self.cells = np.asarray(cells, dtype=np.int64)
            sub = Mc[:, self.cells].tocsr()
            sub = sub[np.flatnonzero(np.diff(sub.indptr) > 0)].tocsc()
        self.in_model = np.zeros(self.n_all, dtype=bool)
        self.in_model[self.cells] = True
        self.local = np.full(self.n_all, -1, dtype=np.int64)
        self.local[self.cells] = np.arange(len(self.cells))
        n = len(self.cells)
        self.n = n
        self.M = sp.csr_matrix(sub)
        #: the same relations by column, sorted: a certificate's residual from its columns alone
        self.cols = sp.csc_matrix(sub)
        self.cols.sort_indices()
        self.L = np.asarray(L, dtype=float)[self.cells]
        self.U = np.asarray(U, dtype=float)[self.cells]
        self.sigma = lp_scale(self.L, self.U)
        A = sp.hstack([sub, -sub]).tocsc()
        w = np.zeros(n) if weights is None else clip_weights(np.asarray(weights, dtype=float)[self.cells])
        # a cost-free model only needs a feasible point: primal simplex gets there from
        # the last one in fewer pivots than dual simplex (about half the time)
        self.h = new_highs(warm=not w.any())
        self.hi = np.zeros(2 * n)  # current upper bound of every column
        self.caps_L = self.L.copy()
        self.caps_U = self.U.copy()
        self.hidden = np.zeros(n, dtype=bool)
        nrow = sub.shape[0]
        pass_lp(self.h, A, np.concatenate([w, w]) / self.sigma, np.zeros(2 * n), self.hi, np.zeros(nrow),
                np.zeros(nrow))
        skip_unit_scaling(self.h, A)
        self.solves = 0
        #: optimal bases by question (see :meth:`reach`), oldest first
        self.bases: dict[Hashable, highspy.HighsBasis] = {}
        #: the model status of the last :meth:`reach` LP (None: no LP solved): only
        #: ``kInfeasible`` proves that no certificate exists
        self.last_status: highspy.HighsModelStatus | None = None

    def covers(self, hidden: np.ndarray) -> bool:
        """True when every hidden cell has columns here (the model can take this pattern)."""
        return not bool((np.asarray(hidden, dtype=bool) & ~self.in_model).any())

    # ---------------------------------------------------------------- bounds
    def _sync(self, cells: np.ndarray | None = None) -> None:
        if cells is None:
            cells = np.arange(self.n)
        want_p = np.where(self.hidden[cells], self.caps_U[cells], 0.0)
        want_m = np.where(self.hidden[cells], self.caps_L[cells], 0.0)
        cols = np.concatenate([cells, cells + self.n])
        want = np.concatenate([want_p, want_m])
        diff = want != self.hi[cols]
        if not diff.any():
            return
        cols, want = cols[diff], want[diff]
        self.hi[cols] = want
        self.h.changeColsBounds(len(cols), cols.astype(np.int32), np.zeros(len(cols)), _inf(want * self.sigma))

    def set_hidden(self, hidden: np.ndarray) -> None:
        hidden = np.asarray(hidden, dtype=bool)
        if not self.covers(hidden):
            raise ValueError("hidden cells outside this attacker model")
        hidden = hidden[self.cells]
        changed = np.flatnonzero(hidden != self.hidden)
        if len(changed):
            if (hidden[changed] & ~self.hidden[changed]).any():
                # a cell hidden again gets back an infinite bound a kept basis may sit
                # on: the kept bases are for patterns that only publish cells
                self.bases.clear()
            self.hidden = hidden.copy()
            self._sync(changed)

    def _restore(self, key: Hashable) -> None:
        """Start the next solve from the basis kept under ``key``, if any (see :meth:`reach`)."""
        basis = self.bases.get(key)
        if basis is not None and self.h.setBasis(basis) != highspy.HighsStatus.kOk:
            del self.bases[key]

    def _keep(self, key: Hashable) -> None:
        """Remember the optimal basis under ``key``; the oldest go beyond :data:`KEPT_BASES`."""
        self.bases.pop(key, None)
        self.bases[key] = self.h.getBasis()
        while len(self.bases) * (2 * self.n + self.M.shape[0]) > KEPT_BASES:
            self.bases.pop(next(iter(self.bases)))

    def set_caps(self, L: np.ndarray, U: np.ndarray) -> None:
        """A-priori ranges (an insider scenario changes one or two entries)."""
        L = np.asarray(L, dtype=float)[self.cells]
        U = np.asarray(U, dtype=float)[self.cells]
        changed = np.flatnonzero((self.caps_L != L) | (self.caps_U != U))
        if len(changed):
            self.caps_L = np.asarray(L, dtype=float).copy()
            self.caps_U = np.asarray(U, dtype=float).copy()
            self._sync(changed)

    def set_weights(self, w_up: np.ndarray, w_dn: np.ndarray) -> None:
        """Cost per unit of upward / downward deviation of every cell."""
        w = np.concatenate([np.asarray(w_up, dtype=float)[self.cells], np.asarray(w_dn, dtype=float)[self.cells]])
        if not hasattr(self, "w"):
            self.w = np.full(2 * self.n, np.nan)
        changed = np.flatnonzero(w != self.w)
        if len(changed):
            self.w = w.copy()
            wc = clip_weights(w) / self.sigma
            self.h.changeColsCost(len(changed), changed.astype(np.int32), wc[changed])

    def _run(self) -> highspy.HighsModelStatus:
        self.solves += 1
        return run_robust(self.h)

    # ---------------------------------------------------------------- queries
    def reach(self, k: int, sign: int, amt: float, *, basis_key: Hashable | None = None) -> Flow | None:
        """A certificate moving cell k by ``sign·amt`` (or more), or None when impossible.

        ``basis_key`` names this question (requirement and attacker): the LP then starts
        from the basis that answered it last time (:meth:`_restore`) instead of the last
        question's, which is a different certificate altogether.  The clean-up asks the
        same questions again with one more cell published, where the old basis is a few
        pivots away (measured on the seed table's questions that one published cell
        reopens: 15 against 70 iterations).  The answer is the same LP's: only where the
        simplex starts differs.
        """
        j = int(self.local[int(k)])
        if j < 0:
            return None  # published: it cannot move
        col = j if sign > 0 else j + self.n
        other = j + self.n if sign > 0 else j
        target = float(amt) * (1 + 1e-9) + 1e-12
        self.last_status = None
        if self.hi[col] < float(amt) * (1 - 1e-9) - 1e-12:
            return None
        target = min(target, float(self.hi[col]))  # a level may be exactly the a-priori room
        # the requirement is on f_k = p_k − m_k: the opposite column stays at 0 (else
        # p_k = m_k = amt would "meet" it with no deviation at all)
        idx = np.array([col, other], dtype=np.int32)
        sg = self.sigma
        self.h.changeColsBounds(2, idx, np.array([target * sg, 0.0]), np.array([_inf1(self.hi[col] * sg), 0.0]))
        try:
            if basis_key is not None:
                self._restore(basis_key)
            status = self._run()
            self.last_status = status
            x = np.asarray(self.h.getSolution().col_value) if status == highspy.HighsModelStatus.kOptimal else None
            if basis_key is not None and x is not None:
                self._keep(basis_key)
        finally:
            self.h.changeColsBounds(2, idx, np.zeros(2),
                                    np.array([_inf1(self.hi[col] * sg), _inf1(self.hi[other] * sg)]))
        if x is None:
            # infeasible: no certificate exists.  Any other status after every method of
            # run_robust: no certificate *found*, which the audit treats the same way
            # (the primary counts as unprotected, so more cells are hidden): never a
            # protection claimed without a checked certificate, never a crash.
            if status != highspy.HighsModelStatus.kInfeasible:
                self.failed = getattr(self, "failed", 0) + 1
                self.h.clearSolver()
            return None
        x = x / sg
        f = x[:self.n] - x[self.n:]
        return self._flow(f, j, sign, amt)

    def _flow(self, f: np.ndarray, k: int, sign: int, amt: float) -> Flow | None:
        # A basic column fixed at a bound (a published cell at 0, an insider's own cell)
        # may sit up to the solver's feasibility tolerance off it (4e-9 seen): put such
        # values on their bound before the checks below, which are unchanged.  Without
        # this an optimal LP's certificate was rejected as if none existed, and whether
        # it was depended on the warm basis, i.e. on the order of earlier LPs.
        # (Everything is worked out on the nonzero deviations only: an LP's vertex moves
        # a few dozen of the model's cells, and the same checks over every cell were
        # half of the Python time of each of the clean-up's ~1,400 attacker LPs. Zeros
        # stay zero under the snapping and the tolerance, ranges containing 0.)
        cand = np.flatnonzero(f)
        fc = f[cand]
        hid = self.hidden[cand]
        cL, cU = self.caps_L[cand], self.caps_U[cand]
        snap = FEAS_TOL / self.sigma
        lo = np.where(hid, -cL, 0.0)
        hi = np.where(hid, cU, 0.0)
        fc = np.where((fc > hi) & (fc <= hi + snap), hi, fc)
        fc = np.where((fc < lo) & (fc >= lo - snap), lo, fc)
        width = cU + cL
        scale = np.where(np.isfinite(width), np.abs(cU) + np.abs(cL), 0.0)
        nz = np.abs(fc) > 1e-9 * np.maximum(scale, 1.0)
        idx = cand[nz]
        val = fc[nz]
        at_k = np.searchsorted(idx, k)
        fk = float(val[at_k]) if at_k < len(idx) and idx[at_k] == k else 0.0
        # check the certificate ourselves: bounds, relations, requirement
        if sign * fk < amt * (1 - 1e-6) - 1e-9:
            return None
        if not hid[nz].all():
            return None
        if (val > cU[nz] * (1 + 1e-7) + 1e-9).any() or (-val > cL[nz] * (1 + 1e-7) + 1e-9).any():
            return None
        resid = column_residual(self.cols, idx, val) if len(idx) else np.zeros(0)
        if len(resid) and np.abs(resid).max() > 1e-6 * max(1.0, float(np.abs(val).max())):
            return None
        return Flow(self.cells[idx], val)

    def extreme(self, k: int, sign: int) -> tuple[float, np.ndarray]:
        """The attacker's best ``sign·f_k`` and the reduced costs of its bounds.

        Returns (value, coef) where ``coef_i = α_i·U_i + β_i·L_i`` is cell i's term in
        the Benders cut (α, β ≥ 0 the duals of cell i's up and down bounds).
        """
        if self.n != self.n_all:
            raise ValueError("Benders cuts need the whole-table attacker model")
        col_p, col_m = int(k), int(k) + self.n
        self.h.changeColsCost(2, np.array([col_p, col_m], dtype=np.int32),
                              np.array([-float(sign), float(sign)]))
        try:
            status = self._run()
            if status != highspy.HighsModelStatus.kOptimal:
                return np.inf, np.zeros(self.n)
            sol = self.h.getSolution()
            x = np.asarray(sol.col_value) / self.sigma
            d = np.asarray(sol.col_dual)
        finally:
            self.h.changeColsCost(2, np.array([col_p, col_m], dtype=np.int32), np.zeros(2))
        value = float(sign) * float(x[col_p] - x[col_m])
        alpha = np.maximum(-d[:self.n], 0.0)
        beta = np.maximum(-d[self.n:], 0.0)
        with np.errstate(invalid="ignore"):
            coef = np.where(alpha > 0, alpha * self.caps_U, 0.0) + np.where(beta > 0, beta * self.caps_L, 0.0)
        coef = np.where(np.isnan(coef), np.inf, coef)
        return value, coef
