"""Property tests: every protected pattern passes an audit written here, independently.

The independent audit uses one variable per *inner* cell (not our all-cells relation
matrix) and ``scipy.optimize.linprog``: every published cell, margin or not, is an
equality on the inner cells under it; inner cells are >= 0.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from sdc_magic.config import Rules
from sdc_magic.protect import protect

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def leaves_under(label, hierarchy: dict) -> set:
    if label in hierarchy:
        out: set = set()
        for part in hierarchy[label]:
            out |= leaves_under(part, hierarchy)
        return out
    return {label}


def members(inner: pd.DataFrame, cell: pd.Series, dims: list[str], hierarchies: dict) -> np.ndarray:
    ok = np.ones(len(inner), dtype=bool)
    for d in dims:
        lab = cell[d]
        if lab == "Total":
            continue
        ok &= inner[d].isin(leaves_under(lab, hierarchies.get(d, {}))).to_numpy()
    return np.flatnonzero(ok)


def independent_audit(inner: pd.DataFrame, cells: pd.DataFrame, dims: list[str], value: str,
                      hierarchies: dict, fixed: tuple[int, ...] = ()) -> dict[int, tuple[float, float]]:
    """min/max of every hidden result cell; ``fixed`` result rows are known (insiders)."""
    n = len(inner)
    rows, rhs = [], []
    hidden = []
    for i, cell in cells.iterrows():
        idx = members(inner, cell, dims, hierarchies)
        vec = np.zeros(n)
        vec[idx] = 1.0
        if cell["status"] == "safe" or i in fixed:
            rows.append(vec)
            rhs.append(cell["value"])
        else:
            hidden.append((i, vec))
    A = np.array(rows) if rows else None
    b = np.array(rhs) if rows else None
    out = {}
    for i, vec in hidden:
        lo = linprog(vec, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        hi = linprog(-vec, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        assert lo.status == 0
        upper = np.inf if hi.status == 3 else -hi.fun
        out[i] = (lo.fun, upper)
    return out


def check(res, inner: pd.DataFrame, dims: list[str], value: str, hierarchies: dict, rules: Rules,
          frequency: bool, singletons: bool) -> None:
    cells = res.cells
    assert res.audit_ok, res.message
    # 1. every cell failing the threshold (inner or margin) is primary and hidden
    units = cells["value"] if frequency else cells["units"]
    failing = (units > 0) & (units < rules.threshold)
    assert (cells.status[failing] == "primary").all()
    # 2. intervals: independent LP equals ours and covers the protection interval
    got = independent_audit(inner, cells, dims, value, hierarchies)
    m = rules.protection / 100
    for i, (lo, hi) in got.items():
        assert np.isclose(lo, cells.at[i, "lower"], atol=1e-6), (i, lo, cells.at[i, "lower"])
        assert (np.isinf(hi) and np.isinf(cells.at[i, "upper"])) or np.isclose(hi, cells.at[i, "upper"], atol=1e-6)
        v = cells.at[i, "value"]
        if cells.at[i, "status"] == "primary":
            need_up = max(m * v, 1.0)
            if frequency and 0 < v < rules.threshold:
                need_up = max(need_up, rules.threshold - v)
            need_down = min(max(m * v, 1.0), v) if v > 0 else 0.0
            assert hi >= v + need_up - 1e-6, (cells.loc[i].to_dict(), lo, hi)
            assert lo <= v - need_down + 1e-6, (cells.loc[i].to_dict(), lo, hi)
        else:
            # 3. no secondary is exactly recoverable
            assert hi - lo > 1e-9, cells.loc[i].to_dict()
    # 4. insiders: a hidden single-unit cell's contributor knows it
    if singletons:
        ones = [i for i in got if units[i] == 1]
        for s in ones:
            again = independent_audit(inner, cells, dims, value, hierarchies, fixed=(s,))
            for i, (lo, hi) in again.items():
                if cells.at[i, "status"] != "primary":
                    continue
                inside = set(members(inner, cells.loc[i], dims, hierarchies))
                if inside <= set(members(inner, cells.loc[s], dims, hierarchies)):
                    continue  # made of the insider's own data only: nothing to learn
                v = cells.at[i, "value"]
                need_up = max(m * v, 1.0)
                if frequency and 0 < v < rules.threshold:
                    need_up = max(need_up, rules.threshold - v)
                need_down = min(max(m * v, 1.0), v) if v > 0 else 0.0
                assert hi >= v + need_up - 1e-6 and lo <= v - need_down + 1e-6, (s, i)


def table(shape: tuple[int, ...], counts: list[int]) -> tuple[pd.DataFrame, list[str]]:
    dims = [f"d{j}" for j in range(len(shape))]
    combos = list(itertools.product(*[[f"{d}_{k}" for k in range(n)] for d, n in zip(dims, shape, strict=True)]))
    df = pd.DataFrame(combos, columns=dims)
    df["n"] = counts[: len(df)]
    return df, dims


@st.composite
def count_tables(draw, ndim: int):
    shape = tuple(draw(st.integers(2, 4 if ndim == 2 else 3)) for _ in range(ndim))
    size = int(np.prod(shape))
    counts = draw(st.lists(st.integers(0, 15), min_size=size, max_size=size))
    df, dims = table(shape, counts)
    df = df[df.n > 0].reset_index(drop=True)  # absent = known zero
    return df, dims


@SETTINGS
@given(count_tables(2), st.sampled_from([3, 5]), st.booleans())
def test_random_2d_counts(data, threshold, singletons) -> None:
    df, dims = data
    if df.empty:
        return
    rules = Rules(threshold=threshold)
    res = protect(df, dims=dims, value="n", rules=rules, singletons=singletons)
    if not res.audit_ok:
        # only acceptable when nothing can be done: everything hidden, said plainly
        assert (res.cells.status != "safe").all() and "No suppression pattern" in res.message
        return
    check(res, df, dims, "n", {}, rules, True, singletons)


@SETTINGS
@given(count_tables(3), st.booleans())
def test_random_3d_counts(data, singletons) -> None:
    df, dims = data
    if df.empty:
        return
    rules = Rules(threshold=4)
    res = protect(df, dims=dims, value="n", rules=rules, singletons=singletons)
    check(res, df, dims, "n", {}, rules, True, singletons)


@SETTINGS
@given(st.lists(st.integers(0, 12), min_size=15, max_size=15), st.booleans(), st.sampled_from(["optimal", "heuristic"]))
def test_random_hierarchical_counts(counts, singletons, method) -> None:
    districts = ["a1", "a2", "b1", "b2", "b3"]
    hierarchy = {"area": {"A": ["a1", "a2"], "B": ["b1", "b2", "b3"]}}
    rows = [(d, k) for d in districts for k in ("x", "y", "z")]
    df = pd.DataFrame(rows, columns=["area", "kind"])
    df["n"] = counts
    df = df[df.n > 0].reset_index(drop=True)
    if df.empty:
        return
    rules = Rules(threshold=3)
    res = protect(df, dims=["area", "kind"], value="n", hierarchies=hierarchy, rules=rules,
                  singletons=singletons, method=method)
    present = {"A" if d.startswith("a") else "B" for d in df.area}
    assert present | {"Total"} <= set(res.cells.area)
    check(res, df, ["area", "kind"], "n", hierarchy["area"] and {"area": hierarchy["area"]}, rules, True,
          singletons)


@SETTINGS
@given(st.integers(0, 10_000), st.booleans())
def test_random_magnitudes_with_dominance(seed, singletons) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(4):
        for c in range(3):
            k = int(rng.integers(1, 6))
            contrib = np.sort(rng.lognormal(3, 1.2, size=k).round(0) + 1)[::-1]
            rows.append((f"r{r}", f"c{c}", float(contrib.sum()), k, contrib[0],
                         contrib[1] if k > 1 else np.nan))
    df = pd.DataFrame(rows, columns=["r", "c", "sales", "firms", "x1", "x2"])
    rules = Rules(threshold=3, dominance=(1, 85.0))
    res = protect(df, dims=["r", "c"], value="sales", units="firms", top=["x1", "x2"], rules=rules,
                  singletons=singletons)
    cells = res.cells
    # dominance primaries (inner cells) use the tau-Argus level 100·x1/k − T
    dom = df[df.x1 > 0.85 * df.sales]
    for _, row in dom.iterrows():
        i = cells.index[(cells.r == row.r) & (cells.c == row.c)][0]
        assert cells.at[i, "status"] == "primary"
        need = max(100 * row.x1 / 85 - row.sales, 0.1 * row.sales, 1.0)
        assert cells.at[i, "upper"] >= row.sales + need - 1e-6
        assert cells.at[i, "lower"] <= row.sales - min(need, row.sales) + 1e-6
    check(res, df, ["r", "c"], "sales", {}, rules, False, singletons)


def test_determinism_same_input_same_pattern() -> None:
    rng = np.random.default_rng(7)
    df, dims = table((8, 6), list(rng.integers(0, 12, size=48)))
    df = df[df.n > 0]
    a = protect(df, dims=dims, value="n", rules=Rules(threshold=5))
    b = protect(df, dims=dims, value="n", rules=Rules(threshold=5))
    pd.testing.assert_frame_equal(a.cells, b.cells)
    h1 = protect(df, dims=dims, value="n", rules=Rules(threshold=5), method="heuristic")
    h2 = protect(df, dims=dims, value="n", rules=Rules(threshold=5), method="heuristic")
    pd.testing.assert_frame_equal(h1.cells, h2.cells)
    assert a.cost <= h1.cost + 1e-9  # the optimum is never worse than the heuristic
