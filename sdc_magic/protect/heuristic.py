"""Fast secondary suppression: cheapest-cover flows, then audit and repair.

Why this shape: the attacker is beaten for a primary when some alternative table
moves it by its protection level while agreeing with everything published.  Such a
deviation is a flow through the relation system; hiding exactly the cells the flow
touches is a valid pattern for that primary.  So each round

1. audits the current pattern (:func:`.audit.certify`), collecting the
   (primary, direction, attacker) triples that still fail;
2. covers them one at a time, each by the cheapest flow it can find (cells already
   hidden are free, a new cell costs its suppression cost spread over the amount of
   flow it can carry: the usual linearisation of the fixed cost, as in the
   Fischetti–Salazar / sdcTable incremental heuristics), skipping those the cells
   hidden meanwhile already protect, and hides every cell that flow touches.  On small
   tables the flow is the whole-table LP's (from a warm basis); from
   :data:`LOCAL_COVER_CELLS` cells on (:data:`LOCAL_COVER_CELLS_3D` for three or more
   dimensions), or on a large pattern, it is found among the
   cells near the primary first (a box or a small LP, :mod:`.local`), the whole-table LP
   deciding only what is not found nearby.  (Until stop 53 tables above 10,000 cells
   with 24 or more failures first asked one elastic LP for a flow meeting all of them:
   over 13,000 cells that LP could spend the whole work budget, 186 s, and leave every
   cell hidden; the local covers give cheaper patterns on every table measured.)
3. repeats until the audit passes.  Hiding more cells never helps the outsider, so
   the loop only moves forward; a new single-contributor secondary adds an insider,
   which the next audit checks.

A final clean-up tries to publish again the most expensive secondaries one by one,
keeping each removal only when the audit still passes.  On small patterns a trial is first
rejected without any LP when bounds propagated over the relations (:mod:`.bounds`) prove some
primary can no longer move far enough (:func:`_short_by_bounds`).  A trial then asks again the
questions (requirement, attacker) that failed the latest trials (:func:`_refuted`: one
LP proving infeasibility rejects it), and every attacker LP of the audits starts from the
basis that answered the same question last time (``basis_key`` of
:meth:`.lp.Attacker.reach`); neither changes a verdict, only the work it costs (seed
table: 92,798 → 70,873 simplex iterations for the same pattern).
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from .audit import (
    Problem,
    Ticker,
    WorkLimit,
    certify,
    flow_requirements,
    one_per_cell,
    scenario_caps,
)
from .bounds import MAX_ROUNDS, bounds_per_scenario, propagated_bounds, short_of
from .flows import Cancellation
from .local import COVER_SIZES, LocalAttacker
from .lp import Flow, work_done

#: Above this many cells, failed requirements are covered in decreasing order of their level
#: (see _cover_one_by_one); below it, in requirement order, as before (measured both ways: the
#: largest first gains on the 100 x 50 turnover table, loses 2-3 % on ACRO's 12x6x10 means and a
#: 25x20x10 count table, gains 1 % on the seed table; so the tables up to 5,000 cells keep
#: their patterns, and the tables from 5,000 to 10,000 cells, covered by one elastic LP per
#: batch until then, gain most: 34,403 -> 19,692 on the 100 x 50 table, tau-Argus MOD 19,788).
LARGEST_FIRST_ABOVE = 5000
#: From this many cells on, a small pattern's failures are covered from the cells near each
#: primary (a box or a local LP, see ``LocalAttacker.cheapest_cover``) before any whole-table
#: covering LP: over 12,000 cells each of those took 1-2 s. Measured against the whole-table
#: covers (docs/performance.md, stop 53): secondaries worth 88,710 -> 91,582 (+3 %) on a
#: 10,000-cell table of sums, 3,718,477 -> 3,629,509 on a 6,000-cell one, 19,692 -> 18,611 on
#: the shared 100 x 50 turnover table (tau-Argus MOD 19,788), at 2-60x less CPU.
LOCAL_COVER_CELLS = 5000
#: ... and from this many cells on when the table has three or more dimensions (most cells in
#: three relations or more), where the whole-table cover is the slowest: 4-D tables of 2,600-4,000
#: cells took 17-93 s (one ran out of its work budget and hid 3,742 cells), 0.5-19 s now, within
#: -9 % to +6 % of the secondaries' cost. A 2-D table keeps the whole-table cover below
#: LOCAL_COVER_CELLS: its LPs are cheap, and a 40 x 60 count table lost 33 % with local covers.
LOCAL_COVER_CELLS_3D = 1000
#: Clean-up trials on large patterns audit only the requirements whose certificates the
#: published cell moved (same verdicts as the whole cheap audit, see ``certify(only=...)``;
#: ``tests/test_protect_local.py`` compares both).
INCREMENTAL_CLEANUP = True


class Infeasible(Exception):
    """No pattern protects some primaries; ``failures`` names (requirement, insider)."""

    def __init__(self, failures: list[tuple[int, int]]) -> None:
        super().__init__("infeasible")
        self.failures = failures


def _cover_weights(P: Problem, cand: np.ndarray, hidden: np.ndarray, level: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    c = P.cost[cand]
    cap_up = np.minimum(P.U[cand], level)
    cap_dn = np.minimum(P.L[cand], level)
    tiny = 1e-9 * max(level, 1e-9)
    w_up = c / np.maximum(cap_up, tiny)
    w_dn = c / np.maximum(cap_dn, tiny)
    free = hidden[cand]
    # hidden cells are free; a tiny weight keeps the flow short
    eps = 1e-6 * (np.min(c[c > 0]) if np.any(c > 0) else 1.0) / max(level, 1e-9)
    w_up = np.where(free, eps, w_up + eps)
    w_dn = np.where(free, eps, w_dn + eps)
    return w_up, w_dn


def repair(P: Problem, hidden: np.ndarray, pool: list[Flow], *, singletons: bool, tick: Ticker,
           max_rounds: int = 10_000) -> tuple[np.ndarray, list[Flow]]:
    """Hide more cells until the audit passes; raises :class:`Infeasible` when impossible."""
    hidden = hidden.copy()
    req_k, _, _ = P.requirements()
    cand = np.flatnonzero(P.hideable | hidden)
    hopeless: set[tuple[int, int]] = set()
    before: tuple[bytes, list[tuple[int, int]]] | None = None
    for _ in range(max_rounds):
        # large patterns: cheap searches only; each reported failure is checked before
        # it is covered (below), and the caller's final audit is exact
        cert = certify(P, hidden, pool, singletons=singletons, tick=tick, exact=not LocalAttacker.worth(hidden),
                       outsider_first=True)
        pool = cert.pool
        fails = [f for f in cert.failures if f not in hopeless]
        if not fails:
            if hopeless:
                raise Infeasible(sorted(hopeless))
            return hidden, pool
        # a round that hid nothing and left the same failures will be repeated forever: covering
        # flows that the audit does not count (a red team's table of values around 1e-14, below
        # the solver's tolerances, spun 10,000 rounds with a growing pool: minutes, not a verdict)
        state = (hidden.tobytes(), sorted(fails))
        if state == before:
            raise RuntimeError("repair made no progress: the attacker LPs and the audit disagree on this table "
                               "(values far below or above the solvers' tolerances?)")
        before = state
        by_scen: dict[int, list[int]] = {}
        for r, s in fails:
            by_scen.setdefault(s, []).append(r)
        for s in sorted(by_scen):
            tick("protect: choosing secondary cells", None)
            rs = np.array(sorted(set(by_scen[s])), dtype=np.int64)
            batch = one_per_cell(rs, req_k)
            _cover_one_by_one(P, batch, s, hidden, pool, hopeless, cand, tick)
    raise RuntimeError("repair did not converge")


def _amounts(P: Problem, batch: np.ndarray, s: int) -> np.ndarray:
    """The levels of requirements ``batch`` against attacker s (−1: the outsider)."""
    req_k, req_s, req_a = P.requirements()
    if s < 0:
        return req_a[batch]
    return np.array([P.insider_amount(int(req_k[r]), s, int(req_s[r]), float(req_a[r])) for r in batch])


def _cover_one_by_one(P: Problem, batch: np.ndarray, s: int, hidden: np.ndarray, pool: list[Flow],
                      hopeless: set[tuple[int, int]], cand: np.ndarray, tick: Ticker) -> None:
    """Greedy covering of failed requirements, each from the warm basis of the last one.

    A requirement that the cells hidden meanwhile already protect is skipped; the
    others get the cheapest flow over every hideable cell (hidden ones are free),
    whose cells are then hidden.  Updates ``hidden``, ``pool`` and ``hopeless``.
    """
    req_k, req_s, req_a = P.requirements()
    if P.n > LARGEST_FIRST_ABOVE:
        # the largest levels first (stable: then by requirement): a flow that protects a large
        # primary often protects the small ones beside it, which are then skipped, whereas
        # small ones covered first pick cells the large ones cannot use (100 x 50 turnover
        # table of the shared reference benchmark: secondaries worth 21,365 -> 19,692)
        batch = batch[np.argsort(-_amounts(P, batch, s), kind="stable")]
    allowed = np.zeros(P.n, dtype=bool)
    allowed[cand] = True
    att = P.attacker_all(hidden)
    cov = P.cover(allowed)
    caps = scenario_caps(P, s) if s >= 0 else (P.L, P.U)
    att.set_caps(*caps)
    cov.set_caps(*caps)
    everything = np.arange(P.n)
    # large patterns: small LPs around the primary first (a check over the hidden cells,
    # then the cheapest cover among the cells nearby); the whole-table LPs decide the rest.
    # Large tables with a small pattern: the same, the cover being the cheaper of a box and
    # the first local LP's flow (LocalAttacker.cheapest_cover)
    near_hidden = near_cover = None
    large_pattern = LocalAttacker.worth(hidden)
    if large_pattern or P.n >= LOCAL_COVER_CELLS or (P.n >= LOCAL_COVER_CELLS_3D and _three_way(P)):
        near_hidden = LocalAttacker(P.M, P.Mc, hidden, P._weights(), boxes=P.boxes)
        rank = np.where(hidden, 0.0, 1.0 + P.cost / max(float(P.cost.max()), 1e-12))
        near_cover = LocalAttacker(P.M, P.Mc, allowed | hidden, P._weights(), rank=rank, sizes=COVER_SIZES)
    try:
        for r in batch:
            tick("protect: choosing secondary cells", None)
            r = int(r)
            k, sign, amt = int(req_k[r]), int(req_s[r]), float(req_a[r])
            if s >= 0:
                amt = P.insider_amount(k, s, sign, amt)
                if amt <= 0:
                    continue
            if near_hidden is not None and near_cover is not None:
                done = near_hidden.reach(k, sign, amt, *caps)
                if done is not None:
                    pool.append(done)
                    continue
                w_up, w_dn = _cover_weights(P, everything, hidden, amt)
                near_cover.rank = np.where(hidden, 0.0, near_cover.rank)
                near_cover.set_weights(w_up, w_dn)
                if large_pattern:
                    flow = near_cover.reach(k, sign, amt, *caps)
                else:
                    flow = near_cover.cheapest_cover(k, sign, amt, *caps, hidden=hidden, cost=P.cost, boxes=P.boxes)
                if flow is not None:
                    hidden[flow.idx] = True
                    pool.append(flow)
                    continue
            # (the whole-table cover below would answer this too, hidden cells costing
            # nothing, but over every cell it is several times slower: 4.6 s against
            # 0.8 s per LP on 50x40x10)
            att.set_hidden(hidden)
            done = att.reach(k, sign, amt)
            if done is not None:
                pool.append(done)
                continue
            w_up, w_dn = _cover_weights(P, everything, hidden, amt)
            cov.set_weights(w_up, w_dn)
            flow = cov.reach(k, sign, amt)
            if flow is None:
                hopeless.add((r, s))
                continue
            hidden[flow.idx] = True
            pool.append(flow)
    finally:
        att.set_caps(P.L, P.U)
        cov.set_caps(P.L, P.U)


def _three_way(P: Problem) -> bool:
    """True when most cells of the table lie in three relations or more (3 or more dimensions)."""
    degree = np.diff(P.Mc.indptr)
    return bool(len(degree)) and float(np.median(degree)) >= 3


def cleanup(P: Problem, hidden: np.ndarray, pool: list[Flow], *, singletons: bool, tick: Ticker,
            work: int | None = None) -> tuple[np.ndarray, list[Flow], bool]:
    """Publish again secondaries that are not needed (most expensive first).

    ``work`` bounds the simplex iterations the trials may spend (:func:`.lp.work_done`):
    a budget in deterministic work units, so that the same table always gets the same
    pattern whatever the machine's load; the ticker's budget (the whole search's) cuts it
    too, keeping the last audited pattern.  Returns (hidden, pool, complete) where complete
    is False when a budget cut the pass short.
    """
    secondary = np.flatnonzero(hidden & ~P.primary)
    order = secondary[np.argsort(-P.cost[secondary], kind="stable")]
    start = work_done()
    index: _PoolIndex | None = None
    killers: list[tuple[int, int]] = []  # (requirement, attacker) that failed trials, latest first
    try:
        for n_done, i in enumerate(order):
            if work is not None and work_done() - start >= work:
                return hidden, pool, False
            tick("protect: removing unneeded secondary cells", n_done / max(len(order), 1))
            trial = hidden.copy()
            trial[i] = False
            if _pins_a_primary(P, trial, int(i), singletons):
                continue
            if INCREMENTAL_CLEANUP and LocalAttacker.worth(trial):
                # large patterns: a cheap audit of the requirements whose certificates
                # moved cell i, the others keeping theirs (see certify's ``only``); what it
                # cannot certify keeps the cell hidden (the final audit is exact either way)
                if index is None or index.pool is not pool:
                    index = _PoolIndex(P, pool)
                moved, touched, sub_ids = index.trial(int(i))
                sub = [pool[j] for j in sub_ids.tolist()]
                cert = certify(P, trial, sub, singletons=singletons, tick=tick, stop_at_first=True,
                               exact=False, only=touched,
                               cancel=Cancellation([pool[j] for j in moved.tolist()], int(i), P.Mc))
                if not cert.failures:
                    hidden = trial
                    gone = set(moved.tolist())
                    pool = [f for j, f in enumerate(pool) if j not in gone] + cert.pool[len(sub):]
                continue
            short, bounds = _short_by_bounds(P, trial)
            if short is not None:
                # a requirement no deviation can meet any more (its propagated bound is below the
                # level): rejected without the LPs that would fail it (small patterns only: on large
                # ones the cheap audit above rejects the same trials without LPs, 25x20x10: 8 of 37)
                continue
            kept = [f for f in pool if trial[f.idx].all()]
            lost = [f for f in pool if not trial[f.idx].all() and trial[f.idx].sum() == len(f.idx) - 1]
            cancel = Cancellation(lost, int(i), P.Mc)
            # a rejected trial's new certificates are kept: their cells are hidden in the trial,
            # hence in the pattern, which keeps cell i too (the certificates a rejected trial
            # found were lost before, and the next trials asked the same questions again)
            n_kept = len(kept)
            if _refuted(P, trial, kept, killers, singletons, cancel) is not None:
                pool = pool + kept[n_kept:]
                continue
            short = _insider_short(P, bounds, int(i)) if singletons and bounds is not None else None
            if short is not None:
                pool = pool + kept[n_kept:]
                _remember(killers, short)
                continue
            cert = certify(P, trial, kept, singletons=singletons, tick=tick, stop_at_first=True, cancel=cancel)
            if not cert.failures:
                hidden = trial
                pool = cert.pool
            else:
                pool = pool + cert.pool[n_kept:]
                _remember(killers, cert.failures[0])
    except WorkLimit:
        return hidden, pool, False
    return hidden, pool, True


#: A clean-up trial first asks again the questions (requirement, attacker) that failed the
#: latest trials, at most this many: on the seed table 19 of the 45 failed trials failed on
#: a question that had failed before, after 5-50 LPs each on the others.
KILLERS = 8


def _remember(killers: list[tuple[int, int]], failure: tuple[int, int]) -> None:
    """Put the question a trial failed on first (see :data:`KILLERS`)."""
    if failure in killers:
        killers.remove(failure)
    killers.insert(0, failure)


def _refuted(P: Problem, trial: np.ndarray, kept: list[Flow], killers: list[tuple[int, int]],
             singletons: bool, cancel: Cancellation | None = None) -> tuple[int, int] | None:
    """A question of ``killers`` that has no certificate under ``trial`` (proved by an LP), or None.

    Why: a trial of the clean-up is rejected at the first requirement and attacker it
    cannot certify, and certify asks the outsider's requirements first, then the
    insiders'; the question that failed the last trials often fails this one too, after
    all the others were certified for nothing.  Asked first, it fails the trial with one
    LP.  Only a proof counts: the same LP certify would solve (the outsider's weighted
    model, or the insider's cost-free one with its ranges) ending *infeasible*.  Anything
    else leaves the verdict to certify; a certificate found here joins ``kept``, where
    certify takes it up (checked like any other).  A question certify would not ask (an
    insider no longer hidden, the primary's own or owner cell, a zero level) is skipped.
    """
    req_k, req_s, req_a = P.requirements()
    for r, s in killers[:KILLERS]:
        k, sign, amt = int(req_k[r]), int(req_s[r]), float(req_a[r])
        L, U = P.L, P.U
        if s >= 0:
            if not singletons or not trial[s] or s == k or s in P.owners(k):
                continue
            amt = P.insider_amount(k, s, sign, amt)
            if amt <= 0:
                continue
            L, U = scenario_caps(P, s)
        if any(_meets(f, P, k, sign, amt, s) for f in kept):
            continue
        paired = cancel.find(k, sign, amt, L, U) if cancel is not None else None
        if paired is not None:
            kept.append(paired)
            continue
        lp = P.feasibility(trial) if s >= 0 else P.attacker(trial)
        lp.set_caps(L, U)
        try:
            flow = lp.reach(k, sign, amt, basis_key=(r, s))
        finally:
            lp.set_caps(P.L, P.U)
        if flow is not None:
            kept.append(flow)
        elif lp.last_status == highspy.HighsModelStatus.kInfeasible:
            _remember(killers, (r, s))
            return r, s
    return None


def _short_by_bounds(P: Problem, trial: np.ndarray) -> tuple[tuple[int, int] | None, _TrialBounds | None]:
    """(requirement, −1) the outsider can no longer meet under ``trial``, proved without an LP; or None.

    The bounds propagated over the relations (:mod:`.bounds`) contain every deviation the
    attacker LP could find, so a primary whose bound stays short of its level has no
    certificate: certify would reject the trial too, after solving LPs (17 per rejected trial
    on the seed table). The margin (10^-6 of the level) is wider than the tolerances a
    certificate is checked with, so a proof here is never one the LPs would contradict.
    Returned with the bounds, which :func:`_insider_short` starts from.
    """
    req_k, req_s, req_a = P.requirements()
    if len(req_k) == 0:
        return None, None
    H = np.flatnonzero(trial)
    at = np.searchsorted(H, req_k)
    if (at >= len(H)).any() or (H[np.minimum(at, len(H) - 1)] != req_k).any():
        return None, None  # a primary published (never in a trial; nothing to prove)
    coo = P.Mc[:, H].tocoo()
    lo, hi = propagated_bounds(P.Mc, H, P.L, P.U, rounds=MAX_ROUNDS, coo=coo)
    room = np.where(req_s > 0, hi[at], -lo[at])
    short = np.flatnonzero(short_of(room, req_a))
    if len(short):
        return (int(short[0]), -1), None
    return None, _TrialBounds(H, coo, lo, hi, at)


@dataclass
class _TrialBounds:
    """The outsider's propagated bounds under a trial pattern (hidden cells H, in order)."""

    H: np.ndarray
    coo: sp.coo_matrix
    lo: np.ndarray
    hi: np.ndarray
    at: np.ndarray  # position in H of every requirement's cell


#: Passes of the insiders' bound propagation (from the outsider's fixed point: fewer passes give
#: wider bounds, still valid; see :func:`_insider_short`).
INSIDER_ROUNDS = 3


def _insider_short(P: Problem, tb: _TrialBounds, published: int) -> tuple[int, int] | None:
    """(requirement, insider) that no deviation can meet under the trial, proved by bounds; or None.

    Why: a clean-up trial certify rejects is most often rejected by an insider, after every
    outsider requirement and the other insiders were certified (on the seed table 9 trials,
    some 30 LPs each). The outsider's bounds tightened by one insider's range and propagated
    again are valid bounds for that insider (its deviations are some of the outsider's), so a
    level beyond them is a rejection certify would reach too. Only the questions certify asks:
    an insider's cell hidden, not the primary's own cell nor one of its owners
    (:meth:`.audit.Problem.owners`), at the insider's level (:meth:`.audit.Problem.insider_amount`).
    Only the insiders within :data:`HOPS` relations of the cell the trial publishes are asked
    (a cost choice: the others rarely fail, and certify asks them anyway): 7 of the seed
    table's 9 such rejections at a fraction of an LP's cost each.
    """
    req_k, req_s, req_a = P.requirements()
    insiders = tb.H[P.insider[tb.H]]
    insiders = insiders[_neighbours(P, np.array([published]), HOPS)[insiders]]
    if not len(insiders):
        return None
    # every insider's range on its own cell, the outsider's bounds elsewhere (one row each)
    pos = np.searchsorted(tb.H, insiders)
    rows = np.arange(len(insiders))
    lo = np.repeat(tb.lo[None, :], len(insiders), axis=0)
    hi = np.repeat(tb.hi[None, :], len(insiders), axis=0)
    lo[rows, pos] = np.maximum(lo[rows, pos], -P.scen_L[insiders])
    hi[rows, pos] = np.minimum(hi[rows, pos], P.scen_U[insiders])
    lo, hi = bounds_per_scenario(tb.coo, lo, hi, INSIDER_ROUNDS)
    room = np.where(req_s[None, :] > 0, hi[:, tb.at], -lo[:, tb.at])
    for row, r in zip(*np.nonzero(short_of(room, req_a[None, :])), strict=True):
        s, r = int(insiders[row]), int(r)
        k = int(req_k[r])
        if k == s or s in P.owners(k):
            continue
        amt = P.insider_amount(k, s, int(req_s[r]), float(req_a[r]))
        if amt > 0 and short_of(np.array([room[row, r]]), np.array([amt]))[0]:
            return r, s
    return None


#: See :func:`_insider_short` (1 hop found 2 of the seed table's 7).
HOPS = 2


def _neighbours(P: Problem, cells: np.ndarray, hops: int) -> np.ndarray:
    """Mask of the cells within ``hops`` shared relations of ``cells``."""
    mask = np.zeros(P.n, dtype=bool)
    mask[cells] = True
    for _ in range(hops):
        rows = np.unique(P.Mc[:, np.flatnonzero(mask)].indices)
        mask[P.M[rows].indices] = True
    return mask


def _meets(f: Flow, P: Problem, k: int, sign: int, amt: float, s: int) -> bool:
    """Certificate f moves k by ``sign·amt`` and, for an insider s ≥ 0, stays in s's range.

    The tolerances of :func:`.audit.flow_requirements` and of the insider check of the
    audit: what the audit would count as met.
    """
    if sign * f.value_at(k) < amt * (1 - 1e-6) - 1e-9:
        return False
    if s < 0:
        return True
    tol = 1e-7 * max(abs(float(P.a[s])), 1.0)
    return bool(-P.scen_L[s] - tol <= f.value_at(s) <= P.scen_U[s] + tol)


class _PoolIndex:
    """Which certificates move each cell, and which meet each requirement, for one pool.

    A clean-up trial publishes one cell again: the certificates moving it are lost, the
    requirements they met must be checked again, and the certificates meeting those are
    the only ones that audit needs.  Looking them up here instead of scanning the pool
    (10,000 certificates on 50x40x10) for every trial.
    """

    def __init__(self, P: Problem, pool: list[Flow]) -> None:
        self.pool = pool
        req_k, req_s, req_a = P.requirements()
        facts = [flow_requirements(f, req_k, req_s, req_a) for f in pool]
        self.met = [rs[ok] for rs, ok, _ in facts]
        self.by_cell = _group([f.idx for f in pool], P.n)
        self.by_req = _group(self.met, len(req_k))

    def trial(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(certificates moving i, requirements they meet, other certificates meeting those), sorted."""
        ptr, owners = self.by_cell
        moved = owners[ptr[i]:ptr[i + 1]]
        parts = [self.met[j] for j in moved.tolist()]
        touched = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        ptr_r, owners_r = self.by_req
        if len(touched):
            starts, ends = ptr_r[touched], ptr_r[touched + 1]
            sub = np.unique(np.concatenate([owners_r[a:b] for a, b in zip(starts.tolist(), ends.tolist(),
                                                                          strict=True)]))
        else:
            sub = np.zeros(0, dtype=np.int64)
        sub = sub[~np.isin(sub, moved)]
        return moved, touched, sub


def _group(items: list[np.ndarray], n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, owners): for every key, the indices of the items holding it, in order."""
    keys = np.concatenate(items) if items else np.zeros(0, dtype=np.int64)
    owners = np.repeat(np.arange(len(items)), [len(x) for x in items])
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_keys + 1, dtype=np.int64)
    np.add.at(ptr, keys + 1, 1)
    return np.cumsum(ptr), owners[order]


def heuristic(P: Problem, *, singletons: bool, tick: Ticker, work: int | None = None
              ) -> tuple[np.ndarray, list[Flow]]:
    """A protected pattern (primaries + secondaries) and its certificates."""
    hidden = P.primary.copy()
    hidden, pool = repair(P, hidden, [], singletons=singletons, tick=tick)
    hidden, pool, _ = cleanup(P, hidden, pool, singletons=singletons, tick=tick, work=work)
    return hidden, pool


def _pins_a_primary(P: Problem, hidden: np.ndarray, i: int, singletons: bool) -> bool:
    """A relation through cell i that would leave a primary recoverable on its own.

    Publishing i is hopeless when some relation through i then has a hidden primary
    as its only hidden cell (the attacker subtracts), or, with insiders, its only
    other hidden cell is one whose single contributor knows its value exactly.  A
    cheap test that spares the full audit for most cells the clean-up cannot drop.
    """
    Mc = P.Mc
    M = P.M
    for r in Mc.indices[Mc.indptr[i]:Mc.indptr[i + 1]]:
        members = M.indices[M.indptr[r]:M.indptr[r + 1]]
        h = members[hidden[members]]
        if len(h) == 1 and P.primary[h[0]]:
            return True
        if singletons and len(h) == 2:
            for a, b in ((h[0], h[1]), (h[1], h[0])):
                if (P.primary[a] and P.insider[b] and P.scen_L[b] == 0 and P.scen_U[b] == 0
                        and max(P.insider_amount(int(a), int(b), 1, float(P.upl[a])),
                                P.insider_amount(int(a), int(b), -1, float(P.lpl[a]))) > 0):
                    return True
    return False
