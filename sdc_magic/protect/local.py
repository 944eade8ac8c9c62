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

import itertools
import math

import highspy
import numpy as np
import scipy.sparse as sp

from .lp import Flow, clip_weights, lp_scale, new_highs, pass_lp, run_robust

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
                 *, rank: np.ndarray | None = None, sizes: tuple[tuple[int, int, int], ...] | None = None,
                 boxes: Boxes | None = None) -> None:
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
        #: box certificates tried before any LP (attacker searches only: a covering
        #: search, ``rank`` given, wants the cheapest flow, which need not be a box)
        self.boxes = boxes if rank is None else None
        self.boxed = 0
        self.pinned_out = 0

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
            rels = _sorted_unique(self._relations(frontier), self.M.shape[0])
            if not len(rels):
                break
            reach = _gather(self.M.indptr, self.M.indices, rels)
            reach = reach[self.hidden[reach] & ~seen[reach]]
            if not len(reach):
                break
            cand, hits = _sorted_unique(reach, len(seen), counts=True)
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
        if self.pinned(int(k), sign, amt, L, U):
            self.missed += 1
            self.pinned_out += 1
            return None
        if self.boxes is not None and not exact:
            box = self.boxes.find(int(k), sign, amt, L, U, self.hidden, self.w_up)
            if box is not None and self._balanced(box):
                self.found += 1
                self.boxed += 1
                return box
        flow, i = self._first_local(int(k), sign, amt, L, U, exact, self.start)
        if flow is not None:
            self.found += 1
            self.start = i
            return flow
        self.missed += 1
        return None

    def _first_local(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray, exact: bool,
                     start: int) -> tuple[Flow | None, int]:
        """The first neighbourhood LP (sizes from ``start`` on) that finds a certificate: (it, its size's index)."""
        last: np.ndarray | None = None
        for i in range(start, len(self.sizes)):
            cells = self.near(k, *self.sizes[i])
            if last is not None and len(cells) == len(last):
                break  # the larger neighbourhood is the same one
            last = cells
            flow = self._solve(cells, k, sign, amt, L, U, exact)
            if flow is not None:
                return flow, i
        return None, -1

    def cheapest_cover(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray, *,
                       hidden: np.ndarray, cost: np.ndarray, boxes: Boxes | None) -> Flow | None:
        """The cheaper of two covers of one requirement: the lightest box, the first local LP's flow.

        For a covering search (``rank`` given) on a large table whose pattern is still small,
        where the alternative is the whole-table covering LP: over 12,000 cells that LP took
        5,000-16,000 simplex iterations (1-2 s) per requirement from the last one's basis
        (a 10,000-cell table of sums with 11 primaries: 13 s). The first local LP alone was
        fast but picked dearer cells (+19 % on that table: its neighbourhood is cut by rank
        among hundreds of candidates); a box through the primary (:class:`Boxes`, cells
        weighted by what hiding them costs) is often the cheapest cover of a 3-D table. The
        cheaper of the two by the cost of the cells not yet hidden (then fewer new cells,
        then the LP's weights) is taken; both are checked certificates of the whole table.
        None when neither exists nearby (the caller then asks the whole-table LP).
        """
        if not self.hidden[k]:
            return None
        fixed = np.where(hidden, 0.0, np.asarray(cost, dtype=float))
        found: list[Flow] = []
        if boxes is not None:
            # hidden cells weigh a hair, so that among equally cheap boxes the one moving
            # fewer cells wins
            tiny = 1e-9 * max(float(fixed.max(initial=0.0)), 1.0)
            box = boxes.find(int(k), sign, amt, L, U, self.hidden, np.where(hidden, tiny, fixed))
            if box is not None and self._balanced(box):
                found.append(box)
        flow, _ = self._first_local(int(k), sign, amt, L, U, False, 0)
        if flow is not None:
            found.append(flow)
        if not found:
            self.missed += 1
            return None
        self.found += 1

        def price(f: Flow) -> tuple[float, int, float]:
            new = ~hidden[f.idx]
            weight = np.where(f.val > 0, self.w_up[f.idx], self.w_dn[f.idx]) * np.abs(f.val)
            return float(fixed[f.idx].sum()), int(np.count_nonzero(new)), float(weight.sum())

        return min(found, key=price)

    def pinned(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray) -> bool:
        """True when one relation through k proves that no certificate exists (no LP needed).

        In a relation ``Σ c_j f_j = 0`` moving k by ``sign·amt`` needs the other movable
        cells of that relation to make up ``c_k·sign·amt``; their ranges bound how much
        they can.  When some relation cannot, no deviation of the whole table moves k
        that far (a proof, not a guess), so the neighbourhood LPs would all fail.
        Measured on 25×20×10 counts, singleton-safe: all 194 of the 1,000-cell LPs that
        failed (0.55 s) were pinned this way, and none of the successful ones.
        """
        Mc, M = self.Mc, self.M
        rels = Mc.indices[Mc.indptr[k]:Mc.indptr[k + 1]]
        c_k = Mc.data[Mc.indptr[k]:Mc.indptr[k + 1]]
        for r, ck in zip(rels.tolist(), c_k.tolist(), strict=True):
            lo, hi = M.indptr[r], M.indptr[r + 1]
            members = M.indices[lo:hi]
            coef = M.data[lo:hi]
            other = self.hidden[members] & (members != k)
            m, c = members[other], coef[other]
            # the others must move Σ c_j f_j = −c_k·sign·amt
            if ck * sign < 0:  # ... upwards: c_j > 0 cells up, c_j < 0 cells down
                cap = float(np.sum(np.where(c > 0, c * U[m], -c * L[m])))
            else:
                cap = float(np.sum(np.where(c > 0, c * L[m], -c * U[m])))
            if cap < abs(ck) * amt * (1 - 1e-9) - 1e-12:
                return True
        return False

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
        w = clip_weights(np.concatenate([self.w_up[cells], self.w_dn[cells]])) / sigma
        A = _both_ways(sub)
        if self._h is None:
            self._h = new_highs()  # one instance, a new model per LP (options set once)
        h = self._h
        pass_lp(h, A, w, col_lo, col_hi, np.zeros(A.shape[0]), np.zeros(A.shape[0]))
        if run_robust(h) != highspy.HighsModelStatus.kOptimal:
            h.clearSolver()
            return None
        x = np.asarray(h.getSolution().col_value) / sigma
        f = x[:n] - x[n:]
        return _checked(f, cells, sub, Lc, Uc, j, sign, amt)

    def _balanced(self, f: Flow) -> bool:
        """``M·f = 0`` on every relation f touches (a box is checked like any certificate)."""
        Mc = self.Mc
        counts = Mc.indptr[f.idx + 1] - Mc.indptr[f.idx]
        rel = _gather(Mc.indptr, Mc.indices, f.idx)
        val = _gather(Mc.indptr, Mc.data, f.idx) * np.repeat(f.val, counts)
        # by relation number (no sort): the same sums, in the same order, plus zeros
        resid = np.bincount(rel, weights=val)
        return bool(np.abs(resid).max(initial=0.0) <= 1e-9 * max(1.0, float(np.abs(f.val).max())))

    def _columns(self, cells: np.ndarray) -> sp.csc_matrix:
        """The table's relations restricted to ``cells`` (rows: the relations touching them)."""
        Mc = self.Mc
        starts, ends = Mc.indptr[cells], Mc.indptr[cells + 1]
        rel = _gather(Mc.indptr, Mc.indices, cells)
        data = _gather(Mc.indptr, Mc.data, cells)
        # the relations touched, in order, and each entry's position among them: a mark per
        # relation of the table instead of np.unique's sort (same rows, same numbering)
        mark = np.zeros(Mc.shape[0], dtype=np.int64)
        mark[rel] = 1
        rows = np.flatnonzero(mark)
        local_rel = (np.cumsum(mark) - 1)[rel]
        indptr = np.concatenate([[0], np.cumsum(ends - starts)])
        out = sp.csc_matrix((data, local_rel, indptr), shape=(len(rows), len(cells)))
        out.sort_indices()
        return out


#: At most this many boxes are examined per search (the cheapest of them is taken).
BOX_LIMIT = 20_000
#: ... and at most this many boxes are added up into one certificate.
BOX_ROUNDS = 6
#: Code spaces up to this many keys get a dense key -> cell table (8 bytes a key).
DENSE_KEYS = 4_000_000
#: Partners' key offsets kept between searches (:meth:`Boxes.partner_offsets`), in all
STEPS_KEPT = 2_000_000


class Boxes:
    """Box certificates: the smallest cycles of a table, found without an LP.

    Why: on a large pattern most certificates are a box of hidden cells around the
    primary — a 4-cycle in a 2-D table (rows i, i', columns j, j'), a cube in a 3-D
    one — and the audit asked a local LP for each (1,800 LPs on 300×100, 3-D tables
    several thousand at ~4 ms each).  A box moves every corner by the same amount with
    alternating signs, so every relation it touches sees ``+t`` and ``−t``: in each
    dimension the box takes the primary's code and one *partner* — a sibling leaf
    (same parent, opposite sign), or, for a leaf directly under ``Total``, ``Total``
    itself (same sign: ``Total − leaf`` stays 0), and vice versa.  The product of
    these one-dimensional balanced moves balances every relation of the table (the
    textbook cycle argument behind cell suppression, e.g. Hundepool et al.,
    *Statistical Disclosure Control*, Wiley 2012, §5.2; Cox, JASA 1980).

    A box is a certificate when every corner exists, is movable and has room for the
    move; among the boxes found, the one with the smallest weight (as the local LP
    minimises) is returned, after checking it against every relation and range.  No
    box found proves nothing: the caller then asks its LPs, so verdicts do not change.
    """

    def __init__(self, codes: np.ndarray, dims: list, radix: np.ndarray, sorted_keys: np.ndarray,
                 sorted_idx: np.ndarray) -> None:
        self.codes = np.asarray(codes, dtype=np.int64)
        self.radix = np.asarray(radix, dtype=np.int64)
        self.sorted_keys = sorted_keys
        self.sorted_idx = sorted_idx
        self.keys = self.codes @ self.radix
        #: a dense key -> cell table when the code space is small (one index instead of
        #: a binary search per corner: the searches are most of a box's cost)
        space = int(self.radix[0]) * len(dims[0].labels) if len(dims) else 0  # every code combination
        self.space = space
        self.lookup: np.ndarray | None = None
        if space <= DENSE_KEYS:
            self.lookup = np.full(space, -1, dtype=np.int64)
            self.lookup[self.keys] = np.arange(len(self.keys))
        # per dimension: its codes' parents, where its leaves start, and its leaves grouped by
        # parent (a code's partners are its siblings: kept once per parent, never per code)
        self.parents = [np.asarray(dim.parent, dtype=np.int64) for dim in dims]
        self.leaf_offsets = [int(dim.leaf_offset) for dim in dims]
        self.children: list[dict[int, np.ndarray]] = [_leaves_by_parent(p, o)
                                                      for p, o in zip(self.parents, self.leaf_offsets, strict=True)]
        N = self.codes.shape[1]
        #: every corner but k itself: which dimensions take the partner
        self.masks = np.array([[(m >> d) & 1 for d in range(N)] for m in range(1, 2**N)], dtype=bool)
        self._prepare()

    def _prepare(self) -> None:
        """What :meth:`_box` would otherwise recompute per search (it depends on the codes alone).

        Per dimension and code, the partners as key offsets, each shifted left by
        :attr:`shift` bits with a 1 below when the partner moves against the primary:
        summing a corner's offsets then gives its key and, in the low bits, how many of
        its partners move against k (its sign is the parity) in one array operation.
        Per dimension, which corners (k itself first, then :attr:`masks` order) take the
        partner there, shaped to broadcast over the grid of boxes.
        """
        N = self.codes.shape[1]
        #: low bits holding the count of against-moving partners (at most N of them)
        self.shift = N.bit_length()
        #: False when keys shifted left would not fit in int64 (no real table): no boxes
        self.usable = self.space < 2 ** (62 - self.shift)
        #: per (dimension, code), its partners' key offsets, made when a search first needs them
        #: and kept up to :data:`STEPS_KEPT` offsets in all
        self.steps: dict[tuple[int, int], np.ndarray] = {}
        self.steps_kept = 0
        bits = np.array([[(m >> d) & 1 for d in range(N)] for m in range(2**N)], dtype=np.int64)
        self.corner_bits = [bits[:, d].reshape((2**N,) + (1,) * N) for d in range(N)]

    def partners(self, d: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        """The codes that code ``c`` of dimension ``d`` moves with in a box, and the sign of each
        one's move: the total's top-level leaves (+1); a leaf's siblings (-1) and, under the total,
        the total (+1); none for a hierarchy sub-total (no simple box)."""
        children = self.children[d]
        if c == 0:
            part = children.get(0, np.zeros(0, dtype=np.int64))
            return part, np.ones(len(part))
        if c < self.leaf_offsets[d]:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        parent = int(self.parents[d][c])
        sib = children[parent]
        sib = sib[sib != c]
        if parent == 0:
            return np.concatenate([sib, [0]]), np.concatenate([-np.ones(len(sib)), [1.0]])
        return sib, -np.ones(len(sib))

    def partner_offsets(self, d: int, c: int) -> np.ndarray:
        """Code ``c``'s partners as key offsets (see :meth:`_prepare`).

        Why made on demand (stop 70): made for every code up front, a dimension of n leaves took
        n² offsets: a one-way table of 20,000 villages took 46 s and 12.7 GB to display, and
        ``protect()`` of 50,000 ran out of memory. A search reads only its primary's codes.
        """
        got = self.steps.get((d, c))
        if got is not None:
            return got
        part, sg = self.partners(d, c)
        got = (((part - c) * self.radix[d]) << self.shift) + (sg < 0)
        if self.steps_kept + len(got) <= STEPS_KEPT:
            self.steps[(d, c)] = got
            self.steps_kept += len(got)
        return got

    @classmethod
    def of(cls, model: object) -> Boxes:
        """The finder of a :class:`~.model.TableModel`."""
        ex = model.extra  # type: ignore[attr-defined]
        return cls(model.codes, model.dims, ex["radix"], ex["sorted_keys"], ex["sorted_idx"])  # type: ignore[attr-defined]

    def _cells(self, keys: np.ndarray) -> np.ndarray:
        """Cell index of each key, -1 where the cell does not exist (a known zero)."""
        if self.lookup is not None:
            return self.lookup[keys]
        sk = self.sorted_keys
        pos = np.minimum(np.searchsorted(sk, keys), len(sk) - 1)
        return np.where(sk[pos] == keys, self.sorted_idx[pos], -1)

    def find(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray, movable: np.ndarray,
             weights: np.ndarray) -> Flow | None:
        """A sum of boxes moving k by ``sign·amt`` within ranges L, U over ``movable`` cells, or None.

        Small cells limit how far one box can move (a corner moving down by 4 must hold
        at least 4), so boxes are added greedily, each as far as the ranges left by the
        previous ones allow (the augmenting-path idea of max-flow, with boxes as paths),
        at most :data:`BOX_ROUNDS` of them; the lightest of the boxes that go farthest
        is taken each time.
        """
        t_left = float(amt)
        if (U[k] if sign > 0 else L[k]) < t_left:
            return None
        moved: dict[int, float] = {}
        L_res, U_res = L, U
        grid: _Grid | None = None
        for _ in range(BOX_ROUNDS):
            if grid is None:
                got = self._box(k, sign, t_left, L_res, U_res, movable, weights, keep=True)
                if got is None:
                    return None
                cells, unit, cap, grid = got
            else:
                # a later round: the boxes of the first one, with the rooms of the cells the
                # last box moved brought up to date.  The same boxes can win as in a new
                # search: a partner dropped then had no room at its edge corner, and only
                # the last box's cells changed room, none of which is such an edge corner;
                # a partner whose edge corner ran out of room stays in, but every box
                # through it has no capacity left.  Order and sums are the same (0.1 ->
                # 0.03 ms a round).
                grid.update(cells, L_res, U_res)
                best = self._pick(k, sign, t_left, L_res, U_res, weights, grid)
                if best is None:
                    return None
                cells, unit, cap = best
            x = min(cap, t_left)
            for cell, u in zip(cells.tolist(), unit.tolist(), strict=True):
                moved[cell] = moved.get(cell, 0.0) + sign * x * u
            t_left -= x
            if t_left <= 1e-9 * max(float(amt), 1.0):
                break
            if L_res is L:
                L_res, U_res = L.copy(), U.copy()
            v = sign * x * unit
            U_res[cells] -= v
            L_res[cells] += v
            if grid.truncated:
                grid = None  # (a truncated grid depends on which partners have room: search anew)
        else:
            return None
        idx = np.array(sorted(c for c, v in moved.items() if v != 0.0), dtype=np.int64)
        val = np.array([moved[int(c)] for c in idx])
        if not len(idx) or (val > U[idx]).any() or (-val > L[idx]).any():
            return None
        return Flow(idx, val)

    def _box(self, k: int, sign: int, want: float, L: np.ndarray, U: np.ndarray, movable: np.ndarray,
             weights: np.ndarray, keep: bool = False
             ) -> tuple[np.ndarray, np.ndarray, float] | tuple[np.ndarray, np.ndarray, float, _Grid] | None:
        """The box through k going farthest (up to ``want``), lightest among those: (cells, ±1, capacity).

        Every corner of every box at once, in few numpy calls (their overhead, not the
        arithmetic on a few hundred boxes, was the cost: 0.19 → 0.10 ms a search): the
        edge corners of all dimensions in one vector, then the corners × boxes grid by
        broadcasting the partners' key offsets.  The boxes, their order and the sums
        behind the tie-breaks are those of a box-by-box computation.  ``keep``: the
        grid of boxes is returned too (for :meth:`find`'s later rounds).
        """
        c = self.codes[k]
        N = len(c)
        room_k = float(U[k] if sign > 0 else L[k])
        if room_k <= 0 or not self.usable:
            return None
        steps = [self.partner_offsets(d, int(c[d])) for d in range(N)]
        lengths = [len(st) for st in steps]
        if not all(lengths):
            return None
        key_k = int(self.keys[k])
        sh = self.shift
        # the edge corners (k with one dimension moved to a partner) must be able to move
        code = np.concatenate(steps)
        cell = self._cells(key_k + (code >> sh))
        up = (code & 1) == (0 if sign > 0 else 1)
        ok = (cell >= 0) & movable[cell] & (np.where(up, U[cell], L[cell]) > 0)  # (-1: masked by cell >= 0)
        ends = list(itertools.accumulate(lengths))
        seen = np.cumsum(ok).tolist()
        at = [0, *(seen[e - 1] for e in ends)]  # usable partners before each dimension's end
        sizes = [at[d + 1] - at[d] for d in range(N)]
        if not all(sizes):
            return None
        code = code[ok]
        codes = [code[at[d]:at[d + 1]] for d in range(N)]
        truncated = math.prod(sizes) > BOX_LIMIT
        if truncated:
            # deterministic truncation: the first partners of each dimension
            keep_n = max(1, int(BOX_LIMIT ** (1.0 / N)))
            codes = [x[:keep_n] for x in codes]
            sizes = [len(x) for x in codes]
        # corners (k itself, then masks order) × boxes (the grid of partners, C order)
        keys: np.ndarray | int = key_k << sh
        for d in range(N):
            shape = [1] * (N + 1)
            shape[d + 1] = sizes[d]
            keys = keys + self.corner_bits[d] * codes[d].reshape(shape)
        keys = np.asarray(keys).reshape(2**N, math.prod(sizes))[1:]
        corner_cells = self._cells(keys >> sh)
        odd = keys & 1  # an odd number of partners moving against k: the corner moves -1
        up = odd == (0 if sign > 0 else 1)
        room = np.where((corner_cells >= 0) & movable[corner_cells],
                        np.where(up, U[corner_cells], L[corner_cells]), 0.0)
        grid = _Grid(corner_cells, odd, up, room, truncated)
        best = self._pick(k, sign, want, L, U, weights, grid)
        if best is None or not keep:
            return best
        return (*best, grid)

    def _pick(self, k: int, sign: int, want: float, L: np.ndarray, U: np.ndarray, weights: np.ndarray,
              grid: _Grid) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The farthest-going box of ``grid`` (up to ``want``), the lightest among those, or None."""
        room_k = float(U[k] if sign > 0 else L[k])
        if room_k <= 0:
            return None
        corner_cells = grid.cells
        cap = np.minimum(grid.room.min(axis=0), min(room_k, want))
        if not (cap > 0).any():
            return None
        best_cap = float(cap.max())
        top = np.flatnonzero(cap >= best_cap)
        weight = np.full(len(top), float(weights[k]))
        for row in weights[corner_cells[:, top]]:  # (in corner order: the same sums, the same ties, as one by one)
            weight += row
        b = int(top[np.argmin(weight)])
        cells = np.concatenate([[k], corner_cells[:, b]])
        unit = np.concatenate([[1.0], np.where(grid.odd[:, b], -1.0, 1.0)])
        if len(set(cells.tolist())) != len(cells):
            return None
        return cells, unit, best_cap


def _leaves_by_parent(parent: np.ndarray, leaf_offset: int) -> dict[int, np.ndarray]:
    """The leaf codes (from ``leaf_offset`` on) of a dimension grouped by their parent, ascending."""
    leaves = np.arange(leaf_offset, len(parent), dtype=np.int64)
    if not len(leaves):
        return {}
    order = np.argsort(parent[leaves], kind="stable")
    ordered, parents = leaves[order], parent[leaves][order]
    cuts = np.flatnonzero(np.diff(parents)) + 1
    return {int(group_parents[0]): group for group, group_parents in
            zip(np.split(ordered, cuts), np.split(parents, cuts), strict=True)}


class _Grid:
    """The boxes of one search (:meth:`Boxes._box`): corner cells, signs and rooms, corners × boxes."""

    __slots__ = ("cells", "odd", "room", "truncated", "up")

    def __init__(self, cells: np.ndarray, odd: np.ndarray, up: np.ndarray, room: np.ndarray,
                 truncated: bool) -> None:
        self.cells = cells
        self.odd = odd
        self.up = up  # the corner's move uses its room upwards (U), else downwards (L)
        self.room = room
        self.truncated = truncated

    def update(self, moved: np.ndarray, L: np.ndarray, U: np.ndarray) -> None:
        """Rooms of the corners at ``moved`` cells (existing, movable: a box's) read again from L, U."""
        at = np.isin(self.cells, moved)
        cc = self.cells[at]
        self.room[at] = np.where(self.up[at], U[cc], L[cc])


def _both_ways(sub: sp.csc_matrix) -> sp.csc_matrix:
    """``[sub, −sub]`` (up and down columns) built from the arrays: sp.hstack costs more than the LP's setup."""
    nnz = sub.indptr[-1]
    indptr = np.concatenate([sub.indptr, sub.indptr[1:] + nnz])
    return sp.csc_matrix((np.concatenate([sub.data, -sub.data]), np.concatenate([sub.indices, sub.indices]), indptr),
                         shape=(sub.shape[0], 2 * sub.shape[1]))


def _sorted_unique(x: np.ndarray, size: int, counts: bool = False
                   ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.unique(x)`` (with ``return_counts``) for integers in ``[0, size)``.

    A count per possible value instead of a sort when ``x`` is not much shorter than
    ``size`` (the neighbourhoods of :meth:`LocalAttacker.near`: thousands of entries
    among a few thousand cells or relations); the same sorted values and counts.
    """
    if 16 * len(x) < size:
        return np.unique(x, return_counts=counts)
    n = np.bincount(x, minlength=size)
    vals = np.flatnonzero(n)
    return (vals, n[vals]) if counts else vals


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
    # ``sub[:, idx] @ val`` without scipy's column indexing (a fifth of a millisecond per LP):
    # the same products added in the same order, column by column
    counts = sub.indptr[idx + 1] - sub.indptr[idx]
    resid = np.bincount(_gather(sub.indptr, sub.indices, idx),
                        weights=_gather(sub.indptr, sub.data, idx) * np.repeat(val, counts),
                        minlength=sub.shape[0]) if len(idx) else np.zeros(0)
    if len(resid) and np.abs(resid).max() > 1e-6 * max(1.0, float(np.abs(val).max())):
        return None
    return Flow(cells[idx], val)
