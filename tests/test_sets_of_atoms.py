"""The units on one side only of two sets of atoms (``linking.atoms.SetsOfAtoms``).

Differencing of distinct counts asks, per candidate cell, how many units have a row on one
side only of the cell and the cells of the other table it touches. Since stop 59 only the sets
of the atoms that differ are looked at, the first of them alone when they already hold the
threshold; these tests hold it to a brute force count on random sets, below the threshold
exactly and at or above it as "at least".
"""

from __future__ import annotations

import numpy as np
import pytest

from sdc_magic.linking.atoms import SetsOfAtoms


def _brute(entry_set: np.ndarray, entry_atom: np.ndarray, units: np.ndarray, one: np.ndarray,
           other: np.ndarray) -> int:
    total = 0
    for s in range(len(units)):
        atoms = entry_atom[entry_set == s]
        if bool(one[atoms].any()) != bool(other[atoms].any()):
            total += int(units[s])
    return total


@pytest.mark.parametrize("seed", range(40))
def test_units_on_one_side_match_a_brute_force_count(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_atoms, n_sets = int(rng.integers(1, 60)), int(rng.integers(1, 300))
    entries = int(rng.integers(n_sets, 4 * n_sets + 1))
    entry_set = np.concatenate([np.arange(n_sets), rng.integers(0, n_sets, entries - n_sets)])
    entry_atom = rng.integers(0, n_atoms, entries)
    units = rng.integers(1, 4, n_sets)
    sets = SetsOfAtoms(entry_set, entry_atom, units, n_atoms)
    sets.FIRST_ENTRIES = int(rng.integers(1, 64))  # (the first look covers some sets, not all)
    for _ in range(10):
        one = rng.random(n_atoms) < rng.random()
        other = rng.random(n_atoms) < rng.random()
        exact = _brute(entry_set, entry_atom, units, one, other)
        enough = int(rng.integers(1, 40))
        found = sets.apart(one, other, enough)
        if exact < enough:
            assert found == exact
        else:
            assert enough <= found <= exact


def test_the_work_is_counted_and_the_same_sides_give_none_apart() -> None:
    sets = SetsOfAtoms(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2]), np.array([5, 1, 2]), 3)
    side = np.array([True, False, True])
    assert sets.apart(side, side, 3) == 0
    assert sets.apart(np.array([True, False, False]), np.array([False, True, False]), 100) == 1
    assert sets.work > 0
