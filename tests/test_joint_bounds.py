"""The joint audit's bounds (sdc_magic/joint_bounds.py) give the verdicts of exact intervals.

``JointBounds.bounds`` returns attained values for targets that meet their requirement
and exact optima for the others; these tests compare its verdicts with two scipy
``linprog`` calls per target (the former implementation) on random linked systems,
failures included, and check the reduction of fixed cells on its own.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from sdc_magic.linking.joint_bounds import JointBounds, _fixed_cells


def _system(seed: int, shape: tuple[int, ...], published_share: float):
    """Cells of a table (x ≥ 0 integers), equations: published inner cells and every margin."""
    rng = np.random.default_rng(seed)
    x = rng.negative_binomial(1, 0.35, size=shape).astype(float)
    n = x.size
    codes = np.indices(shape).reshape(len(shape), -1).T
    rows, cols = [], []
    r = 0
    published = rng.random(n) < published_share
    for j in np.flatnonzero(published):  # published inner cells
        rows.append(r)
        cols.append(j)
        r += 1
    for d in range(len(shape)):  # 1-D lines (every margin of one dimension)
        others = [e for e in range(len(shape)) if e != d]
        keys = codes[:, others] @ np.cumprod([1, *[shape[e] for e in others]])[:-1] if others else np.zeros(n, int)
        for key in np.unique(keys):
            members = np.flatnonzero(keys == key)
            rows += [r] * len(members)
            cols += members.tolist()
            r += 1
    rows += [r] * n  # grand total
    cols += list(range(n))
    r += 1
    A = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(r, n))
    b = A @ x.ravel()
    return A, b, x.ravel(), published


def _exact_verdicts(A, b, members, values, m, reach=0.0):
    out = []
    for mem, v in zip(members, values, strict=True):
        c = np.zeros(A.shape[1])
        c[mem] = 1.0
        lo = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        hi = linprog(-c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        assert lo.status == 0 and hi.status in (0, 3)
        low, high = float(lo.fun), (np.inf if hi.status == 3 else float(-hi.fun))
        need = max((1 + m) * v, reach if v > 0 else 0.0)
        out.append(high - low <= 1e-9 or low > (1 - m) * v + 1e-9 or high < need - 1e-9)
    return np.array(out)


def _verdicts(found, values, m, reach=0.0):
    return np.array([hi - lo <= 1e-9 or lo > (1 - m) * v + 1e-9 or hi < max((1 + m) * v, reach if v > 0 else 0.0)
                     - 1e-9 for (lo, hi), v in zip(found, values, strict=True)])


@pytest.mark.parametrize("seed,shape,share,m,reach", [
    (1, (8, 6), 0.7, 0.1, 0.0), (2, (8, 6), 0.5, 0.1, 0.0), (1, (5, 4, 3), 0.3, 0.1, 0.0),
    (4, (6, 5, 4), 0.5, 0.1, 0.0), (5, (6, 5, 4), 0.3, 0.1, 0.0), (7, (6, 5, 4), 0.3, 0.3, 0.0),
    (3, (5, 4, 3), 0.3, 0.5, 0.0),
    # a small group's upper bound must also reach the threshold (issue 23.13)
    (1, (8, 6), 0.7, 0.1, 5.0), (2, (8, 6), 0.5, 0.1, 5.0), (4, (6, 5, 4), 0.5, 0.1, 5.0),
    (5, (6, 5, 4), 0.3, 0.1, 5.0),
])
def test_joint_bounds_give_the_exact_verdicts(seed, shape, share, m, reach) -> None:
    A, b, x, published = _system(seed, shape, share)
    hidden = np.flatnonzero(~published & (x > 0))
    rng = np.random.default_rng(seed)
    members = [np.array([j]) for j in hidden]
    # a few targets made of two hidden cells (a cell of a coarser output)
    for _ in range(5):
        if len(hidden) >= 2:
            members.append(np.sort(rng.choice(hidden, 2, replace=False)))
    values = np.array([x[mm].sum() for mm in members])
    exact = _exact_verdicts(A, b, members, values, m, reach)
    got = _verdicts(JointBounds(A, b).bounds(members, values, m, reach), values, m, reach)
    assert (got == exact).all(), (np.flatnonzero(got != exact), exact.sum())
    assert exact.any() and not exact.all(), "the case should mix failures and passes"


def test_fixed_cells_follow_from_published_cells_and_zero_totals() -> None:
    # cells 0..3; published: cell 0 = 2; row 0+1 = 5 -> cell 1 = 3; row 2+3 = 0 -> both 0
    A = sp.csr_matrix(np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]], dtype=float))
    b = np.array([2.0, 5.0, 0.0, 5.0])
    fixed, value = _fixed_cells(A, b)
    assert fixed.tolist() == [True, True, True, True]
    assert value.tolist() == [2.0, 3.0, 0.0, 0.0]
    # nothing pinned: two cells sharing one total
    fixed, _ = _fixed_cells(sp.csr_matrix(np.array([[1.0, 1.0]])), np.array([4.0]))
    assert not fixed.any()


def test_points_from_another_system_are_rechecked() -> None:
    A, b, x, _ = _system(3, (5, 4, 3), 0.6)
    wrong = x.copy()
    wrong[0] += 1.0  # breaks the grand total
    engine = JointBounds(A, b, points=[x, wrong])
    assert len(engine.points) == 1


def test_redundant_equations_keep_exact_verdicts_and_every_solve_is_a_warm_simplex(monkeypatch) -> None:
    """Populations over the same rows publish largely redundant equations (a table, its flagged
    rows and its other rows: the third is the first minus the second). The model is presolved and
    every solve, sweeps included, is a warm simplex: interior point solves of such a model took
    ~0.2 s each on a session of twelve tables of two rates (stop 64), and were counted as a
    handful of iterations in the work budget."""
    from sdc_magic.linking import joint_bounds

    A, b, x, published = _system(5, (6, 5, 4), 0.3)
    rng = np.random.default_rng(5)
    pairs = rng.integers(0, A.shape[0], size=(60, 2))
    extra = sp.csr_matrix(np.array([(A[i] + A[j]).toarray().ravel() for i, j in pairs]))
    A2 = sp.vstack([A, extra, A[:40]]).tocsr()  # sums of two equations, and exact copies
    b2 = A2 @ x
    hidden = np.flatnonzero(~published & (x > 0))
    members = [np.array([j]) for j in hidden]
    values = np.array([x[mm].sum() for mm in members])
    interior: list[int] = []
    real_run = joint_bounds.run_robust

    def run(h):
        status = real_run(h)
        interior.append(int(h.getInfo().ipm_iteration_count))
        return status

    monkeypatch.setattr(joint_bounds, "run_robust", run)
    got = _verdicts(JointBounds(A2, b2).bounds(members, values, 0.1), values, 0.1)
    exact = _exact_verdicts(A, b, members, values, 0.1)
    assert (got == exact).all() and exact.any() and not exact.all()
    assert interior and not any(interior), interior


def test_a_cell_in_no_equation_is_unbounded_without_an_lp_and_a_false_infeasible_is_solved_again(monkeypatch) -> None:
    """A target holding a cell that no published cell holds can be any count: its upper bound is
    infinite (no LP). And a warm simplex that answers "infeasible" (the system always has the true
    counts as a solution; HiGHS did so in 0 iterations after a long session, red team of stop 64,
    and the cell was taken as pinned: the table blocked) is solved again from no basis."""
    import highspy

    from sdc_magic.linking import joint_bounds

    A, b, x, published = _system(4, (6, 5, 4), 0.5)
    loose = np.array([3.0, 2.0])  # two more cells, in no equation
    A2 = sp.hstack([A, sp.csr_matrix((A.shape[0], 2))]).tocsr()
    x2 = np.concatenate([x, loose])
    hidden = np.flatnonzero(~published & (x > 0))
    members = [np.array([j]) for j in hidden] + [np.array([len(x)]), np.array([hidden[0], len(x) + 1])]
    values = np.array([x2[mm].sum() for mm in members])
    exact = _exact_verdicts(A2, b, members, values, 0.1)
    engine = JointBounds(A2, b)
    found = engine.bounds(members, values, 0.1)
    assert found[-2][1] == np.inf and found[-1][1] == np.inf
    assert np.flatnonzero(engine.unconstrained()).tolist() == [len(x), len(x) + 1]
    assert (_verdicts(found, values, 0.1) == exact).all()

    real_run = joint_bounds.run_robust
    lies = [1]

    def run(h):
        status = real_run(h)
        if status == highspy.HighsModelStatus.kOptimal and lies:
            lies.pop()
            return highspy.HighsModelStatus.kInfeasible  # (as HiGHS did after a warm start)
        return status

    monkeypatch.setattr(joint_bounds, "run_robust", run)
    cost = np.zeros(A2.shape[1])
    cost[hidden[0]] = -1.0
    status, point = JointBounds(A2, b)._solve(cost)
    assert not lies and status == "optimal" and point is not None
