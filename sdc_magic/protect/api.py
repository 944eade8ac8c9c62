"""Public entry points: :func:`protect` and :func:`audit`.

Input checks live here (one place, plain messages); the model, the levels, the LPs
and the search live in their own modules.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..config import COSTS, Rules
from ..rules import CellFacts, assess
from . import patterns
from .attacker_intervals import intervals
from .audit import Problem, ProgressFn, Ticker, WorkLimit, certify
from .heuristic import Infeasible, cleanup, repair
from .levels import protection_levels, resolution_of
from .local import Boxes
from .lp import ITERATIONS_PER_SECOND, Flow, set_budget, work_done
from .messages import UNPROTECTABLE
from .model import TOTAL, TableModel, build_dimension, build_model, merged_top, sorted_labels

#: Tables with at most this many cells (margins included) get the optimal MIP under
#: ``method="auto"``; larger ones the heuristic.  Above a few hundred cells the MIP
#: (with insider cuts) rarely converges within seconds and did not improve on the
#: cleaned-up heuristic pattern (referrals 4-way table, 565 cells; 20×10×5 counts):
#: it only added its whole time budget to every displayed table.
AUTO_OPTIMAL_MAX_CELLS = 400
#: With an offline budget (``time_limit`` of at least :data:`OFFLINE_SECONDS`), ``auto``
#: also runs the MIP, warm-started from the audited heuristic pattern, on tables up to this
#: many cells: the 3-level hierarchy × 8 × 5 benchmark table (1,000+ cells) goes from 1,509
#: to tau-Argus's 1,344 in ~20 CPU s.  The display path (10 s) keeps the heuristic there.
AUTO_OPTIMAL_MAX_CELLS_OFFLINE = 3000
OFFLINE_SECONDS = 30.0
#: Under ``method="auto"``, the MIP that tries to improve on the audited heuristic
#: pattern is limited in deterministic work units, not seconds (issue 13: a budget in
#: seconds made the pattern depend on the machine's load): branch-and-bound nodes per
#: master solve and master rounds (each round adds the attacker cuts that failed).
AUTO_MIP_NODES = 500
AUTO_MIP_ROUNDS = 25
#: ``method="optimal"``: branch-and-bound nodes per master solve per nominal second of
#: ``time_limit`` (rounds are bounded by the simplex-iteration budget of the audits).
OPTIMAL_NODES_PER_SECOND = 200
#: The clean-up (publishing unneeded secondaries again) may spend this many simplex
#: iterations per nominal second of ``time_limit`` — about 55 % of the whole search's
#: budget (:data:`.lp.ITERATIONS_PER_SECOND` per nominal second); the search's budget
#: still stops it (keeping the last audited pattern).
CLEANUP_ITERATIONS_PER_SECOND = 25_000
METHODS = ("auto", "optimal", "heuristic")
#: ``Protection.method`` when the search spent its work budget before any audited pattern
#: existed (the display path turns this into ``review``, not ``blocked``: the table is not
#: known to be unprotectable, only too costly to prove safe within the budget)
BUDGET_SPENT_METHOD = "none (work budget)"
LEVELS = ("ours", "tau")
MARGINS = ("hideable", "published", "primary")


@dataclass
class Protection:
    """The result of :func:`protect`.

    Attributes:
        cells: every cell, margins included (``"Total"`` in a dimension column;
            hierarchy sub-totals carry their own label), with ``value``, ``units`` (if
            given), ``status`` (``safe`` / ``primary`` / ``secondary``), ``lower`` /
            ``upper`` (the attacker's exact interval for hidden cells, NaN for
            published ones) and ``reasons`` (short rule codes).
        method: how the pattern was found, e.g. ``"optimal/HiGHS"`` or
            ``"heuristic+repair"``.
        cost: total suppression cost of the secondary cells.
        seconds: wall time of the whole call (reported only: no decision reads a clock).
        audit_ok: True only when every primary passed the audit against the outsider
            and (if requested) every single-contributor insider.
        message: what happened, in plain words (why it failed, when it did).
        requirements: for each primary, the bounds its interval must reach.
        certificates: alternative tables (deviations from the true values on hidden
            cells) proving each protection; anyone can re-check them.
    """

    cells: pd.DataFrame
    method: str
    cost: float
    seconds: float
    audit_ok: bool
    message: str
    requirements: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    certificates: list[Flow] = field(default_factory=list, repr=False)
    #: the search spent its whole work budget before any audited pattern existed
    budget_spent: bool = False
    #: simplex iterations the search and the final audit took (the deterministic work unit)
    work: int = 0

    @property
    def hidden(self) -> pd.Series:
        """True for every cell that must not be published."""
        return self.cells["status"] != "safe"


# --------------------------------------------------------------------------- input
@dataclass
class _Table:
    model: TableModel
    labels: pd.DataFrame
    value: np.ndarray
    units: np.ndarray | None
    top: np.ndarray | None
    lb: np.ndarray
    ub: np.ndarray
    row_cell: np.ndarray  # cell index of every input row
    inner_rows: np.ndarray  # input row positions of the inner cells (model order)
    negative: bool


def _check_columns(cells: pd.DataFrame, needed: list[str]) -> None:
    if not isinstance(cells, pd.DataFrame):
        raise ValueError(f"cells must be a pandas DataFrame with one row per cell, got {type(cells).__name__}")
    missing = [c for c in needed if c not in cells.columns]
    if missing:
        raise ValueError(f"missing column(s) {missing}; the frame has {list(cells.columns)}")


def _label(row: Mapping[str, Any], dims: Sequence[str]) -> str:
    return " × ".join(f"{d}={row[d]!r}" for d in dims)


def _prepare(cells: pd.DataFrame, dims: Sequence[str], value: str, units: str | None,
             top: Sequence[str] | None, hierarchies: Mapping[str, Mapping[Hashable, Sequence[Hashable]]] | None,
             bounds: tuple[str | None, str | None] | None, frequency: bool) -> _Table:
    dims = list(dims)
    if not dims:
        raise ValueError("dims must name at least one dimension column")
    if len(set(dims)) != len(dims):
        raise ValueError(f"dims must be distinct, got {dims}")
    lo_col, hi_col = (bounds or (None, None))
    extra = [c for c in (units, lo_col, hi_col) if c] + list(top or [])
    _check_columns(cells, [*dims, value, *extra])
    hierarchies = dict(hierarchies or {})
    unknown = [h for h in hierarchies if h not in dims]
    if unknown:
        raise ValueError(f"hierarchies given for {unknown}, which are not among dims {dims}")
    frame = cells.reset_index(drop=True)
    if len(frame) == 0:
        raise ValueError("the table has no cells")
    for d in dims:
        bad = frame[d].isna().to_numpy()
        if bad.any():
            raise ValueError(f"NaN label in dimension {d!r} (row {int(np.flatnonzero(bad)[0])}); "
                             "give missing categories an explicit label")
    vals = pd.to_numeric(frame[value], errors="coerce").to_numpy(dtype=float)
    if np.isnan(vals).any() or not np.isfinite(vals).all():
        i = int(np.flatnonzero(~np.isfinite(vals))[0])
        raise ValueError(f"value column {value!r} has a missing or non-numeric value at "
                         f"{_label(frame.iloc[i], dims)}")
    if frequency and (vals < 0).any():
        i = int(np.flatnonzero(vals < 0)[0])
        raise ValueError(f"negative count {vals[i]:g} at {_label(frame.iloc[i], dims)}: counts cannot be negative")
    u = None
    if units:
        u = pd.to_numeric(frame[units], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(u).all():
            i = int(np.flatnonzero(~np.isfinite(u))[0])
            raise ValueError(f"units column {units!r} has a missing value at {_label(frame.iloc[i], dims)}")
        if (u < 0).any():
            i = int(np.flatnonzero(u < 0)[0])
            raise ValueError(f"negative number of units at {_label(frame.iloc[i], dims)}")
        if not frequency and ((u == 0) & (vals != 0)).any():
            i = int(np.flatnonzero((u == 0) & (vals != 0))[0])
            raise ValueError(f"no units but a value of {vals[i]:g} at {_label(frame.iloc[i], dims)}: "
                             "a value needs at least one contributing unit")
    dup = frame.duplicated(subset=dims, keep=False).to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise ValueError(f"duplicated cell {_label(frame.iloc[i], dims)}: each cell must appear once "
                         "(aggregate first)")

    # which rows are margins (Total or a hierarchy parent in some dimension)
    is_margin = np.zeros(len(frame), dtype=bool)
    for d in dims:
        parents = set(hierarchies.get(d, {}))
        col = frame[d]
        is_margin |= col.map(lambda v, parents=parents: v == TOTAL or v in parents).to_numpy(dtype=bool)
    inner_rows = np.flatnonzero(~is_margin)
    if len(inner_rows) == 0:
        raise ValueError("every row is a margin ('Total' or a hierarchy parent): give the inner cells")
    inner = frame.iloc[inner_rows]
    dim_objs = []
    inner_codes = []
    for d in dims:
        leaves = sorted_labels(inner[d])
        dim = build_dimension(d, leaves, hierarchies.get(d))
        pos = {lab: i for i, lab in enumerate(leaves)}
        inner_codes.append(inner[d].map(pos).to_numpy(dtype=np.int64))
        dim_objs.append(dim)
    model = build_model(inner_codes, dim_objs)
    S = model.S
    v_cells = S @ vals[inner_rows]
    u_cells = None if u is None else S @ u[inner_rows]
    top_cells = None
    if top:
        t = frame[list(top)].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)[inner_rows]
        _check_top(t, vals[inner_rows], None if u is None else u[inner_rows], list(top),
                   frame.iloc[inner_rows], dims)
        top_cells = merged_top(S, np.nan_to_num(np.abs(t), nan=0.0), len(top))
    negative = bool((vals[inner_rows] < 0).any())
    lb_in = np.full(len(inner_rows), -np.inf if negative else 0.0)
    ub_in = np.full(len(inner_rows), np.inf)
    if lo_col:
        given = pd.to_numeric(frame[lo_col], errors="coerce").to_numpy(dtype=float)[inner_rows]
        lb_in = np.where(np.isnan(given), lb_in, given)
    if hi_col:
        given = pd.to_numeric(frame[hi_col], errors="coerce").to_numpy(dtype=float)[inner_rows]
        ub_in = np.where(np.isnan(given), ub_in, given)
    bad = (lb_in > vals[inner_rows] + 1e-9) | (ub_in < vals[inner_rows] - 1e-9)
    if bad.any():
        i = int(inner_rows[np.flatnonzero(bad)[0]])
        raise ValueError(f"a-priori bounds exclude the true value at {_label(frame.iloc[i], dims)}")
    with np.errstate(invalid="ignore"):
        lb = _sum_bounds(S, lb_in)
        ub = _sum_bounds(S, ub_in)

    # where each input row sits among the model's cells; user margins must add up
    row_cell = np.empty(len(frame), dtype=np.int64)
    row_cell[inner_rows] = np.arange(len(inner_rows))
    margin_rows = np.flatnonzero(is_margin)
    if len(margin_rows):
        codes = np.zeros((len(margin_rows), len(dims)), dtype=np.int64)
        for j, (d, dim) in enumerate(zip(dims, dim_objs, strict=True)):
            index = {lab: i for i, lab in enumerate(dim.labels)}
            col = frame[d].iloc[margin_rows]
            missing = [lab for lab in col if lab not in index]
            if missing:
                raise ValueError(f"margin row with {d}={missing[0]!r}: that label has no inner cell "
                                 "(a margin of nothing must be 0 and can be left out)")
            codes[:, j] = col.map(index).to_numpy(dtype=np.int64)
        found = model.find(codes)
        for n_row, (row, cell) in enumerate(zip(margin_rows, found, strict=True)):
            computed = 0.0 if cell < 0 else float(v_cells[cell])
            given = float(vals[row])
            if abs(given - computed) > 1e-6 * max(1.0, abs(computed)):
                raise ValueError(
                    f"margin {_label(frame.iloc[row], dims)} is {given:g} but its inner cells add up to "
                    f"{computed:g}: the table is not additive")
            if u is not None and cell >= 0 and abs(u[row] - u_cells[cell]) > 1e-6 * max(1.0, u_cells[cell]):
                raise ValueError(
                    f"margin {_label(frame.iloc[row], dims)} has {u[row]:g} units but its inner cells have "
                    f"{u_cells[cell]:g}: the table is not additive")
            if cell < 0:
                raise ValueError(f"margin {_label(frame.iloc[row], dims)} has no inner cell: leave it out")
            row_cell[row] = cell
            del n_row
    return _Table(model, model.labels_frame(), v_cells, u_cells, top_cells, lb, ub, row_cell,
                  inner_rows, negative)


def _check_top(t: np.ndarray, vals: np.ndarray, units: np.ndarray | None, names: list[str],
               rows: pd.DataFrame, dims: Sequence[str]) -> None:
    """The largest contributions must be usable: a NaN or an impossible one would silently
    switch off dominance and p % for that cell (issue 23: a cell whose largest unit holds
    95 % was published). A missing j-th contribution is allowed only where the cell has
    fewer than j units. (A sum of contributions above the cell's value is not refused: they
    are absolute values, and a cell with negative contributions has such sums.)"""
    rank = np.arange(1, t.shape[1] + 1)
    missing = ~np.isfinite(t)
    allowed = np.zeros_like(missing) if units is None else units[:, None] < rank[None, :]
    allowed |= (vals == 0)[:, None]  # an empty cell has no contributions
    bad = missing & ~allowed
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"largest-contribution column {names[j]!r} has a missing or non-numeric value at "
                         f"{_label(rows.iloc[i], dims)}: give 0 where a cell has no such contribution")
    a = np.nan_to_num(np.abs(t), nan=0.0)
    if t.shape[1] > 1:
        rising = (np.diff(a, axis=1) > 1e-9 * np.maximum(a[:, :-1], 1.0)).any(axis=1)
        if rising.any():
            i = int(np.flatnonzero(rising)[0])
            raise ValueError(f"the largest contributions {names} are not in descending order at "
                             f"{_label(rows.iloc[i], dims)}")


def _sum_bounds(S: Any, b: np.ndarray) -> np.ndarray:
    """Bounds of every cell from its inner cells' bounds; NaN where unbounded."""
    finite = np.isfinite(b)
    s = S @ np.where(finite, b, 0.0)
    n_inf = S @ (~finite).astype(float)
    return np.where(n_inf > 0, np.nan, s)


# --------------------------------------------------------------------------- protect
def protect(
    cells: pd.DataFrame,
    *,
    dims: Sequence[str],
    value: str,
    units: str | None = None,
    top: Sequence[str] | None = None,
    hierarchies: Mapping[str, Mapping[Hashable, Sequence[Hashable]]] | None = None,
    rules: Rules | None = None,
    primary: str | None = None,
    cost: str | None = None,
    method: str = "auto",
    singletons: bool | None = None,
    time_limit: float = 10.0,
    progress: ProgressFn | None = None,
    bounds: tuple[str | None, str | None] | None = None,
    margins: str = "hideable",
    solver: str | None = None,
    levels: str = "ours",
    publish: str | None = None,
) -> Protection:
    """Choose secondary cells so that no primary cell can be recovered, and audit the result.

    Args:
        cells: one row per inner cell (margin rows labelled ``"Total"`` or with a
            hierarchy parent are accepted and checked for additivity, then rebuilt).
        dims: the dimension columns (1 to 4 or more).
        value: the cell value column (a count, or a magnitude such as turnover).
        units: the number of contributing units per cell.  Without it, or when it is
            the value column itself, the table is a frequency table (value = count).
        top: columns holding each cell's largest contributions, descending (for the
            dominance and p % rules, and for two-contributor insiders).
        hierarchies: ``{dim: {parent: [parts, ...]}}``, possibly nested; sub-totals
            become margins the attacker knows.
        rules: the rules in force (default :class:`~sdc_magic.config.Rules`).
        primary: name of a bool column of a-priori primary flags.
        cost: ``"value"`` (default from ``rules.cost``; tau-Argus default), ``"cells"``,
            ``"units"``, or the name of a cost column.
        method: ``"optimal"`` (MIP), ``"heuristic"`` or ``"auto"`` (heuristic, then the
            MIP warm-started from its pattern up to 400 cells, within work limits).
        singletons: audit insiders (single contributors) too; default ``rules.singletons``.
        time_limit: the search's work budget, in nominal CPU seconds: converted into
            simplex iterations (:data:`.lp.ITERATIONS_PER_SECOND` each; the clean-up gets
            :data:`CLEANUP_ITERATIONS_PER_SECOND`; a MIP master iteration counts
            :data:`.mip.MASTER_ITERATION_WORK`) and MIP nodes, never read from a clock,
            so the same table gives the same pattern on any machine under any load.  When
            the budget is spent after an audited pattern exists, that pattern is
            returned; before one exists, every cell is hidden, ``audit_ok`` is False,
            ``budget_spent`` is True and ``method`` is ``"none (work budget)"``.
        progress: ``progress(message, fraction)`` called regularly during long runs.
        bounds: ``(lower_column, upper_column)`` of a-priori bounds the attacker knows
            (either may be None).  Default: inner cells ≥ 0, no upper bound; when some
            magnitude is negative, no lower bound either.
        margins: ``"hideable"`` (margins may be suppressed, as in tau-Argus),
            ``"published"`` (every margin is public whatever we do) or ``"primary"``
            (margins are public unless they fail a rule: the display path's model, where a
            margin can be computed from other outputs of the session).
        solver: ``"HiGHS"`` or ``"CBC"`` for the MIP (default: HiGHS when installed).
        publish: name of a bool column: cells (inner rows, or margin rows labelled
            ``"Total"``) already published elsewhere — by an earlier output of the session —
            so they can never be chosen as secondaries (tau-Argus status ``z``).
        levels: ``"ours"`` (default: a threshold primary's interval also reaches the
            threshold) or ``"tau"`` (tau-Argus's: ``FREQ(n, r)`` is r % of the value only,
            r = ``rules.protection``; a dominance / p % primary gets its rule's level
            alone), for like-for-like comparisons with tau-Argus.

    Returns:
        A :class:`Protection`.  When no pattern can protect the primaries, every cell is
        hidden, ``audit_ok`` is False and ``message`` says why.  Bad input raises
        ``ValueError``.  The caller's frame is never modified.
    """
    key = _cache_key(cells, dims, value, units, top, hierarchies, rules, primary, cost, method, singletons,
                     time_limit, bounds, margins, solver, levels, publish)
    cached = _CACHE.get(key) if key is not None else None
    if cached is not None:
        _CACHE.move_to_end(key)
        if progress is not None:
            progress("protect: done", 1.0)  # the same last call as a search
        return _copy(cached)
    result = _search(cells, dims=dims, value=value, units=units, top=top, hierarchies=hierarchies, rules=rules,
                     primary=primary, cost=cost, method=method, singletons=singletons, time_limit=time_limit,
                     progress=progress, bounds=bounds, margins=margins, solver=solver, levels=levels,
                     publish=publish, stored_as=_stored_as(key))
    if key is not None:
        _CACHE[key] = _copy(result)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


#: protections kept for re-displays and re-runs of the same table (least recently used first)
CACHE_SIZE = 64
_CACHE: OrderedDict[str, Protection] = OrderedDict()


def clear_cache() -> None:
    """Forget every cached protection (tests that count the search's work call this)."""
    _CACHE.clear()


def _copy(result: Protection) -> Protection:
    """A copy the caller may change without changing the cache (certificates are never changed)."""
    return dataclasses.replace(result, cells=result.cells.copy(deep=True),
                               requirements=result.requirements.copy(deep=True),
                               certificates=list(result.certificates))


def _cache_key(cells: pd.DataFrame, *args: Any) -> str | None:
    """A fingerprint of everything the search depends on: the cells and every argument.

    The search is deterministic (work budgets, seeded single-threaded solvers), so the same
    fingerprint always has the same answer and a re-display or a re-run of a table costs a
    hash. None (no caching) when an argument has no stable text form.
    """
    try:
        digest = hashlib.sha256()
        digest.update(repr([(str(c), str(t)) for c, t in cells.dtypes.items()]).encode())
        digest.update(pd.util.hash_pandas_object(cells, index=False).to_numpy().tobytes())
        text = repr([_stable(a) for a in args])
        if " at 0x" in text:  # an object without a value repr (e.g. a callable): not cacheable
            return None
        digest.update(text.encode())
        return digest.hexdigest()
    except (TypeError, ValueError):
        return None


def _stored_as(key: str | None) -> str | None:
    """The key of this search's pattern in the store on disk (see :mod:`.patterns`), or None.

    The fingerprint of the code joins the cache key: a pattern found by other code is never used.
    """
    if key is None or patterns.current_store() is None:
        return None
    return hashlib.sha256(f"{key}:{patterns.code_fingerprint()}".encode()).hexdigest()[:40]


def _stable(arg: Any) -> Any:
    if isinstance(arg, Mapping):
        return sorted((repr(k), _stable(v)) for k, v in arg.items())
    if isinstance(arg, (list, tuple)):
        return [_stable(a) for a in arg]
    return arg


def _search(
    cells: pd.DataFrame,
    *,
    dims: Sequence[str],
    value: str,
    units: str | None = None,
    top: Sequence[str] | None = None,
    hierarchies: Mapping[str, Mapping[Hashable, Sequence[Hashable]]] | None = None,
    rules: Rules | None = None,
    primary: str | None = None,
    cost: str | None = None,
    method: str = "auto",
    singletons: bool | None = None,
    time_limit: float = 10.0,
    progress: ProgressFn | None = None,
    bounds: tuple[str | None, str | None] | None = None,
    margins: str = "hideable",
    solver: str | None = None,
    levels: str = "ours",
    publish: str | None = None,
    stored_as: str | None = None,
) -> Protection:
    """The search behind :func:`protect` (see there), without the in-memory cache.

    ``stored_as``: the key of the pattern in the store on disk; a stored pattern replaces the
    search when it passes the same final audit (:func:`_recalled_or_found`).
    """
    t0 = time.monotonic()
    rules = rules or Rules()
    _check_options(method, levels, margins, time_limit)
    singletons = rules.singletons if singletons is None else bool(singletons)
    frequency = units is None or units == value
    cost = cost or rules.cost
    needed = [c for c in (primary,) if c]
    if cost not in COSTS:
        needed.append(cost)
    _check_columns(cells, [*list(dims), value, *needed])
    if cost == "units" and units is None and not frequency:
        raise ValueError("cost='units' needs the units column")
    tick = Ticker(progress)
    tick("protect: building the table model", 0.0, force=True)
    tab = _prepare(cells, dims, value, units, top, hierarchies, bounds, frequency)
    frame = cells.reset_index(drop=True)
    a = tab.value
    unit_counts = a if frequency else tab.units
    is_primary, reasons = _primaries(tab, frame, rules, frequency, unit_counts, primary)
    P, c = _problem(tab, frame, rules, frequency, unit_counts, is_primary, reasons, cost=cost, levels=levels,
                    margins=margins, publish=publish, singletons=singletons)

    # ---- search
    budget = ITERATIONS_PER_SECOND * float(time_limit)  # work units, never a clock (see Ticker)
    work_at_start = work_done()
    found, (lower, upper, pinned) = _recalled_or_found(
        P, stored_as, a, frequency, singletons, tick,
        lambda: _find_pattern(P, method=method, solver=solver, singletons=singletons, time_limit=time_limit,
                              tick=tick, budget=budget, end=work_at_start + budget))
    hidden = found.hidden
    status = np.where(P.primary, "primary", np.where(hidden, "secondary", "safe"))
    for i in np.flatnonzero(hidden & ~P.primary):
        reasons[i] = ["secondary"]
    for i in np.flatnonzero(~hidden):
        reasons[i] = []
    out = _cells_frame(tab, units, frequency, status, lower, upper, reasons)
    total_cost = float(c[hidden & ~P.primary].sum())
    seconds = time.monotonic() - t0
    message = _message(P, found, tab.labels, total_cost, pinned, budget, singletons, margins)
    req = _requirements_frame(P, tab.labels, a)
    tick("protect: done", 1.0, force=True)
    return Protection(out, found.method_name, total_cost, seconds, bool(found.audit_ok), message, req, found.pool,
                      budget_spent=found.budget_spent, work=work_done() - work_at_start)


def _check_options(method: str, levels: str, margins: str, time_limit: float) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if levels not in LEVELS:
        raise ValueError(f"levels must be one of {LEVELS}, got {levels!r}")
    if margins not in MARGINS:
        raise ValueError(f"margins must be one of {MARGINS}, got {margins!r}")
    if time_limit is None or not time_limit > 0 or not np.isfinite(time_limit):
        raise ValueError(f"time_limit must be a finite positive number (a work budget in nominal seconds), "
                         f"got {time_limit!r}")


def _primaries(tab: _Table, frame: pd.DataFrame, rules: Rules, frequency: bool, unit_counts: np.ndarray | None,
               primary: str | None) -> tuple[np.ndarray, list[list[str]]]:
    """The primary cells (the rules' verdicts, plus the a-priori flags) and each cell's reasons."""
    a = tab.value
    n = tab.model.n_cells
    if unit_counts is not None:
        u_facts = unit_counts
    else:
        u_facts = np.where(a != 0, np.inf, 0.0)
    facts = CellFacts(
        stat=np.full(n, "count" if frequency else "sum", dtype=object),
        units=u_facts,
        total=None if frequency else a,
        top=tab.top,
        negative=None if frequency else (a < 0),
        total_abs=None,
    )
    assessment = assess(facts, rules)
    is_primary = assessment.primary.copy()
    reasons: list[list[str]] = [[] for _ in range(n)]
    for i, rs in assessment.reasons.items():
        reasons[i] = [r.rule for r in rs if assessment.primary[i] or r.rule in ("negative", "custom")]
        if not assessment.primary[i]:
            reasons[i] = []
    if primary:
        flags = frame[primary].fillna(False).astype(bool).to_numpy()
        rows = np.flatnonzero(flags)
        for r in rows:
            c = int(tab.row_cell[r])
            is_primary[c] = True
            if "a-priori" not in reasons[c]:
                reasons[c].append("a-priori")
    return is_primary, reasons


def _problem(tab: _Table, frame: pd.DataFrame, rules: Rules, frequency: bool, unit_counts: np.ndarray | None,
             is_primary: np.ndarray, reasons: list[list[str]], *, cost: str, levels: str, margins: str,
             publish: str | None, singletons: bool) -> tuple[Problem, np.ndarray]:
    """The protection problem (levels, bounds, costs, insiders) and the cells' costs."""
    model = tab.model
    n = model.n_cells
    a = tab.value
    lpl, upl = protection_levels(
        a, rules=rules, frequency=frequency, reasons=reasons, top=tab.top, lower_bounds=tab.lb,
        min_width=1.0 if frequency else resolution_of(a[model.is_inner]),
        tau=levels == "tau")
    lpl = np.where(is_primary, lpl, 0.0)
    upl = np.where(is_primary, upl, 0.0)
    L = np.where(np.isnan(tab.lb), np.inf, a - tab.lb)
    U = np.where(np.isnan(tab.ub), np.inf, tab.ub - a)
    L = np.maximum(L, 0.0)
    U = np.maximum(U, 0.0)
    c = _costs(cost, a, unit_counts, frame, tab)
    positive = c[c > 0]
    floor = 1e-3 * (positive.min() if len(positive) else 1.0)
    c_int = np.maximum(c, floor)
    scen_L = np.full(n, np.nan)
    scen_U = np.full(n, np.nan)
    if singletons and unit_counts is not None:
        one = unit_counts == 1
        scen_L[one] = 0.0
        scen_U[one] = 0.0
        if tab.top is not None:
            two = (unit_counts == 2) & np.isfinite(tab.top[:, 0])
            scen_L[two] = np.maximum(a[two] - tab.top[two, 0], 0.0)
            scen_U[two] = U[two]
    hideable = np.ones(n, dtype=bool)
    if margins == "published":
        hideable = model.is_inner.copy()
    elif margins == "primary":  # margins are public unless they fail a rule themselves
        hideable = model.is_inner | is_primary
    if publish:
        forced = np.zeros(n, dtype=bool)
        forced[tab.row_cell[frame[publish].fillna(False).astype(bool).to_numpy()]] = True
        hideable &= ~(forced & ~is_primary)
    top1 = insider_unit = own_lpl = own_upl = None
    if singletons and tab.top is not None and not frequency:
        top1, insider_unit, own_lpl, own_upl = _own_largest_levels(
            a, tab.top, unit_counts, rules, is_primary,
            1.0 if frequency else resolution_of(a[model.is_inner]))
    P = Problem(model.M, a, L, U, is_primary, hideable, lpl, upl, c_int, scen_L, scen_U,
                S=model.S.tocsr(), top1=top1, insider_unit=insider_unit, own_lpl=own_lpl, own_upl=own_upl,
                boxes=Boxes.of(model))
    return P, c


@dataclass
class _Pattern:
    """What the search found: the pattern, its certificates and how it ended."""

    hidden: np.ndarray
    pool: list[Flow]
    method_name: str
    audit_ok: bool = True
    budget_spent: bool = False
    unprotectable: list[tuple[int, int]] = field(default_factory=list)


def _mip_choice(n: int, method: str, solver: str | None, time_limit: float) -> tuple[bool, str | None]:
    """Whether the MIP runs after the heuristic, and with which solver."""
    offline = float(time_limit) >= OFFLINE_SECONDS
    use_optimal = method == "optimal" or (method == "auto" and (
        n <= AUTO_OPTIMAL_MAX_CELLS or (offline and n <= AUTO_OPTIMAL_MAX_CELLS_OFFLINE)))
    if not use_optimal:
        return False, solver  # (not even imported: PuLP alone is a tenth of a second on a first display)
    from .mip import available_solvers

    solvers = available_solvers()
    chosen = solver or (solvers[0] if solvers else None)
    if use_optimal and chosen not in solvers:
        if method == "optimal" or solver is not None:
            raise ValueError(f"MIP solver {chosen!r} is not available here (available: {solvers})")
        use_optimal = False
    return use_optimal, chosen


def _find_pattern(P: Problem, *, method: str, solver: str | None, singletons: bool, time_limit: float,
                  tick: Ticker, budget: float, end: float) -> _Pattern:
    """The heuristic, its clean-up and (when chosen) the MIP, within the work budget."""
    n = P.n
    use_optimal, chosen = _mip_choice(n, method, solver, time_limit)
    pool: list[Flow] = []
    tick.end = end  # every loop of the search stops when the budget is spent
    set_budget(budget)  # ... and every LP inside them
    work = int(CLEANUP_ITERATIONS_PER_SECOND * float(time_limit))
    try:
        blocked = _unhideable_primaries(P)
        if blocked:
            raise Infeasible(blocked)
        hidden, pool = repair(P, P.primary.copy(), [], singletons=singletons, tick=tick)
        method_name = "heuristic+repair"
        hidden, pool, complete = cleanup(P, hidden, pool, singletons=singletons, tick=tick, work=work)
        if use_optimal:
            # deterministic work limits under "auto" (nodes per master solve, master
            # rounds): the same table gives the same pattern whatever the load
            nodes, rounds = (AUTO_MIP_NODES, AUTO_MIP_ROUNDS) if method == "auto" else (
                max(int(OPTIMAL_NODES_PER_SECOND * float(time_limit)), 1), None)
            from .mip import optimal

            hidden, pool, status, _lower = optimal(
                P, singletons=singletons, tick=tick, solver=chosen, incumbent=(hidden, pool),
                nodes=nodes, rounds=rounds)
            method_name = f"optimal/{chosen}" + ("" if status == "optimal" else
                                                 " (work limit: best audited pattern so far)")
        elif not complete:
            method_name += " (clean-up cut short by its budget)"
        found = _Pattern(hidden, pool, method_name)
    except Infeasible as exc:
        found = _Pattern(np.ones(n, dtype=bool), pool, "none (infeasible)", audit_ok=False,
                         unprotectable=exc.failures)
    except WorkLimit:
        found = _Pattern(np.ones(n, dtype=bool), pool, BUDGET_SPENT_METHOD, audit_ok=False, budget_spent=True)
    finally:
        set_budget(np.inf)
    tick.end = np.inf  # the final audit and the intervals always run to the end
    return found


def _recalled_or_found(P: Problem, stored_as: str | None, a: np.ndarray, frequency: bool, singletons: bool,
                       tick: Ticker, search: Callable[[], _Pattern]
                       ) -> tuple[_Pattern, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The pattern (recalled from the store on disk, else searched) after its final audit.

    A recalled pattern is trusted for nothing: it must fit the table, hide every primary and,
    when it was found protected, pass the exact final audit again (certificates and intervals
    computed afresh, so the outcome is the search's to the digit); otherwise it is discarded
    and the search runs. Only a searched pattern is stored (before the final audit publishes
    pinned secondaries again, so that a recall repeats the same final steps).
    """
    store = patterns.current_store() if stored_as is not None else None
    hit = store.get(stored_as) if store is not None and stored_as is not None else None
    if store is not None and stored_as is not None and hit is not None:
        mask = hit.mask() if hit.n_cells == P.n else None
        if mask is not None and mask[P.primary].all():
            tick("protect: pattern of an earlier run", None, force=True)
            found = _Pattern(mask, patterns.checked_certificates(P, mask, hit.deviations), hit.method_name, hit.audit_ok,
                             hit.budget_spent, list(hit.unprotectable))
            audited = _final_audit(P, found, a, frequency, singletons, tick)
            if found.audit_ok or not hit.audit_ok:
                return found, audited
        store.discard(stored_as)
    found = search()
    if store is not None and stored_as is not None:
        store.put(stored_as, patterns.StoredPattern(P.n, np.flatnonzero(found.hidden), found.method_name,
                                                    bool(found.audit_ok), bool(found.budget_spent),
                                                    list(found.unprotectable),
                                                    patterns.certificates_of(found.pool) if frequency else ()))
    # ---- final audit: certificates for every attacker, then exact intervals
    return found, _final_audit(P, found, a, frequency, singletons, tick)


def _final_audit(P: Problem, found: _Pattern, a: np.ndarray, frequency: bool, singletons: bool, tick: Ticker
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Certificates for every attacker, then exact intervals; updates ``found``.

    Returns (lower, upper, pinned): the intervals and the secondaries published again.
    """
    tick("audit: final check", None, force=True)
    if found.audit_ok:
        cert = certify(P, found.hidden, found.pool, singletons=singletons, tick=tick)
        found.pool = cert.pool
        if cert.failures:
            found.audit_ok = False
            found.unprotectable = cert.failures
    lower, upper = _checked_intervals(P, found, a, frequency, tick)
    # a secondary the attacker recovers exactly protects nothing: publish it, but only when the
    # pattern without it still passes the whole audit. "Exactly" is a width within 10^-9 of the
    # cell's own value, which beside a huge cell is wide enough to protect a small one (red team:
    # a hidden 2.5e10 of width 20 published as recovered, and the one-firm cell of 40 beside it
    # followed by subtraction from its margin, at 'suppressed')
    secondary = found.hidden & ~P.primary
    pinned = secondary & (upper - lower <= 1e-9 * np.maximum(np.abs(a), 1.0))
    if found.audit_ok and pinned.any():
        trial = found.hidden & ~pinned
        cert = certify(P, trial, found.pool, singletons=singletons, tick=tick)
        if cert.failures:
            pinned = np.zeros_like(pinned)
        else:
            kept = _Pattern(trial, cert.pool, found.method_name)
            trial_lower, trial_upper = _checked_intervals(P, kept, a, frequency, tick)
            if kept.audit_ok:
                found.hidden, found.pool = trial, kept.pool
                lower, upper = trial_lower, trial_upper
            else:
                pinned = np.zeros_like(pinned)
    return lower, upper, pinned


def _checked_intervals(P: Problem, found: _Pattern, a: np.ndarray, frequency: bool, tick: Ticker
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Exact intervals of ``found``'s pattern; its audit fails where they fall short of a level."""
    lower, upper = intervals(P, found.hidden, tick=tick, seeds=found.pool)
    lower, upper = _tidy(lower, upper, a, frequency)
    req_k, req_s, req_a = P.requirements()
    if found.audit_ok:
        # the exact intervals must agree with the certificates (outsider)
        for k, s, amt in zip(req_k, req_s, req_a, strict=True):
            reach = upper[k] - a[k] if s > 0 else a[k] - lower[k]
            if reach < amt * (1 - 1e-6) - 1e-9:
                found.audit_ok = False
                found.unprotectable.append((int(np.flatnonzero(req_k == k)[0]), -1))
    return lower, upper


def _cells_frame(tab: _Table, units: str | None, frequency: bool, status: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray, reasons: list[list[str]]) -> pd.DataFrame:
    a = tab.value
    out = tab.labels.copy()
    out["value"] = a
    if units is not None and not frequency:
        out["units"] = tab.units
    elif units is not None:
        out["units"] = a
    out["status"] = status
    out["lower"] = lower
    out["upper"] = upper
    out["reasons"] = reasons
    return out


def _message(P: Problem, found: _Pattern, labels: pd.DataFrame, total_cost: float, pinned: np.ndarray,
             budget: float, singletons: bool, margins: str) -> str:
    """What happened, in plain words: the protection, the spent budget or why it failed."""
    if found.audit_ok:
        n_sec = int((found.hidden & ~P.primary).sum())
        message = (f"{int(P.primary.sum())} primary cell(s) protected with {n_sec} secondary cell(s) "
                   f"(cost {total_cost:g}); every primary passed the audit"
                   + (" against outsiders and single contributors." if singletons else " against outsiders."))
        if pinned.any():
            message += f" {int(pinned.sum())} recoverable secondary cell(s) were published again."
        return message
    if found.budget_spent:
        return (f"the protection search used its whole work budget ({int(budget):,} simplex iterations) "
                "before it could prove any pattern safe, so every cell is hidden and an output checker "
                "decides. Aggregate the table, or protect it offline with "
                "sdc_magic.protect.protect(..., time_limit=...) and a larger budget.")
    req_k, req_s, req_a = P.requirements()
    return _explain(found.unprotectable, P, labels, req_k, req_s, req_a, margins)


def _requirements_frame(P: Problem, labels: pd.DataFrame, a: np.ndarray) -> pd.DataFrame:
    req_k, req_s, req_a = P.requirements()
    req = labels.iloc[req_k].reset_index(drop=True)
    req["value"] = a[req_k]
    req["direction"] = np.where(req_s > 0, "up", "down")
    req["must_reach"] = a[req_k] + req_s * req_a
    return req


def _own_largest_levels(a: np.ndarray, top: np.ndarray, units: np.ndarray | None, rules: Rules,
                        is_primary: np.ndarray, min_width: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Contributions and reduced levels for the insider that is a primary's largest unit.

    Sensitivity rules for magnitude tables protect a cell's *largest* contributors
    (dominance (n, k): their share; p %: the largest against the second largest's
    estimate — INSEE "Méthodes suppressives", magnitude tables; Hundepool et al.,
    *Statistical Disclosure Control*, Wiley 2012, §4.2 on sensitivity rules and the
    respondent as intruder).  The largest unit itself is therefore no attacker of its
    own cell; it must only not learn the total of the *other* contributors,
    ``R = T − x1``, more precisely than the protection interval (m % of R, at least the
    minimal width; nothing when R = 0).  Returns (top1, insider_unit, own_lpl, own_upl).
    """
    x1 = np.abs(top[:, 0]) if top.shape[1] else np.full(len(a), np.nan)
    n_units = np.full(len(a), np.nan) if units is None else np.asarray(units, dtype=float)
    insider_unit = np.where(n_units == 1, np.abs(a), np.where(n_units == 2, x1, np.nan))
    rest = np.maximum(np.abs(a) - np.nan_to_num(x1, nan=np.inf), 0.0)
    m = rules.protection / 100.0
    level = np.where(rest > 0, np.maximum(m * rest, min_width), 0.0)
    own_upl = np.where(is_primary & np.isfinite(x1), level, np.nan)
    own_lpl = np.where(is_primary & np.isfinite(x1), np.minimum(level, rest), np.nan)
    return x1, insider_unit, own_lpl, own_upl


def _tidy(lower: np.ndarray, upper: np.ndarray, a: np.ndarray, frequency: bool
          ) -> tuple[np.ndarray, np.ndarray]:
    """Round LP noise (1e-9) away so that whole-number tables show whole-number intervals."""
    scale = np.maximum(np.abs(a), 1.0)
    with np.errstate(invalid="ignore"):
        _round_close(lower, scale)
        _round_close(upper, scale)
    return lower, upper


def _round_close(arr: np.ndarray, scale: np.ndarray) -> None:
    fin = np.isfinite(arr)
    r = np.where(fin, np.round(np.where(fin, arr, 0.0)), arr)
    close = fin & (np.abs(np.where(fin, arr - r, 0.0)) <= 1e-7 * scale)
    arr[close] = r[close]


def _costs(cost: str, a: np.ndarray, units: np.ndarray | None, frame: pd.DataFrame, tab: _Table) -> np.ndarray:
    if cost == "value":
        return np.abs(a)
    if cost == "cells":
        return np.ones(len(a))
    if cost == "units":
        if units is None:
            raise ValueError("cost='units' needs the units column")
        return np.asarray(units, dtype=float)
    col = pd.to_numeric(frame[cost], errors="coerce").to_numpy(dtype=float)
    inner = col[tab.inner_rows]
    if not np.isfinite(inner).all() or (inner < 0).any():
        raise ValueError(f"cost column {cost!r} must hold non-negative numbers")
    return tab.model.S @ inner


def _unhideable_primaries(P: Problem) -> list[tuple[int, int]]:
    req_k, _, _ = P.requirements()
    bad = [int(r) for r, k in enumerate(req_k) if not P.hideable[k]]
    return [(r, -1) for r in bad]


def _explain(failures: list[tuple[int, int]], P: Problem, labels: pd.DataFrame, req_k: np.ndarray,
             req_s: np.ndarray, req_a: np.ndarray, margins: str) -> str:
    if not failures:
        return "the audit failed; every cell is hidden"
    parts: list[str] = []
    for r, s in failures:
        k = int(req_k[r]) if len(req_k) else -1
        where = " / ".join(str(v) for v in labels.iloc[k].tolist()) if k >= 0 else "?"
        if s >= 0:
            who = " / ".join(str(v) for v in labels.iloc[s].tolist())
            text = f"{where} (the single contributor of {who} can narrow it down)"
        elif not P.hideable[k]:
            text = f"{where} (it fails the rules but is a published margin)"
        else:
            text = where
        if text not in parts:
            parts.append(text)
    more = f" and {len(parts) - 5} more" if len(parts) > 5 else ""
    parts = parts[:5]
    hint = (" Margins are treated as published (margins='published'), so they cannot be hidden."
            if margins == "published" else "")
    return (UNPROTECTABLE + " " + "; ".join(parts) + more
            + ": whatever else is hidden, the published margins and a-priori bounds pin these cells "
              "within their protection interval. Every cell is hidden; aggregate the table instead."
            + hint)


# --------------------------------------------------------------------------- audit
def audit(
    cells: pd.DataFrame,
    *,
    dims: Sequence[str],
    value: str,
    hidden: str | Sequence[bool] | np.ndarray | pd.Series,
    hierarchies: Mapping[str, Mapping[Hashable, Sequence[Hashable]]] | None = None,
    bounds: tuple[str | None, str | None] | None = None,
) -> pd.DataFrame:
    """The attacker's exact interval for every hidden cell of a suppression pattern.

    The attacker knows every published cell, every margin (totals over each subset of
    dimensions and every hierarchy sub-total) unless that margin's row is given here
    and flagged hidden, and the a-priori bounds (inner cells ≥ 0 unless some value is
    negative; ``bounds=(lower_column, upper_column)`` adds declared ones).

    Args:
        hidden: a bool column name, or one flag per row of ``cells``.

    Returns:
        One row per hidden cell: the dims, ``value``, ``lower``, ``upper``.
    """
    if isinstance(hidden, str):
        _check_columns(cells, [hidden])
        flags = cells[hidden].fillna(False).astype(bool).to_numpy()
    else:
        flags = np.asarray(hidden, dtype=bool)
        if len(flags) != len(cells):
            raise ValueError(f"hidden has {len(flags)} flags for {len(cells)} rows")
    tab = _prepare(cells, dims, value, None, None, hierarchies, bounds, frequency=False)
    a = tab.value
    n = tab.model.n_cells
    hid = np.zeros(n, dtype=bool)
    hid[tab.row_cell[flags]] = True
    L = np.maximum(np.where(np.isnan(tab.lb), np.inf, a - tab.lb), 0.0)
    U = np.maximum(np.where(np.isnan(tab.ub), np.inf, tab.ub - a), 0.0)
    zeros = np.zeros(n)
    P = Problem(tab.model.M, a, L, U, zeros.astype(bool), np.ones(n, bool), zeros, zeros, np.ones(n),
                np.full(n, np.nan), np.full(n, np.nan))
    lower, upper = intervals(P, hid)
    lower, upper = _tidy(lower, upper, a, False)
    out = tab.labels.copy()
    out["value"] = a
    out["lower"] = lower
    out["upper"] = upper
    return out[hid].reset_index(drop=True)


def _public_names() -> None:
    """``sdc_magic.protect.audit`` is this module's :func:`audit`, as the package documents: importing
    the submodule of the same name (``protect/audit.py``, which this module needs) set the package
    attribute to the submodule, and the package resolves its names lazily (``protect/__init__``),
    so ``from sdc_magic.protect import audit`` would have given the module."""
    import sys

    package = sys.modules[__name__.rpartition(".")[0]]
    package.audit = audit  # type: ignore[attr-defined]


_public_names()
