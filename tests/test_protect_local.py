"""Small attacker LPs (protect/local.py) and interval sweeps change the cost of the audit, never its verdicts.

Each test runs the same audit twice on one large pattern: once with the shortcuts
(local certificates, sweeps, single-relation failures) and once with whole-table LPs
only, and asks for the same failures and the same intervals to the last digit.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import _prepare

audit = importlib.import_module("sdc_magic.protect.audit")
attacker_intervals = importlib.import_module("sdc_magic.protect.attacker_intervals")
local = importlib.import_module("sdc_magic.protect.local")


def _counts(shape: tuple[int, ...], seed: int, p: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({f"v{j}": [f"x{k:03d}" for k in idx[j]] for j in range(len(shape))})
    df["n"] = n.ravel()
    return df[df.n > 0].reset_index(drop=True)


def _problem(df: pd.DataFrame, hidden_share: float, seed: int):
    dims = [c for c in df.columns if c.startswith("v")]
    tab = _prepare(df, dims, "n", None, None, None, None, True)
    a = tab.value
    n = len(a)
    rng = np.random.default_rng(seed)
    primary = (a > 0) & (a < 5) & tab.model.is_inner
    hidden = primary | (rng.random(n) < hidden_share)
    lpl = np.where(primary, np.minimum(a, 1.0), 0.0)
    upl = np.where(primary, np.where(a == 1, 25.0, 5.0 - a), 0.0)  # some levels out of reach: failures
    scen = np.where(a == 1, 0.0, np.nan)
    P = audit.Problem(tab.model.M, a, a.copy(), np.full(n, np.inf), primary, np.ones(n, bool), lpl, upl,
                      np.maximum(a, 1.0), scen.copy(), scen.copy(), S=tab.model.S.tocsr())
    return P, hidden


@pytest.mark.parametrize("shape,seed,p,share", [((120, 60), 3, 0.15, 0.0), ((20, 15, 8), 4, 0.3, 0.0)])
def test_local_certificates_give_the_whole_table_verdicts(shape, seed, p, share, monkeypatch) -> None:
    P, hidden = _problem(_counts(shape, seed, p), share, seed)
    assert local.LocalAttacker.worth(hidden)
    fast = audit.certify(P, hidden, [], singletons=True)
    P2, _ = _problem(_counts(shape, seed, p), share, seed)
    monkeypatch.setattr(local, "MIN_HIDDEN", 10**9)
    slow = audit.certify(P2, hidden, [], singletons=True)
    assert sorted(fast.failures) == sorted(slow.failures)
    assert len(fast.failures) > 0  # the pattern is not trivially safe: the verdicts were tested
    # every certificate found is a valid deviation of the whole table
    for f in fast.pool:
        assert hidden[f.idx].all()
        assert np.abs(P.M[:, f.idx] @ f.val).max(initial=0.0) <= 1e-6 * max(1.0, np.abs(f.val).max())
        assert (f.val <= P.U[f.idx] + 1e-7).all() and (-f.val <= P.L[f.idx] + 1e-7).all()


@pytest.mark.parametrize("shape,seed,p,share", [((150, 40), 5, 0.12, 0.08), ((16, 12, 6), 6, 0.3, 0.15)])
def test_sweeps_leave_intervals_exact(shape, seed, p, share, monkeypatch) -> None:
    P, hidden = _problem(_counts(shape, seed, p), share, seed)
    assert hidden.sum() >= attacker_intervals.SWEEP_MIN_HIDDEN
    lo1, hi1 = attacker_intervals.intervals(P, hidden)
    monkeypatch.setattr(attacker_intervals, "SWEEP_MIN_HIDDEN", 10**9)
    lo2, hi2 = attacker_intervals.intervals(P, hidden)
    np.testing.assert_array_equal(np.isnan(lo1), np.isnan(lo2))
    np.testing.assert_allclose(lo1, lo2, rtol=1e-9, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(hi1, hi2, rtol=1e-9, atol=1e-9, equal_nan=True)


def test_large_three_dimensional_table_is_protected_not_blocked() -> None:
    """A 12x10x6 count table with ~45 % primaries, singleton-safe: an audited pattern, every primary covered."""
    df = _counts((12, 10, 6), 8, 0.3)
    res = protect(df, dims=["v0", "v1", "v2"], value="n", rules=Rules(threshold=5, protection=10.0),
                  singletons=True, time_limit=60)
    assert res.audit_ok, res.message
    cells = res.cells
    inner = (cells[["v0", "v1", "v2"]] != "Total").all(axis=1)
    small = inner & (cells.value > 0) & (cells.value < 5)
    assert (cells.status[small] == "primary").all()
    # intervals of hidden primaries reach the threshold or zero (ours levels), never narrower
    hid = cells[small]
    assert ((hid.upper >= 5 - 1e-9) & (hid.lower <= hid.value - 1 + 1e-9)).all()
    assert res.method.startswith("heuristic") or res.method.startswith("optimal")


def _hier_counts(seed: int) -> tuple[pd.DataFrame, dict]:
    """A 2-level hierarchy (4 groups of 6 leaves) × 30 columns × 3: boxes must stay inside a group."""
    rng = np.random.default_rng(seed)
    rows = [(f"g{g}l{leaf}", f"c{c:02d}", f"z{z}", int(rng.negative_binomial(2, 0.3)))
            for g in range(4) for leaf in range(6) for c in range(30) for z in range(3)]
    df = pd.DataFrame(rows, columns=["v0", "v1", "v2", "n"])
    df = df[df.n > 0].reset_index(drop=True)
    return df, {"v0": {f"g{g}": [f"g{g}l{leaf}" for leaf in range(6)] for g in range(4)}}


@pytest.mark.parametrize("case", ["2d", "3d", "hierarchy"])
def test_box_certificates_give_the_whole_table_verdicts(case, monkeypatch) -> None:
    """Sums of boxes (local.Boxes) replace most local LPs: same failures, every certificate checked."""
    if case == "hierarchy":
        df, hier = _hier_counts(9)
    else:
        df, hier = _counts((120, 60) if case == "2d" else (20, 15, 8), 11, 0.15 if case == "2d" else 0.3), None
    dims = [c for c in df.columns if c.startswith("v")]

    def problem():
        tab = _prepare(df, dims, "n", None, None, hier, None, True)
        a = tab.value
        n = len(a)
        primary = (a > 0) & (a < 5) & tab.model.is_inner
        lpl = np.where(primary, np.minimum(a, 1.0), 0.0)
        upl = np.where(primary, np.where(a == 1, 25.0, 5.0 - a), 0.0)
        scen = np.where(a == 1, 0.0, np.nan)
        P = audit.Problem(tab.model.M, a, a.copy(), np.full(n, np.inf), primary, np.ones(n, bool), lpl, upl,
                          np.maximum(a, 1.0), scen.copy(), scen.copy(), S=tab.model.S.tocsr(),
                          boxes=local.Boxes.of(tab.model))
        return P, primary.copy()

    P, hidden = problem()
    assert local.LocalAttacker.worth(hidden)
    fast = audit.certify(P, hidden, [], singletons=True)
    P2, _ = problem()
    P2.boxes = None
    monkeypatch.setattr(local, "MIN_HIDDEN", 10**9)
    slow = audit.certify(P2, hidden, [], singletons=True)
    assert sorted(fast.failures) == sorted(slow.failures)
    assert len(fast.failures) > 0
    for f in fast.pool:
        assert hidden[f.idx].all()
        assert np.abs(P.M[:, f.idx] @ f.val).max(initial=0.0) <= 1e-6 * max(1.0, np.abs(f.val).max())
        assert (f.val <= P.U[f.idx] + 1e-7).all() and (-f.val <= P.L[f.idx] + 1e-7).all()
    # boxes did the work: most outsider certificates are sums of boxes
    monkeypatch.setattr(local, "MIN_HIDDEN", 600)
    att = local.LocalAttacker(P.M, P.Mc, hidden, P._weights(), boxes=P.boxes)
    req_k, req_s, req_a = P.requirements()
    for r in range(0, len(req_k), 7):
        att.reach(int(req_k[r]), int(req_s[r]), float(req_a[r]), P.L, P.U)
    assert att.boxed > 0.5 * att.found


def test_incremental_cleanup_keeps_the_same_pattern(monkeypatch) -> None:
    """Clean-up trials auditing only the requirements the published cell touched end on the same pattern."""
    heuristic = importlib.import_module("sdc_magic.protect.heuristic")
    df = _counts((16, 12, 6), 21, 0.3)
    kw = dict(dims=["v0", "v1", "v2"], value="n", rules=Rules(threshold=5, protection=10.0), singletons=True,
              time_limit=120)
    trials = []
    real = heuristic._PoolIndex.trial
    monkeypatch.setattr(heuristic._PoolIndex, "trial", lambda self, i: trials.append(i) or real(self, i))
    fast = protect(df, **kw)
    assert trials  # the incremental trials ran
    monkeypatch.setattr(heuristic, "INCREMENTAL_CLEANUP", False)
    slow = protect(df, **kw)
    assert fast.audit_ok and slow.audit_ok
    assert (fast.cells.status == "secondary").sum() > 0
    pd.testing.assert_frame_equal(fast.cells, slow.cells)


@pytest.mark.parametrize("shape,seed,p", [((120, 60), 3, 0.15), ((20, 15, 8), 4, 0.3)])
def test_a_pinned_primary_has_no_certificate_anywhere(shape, seed, p) -> None:
    """``LocalAttacker.pinned`` skips the neighbourhood LPs: it must never skip a primary
    the whole-table LP could move (that would turn a protected cell into a failure),
    and it must catch the typical hopeless case (a relation whose other hidden cells
    cannot make up the move)."""
    P, hidden = _problem(_counts(shape, seed, p), 0.0, seed)
    req_k, req_s, req_a = P.requirements()
    near = local.LocalAttacker(P.M, P.Mc, hidden, P._weights())
    att = P.attacker(hidden)
    pinned = 0
    for r in range(0, len(req_k), 7):
        k, s, amt = int(req_k[r]), int(req_s[r]), float(req_a[r])
        if near.pinned(k, s, amt, P.L, P.U):
            pinned += 1
            assert att.reach(k, s, amt) is None, f"cell {k} pinned but the whole-table LP moves it"
    assert pinned > 0


def _box_one_by_one(bx, k: int, sign: int, want: float, L: np.ndarray, U: np.ndarray, movable: np.ndarray,
                    weights: np.ndarray):
    """``Boxes._box`` written box by box and corner by corner (the definition the fast one must match)."""
    import itertools

    c = bx.codes[k]
    N = len(c)
    room_k = float(U[k] if sign > 0 else L[k])
    if room_k <= 0:
        return None

    def cell_of(codes) -> int:
        key = int(np.dot(codes, bx.radix))
        got = np.flatnonzero(bx.keys == key)
        return int(got[0]) if len(got) else -1

    def room(cell: int, unit: float) -> float:
        if cell < 0 or not movable[cell]:
            return 0.0
        return float(U[cell] if sign * unit > 0 else L[cell])

    usable = []
    for d in range(N):
        part, sg = bx.partners(d, int(c[d]))
        keep = []
        for p, s in zip(part.tolist(), sg.tolist(), strict=True):
            codes = c.copy()
            codes[d] = p
            if room(cell_of(codes), s) > 0:
                keep.append((p, s))
        if not keep:
            return None
        usable.append(keep)
    if np.prod([len(u) for u in usable]) > local.BOX_LIMIT:
        usable = [u[:max(1, int(local.BOX_LIMIT ** (1.0 / N)))] for u in usable]
    best = None
    for choice in itertools.product(*usable):  # C order over the dimensions' partners
        cells, units, cap, weight = [k], [1.0], min(room_k, want), float(weights[k])
        for m in range(1, 2**N):
            codes, unit = c.copy(), 1.0
            for d in range(N):
                if (m >> d) & 1:
                    codes[d], unit = choice[d][0], unit * choice[d][1]
            cell = cell_of(codes)
            cap = min(cap, room(cell, unit))
            weight += float(weights[cell if cell >= 0 else 0])
            cells.append(cell)
            units.append(unit)
        if cap > 0 and (best is None or cap > best[2] or (cap == best[2] and weight < best[3])):
            best = (cells, units, cap, weight)
    if best is None or len(set(best[0])) != len(best[0]):
        return None
    return np.array(best[0]), np.array(best[1]), best[2]


@pytest.mark.parametrize("case", ["3d", "hierarchy"])
def test_box_search_matches_the_box_by_box_definition(case) -> None:
    """The vectorised box search picks the same box, signs and capacity as the plain loops over boxes."""
    if case == "hierarchy":
        df, hier = _hier_counts(9)
    else:
        df, hier = _counts((9, 7, 5), 12, 0.3), None
    dims = [c for c in df.columns if c.startswith("v")]
    tab = _prepare(df, dims, "n", None, None, hier, None, True)
    bx = local.Boxes.of(tab.model)
    a = tab.value
    n = len(a)
    rng = np.random.default_rng(13)
    checked = found = 0
    for trial in range(40):
        movable = rng.random(n) < 0.6
        L = np.where(rng.random(n) < 0.2, 0.0, a)  # some cells cannot move down
        U = np.where(rng.random(n) < 0.5, np.inf, rng.integers(0, 4, n).astype(float))
        weights = rng.integers(1, 4, n).astype(float)  # ties between boxes of the same capacity
        for k in rng.choice(np.flatnonzero(movable), 5, replace=False).tolist():
            for sign in (1, -1):
                want = float(rng.integers(1, 6))
                fast = bx._box(k, sign, want, L, U, movable, weights)
                slow = _box_one_by_one(bx, k, sign, want, L, U, movable, weights)
                checked += 1
                assert (fast is None) == (slow is None), (trial, k, sign)
                if fast is not None:
                    found += 1
                    np.testing.assert_array_equal(fast[0], slow[0])
                    np.testing.assert_array_equal(fast[1], slow[1])
                    assert fast[2] == slow[2]
    assert found > 0.2 * checked


def _find_round_by_round(bx, k: int, sign: int, amt: float, L: np.ndarray, U: np.ndarray, movable: np.ndarray,
                         weights: np.ndarray):
    """``Boxes.find`` with a new box-by-box search every round (what the kept grid must reproduce)."""
    t_left, moved, L_res, U_res = float(amt), {}, L.copy(), U.copy()
    if (U[k] if sign > 0 else L[k]) < t_left:
        return None
    for _ in range(local.BOX_ROUNDS):
        got = _box_one_by_one(bx, k, sign, t_left, L_res, U_res, movable, weights)
        if got is None:
            return None
        cells, unit, cap = got
        x = min(cap, t_left)
        for cell, u in zip(cells.tolist(), unit.tolist(), strict=True):
            moved[cell] = moved.get(cell, 0.0) + sign * x * u
        t_left -= x
        if t_left <= 1e-9 * max(float(amt), 1.0):
            break
        U_res[cells] -= sign * x * unit
        L_res[cells] += sign * x * unit
    else:
        return None
    idx = np.array(sorted(c for c, v in moved.items() if v != 0.0), dtype=np.int64)
    val = np.array([moved[int(c)] for c in idx])
    if not len(idx) or (val > U[idx]).any() or (-val > L[idx]).any():
        return None
    return idx, val


def test_sums_of_boxes_match_a_new_search_every_round() -> None:
    """``find`` keeps the first round's boxes for the later rounds: the same sums of boxes as searching anew."""
    df = _counts((9, 7, 5), 14, 0.3)
    tab = _prepare(df, ["v0", "v1", "v2"], "n", None, None, None, None, True)
    bx = local.Boxes.of(tab.model)
    a = tab.value
    n = len(a)
    rng = np.random.default_rng(15)
    rounds = found = 0
    for _ in range(30):
        movable = rng.random(n) < 0.7
        L = np.minimum(a, rng.integers(0, 3, n).astype(float))  # little room down: several boxes needed
        U = np.where(rng.random(n) < 0.5, np.inf, rng.integers(0, 3, n).astype(float))
        weights = rng.integers(1, 4, n).astype(float)
        for k in rng.choice(np.flatnonzero(movable), 6, replace=False).tolist():
            for sign in (1, -1):
                amt = float(rng.integers(1, 6))
                fast = bx.find(k, sign, amt, L, U, movable, weights)
                slow = _find_round_by_round(bx, k, sign, amt, L, U, movable, weights)
                assert (fast is None) == (slow is None)
                if fast is not None:
                    found += 1
                    rounds += int(np.abs(fast.val[fast.idx == k][0]) > 2)
                    np.testing.assert_array_equal(fast.idx, slow[0])
                    np.testing.assert_array_equal(fast.val, slow[1])
    assert found > 20 and rounds > 0


def test_a_dimension_of_many_leaves_costs_memory_in_proportion() -> None:
    """A box's partners are a leaf's siblings: kept once per parent, made per code only when a
    search needs them (stop 70: made for every code up front, a one-way table of 20,000 villages
    held 20,000² offsets, 12.7 GB, and took 46 s to display; 50,000 ran out of memory)."""
    import tracemalloc

    n = 20_000
    df = pd.DataFrame({"v0": [f"x{k:05d}" for k in range(n)], "n": np.arange(n) % 40 + 1})
    tab = _prepare(df, ["v0"], "n", None, None, None, None, True)
    tracemalloc.start()
    bx = local.Boxes.of(tab.model)
    steps = bx.partner_offsets(0, n // 2)  # (one leaf's partners: every sibling and the total)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20 * 1024**2, peak  # (n² int64 offsets would be 3.2 GB)
    part, sign = bx.partners(0, n // 2)
    assert len(steps) == len(part) == n and (sign[:-1] == -1).all() and sign[-1] == 1 and part[-1] == 0
