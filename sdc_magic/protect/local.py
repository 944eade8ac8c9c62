"""Small attacker LPs around one cell: certificates on large tables without whole-table LPs.

Why: on a 300×100 count table with 3,000 hidden cells, each attacker LP of the audit
has 6,000 columns and costs ~5 ms, and the insider part of the audit asks ~1,000 of
them (one per primary and single contributor whose knowledge rules out the
certificates found so far).  A certificate is almost always *local*: a cycle of
hidden cells in a few rows and columns around the primary.

The restriction is exact in one direction.  Take the hidden cells near k (a few
relations away, at most :data:`MAX_CELLS`), every relation touching one of them, and
fix every other cell at 0.  Any deviation found there balances every relation of the
whole table (the left-out cells do not move), respects the same ranges, so it is a
certificate of the whole problem; it is checked as such before it is returned.  When
the small LP finds none, that proves nothing, and the caller asks the whole-table LP:
so the audit's verdicts (which requirements fail against which attacker) are exactly
those of the whole-table LPs, only cheaper to reach.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from .lp import Flow, _clip_weights, _inf, lp_scale, new_highs, run_robust

#: Neighbourhoods tried in turn: (at most this many movable cells, this many relations
#: away from the primary).  The first holds a cycle through k in a 2-D table (two
#: relations away); a 3-D table's smallest cycles are cubes, whose far corner is three
#: relations away, found among a thousand or so cells.
#: From the second layer on, a cell is taken only when it shares this many relations
#: with the cells already taken (it closes a cycle); the last size takes every cell.
SIZES = ((60, 2, 2), (200, 3, 2), (1000, 3, 1))
#: A covering search (cells not yet hidden may join) ends with a larger neighbourhood:
#: still far cheaper than the whole-table LP it spares (50 ms against 2-6 s on 50x40x10).
COVER_SIZES = (*SIZES, (4000, 4, 1))
#: Below this many hidden cells the whole-table LP (warm-started) is as cheap.
MIN_HIDDEN = 600


class LocalAttacker:
    """Certificates from LPs over the hidden cells near one cell.

    ``M`` (relations × cells, CSR) and ``Mc`` (CSC) describe the table; ``hidden`` the
    pattern; ``weights`` the cost per unit of deviation (small certificates, away from
    insiders' cells).  Ranges are given per call (an insider scenario changes them).
    """

    def __init__(self, M: sp.csr_matrix, Mc: sp.csc_matrix, hidden: np.ndarray, weights: np.ndarray,
                 *, rank: np.ndarray | None = None, sizes: tuple[tuple[int, int, int], ...] | None = None) -> None:
        self.M = M
        self.Mc = Mc
        self.hidden = np.asarray(hidden, dtype=bool)  # the cells that may move
        self.w_up = self.w_dn = np.asarray(weights, dtype=float)
        #: preference among candidates of a crowded layer (lower first); None: by index
        self.rank = rank
        self.found = 0
        self.missed = 0
        self._h: highspy.Highs | None = None
        self.sizes = SIZES if sizes is None else sizes
        #: the neighbourhood size that found the last certificate: tried first next time
        #: (2-D tables stay at the smallest; a 3-D table does not waste one per call)
        self.start = 0

    def set_weights(self, w_up: np.ndarray, w_dn: np.ndarray) -> None:
        """Cost per unit of upward / downward deviation (a covering search changes them per call)."""
        self.w_up = np.asarray(w_up, dtype=float)
        self.w_dn = np.asarray(w_dn, dtype=float)

    @staticmethod
    def worth(hidden: np.ndarray) -> bool:
        """True when a pattern hides enough cells for local LPs to pay."""
        return int(np.count_nonzero(hidden)) >= MIN_HIDDEN

    def _relations(self, cells: np.ndarray) -> np.ndarray:
        return _gather(self.Mc.indptr, self.Mc.indices, cells)

    def near(self, k: int, max_cells: int, depth: int, min_hits: int = 1) -> np.ndarray:
        """The movable cells within ``depth`` relations of k (sorted), k included.

        When a layer would pass ``max_cells``, the cells sharing the most relations
        with those already taken come first (they close cycles), then by ``rank``, then
        by index.
        """
        seen = np.zeros(len(self.hidden), dtype=bool)
        seen[k] = True
        frontier = np.array([k], dtype=np.int64)
        taken = 1
        for level in range(depth):
            rels = np.unique(self._relations(frontier))
            if not len(rels):
                break
            reach = _gather(self.M.indptr, self.M.indices, rels)
            reach = reach[self.hidden[reach] & ~seen[reach]]
            if not len(reach):
                break
            cand, hits = np.unique(reach, return_counts=True)
            if level > 0 and min_hits > 1:
                keep = hits >= min_hits
                cand, hits = cand[keep], hits[keep]
                if not len(cand):
                    break
            room = max_cells - taken
            if depth >= 3 and level < depth - 1:
                # leave room for the farther layers (a cube's far corner is three
                # relations away; a crowded first layer would leave it out)
                room = min(room, max_cells * (level + 1) // (2 * depth - 1) - taken + (1 if level == 0 else 0))
            if len(cand) > room:
                keys = (cand, -hits) if self.rank is None else (cand, self.rank[cand], -hits)
                order = np.lexsort(keys)[:room]
                cand = np.sort(cand[order])
            seen[cand] = True
            taken += len(cand)
            frontier = cand
            if taken >= max_cells:
                break
        return np.flatnonzero(seen)

    def reach(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray, *, exact: bool = False
              ) -> Flow | None:
        """A checked certificate moving k by ``sign·amt`` within ranges L, U, or None (not found here).

        ``exact``: aim at ``amt`` itself rather than a hair above it (an interval's proven
        bound, which nothing exceeds).
        """
        if not self.hidden[k]:
            return None
        last: np.ndarray | None = None
        for i in range(self.start, len(self.sizes)):
            cells = self.near(int(k), *self.sizes[i])
            if last is not None and len(cells) == len(last):
                break  # the larger neighbourhood is the same one
            last = cells
            flow = self._solve(cells, int(k), sign, amt, L, U, exact)
            if flow is not None:
                self.found += 1
                self.start = i
                return flow
        self.missed += 1
        return None

    def _solve(self, cells: np.ndarray, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray,
               exact: bool) -> Flow | None:
        n = len(cells)
        if n < 3:
            return None
        j = int(np.searchsorted(cells, k))
        sub = self._columns(cells)
        Lc = np.asarray(L, dtype=float)[cells]
        Uc = np.asarray(U, dtype=float)[cells]
        room = Uc[j] if sign > 0 else Lc[j]
        if room < amt * (1 - 1e-9) - 1e-12:
            return None
        sigma = lp_scale(Lc, Uc)
        target = min(float(amt) if exact else float(amt) * (1 + 1e-9) + 1e-12, float(room))
        col_lo = np.zeros(2 * n)
        col_hi = np.concatenate([Uc, Lc]) * sigma
        col = j if sign > 0 else j + n
        col_lo[col] = target * sigma
        col_hi[j + n if sign > 0 else j] = 0.0
        w = _clip_weights(np.concatenate([self.w_up[cells], self.w_dn[cells]])) / sigma
        A = sp.hstack([sub, -sub], format="csc")
        if self._h is None:
            self._h = new_highs()  # one instance, a new model per LP (options set once)
        h = self._h
        lp = highspy.HighsLp()
        lp.num_col_ = 2 * n
        lp.num_row_ = A.shape[0]
        lp.col_cost_ = w
        lp.col_lower_ = col_lo
        lp.col_upper_ = _inf(col_hi)
        lp.row_lower_ = np.zeros(A.shape[0])
        lp.row_upper_ = np.zeros(A.shape[0])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = A.indptr.astype(np.int32)
        lp.a_matrix_.index_ = A.indices.astype(np.int32)
        lp.a_matrix_.value_ = A.data.astype(float)
        h.passModel(lp)
        if run_robust(h) != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()
            return None
        x = np.asarray(h.getSolution().col_value) / sigma
        f = x[:n] - x[n:]
        return _checked(f, cells, sub, Lc, Uc, j, sign, amt)

    def _columns(self, cells: np.ndarray) -> sp.csc_matrix:
        """The table's relations restricted to ``cells`` (rows: the relations touching them)."""
        Mc = self.Mc
        starts, ends = Mc.indptr[cells], Mc.indptr[cells + 1]
        rel = _gather(Mc.indptr, Mc.indices, cells)
        data = _gather(Mc.indptr, Mc.data, cells)
        rows, local_rel = np.unique(rel, return_inverse=True)
        indptr = np.concatenate([[0], np.cumsum(ends - starts)])
        out = sp.csc_matrix((data, local_rel, indptr), shape=(len(rows), len(cells)))
        out.sort_indices()
        return out


def _gather(indptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values`` of compressed rows (or columns) ``rows``, concatenated in order (no scipy indexing)."""
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return values[offsets + np.arange(total)]


def _checked(f: np.ndarray, cells: np.ndarray, sub: sp.csc_matrix, Lc: np.ndarray, Uc: np.ndarray, j: int,
             sign: int, amt: float) -> Flow | None:
    """The deviation as a whole-table certificate, after checking it ourselves (not trusting the solver)."""
    scale = np.where(np.isfinite(Uc + Lc), np.abs(Uc) + np.abs(Lc), 0.0)
    nz = np.abs(f) > 1e-9 * np.maximum(scale, 1.0)
    if sign * f[j] < amt * (1 - 1e-6) - 1e-9:
        return None
    idx = np.flatnonzero(nz)
    val = f[idx]
    if (val > Uc[idx] * (1 + 1e-7) + 1e-9).any() or (-val > Lc[idx] * (1 + 1e-7) + 1e-9).any():
        return None
    resid = sub[:, idx] @ val if len(idx) else np.zeros(0)
    if len(resid) and np.abs(resid).max() > 1e-6 * max(1.0, float(np.abs(val).max())):
        return None
    return Flow(cells[idx], val)
