"""Fast secondary suppression: cheapest-cover flows, then audit and repair.

Why this shape: the attacker is beaten for a primary when some alternative table
moves it by its protection level while agreeing with everything published.  Such a
deviation is a flow through the relation system; hiding exactly the cells the flow
touches is a valid pattern for that primary.  So each round

1. audits the current pattern (:func:`.audit.certify`), collecting the
   (primary, direction, attacker) triples that still fail;
2. asks one LP for a single deviation meeting as many of them as possible at the
   least cost — cells already hidden are free, a new cell costs its suppression cost
   spread over the amount of flow it can carry (the usual linearisation of the fixed
   cost, as in the Fischetti–Salazar / sdcTable incremental heuristics) — and hides
   every cell that deviation touches;
3. repeats until the audit passes.  Hiding more cells never helps the outsider, so
   the loop only moves forward; a new single-contributor secondary adds an insider,
   which the next audit checks.

A final clean-up tries to publish again the most expensive secondaries one by one,
keeping each removal only when the audit still passes.
"""

from __future__ import annotations

import time

import numpy as np

from .audit import Problem, Ticker, certify, one_per_cell, scenario_caps
from .lp import Flow, flow_lp


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
    req_k, req_s, req_a = P.requirements()
    cand = np.flatnonzero(P.hideable | hidden)
    hopeless: set[tuple[int, int]] = set()
    for _ in range(max_rounds):
        cert = certify(P, hidden, pool, singletons=singletons, tick=tick)
        pool = cert.pool
        fails = [f for f in cert.failures if f not in hopeless]
        if not fails:
            if hopeless:
                raise Infeasible(sorted(hopeless))
            return hidden, pool
        by_scen: dict[int, list[int]] = {}
        for r, s in fails:
            by_scen.setdefault(s, []).append(r)
        for s in sorted(by_scen):
            tick("protect: choosing secondary cells", None)
            L, U = (P.L, P.U) if s < 0 else scenario_caps(P, s)
            rs = np.array(sorted(set(by_scen[s])), dtype=np.int64)
            while len(rs):
                batch = one_per_cell(rs, req_k)
                level = float(np.max(req_a[batch]))
                w_up, w_dn = _cover_weights(P, cand, hidden, level)
                sat, flow = flow_lp(P.Mc, cand, L, U, req_k[batch], req_s[batch], req_a[batch], w_up, w_dn)
                if flow is not None:
                    hidden[flow.idx] = True
                    pool.append(flow)
                done = set(batch[sat].tolist())
                if not sat.any():
                    if len(batch) == 1:
                        hopeless.add((int(batch[0]), s))
                        done.add(int(batch[0]))
                    else:
                        for r in batch:
                            s1, f1 = flow_lp(P.Mc, cand, L, U, req_k[[r]], req_s[[r]], req_a[[r]],
                                             *_cover_weights(P, cand, hidden, float(req_a[r])))
                            if f1 is not None and s1[0]:
                                hidden[f1.idx] = True
                                pool.append(f1)
                            else:
                                hopeless.add((int(r), s))
                            done.add(int(r))
                            break  # one at a time: the next batch sees the new cells
                rs = np.array([r for r in rs if r not in done], dtype=np.int64)
                # the rest of this scenario's failures may be solved by the new cells:
                # let the next audit decide instead of covering them blindly
                break
    raise RuntimeError("repair did not converge")


def cleanup(P: Problem, hidden: np.ndarray, pool: list[Flow], *, singletons: bool, tick: Ticker,
            deadline: float) -> tuple[np.ndarray, list[Flow]]:
    """Publish again secondaries that are not needed (most expensive first)."""
    secondary = np.flatnonzero(hidden & ~P.primary)
    order = secondary[np.argsort(-P.cost[secondary], kind="stable")]
    for n_done, i in enumerate(order):
        if time.monotonic() > deadline:
            break
        tick("protect: removing unneeded secondary cells", n_done / max(len(order), 1))
        trial = hidden.copy()
        trial[i] = False
        kept = [f for f in pool if trial[f.idx].all()]
        cert = certify(P, trial, kept, singletons=singletons, tick=tick, stop_at_first=True)
        if not cert.failures:
            hidden = trial
            pool = cert.pool
    return hidden, pool


def heuristic(P: Problem, *, singletons: bool, tick: Ticker, cleanup_until: float
              ) -> tuple[np.ndarray, list[Flow]]:
    """A protected pattern (primaries + secondaries) and its certificates."""
    hidden = P.primary.copy()
    hidden, pool = repair(P, hidden, [], singletons=singletons, tick=tick)
    hidden, pool = cleanup(P, hidden, pool, singletons=singletons, tick=tick, deadline=cleanup_until)
    return hidden, pool
