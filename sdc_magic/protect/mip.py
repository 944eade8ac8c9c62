"""Optimal secondary suppression: a MIP with attacker cuts generated on demand.

Model (Fischetti & Salazar, "Solving the cell suppression problem on tabular data
with linear constraints", Management Science 2001; the model behind tau-Argus
Optimal and sdcTable OPT): one binary ``x_i`` per cell (1 = hidden), primaries fixed
to 1, minimise ``Σ cost_i · x_i``.  The attacker's problem for primary k is an LP
whose bounds depend on x; LP duality turns "the attacker's max of y_k reaches
a_k + UPL_k" into capacity cuts

    Σ_i (α_i · U_i + β_i · L_i) · x_i ≥ UPL_k

with (α, β) the reduced costs of the attacker LP solved at the current master
solution (U / L: how far cell i may move up / down a priori).  Coefficients are
capped at the right-hand side, which keeps the cut valid on 0/1 points and tightens
it.  The master starts with the "no lone hidden cell in a relation" cuts and
receives, each round, one cut per violated (primary, direction, attacker).  A
master solution that passes the audit is optimal; when a work limit strikes
first, the best *audited* pattern found so far (the heuristic's, or a repaired
master solution) is returned.

Insiders (single contributors) get their own cuts: the LP is the same with the
insider's cell fixed, which is exactly the outsider's LP for a pattern where that
cell is published — so the cut is valid whether or not the cell ends up hidden.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pulp

from .audit import Problem, Ticker, WorkLimit, certify, scenario_caps
from .heuristic import Infeasible, repair
from .lp import Flow, charge, quiet_highs, work_done

#: Work units (attacker-LP simplex iterations, :func:`.lp.work_done`) charged per simplex
#: iteration of a master solve. The master is a MIP over every cell with all cuts so far, and
#: its root work (presolve, cut separation, heuristics) comes with its iterations: measured on
#: the 3-level hierarchy benchmark (``benchmarks/protect.py --only 3-level``), 256,272 master
#: iterations took 114 CPU s, 2,250 per second, against the attacker LPs' 45,000
#: (:data:`.lp.ITERATIONS_PER_SECOND`); small masters (the 3 regions > 15 departments tables)
#: 3,300-4,000 per second; the singleton-safe run of the same table 1,640, and under load
#: (a red team's runs beside other test suites) 850-2,100: 30 keeps the budget on the safe side.
#: Before this count the master's work was not in any budget, and ``time_limit=60`` took 131
#: CPU s there.
MASTER_ITERATION_WORK = 30


def available_solvers() -> list[str]:
    """MIP back ends PuLP can use here, fastest first (HiGHS in memory, then CBC)."""
    out = []
    quiet_highs()
    try:
        if pulp.HiGHS().available():
            out.append("HiGHS")
    except Exception:  # PuLP raises various errors when highspy is absent
        pass
    if _cbc(msg=False).available():
        out.append("CBC")
    return out


def _binary(prob: pulp.LpProblem, name: str) -> pulp.LpVariable:
    if hasattr(prob, "add_variable"):  # PuLP >= 3.3
        return prob.add_variable(name, 0, 1, cat=pulp.LpBinary)
    return pulp.LpVariable(name, cat=pulp.LpBinary)


def _cbc(**kwargs: object) -> pulp.LpSolver:
    # PuLP 3.3 warns that the bundled CBC moves to an extra in 4.0; it is still the
    # bundled solver we are asked to support, so the warning is not the user's business
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(**kwargs)


class _HiGHS(pulp.HiGHS):  # type: ignore[misc, valid-type]
    """PuLP's HiGHS, knowing the status a node limit ends with (``kSolutionLimit``).

    PuLP 3.3 has no entry for it in its status table (KeyError); the solution values
    are already assigned by then, so a node limit is reported like a time limit.
    """

    def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
        try:
            return super().findSolutionValues(lp)
        except KeyError:
            if lp.solverModel.getInfo().primal_solution_status == 2:  # feasible point found
                return pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible
            return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound


def _solver(name: str, nodes: int) -> pulp.LpSolver:
    """A single-threaded, seeded MIP solver limited in branch-and-bound nodes, never in time.

    A time limit would make the pattern depend on the machine's speed and load (issue 21);
    a node limit with one thread and a fixed seed gives the same search everywhere.
    """
    if name == "HiGHS":
        quiet_highs()  # PuLP makes its own Highs: the banner must be gone before
        return _HiGHS(msg=False, threads=1, random_seed=0, mip_rel_gap=1e-9, mip_max_nodes=int(nodes))
    options = ["randomCbcSeed 1", "randomSeed 1", f"maxNodes {int(nodes)}"]
    return _cbc(msg=False, threads=1, gapRel=1e-9, options=options)


def benders_cut(P: Problem, hidden: np.ndarray, k: int, sign: int, scen: int
                ) -> tuple[float, np.ndarray]:
    """(attacker's best deviation, cut coefficients per cell) at the pattern ``hidden``.

    Solved on the problem's persistent cost-free attacker LP (bounds changed, basis
    kept), not on a model built for the occasion.
    """
    lp = P.benders(hidden)
    try:
        if scen >= 0:
            lp.set_caps(*scenario_caps(P, scen))
        return lp.extreme(int(k), int(sign))
    finally:
        lp.set_caps(P.L, P.U)


def _solve_master(prob: pulp.LpProblem, solver: pulp.LpSolver, tick: Ticker, message: str) -> int:
    """``prob.solve(solver)`` in a worker thread while this thread keeps calling ``tick``.

    The solver runs without calling back into Python, so the user's progress callback
    is called from here every 0.2 s.  A KeyboardInterrupt (or an exception from the
    callback) propagates at once; the abandoned solve ends by its own node limit and
    its result is dropped, so no half pattern is ever returned.
    """
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["status"] = prob.solve(solver)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="sdc-magic-mip", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        tick(message, None)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return int(box["status"])  # type: ignore[call-overload]


def optimal(P: Problem, *, singletons: bool, tick: Ticker, solver: str,
            incumbent: tuple[np.ndarray, list[Flow]] | None, nodes: int,
            rounds: int | None = None) -> tuple[np.ndarray, list[Flow], str, float]:
    """Minimum-cost audited pattern.  Returns (hidden, certificates, status, lower bound).

    ``status`` is ``"optimal"`` or ``"work limit"``; in the latter case the pattern is
    the best audited one found (never an unaudited master solution).  ``nodes`` (branch
    and bound nodes per master solve), ``rounds`` (master solves) and the ticker's
    simplex-iteration budget are deterministic work limits: the answer does not depend
    on the machine's speed or load.
    """
    try:
        return _optimal(P, singletons=singletons, tick=tick, solver=solver,
                        incumbent=incumbent, nodes=nodes, rounds=rounds)
    except WorkLimit:
        if incumbent is None:
            raise
        return incumbent[0], incumbent[1], "work limit", 0.0


def _optimal(P: Problem, *, singletons: bool, tick: Ticker, solver: str,
             incumbent: tuple[np.ndarray, list[Flow]] | None, nodes: int,
             rounds: int | None) -> tuple[np.ndarray, list[Flow], str, float]:
    req_k, req_s, req_a = P.requirements()
    var_cells = np.flatnonzero(P.hideable & ~P.primary)
    prob = pulp.LpProblem("cell_suppression", pulp.LpMinimize)
    x = {int(i): _binary(prob, f"x{int(i)}") for i in var_cells}
    prob += pulp.lpSum(float(P.cost[i]) * x[int(i)] for i in var_cells)
    # a hidden primary alone in a relation is recovered exactly: some other cell must go
    M = P.M.tocsr()
    seen_rows: set[int] = set()
    for k in np.unique(req_k):
        col = P.Mc[:, int(k)]
        for r in col.indices:
            r = int(r)
            members = M.indices[M.indptr[r]:M.indptr[r + 1]]
            others = [int(i) for i in members if i != k]
            if any(P.primary[i] for i in others):
                continue
            key = r * P.n + int(k)
            if key in seen_rows:
                continue
            seen_rows.add(key)
            terms = [x[i] for i in others if i in x]
            if not terms:
                raise Infeasible([(int(np.flatnonzero(req_k == k)[0]), -1)])
            prob += pulp.lpSum(terms) >= 1

    best_hidden, best_pool = incumbent if incumbent is not None else (None, [])
    best_cost = float(P.cost[best_hidden & ~P.primary].sum()) if best_hidden is not None else np.inf
    lower = 0.0
    pool: list[Flow] = list(best_pool)
    n_rounds = 0
    last: tuple[int, int] | None = None  # (work units, nodes) of the latest master solve
    while True:
        if tick.expired or (rounds is not None and n_rounds >= rounds) or not _round_fits(tick.end, last):
            return (*_fallback(P, best_hidden, best_pool, singletons, tick), "work limit", lower)
        tick(f"optimal: master problem round {n_rounds + 1}", None, force=True)
        status = _solve_master(prob, _solver(solver, _nodes_within_budget(nodes, tick.end, last)), tick,
                               f"optimal: master problem round {n_rounds + 1}")
        n_rounds += 1
        last = _master_work(prob, solver)
        charge(last[0])
        if status != pulp.LpStatusOptimal:
            if pulp.LpStatus[status] == "Infeasible":
                raise Infeasible([])
            return (*_fallback(P, best_hidden, best_pool, singletons, tick), "work limit", lower)
        solved_to_opt = _proved_optimal(prob, solver)
        lower = max(lower, float(pulp.value(prob.objective) or 0.0)) if solved_to_opt else lower
        hidden = P.primary.copy()
        for i, var in x.items():
            if (var.value() or 0.0) > 0.5:
                hidden[i] = True
        cert = certify(P, hidden, pool, singletons=singletons, tick=tick)
        pool = cert.pool
        if not cert.failures:
            cost = float(P.cost[hidden & ~P.primary].sum())
            if solved_to_opt:
                return hidden, pool, "optimal", cost
            if cost < best_cost:
                best_hidden, best_pool, best_cost = hidden, pool, cost
            return best_hidden, best_pool, "work limit", lower
        if lower >= best_cost - 1e-9 * max(best_cost, 1.0) and best_hidden is not None:
            return best_hidden, best_pool, "optimal", best_cost
        added = 0
        for r, s in cert.failures:
            value, coef = benders_cut(P, hidden, int(req_k[r]), int(req_s[r]), s)
            amt = float(req_a[r])
            if s >= 0:
                amt = P.insider_amount(int(req_k[r]), int(s), int(req_s[r]), amt)
                if amt <= 0:
                    continue
            if value >= amt * (1 - 1e-6):
                continue
            coef = np.minimum(coef, amt)
            rhs = amt - float(coef[P.primary].sum())
            terms = [(x[int(i)], float(coef[i])) for i in var_cells if coef[i] > 1e-9 * amt]
            if rhs <= 1e-9 * amt:
                continue
            if not terms:
                raise Infeasible([(int(r), int(s))])
            prob += pulp.LpAffineExpression(terms) >= rhs
            added += 1
        # an audited pattern from this master solution, for the work limit
        try:
            rep_hidden, rep_pool = repair(P, hidden, pool, singletons=singletons, tick=tick)
            rep_cost = float(P.cost[rep_hidden & ~P.primary].sum())
            if rep_cost < best_cost:
                best_hidden, best_pool, best_cost = rep_hidden, rep_pool, rep_cost
        except Infeasible:
            pass
        if added == 0:
            # numerical stalemate: keep the audited pattern
            return (*_fallback(P, best_hidden, best_pool, singletons, tick), "work limit", lower)


def _master_work(prob: pulp.LpProblem, solver: str) -> tuple[int, int]:
    """(work units, branch-and-bound nodes) of the master solve just done.

    HiGHS reports its iterations and nodes once the solve ends (its MIP callbacks carry no
    iteration count, and its ``simplex_iteration_limit`` does not bound a MIP); CBC through
    PuLP reports neither, so with CBC the master is bounded by its nodes per round and the
    rounds only, as before.
    """
    model = getattr(prob, "solverModel", None)
    if solver != "HiGHS" or model is None:
        return 0, 0
    info = model.getInfo()
    return MASTER_ITERATION_WORK * max(int(info.simplex_iteration_count), 0), max(int(info.mip_node_count), 0)


def _round_fits(end: float, last: tuple[int, int] | None) -> bool:
    """Whether another master round may start: the budget left covers the latest round's work.

    Why: a round's root solve has no limit of its own (HiGHS's node limit counts from it), and
    each round's master holds every cut of the one before and more, so it costs about as much or
    more (red team, stop 54: a round started with 0.2 % of the budget left and took 12.5 CPU s).
    The first round always runs; with CBC (no work reported) every round may start.
    """
    if last is None or not np.isfinite(end) or last[0] == 0:
        return True
    return end - work_done() >= last[0]


def _nodes_within_budget(nodes: int, end: float, last: tuple[int, int] | None) -> int:
    """The node limit of the next master solve: ``nodes``, or fewer where the latest solve's
    work per node (its root included: HiGHS counts the root as a node) says that many would pass
    the budget's ``end``.

    Why: the budget is checked between rounds, and one round of ``method="optimal"`` may have
    thousands of nodes. The latest round, not an average: nodes get dearer as cuts accumulate
    (red team, stop 54: an average over 13 root-only rounds gave 5,134 units a node where the
    next round's cost 20,311). Only work counts decide (the same limits on any machine).
    """
    if last is None or not np.isfinite(end) or last[0] == 0:
        return nodes
    units, done = last
    left = end - work_done()
    return int(max(1, min(nodes, left * max(done, 1) / units)))


def _proved_optimal(prob: pulp.LpProblem, solver: str) -> bool:
    # PuLP reports "Optimal" also for a node-limited integer solution with CBC;
    # sol_status distinguishes them.
    return getattr(prob, "sol_status", pulp.LpSolutionOptimal) == pulp.LpSolutionOptimal


def _fallback(P: Problem, hidden: np.ndarray | None, pool: list[Flow], singletons: bool, tick: Ticker
              ) -> tuple[np.ndarray, list[Flow]]:
    if hidden is not None:
        return hidden, pool
    return repair(P, P.primary.copy(), [], singletons=singletons, tick=tick)
