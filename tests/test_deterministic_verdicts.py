"""No verdict depends on time (issue 21): the same input gets the same status, hidden cells and
intervals when every clock the code reads runs 100x faster (a machine 100x slower, or loaded)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from sdc_magic.config import Rules
from sdc_magic.protect import protect
from sdc_magic.protect.api import clear_cache

CLOCKS = ("monotonic", "perf_counter", "process_time", "time", "thread_time")


@contextmanager
def clocks_running(factor: float) -> Iterator[None]:
    """Every clock of the ``time`` module runs ``factor`` times faster from now on."""
    real = {name: getattr(time, name) for name in CLOCKS}
    starts = {name: fn() for name, fn in real.items()}
    patched = {name: (lambda name=name: starts[name] + (real[name]() - starts[name]) * factor) for name in CLOCKS}
    try:
        for name, fn in patched.items():
            setattr(time, name, fn)
        yield
    finally:
        for name, fn in real.items():
            setattr(time, name, fn)


def _counts(shape: tuple[int, ...], seed: int, p: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape)
    idx = np.indices(shape).reshape(len(shape), -1)
    df = pd.DataFrame({f"d{j}": idx[j] for j in range(len(shape))})
    df["n"] = n.ravel()
    return df[df.n > 0].reset_index(drop=True)


def test_the_clock_patch_really_speeds_the_clocks_up() -> None:
    with clocks_running(100.0):
        a = time.process_time()
        sum(range(200_000))
        b = time.process_time()
    real_a = time.process_time()
    sum(range(200_000))
    real_b = time.process_time()
    assert (b - a) > 20 * max(real_b - real_a, 1e-6)


@pytest.mark.parametrize("shape,seed,singletons,method", [
    ((12, 9, 3), 4, True, "auto"),      # the MIP runs (small table)
    ((40, 30), 8, True, "auto"),        # heuristic, clean-up budget
    ((25, 20, 10), 1, True, "auto"),    # the display path's 25x20x10 table
    ((10, 8), 2, False, "optimal"),     # the MIP alone
])
def test_protection_is_the_same_with_clocks_100x_faster(shape, seed, singletons, method) -> None:
    df = _counts(shape, seed, 0.25)
    dims = [f"d{j}" for j in range(len(shape))]
    kwargs = dict(dims=dims, value="n", rules=Rules(threshold=5), singletons=singletons, method=method)
    quiet = protect(df, **kwargs)
    clear_cache()  # the second run must search again, not reuse the first
    with clocks_running(100.0):
        busy = protect(df, **kwargs)
    assert quiet.audit_ok == busy.audit_ok
    assert quiet.method == busy.method
    assert quiet.cells.status.tolist() == busy.cells.status.tolist()
    np.testing.assert_array_equal(quiet.cells.lower.to_numpy(), busy.cells.lower.to_numpy())
    np.testing.assert_array_equal(quiet.cells.upper.to_numpy(), busy.cells.upper.to_numpy())


def test_a_redisplay_reuses_the_protection_and_a_changed_cell_does_not() -> None:
    df = _counts((12, 9), 6, 0.25)
    kwargs = dict(dims=["d0", "d1"], value="n", rules=Rules(threshold=5))
    first = protect(df, **kwargs)
    again = protect(df.copy(), **kwargs)
    assert again.cells.equals(first.cells) and again.seconds == first.seconds  # the cached result
    again.cells.loc[0, "status"] = "tampered"
    assert protect(df, **kwargs).cells.loc[0, "status"] != "tampered", "callers get copies"
    changed = df.copy()
    changed.loc[0, "n"] += 1
    assert protect(changed, **kwargs).seconds != first.seconds  # searched again
    assert protect(df, **kwargs, time_limit=5.0).seconds != first.seconds  # another budget: searched again


def test_a_magnitude_table_gets_the_same_pattern_at_any_scale() -> None:
    """10^-9 … 10^12 times the same turnover table: the same cells hidden (levels.resolution_of)."""
    rng = np.random.default_rng(4)
    rows = []
    for r in range(6):
        for c in range(5):
            units = int(rng.integers(1, 12))
            top = np.sort(np.round(rng.lognormal(6, 1.2, units), 2))[::-1]
            rows.append({"r": f"r{r}", "c": f"c{c}", "v": float(top.sum()), "u": units, "t1": float(top[0]),
                         "t2": float(top[1]) if units > 1 else 0.0})
    base = pd.DataFrame(rows)
    patterns = {}
    for k in (-9, -6, 0, 6, 12):
        df = base.copy()
        for col in ("v", "t1", "t2"):
            df[col] = df[col] * 10.0 ** k
        res = protect(df, dims=["r", "c"], value="v", units="u", top=["t1", "t2"],
                      rules=Rules(threshold=3, dominance=(1, 85.0), p=10.0))
        assert res.audit_ok, (k, res.message)
        patterns[k] = res.cells.status.tolist()
    assert all(p == patterns[0] for p in patterns.values()), {k: sum(s != "safe" for s in p) for k, p in patterns.items()}


def _micro(shape=(25, 20, 10), seed=8, p=0.3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.negative_binomial(2, p, size=shape).ravel()
    idx = np.indices(shape).reshape(len(shape), -1)
    cells = pd.DataFrame({f"v{j}": [f"v{j}{k:03d}" for k in idx[j]] for j in range(len(shape))})
    return cells.loc[cells.index.repeat(n)].reset_index(drop=True)


def _linked_session_verdicts() -> list[tuple[str, int, str]]:
    """The 5,000-cell linked scenario: a 25x20x10 table, then shown again with its margins, then a
    filter of it; each output's status, hidden count and hidden cells, in a fresh session."""
    from sdc_magic.jupyter.session import Session

    clear_cache()
    micro = _micro()
    session = Session()
    session.capture.install()
    try:
        outputs = [micro.groupby(["v0", "v1", "v2"]).size(),
                   pd.crosstab([micro.v0, micro.v1], micro.v2, margins=True),
                   micro[micro.v0 != "v0000"].groupby(["v1", "v2"]).size()]
        verdicts = []
        for table in outputs:
            published = session.publish(table)
            meta = published.metadata["sdc_magic"]
            verdicts.append((meta["status"], meta["hidden"], published.data["text/plain"]))
        return verdicts
    finally:
        session.capture.uninstall()


def test_a_linked_session_gets_the_same_verdicts_with_clocks_100x_faster() -> None:
    quiet = _linked_session_verdicts()
    with clocks_running(100.0):
        busy = _linked_session_verdicts()
    assert [v[:2] for v in quiet] == [v[:2] for v in busy]
    assert [v[2] for v in quiet] == [v[2] for v in busy]  # the same cells shown, the same notes
    assert all(status != "blocked" for status, *_ in quiet), [v[:2] for v in quiet]
