"""How far an attacker can move hidden cells of several linked outputs at once.

The joint audit (:func:`sdc_magic.linking.joint_audit`) asks, for every hidden small
cell of the new output and of the earlier outputs it shares rows with, whether the
published cells of all of them together pin that cell inside ``[(1-m)v, (1+m)v]``.
The unknowns are the counts of the *common cells* (the common refinement of the
outputs); every published cell of every output is one equation (its count is the sum
of its common cells), every count is at least 0.

It used to ask scipy's ``linprog`` twice per hidden cell, from scratch: on a
25×20×10 table displayed after its own ``groupby`` (2,400 hidden cells, 4,500 common
cells) that is 10,000 LPs and took far beyond the audit's 10 s, so an honest table was
blocked whole.  Here:

* one HiGHS model, kept between solves (only the objective changes: a warm start of the
  simplex; presolve on, as the equations of many populations over the same rows are largely
  redundant: 3,600 rows for 2,100 unknowns after twelve tables of two rates);
* every solution is a feasible table: its group sums are *attained* values for every
  target at once, so a target whose requirement (down to ``(1-m)v`` and up to
  ``(1+m)v``) is already reached by some point needs no LP of its own;
* two first solves push all targets down, then all up (weights ``1/v``), which reach
  most of them together;
* a target still short gets its own exact LP, so a *failure* is always proved by an
  optimum, never guessed.

The verdicts are therefore those of the exact intervals (a passing target's attained
points lie inside its exact interval; a failing one is decided by its exact optimum).
The bounds returned for passing targets are attained values, not the extremes: callers
only compare them with the requirement.
"""

from __future__ import annotations

from collections.abc import Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from ..protect.lp import WorkLimit, new_highs, pass_lp, run_robust, set_budget, work_done

#: Points kept between calls (each is one feasible table of the common cells).
MAX_POINTS = 64
#: Sweep rounds per direction; a round proving fewer than SWEEP_MIN_PROVED targets ends them.
SWEEP_ROUNDS = 30
SWEEP_MIN_PROVED = 2
SWEEP_ROW_CELLS = 64


def unprotected(lo: float, hi: float, value: float, m: float, reach: float) -> bool:
    """Whether an attacker's bounds ``[lo; hi]`` of a group of ``value`` fail the requirement
    :meth:`JointBounds.bounds` tries to meet: pinned, a lower bound above ``(1 - m)·value``, or
    an upper bound short of ``max((1 + m)·value, reach)`` (a small group proved small). Shared by
    the rows audit and the audit in units."""
    need_hi = max((1 + m) * value, reach if value > 0 else 0.0)
    return hi - lo <= 1e-9 or lo > (1 - m) * value + 1e-9 or hi < need_hi - 1e-9


class JointBounds:
    """Attained and proved bounds of group sums over ``A·x = b, x ≥ 0``."""

    def __init__(self, A: sp.csr_matrix, b: np.ndarray, end: float = np.inf,
                 points: Sequence[np.ndarray] = ()) -> None:
        self.A = sp.csr_matrix(A)
        self.b = np.asarray(b, dtype=float)
        self.n = self.A.shape[1]
        self.end = end  # the work count (simplex iterations, lp.work_done) no LP may pass
        self.lps = 0
        self.h: highspy.Highs | None = None
        #: feasible points known for these constraints (earlier ones are re-checked)
        self.points: list[np.ndarray] = [p for p in points if self.feasible(p)]
        self.fixed, self.value = _fixed_cells(self.A, self.b)
        #: the LP's columns: the cells no published cell pins on its own
        self.free = np.flatnonzero(~self.fixed)
        self._At: sp.csc_matrix | None = None

    def feasible(self, x: np.ndarray) -> bool:
        """True when x satisfies every equation and bound (an earlier point may not, after a change)."""
        if len(x) != self.n or (x < -1e-9).any():
            return False
        if not self.A.shape[0]:
            return True
        resid = self.A @ x - self.b
        return bool(np.abs(resid).max(initial=0.0) <= 1e-7 * max(1.0, float(np.abs(self.b).max(initial=0.0))))

    def _model(self) -> highspy.Highs:
        """The LP over the free cells: the fixed ones moved to the right-hand side."""
        if self.h is None:
            self.h = new_highs(warm=True)
            self.h.setOptionValue("presolve", "on")  # redundant equations of overlapping populations
            rhs = self.b - self.A @ self.value
            A = self.A[:, self.free]
            rows = _distinct_rows(A, rhs)
            A = A[rows].tocsc()
            nf = len(self.free)
            pass_lp(self.h, A, np.zeros(nf), np.zeros(nf), np.full(nf, np.inf), rhs[rows], rhs[rows])
        return self.h

    def unconstrained(self) -> np.ndarray:
        """Per cell: not pinned and in no equation with any other unknown (no published cell holds
        it): an attacker can put any count there, so a target holding one is unbounded above."""
        A = sp.csc_matrix(self.A[:, self.free])
        loose = np.zeros(self.n, dtype=bool)
        if len(self.free):
            loose[self.free] = np.diff(A.indptr) == 0
        return loose

    def _solve(self, cost: np.ndarray) -> tuple[str, np.ndarray | None]:
        """Minimise ``cost·x``: ("optimal", x), ("unbounded", None) or ("failed", None).

        Always the warm simplex. The sweeps were solved by interior point (their objective
        changes whole, where a warm basis was thought to help little): on a session of twelve
        tables of two rates at 1M rows each interior point solve of the 2,100-column model took
        ~0.2 s, 8.4 of a 10 CPU s display, against 1.0 s for the same LPs warm; a 25×20×10 table
        shown again took as long either way (stop 64, ``docs/performance.md``). Interior point
        iterations were also counted as one simplex iteration each in the work budget, where
        one costs hundreds.
        """
        if work_done() >= self.end:
            raise WorkLimit("joint audit: work budget spent")
        h = self._model()
        local = cost[self.free]
        idx = np.flatnonzero(local).astype(np.int32)
        h.changeColsCost(len(idx), idx, local[idx].astype(float))
        if np.isfinite(self.end):
            set_budget(self.end - work_done())  # one long LP cannot pass the budget either
        try:
            status = run_robust(h)
            if status == highspy.HighsModelStatus.kInfeasible:
                # the system always has a solution (the true counts): "infeasible" after a warm
                # start is HiGHS's mistake (seen in 0 iterations, maximising a cell of no equation,
                # red team of stop 64), and read as "failed" it pinned the cell and blocked the
                # table. Solved again from no basis.
                h.clearSolver()
                status = run_robust(h)
                self.lps += 1
        finally:
            set_budget(np.inf)
            h.changeColsCost(len(idx), idx, np.zeros(len(idx)))
        self.lps += 1
        if status == highspy.HighsModelStatus.kOptimal:
            x = self.value.copy()
            x[self.free] = np.maximum(np.asarray(h.getSolution().col_value, dtype=float), 0.0)
            if self.feasible(x):
                self.points.append(x)
                if len(self.points) > MAX_POINTS:
                    del self.points[1:len(self.points) - MAX_POINTS + 1]
                return "optimal", x
            return "failed", None
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            return "unbounded", None
        h.clearSolver()
        return "failed", None

    def _one_per_equation(self, T: sp.csr_matrix, short: np.ndarray) -> np.ndarray:
        """Targets (in order) such that no two have cells in one short equation.

        Only equations with at most :data:`SWEEP_ROW_CELLS` free cells count as
        conflicts: a grand total holds every cell, and the room it leaves is shared by
        thousands of them.
        """
        if self._At is None:
            free_per_row = np.diff(self.A[:, self.free].indptr)
            limit = min(SWEEP_ROW_CELLS, max(2, len(self.free) // 8))
            short_rows = sp.diags((free_per_row <= limit).astype(float))
            self._At = (short_rows @ self.A).tocsc()
            self._At.eliminate_zeros()
        taken = np.zeros(self.A.shape[0], dtype=bool)
        out = np.zeros(len(short), dtype=bool)
        for i in np.flatnonzero(short).tolist():
            cells = T.indices[T.indptr[i]:T.indptr[i + 1]]
            rows = np.concatenate([self._At.indices[self._At.indptr[j]:self._At.indptr[j + 1]]
                                   for j in cells.tolist()]) if len(cells) else np.zeros(0, dtype=np.int64)
            if not taken[rows].any():
                taken[rows] = True
                out[i] = True
        return out

    def bounds(self, members: list[np.ndarray], values: np.ndarray, m: float, reach: float = 0.0
               ) -> list[tuple[float, float]]:
        """(low, high) per target: attained values reaching the requirement, else exact extremes.

        ``members[i]`` are the common cells of target i, ``values[i]`` its true count;
        the requirement is ``low ≤ (1-m)·v``, ``high ≥ max((1+m)·v, reach)`` and ``high > low``
        (``reach``: the threshold a small count's upper bound must reach, as for a primary of
        the threshold rule in :mod:`sdc_magic.protect.levels`).
        """
        nt = len(members)
        if nt == 0:
            return []
        values = np.asarray(values, dtype=float)
        T = sp.csr_matrix((np.ones(sum(len(x) for x in members)),
                           (np.repeat(np.arange(nt), [len(x) for x in members]),
                            np.concatenate([np.asarray(x, dtype=np.int64) for x in members]))),
                          shape=(nt, self.n))
        if not self.A.shape[0]:
            return [(0.0, np.inf)] * nt
        lo = np.full(nt, np.inf)
        hi = np.full(nt, -np.inf)
        want_lo = (1 - m) * values + 1e-9
        want_hi = np.maximum((1 + m) * values, np.where(values > 0, reach, 0.0)) - 1e-9

        def take(x: np.ndarray) -> None:
            s = T @ x
            np.minimum(lo, s, out=lo)
            np.maximum(hi, s, out=hi)

        def reached() -> np.ndarray:
            return (lo <= want_lo) & (hi >= want_hi) & (hi > lo + 1e-9)

        for x in self.points:
            take(x)
        exact_lo = np.full(nt, np.nan)
        exact_hi = np.full(nt, np.nan)
        loose = self.unconstrained()
        if loose.any():  # (no LP: its upper bound is infinite)
            unbounded = np.asarray(T[:, np.flatnonzero(loose)].sum(axis=1)).ravel() > 0
            exact_hi[unbounded] = np.inf
            hi[unbounded] = np.inf
        # sweeps: open targets pushed down together, then up (weights 1/v: small cells count
        # as much), at most one target per equation in a round (two targets of one equation
        # compete for the same room: pushed together, few reach their requirement)
        for sense in (1.0, -1.0):
            for _ in range(SWEEP_ROUNDS):
                short = ~(lo <= want_lo) if sense > 0 else ~(hi >= want_hi)
                short &= ~reached()
                n_short = int(short.sum())
                if n_short == 0:
                    break
                pick = self._one_per_equation(T, short)
                w = np.zeros(nt)
                w[pick] = sense / np.maximum(values[pick], 1.0)
                status, x = self._solve(np.asarray(T.T @ w).ravel())
                if x is None:
                    break
                take(x)
                now = ~(lo <= want_lo) if sense > 0 else ~(hi >= want_hi)
                if n_short - int((now & ~reached()).sum()) < SWEEP_MIN_PROVED:
                    break
        for i in np.flatnonzero(~reached()).tolist():
            cost = np.zeros(self.n)
            cost[members[i]] = 1.0
            for sense in (1.0, -1.0):
                if sense > 0 and (lo[i] <= want_lo[i]) and (hi[i] - lo[i] > 1e-9):
                    continue
                if sense < 0 and (hi[i] >= want_hi[i]) and (hi[i] - lo[i] > 1e-9):
                    continue
                status, x = self._solve(sense * cost)
                if x is not None:
                    take(x)
                    if sense > 0:
                        exact_lo[i] = float(x[members[i]].sum())
                    else:
                        exact_hi[i] = float(x[members[i]].sum())
                elif status == "unbounded" and sense < 0:
                    exact_hi[i] = np.inf
                    hi[i] = np.inf
                elif status == "failed":
                    # no verdict without an optimum: report the point range found (a
                    # narrower range than the truth only ever blocks more)
                    pass
        out: list[tuple[float, float]] = []
        for i in range(nt):
            low = exact_lo[i] if np.isfinite(exact_lo[i]) else lo[i]
            high = exact_hi[i] if not np.isnan(exact_hi[i]) else hi[i]
            if not np.isfinite(low):  # no point at all (every solve failed): nothing proved
                low, high = float(values[i]), float(values[i])
            out.append((float(low), float(high)))
        return out


def _fixed_cells(A: sp.csr_matrix, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cells whose value the equations alone pin, and those values.

    A published cell made of one common cell fixes it; substituting it may leave
    another equation with one unknown, and so on.  (On a table displayed again with its
    margins, most common cells are published cells of the earlier output: the LP then
    has the hidden cells only, 2,400 columns instead of 4,500.)  Also every cell of an
    equation whose total is 0 (counts are never negative).
    """
    n = A.shape[1]
    fixed = np.zeros(n, dtype=bool)
    value = np.zeros(n)
    if not A.shape[0]:
        return fixed, value
    A = sp.csr_matrix(A)
    Ac = A.tocsc()
    rhs = np.asarray(b, dtype=float).copy()
    # positive coefficients only here (sums of cells): anything else is left to the LP
    if (A.data <= 0).any():
        return fixed, value
    open_count = np.diff(A.indptr).astype(np.int64)
    queue = list(np.flatnonzero((open_count == 1) | (rhs <= 0)).tolist())
    done = np.zeros(A.shape[0], dtype=bool)
    while queue:
        r = queue.pop()
        if done[r]:
            continue
        cols = A.indices[A.indptr[r]:A.indptr[r + 1]]
        coef = A.data[A.indptr[r]:A.indptr[r + 1]]
        free = ~fixed[cols]
        if not free.any():
            done[r] = True
            continue
        if rhs[r] <= 1e-12:
            new = cols[free]
            vals = np.zeros(len(new))
        elif free.sum() == 1:
            new = cols[free]
            vals = np.array([rhs[r] / coef[free][0]])
        else:
            continue
        done[r] = True
        for j, v in zip(new.tolist(), vals.tolist(), strict=True):
            fixed[j] = True
            value[j] = v
            rows_j = Ac.indices[Ac.indptr[j]:Ac.indptr[j + 1]]
            coef_j = Ac.data[Ac.indptr[j]:Ac.indptr[j + 1]]
            rhs[rows_j] -= coef_j * v
            open_count[rows_j] -= 1
            queue.extend(rows_j[((open_count[rows_j] == 1) | (rhs[rows_j] <= 1e-12)) & ~done[rows_j]].tolist())
    return fixed, value


def _distinct_rows(A: sp.csr_matrix, rhs: np.ndarray) -> np.ndarray:
    """Rows with at least one cell, each equation once (two outputs publishing the same
    cell give the same equation twice; the LP only gets slower with copies)."""
    A = sp.csr_matrix(A)
    A.sort_indices()
    seen: dict[tuple, int] = {}
    keep = []
    for r in range(A.shape[0]):
        a, b = A.indptr[r], A.indptr[r + 1]
        if a == b:
            continue
        key = (A.indices[a:b].tobytes(), A.data[a:b].tobytes(), float(rhs[r]))
        if key not in seen:
            seen[key] = r
            keep.append(r)
    return np.asarray(keep, dtype=np.int64)
