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

from .lp import Flow


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
