"""The certificate re-audit of ``sdc-magic verify``, fast enough for thousands of outputs.

Same question as :func:`sdc_magic.protect.certificate.intervals_from_published` — the attacker's
interval of every hidden cell from the published cells and margins alone, inner cells
≥ 0 — asked more cheaply: published cells are constants (moved to the right-hand
side), so the linear program has one variable per *hidden* inner cell and one row per
published margin that still has a hidden part; the model is passed to HiGHS once per
table and only the objective changes between the 2 × (hidden cells) solves (warm
start). scipy's ``linprog`` rebuilt the whole table's LP for each solve: ~6 ms a solve,
so 5,002 exported outputs took 295 s to verify.

Independent of the protection engine (``sdc_magic.protect``): this code knows only the
certificate. Without ``highspy`` the scipy version is used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..protect.certificate import TOLERANCE, cell_relations, intervals_from_published

try:
    import highspy
except ImportError:  # pragma: no cover - the [fast] extra
    highspy = None


def intervals(table: dict[str, Any], relations: tuple[list[int], list[tuple[int, list[int]]]] | None = None
              ) -> dict[int, tuple[float, float]]:
    """The attacker's interval of every hidden cell (``nan`` if the published figures contradict).

    ``relations``: :func:`sdc_magic.protect.certificate.cell_relations` of the table, if already known.
    """
    if highspy is None or table.get("rounding"):  # rounded figures are intervals: the general LP
        return intervals_from_published(table)
    cells = table["cells"]
    if relations is None:
        relations = cell_relations([list(c["labels"]) for c in cells], len(table["dims"]))
    inner, margins = relations
    safe = [c["status"] == "safe" for c in cells]
    hidden_inner = [k for k in inner if not safe[k]]
    var_of = {k: i for i, k in enumerate(hidden_inner)}
    targets = [k for k in range(len(cells)) if not safe[k]]
    rows: list[tuple[list[int], float]] = []
    for k, parts in margins:
        if not safe[k] or not parts:
            continue
        known = sum(float(cells[p]["value"]) for p in parts if safe[p])
        unknown = [var_of[p] for p in parts if not safe[p]]
        rhs = float(cells[k]["value"]) - known
        if unknown:
            rows.append((unknown, rhs))
        elif abs(rhs) > TOLERANCE * max(1.0, abs(float(cells[k]["value"]))):
            return {k: (math.nan, math.nan) for k in targets}  # published figures contradict
    parts_of = dict(margins)
    out: dict[int, tuple[float, float]] = {}
    objectives: dict[int, tuple[list[int], float]] = {}
    for k in targets:
        members = [k] if k in var_of else parts_of.get(k, [])
        objectives[k] = ([var_of[p] for p in members if p in var_of],
                         sum(float(cells[p]["value"]) for p in members if p not in var_of and safe[p]))
    n = len(hidden_inner)
    if n == 0:
        return {k: (const, const) for k, (_, const) in objectives.items()}
    h = _model(n, rows)
    for k, (cols, const) in objectives.items():
        if not cols:
            out[k] = (const, const)
            continue
        lo = _solve(h, n, cols, minimise=True)
        hi = _solve(h, n, cols, minimise=False)
        if lo is None or hi is None:
            out[k] = (math.nan, math.nan)
            continue
        out[k] = (lo + const, hi + const)
    return out


def _model(n: int, rows: list[tuple[list[int], float]]) -> Any:
    import scipy.sparse as sp

    from ..protect.lp import new_highs  # a silent, deterministic HiGHS (no banner in a notebook)

    h = new_highs(warm=True)
    data, ri, ci = [], [], []
    for r, (cols, _) in enumerate(rows):
        for c in cols:
            ri.append(r)
            ci.append(c)
            data.append(1.0)
    A = sp.csc_matrix((data, (ri, ci)), shape=(len(rows), n))
    A.sum_duplicates()
    A.sort_indices()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(rows)
    lp.col_cost_ = np.zeros(n)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.full(n, highspy.kHighsInf)
    rhs = np.array([b for _, b in rows], dtype=float)
    lp.row_lower_, lp.row_upper_ = rhs, rhs.copy()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(float)
    h.passModel(lp)
    return h


def _solve(h: Any, n: int, cols: list[int], minimise: bool) -> float | None:
    """min (or max) of the sum of ``cols``; None if infeasible, inf if unbounded above."""
    cost = np.zeros(n)
    cost[cols] = 1.0 if minimise else -1.0
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        value = h.getInfo().objective_function_value
        return float(value) if minimise else -float(value)
    if not minimise and status in (highspy.HighsModelStatus.kUnbounded,
                                   highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return math.inf
    return None


def verify_certificate(cert: dict[str, Any], protection: float | None = None) -> list[str]:
    """Problems found in a table certificate; the checks of
    :func:`sdc_magic.protect.certificate.verify_certificate`, with the faster :func:`intervals`."""
    from ..protect.certificate import verify_certificate as verify_with

    return verify_with(cert, protection, intervals=intervals)
