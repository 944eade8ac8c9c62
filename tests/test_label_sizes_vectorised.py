"""``checking/labels.py`` ``data_label_sizes`` counts per label with one factorization: the same sets
as grouping the cells by (label, measure) one group at a time (the way it was written before)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from sdc_magic.checking.labels import data_label_sizes


def _by_groups(dims: dict, measure: np.ndarray, units: np.ndarray, captured: set) -> dict:
    out: dict = {}
    for labels in dims.values():
        frame = pd.DataFrame({"label": pd.Index(labels, dtype=object), "measure": measure, "units": units})
        for (label, _), group in frame.groupby(["label", "measure"], sort=False):
            if isinstance(label, str) and label in captured:
                cells, sizes = out.setdefault(label, (set(), set()))
                cells.update(int(u) for u in group["units"].to_numpy())
                sizes.add(int(group["units"].sum()))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_same_sizes_as_one_group_at_a_time(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    pool = np.array(["A", "B", "C", "1", 1, 2.0, None, np.nan, "x y", "B"], dtype=object)
    dims = {f"k{j}": pool[rng.integers(0, len(pool), n)] for j in range(int(rng.integers(1, 4)))}
    measure = np.array(["count", "sum|v", "mean|v"], dtype=object)[rng.integers(0, 3, n)]
    units = rng.integers(0, 40, n).astype(float)
    captured = {"A", "B", "C", "1", "x y"} - ({"C"} if seed % 2 else set())
    flat = SimpleNamespace(dims=dims, measure=measure)
    entry_flat = SimpleNamespace(dims={"k": np.array(sorted(captured), dtype=object)})
    resolved = SimpleNamespace(flat=flat, match=SimpleNamespace(entry=SimpleNamespace(flat=entry_flat)))
    got = data_label_sizes(resolved, SimpleNamespace(units=units))
    assert got == _by_groups(dims, measure, units, captured)
    assert got or not n
