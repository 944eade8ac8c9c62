"""The LP building blocks: restricted attacker models, split and rescaled certificates."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import _prepare
from sdc_magic.protect.audit import Problem, rescale, split_flow
from sdc_magic.protect.lp import Attacker, flow_lp


def _counts(shape: tuple[int, int], seed: int, p: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    idx = np.indices(shape).reshape(2, -1)
    df = pd.DataFrame({"a": idx[0], "b": idx[1], "n": n.ravel()})
    return df[df.n > 0].reset_index(drop=True)


def _problem(df: pd.DataFrame, threshold: int = 5) -> Problem:
    tab = _prepare(df, ["a", "b"], "n", None, None, None, None, True)
    a = tab.value
    n = len(a)
    primary = (a > 0) & (a < threshold)
    L = a.copy()
    U = np.full(n, np.inf)
    lpl = np.where(primary, np.minimum(np.maximum(0.1 * a, 1.0), a), 0.0)
    upl = np.where(primary, np.maximum(threshold - a, 1.0), 0.0)
    return Problem(tab.model.M, a, L, U, primary, np.ones(n, bool), lpl, upl, np.abs(a), np.full(n, np.nan),
                   np.full(n, np.nan), S=tab.model.S.tocsr())


def _balanced(P: Problem, f) -> bool:
    v = np.zeros(P.n)
    v[f.idx] = f.val
    return bool(np.abs(P.M @ v).max() <= 1e-7 * max(1.0, np.abs(v).max()))


def test_restricted_attacker_agrees_with_the_whole_table_model() -> None:
    P = _problem(_counts((12, 9), 3, 0.25))
    hidden = P.primary | (P.a < 9)
    full = Attacker(P.Mc, P.L, P.U, np.ones(P.n))
    full.set_hidden(hidden)
    sub = Attacker(P.Mc, P.L, P.U, np.ones(P.n), cells=np.flatnonzero(hidden))
    sub.set_hidden(hidden)
    assert sub.n < full.n
    req_k, req_s, req_a = P.requirements()
    for k, s, amt in zip(req_k, req_s, req_a, strict=True):
        f1 = full.reach(int(k), int(s), float(amt))
        f2 = sub.reach(int(k), int(s), float(amt))
        assert (f1 is None) == (f2 is None)
        if f2 is not None:
            assert hidden[f2.idx].all() and _balanced(P, f2) and s * f2.at(np.array([k]))[0] >= amt * (1 - 1e-6)
    # publishing a cell again keeps the model; hiding a new one is refused
    fewer = hidden.copy()
    fewer[np.flatnonzero(hidden & ~P.primary)[0]] = False
    sub.set_hidden(fewer)
    assert not sub.covers(np.ones(P.n, bool))


def test_split_parts_and_rescaled_certificates_are_certificates() -> None:
    P = _problem(_counts((20, 15), 5, 0.15))
    hidden = P.primary | (P.a < 12)
    H = np.flatnonzero(hidden)
    req_k, req_s, req_a = P.requirements()
    sat, flow = flow_lp(P.Mc, H, P.L, P.U, req_k, req_s, req_a)
    assert flow is not None and sat.any()
    parts = split_flow(P, flow)
    assert sum(len(p.idx) for p in parts) == len(flow.idx)
    # two certificates touching no common relation come apart again
    att = Attacker(P.Mc, P.L, P.U, np.ones(P.n), cells=H)
    att.set_hidden(hidden)
    certs = [f for f in (att.reach(int(k), int(s), float(amt)) for k, s, amt in zip(req_k, req_s, req_a, strict=True))
             if f is not None]
    rows = [set(P.Mc[:, f.idx].indices.tolist()) for f in certs]
    pair = next((i, j) for i in range(len(certs)) for j in range(i) if not rows[i] & rows[j])
    both = np.concatenate([certs[pair[0]].idx, certs[pair[1]].idx])
    order = np.argsort(both)
    vals = np.concatenate([certs[pair[0]].val, certs[pair[1]].val])[order]
    two = split_flow(P, type(flow)(both[order], vals))
    assert sorted(len(p.idx) for p in two) == sorted(len(certs[i].idx) for i in pair)
    parts += two
    for part in parts:
        assert _balanced(P, part)
        assert (part.val <= P.U[part.idx]).all() and (-part.val <= P.L[part.idx] + 1e-6).all()  # LP tolerance
    rescaled = 0
    for k, s, amt in zip(req_k, req_s, req_a, strict=True):
        for part in parts:
            g = rescale(part, int(k), -int(s), float(amt), P.L, P.U)
            if g is None:
                continue
            rescaled += 1
            assert _balanced(P, g)
            assert -s * g.at(np.array([k]))[0] >= amt * (1 - 1e-9)
            assert (g.val <= P.U[g.idx] * (1 + 1e-9)).all() and (-g.val <= P.L[g.idx] * (1 + 1e-9) + 1e-12).all()
    assert rescaled > 0


def test_large_table_singleton_safe_uses_batched_insider_certificates() -> None:
    # above 5,000 cells: batched outsider and insider LPs, split certificates
    df = _counts((80, 70), 9, 0.12)
    res = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=5), singletons=True)
    assert res.audit_ok, res.message
    assert len(res.cells) > 5000
    assert (res.cells.status == "primary").sum() > 200


def test_tau_levels_drop_the_threshold_reach_and_keep_the_rule_level() -> None:
    df = pd.DataFrame({"a": list("xxyyzz"), "b": list("pqpqpq"), "n": [1, 6, 7, 8, 9, 2]})
    ours = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3), singletons=False)
    tau = protect(df, dims=["a", "b"], value="n", rules=Rules(threshold=3), singletons=False, levels="tau")
    for name, res in (("ours", ours), ("tau", tau)):
        req = res.requirements
        one = req[(req["a"] == "x") & (req["b"] == "p") & (req["direction"] == "up")]
        # ours: the interval reaches the threshold (3); tau: 10 % of 1, at least the minimal width 1
        assert float(one["must_reach"].iloc[0]) == (3.0 if name == "ours" else 2.0)
    assert tau.audit_ok and ours.audit_ok
    try:
        protect(df, dims=["a", "b"], value="n", levels="tauargus")
    except ValueError as exc:
        assert "levels" in str(exc)
    else:
        raise AssertionError("an unknown levels value must be refused")
