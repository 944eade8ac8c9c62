"""Values edited between two tables of sums whose rows stay in their engine (DuckDB, polars).

Why: ``UPDATE people SET income = 0 WHERE person = 7`` between two tables of the income's sums
by sex over 200,000 rows, or a polars ``with_columns(income=...)`` doubling every income but
one: both tables ``pass``, and their difference is that person's income (red team,
2026-12-05). Row universes compare the values each table published row by row
(:mod:`.edits`); an engine universe holds no row, so it compares *checksums*: per atom, the sum
(mod 2⁶⁴) of a 64-bit hash of each row's value, computed in the engine with the count that
cuts the atoms (``InEngineRows.count_values``: one aggregate more in the same scan, one number
per atom back).

The model. When a table of a variable's sums or means is recorded, the checksum of each of its
atoms is kept (:class:`ValueState`: per *anchor* atom, the atoms of that moment; later tables cut
them further, and each current atom remembers its anchor). A later table of the same variable's
sums computes the checksums again, adds them up per anchor, and compares: an anchor whose rows'
values changed, with rows in the new table, means the two tables differ by the changed rows'
values. The engine cannot say which rows changed, so the table is ``review`` and says so
(:func:`changed`); its values are not taken as the new reference, so every later table of the
variable is compared with the values a cleared table published. A table whose values did not
change becomes the new reference.

Checksums are sums of hashes, not XORs: two equal values in one atom would cancel out of a XOR,
and an edit of both would go unseen. Equal checksums of different values need a 64-bit
collision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: the checksum columns of ``InEngineRows.count_values``' result: c0, c1, … (uint64)
CHECKSUM = "c"


@dataclass(frozen=True)
class ValueState:
    """What the latest table of one variable's sums published of it, per anchor atom."""

    expression: str  # how that table computed the variable (engine text), to compute it again
    published: np.ndarray  # per anchor atom, the checksum of its rows' values (uint64)
    anchor: np.ndarray  # per current atom, its anchor (-1: rows that table did not cover)

    def cut(self, parent: np.ndarray) -> ValueState:
        """The same after a table cut the atoms (``parent``: per new atom, its atom before)."""
        return ValueState(self.expression, self.published, self.anchor[parent])


def summed_checksums(frame: pd.DataFrame, j: int, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group (``groups``: per row of an engine count, its group), the sum mod 2⁶⁴ of column
    ``c{j}``'s checksums."""
    values = pd.to_numeric(frame[f"{CHECKSUM}{j}"]).to_numpy().astype(np.uint64)
    out = np.zeros(n_groups, dtype=np.uint64)
    np.add.at(out, groups, values)  # (uint64: wraps around, as the engines' sums do)
    return out


def changed(state: ValueState, frame: pd.DataFrame, j: int, parent: np.ndarray, inside: np.ndarray) -> bool:
    """Whether rows of the new table (``inside``, per row of the count ``frame``) hold values of
    the variable other than the ones its latest table published. ``parent``: per row of the
    count, its atom before this table."""
    anchor = state.anchor[parent]
    covered = anchor >= 0
    if not (covered & inside).any():
        return False
    now = summed_checksums(frame[covered], j, anchor[covered], len(state.published))
    moved = now != state.published
    return bool((moved[anchor[covered]] & inside[covered]).any())


#: Rows of another variable's anchors whose checksums a new variable must equal to be taken for its copy.
MIN_COPY_ROWS = 20


def breaks_a_copy(states: dict[str, ValueState], frame: pd.DataFrame, j: int, zero_j: int, parent: np.ndarray,
                  inside: np.ndarray, n: np.ndarray) -> bool:
    """Whether a variable no table summed before (column ``c{j}`` of the count) is a copy of one
    that was (its checksums, over every row of the base, equal that variable's on anchors holding
    :data:`MIN_COPY_ROWS` rows or more, not all zero: ``c{zero_j}`` holds the checksums of the
    variable times 0) whose values differ on another anchor with rows in the table.

    Why (red team, stop 49): a copy of the income with one person's value set to 0, stored as a
    column of the same table (``CREATE TABLE t AS SELECT *, CASE … END AS k``, a polars column),
    summed by sex beside the income's sums: both ``pass``, their difference his income. The
    values were compared per variable only. Equal checksums of different values need a 64-bit
    collision, so equal anchors are the same values; the engine cannot tell which rows of the
    others differ: the table is ``review``. Anchors where the variable is zero on every row are no
    evidence (two variables of women only, zero for every man, red team stop 49: ``review``)."""
    for state in states.values():
        anchor = state.anchor[parent]
        covered = anchor >= 0
        if not (covered & inside).any():
            continue
        k = len(state.published)
        now = summed_checksums(frame[covered], j, anchor[covered], k)
        zeros = summed_checksums(frame[covered], zero_j, anchor[covered], k)
        rows = np.bincount(anchor[covered], weights=n[covered], minlength=k)
        # (rows outside the table count too: a copy summed over a filter cut no anchor whole, red team)
        equal = (now == state.published) & (now != zeros)
        moved = np.zeros(k, dtype=bool)
        moved[anchor[covered & inside]] = True
        moved &= now != state.published
        if rows[equal].sum() >= MIN_COPY_ROWS and moved.any():
            return True
    return False


def published(expression: str, checksums: np.ndarray, inside: np.ndarray) -> ValueState:
    """The state after a table of the variable's sums is recorded: its atoms are the anchors
    (``checksums`` and ``inside`` per new atom)."""
    anchor = np.where(inside, np.arange(len(inside)), -1).astype(np.int64)
    return ValueState(expression, np.asarray(checksums, dtype=np.uint64), anchor)


def after(states: dict[str, ValueState], parent: np.ndarray, tables: dict[str, tuple[str, np.ndarray]],
          edited: tuple[str, ...], inside: np.ndarray) -> dict[str, ValueState]:
    """The states once a table is recorded (a new dict: the linking memory may be saved from
    another thread): every state follows the atoms' cut (``parent``: per new atom, its atom
    before); the variables the table sums whose values did not change take its values as the
    reference (``tables``: per variable, its expression and per new atom the checksum;
    ``inside``: per new atom, in a group of the table)."""
    out = {var: state.cut(parent) for var, state in states.items()}
    for var, (expression, checksums) in tables.items():
        if var in edited:
            continue
        fresh = published(expression, checksums, inside)
        earlier = out.get(var)
        # atoms outside this table keep the anchors of the tables that showed them before (red
        # team: the sums over district A only took the place of everyone's, and an UPDATE outside A
        # was never compared with the first table)
        out[var] = fresh if earlier is None else _merged(earlier, fresh)
    return out


def _merged(earlier: ValueState, fresh: ValueState) -> ValueState:
    """``fresh``'s anchors where it has some, ``earlier``'s elsewhere; unused checksums dropped.

    An earlier anchor that the new table covered in part keeps, as its checksum, that of its
    rows the new table did not cover: its checksum minus those of its atoms the table took over
    (mod 2⁶⁴, as they are summed). The new table was compared with the whole anchor first
    (:func:`changed`), so they are the values the earlier table published. Kept whole, the
    anchor's rows left could never add up to it: sums by district, the same over ``age > 40``,
    then by district × sex, with no edit, was ``review`` for "values changed" (red team, stop 55)."""
    offset = len(earlier.published)
    taken = (fresh.anchor >= 0) & (earlier.anchor >= 0)
    remaining = np.asarray(earlier.published, dtype=np.uint64).copy()
    np.subtract.at(remaining, earlier.anchor[taken], fresh.published[fresh.anchor[taken]])  # (wraps)
    anchor = np.where(fresh.anchor >= 0, fresh.anchor + offset, earlier.anchor)
    checksums = np.concatenate([remaining, fresh.published])
    used, renumbered = np.unique(anchor[anchor >= 0], return_inverse=True)
    compact = np.full(len(anchor), -1, dtype=np.int64)
    compact[anchor >= 0] = renumbered
    return ValueState(fresh.expression, checksums[used], compact)
