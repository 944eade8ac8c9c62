"""A universe's first table splits its one atom (linking/atoms.refine's shortcut) into the partition
the general refinement gives: the same rows together, each atom in one group, no empty atom."""

from __future__ import annotations

import numpy as np
import pytest

from sdc_magic.linking.atoms import refine, rows_in_order


@pytest.mark.parametrize("seed", range(40))
def test_the_first_tables_atoms_are_the_general_refinements(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, groups = int(rng.integers(2, 400)), int(rng.integers(1, 15))
    g = rng.integers(-1 if seed % 2 else 0, groups, n)
    codes, parent, group, sizes = refine(np.zeros(n, dtype=np.int32), np.array([n]), g, groups)
    # the general path: the same rows in a universe of two atoms, the second one empty
    codes2, _, group2, sizes2 = refine(np.zeros(n, dtype=np.int32), np.array([n, 0]), g, groups)
    rows_of = {}
    for i, (a, b) in enumerate(zip(codes.tolist(), codes2.tolist(), strict=True)):
        rows_of.setdefault(a, set()).add(b)
        assert group[a] == g[i] and group2[b] == g[i]
    assert all(len(v) == 1 for v in rows_of.values())
    assert len({next(iter(v)) for v in rows_of.values()}) == len(rows_of)  # one to one
    assert (sizes == np.bincount(codes)).all() and (sizes > 0).all() and (parent == 0).all()
    assert sorted(sizes.tolist()) == sorted(sizes2[sizes2 > 0].tolist())


def test_rows_in_order_is_the_identity_only() -> None:
    assert rows_in_order(np.arange(5), 5) and rows_in_order(np.zeros(0, dtype=np.int64), 0)
    assert not rows_in_order(np.arange(5), 6)
    assert not rows_in_order(np.array([0, 2, 1, 3]), 4)
    assert not rows_in_order(np.array([1, 2, 3, 4]), 4)
    assert not rows_in_order(np.array([0, 1, -1, 3]), 4)
