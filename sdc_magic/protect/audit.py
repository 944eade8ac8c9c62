"""The audit: is every primary cell protected by a pattern, and what does an attacker learn?

Two questions, two tools:

* *Protection* is a yes/no question per primary, direction and attacker.  It is
  answered with certificates (:class:`~.lp.Flow`): an explicit alternative table that
  agrees with everything published, respects the a-priori bounds and moves the
  primary by at least its protection level.  Certificates are found in batches (one
  LP can move many primaries at once) and re-used, which is what keeps the audit of
  a 30,000-cell table within seconds; a primary without a certificate gets its own
  exact LP, whose answer is final.  Before that LP, a known certificate that moves
  the primary is tried scaled or reversed (:func:`rescale`); a batch LP's flow is
  split into its independent parts (:func:`split_flow`) so that each primary keeps
  a small certificate.  The LPs have columns for the hidden cells only.
* *Intervals* (what the attacker can infer about each hidden cell) are the exact LP
  minima and maxima, as published in certificates and used by external checkers.

Attackers: the outsider (published cells + all margins + a-priori bounds) and, when
``singletons`` is on, every contributor who alone makes up a hidden cell (it knows
that cell's value; a largest contributor of a two-unit cell knows the cell is at
least its own share).  The audit checks each such insider separately; when many
primaries are blocked by insiders, a batch LP first looks for certificates that
respect every insider's knowledge at once (each of them is then beaten by the same
certificate).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp

from .bounds import MAX_ROUNDS, propagated_bounds, short_of
from .flows import Cancellation, absorb_many, flow_requirements, one_per_cell, rescale
from .local import Boxes, LocalAttacker
from .lp import Attacker, Flow, WorkLimit, flow_lp, work_done

ProgressFn = Callable[[str, float | None], None]


class Ticker:
    """Calls the user's progress callback at most every 0.2 s, and enforces the work budget.

    Every loop of the search (audit, repair, clean-up, MIP rounds) calls the ticker, so a
    budget set here bounds all of them: the call raises :class:`WorkLimit` once the
    thread's LPs have spent ``end`` simplex iterations (:func:`.lp.work_done`). Work, not
    time: the answer is the same on any machine under any load. The clock is read only to
    pace the progress callback (progress may show time; decisions may not).
    """

    def __init__(self, progress: ProgressFn | None, end: float = np.inf) -> None:
        self.progress = progress
        self.last = 0.0
        self.end = end

    def __call__(self, message: str, fraction: float | None = None, *, force: bool = False) -> None:
        if self.end < np.inf and work_done() >= self.end:
            raise WorkLimit(message)
        if self.progress is None:
            return
        now = time.monotonic()
        if force or now - self.last >= 0.2:
            self.last = now
            self.progress(message, fraction)

    @property
    def expired(self) -> bool:
        return work_done() >= self.end


@dataclass
class Problem:
    """Everything the protection and the audit need, one entry per cell.

    ``L`` / ``U`` are how far a cell may move down / up a priori (value − lower bound,
    upper bound − value; inf when unbounded).  Singleton scenarios: ``scen_L`` /
    ``scen_U`` are the insider's tighter ranges (NaN where the cell has no insider).
    """

    M: sp.csr_matrix
    a: np.ndarray
    L: np.ndarray
    U: np.ndarray
    primary: np.ndarray
    hideable: np.ndarray
    lpl: np.ndarray
    upl: np.ndarray
    cost: np.ndarray
    scen_L: np.ndarray
    scen_U: np.ndarray
    S: sp.csr_matrix | None = None
    #: largest single contribution of every cell (NaN when unknown: frequency tables)
    top1: np.ndarray | None = None
    #: the insider's own contribution to its cell (its whole value for a one-unit cell,
    #: the largest share of a two-unit cell); NaN where the cell has no insider
    insider_unit: np.ndarray | None = None
    #: per primary, the lower / upper level against its own largest contributor (see
    #: :meth:`insider_amount`); NaN: no reduced level
    own_lpl: np.ndarray | None = None
    own_upl: np.ndarray | None = None
    #: box certificates of the table (:class:`~.local.Boxes`; None: local LPs only)
    boxes: Boxes | None = None
    Mc: sp.csc_matrix = field(init=False)
    _attacker: Attacker | None = field(default=None, init=False, repr=False)
    _cover: Attacker | None = field(default=None, init=False, repr=False)
    _feas: Attacker | None = field(default=None, init=False, repr=False)
    _attacker_all: Attacker | None = field(default=None, init=False, repr=False)
    _benders: Attacker | None = field(default=None, init=False, repr=False)
    _owners: dict[int, set[int]] | None = field(default=None, init=False, repr=False)
    _S_csc: sp.csc_matrix | None = field(default=None, init=False, repr=False)
    _amounts: dict[tuple[int, int, int], float] = field(default_factory=dict, init=False, repr=False)
    _req: tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = field(default=None, init=False, repr=False)
    #: (cell, sign, level) -> a pattern (hidden mask) on which no certificate respects every
    #: insider at once (see ``_Audit.against_every_insider``): none does on any pattern hiding
    #: a subset of its cells
    no_clean: dict[tuple[int, int, float], np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.Mc = sp.csc_matrix(self.M)

    def _weights(self) -> np.ndarray:
        # small certificates, kept off insiders' cells when possible
        return 1.0 / np.maximum(np.abs(self.a), 1.0) * np.where(self.insider, 10.0, 1.0)

    def attacker(self, hidden: np.ndarray) -> Attacker:
        """The persistent certificate LP (:class:`~.lp.Attacker`) set to ``hidden``, outsider caps.

        Its columns are the hidden cells of the pattern it was built for; a pattern
        that hides a cell outside them gets a new model (one that only publishes cells
        again, as the clean-up does, keeps the model and its basis).
        """
        if self._attacker is None or not self._attacker.covers(hidden):
            self._attacker = Attacker(self.Mc, self.L, self.U, self._weights(), cells=np.flatnonzero(hidden))
        att = self._attacker
        att.set_caps(self.L, self.U)
        att.set_hidden(hidden)
        return att

    def attacker_all(self, hidden: np.ndarray) -> Attacker:
        """As :meth:`attacker`, over every cell (for a pattern that keeps growing)."""
        if self._attacker_all is None:
            self._attacker_all = Attacker(self.Mc, self.L, self.U, self._weights())
        att = self._attacker_all
        att.set_caps(self.L, self.U)
        att.set_hidden(hidden)
        return att

    def feasibility(self, hidden: np.ndarray) -> Attacker:
        """A cost-free attacker LP over the hidden cells (fewest pivots: any feasible deviation will do)."""
        if self._feas is None or not self._feas.covers(hidden):
            self._feas = Attacker(self.Mc, self.L, self.U, np.zeros(self.n), cells=np.flatnonzero(hidden))
        feas = self._feas
        feas.set_caps(self.L, self.U)
        feas.set_hidden(hidden)
        return feas

    def benders(self, hidden: np.ndarray) -> Attacker:
        """A cost-free attacker LP over every cell (Benders cuts need every cell's dual)."""
        if self._benders is None:
            self._benders = Attacker(self.Mc, self.L, self.U, np.zeros(self.n))
        lp = self._benders
        lp.set_caps(self.L, self.U)
        lp.set_hidden(hidden)
        return lp

    def cover(self, allowed: np.ndarray) -> Attacker:
        """The persistent covering LP: ``allowed`` cells may move, costs set by the caller."""
        if self._cover is None:
            self._cover = Attacker(self.Mc, self.L, self.U, np.ones(self.n))
        cov = self._cover
        cov.set_caps(self.L, self.U)
        cov.set_hidden(allowed)
        return cov

    def own_cell(self, k: int, s: int) -> bool:
        """True when the insider of s is the only contributor of k (k lies inside s).

        A single-unit cell's contributor learning a cell made of its own data only is no
        disclosure; ``S`` (cells × inner membership) tells whether k ⊆ s.
        """
        if self.S is None or self.scen_U[s] != 0 or self.scen_L[s] != 0:
            return False
        row_k = self.S.indices[self.S.indptr[k]:self.S.indptr[k + 1]]
        row_s = self.S.indices[self.S.indptr[s]:self.S.indptr[s + 1]]
        return bool(np.isin(row_k, row_s, assume_unique=True).all())

    def sole_contributor(self, k: int, s: int) -> bool:
        """True when the insider of s contributes the whole of k (s ⊆ k, the same value, and no
        cell can be negative: every other contribution to k is 0).

        Why: like :meth:`own_cell`, k is then the insider's own data; all it learns beyond it
        is that the others contribute nothing, which the zeros policy governs (zeros are shown,
        or are primaries protected on their own). Asked anyway, the requirement cannot be met:
        counts of a rare flag by district and sex, where district D's only flagged person is a
        man, blocked the whole table ("no pattern can protect D / Total").
        """
        if self.scen_U[s] != 0 or self.scen_L[s] != 0 or not self.contains(k, s):
            return False
        nonnegative = getattr(self, "_nonnegative", None)
        if nonnegative is None:
            nonnegative = self._nonnegative = bool(np.all(self.a - self.L >= 0))
        ak, as_ = float(self.a[k]), float(self.a[s])
        return nonnegative and abs(ak - as_) <= 1e-12 * max(abs(ak), 1.0)

    def contains(self, k: int, s: int) -> bool:
        """True when every inner cell of s lies inside k (s ⊆ k)."""
        if self.S is None:
            return False
        row_k = self.S.indices[self.S.indptr[k]:self.S.indptr[k + 1]]
        row_s = self.S.indices[self.S.indptr[s]:self.S.indptr[s + 1]]
        return bool(len(row_s)) and bool(np.isin(row_s, row_k, assume_unique=True).all())

    def own_largest(self, k: int, s: int) -> bool:
        """True when the insider of s is the largest contributor of primary k.

        The insider's unit lies inside k (s ⊆ k) and its own contribution equals k's
        largest one.  Needs the contributions (``top1``, ``insider_unit``): on a
        frequency table every unit counts 1 and none is "the largest".
        """
        if self.top1 is None or self.insider_unit is None:
            return False
        x1, own = self.top1[k], self.insider_unit[s]
        if not (np.isfinite(x1) and np.isfinite(own)) or own <= 0:
            return False
        return bool(own >= x1 * (1 - 1e-12)) and self.contains(k, s)

    def insider_amount(self, k: int, s: int, sign: int, amt: float) -> float:
        """How far primary k must move (direction ``sign``) against the insider of cell s.

        * 0 when k is made of the insider's own data only (:meth:`own_cell`,
          :meth:`sole_contributor`): a unit learning its own value is no disclosure.
        * When the insider is k's **largest contributor** (:meth:`own_largest`), the
          rule that made k primary protects that very unit (dominance: the largest
          units' share; p %: the largest against the second's estimate): protecting k
          against it protects nobody, and asking for it blocks real tables (a one-unit
          cell inside a margin whose other contributors are small or zero).  What that
          unit must still not learn is the *others'* total ``R = T − x1``: k's level
          against it is the reduced one, ``m %`` of R (at least the minimal width; 0
          when R = 0, the others contributing nothing), see ``own_lpl`` / ``own_upl``.
        * Otherwise the full level ``amt``.
        """
        key = (int(k), int(s), int(sign))
        got = self._amounts.get(key)
        if got is not None:
            return min(got, float(amt))
        if s == k or self.own_cell(k, s) or self.sole_contributor(k, s):
            got = 0.0
        elif self.own_largest(k, s) and self.own_lpl is not None and self.own_upl is not None:
            lev = self.own_upl[k] if sign > 0 else self.own_lpl[k]
            got = float(lev) if np.isfinite(lev) else np.inf
        else:
            got = np.inf
        self._amounts[key] = got
        return min(got, float(amt))

    def owners(self, k: int) -> set[int]:
        """The single-contributor cells s with ``own_cell(k, s)`` (they contain k's inner cells)."""
        if self._owners is None:
            self._owners = {}
        got = self._owners.get(k)
        if got is None:
            got = set()
            if self.S is not None and self.S.indptr[k + 1] > self.S.indptr[k]:
                if self._S_csc is None:
                    self._S_csc = sp.csc_matrix(self.S)
                i0 = int(self.S.indices[self.S.indptr[k]])
                cand = self._S_csc.indices[self._S_csc.indptr[i0]:self._S_csc.indptr[i0 + 1]]
                got = {int(s) for s in cand if self.own_cell(k, int(s))}
            self._owners[k] = got
        return got

    @property
    def n(self) -> int:
        return len(self.a)

    @property
    def insider(self) -> np.ndarray:
        return ~np.isnan(self.scen_L)

    def requirements(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cell, sign, amount) for every primary and direction with a positive level.

        The same arrays are returned while primaries and levels stay the same, so that
        what certificates know about them (:func:`flow_requirements`) is computed once per
        certificate, not once per audit (the clean-up of 50×40×10 audits a pool of
        10,000 certificates a hundred times).
        """
        key = hash((self.primary.tobytes(), np.asarray(self.upl).tobytes(), np.asarray(self.lpl).tobytes()))
        if self._req is not None and self._req[0] == key:
            return self._req[1]
        got = self._requirements()
        self._req = (key, got)
        return got

    def _requirements(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = np.flatnonzero(self.primary)
        ks, ss, am = [], [], []
        for sign, lev in ((1, self.upl), (-1, self.lpl)):
            sel = k[lev[k] > 0]
            ks.append(sel)
            ss.append(np.full(len(sel), sign))
            am.append(lev[sel])
        kk = np.concatenate(ks)
        order = np.argsort(kk, kind="stable")
        return kk[order], np.concatenate(ss)[order], np.concatenate(am)[order]


@dataclass
class Certification:
    """Result of :func:`certify`: failures are ``(requirement index, insider cell or −1)``."""

    failures: list[tuple[int, int]]
    pool: list[Flow]
    lps: int = 0


#: Open requirements at which the outsider audit asks one elastic LP for a batch of them.
BATCH_MIN = 24
#: ... but only on tables larger than this (below, warm single LPs are cheaper).
BATCH_MIN_CELLS = 5000
#: On small patterns (no local LPs) an outsider LP first asks for a certificate that every
#: insider respects (see :meth:`_Audit.against_every_insider`).
ALL_INSIDERS_FIRST = True


def _planar(P: Problem, H: np.ndarray) -> bool:
    """True when most hidden cells lie in at most two relations (a 2-D table's inner cells)."""
    degree = np.diff(P.Mc.indptr)[H]
    return bool(len(degree)) and float(np.median(degree)) <= 2


def scenario_caps(P: Problem, s: int) -> tuple[np.ndarray, np.ndarray]:
    L = P.L.copy()
    U = P.U.copy()
    L[s] = P.scen_L[s]
    U[s] = P.scen_U[s]
    return L, U


def _violates(f: Flow, P: Problem, insiders: np.ndarray, is_insider: np.ndarray | None = None) -> set[int]:
    """Insider cells whose knowledge rules this certificate out.

    ``insiders`` are the hidden cells with an insider; a certificate's cells are all
    hidden, so the answer depends on the certificate alone and is remembered on it.
    ``is_insider``: the same cells as a mask over the table (one look-up per cell
    instead of a set search per certificate: 0.1 s of the audits of 25x20x10).
    """
    if len(insiders) == 0 or len(f.idx) == 0:
        return set()
    memo = f.memo.get("viol")
    if memo is not None and memo[0] is P:
        return memo[1]
    if is_insider is None:
        is_insider = np.zeros(P.n, dtype=bool)
        is_insider[insiders] = True
    common = f.idx[~np.isnan(P.scen_L[f.idx])]
    if not is_insider[common].all():  # (a certificate off the pattern)
        common = f.idx[is_insider[f.idx]]
        return _violated(f, P, common)
    got = _violated(f, P, common)
    f.memo["viol"] = (P, got)
    return got


def _violated(f: Flow, P: Problem, common: np.ndarray) -> set[int]:
    if len(common) == 0:
        return set()
    v = f.at(common)
    tol = 1e-7 * np.maximum(np.abs(P.a[common]), 1.0)
    bad = (v < -P.scen_L[common] - tol) | (v > P.scen_U[common] + tol)
    return {int(c) for c in common[bad]}


def cell_components(indptr: np.ndarray, indices: np.ndarray, n: int) -> np.ndarray:
    """Connected components of n cells, two cells joined when a row (relation) holds both.

    ``indptr``/``indices``: the rows in CSR form. Returns each cell's component, numbered
    0, 1, ... in order of first appearance. Label propagation by minimum: a few vectorised
    passes on a certificate's cells, and it spares the display the import of
    ``scipy.sparse.csgraph`` (it pulls in ``scipy.sparse.linalg``: 0.1 s of a first display).
    """
    lab = np.arange(n)
    lengths = np.diff(indptr)
    rows = np.flatnonzero(lengths > 0)
    if len(rows) == 0:
        return lab
    starts = indptr[rows]
    owner = np.repeat(np.arange(len(rows)), lengths[rows])
    while True:
        row_min = np.minimum.reduceat(lab[indices], starts)
        new = lab.copy()
        np.minimum.at(new, indices, row_min[owner])
        new = new[new]  # jump to the label's own label: halves the passes on long chains
        if np.array_equal(new, lab):
            break
        lab = new
    # number the components as a graph search from the first relation would (lowest
    # relation first, then cells in no relation): the parts keep their earlier order
    row_lab = lab[indices[starts]]
    key = np.full(n, len(rows), dtype=np.int64) + np.arange(n)
    first_row = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first_row, row_lab, np.arange(len(rows)))
    key = np.where(first_row[lab] < len(rows), first_row[lab], key[lab])
    _, numbered = np.unique(key, return_inverse=True)
    return numbered.astype(np.int64)


def split_flow(P: Problem, f: Flow) -> list[Flow]:
    """The independent parts of a certificate (each one is a certificate on its own).

    Two moved cells belong to the same part when some relation holds both; every
    relation then sees the moved cells of one part only, so each part balances every
    relation by itself.  A batch LP's flow is a union of many local ones: split, each
    primary keeps only the local one, which crosses far fewer insiders' cells.
    """
    if len(f.idx) < 8:
        return [f]
    B = P.Mc[:, f.idx].tocsr()
    lab = cell_components(B.indptr, B.indices, len(f.idx))
    if lab.max() == 0:
        return [f]
    parts = []
    for c in np.unique(lab):
        sel = lab == c
        parts.append(Flow(f.idx[sel], f.val[sel]))
    return parts


def certify(P: Problem, hidden: np.ndarray, pool: list[Flow], *, singletons: bool = True,
            tick: Ticker | None = None, stop_at_first: bool = False, exact: bool = True,
            only: np.ndarray | None = None, outsider_first: bool = False,
            cancel: Cancellation | None = None) -> Certification:
    """Find a certificate for every requirement and every attacker, or name the failures.

    ``pool`` holds certificates found earlier; those whose support is still hidden are
    re-used.  The returned pool contains all valid certificates (old and new).

    ``exact=False`` (the repair loop of a large pattern): only the cheap searches run
    (re-used and rescaled certificates, small LPs around each primary, single-relation
    bounds); whatever they leave uncertified is reported as failing without the
    whole-table LP that would prove it.  The caller covers those failures, checking each
    before hiding anything, and the final audit is always exact.

    ``only`` (requirement indices): check these requirements alone, the others being
    known to hold (the clean-up: publishing one cell again only concerns requirements
    whose certificates it moved; everything else keeps its certificates, and a
    requirement's verdict depends only on the certificates that meet it).

    ``outsider_first`` (the repair): when some requirement fails against the outsider, report
    those failures without checking the insiders.  Why: the repair hides cells to cover them,
    and most insiders' failures on the smaller pattern vanish on the larger one, but each was
    proved by an LP first (ACRO's skewed mean table: 405 LPs for the primaries-only pattern's
    audit, 280 of them the insiders').  The next round checks the insiders on the larger pattern.

    ``cancel`` (a clean-up trial): the certificates the trial lost, combined in pairs before
    any LP (:class:`~.flows.Cancellation`); only an LP still says "no".
    """
    run = _Audit(P, hidden, pool, tick or Ticker(None), singletons=singletons, stop_at_first=stop_at_first,
                 exact=exact, every_insider_first=ALL_INSIDERS_FIRST and not outsider_first, cancel=cancel)
    if run.nreq == 0:
        return run.result()
    if not run.outsiders(only):
        return run.result()
    if outsider_first and run.failures:
        return run.result()
    if not singletons or len(run.insiders) == 0:
        return run.result()
    run.insiders_phase()
    return run.result()


class _Audit:
    """The state one :func:`certify` call shares between its steps.

    The certificate pool, which requirements each certificate meets (``certified_by``)
    and which requirement cells it moves (``touching``), the failures so far and the
    number of LPs.  :meth:`outsiders` certifies every requirement against the outsider;
    :meth:`insiders_phase` then checks the certificates against each single contributor.
    """

    local: LocalAttacker | None
    att: Attacker
    active: np.ndarray
    failed: np.ndarray

    def __init__(self, P: Problem, hidden: np.ndarray, pool: list[Flow], tick: Ticker, *, singletons: bool,
                 stop_at_first: bool, exact: bool, every_insider_first: bool = ALL_INSIDERS_FIRST,
                 cancel: Cancellation | None = None) -> None:
        self.P = P
        self.cancel = cancel
        self.every_insider_first = every_insider_first
        self.tick = tick
        self.stop_at_first = stop_at_first
        self.exact = exact
        self.req_k, self.req_s, self.req_a = P.requirements()
        self.nreq = len(self.req_k)
        self.hidden = np.asarray(hidden, dtype=bool)
        self.H = np.flatnonzero(self.hidden)
        self.pool = [f for f in pool if self.hidden[f.idx].all()]
        self.failures: list[tuple[int, int]] = []
        self.lps = 0
        # (a dict filled on demand: a clean-up trial checks a few requirements of 20,000)
        self.certified_by: defaultdict[int, list[int]] = defaultdict(list)
        self.touching: dict[int, list[int]] = {}  # requirement cell -> pool flows that move it
        self.viol_cache: dict[int, set[int]] = {}
        self.insiders = self.H[P.insider[self.H]] if singletons else np.zeros(0, dtype=np.int64)
        self.is_insider = np.zeros(P.n, dtype=bool)
        self.is_insider[self.insiders] = True
        self.blocked: list[set[int]] = []
        self.hits_of: dict[int, np.ndarray] = {}

    def result(self) -> Certification:
        return Certification(self.failures, self.pool, self.lps)

    # ---- the pool and what its certificates prove
    def absorb(self, start: int) -> None:
        if len(self.pool) - start >= 64:
            absorb_many(self.pool, start, self.req_k, self.req_s, self.req_a, self.certified_by, self.touching)
            return
        for fi in range(start, len(self.pool)):
            rs, ok, cells = flow_requirements(self.pool[fi], self.req_k, self.req_s, self.req_a)
            for r in rs[ok].tolist():
                self.certified_by[r].append(fi)
            for k in cells.tolist():
                self.touching.setdefault(k, []).append(fi)

    def keep(self, flow: Flow) -> None:
        """A new certificate joins the pool (and its index)."""
        self.pool.append(flow)
        self.absorb(len(self.pool) - 1)

    def rescued(self, r: int, L: np.ndarray, U: np.ndarray, avoid: int = -1, amt: float | None = None) -> bool:
        """A pool certificate scaled to requirement r (under ranges L, U); added to the pool.

        ``amt``: the amount to reach when it is not r's level: against an insider who is the
        primary's largest contributor, the reduced level (:meth:`Problem.insider_amount`).
        Scaled to the full level instead, the certificate the repair's cover found for that
        reduced level left the insider's room and was never taken up, so the cheap audit
        reported the same failure round after round ("repair made no progress", a 5-key table
        of sums withheld whole by the red team of stop 65).
        """
        k = int(self.req_k[r])
        level = float(self.req_a[r]) if amt is None else float(amt)
        for fi in self.touching.get(k, [])[-20:]:
            f = self.pool[fi]
            if avoid >= 0 and avoid in self.viol(fi):
                continue
            g = rescale(f, k, int(self.req_s[r]), level, L, U)
            if g is not None:
                self.keep(g)
                return True
        return False

    def paired(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray) -> Flow | None:
        """A certificate made of two the trial lost (:class:`~.flows.Cancellation`), or None."""
        return None if self.cancel is None else self.cancel.find(k, sign, amt, L, U)

    def viol(self, fi: int) -> set[int]:
        if fi not in self.viol_cache:
            self.viol_cache[fi] = _violates(self.pool[fi], self.P, self.insiders, self.is_insider)
        return self.viol_cache[fi]

    def reach(self, lp: Attacker, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray,
              key: tuple[int, int] | None = None) -> Flow | None:
        if self.local is not None:
            got = self.local.reach(k, sign, amt, L, U)
            if got is not None:
                return got
        return lp.reach(k, sign, amt, basis_key=key)

    def batch_round(self, open_: np.ndarray) -> np.ndarray:
        """One elastic LP for a batch of open requirements (one per cell); its parts join the pool."""
        P, H = self.P, self.H
        batch = one_per_cell(open_, self.req_k)
        sat, flow = flow_lp(P.Mc, H, P.L, P.U, self.req_k[batch], self.req_s[batch], self.req_a[batch],
                            *_sparse_weights(P, H))
        self.lps += 1
        if flow is not None:
            for part in split_flow(P, flow):
                self.keep(part)
        return sat

    def uncertified(self, open_: np.ndarray) -> np.ndarray:
        return np.array([r for r in open_.tolist() if not self.certified_by[r]], dtype=np.int64)

    def fail(self, r: int) -> None:
        self.failed[r] = True
        self.failures.append((r, -1))

    # ---- the outsider
    def outsiders(self, only: np.ndarray | None) -> bool:
        """A certificate for every (active) requirement against the outsider; False if stopped at a failure."""
        P = self.P
        self.absorb(0)
        # on large patterns a small LP around the primary usually finds the certificate
        # (see .local); the whole-table LP only decides what it does not find
        self.local = (LocalAttacker(P.M, P.Mc, self.hidden, P._weights(), boxes=P.boxes)
                      if LocalAttacker.worth(self.hidden) else None)
        # outsider: big batches in one elastic LP, stragglers one by one from a warm basis
        self.att = P.attacker(self.hidden)
        self.active = np.ones(self.nreq, dtype=bool)
        if only is not None:
            self.active[:] = False
            self.active[np.asarray(only, dtype=np.int64)] = True
        open_ = np.array([r for r in range(self.nreq) if self.active[r] and not self.certified_by[r]],
                         dtype=np.int64)
        self.failed = np.zeros(self.nreq, dtype=bool)
        if len(open_):
            short = self.short_by_bounds(open_)
            if short.any() and self.stop_at_first:
                return False
            open_ = open_[~short]
        if (self.local is not None and len(open_) >= BATCH_MIN and P.n > BATCH_MIN_CELLS and _planar(P, self.H)
                and not len(self.insiders)):
            # a 2-D pattern: one elastic batch LP certifies hundreds of primaries in a tenth of a
            # second (300x100: 5 LPs for 2,958 primaries); on 3-D patterns it is degenerate and
            # slow (2-12 s per LP on 25x20x10 and 50x40x10), where the small LPs below win.
            # With insiders, the small LPs' certificates (kept off insiders' cells) leave the
            # insider checks far less to do (300x100: 1,900 small LPs in all, against 3,700)
            for _ in range(8):
                sat = self.batch_round(open_)
                open_ = self.uncertified(open_)
                if not sat.any() or len(open_) < BATCH_MIN:
                    break
        if self.local is not None and len(open_):
            open_ = self.small_lps(open_)
        if not self.exact and self.local is not None:
            for r in open_.tolist():
                self.fail(r)
            open_ = open_[:0]
        return self.stragglers(open_)

    def short_by_bounds(self, open_: np.ndarray) -> np.ndarray:
        """The open requirements that fail (each recorded): a bound propagated over the relations below the level.

        They fail without an LP (:mod:`.bounds`): the primaries-only pattern of a large table,
        where most primaries are alone in a relation and proving it with whole-table LPs took
        seconds, and, propagated to a fixed point, many of the repair's failures on small
        tables (each an LP proving infeasibility before).
        """
        P = self.P
        lo_b, hi_b = propagated_bounds(P.Mc, self.H, P.L, P.U, rounds=MAX_ROUNDS)
        at = np.searchsorted(self.H, self.req_k[open_])
        room = np.where(self.req_s[open_] > 0, hi_b[at], -lo_b[at])
        short = short_of(room, self.req_a[open_])
        for r in open_[short].tolist():
            self.fail(r)
        return short

    def small_lps(self, open_: np.ndarray) -> np.ndarray:
        """The small LPs around each primary (cheap; most certificates are local); what is still open."""
        P = self.P
        assert self.local is not None
        for n_done, r in enumerate(open_.tolist()):
            self.tick("audit: finding certificates", n_done / max(len(open_), 1))
            if self.certified_by[r] or self.rescued(r, P.L, P.U):
                continue
            flow = self.paired(int(self.req_k[r]), int(self.req_s[r]), float(self.req_a[r]), P.L, P.U)
            if flow is None:
                flow = self.local.reach(int(self.req_k[r]), int(self.req_s[r]), float(self.req_a[r]), P.L, P.U)
            if flow is not None:
                self.keep(flow)
        return self.uncertified(open_)

    def stragglers(self, open_: np.ndarray) -> bool:
        """Whole-table LPs for what is still open: batches, then one by one; False if stopped at a failure."""
        P = self.P
        while len(open_):
            self.tick("audit: finding certificates", 1 - len(open_) / self.nreq)
            if len(open_) >= BATCH_MIN and P.n > BATCH_MIN_CELLS:
                sat = self.batch_round(open_)
                if sat.any():
                    open_ = np.array([r for r in open_.tolist() if not self.certified_by[r] and not self.failed[r]],
                                     dtype=np.int64)
                    continue
            # stragglers one by one (exact: a requirement left without a certificate fails)
            for r in open_.tolist():
                self.tick("audit: finding certificates", None)
                if self.certified_by[r] or self.rescued(r, P.L, P.U):
                    continue
                flow = self.against_every_insider(r) if self.every_insider_first and self.local is None else None
                if flow is None:
                    flow = self.paired(int(self.req_k[r]), int(self.req_s[r]), float(self.req_a[r]), P.L, P.U)
                if flow is None:
                    flow = self.att.reach(int(self.req_k[r]), int(self.req_s[r]), float(self.req_a[r]),
                                          basis_key=(r, -1))
                    self.lps += 1
                if flow is not None:
                    self.keep(flow)
                if not self.certified_by[r]:
                    self.fail(r)
                    if self.stop_at_first:
                        return False
            break
        return True

    def against_every_insider(self, r: int) -> Flow | None:
        """A certificate for requirement r that every insider's knowledge allows at once, or None.

        Why: a certificate the outsider LP finds may move insiders' cells; each insider it
        crosses then needs an LP of its own (the insider phase), and on the seed table
        those were most of the clean-up's LPs.  Asked first with every insider's range at
        once (except r's own cell and the cells made of its contributors alone, which do
        not attack it), the LP usually succeeds (267 of 326 on the seed table) and its one
        certificate settles r against the outsider and every insider.  When it does not,
        the usual outsider LP follows: nothing else changes, verdicts included.

        A proof of infeasibility is remembered with the pattern (``Problem.no_clean``):
        publishing cells only shrinks the LP's polytope (a published cell is fixed at 0,
        tighter than any insider's range), so on a pattern hiding a subset of those cells
        the LP is infeasible again and is skipped.  Iterations on the seed table
        84,835 -> 76,594 for the same pattern.
        """
        P = self.P
        if not len(self.insiders):
            return None
        k = int(self.req_k[r])
        question = (k, int(self.req_s[r]), float(self.req_a[r]))
        was = P.no_clean.get(question)
        if was is not None and not (self.hidden & ~was).any():
            return None  # infeasible on a pattern hiding at least these cells: still infeasible
        owners = P.owners(k)
        cells = np.array([s for s in self.insiders.tolist() if s != k and s not in owners], dtype=np.int64)
        if not len(cells):
            return None
        L, U = P.L.copy(), P.U.copy()
        L[cells] = np.minimum(L[cells], P.scen_L[cells])
        U[cells] = np.minimum(U[cells], P.scen_U[cells])
        paired = self.paired(k, int(self.req_s[r]), float(self.req_a[r]), L, U)
        if paired is not None:
            return paired
        self.att.set_caps(L, U)
        try:
            flow = self.att.reach(k, int(self.req_s[r]), float(self.req_a[r]), basis_key=(r, -3))
        finally:
            self.att.set_caps(P.L, P.U)
        self.lps += 1
        if flow is None and self.att.last_status == highspy.HighsModelStatus.kInfeasible:
            P.no_clean[question] = self.hidden.copy()
        return flow

    # ---- single contributors
    def insiders_phase(self) -> None:
        """Every certificate checked against each insider; new ones where an insider rules them out."""
        self.blocked = self.blocking_insiders()
        # many blocked primaries: first one LP against every insider at once
        if self.exact or self.local is None:  # (a cheap audit leaves those to the small LPs below)
            self.lps += _insider_batches(self.P, self.H, self.insiders, self.blocked, self.req_k, self.req_s,
                                         self.req_a, self.pool, self.narrow, self.tick)
        self.all_blocking_at_once()
        self.one_insider_at_a_time()

    def blocking_insiders(self) -> list[set[int]]:
        """Per requirement, the insiders that rule out every certificate meeting it."""
        # (one pass over the requirements still open, not a numpy look-up per requirement:
        # 0.1 s over the 29 audits of 25x20x10, 4,810 requirements each).  The others share
        # one immutable empty set (4,810 new sets per audit cost 3 ms, mostly the garbage
        # collector): every change below is made to a non-empty set only
        nothing: frozenset[int] = frozenset()
        blocked: list[set[int]] = [nothing] * self.nreq  # type: ignore[list-item]
        for r in np.flatnonzero(self.active & ~self.failed).tolist():
            b: set[int] | None = None
            for fi in self.certified_by[r]:
                v = self.viol(fi)
                b = set(v) if b is None else (b & v)
                if not b:
                    break
            b = b or set()
            b.discard(int(self.req_k[r]))
            blocked[r] = b - self.P.owners(int(self.req_k[r])) if b else b
        return blocked

    def narrow(self, fi: int) -> None:
        """Pool certificate fi no longer leaves its requirements blocked by the insiders it respects."""
        if fi not in self.hits_of:
            rs, ok, _ = flow_requirements(self.pool[fi], self.req_k, self.req_s, self.req_a)
            self.hits_of[fi] = rs[ok]
        v = self.viol(fi)
        blocked = self.blocked
        for r2 in self.hits_of[fi]:
            r2 = int(r2)
            if blocked[r2]:
                blocked[r2] &= v
                blocked[r2].discard(int(self.req_k[r2]))

    def all_blocking_at_once(self) -> None:
        """One LP per requirement with the knowledge of every insider blocking it at once.

        When it succeeds, its certificate holds against each of them.
        """
        P, att, blocked = self.P, self.att, self.blocked
        req_k, req_s, req_a = self.req_k, self.req_s, self.req_a
        try:
            # (the sets only shrink: the requirements blocked by two or more insiders now are
            # the only ones that can be when their turn comes)
            for r in [r for r, b in enumerate(blocked) if len(b) >= 2]:
                if len(blocked[r]) < 2:
                    continue
                self.tick("audit: checking what single contributors know", None)
                cells = np.fromiter(blocked[r], dtype=np.int64)
                L, U = P.L.copy(), P.U.copy()
                L[cells] = P.scen_L[cells]
                U[cells] = P.scen_U[cells]
                paired = self.paired(int(req_k[r]), int(req_s[r]), float(req_a[r]), L, U)
                if paired is not None:
                    self.pool.append(paired)
                    self.narrow(len(self.pool) - 1)
                    continue
                att.set_caps(L, U)
                if not self.exact and self.local is not None:
                    flow = self.local.reach(int(req_k[r]), int(req_s[r]), float(req_a[r]), L, U)
                else:
                    flow = self.reach(att, int(req_k[r]), int(req_s[r]), float(req_a[r]), L, U, key=(r, -2))
                self.lps += 1
                if flow is not None:
                    self.pool.append(flow)
                    self.narrow(len(self.pool) - 1)
        finally:
            att.set_caps(P.L, P.U)

    def one_insider_at_a_time(self) -> None:
        """Each insider's knowledge alone, for the requirements it still blocks (stops at a failure if asked)."""
        P, blocked = self.P, self.blocked
        feas = P.feasibility(self.hidden)
        todo = sorted(set().union(*blocked))
        # the requirements each insider blocks, ascending; the sets only shrink from here on,
        # so filtering these lists gives what a scan of every requirement per insider gave
        # (that scan cost 0.13 s on 25x20x10: 363 insiders × 4,810 requirements)
        blocking: dict[int, list[int]] = {}
        for r, b in enumerate(blocked):
            for s in b:
                blocking.setdefault(s, []).append(r)
        try:
            for n_done, s in enumerate(todo):
                self.tick("audit: checking what single contributors know", n_done / max(len(todo), 1))
                rs = [r for r in blocking.get(s, []) if s in blocked[r]]
                if not rs:
                    continue
                caps = scenario_caps(P, s)
                feas.set_caps(*caps)
                for r in rs:
                    if s not in blocked[r]:
                        continue  # a certificate found for another primary covers it
                    if not self.beat_insider(feas, r, s, caps):
                        return
        finally:
            feas.set_caps(P.L, P.U)

    def beat_insider(self, feas: Attacker, r: int, s: int, caps: tuple[np.ndarray, np.ndarray]) -> bool:
        """A certificate for requirement r that insider s cannot rule out; False to stop at its failure."""
        P, blocked = self.P, self.blocked
        req_k, req_s, req_a = self.req_k, self.req_s, self.req_a
        amt = P.insider_amount(int(req_k[r]), int(s), int(req_s[r]), float(req_a[r]))
        if amt <= 0:
            blocked[r].discard(s)
            return True
        if self.rescued(r, *caps, avoid=int(s), amt=amt):
            self.narrow(len(self.pool) - 1)
            blocked[r].discard(s)
            return True
        paired = self.paired(int(req_k[r]), int(req_s[r]), amt, *caps)
        if paired is not None:
            self.pool.append(paired)
            self.narrow(len(self.pool) - 1)
            blocked[r].discard(s)
            return True
        if not self.exact and self.local is not None:
            flow = self.local.reach(int(req_k[r]), int(req_s[r]), amt, *caps)
        else:
            flow = self.reach(feas, int(req_k[r]), int(req_s[r]), amt, *caps, key=(r, int(s)))
        self.lps += 1
        if flow is None:
            self.failures.append((r, int(s)))
            blocked[r].discard(s)
            return not self.stop_at_first
        self.pool.append(flow)
        self.narrow(len(self.pool) - 1)
        blocked[r].discard(s)
        return True


def _insider_batches(P: Problem, H: np.ndarray, insiders: np.ndarray, blocked: list[set[int]], req_k: np.ndarray,
                     req_s: np.ndarray, req_a: np.ndarray, pool: list[Flow], narrow: Callable[[int], None],
                     tick: Ticker) -> int:
    """Certificates that hold against every insider at once, many per LP.

    A deviation that respects every insider's knowledge simultaneously defeats each
    of them.  One elastic LP with all insiders' ranges moves as many blocked
    primaries as it can (those whose own cell, or a cell made of their contributor
    alone, is not an insider's: fixing those would pin the primary itself); the
    per-requirement LPs then only handle what is left.  Returns the number of LPs.
    """
    ins = np.zeros(P.n, dtype=bool)
    ins[insiders] = True
    L, U = P.L.copy(), P.U.copy()
    L[insiders] = P.scen_L[insiders]
    U[insiders] = P.scen_U[insiders]
    eligible = np.array([bool(blocked[r]) and not ins[int(req_k[r])]
                         and not any(ins[o] for o in P.owners(int(req_k[r])))
                         for r in range(len(req_k))], dtype=bool)
    missed = np.zeros(len(req_k), dtype=np.int64)
    lps = 0
    while True:
        open_ = np.array([r for r in np.flatnonzero(eligible) if blocked[r]], dtype=np.int64)
        if len(open_) < BATCH_MIN:
            return lps
        tick("audit: checking what single contributors know", None)
        batch = one_per_cell(open_, req_k)
        sat, flow = flow_lp(P.Mc, H, L, U, req_k[batch], req_s[batch], req_a[batch], *_sparse_weights(P, H))
        lps += 1
        if flow is None or not sat.any():
            return lps
        for part in split_flow(P, flow):
            pool.append(part)
            narrow(len(pool) - 1)
        # unmet in a batch: conflicting with the others, or not movable with every
        # insider's knowledge at once; a second miss leaves it to its own LP
        missed[batch[~sat]] += 1
        eligible &= missed < 2


def _sparse_weights(P: Problem, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights that keep certificates small and away from insiders' cells when possible."""
    w = P._weights()[H]
    return w, w
