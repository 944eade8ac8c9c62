"""Values edited between two tables of a variable's sums: what each earlier table published.

Why: ``df2 = df.copy(); df2.loc[df2.district == "C", "income"] = 0``, then the sums of income
by sex of ``df`` and of ``df2`` (either order): the same people, the same groups, and the men's
two sums differ by C's one man's income (red team: both ``pass``). Doubling every income but
one, or adding 1e-7 to every income but one, tells that one person's income the same way
(``2·T1 − T2``). Linking sees the same rows in both tables, so the populations alone cannot
tell; the values can.

The model. For every variable whose sums or means a table published, the universe keeps, per
row, the hash of the value as the latest such table published it (:attr:`Published.last`).
Whoever knows an edit (the analyst made it; a recipient may guess) can take apart the sums of
two tables over the rows whose values changed between them and over the rest: the tables
together publish the sum of each part. So a new table's population leaves out the smaller of
the two parts, the rows whose values changed since a table published them or the rows whose
values did not (:func:`rows_left_out`); the earlier tables' populations still hold them, so
differencing sees that part as the difference of two populations, and hides the cells it
decides when it is small, whatever the edit was (0, missing, doubled, a cap, a shift).
Left out this way, a part stays a difference between the populations of every later table
and this one, however the values move again (three tables, two edits: a test).

Why values *published* and not the values linking saw first: a cleaning session (outliers
set to missing, negatives to 0, ages coded) before the first income table edits nothing any
table published; comparing with the first values seen made 12 of a red team's tables
stricter for nothing (2026-12-05, taken back then). Why the smaller part and not always the
changed rows: a recode of the whole column (income in thousands) changes every row and tells
nothing of a few (nothing is left out); doubling every income but one changes all rows but one,
and that one is the part left out.

Rows whose value was missing when published, and rows no table of the variable published,
are never compared: a missing value filled in later adds a value of the analyst's choosing,
not a person's (a value set to missing later *is* compared: it drops that person's value).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .identity import MISSING, fresh_hash


@dataclass
class Published:
    """Per universe row, the hash of the value the latest table of the variable published
    (``MISSING``: none, or a missing value)."""

    last: np.ndarray

    def grown(self, n: int) -> Published:
        """The same for a universe of ``n`` rows (rows appended: nothing published of them)."""
        k = n - len(self.last)
        if k <= 0:
            return self
        return Published(np.concatenate([self.last, np.full(k, MISSING, dtype=np.uint64)]))


@dataclass(frozen=True)
class Values:
    """What a table of one variable's sums or means publishes of it: universe rows and their
    value hashes (``MISSING`` for missing values), recorded when the table is (:func:`record`)."""

    var: Hashable
    rows: np.ndarray
    hashes: np.ndarray


def values_of(frame: pd.DataFrame, var: Hashable, rows: np.ndarray, ids: np.ndarray) -> Values | None:
    """The values of ``var`` that a table of its sums publishes (its rows placed in the
    universe, ``rows``; in a group of the table, ``ids`` ≥ 0); None when there are none."""
    found = (rows >= 0) & (ids >= 0)
    if not found.any():
        return None
    hashes = np.where(pd.isna(frame[var]).to_numpy(dtype=bool), MISSING, fresh_hash(frame, var))
    return Values(var, rows[found], hashes[found])


def rows_left_out(published: dict[Hashable, Published], values: Values) -> np.ndarray | None:
    """A mask over ``values.rows``: the rows to leave out of the table's population, the smaller
    of (rows whose value changed since a table of the variable published it, rows whose value
    did not), among the rows with a published value; None when no row's value changed."""
    pub = published.get(values.var)
    if pub is None:
        return None
    last = pub.last[values.rows]
    known = last != MISSING
    changed = known & (last != values.hashes)
    n_changed = int(changed.sum())
    if n_changed == 0:
        return None
    n_kept = int(known.sum()) - n_changed
    # (ties: the changed rows; a whole column recoded leaves nothing out)
    return changed if n_changed <= n_kept else known & ~changed


def record(published: dict[Hashable, Published], n_rows: int, values: Values) -> None:
    """Remember what a recorded table published of its variable (``n_rows``: the universe's).

    A new array, never changed in place: the linking memory may be saved from another thread
    (:meth:`.linker.Linker.save`) while the next table is recorded."""
    last = _fresh(published.get(values.var), n_rows)
    last[values.rows] = values.hashes
    published[values.var] = Published(last)


def _fresh(pub: Published | None, n_rows: int) -> np.ndarray:
    """A copy of ``pub``'s hashes over ``n_rows`` rows (nothing published yet when None)."""
    if pub is None:
        return np.full(n_rows, MISSING, dtype=np.uint64)
    grown = pub.grown(n_rows)
    return grown.last.copy() if grown is pub else grown.last


def merge(published: dict[Hashable, Published], n_rows: int, theirs: dict[Hashable, Published],
          to_rows: np.ndarray) -> None:
    """Take in another universe's published values (its row i is our row ``to_rows[i]``) where
    ours has none: two universes merged (:func:`.universes.merge_overlapping`)."""
    for var, other in theirs.items():
        last = _fresh(published.get(var), n_rows)
        take = (last[to_rows] == MISSING) & (other.last != MISSING)
        last[to_rows[take]] = other.last[take]
        published[var] = Published(last)
