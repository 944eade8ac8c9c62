"""Certificates against requirements: what a flow meets, a flow rescaled to a requirement.

A requirement is (primary cell, direction, amount) (:meth:`.audit.Problem.requirements`);
a certificate (:class:`~.lp.Flow`) meets it when it moves the cell that way by at least
the amount.  The audit (:func:`.audit.certify`) indexes its pool of certificates by the
requirements they meet and the requirement cells they move (:func:`absorb_many`), and
tries a known certificate scaled or reversed before any LP (:func:`rescale`).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .lp import Flow, column_residual


def flow_requirements(f: Flow, req_k: np.ndarray, req_s: np.ndarray, req_a: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Requirements on cells a flow moves: (their indices, met by the flow, the moved requirement cells).

    ``req_k`` is sorted (:meth:`.audit.Problem.requirements`), so each moved cell's
    requirements are one slice: no sparse matrix per certificate.  Remembered on the
    certificate for the same requirement arrays (certificates are never changed).
    """
    memo = f.memo.get("reqs")
    if memo is not None and memo[0] is req_k:
        return memo[1]
    got = _flow_reqs_of(f, req_k, req_s, req_a)
    f.memo["reqs"] = (req_k, got)
    return got


def _flow_reqs_of(f: Flow, req_k: np.ndarray, req_s: np.ndarray, req_a: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = np.searchsorted(req_k, f.idx, side="left")
    hi = np.searchsorted(req_k, f.idx, side="right")
    has = hi > lo
    if not has.any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, np.zeros(0, dtype=bool), empty
    counts = hi[has] - lo[has]
    starts = np.repeat(lo[has], counts)
    rs = starts + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    vals = np.repeat(f.val[has], counts)
    ok = vals * req_s[rs] >= req_a[rs] * (1 - 1e-6) - 1e-9
    return rs, ok, f.idx[has]


def one_per_cell(idx: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Requirement indices keeping only the first one for each cell (one direction per LP)."""
    _, first = np.unique(k[idx], return_index=True)
    return idx[np.sort(first)]


def rescale(f: Flow, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray) -> Flow | None:
    """``t·f`` moving cell k by exactly ``sign·amt``, when it stays within the ranges.

    The attacker's deviations form a polytope around 0 (``M·f = 0`` and a box), so a
    certificate scaled (or reversed) is still one as long as every cell stays in its
    range: on a count table, the certificate that pushes a small cell up to the
    threshold, reversed and shrunk, usually pulls it down by its lower level too.
    """
    pos = int(np.searchsorted(f.idx, k))
    if pos >= len(f.idx) or f.idx[pos] != k or f.val[pos] == 0:
        return None
    v = f.val * (sign * amt / f.val[pos])
    lo, hi = L[f.idx], U[f.idx]
    if (v > hi * (1 + 1e-9) + 1e-12).any() or (-v > lo * (1 + 1e-9) + 1e-12).any():
        return None
    return Flow(f.idx, v)


def absorb_many(pool: list[Flow], start: int, req_k: np.ndarray, req_s: np.ndarray, req_a: np.ndarray,
                certified_by: defaultdict[int, list[int]], touching: dict[int, list[int]]) -> None:
    """What ``pool[start:]`` certifies and touches, appended in pool order (as one by one).

    An audit starts by taking in every certificate found so far (10,000 of them during
    the clean-up of 50×40×10, once per trial): grouping (requirement, certificate) pairs
    with one stable sort replaces millions of list appends.
    """
    facts = [flow_requirements(pool[fi], req_k, req_s, req_a) for fi in range(start, len(pool))]
    fis = np.arange(start, len(pool))
    for pick, target in ((lambda rs, ok, cells: rs[ok], None), (lambda rs, ok, cells: cells, touching)):
        parts = [pick(*f) for f in facts]
        keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        if not len(keys):
            continue
        owners = np.repeat(fis, [len(p) for p in parts])
        order = np.argsort(keys, kind="stable")
        keys, owners = keys[order], owners[order]
        uniq, first = np.unique(keys, return_index=True)
        ends = np.append(first[1:], len(keys))
        owner_list = owners.tolist()
        for key, a, b in zip(uniq.tolist(), first.tolist(), ends.tolist(), strict=True):
            if target is None:
                certified_by[key].extend(owner_list[a:b])
            else:
                target.setdefault(key, []).extend(owner_list[a:b])


class Cancellation:
    """Certificates of a clean-up trial made from two lost ones, without an LP.

    Why: a clean-up trial publishes one cell ``c`` again, and every certificate that moves c
    is lost; the requirements they met are asked again, each an attacker LP (on the seed table
    most of the clean-up's LPs). Two lost certificates f and g (``g_c ≠ 0``) give
    ``h = f − (f_c / g_c)·g``: every relation stays balanced (it is linear), c no longer moves,
    and no other cell outside the trial's pattern does. When h stays within the attacker's
    ranges and still moves the primary far enough, it is a certificate of the trial: checked
    like an LP's (ranges, relations, requirement) before it is returned. On the seed table 334
    of the clean-up's 435 feasible attacker LPs had such a pair. A question without one goes to
    the LP as before, so every "no" is still an LP's and the patterns are the same.
    """

    #: At most this many lost certificates are combined (the most recent, in pool order): the
    #: work per question is (candidates × partners × cells), kept to a few hundred thousand.
    MAX_FLOWS = 64

    def __init__(self, flows: list[Flow], cell: int, Mc: object) -> None:
        moving = [f for f in flows if f.value_at(cell) != 0.0][-self.MAX_FLOWS:]
        self.cell = int(cell)
        self.Mc = Mc
        self.cols = (np.unique(np.concatenate([f.idx for f in moving])) if moving
                     else np.zeros(0, dtype=np.int64))
        self.D = np.zeros((len(moving), len(self.cols)))
        for row, f in enumerate(moving):
            self.D[row, np.searchsorted(self.cols, f.idx)] = f.val
        self.at_c = self.D[:, int(np.searchsorted(self.cols, self.cell))] if len(moving) else np.zeros(0)
        self.found = 0

    def find(self, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray) -> Flow | None:
        """A certificate moving cell k by ``sign·amt`` within ranges (L, U) made of two lost ones, or None."""
        if len(self.D) < 2:
            return None
        pk = int(np.searchsorted(self.cols, k))
        if pk >= len(self.cols) or self.cols[pk] != k:
            return None
        need = amt * (1 - 1e-6) - 1e-9
        lead = np.flatnonzero(sign * self.D[:, pk] >= need)
        if not len(lead):
            return None
        pc = int(np.searchsorted(self.cols, self.cell))
        lo, hi = L[self.cols], U[self.cols]
        # every (lead f, partner g): h = f − (f_c/g_c)·g, shape (leads, partners, cells)
        t = self.D[lead, pc][:, None] / self.at_c[None, :]
        H = self.D[lead][:, None, :] - t[:, :, None] * self.D[None, :, :]
        H[:, :, pc] = 0.0
        with np.errstate(invalid="ignore"):
            ok = ((sign * H[:, :, pk] >= need)
                  & (hi * (1 + 1e-9) + 1e-12 >= H).all(axis=2)
                  & (lo * (1 + 1e-9) + 1e-12 >= -H).all(axis=2))
        ok[np.arange(len(lead)), lead] = False  # (f with itself is 0)
        if not ok.any():
            return None
        # the smallest certificate (fewest cells moved: fewer insiders crossed), then the first
        size = np.where(ok, (H != 0).sum(axis=2), np.iinfo(np.int64).max)
        a, b = np.unravel_index(int(np.argmin(size)), size.shape)
        h = H[a, b]
        nz = np.flatnonzero(h)
        idx, val = self.cols[nz], h[nz]
        resid = column_residual(self.Mc, idx, val)  # type: ignore[arg-type]
        if len(resid) and np.abs(resid).max() > 1e-6 * max(1.0, float(np.abs(val).max())):
            return None
        self.found += 1
        return Flow(idx, val)
